# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The wrappers that _patch puts, one for each row of _patch.SITES, around ExecuTorch's host reads
of tensor bytes when it exports a program, and around the three places where lowering a program
exported on a device fails before the emitter; and WRAPPERS, every wrapper by name, those of
running a program (_runtime_sites), of the LLM extensions (_llm_sites) and of training
(_training_sites) among them.

Each takes the original function first, then the leading parameters it relies on, named as in
ExecuTorch: _patch compares those names with the original's signature before it wraps anything.
Each does what the upstream series (upstream/) does at that site: raise its error before a host
read of device memory (messages built in _host_read; upstream/test_behaviour.py compares them
word for word), store a view's own elements, or add the device to a lowering error. Nothing is
copied to the host. Names are computed only when raising. Imported only once a guarded
ExecuTorch module has been imported, so torch is loaded.
"""

import traceback
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import torch
from torch._export.verifier import SpecViolationError

from ._host_read import (
    BUNDLED,
    CONSTANT_METHODS,
    MOVE_PROGRAM,
    device_note,
    host_read_message,
    what_to_do,
)
from ._llm_sites import llm_audio_input, llm_image_input
from ._runtime_sites import runtime_method, runtime_program
from ._training_sites import (
    sgd_gradients,
    sgd_parameters,
    training_buffer,
    training_inputs,
    training_program,
)

Original = Callable[..., Any]

# The constant method whose values the emitter reads now; None while it reads a graph's.
_constant_method: ContextVar[str | None] = ContextVar("constant_method", default=None)


def emitter_constant(
    original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any
) -> Any:
    if spec.const:
        device = spec.storage.device
        if device.type != "cpu" and spec.allocated_memory != 0:
            # Imported here: this module loads with the LLM runner's sites, which load no exir.
            from executorch.exir.error import InternalError

            method = _constant_method.get()
            if method is not None:
                raise InternalError(
                    host_read_message(
                        f"Constant {method!r}",
                        spec.shape,
                        spec.dtype,
                        device,
                        CONSTANT_METHODS,
                    )
                )
            message = host_read_message(
                f"Constant {self.node.name!r}",
                spec.shape,
                spec.dtype,
                device,
                what_to_do(device, MOVE_PROGRAM),
            )
            raise InternalError(self._emit_node_specific_error(self.node, message))
    return original(self, spec, *args, **kwargs)


def emitter_constant_methods(
    original: Original,
    self: Any,
    prim_getters: dict[str, Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """Emits one method at a time, so that emitter_constant names the method whose value it
    reads, as the series passes it; the plans are the same as in one call."""
    plans = []
    for method, value in prim_getters.items():
        token = _constant_method.set(method)
        try:
            plans += original(self, {method: value}, *args, **kwargs)
        finally:
            _constant_method.reset(token)
    return plans


def _bundled_tensors(suites: Any) -> Iterator[tuple[str, int, int, str, torch.Tensor]]:
    """serialize_to_schema's tensors in its order, each with its kind, position, test case
    and method; up to the first value that it refuses itself."""
    for suite in suites:
        for case_index, case in enumerate(suite.test_cases):
            for position, value in enumerate(case.inputs):
                if type(value) is torch.Tensor:
                    yield "input", position, case_index, suite.method_name, value
                elif type(value) not in (int, bool, float):
                    return
            for position, value in enumerate(case.expected_outputs):
                if type(value) is not torch.Tensor:
                    return
                yield "expected output", position, case_index, suite.method_name, value


def bundled_values(original: Original, self: Any, *args: Any, **kwargs: Any) -> Any:
    """The follow-up's check of each value that serialize_to_schema reads, in its order and
    before any read: it raises where the follow-up would, with the same name."""
    if getattr(self, "_bundled_program_in_schema", None) is None:
        for kind, position, case, method, tensor in _bundled_tensors(
            self.method_test_suites
        ):
            device = tensor.untyped_storage().device
            if device.type != "cpu" and tensor.numel() != 0:
                name = f"Bundled {kind} {position} of test case {case} of method {method!r}"
                message = host_read_message(
                    name,
                    tensor.shape,
                    tensor.dtype,
                    device,
                    what_to_do(device, BUNDLED),
                )
                raise RuntimeError(message)
    return original(self, *args, **kwargs)


def named_data_bytes(original: Original, tensor: torch.Tensor) -> Any:
    """The tensor's own elements in its dim order, not its whole storage (upstream stores the
    storage of any non-contiguous tensor, so a channels-last view stores other tensors' data)."""
    if not tensor.is_contiguous():
        from executorch.exir.tensor import dim_order_from_stride

        tensor = tensor.permute(dim_order_from_stride(tensor.stride())).contiguous()
        return tensor.view(torch.uint8).numpy().tobytes()  # numpy has no float8
    return original(tensor)


def xnnpack_constant(original: Original, exp_prog: Any, node: Any) -> Any:
    tensor = original(exp_prog, node)
    if isinstance(tensor, torch.Tensor):
        device = tensor.untyped_storage().device
        if device.type != "cpu" and tensor.numel() != 0:
            raise RuntimeError(
                host_read_message(
                    f"XNNPACK constant {node.name!r}",
                    tensor.shape,
                    tensor.dtype,
                    device,
                    what_to_do(device, MOVE_PROGRAM),
                )
            )
    return tensor


def vulkan_constant(original: Original, self: Any, node: Any) -> Any:
    tensor = original(self, node)
    device = tensor.untyped_storage().device
    if device.type != "cpu" and tensor.numel() != 0:
        raise RuntimeError(
            host_read_message(
                f"Vulkan constant {node.name!r}",
                tensor.shape,
                tensor.dtype,
                device,
                what_to_do(device, MOVE_PROGRAM),
            )
        )
    return tensor


def aten_verifier(original: Original, self: Any, *args: Any, **kwargs: Any) -> Any:
    """The ATen-dialect check that to_edge runs on each program's graph module, whose error
    the follow-up chains to one that ends with device_note."""
    try:
        return original(self, *args, **kwargs)
    except SpecViolationError as error:
        if note := device_note(a for a in args if isinstance(a, torch.fx.GraphModule)):
            raise SpecViolationError(f"{error}{note}") from error
        raise


def edge_manager(
    original: Original, partitioner: Any, aten_programs: Any, *args: Any, **kwargs: Any
) -> Any:
    """to_edge_transform_and_lower's conversion of its programs, where the follow-up does
    the same with the programs' graphs."""
    try:
        return original(partitioner, aten_programs, *args, **kwargs)
    except SpecViolationError as error:
        graphs = (program.graph_module for program in aten_programs.values())
        if note := device_note(graphs):
            raise SpecViolationError(f"{error}{note}") from error
        raise


def out_variants(original: Original, self: Any, graph_module: Any) -> Any:
    """ToOutVarPass, whose error the follow-up builds with device_note of the graph module that
    lacks out variants. The pass calls itself for control flow: only the call whose own frame
    raised adds the note, so an error passes the calls around it as it is."""
    try:
        return original(self, graph_module)
    except RuntimeError as error:
        *_, (raised_in, _) = traceback.walk_tb(error.__traceback__)
        own = raised_in.f_locals.get("graph_module") is graph_module
        if own and str(error).startswith("Missing out variants"):
            # The series builds its message with the note where it raises: the same error,
            # raised in the same frame, with no cause.
            if note := device_note([graph_module]):
                error.args = (f"{error}{note}",)
        raise


# Each wrapper by its __name__, which _patch.SITES names; test/support/mutant.py replaces one.
WRAPPERS: dict[str, Original] = {
    function.__name__: function
    for function in (
        emitter_constant,
        emitter_constant_methods,
        bundled_values,
        named_data_bytes,
        xnnpack_constant,
        vulkan_constant,
        aten_verifier,
        edge_manager,
        out_variants,
        runtime_program,
        runtime_method,
        llm_image_input,
        llm_audio_input,
        sgd_parameters,
        sgd_gradients,
        training_program,
        training_buffer,
        training_inputs,
    )
}
