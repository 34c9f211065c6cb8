# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import os
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
from executorch_device_guard.tests.simulated_device import simulate_device
from torch.export import export

DEVICE_ERROR = "is on cuda:0, but ExecuTorch serializes constants from host memory"
NO_DATA = "is a meta or fake tensor and holds no data to serialize"


class WithBuffer(torch.nn.Module):
    offset: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.arange(4.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.offset


class WithEmpty(torch.nn.Module):
    empty: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("empty", torch.empty(2, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((x, self.empty), dim=1)


class WithConstant(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.arange(4.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table


def linear() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


def lowered(module: torch.nn.Module) -> EdgeProgramManager:
    edge: EdgeProgramManager = to_edge_transform_and_lower(
        export(module, (torch.ones(2, 4),))
    )
    return edge


@unittest.skipUnless(os.name == "posix", "simulated device memory needs POSIX mmap")
class TestEmitDeviceConstants(unittest.TestCase):
    def test_weight_on_device_raises(self) -> None:
        edge = lowered(linear())
        simulate_device(edge.exported_program().state_dict["0.weight"])
        with self.assertRaises(InternalError) as raised:
            edge.to_executorch()
        message = str(raised.exception)
        self.assertIn(
            f"Constant '0.weight' (shape [3, 4], dtype torch.float32) {DEVICE_ERROR}",
            message,
        )
        self.assertIn("Move the module and its example inputs to the CPU", message)

    def test_each_kind_of_constant_is_named(self) -> None:
        buffer = lowered(WithBuffer())
        simulate_device(buffer.exported_program().state_dict["offset"])
        constant = lowered(WithConstant())
        simulate_device(constant.exported_program().constants["table"])
        external = lowered(linear())
        simulate_device(external.exported_program().state_dict["0.weight"])
        table = simulate_device(torch.arange(6.0).reshape(2, 3))
        method = to_edge_transform_and_lower(
            export(linear(), (torch.ones(2, 4),)),
            constant_methods={"get_table": table, "n": 3},
        )
        cases = (
            (buffer, ExecutorchBackendConfig(), "'offset' (shape [4]"),
            (constant, ExecutorchBackendConfig(), "'table' (shape [4]"),
            (
                external,
                ExecutorchBackendConfig(external_constants=True),
                "'0.weight' (shape [3, 4]",
            ),
            (
                method,
                ExecutorchBackendConfig(),
                "returned by constant method 'get_table' (shape [2, 3]",
            ),
        )
        for edge, config, name in cases:
            with self.subTest(name=name):
                with self.assertRaises(InternalError) as raised:
                    edge.to_executorch(config)
                self.assertIn(f"Constant {name}", str(raised.exception))
                self.assertIn(DEVICE_ERROR, str(raised.exception))

    def test_empty_constant_on_device_serializes(self) -> None:
        edge = lowered(WithEmpty())
        simulate_device(edge.exported_program().state_dict["empty"])
        self.assertGreater(len(edge.to_executorch().buffer), 0)

    def test_meta_constant_has_no_data(self) -> None:
        module = linear().to("meta")
        edge = to_edge_transform_and_lower(
            export(module, (torch.ones(2, 4, device="meta"),))
        )
        with self.assertRaisesRegex(InternalError, f"Constant '0.weight' .* {NO_DATA}"):
            edge.to_executorch()


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TestEmitCudaModule(unittest.TestCase):
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
        self.assertIn("InternalError: Constant '0.weight'", result.stderr)
        self.assertIn(DEVICE_ERROR, result.stderr)


if __name__ == "__main__":
    unittest.main()
