# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the package's tests and the upstream series' checks share: the programs run in a fresh
interpreter (children), the JUnit reader, the models, the simulated device. Imported as
test.support from the repository root, which `python -m` and pytest put on sys.path."""
