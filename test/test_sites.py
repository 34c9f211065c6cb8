# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Without the guard, the series' tests and the package's device tests fail as ExecuTorch does
today, so each of them can fail.

They pass against the guard (test_series.py, test_device_sites.py). Here each runs under
unittest with EXECUTORCH_DEVICE_GUARD=0, in a child forked from one interpreter that has
imported ExecuTorch and the tests' modules (upstream/suites.py's run_forked), and must crash
(SIGSEGV) or fail with the installed release's error; those that check what must keep
working pass either way. The series' tests run in a copy of the installed ExecuTorch with
the series' test files applied, on releases whose test files the hunks apply to; CUDA tests
only with a GPU. A test that does not apply to the release skips both ways.
"""

import tempfile
import unittest
from pathlib import Path

import torch
from executorch_device_guard._selfcheck import SIGSEGV

from test import RELEASE, test_device_sites
from upstream import check, series, suites

PASSES, SKIPS = (0, "\nOK"), (0, "OK (skipped=1)")
NULL = (1, "NULL pointer access")
# Test -> (exit status of its pytest without the guard, text in its output).
UNGUARDED: dict[str, tuple[int, str]] = {
    "TestEmit::test_meta_constants_hold_no_data": NULL,
    "TestEmit::test_cuda_constants_raise_instead_of_crashing": (SIGSEGV, ""),
    "TestEmit::test_device_tagged_constant_on_the_host_serializes": PASSES,
    "TestSerialization::test_meta_constant_holds_no_data": NULL,
    "TestSerialization::test_cuda_constant_raises": (SIGSEGV, ""),
    "TestSerialization::test_meta_weight_holds_no_data": NULL,
    "TestSerialization::test_cuda_weight_raises": (SIGSEGV, ""),
    "TestProgramManagers::test_lowering_errors_name_the_device_of_a_gpu_program": (
        1,
        "AssertionError: False != True",
    ),
    "TestNamedDataStore::test_channels_last_view_stores_its_own_values": (
        1,
        "is invalid for input of size",
    ),
    "TestNamedDataStore::test_channels_last_tensor_is_stored_as_before": PASSES,
    "TestBundle::test_bundle_meta_values_hold_no_data": NULL,
    "TestBundle::test_bundle_cuda_values_raise_instead_of_crashing": (SIGSEGV, ""),
    "TestSimulatedDevice::test_emitter_names_each_kind_of_constant": (SIGSEGV, ""),
    "TestSimulatedDevice::test_emitter_serializes_an_empty_device_constant": PASSES,
    "TestSimulatedDevice::test_constant_method_device_value_raises_naming_its_method": (
        SIGSEGV,
        "",
    ),
    "TestSimulatedDevice::test_bundled_device_values_raise_naming_their_test_case": (
        SIGSEGV,
        "",
    ),
    "TestSimulatedDevice::test_named_device_data_keeps_executorch_s_own_error": PASSES,
    "TestSimulatedDevice::test_named_data_of_a_channels_last_view_is_its_own_values": (
        1,
        "is invalid for input of size",
    ),
    "TestSimulatedDevice::test_xnnpack_weight_raises": (SIGSEGV, ""),
    "TestSimulatedDevice::test_vulkan_weight_raises": (SIGSEGV, ""),
    "TestLowering::test_lowering_errors_name_the_device_and_the_way_out": (
        1,
        "AssertionError: Regex didn't match",
    ),
    "TestLowering::test_lowering_errors_of_host_programs_are_word_for_word_as_unguarded": PASSES,
}
if RELEASE < (1, 2):
    # Tests that do not apply to the release skip, guard or not (test_device_sites.py).
    for name in (
        "test_named_device_data_keeps_executorch_s_own_error",
        "test_named_data_of_a_channels_last_view_is_its_own_values",
    ):
        UNGUARDED[f"TestSimulatedDevice::{name}"] = SKIPS


def device_tests(site: Path) -> tuple[Path, dict[str, str]]:
    """The package's device tests, and where the series' test files apply to a copy of the
    installed ExecuTorch in `site`, the series' tests there: 'Class::test' -> unittest's id."""
    include = f"--include={check.TEST_FILE}"
    paths = [p.path for p in check.PATCHES]
    tree, applied = series.patched_copy(suites.executorch_root(), site, paths, include)
    found = {}
    for test in check.TESTS if applied is None else ():
        path, name = test.split("::", 1)
        found[name] = (
            "executorch."
            + path[: -len(".py")].replace("/", ".")
            + "."
            + name.replace("::", ".")
        )
    for case in (test_device_sites.TestSimulatedDevice, test_device_sites.TestLowering):
        for name in unittest.TestLoader().getTestCaseNames(case):
            found[f"{case.__name__}::{name}"] = (
                f"test.test_device_sites.{case.__name__}.{name}"
            )
    return tree, found


class TestUnguardedSites(unittest.TestCase):
    def test_every_device_test_fails_or_crashes_without_the_guard(self) -> None:
        with (
            tempfile.TemporaryDirectory() as site,
            tempfile.TemporaryDirectory() as out,
        ):
            tree, found = device_tests(Path(site))
            series_applies = any(
                test.startswith("executorch.") for test in found.values()
            )
            expected = sorted(
                t
                for t in UNGUARDED
                if series_applies or t.startswith(("TestSimulated", "TestLowering"))
            )
            self.assertEqual(sorted(found), expected)
            tests: list[str] = [
                test
                for test in found
                if torch.cuda.is_available() or "cuda" not in test.lower()
            ]
            runs = [
                suites.Forked(tree.parent, ["unittest", found[t]], str(i))
                for i, t in enumerate(tests)
            ]
            # The tests' modules too, but where a GPU is: importing one can start CUDA, which a
            # forked child cannot start again.
            modules = (
                []
                if torch.cuda.is_available()
                else sorted({found[t].rsplit(".", 2)[0] for t in tests})
            )
            done = suites.run_forked(
                runs, 2, 600, Path(out), (*check.PRELOAD, *modules)
            )
        for test, run in zip(tests, done):
            with self.subTest(test):
                status, text = UNGUARDED[test]
                self.assertEqual(
                    (run.returncode, text in run.log), (status, True), run.log[-2000:]
                )
