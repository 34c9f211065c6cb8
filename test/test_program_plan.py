# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which inputs a method reads in host memory, as the guard reads them from its program
(exir/_program_plan.py), for each kind of program that decides it."""

import struct
import unittest

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
    XnnpackPartitioner,
)
from executorch.exir import to_edge_transform_and_lower
from executorch_device_guard._program_plan import host_inputs
from guard import RELEASE
from models import Add, device_inputs_program, host_program
from torch.export import export


class TestProgramPlan(unittest.TestCase):
    def test_a_host_program_reads_its_inputs_on_the_host(self) -> None:
        for planned in (True, False):
            with self.subTest(planned=planned):
                buffer = host_program(planned)
                self.assertEqual(host_inputs(buffer, "forward"), {0, 1})
                self.assertEqual(host_inputs(buffer, "backward"), set())

    @unittest.skipIf(
        RELEASE < (1, 4),
        "before executorch 1.4.0 no program plans a method's inputs on a device",
    )
    def test_inputs_planned_on_the_device_are_not_read_on_the_host(self) -> None:
        self.assertEqual(host_inputs(device_inputs_program(), "forward"), set())

    def test_a_cuda_backend_method_takes_device_inputs_only_before_1_4_0(self) -> None:
        """From 1.4.0 a CUDA method's inputs are planned on the host, as the program says;
        before, the CUDA backend takes device inputs itself."""
        program = export(Add(), (torch.ones(2, 4), torch.ones(2, 4)))
        lowered = to_edge_transform_and_lower(
            program, partitioner=[XnnpackPartitioner()]
        )
        buffer = lowered.to_executorch().buffer
        self.assertEqual(host_inputs(buffer, "forward"), {0, 1})
        # The delegate's id, a flatbuffer string (length, bytes, NUL), renamed in place.
        at = buffer.index(b"XnnpackBackend")
        cuda = struct.pack("<I", 11) + b"CudaBackend\0\0\0"
        renamed = buffer[: at - 4] + cuda + buffer[at + len("XnnpackBackend") :]
        expected = set() if RELEASE < (1, 4) else {0, 1}
        self.assertEqual(host_inputs(renamed, "forward"), expected)
