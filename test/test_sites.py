# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Without the guard, the package's device tests fail as ExecuTorch does today, so each of
them can fail: test_device_sites.py runs in a pytest with EXECUTORCH_DEVICE_GUARD=0, each
test in a child forked after collection imported ExecuTorch (pytest-forked; with CUDA hidden,
which cannot start again in a fork and which these tests do not use), where it must
crash (SIGSEGV) or fail with the installed release's error; those that check what must keep
working pass either way, and a test that does not apply to the release skips both ways."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from executorch_device_guard import ENV_VAR
from guard import RELEASE
from junit import read
from parts import not_here

HERE = Path(__file__).resolve().parent
CRASH = ("error", "CRASHED with signal 11")
PASSES, SKIPS = ("passed", ""), ("skipped", "")
RUNTIME_UNAVAILABLE = not_here("runtime")
# Test -> (its outcome in pytest's junit without the guard, text in its message).
UNGUARDED = {
    "TestSimulatedDevice::test_emitter_names_each_kind_of_constant": CRASH,
    "TestSimulatedDevice::test_emitter_serializes_an_empty_device_constant": PASSES,
    "TestSimulatedDevice::test_constant_method_device_value_raises_naming_its_method": CRASH,
    "TestSimulatedDevice::test_bundled_device_values_raise_naming_their_test_case": CRASH,
    "TestSimulatedDevice::test_named_device_data_keeps_executorch_s_own_error": PASSES,
    "TestSimulatedDevice::test_named_data_of_a_channels_last_view_is_its_own_values": (
        "failed",
        "is invalid for input of size",
    ),
    "TestSimulatedDevice::test_xnnpack_weight_raises": CRASH,
    "TestSimulatedDevice::test_vulkan_weight_raises": CRASH,
    # The runtime reads simulated device memory as the host memory it is: no crash.
    "TestRuntime::test_runtime_refuses_device_inputs_that_the_method_reads_on_the_host": (
        "failed",
        "RuntimeError not raised",
    ),
    "TestRuntime::test_runtime_decides_by_the_program_it_loaded_whatever_becomes_of_its_file": (
        "failed",
        "RuntimeError not raised",
    ),
    # These install the guard themselves, next to ExecuTorch alone or after the import.
    "TestRuntime::test_runtime_arguments_of_the_wrong_kind_keep_executorch_s_error": PASSES,
    "TestBindings::test_llm_runner_inputs_raise_by_every_name_whatever_the_import_order": PASSES,
    "TestBindings::test_sgd_raises_by_every_name_whatever_the_import_order": PASSES,
    # The bindings read simulated device memory as the host memory it is: no crash.
    "TestBindings::test_forward_backward_refuses_device_inputs_that_the_program_reads_on_the_host": (
        "failed",
        "RuntimeError not raised",
    ),
    "TestBindings::test_forward_backward_of_a_program_it_read_leaves_extra_inputs_to_executorch": PASSES,
    "TestRuntime::test_runtime_inputs_that_the_bindings_refuse_first_keep_their_error": PASSES,
    "TestRuntime::test_runtime_runs_device_inputs_that_the_program_plans_on_the_device": PASSES,
    "TestRuntime::test_runtime_meta_inputs_say_they_hold_no_data": PASSES,
    "TestLowering::test_lowering_errors_name_the_device_and_the_way_out": (
        "failed",
        "Regex didn't match",
    ),
    "TestLowering::test_lowering_errors_of_host_programs_are_word_for_word_as_unguarded": PASSES,
    # ExecuTorch's own kernel for a device key: it runs on the host values.
    "TestCustomOps::test_custom_ops_on_a_device_raise_naming_the_operator_and_the_tensor": (
        "failed",
        "NotImplementedError not raised",
    ),
    # The host kernel on no data: ExecuTorch's null-data check aborts.
    "TestCustomOps::test_out_variants_on_meta_raise_saying_they_hold_no_data": (
        "error",
        "CRASHED with signal 6",
    ),
    "TestCustomOps::test_tile_crop_keeps_its_meta_path_for_a_fake_kernel": PASSES,
    "TestCustomOps::test_every_overload_of_each_operator_site_refuses_each_device": (
        "failed",
        "has no CUDA kernel",
    ),
    "TestCustomOps::test_custom_ops_on_host_meta_and_fake_tensors_are_as_unguarded": PASSES,
    "TestBindings::test_llm_runner_meta_inputs_raise_naming_their_argument": (
        "failed",
        "The tensor has a non-zero number of eleme",
    ),
    # From 1.4.0 the bindings abort on a tensor without data; before, they take it.
    "TestBindings::test_sgd_meta_tensors_raise_naming_them": (
        ("error", "CRASHED with signal 6")
        if RELEASE >= (1, 4)
        else ("failed", "RuntimeError not raised")
    ),
}
# Before 1.5 the bindings take a meta input: the method runs on stale memory, or, in 1.4,
# aborts on its null data.
if RELEASE < (1, 5):
    UNGUARDED["TestRuntime::test_runtime_meta_inputs_say_they_hold_no_data"] = (
        ("error", "CRASHED with signal 6")
        if RELEASE >= (1, 4)
        else ("failed", "RuntimeError not raised")
    )
if RELEASE < (1, 4):  # test_device_sites.py skips it, guard or not
    UNGUARDED[
        "TestRuntime::test_runtime_runs_device_inputs_that_the_program_plans_on_the_device"
    ] = SKIPS
if RUNTIME_UNAVAILABLE is not None:  # test_device_sites.py skips them all, guard or not
    for test in [t for t in UNGUARDED if t.startswith("TestRuntime::")]:
        UNGUARDED[test] = SKIPS
if RELEASE < (1, 2):  # test_device_sites.py skips them, guard or not
    for name in ("named_device_data_keeps", "named_data_of_a_channels_last_view"):
        (test,) = [t for t in UNGUARDED if name in t]
        UNGUARDED[test] = SKIPS
if not_here("custom ops"):  # test_device_sites.py skips them, guard or not
    for test in [t for t in UNGUARDED if t.startswith("TestCustomOps::")]:
        UNGUARDED[test] = SKIPS
# Skipped both ways where the bindings do not run (test_device_sites.py says why).
for extension, tests in (
    ("llm runner", ("llm_runner_meta_inputs", "llm_runner_inputs_raise_by_every_name")),
    ("training", ("sgd_", "forward_backward_refuses", "forward_backward_of_a_program")),
):
    if not_here(extension) is not None:
        for name in tests:
            for test in [t for t in UNGUARDED if name in t]:
                UNGUARDED[test] = SKIPS


class TestUnguardedSites(unittest.TestCase):
    def test_every_device_test_fails_or_crashes_without_the_guard(self) -> None:
        env = {**os.environ, ENV_VAR: "0", "CUDA_VISIBLE_DEVICES": ""}
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp, "unguarded.xml")
            command = [sys.executable, "-m", "pytest", "--forked", "-p", "no:xdist"]
            command += ["-p", "no:cacheprovider", f"--junitxml={junit}"]
            command.append(str(HERE / "test_device_sites.py"))
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            self.assertTrue(junit.exists(), done.stdout[-3000:] + done.stderr[-3000:])
            found = {}
            for test, case in read(junit).items():  # keyed 'module.Class::test'
                path, _, name = test.partition("::")
                found[f"{path.rpartition('.')[2]}::{name}"] = case
        self.assertEqual(sorted(found), sorted(UNGUARDED))
        for test, (outcome, text) in UNGUARDED.items():
            with self.subTest(test):
                case = found[test]
                details = case.message + case.text
                self.assertEqual(case.outcome, outcome, details[-2000:])
                self.assertIn(text, details)
