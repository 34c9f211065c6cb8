# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series: its patch files, its git workflow (python -m upstream.series) and its
checks, a pytest suite (python -m pytest upstream; CONTRIBUTING.md lists them), from the root."""

BASE_RELEASE = "1.5.1"  # the executorch release whose sources the series' hunks match
