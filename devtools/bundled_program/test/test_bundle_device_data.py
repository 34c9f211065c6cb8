# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest
from typing import List

import torch
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import ExecutorchProgramManager, to_edge_transform_and_lower
from torch.export import export


class TestBundleDeviceData(unittest.TestCase):
    program: ExecutorchProgramManager
    inputs: List[torch.Tensor]
    expected_outputs: List[torch.Tensor]

    @classmethod
    def setUpClass(cls) -> None:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        cls.program = to_edge_transform_and_lower(
            export(model, (torch.ones(2, 4),))
        ).to_executorch()
        cls.inputs = [torch.randn(2, 4)]
        cls.expected_outputs = [model(*cls.inputs)]

    def bundle(
        self, inputs: List[torch.Tensor], expected_outputs: List[torch.Tensor]
    ) -> bytes:
        case = MethodTestCase(inputs=inputs, expected_outputs=expected_outputs)
        suite = MethodTestSuite("forward", [case])
        return serialize_from_bundled_program_to_flatbuffer(
            BundledProgram(self.program, [suite])
        )

    def test_meta_values_have_no_data(self) -> None:
        meta_input = [torch.empty(2, 4, device="meta")]
        meta_output = [torch.empty(2, 3, device="meta")]
        for inputs, outputs in (
            (meta_input, self.expected_outputs),
            (self.inputs, meta_output),
        ):
            with self.subTest(inputs=inputs[0].device, outputs=outputs[0].device):
                with self.assertRaises(NotImplementedError):
                    self.bundle(inputs, outputs)

    @unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
    def test_cuda_values_are_bundled_as_on_the_cpu(self) -> None:
        on_cuda = self.bundle(
            [t.cuda() for t in self.inputs], [t.cuda() for t in self.expected_outputs]
        )
        self.assertEqual(on_cuda, self.bundle(self.inputs, self.expected_outputs))


if __name__ == "__main__":
    unittest.main()
