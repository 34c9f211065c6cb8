# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.


"""The package's tests, importable as `test`."""

from importlib.metadata import version

# The installed executorch release, (major, minor): some tests apply from a release on.
RELEASE = tuple(int(part) for part in version("executorch").split(".")[:2])
