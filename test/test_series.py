# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series (upstream/*.patch) from CI: applied to a copy of the installed ExecuTorch, it
passes its own tests with the runtime guard off; its tests, applied alone, pass against this
package; and the package's exir/_host_read.py is the series' own (upstream/check.py)."""

import subprocess
import sys
import tempfile
import unittest
from importlib.metadata import version
from pathlib import Path

from upstream import check

REPO = Path(__file__).resolve().parents[1]


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "upstream.check", *args], capture_output=True, text=True, cwd=REPO)


class TestSeries(unittest.TestCase):
    def test_package_messages_are_the_series(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            patches = check.read_series()
            self.assertTrue(check.section_apply(check.Report(), patches, Path(tmp), "--include=exir/_host_read.py"))
            upstream = Path(tmp, "exir/_host_read.py").read_text()
        # All but the license header's first line, which names the copyright holder.
        self.assertEqual((REPO / "exir/_host_read.py").read_text().split("\n", 1)[1], upstream.split("\n", 1)[1])

    def test_series_tests_pass_against_the_package(self) -> None:
        result = run_check("--against-package")
        if "do not apply to this release's" in result.stdout:
            self.skipTest(f"the series' test hunks do not apply to executorch {version('executorch')}'s test files")
        self.assertEqual(result.returncode, 0, result.stdout[-5000:] + result.stderr[-3000:])

    @unittest.skipUnless(version("executorch") == check.BASE_RELEASE, f"the series is based on {check.BASE_RELEASE}")
    def test_patched_executorch_passes_without_the_runtime_guard(self) -> None:
        result = run_check()
        self.assertEqual(result.returncode, 0, result.stdout[-5000:] + result.stderr[-3000:])
