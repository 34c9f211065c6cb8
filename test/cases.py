# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the package's test modules share: child-script snippets and a TestCase that runs child
cases side by side."""

import unittest
from pathlib import Path

from executorch_device_guard._selfcheck import Case, run_cases

MODEL = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from simulated_device import simulate_device
import torch
from torch.export import export
from executorch.exir import to_edge_transform_and_lower

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

# bundle(inputs, expected_outputs) -> the serialized bundled program of MODEL's program; after MODEL.
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
"""

# stored(tensor) -> what the named data store serializes; layouts: one weight, two layouts.
NAMED_DATA = MODEL + """
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

XNNPACK = MODEL + """
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
"""

# Prints, as JSON, the error that each raising site of the series gives, with meta tensors, with
# device memory simulated and on a program exported with a fake cuda input; after MODEL.
MESSAGES = MODEL + """
import json
from simulated_device import SimulatedDeviceStorage
from torch._subclasses.fake_tensor import FakeTensorMode
from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder
from executorch.backends.xnnpack.operators.node_visitor import NodeVisitor
from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNGraph
from executorch.exir import EdgeCompileConfig, to_edge
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.utils import DelegateMappingBuilder

messages = {}


def record(name, call):
    try:
        call()
    except Exception as error:
        messages[name] = f"{type(error).__name__}: {error}"
    else:
        messages[name] = "no error"


for kind in ("meta", "device"):
    device = "meta" if kind == "meta" else "cpu"
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().to(device)
    program = export(net, (torch.ones(2, 4, device=device),))
    edge = to_edge_transform_and_lower(program)
    if kind == "device":
        for weights in (edge.exported_program().state_dict, program.state_dict):
            if not isinstance(weights["0.weight"].untyped_storage(), SimulatedDeviceStorage):
                simulate_device(weights["0.weight"])
    record(f"emitter, {kind}", edge.to_executorch)
    (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
    visitor = NodeVisitor(program, {}, NamedDataStore())
    graph = XNNGraph("0", [], [], 0, [], [], [])
    record(f"XNNPACK weight, {kind}", lambda: visitor.get_serialized_buffer_index(weight, graph, {}, False, False, None))
    builder = VkGraphBuilder(program, DelegateMappingBuilder(generated_identifiers=True))
    record(f"Vulkan weight, {kind}", lambda: builder.maybe_add_constant_tensor(weight))


class Attention(torch.nn.Module):
    def forward(self, q):
        return torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False)[0]


for device in ("cpu", "cuda"):
    with FakeTensorMode():
        attention = export(Attention(), (torch.empty(1, 2, 4, 8, device=device),))
    record(f"to_edge, {device}", lambda: to_edge(attention))
    record(f"to_edge_transform_and_lower, {device}", lambda: to_edge_transform_and_lower(attention))
    unchecked = EdgeCompileConfig(_check_ir_validity=False)
    record(f"to_executorch unvalidated, {device}", lambda: to_edge(attention, compile_config=unchecked).to_executorch())
print(json.dumps(messages))
"""


class ChildCaseTest(unittest.TestCase):
    def assert_cases(self, *cases: Case) -> None:
        """Runs the cases side by side; each child must end as its case expects."""
        for case, failure in run_cases(cases):
            self.assertIsNone(failure, case.name)
