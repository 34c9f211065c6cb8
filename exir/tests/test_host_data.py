# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""Host reads of tensor bytes: device constants raise, device data is copied, meta says so.

Without a GPU, a tensor's storage is made to report cuda:0 with an unreadable pointer (see
executorch_device_guard.tests.simulated_device), so a host read that is not guarded dies with SIGSEGV as on
a GPU. Each case therefore runs in a child interpreter, and asserts on its exit status and stderr.
"""

import importlib.util
import subprocess
import sys
import unittest

import torch

MODEL = """
import torch
from torch.export import export
from executorch.exir import to_edge_transform_and_lower
from executorch_device_guard.tests.simulated_device import (
    lower_on_device,
    simulate_device,
    SimulatedDeviceStorage,
)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
x = (torch.ones(2, 4),)
"""

# A buffer and a lifted tensor constant, for scripts after MODEL.
MODULES = """
class WithBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.arange(4.0))

    def forward(self, x):
        return x + self.offset


class WithConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.arange(4.0)

    def forward(self, x):
        return x + self.table
"""

DEVICE_ERROR = (
    "InternalError",
    "cuda:0",
    "Move the module and its example inputs to the CPU",
)
NO_DATA = ("InternalError", "is a meta or fake tensor and holds no data")


def run_python(script: str) -> "subprocess.CompletedProcess[str]":
    """Runs `script` in a child interpreter; a crash shows as a negative return code."""
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )


class ChildTestCase(unittest.TestCase):
    def assert_raises_in_child(self, script: str, *expected: str) -> None:
        """The child raises (exit status 1, not a crash) with every expected text in stderr."""
        result = run_python(script)
        self.assertEqual(result.returncode, 1, result.stderr[-3000:])
        for text in expected:
            self.assertIn(text, result.stderr)

    def assert_runs_in_child(self, script: str) -> str:
        """The child runs to its end; returns its stdout."""
        result = run_python(script)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return result.stdout


class TestEmitterDeviceConstants(ChildTestCase):
    WEIGHT = (
        MODEL
        + """
edge = to_edge_transform_and_lower(export(model, x))
simulate_device(edge.exported_program().state_dict["0.weight"])
edge.to_executorch()
"""
    )
    BUFFER = (
        MODEL
        + MODULES
        + """
edge = to_edge_transform_and_lower(export(WithBuffer(), x))
simulate_device(edge.exported_program().state_dict["offset"])
edge.to_executorch()
"""
    )
    LIFTED_CONSTANT = (
        MODEL
        + MODULES
        + """
edge = to_edge_transform_and_lower(export(WithConstant(), x))
simulate_device(edge.exported_program().constants["table"])
edge.to_executorch()
"""
    )
    EXTERNAL_CONSTANT = (
        MODEL
        + """
from executorch.exir import ExecutorchBackendConfig

edge = to_edge_transform_and_lower(export(model, x))
simulate_device(edge.exported_program().state_dict["0.weight"])
edge.to_executorch(ExecutorchBackendConfig(external_constants=True))
"""
    )
    # TensorSpec.from_tensor makes a non-contiguous table contiguous: a new storage, on the device.
    CONSTANT_METHOD = (
        MODEL
        + """
table = torch.arange(6.0).reshape(2, 3).t()
table.contiguous = lambda: simulate_device(torch.arange(6.0).reshape(2, 3).t().clone())
edge = to_edge_transform_and_lower(
    export(model, x), constant_methods={"get_table": table, "n": 3}
)
edge.to_executorch()
"""
    )
    META = (
        MODEL
        + """
model = model.to("meta")
to_edge_transform_and_lower(
    export(model, (torch.ones(2, 4, device="meta"),))
).to_executorch()
"""
    )

    def test_weight_on_device_raises(self) -> None:
        self.assert_raises_in_child(
            self.WEIGHT,
            *DEVICE_ERROR,
            "Constant '0.weight' (shape [3, 4], dtype torch.float32)",
        )

    def test_each_kind_of_constant_is_named(self) -> None:
        cases = {
            self.BUFFER: "Constant 'offset' (shape [4], dtype torch.float32)",
            self.LIFTED_CONSTANT: "Constant 'table'",
            self.EXTERNAL_CONSTANT: "Constant '0.weight' (shape [3, 4], dtype torch.float32)",
            self.CONSTANT_METHOD: "Constant returned by constant method 'get_table'",
        }
        for script, name in cases.items():
            with self.subTest(name=name):
                self.assert_raises_in_child(script, *DEVICE_ERROR, name)

    def test_meta_constant_has_no_data(self) -> None:
        self.assert_raises_in_child(self.META, *NO_DATA, "Constant '0.weight'")

    @unittest.skipUnless(
        importlib.util.find_spec("executorch.exir.passes.propagate_device_config"),
        "this ExecuTorch has no device propagation",
    )
    def test_cpu_storage_tagged_for_a_device_serializes(self) -> None:
        # The delegate runs on cuda:0; PropagateDevicePass tags the top-level constant `offset`
        # CUDA while its bytes stay on the host, so it serializes as before.
        from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
        from executorch.exir.backend.test.device_util import DeviceAwarePartitioner
        from executorch.exir.passes import MemoryPlanningPass
        from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig
        from executorch.exir.schema import DeviceType, Tensor

        class WithBuffer(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.register_buffer("offset", torch.arange(4.0))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x + self.offset

        edge = to_edge(
            torch.export.export(WithBuffer(), (torch.ones(2, 4),)),
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
        program = edge.to_backend(DeviceAwarePartitioner()).to_executorch(
            ExecutorchBackendConfig(
                propagate_device_config=PropagateDeviceConfig(
                    skip_h2d_for_method_inputs=True
                ),
                memory_planning_pass=MemoryPlanningPass(
                    alloc_graph_input=False, alloc_graph_output=False
                ),
            )
        )
        tagged = [
            value.val
            for value in program._emitter_output.program.execution_plan[0].values
            if isinstance(value.val, Tensor)
            and value.val.data_buffer_idx > 0
            and value.val.extra_tensor_info is not None
            and value.val.extra_tensor_info.device_type == DeviceType.CUDA
        ]
        self.assertEqual(len(tagged), 1)
        self.assertIn(torch.arange(4.0).numpy().tobytes(), program.buffer)


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TestEmitterOnCuda(ChildTestCase):
    REPRODUCER = """
import torch
from torch.export import export
from executorch.exir import to_edge_transform_and_lower

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().cuda()
example = torch.ones(2, 4).cuda()
to_edge_transform_and_lower(export(model, (example,))).to_executorch()
"""

    def test_cuda_module_raises_instead_of_crashing(self) -> None:
        self.assert_raises_in_child(
            self.REPRODUCER, *DEVICE_ERROR, "Constant '0.weight'"
        )


BUNDLE = """
from executorch.devtools import BundledProgram
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)

program = to_edge_transform_and_lower(export(model, x)).to_executorch()


def bundle(inputs, expected_outputs):
    case = MethodTestCase(inputs=inputs, expected_outputs=expected_outputs)
    suite = MethodTestSuite("forward", [case])
    return serialize_from_bundled_program_to_flatbuffer(BundledProgram(program, [suite]))


inputs = [torch.randn(2, 4)]
expected_outputs = [model(*inputs)]
"""


class TestBundledProgramDeviceData(ChildTestCase):
    ON_DEVICE = (
        MODEL
        + BUNDLE
        + """
on_device = bundle(
    [simulate_device(t.clone()) for t in inputs],
    [simulate_device(t.clone()) for t in expected_outputs],
)
assert on_device == bundle(inputs, expected_outputs), "bundled bytes differ from the CPU"
"""
    )
    META = (
        MODEL
        + BUNDLE
        + """
bundle([torch.empty(2, 4, device="meta")], expected_outputs)
"""
    )

    def test_device_values_are_bundled_as_on_the_cpu(self) -> None:
        self.assert_runs_in_child(self.ON_DEVICE)

    def test_meta_value_has_no_data(self) -> None:
        self.assert_raises_in_child(self.META, *NO_DATA, "Bundled test tensor")


NAMED_DATA = (
    MODEL
    + """
from executorch.exir._serialize._named_data_store import NamedDataStore


def stored(tensor):
    store = NamedDataStore()
    store.add_named_data("w", tensor)
    output = store.get_named_data_store_output()
    return [bytes(buffer) for buffer in output.buffers], output.pte_data


weight = torch.randn(2, 3, 4, 5)
layouts = {
    "contiguous": weight,
    "channels_last": weight.to(memory_format=torch.channels_last),
}
"""
)


class TestNamedDataDeviceData(ChildTestCase):
    ON_DEVICE = (
        NAMED_DATA
        + """
for name, tensor in layouts.items():
    expected = ([bytes(tensor.untyped_storage())], stored(tensor)[1])
    simulated = simulate_device(tensor.clone(memory_format=torch.preserve_format))
    reads = SimulatedDeviceStorage.element_reads
    assert stored(simulated) == stored(tensor), f"{name}: differs from the CPU"
    assert SimulatedDeviceStorage.element_reads == reads, f"{name}: read byte by byte"
    if not tensor.is_contiguous():
        assert stored(tensor) == expected, f"{name}: not its whole storage"
"""
    )
    META = (
        NAMED_DATA
        + """
stored(torch.empty(2, 3, device="meta"))
"""
    )

    def test_device_data_is_stored_as_on_the_cpu(self) -> None:
        self.assert_runs_in_child(self.ON_DEVICE)

    def test_channels_last_3d_is_read_whole_in_one_piece(self) -> None:
        # TensorLayout refuses 5-D channels-last named data; the bytes are the same for any layout.
        from executorch.exir._serialize._named_data_store import _tensor_to_bytes

        tensor = torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)
        self.assertEqual(_tensor_to_bytes(tensor), bytes(tensor.untyped_storage()))

    def test_meta_data_has_no_data(self) -> None:
        self.assert_raises_in_child(self.META, *NO_DATA, "Named data 'w'")


XNNPACK = (
    MODEL
    + """
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
"""
)


class TestXnnpackDeviceConstants(ChildTestCase):
    ON_DEVICE = (
        XNNPACK
        + """
lower_on_device(XnnpackBackend)
to_edge_transform_and_lower(export(model, x), partitioner=[XnnpackPartitioner()])
"""
    )
    META = (
        XNNPACK
        + """
model, x = model.to("meta"), (torch.ones(2, 4, device="meta"),)
to_edge_transform_and_lower(export(model, x), partitioner=[XnnpackPartitioner()])
"""
    )
    SCALES_ON_DEVICE = (
        XNNPACK
        + """
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    get_symmetric_quantization_config,
    XNNPACKQuantizer,
)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

config = get_symmetric_quantization_config(is_per_channel=True)
prepared = prepare_pt2e(export(model, x).module(), XNNPACKQuantizer().set_global(config))
prepared(*x)
quantized = export(convert_pt2e(prepared), x)
lower_on_device(XnnpackBackend, only="_scale_")  # the int8 weight stays on the host
to_edge_transform_and_lower(quantized, partitioner=[XnnpackPartitioner()])
"""
    )

    def test_weight_on_device_raises(self) -> None:
        self.assert_raises_in_child(
            self.ON_DEVICE, *DEVICE_ERROR, "Constant '0.weight'"
        )

    def test_meta_weight_has_no_data(self) -> None:
        self.assert_raises_in_child(self.META, *NO_DATA, "Constant '0.weight'")

    def test_per_channel_scales_on_device_raise(self) -> None:
        self.assert_raises_in_child(
            self.SCALES_ON_DEVICE, *DEVICE_ERROR, "per-channel scales"
        )


class TestVulkanDeviceConstants(ChildTestCase):
    ON_DEVICE = (
        MODEL
        + """
from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from executorch.backends.vulkan.vulkan_preprocess import VulkanBackend

lower_on_device(VulkanBackend)
to_edge_transform_and_lower(export(model, x), partitioner=[VulkanPartitioner()])
"""
    )

    def test_weight_on_device_raises(self) -> None:
        self.assert_raises_in_child(
            self.ON_DEVICE, *DEVICE_ERROR, "Constant '0.weight'"
        )


if __name__ == "__main__":
    unittest.main()
