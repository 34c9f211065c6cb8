# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import os
import unittest

import torch
from executorch.backends.xnnpack.operators.node_visitor import NodeVisitor
from executorch.backends.xnnpack.operators.quant_params import QuantParams
from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNGraph
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.error import InternalError
from executorch_device_guard.tests.simulated_device import simulate_device
from torch.export import export, ExportedProgram

DEVICE_ERROR = "is on cuda:0, but ExecuTorch serializes constants from host memory"


@unittest.skipUnless(os.name == "posix", "simulated device memory needs POSIX mmap")
class TestXnnpackDeviceConstants(unittest.TestCase):
    def setUp(self) -> None:
        self.model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        self.program = export(self.model, (torch.ones(2, 4),))
        self.graph = XNNGraph(
            version="0",
            xnodes=[],
            xvalues=[],
            num_externs=0,
            input_ids=[],
            output_ids=[],
            constant_data=[],
        )

    def serialize_weight(self, program: ExportedProgram) -> None:
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        NodeVisitor(program, {}, NamedDataStore()).get_serialized_buffer_index(
            weight,
            self.graph,
            vals_to_ids={},
            convert_to_nhwc=False,
            swap_in_out_for_weights=False,
            quant_params=None,
        )

    def test_weight_on_device_raises(self) -> None:
        simulate_device(self.program.state_dict["0.weight"])
        with self.assertRaisesRegex(
            InternalError, f"Constant '0.weight' .* {DEVICE_ERROR}"
        ):
            self.serialize_weight(self.program)

    def test_per_channel_scales_on_device_raise(self) -> None:
        (weight,) = [n for n in self.program.graph.nodes if n.name == "p_0_weight"]
        quant_params = QuantParams(
            per_channel=True,
            q_input=weight,
            scale=simulate_device(torch.full((3,), 0.1)),
            zp=torch.zeros(3),
            axis=0,
            dtype=torch.int8,
            qmax=127,
            qmin=-127,
            is_output=False,
            is_input=False,
        )
        visitor = NodeVisitor(self.program, {}, NamedDataStore())
        with self.assertRaisesRegex(
            InternalError, f"Constant per-channel scales of '0.weight' .* {DEVICE_ERROR}"
        ):
            visitor.get_quant_params(quant_params, self.graph)

    def test_meta_weight_has_no_data(self) -> None:
        meta = export(self.model.to("meta"), (torch.ones(2, 4, device="meta"),))
        with self.assertRaisesRegex(
            InternalError, "Constant '0.weight' .* is a meta or fake tensor"
        ):
            self.serialize_weight(meta)


if __name__ == "__main__":
    unittest.main()
