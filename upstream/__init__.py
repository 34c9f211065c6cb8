# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series' tools, run from the repository root (python -m upstream.series,
upstream.check), and the facts that they, noxfile.py and .ci/ share."""

BASE_RELEASE = "1.5.1"  # the executorch release whose sources the series' hunks match
