# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series: its patch files, its git workflow (python -m upstream.series) and its
checks, a pytest suite (python -m pytest upstream; CONTRIBUTING.md lists them), from the root."""

from pathlib import Path

import tomllib

_PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
# The executorch release whose sources the series' hunks match.
BASE_RELEASE: str = _PYPROJECT["tool"]["executorch-device-guard"]["base-release"]
