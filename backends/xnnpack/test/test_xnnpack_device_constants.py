# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest

import torch
from executorch.backends.xnnpack.operators.node_visitor import NodeVisitor
from executorch.backends.xnnpack.operators.quant_params import QuantParams
from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNGraph
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.error import InternalError
from torch.export import export, ExportedProgram

NO_DATA = "is a meta or fake tensor and holds no data to serialize"
ON_CUDA = "is on cuda:0, but ExecuTorch serializes constants from host memory"


def graph() -> XNNGraph:
    return XNNGraph(
        version="0",
        xnodes=[],
        xvalues=[],
        num_externs=0,
        input_ids=[],
        output_ids=[],
        constant_data=[],
    )


def exported(device: str) -> ExportedProgram:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    return export(model.to(device), (torch.ones(2, 4, device=device),))


class XnnpackDeviceConstantsTest(unittest.TestCase):
    def assert_weight_raises(self, device: str, error: str) -> None:
        program = exported(device)
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        visitor = NodeVisitor(program, {}, NamedDataStore())
        with self.assertRaisesRegex(
            InternalError,
            rf"Constant '0.weight' \(shape \[3, 4\], dtype torch.float32\) {error}",
        ):
            visitor.get_serialized_buffer_index(
                weight,
                graph(),
                vals_to_ids={},
                convert_to_nhwc=False,
                swap_in_out_for_weights=False,
                quant_params=None,
            )

    def assert_scales_raise(self, device: str, error: str) -> None:
        program = exported("cpu")
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        quant_params = QuantParams(
            per_channel=True,
            q_input=weight,
            scale=torch.full((3,), 0.1, device=device),
            zp=torch.zeros(3),
            axis=0,
            dtype=torch.int8,
            qmax=127,
            qmin=-127,
            is_output=False,
            is_input=False,
        )
        visitor = NodeVisitor(program, {}, NamedDataStore())
        with self.assertRaisesRegex(
            InternalError, f"Constant scales of '0.weight' .* {error}"
        ):
            visitor.get_quant_params(quant_params, graph())


class TestXnnpackMetaConstants(XnnpackDeviceConstantsTest):
    def test_meta_weight_has_no_data(self) -> None:
        self.assert_weight_raises("meta", NO_DATA)

    def test_meta_per_channel_scales_have_no_data(self) -> None:
        self.assert_scales_raise("meta", NO_DATA)


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TestXnnpackCudaConstants(XnnpackDeviceConstantsTest):
    def test_cuda_weight_raises(self) -> None:
        self.assert_weight_raises("cuda", ON_CUDA)

    def test_cuda_per_channel_scales_raise(self) -> None:
        self.assert_scales_raise("cuda", ON_CUDA)


if __name__ == "__main__":
    unittest.main()
