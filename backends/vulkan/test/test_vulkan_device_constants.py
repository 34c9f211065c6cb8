# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import os
import unittest

import torch
from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder
from executorch.exir.backend.utils import DelegateMappingBuilder
from executorch.exir.error import InternalError
from executorch_device_guard.tests.simulated_device import simulate_device
from torch.export import export


@unittest.skipUnless(os.name == "posix", "simulated device memory needs POSIX mmap")
class TestVulkanDeviceConstants(unittest.TestCase):
    def test_weight_on_device_raises(self) -> None:
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        program = export(model, (torch.ones(2, 4),))
        simulate_device(program.state_dict["0.weight"])
        builder = VkGraphBuilder(program, DelegateMappingBuilder(generated_identifiers=True))
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        with self.assertRaisesRegex(
            InternalError,
            "Constant '0.weight' .* is on cuda:0, but ExecuTorch serializes "
            "constants from host memory",
        ):
            builder.maybe_add_constant_tensor(weight)


if __name__ == "__main__":
    unittest.main()
