# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series (upstream/*.patch) from CI: applied to a copy of the installed ExecuTorch, it
passes its own tests with the runtime guard off (upstream/check.py); its tests, applied alone, pass
against this package; and at each site the package raises the series' error, word for word."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from importlib.metadata import version
from pathlib import Path

from cases import MESSAGES
from upstream import check, suites

REPO = Path(__file__).resolve().parents[1]


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "upstream.check", *args], capture_output=True, text=True, cwd=REPO)


class TestSeries(unittest.TestCase):
    @unittest.skipUnless(version("executorch") == check.BASE_RELEASE, f"the series is based on {check.BASE_RELEASE}")
    def test_patched_copies_leave_the_installed_release_alone(self) -> None:
        """copy_package hard-links the installed files: applying the series must replace those it changes."""
        root = suites.executorch_root()
        changed = [file.path for patch in check.read_series() for file in patch.diff if (root / file.path).is_file()]
        self.assertTrue(changed)
        installed = {path: (root / path).read_bytes() for path in changed}
        with tempfile.TemporaryDirectory() as tmp:
            tree = check.copy_package(root, Path(tmp))
            self.assertTrue(check.section_apply(check.Report(), check.read_series(), tree, *check.EXCLUDE_NOT_IN_WHEEL))
            for path, data in installed.items():
                with self.subTest(path):
                    self.assertNotEqual((tree / path).read_bytes(), data)
                    self.assertEqual((root / path).read_bytes(), data)

    @unittest.skipUnless(version("executorch") == check.BASE_RELEASE, f"the series is based on {check.BASE_RELEASE}")
    def test_package_messages_are_the_series(self) -> None:
        """Each raising site gives the same error with the package as with the series' code there."""
        with tempfile.TemporaryDirectory() as tmp:
            tree = check.copy_package(suites.executorch_root(), Path(tmp))
            self.assertTrue(check.section_apply(check.Report(), check.read_series(), tree, *check.EXCLUDE_NOT_IN_WHEEL))
            series, package = (  # side by side
                subprocess.Popen([sys.executable, "-c", MESSAGES], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env)
                for env in (suites.environment(False, Path(tmp)), {**os.environ, "EXECUTORCH_DEVICE_GUARD": "1"}))
            (series_out, series_err), (package_out, package_err) = series.communicate(), package.communicate()
        self.assertEqual(series.returncode, 0, series_err[-3000:])
        self.assertEqual(package.returncode, 0, package_err[-3000:])
        expected, found = json.loads(series_out.splitlines()[-1]), json.loads(package_out.splitlines()[-1])
        for site, message in expected.items():
            with self.subTest(site):
                self.assertEqual(found[site], message)
                named = "holds no data" in message if site.endswith("meta") else "cuda:0" in message
                self.assertTrue(named or site.endswith("cpu"), message)
        self.assertEqual(len(found), 12)

    def test_series_tests_pass_against_the_package(self) -> None:
        result = run_check("--against-package")
        if "do not apply to this release's" in result.stdout:
            self.skipTest(f"the series' test hunks do not apply to executorch {version('executorch')}'s test files")
        self.assertEqual(result.returncode, 0, result.stdout[-5000:] + result.stderr[-3000:])

    @unittest.skipUnless(version("executorch") == check.BASE_RELEASE, f"the series is based on {check.BASE_RELEASE}")
    def test_patched_executorch_passes_without_the_runtime_guard(self) -> None:
        result = run_check()
        self.assertEqual(result.returncode, 0, result.stdout[-5000:] + result.stderr[-3000:])
