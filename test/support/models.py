# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Small models and helpers that the tests and their child programs share."""

import torch
from executorch.devtools import BundledProgram
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._named_data_store import (
    NamedDataStore,
    NamedDataStoreOutput,
)
from torch.export import export


def linear() -> torch.nn.Module:
    """The issue's reproducer."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


class WithBuffer(torch.nn.Module):
    offset: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.arange(4.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.offset


class WithConstant(torch.nn.Module):
    """A lifted tensor constant."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.arange(4.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table


class WithEmpty(torch.nn.Module):
    empty: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("empty", torch.empty(2, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((x, self.empty), dim=1)


class EfficientAttention(torch.nn.Module):
    """CUDA's SDPA kernel called directly: it exports on any device (meta kernels), and lowering
    it fails before the emitter, as an attention model exported on a GPU does."""

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        attention = torch.ops.aten._scaled_dot_product_efficient_attention
        return attention(q, q, q, None, False)[0]


def stored(tensor: torch.Tensor) -> NamedDataStoreOutput:
    store = NamedDataStore()
    store.add_named_data("w", tensor)
    return store.get_named_data_store_output()


def bundle(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> bytes:
    """A bundled program of the reproducer, lowered on the CPU, with these test values."""
    program = to_edge_transform_and_lower(
        export(linear(), (torch.ones(2, 4),))
    ).to_executorch()
    suite = MethodTestSuite(
        "forward", [MethodTestCase(inputs=inputs, expected_outputs=outputs)]
    )
    return serialize_from_bundled_program_to_flatbuffer(
        BundledProgram(program, [suite])
    )


def cuda_values() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Test values computed by the reproducer on cuda:0."""
    inputs = [torch.randn(2, 4).cuda()]
    return inputs, [linear().cuda()(*inputs)]
