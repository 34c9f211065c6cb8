# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream series (upstream/) from CI: upstream/check.py's checks on the installed
release, among them that at each site the package raises the series' error word for word;
patched copies leave that release alone; on a GPU, the series' CUDA test as Buck runs it."""

import subprocess
import sys
import tempfile
import unittest
from importlib.metadata import version
from pathlib import Path

import torch
from executorch_device_guard._selfcheck import SIGSEGV

from test import children
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
            tree, error = series.patched_copy(root, Path(tmp), series.every_patch())
            self.assertIsNone(error)
            for path, data in installed.items():
                with self.subTest(path):
                    self.assertNotEqual((tree / path).read_bytes(), data)
                    self.assertEqual((root / path).read_bytes(), data)

    @ON_BASE
    @unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
    def test_series_cuda_test_under_an_import_path_set_in_its_process(self) -> None:
        """0001's CUDA test with executorch importable only through sys.path set in the
        test's process, no PYTHONPATH, as Buck runs a test in a PAR: it passes with the fix
        (the series' or the package's) and dies of SIGSEGV without it."""
        tests = (f"--include={check.TEST_FILE}",)
        cases = {  # (git apply's options, guard): exit status
            (tests, True): 0,
            (tests, False): SIGSEGV,
            ((), False): 0,
            (("--exclude=exir/emit/_emitter.py",), False): SIGSEGV,
        }
        for (options, guard), expected in cases.items():
            with (
                self.subTest(options, guard=guard),
                tempfile.TemporaryDirectory() as tmp,
            ):
                _, error = series.patched_copy(
                    suites.executorch_root(), Path(tmp), series.every_patch(), *options
                )
                self.assertIsNone(error)
                found = children.run(
                    "emitter_cuda_test", guard, args=(tmp,), own_path=True
                )
                self.assertEqual(
                    found[0], expected, found[1][-3000:] + found[2][-3000:]
                )

    @ON_BASE
    def test_each_patch_alone_passes_its_own_tests(self) -> None:
        """`python -m upstream.check -k alone`: apart from the rest, so that pytest-xdist can
        run the two side by side."""
        self.assert_check_passes("-k", "alone")

    def test_upstream_check_passes(self) -> None:
        """On the series' base release, every other check of `python -m upstream.check` that
        needs no upstream checkout; on another, the series' test files against the package,
        where they apply."""
        on_base = version("executorch") == BASE_RELEASE
        self.assert_check_passes("-k", "not alone" if on_base else "against_package")

    def assert_check_passes(self, *args: str) -> None:
        result = run_check(*args)
        if "do not apply to this release's" in result.stdout:
            self.skipTest(
                f"the series' test hunks do not apply to {version('executorch')}"
            )
        self.assertEqual(
            result.returncode, 0, result.stdout[-5000:] + result.stderr[-3000:]
        )
