# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest

import torch
from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder
from executorch.exir.backend.utils import DelegateMappingBuilder
from executorch.exir.error import InternalError
from torch.export import export


class TestVulkanDeviceConstants(unittest.TestCase):
    def assert_weight_raises(self, device: str, error: str) -> None:
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        program = export(model.to(device), (torch.ones(2, 4, device=device),))
        builder = VkGraphBuilder(
            program, DelegateMappingBuilder(generated_identifiers=True)
        )
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        with self.assertRaisesRegex(
            InternalError,
            rf"Constant '0.weight' \(shape \[3, 4\], dtype torch.float32\) {error}",
        ):
            builder.maybe_add_constant_tensor(weight)

    def test_meta_weight_has_no_data(self) -> None:
        self.assert_weight_raises(
            "meta", "is a meta or fake tensor and holds no data to serialize"
        )

    @unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
    def test_cuda_weight_raises(self) -> None:
        self.assert_weight_raises(
            "cuda", "is on cuda:0, but ExecuTorch serializes constants from host memory"
        )


if __name__ == "__main__":
    unittest.main()
