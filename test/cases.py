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


class ChildCaseTest(unittest.TestCase):
    def assert_cases(self, *cases: Case) -> None:
        """Runs the cases side by side; each child must end as its case expects."""
        for case, failure in run_cases(cases):
            self.assertIsNone(failure, case.name)
