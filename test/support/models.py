# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Small models and helpers that the tests and their child programs share."""

import functools
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


class WithKVCache(torch.nn.Module):
    """One step of an LLM's attention through ExecuTorch's custom ops, once their library is
    loaded: the new key and value written into the caches, attention over them, a rotation."""

    k_cache: torch.Tensor
    v_cache: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, 8, 2, 4))
        self.register_buffer("v_cache", torch.zeros(1, 8, 2, 4))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
        torch.ops.llama.update_cache(k, self.k_cache, 0)
        torch.ops.llama.update_cache(v, self.v_cache, 0)
        attention = torch.ops.llama.custom_sdpa(
            q, self.k_cache, self.v_cache, 0, None, 0.0, True
        )
        return torch.ops.llama.fast_hadamard_transform(attention)


# The LLM custom ops of every release that the issue saw die of SIGSEGV on CUDA tensors, each
# with the name of its first argument.
CRASHING_OPS = {
    "custom_sdpa": "query",
    "update_cache": "value",
    "sdpa_with_kv_cache": "query",
    "fast_hadamard_transform": "mat",
}


def custom_op_arguments(name: str, device: str) -> tuple[Any, ...]:
    """One step's arguments of llama::NAME on `device`: a query, key or value of one position
    [1, 1, 2, 4] (batch, position, head, head size), caches of 8 positions."""

    def new() -> torch.Tensor:
        return torch.rand(1, 1, 2, 4, device=device)

    def cache() -> torch.Tensor:
        return torch.zeros(1, 8, 2, 4, device=device)

    return {
        "custom_sdpa": lambda: (new(), cache(), cache(), 0),
        "update_cache": lambda: (new(), cache(), 0),
        "sdpa_with_kv_cache": lambda: (new(), new(), new(), cache(), cache(), 0, 1),
        "fast_hadamard_transform": lambda: (new(),),
    }[name]()


def llama_step(device: str) -> torch.Tensor:
    """One token through a one-layer llama example Transformer with ExecuTorch's custom KV cache
    and SDPA ops (their library loaded), moved to `device` after the replacement."""
    from executorch.examples.models.llama.llama_transformer import (
        construct_transformer,
    )
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
        replace_kv_cache_with_custom_kv_cache,
    )
    from executorch.examples.models.llama.source_transformation.sdpa import (
        replace_sdpa_with_custom_op,
    )

    torch.manual_seed(0)
    args = ModelArgs(
        dim=16,
        n_layers=1,
        n_heads=2,
        vocab_size=32,
        max_seq_len=8,
        max_context_len=8,
        use_kv_cache=True,
        use_sdpa_with_kv_cache_op=True,
    )
    model = construct_transformer(args).eval()
    model = replace_sdpa_with_custom_op(replace_kv_cache_with_custom_kv_cache(model))
    model = model.to(device)
    tokens = torch.tensor([[1]], device=device)
    output: torch.Tensor = model(
        tokens, {"input_pos": torch.tensor([0], device=device)}
    )
    return output


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


class Add(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def host_program(planned: bool) -> bytes:
    """x + y lowered on the CPU: its inputs planned in host memory, or (`planned` false) not
    planned at all, when the method reads them where the caller's tensors are."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    unplanned = MemoryPlanningPass(alloc_graph_input=False)
    config = ExecutorchBackendConfig(memory_planning_pass=unplanned)
    edge = to_edge_transform_and_lower(
        export(Add(), (torch.ones(2, 4), torch.ones(2, 4)))
    )
    return edge.to_executorch(None if planned else config).buffer


def device_inputs_program() -> bytes:
    """x + y delegated to XNNPACK with a compile spec that makes PropagateDevicePass (1.4.0 on)
    place its inputs on cuda:0, and skip_h2d_for_method_inputs: the program plans its inputs
    on the device, as a GPU program built this way does."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.lowered_backend_module import LoweredBackendModule
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig
    from executorch.exir.passes.propagate_device_pass import (
        TARGET_DEVICE_COMPILE_SPEC_KEY,
    )

    edge = to_edge_transform_and_lower(
        export(Add(), (torch.ones(2, 4), torch.ones(2, 4))),
        partitioner=[XnnpackPartitioner()],
    )
    for module in edge.exported_program().graph_module.modules():
        if isinstance(module, LoweredBackendModule):
            spec = CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, b"cuda:0")
            module._compile_specs.append(spec)
    skip = PropagateDeviceConfig(
        skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True
    )
    unplanned = MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False)
    config = ExecutorchBackendConfig(
        propagate_device_config=skip, memory_planning_pass=unplanned
    )
    return edge.to_executorch(config).buffer


@functools.cache
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


def training_buffer() -> tuple[bytes, tuple[torch.Tensor, torch.Tensor]]:
    """TrainStep's program, its forward exported with its backward pass, and host inputs that
    it takes."""
    from executorch.exir import to_edge
    from torch.export.experimental import _export_forward_backward

    torch.manual_seed(0)
    inputs = (torch.ones(3), torch.tensor([1.0, 0.0, 0.0]))
    program = export(TrainStep(), inputs, strict=True)
    return to_edge(_export_forward_backward(program)).to_executorch().buffer, inputs
