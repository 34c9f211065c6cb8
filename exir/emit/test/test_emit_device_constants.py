# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import subprocess
import sys
import unittest

import torch
from executorch.exir import (
    EdgeProgramManager,
    ExecutorchBackendConfig,
    to_edge_transform_and_lower,
)
from executorch.exir.error import InternalError
from torch.export import export

NO_DATA = (
    "is a meta or fake tensor and holds no data to serialize. Load real values first."
)
ON_CUDA = (
    "is on cuda:0, but ExecuTorch serializes constants from host memory. Export on "
    "the CPU, or move the exported program with torch.export.passes."
    "move_to_device_pass(exported_program, 'cpu') and lower it as usual; to run on "
    "the device, lower with a backend that keeps weights on it (CudaPartitioner for "
    "CUDA)."
)


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


def lowered(module: torch.nn.Module, device: str, **kwargs: object) -> EdgeProgramManager:
    example = (torch.ones(2, 4, device=device),)
    edge: EdgeProgramManager = to_edge_transform_and_lower(
        export(module.to(device), example), **kwargs
    )
    return edge


class DeviceConstantsTest(unittest.TestCase):
    def assert_each_kind_is_named(self, device: str, error: str) -> None:
        cases = (
            (lowered(linear(), device), None, "'0.weight' (shape [3, 4]"),
            (lowered(WithBuffer(), device), None, "'offset' (shape [4]"),
            (lowered(WithConstant(device), device), None, "'table' (shape [4]"),
            (
                lowered(linear(), device),
                ExecutorchBackendConfig(external_constants=True),
                "'0.weight' (shape [3, 4]",
            ),
        )
        for edge, config, name in cases:
            with self.subTest(name=name):
                with self.assertRaises(InternalError) as raised:
                    edge.to_executorch(config)
                self.assertIn(f"Constant {name}", str(raised.exception))
                self.assertIn(error, str(raised.exception))


class TestEmitMetaConstants(DeviceConstantsTest):
    def test_meta_weight_has_no_data(self) -> None:
        with self.assertRaises(InternalError) as raised:
            lowered(linear(), "meta").to_executorch()
        self.assertIn(
            f"Constant '0.weight' (shape [3, 4], dtype torch.float32) {NO_DATA}",
            str(raised.exception),
        )

    def test_each_kind_of_meta_constant_is_named(self) -> None:
        self.assert_each_kind_is_named("meta", NO_DATA)

    def test_empty_meta_constant_serializes(self) -> None:
        program = lowered(WithEmpty(), "meta").to_executorch()
        self.assertGreater(len(program.buffer), 0)

    def test_meta_constant_method_value_has_no_data(self) -> None:
        table = torch.empty(2, 3, device="meta")
        edge = lowered(linear(), "cpu", constant_methods={"get_table": table})
        with self.assertRaises(NotImplementedError):
            edge.to_executorch()


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TestEmitCudaConstants(DeviceConstantsTest):
    def test_each_kind_of_cuda_constant_is_named(self) -> None:
        self.assert_each_kind_is_named("cuda", ON_CUDA)

    def test_empty_cuda_constant_serializes(self) -> None:
        program = lowered(WithEmpty(), "cuda").to_executorch()
        self.assertGreater(len(program.buffer), 0)

    def test_cuda_constant_method_value_is_copied_to_the_host(self) -> None:
        model, table = linear(), torch.arange(6.0).reshape(2, 3)
        programs = [
            lowered(model, "cpu", constant_methods={"get_table": value})
            for value in (table.cuda(), table)
        ]
        on_cuda, on_cpu = (edge.to_executorch().buffer for edge in programs)
        self.assertEqual(on_cuda, on_cpu)

    def test_cuda_module_raises_instead_of_crashing(self) -> None:
        # In a child process: a regression dies with SIGSEGV instead of raising.
        reproducer = """
import torch
from executorch.exir import to_edge_transform_and_lower
from torch.export import export

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().cuda()
example = torch.ones(2, 4).cuda()
to_edge_transform_and_lower(export(model, (example,))).to_executorch()
"""
        result = subprocess.run(
            [sys.executable, "-c", reproducer], capture_output=True, text=True
        )
        self.assertEqual(result.returncode, 1, result.stderr[-3000:])
        self.assertIn(
            "InternalError: Constant '0.weight' (shape [3, 4], dtype torch.float32) "
            + ON_CUDA,
            result.stderr,
        )


if __name__ == "__main__":
    unittest.main()
