# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Without the guard, the series' tests and the package's simulated-device tests fail as ExecuTorch
does today, so each of them can fail.

They pass against the guard in CI (test_series.py, test_device_sites.py). Here each runs in a child
pytest with EXECUTORCH_DEVICE_GUARD=0 and must crash (SIGSEGV) or fail with the installed release's
error; the few that check what must keep working pass either way. The series' tests run in a copy
of the installed ExecuTorch with the series' test files applied (on releases whose test files the
hunks apply to). CUDA tests run in children only on a machine with a GPU; tests that do not apply
to the release (conftest.py) do not run.
"""

import ast
import json
import tempfile
import unittest
from pathlib import Path

import torch
from conftest import not_applicable, RELEASE
from executorch_device_guard._selfcheck import run_child, SIGSEGV
from upstream import check, suites

REPO = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
PASSES = (0, "1 passed")
NULL = (1, "NULL pointer access")
UNNAMED = "AssertionError: \"tensors on cuda:0 (node 'q')\" not found in"
# Test -> (exit status of its child pytest without the guard, text in the child's output).
UNGUARDED = {
    "TestEmit::test_meta_constant_holds_no_data": NULL,
    "TestEmit::test_cuda_constant_raises_instead_of_crashing": (1, "AssertionError: -11 != 1"),
    "TestNamedDataStore::test_channels_last_view_stores_its_own_values": (1, "is invalid for input of size"),
    "TestNamedDataStore::test_channels_last_tensor_is_stored_as_before": PASSES,
    "TestNamedDataStore::test_meta_tensor_has_no_data": (1, "to numpy"),
    "TestNamedDataStore::test_cuda_tensor_is_stored_as_on_the_cpu": (1, "can't convert cuda:0"),
    "TestEmit::test_meta_constant_method_value_has_no_data": NULL,
    "TestEmit::test_cuda_constant_method_value_is_copied_to_the_host": (SIGSEGV, ""),
    "TestBundle::test_bundle_meta_values_have_no_data": NULL,
    "TestBundle::test_bundle_cuda_values_as_on_the_cpu": (SIGSEGV, ""),
    "TestSerialization::test_meta_constant_holds_no_data": NULL,
    "TestSerialization::test_cuda_constant_raises": (SIGSEGV, ""),
    "TestSerialization::test_meta_weight_holds_no_data": NULL,
    "TestSerialization::test_cuda_weight_raises": (SIGSEGV, ""),
    "TestProgramManagers::test_lowering_errors_unchanged_for_host_programs": PASSES,
    "TestProgramManagers::test_lowering_errors_name_the_device": (1, UNNAMED),
    "TestProgramManagers::test_lowering_errors_name_the_cuda_device": (1, "tensors on cuda:0 (node 'query')"),
    "TestSimulatedDevice::test_emitter_names_each_kind_of_constant": (SIGSEGV, ""),
    "TestSimulatedDevice::test_emitter_serializes_an_empty_device_constant": PASSES,
    "TestSimulatedDevice::test_constant_method_device_value_is_the_cpu_bytes": (SIGSEGV, ""),
    "TestSimulatedDevice::test_bundled_device_values_are_the_cpu_bytes": (SIGSEGV, ""),
    "TestSimulatedDevice::test_named_device_data_is_the_cpu_bytes": (1, "can't convert cuda:0"),
    "TestSimulatedDevice::test_xnnpack_weight_and_scales_raise": (SIGSEGV, ""),
    "TestSimulatedDevice::test_vulkan_weight_raises": (SIGSEGV, ""),
}
if RELEASE < (1, 2):  # 1.1.0 reads named data element by element, not through numpy
    # and a meta tensor's element read raises NotImplementedError itself, as the test expects
    UNGUARDED["TestNamedDataStore::test_meta_tensor_has_no_data"] = PASSES
    UNGUARDED["TestSimulatedDevice::test_named_device_data_is_the_cpu_bytes"] = (1, "read element by element")
# One interpreter without the guard imports torch, ExecuTorch and pytest's plugins once, then runs each test in a
# forked child pytest, whose output goes to a file of its own; a crash ends that child only. It
# prints each test's exit status. The parent must not poison fork for CUDA: the imports ask
# torch.cuda.is_available(), which counts devices through the CUDA runtime unless
# PYTORCH_NVML_BASED_CUDA_CHECK=1 has it ask NVML.
_FORKED = """
import json, os, sys
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
import pytest, torch
sys.path.insert(0, {site!r})
import executorch.exir
import executorch.devtools.bundled_program.core
import executorch.backends.xnnpack.partition.xnnpack_partitioner
import executorch.backends.vulkan.serialization.vulkan_graph_builder
from importlib.metadata import entry_points
for plugin in entry_points(group="pytest11"):  # pytest's plugins, imported once here, not in every child
    plugin.load()
for index, test in enumerate({tests!r}):
    pid = os.fork()
    if pid == 0:
        with open(os.path.join({out!r}, str(index)), "w") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            status = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", os.path.dirname(test.split("::")[0]), test])
            sys.stdout.flush()
            os._exit(int(status))
    print(json.dumps(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])), flush=True)
"""


def device_tests(site: Path) -> dict:
    """'Class::test' -> its file, for the package's simulated-device tests and, where the series'
    test files apply to a copy of the installed ExecuTorch in `site`, the series' tests there."""
    tree = check.copy_package(suites.executorch_root(), site)
    patches = check.read_series()
    applied = check.section_apply(check.Report(), patches, tree, f"--include={check.TEST_FILE}")
    ids = [test for patch in patches for test in patch.tests] if applied else []
    sources = [(tree / path, name) for path, _, name in (test.partition("::") for test in ids)]
    found = {}
    for file, name in [*sources, (REPO / "test/test_device_sites.py", "")]:
        for node in ast.parse(file.read_text()).body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test_"):
                        test = f"{node.name}::{item.name}"
                        if name in ("", test):
                            found[test] = str(file)
    return found


class TestUnguardedSites(unittest.TestCase):
    def test_every_device_test_fails_or_crashes_without_the_guard(self) -> None:
        with tempfile.TemporaryDirectory() as site, tempfile.TemporaryDirectory() as out:
            found = device_tests(Path(site))
            series_applies = any("TestSimulatedDevice" not in test for test in found)
            self.assertEqual(sorted(found), sorted(t for t in UNGUARDED if series_applies or "Simulated" in t))
            tests = [
                test for test in found
                if (CUDA or "cuda" not in test.lower()) and not_applicable(f"test/test_device_sites.py::{test}") is None
            ]
            script = _FORKED.format(tests=[f"{found[t]}::{t}" for t in tests], out=out, site=site)
            returncode, stdout, stderr = run_child(script, guard=False)
            self.assertEqual(returncode, 0, stderr[-3000:])
            statuses = [json.loads(line) for line in stdout.splitlines()]
            self.assertEqual(len(statuses), len(tests), stderr[-3000:])
            for index, (test, status) in enumerate(zip(tests, statuses)):
                text = (Path(out) / str(index)).read_text()
                with self.subTest(test):
                    self.assertEqual((status, UNGUARDED[test][1] in text), (UNGUARDED[test][0], True), text[-2000:])
