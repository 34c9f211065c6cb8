# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Without the guard, the upstream series' tests fail as ExecuTorch does today.

The series' test modules (SERIES_TESTS, beside the code they test) run in-process against the
guard in CI. Here each of their tests runs in a child pytest with EXECUTORCH_DEVICE_GUARD=0 and
must crash (SIGSEGV) or fail as today's ExecuTorch does, so that those tests can fail.
"""

import ast
from pathlib import Path

import torch
from cases import ChildCaseTest
from executorch_device_guard._selfcheck import Case, SIGSEGV

REPO = Path(__file__).resolve().parents[1]
SERIES_TESTS = (
    "exir/emit/test/test_emit_device_constants.py",
    "devtools/bundled_program/test/test_bundle_device_data.py",
    "exir/_serialize/test/test_named_data_device.py",
    "backends/xnnpack/test/test_xnnpack_device_constants.py",
    "backends/vulkan/test/test_vulkan_device_constants.py",
)
# Test -> (exit status of its child pytest without the guard, text in the child's output).
UNGUARDED = {
    "TestEmitDeviceConstants::test_weight_on_device_raises": (SIGSEGV, ""),
    "TestEmitDeviceConstants::test_each_kind_of_constant_is_named": (SIGSEGV, ""),
    "TestEmitDeviceConstants::test_meta_constant_has_no_data": (1, "NULL pointer access"),
    "TestEmitDeviceConstants::test_empty_constant_on_device_serializes": (0, "1 passed"),
    "TestEmitCudaModule::test_cuda_module_raises_instead_of_crashing": (
        (1, "AssertionError: -11 != 1") if torch.cuda.is_available() else (0, "1 skipped")
    ),
    "TestBundleDeviceData::test_device_values_are_bundled_as_on_the_cpu": (SIGSEGV, ""),
    "TestBundleDeviceData::test_meta_value_has_no_data": (1, "NULL pointer access"),
    "TestNamedDataDevice::test_device_data_is_stored_as_on_the_cpu": (1, "can't convert cuda:0"),
    "TestNamedDataDevice::test_channels_last_is_read_in_one_piece": (1, "AssertionError"),
    "TestNamedDataDevice::test_meta_data_has_no_data": (1, "to numpy"),
    "TestXnnpackDeviceConstants::test_weight_on_device_raises": (SIGSEGV, ""),
    "TestXnnpackDeviceConstants::test_per_channel_scales_on_device_raise": (SIGSEGV, ""),
    "TestXnnpackDeviceConstants::test_meta_weight_has_no_data": (1, "NULL pointer access"),
    "TestVulkanDeviceConstants::test_weight_on_device_raises": (SIGSEGV, ""),
}
# A child pytest whose report goes to stderr, where the case's expected text is looked for.
_PYTEST = "import sys; import pytest; sys.stdout = sys.stderr; sys.exit(pytest.main({!r}))"


def series_tests() -> dict:
    """'Class::test' -> the file that defines it, for every test method of SERIES_TESTS."""
    found = {}
    for path in SERIES_TESTS:
        for node in ast.parse((REPO / path).read_text()).body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test_"):
                        found[f"{node.name}::{item.name}"] = path
    return found


class TestUnguardedSites(ChildCaseTest):
    def test_every_series_test_fails_or_crashes_without_the_guard(self) -> None:
        tests = series_tests()
        self.assertEqual(sorted(tests), sorted(UNGUARDED))
        cases = []
        for test, path in tests.items():
            returncode, text = UNGUARDED[test]
            arguments = ["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), f"{REPO / path}::{test}"]
            script = _PYTEST.format(arguments)
            cases.append(Case(f"{test}, guard off", script, False, returncode, (text,) if text else ()))
        self.assert_cases(*cases)
