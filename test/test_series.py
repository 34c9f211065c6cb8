# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series: the committed patches are what upstream/generate.py makes of this code
(messages and Python hunks: the Buck and workflow hunks need an upstream checkout, which CI lacks),
and applied to a copy of the installed ExecuTorch they pass their own tests and the package's
child cases with the runtime guard off (upstream/check.py).

Both need the release the series is based on, whose sources the patches' contexts come from.
"""

import subprocess
import sys
import unittest
from importlib.metadata import version
from pathlib import Path

from upstream import generate

REPO = Path(__file__).resolve().parents[1]

_ON_BASE = version("executorch") == generate.BASE_RELEASE


@unittest.skipUnless(_ON_BASE, f"the series is based on executorch {generate.BASE_RELEASE}")
class TestSeries(unittest.TestCase):
    def test_committed_series_is_generated_from_this_code(self) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "upstream.generate", "--check"], capture_output=True, text=True, cwd=REPO
        )
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr[-3000:])

    def test_patched_executorch_passes_without_the_runtime_guard(self) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "upstream.check"], capture_output=True, text=True, cwd=REPO
        )
        self.assertEqual(result.returncode, 0, result.stdout[-5000:] + result.stderr[-3000:])
