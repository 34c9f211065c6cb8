# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest

import torch
from executorch.exir import (
    EdgeCompileConfig,
    EdgeProgramManager,
    to_edge,
    to_edge_transform_and_lower,
)
from torch._export.verifier import SpecViolationError
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export import export, ExportedProgram


class EfficientAttention(torch.nn.Module):
    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            q, q, q, None, False
        )[0]


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).unflatten(-1, (3, 2, 16)).transpose(1, 3).unbind(2)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def to_edge_without_validation(program: ExportedProgram) -> EdgeProgramManager:
    config = EdgeCompileConfig(_check_ir_validity=False)
    return to_edge_transform_and_lower(program, compile_config=config)


class DeviceLoweringTest(unittest.TestCase):
    def assert_names_the_device(self, error: Exception) -> None:
        self.assertIn("This program holds tensors on cuda:0", str(error))
        self.assertIn("move_to_device_pass(exported_program, 'cpu')", str(error))
        self.assertIs(type(error.__cause__), type(error))

    def assert_lowering_names_the_device(self, program: ExportedProgram) -> None:
        with self.assertRaises(SpecViolationError) as raised:
            to_edge(program)
        self.assert_names_the_device(raised.exception)
        with self.assertRaises(SpecViolationError) as raised:
            to_edge_transform_and_lower(program)
        self.assert_names_the_device(raised.exception)
        with self.assertRaises(RuntimeError) as raised:
            to_edge_without_validation(program).to_executorch()
        self.assert_names_the_device(raised.exception)


class TestDeviceLowering(DeviceLoweringTest):
    def test_cpu_program_keeps_its_error(self) -> None:
        program = export(EfficientAttention(), (torch.randn(1, 2, 4, 8),))
        for lower in (to_edge, to_edge_transform_and_lower):
            with self.assertRaises(SpecViolationError) as raised:
                lower(program)
            self.assertIn("is not in Core ATen opset", str(raised.exception))
            self.assertNotIn("move_to_device_pass", str(raised.exception))
        with self.assertRaises(RuntimeError) as raised:
            to_edge_without_validation(program).to_executorch()
        self.assertEqual(
            str(raised.exception),
            "Missing out variants: {'aten::_scaled_dot_product_efficient_attention'}",
        )

    def test_fake_cuda_program_names_the_device(self) -> None:
        with FakeTensorMode():
            q = torch.empty(1, 2, 4, 8, device="cuda")
            program = export(EfficientAttention(), (q,))
        self.assert_lowering_names_the_device(program)


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TestDeviceLoweringCuda(DeviceLoweringTest):
    def test_cuda_attention_names_the_device(self) -> None:
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                model = Attention().eval().to("cuda", dtype)
                x = torch.randn(1, 16, 32, device="cuda", dtype=dtype)
                self.assert_lowering_names_the_device(export(model, (x,)))


if __name__ == "__main__":
    unittest.main()
