# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Every guarded site with device memory simulated on the CPU (simulated_device.py).

The upstream series tests device constants with `meta` tensors on the CPU and real CUDA behind a
skip; the package also tests the device branch on machines without a GPU. Run in-process, these
pass only with the guard: test_sites.py runs each in a child with the guard off, where it crashes
(SIGSEGV) or fails as ExecuTorch does today.
"""

import os
import re
import unittest
from typing import List

import torch
from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder
from executorch.backends.xnnpack.operators.node_visitor import NodeVisitor
from executorch.backends.xnnpack.operators.quant_params import QuantParams
from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNGraph
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir._serialize._named_data_store import NamedDataStore, NamedDataStoreOutput
from executorch.exir.backend.utils import DelegateMappingBuilder
from executorch.exir.error import InternalError
from simulated_device import simulate_device
from torch.export import export

ON_CUDA = "is on cuda:0, not in host memory"


class WithBuffer(torch.nn.Module):
    offset: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.arange(4.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.offset


class WithConstant(torch.nn.Module):
    def __init__(self, device: str) -> None:
        super().__init__()
        self.table = torch.arange(4.0, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table


class WithEmpty(torch.nn.Module):
    empty: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("empty", torch.empty(2, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((x, self.empty), dim=1)


def linear() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


def stored(tensor: torch.Tensor) -> NamedDataStoreOutput:
    store = NamedDataStore()
    store.add_named_data("w", tensor)
    return store.get_named_data_store_output()


@unittest.skipUnless(os.name == "posix", "simulated device memory needs POSIX mmap")
class TestSimulatedDevice(unittest.TestCase):
    def test_emitter_names_each_kind_of_constant(self) -> None:
        x = (torch.ones(2, 4),)
        weight, buffer, constant, external = (
            to_edge_transform_and_lower(export(module, x))
            for module in (linear(), WithBuffer(), WithConstant("cpu"), linear())
        )
        simulate_device(weight.exported_program().state_dict["0.weight"])
        simulate_device(buffer.exported_program().state_dict["offset"])
        simulate_device(constant.exported_program().constants["table"])
        simulate_device(external.exported_program().state_dict["0.weight"])
        external_constants = ExecutorchBackendConfig(external_constants=True)
        for edge, config, name in (
            (weight, None, "'p_0_weight' (shape [3, 4]"),
            (buffer, None, "'b_offset' (shape [4]"),
            (constant, None, "'c_table' (shape [4]"),
            (external, external_constants, "'p_0_weight' (shape [3, 4]"),
        ):
            with self.subTest(name=name), self.assertRaisesRegex(InternalError, f"Constant {re.escape(name)}.* {ON_CUDA}"):
                edge.to_executorch(config)

    def test_constant_method_device_value_is_the_cpu_bytes(self) -> None:
        model, table = linear(), torch.arange(6.0).reshape(2, 3)
        on_device, on_host = (
            to_edge_transform_and_lower(export(model, (torch.ones(2, 4),)), constant_methods={"get_table": value})
            .to_executorch()
            .buffer
            for value in (simulate_device(table.clone()), table)
        )
        self.assertEqual(on_device, on_host)

    def test_emitter_serializes_an_empty_device_constant(self) -> None:
        edge = to_edge_transform_and_lower(export(WithEmpty(), (torch.ones(2, 4),)))
        simulate_device(edge.exported_program().state_dict["empty"])
        self.assertGreater(len(edge.to_executorch().buffer), 0)

    def test_bundled_device_values_are_the_cpu_bytes(self) -> None:
        model = linear()
        program = to_edge_transform_and_lower(export(model, (torch.ones(2, 4),))).to_executorch()
        inputs = [torch.randn(2, 4)]
        outputs: List[torch.Tensor] = [model(*inputs)]

        def bundle(inputs: List[torch.Tensor], outputs: List[torch.Tensor]) -> bytes:
            suite = MethodTestSuite("forward", [MethodTestCase(inputs=inputs, expected_outputs=outputs)])
            return serialize_from_bundled_program_to_flatbuffer(BundledProgram(program, [suite]))

        on_device = bundle([simulate_device(t.clone()) for t in inputs], [simulate_device(t.clone()) for t in outputs])
        self.assertEqual(on_device, bundle(inputs, outputs))

    def test_named_device_data_is_the_cpu_bytes(self) -> None:
        channels_last = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
        for tensor in (torch.randn(2, 3, 4, 5), channels_last, channels_last[1:]):
            with self.subTest(stride=tensor.stride()):
                self.assertEqual(stored(simulate_device(tensor.clone())), stored(tensor.clone()))

    def test_xnnpack_weight_and_scales_raise(self) -> None:
        program = export(linear(), (torch.ones(2, 4),))
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        graph = XNNGraph(
            version="0", xnodes=[], xvalues=[], num_externs=0, input_ids=[], output_ids=[], constant_data=[]
        )
        scales = QuantParams(
            per_channel=True, q_input=weight, scale=simulate_device(torch.full((3,), 0.1)), zp=torch.zeros(3),
            axis=0, dtype=torch.int8, qmax=127, qmin=-127, is_output=False, is_input=False,
        )
        visitor = NodeVisitor(program, {}, NamedDataStore())
        with self.assertRaisesRegex(InternalError, f"XNNPACK per-channel scales of '0.weight' .* {ON_CUDA}"):
            visitor.get_quant_params(scales, graph)
        simulate_device(program.state_dict["0.weight"])
        with self.assertRaisesRegex(InternalError, f"XNNPACK constant '0.weight' .* {ON_CUDA}"):
            visitor.get_serialized_buffer_index(
                weight, graph, vals_to_ids={}, convert_to_nhwc=False, swap_in_out_for_weights=False,
                quant_params=None,
            )

    def test_vulkan_weight_raises(self) -> None:
        program = export(linear(), (torch.ones(2, 4),))
        simulate_device(program.state_dict["0.weight"])
        builder = VkGraphBuilder(program, DelegateMappingBuilder(generated_identifiers=True))
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        with self.assertRaisesRegex(InternalError, f"Vulkan constant '0.weight' .* {ON_CUDA}"):
            builder.maybe_add_constant_tensor(weight)


if __name__ == "__main__":
    unittest.main()
