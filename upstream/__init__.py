# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Tools for the upstream patch series, run from the repository root as modules:
python -m upstream.generate, upstream.check, upstream.buck, upstream.lint, upstream.suites,
upstream.compat."""
