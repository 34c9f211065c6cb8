# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Without the guard, the series' tests and the package's simulated-device tests fail as ExecuTorch
does today, so each of them can fail.

They run in-process against the guard in CI. Here each runs in a child pytest with
EXECUTORCH_DEVICE_GUARD=0 and must crash (SIGSEGV) or fail with today's error; the few that check
what must keep working pass either way. CUDA tests run in children only on a machine with a GPU.
"""

import ast
from pathlib import Path

import torch
from cases import ChildCaseTest
from executorch_device_guard._selfcheck import Case, SIGSEGV

REPO = Path(__file__).resolve().parents[1]
TESTS = (
    "exir/emit/test/test_emit_device_constants.py",
    "exir/_serialize/test/test_named_data_views.py",
    "devtools/bundled_program/test/test_bundle_device_data.py",
    "exir/_serialize/test/test_named_data_device.py",
    "backends/xnnpack/test/test_xnnpack_device_constants.py",
    "backends/vulkan/test/test_vulkan_device_constants.py",
    "test/test_device_sites.py",
)
CUDA = torch.cuda.is_available()
PASSES = (0, "1 passed")
NULL = (1, "NULL pointer access")
# Test -> (exit status of its child pytest without the guard, text in the child's output).
UNGUARDED = {
    "TestEmitMetaConstants::test_meta_weight_has_no_data": NULL,
    "TestEmitMetaConstants::test_each_kind_of_meta_constant_is_named": NULL,
    "TestEmitMetaConstants::test_empty_meta_constant_serializes": PASSES,
    "TestEmitCudaConstants::test_each_kind_of_cuda_constant_is_named": (SIGSEGV, ""),
    "TestEmitCudaConstants::test_empty_cuda_constant_serializes": PASSES,
    "TestEmitCudaConstants::test_cuda_module_raises_instead_of_crashing": (1, "AssertionError: -11 != 1"),
    "TestNamedDataViews::test_channels_last_view_stores_its_own_values": (1, "is invalid for input of size"),
    "TestNamedDataViews::test_channels_last_tensor_is_stored_as_before": PASSES,
    "TestBundleDeviceData::test_meta_values_have_no_data": NULL,
    "TestBundleDeviceData::test_cuda_values_are_bundled_as_on_the_cpu": (SIGSEGV, ""),
    "TestNamedDataDevice::test_meta_data_has_no_data": (1, "to numpy"),
    "TestNamedDataDevice::test_cuda_data_is_stored_as_on_the_cpu": (1, "can't convert cuda:0"),
    "TestXnnpackMetaConstants::test_meta_weight_has_no_data": NULL,
    "TestXnnpackMetaConstants::test_meta_per_channel_scales_have_no_data": NULL,
    "TestXnnpackCudaConstants::test_cuda_weight_raises": (SIGSEGV, ""),
    "TestXnnpackCudaConstants::test_cuda_per_channel_scales_raise": (SIGSEGV, ""),
    "TestVulkanDeviceConstants::test_meta_weight_has_no_data": NULL,
    "TestVulkanDeviceConstants::test_cuda_weight_raises": (SIGSEGV, ""),
    "TestSimulatedDevice::test_emitter_names_each_kind_of_constant": (SIGSEGV, ""),
    "TestSimulatedDevice::test_emitter_serializes_an_empty_device_constant": PASSES,
    "TestSimulatedDevice::test_bundled_device_values_are_the_cpu_bytes": (SIGSEGV, ""),
    "TestSimulatedDevice::test_named_device_data_is_the_cpu_bytes": (1, "can't convert cuda:0"),
    "TestSimulatedDevice::test_xnnpack_weight_and_scales_raise": (SIGSEGV, ""),
    "TestSimulatedDevice::test_vulkan_weight_raises": (SIGSEGV, ""),
}
# A child pytest whose report goes to stderr, where the case's expected text is looked for.
_PYTEST = "import sys; import pytest; sys.stdout = sys.stderr; sys.exit(pytest.main({!r}))"


def device_tests() -> dict:
    """'Class::test' -> the file that defines it, for every test method of TESTS."""
    found = {}
    for path in TESTS:
        for node in ast.parse((REPO / path).read_text()).body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test_"):
                        found[f"{node.name}::{item.name}"] = path
    return found


class TestUnguardedSites(ChildCaseTest):
    def test_every_device_test_fails_or_crashes_without_the_guard(self) -> None:
        found = device_tests()
        self.assertEqual(sorted(found), sorted(UNGUARDED))
        cases = []
        for test, path in found.items():
            if "cuda" in test.lower() and not CUDA:
                continue
            returncode, text = UNGUARDED[test]
            arguments = ["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), f"{REPO / path}::{test}"]
            cases.append(Case(f"{test}, guard off", _PYTEST.format(arguments), False, returncode, (text,) if text else ()))
        self.assert_cases(*cases)
