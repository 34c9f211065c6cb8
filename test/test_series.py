# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series (upstream/) from CI: upstream/check.py's checks on the installed
release; patched copies leave that release alone; and at each site the package raises the
series' error, word for word."""

import subprocess
import sys
import tempfile
import unittest
from importlib.metadata import version
from pathlib import Path

from test import children
from test.guard import guard_set
from upstream import BASE_RELEASE, check, series, suites

REPO = Path(__file__).resolve().parents[1]
ON_BASE = unittest.skipUnless(
    version("executorch") == BASE_RELEASE, f"the series is based on {BASE_RELEASE}"
)


def run_check(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-m", "upstream.check", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


class TestSeries(unittest.TestCase):
    @ON_BASE
    def test_patched_copies_leave_the_installed_release_alone(self) -> None:
        """copy_package hard-links the installed files: applying the series must replace them."""
        root = suites.executorch_root()
        changed = [
            file.path
            for patch in check.PATCHES
            for file in patch.diff
            if (root / file.path).is_file()
        ]
        self.assertTrue(changed)
        installed = {path: (root / path).read_bytes() for path in changed}
        with tempfile.TemporaryDirectory() as tmp:
            tree = series.copy_package(root, Path(tmp))
            self.assertIsNone(
                series.git_apply(tree, series.every_patch(), *series.wheel_options())
            )
            for path, data in installed.items():
                with self.subTest(path):
                    self.assertNotEqual((tree / path).read_bytes(), data)
                    self.assertEqual((root / path).read_bytes(), data)

    @ON_BASE
    def test_package_messages_are_the_series(self) -> None:
        """Each raising site gives the same error with the package as with the series' code."""
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [sys.executable, "-m", "upstream.series", "copy", tmp],
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            status, stdout, stderr = children.run(
                "messages", guard=False, pythonpath=tmp
            )
        self.assertEqual(status, 0, stderr[-3000:])
        expected = children.result(stdout)
        with guard_set(True):
            found = children.messages()
        self.assertEqual(len(found), 12)
        for site, message in expected.items():
            with self.subTest(site):
                self.assertEqual(found[site], message)
                named = (
                    "holds no data" in message
                    if site.endswith("meta")
                    else "cuda:0" in message
                )
                self.assertTrue(named or site.endswith("cpu"), message)

    def test_upstream_check_passes(self) -> None:
        """On the series' base release, every check of `python -m upstream.check` that needs no
        upstream checkout (the series' tests against the package among them); on another
        release, the series' test files alone, against the package."""
        on_base = version("executorch") == BASE_RELEASE
        result = run_check() if on_base else run_check("--against-package")
        if "do not apply to this release's" in result.stdout:
            self.skipTest(
                f"the series' test hunks do not apply to executorch {version('executorch')}'s"
            )
        self.assertEqual(
            result.returncode, 0, result.stdout[-5000:] + result.stderr[-3000:]
        )
