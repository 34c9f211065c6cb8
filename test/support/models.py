# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Small models and helpers that the tests and their child programs share."""

from typing import Any

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


def llm_inputs() -> dict[str, tuple[str, torch.Tensor]]:
    """Each input function of the LLM runner, with its tensor argument's name and a host
    tensor that it takes."""
    return {
        "make_image_input": ("image_tensor", torch.ones(3, 4, 4, dtype=torch.uint8)),
        "make_audio_input": ("audio_tensor", torch.ones(1, 4, 4)),
        "make_raw_audio_input": (
            "audio_tensor",
            torch.ones(1, 2, 4, dtype=torch.uint8),
        ),
    }


class TrainStep(torch.nn.Module):
    """Upstream's training test model: a loss, exported with its backward pass."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss(self.linear(x).softmax(dim=0), y)


def training_program() -> tuple[Any, tuple[torch.Tensor, torch.Tensor]]:
    """A TrainingModule of TrainStep, and host inputs that it takes."""
    from executorch.exir import to_edge
    from executorch.extension.training import (
        _load_for_executorch_for_training_from_buffer,
    )
    from torch.export.experimental import _export_forward_backward

    torch.manual_seed(0)
    inputs = (torch.ones(3), torch.tensor([1.0, 0.0, 0.0]))
    program = export(TrainStep(), inputs, strict=True)
    buffer = to_edge(_export_forward_backward(program)).to_executorch().buffer
    return _load_for_executorch_for_training_from_buffer(buffer), inputs


def bindings_problem(extension: str) -> str | None:
    """Why the compiled bindings of `extension` ("llm runner" or "training") cannot run here,
    or None: the LLM runner's came in executorch 1.1.0, and a release's bindings built for
    another torch misread host tensors (1.5.1's with torch 2.11)."""
    from guard import RELEASE

    try:
        if extension == "llm runner":
            if RELEASE < (1, 1):
                return "the LLM runner's bindings came in executorch 1.1.0"
            from executorch.extension.llm.runner import make_image_input

            make_image_input(llm_inputs()["make_image_input"][1])
        else:
            from executorch.extension.training import get_sgd_optimizer

            parameter = torch.ones(2)
            get_sgd_optimizer({"w": parameter}).step({"w": torch.ones(2)})
    except Exception as error:  # whatever these bindings raise on a host tensor
        return (
            f"executorch's {extension} bindings cannot run here (torch "
            f"{torch.__version__}): {type(error).__name__}: {error}"
        )
    return None
