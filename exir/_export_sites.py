# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The guard at export: the emitter's, the bundled program's, XNNPACK's and Vulkan's reads of
a program's constants, the named data store's bytes of a view, and the three places where
lowering a program exported on a device fails before the emitter (the ATen verifier of to_edge
and to_edge_transform_and_lower, and ToOutVarPass), whose errors gain the device.

Each wrapper takes ExecuTorch's function first, then the leading parameters it relies on, named
as in ExecuTorch (_wrapping compares them with the function's signature). Nothing is copied to
the host.
"""

import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch._export.verifier import SpecViolationError

from ._host_read import (
    BUNDLED,
    CONSTANT_METHODS,
    MOVE_PROGRAM,
    REAL_WEIGHTS,
    host_read_message,
    refuse_off_host,
)

Original = Callable[..., Any]


def emitter_constant(
    original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any
) -> Any:
    if spec.const:
        device = spec.storage.device
        if device.type != "cpu" and spec.allocated_memory != 0:
            # Imported when raising: this module is imported while executorch.exir initializes.
            from executorch.exir.error import InternalError

            advice = REAL_WEIGHTS if device.type == "meta" else MOVE_PROGRAM
            message = host_read_message(
                f"Constant {self.node.name!r}", spec.shape, spec.dtype, device, advice
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
    """Checks each constant_methods tensor in _emit_prim_getters' order, before any read, up
    to the first value that _emit_prim_getters refuses itself (its own error comes first)."""
    from executorch.exir.error import InternalError
    from executorch.extension import pytree

    supported = (float, bool, int, str, torch.dtype, torch.layout)
    for method, values in prim_getters.items():
        for value in pytree.tree_flatten(values)[0]:
            if isinstance(value, torch.Tensor):
                device = value.untyped_storage().device
                if device.type != "cpu" and value.numel() != 0:
                    raise InternalError(
                        host_read_message(
                            f"Constant {method!r}",
                            value.shape,
                            value.dtype,
                            device,
                            CONSTANT_METHODS,
                        )
                    )
            elif not isinstance(value, supported):
                return original(self, prim_getters, *args, **kwargs)
    return original(self, prim_getters, *args, **kwargs)


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
    """Checks each value that serialize_to_schema reads, in its order and before the first
    read, once per program (it keeps the schema it made)."""
    if getattr(self, "_bundled_program_in_schema", None) is None:
        for kind, position, case, method, tensor in _bundled_tensors(
            self.method_test_suites
        ):
            refuse_off_host(
                tensor,
                RuntimeError,
                BUNDLED,
                "Bundled {} {} of test case {} of method {!r}",
                kind,
                position,
                case,
                method,
            )
    return original(self, *args, **kwargs)


def named_data_bytes(original: Original, tensor: torch.Tensor) -> Any:
    """The tensor's own elements in its dim order, not its whole storage: ExecuTorch stores the
    storage of any non-contiguous tensor, so a channels-last view stores other tensors' data."""
    if not tensor.is_contiguous():
        from executorch.exir.tensor import dim_order_from_stride

        tensor = tensor.permute(dim_order_from_stride(tensor.stride())).contiguous()
        return tensor.view(torch.uint8).numpy().tobytes()  # numpy has no float8
    return original(tensor)


def xnnpack_constant(original: Original, exp_prog: Any, node: Any) -> Any:
    """XNNPACK's lookup of a constant, whose bytes its node visitors read next."""
    tensor = original(exp_prog, node)
    if isinstance(tensor, torch.Tensor):
        refuse_off_host(
            tensor, RuntimeError, MOVE_PROGRAM, "XNNPACK constant {!r}", node.name
        )
    return tensor


def vulkan_constant(original: Original, self: Any, node: Any) -> Any:
    """Vulkan's lookup of a constant, whose bytes its graph builder reads next."""
    tensor = original(self, node)
    refuse_off_host(
        tensor, RuntimeError, MOVE_PROGRAM, "Vulkan constant {!r}", node.name
    )
    return tensor


def aten_verifier(original: Original, self: Any, *args: Any, **kwargs: Any) -> Any:
    """The ATen-dialect check that to_edge runs on each program's graph module: its error about
    an operator that is not core ATen is raised again, chained, ending with device_note."""
    try:
        return original(self, *args, **kwargs)
    except SpecViolationError as error:
        if note := device_note(a for a in args if isinstance(a, torch.fx.GraphModule)):
            raise SpecViolationError(f"{error}{note}") from error
        raise


def edge_manager(
    original: Original, partitioner: Any, aten_programs: Any, *args: Any, **kwargs: Any
) -> Any:
    """to_edge_transform_and_lower's conversion of its programs, whose verifier error gains
    device_note of the programs' graphs."""
    try:
        return original(partitioner, aten_programs, *args, **kwargs)
    except SpecViolationError as error:
        graphs = (program.graph_module for program in aten_programs.values())
        if note := device_note(graphs):
            raise SpecViolationError(f"{error}{note}") from error
        raise


def out_variants(original: Original, self: Any, graph_module: Any) -> Any:
    """ToOutVarPass, whose "Missing out variants" error gains device_note of the graph module
    that lacks them. The pass calls itself for control flow: only the call whose own frame
    raised adds the note, so an error passes the calls around it as it is."""
    try:
        return original(self, graph_module)
    except RuntimeError as error:
        *_, (raised_in, _) = traceback.walk_tb(error.__traceback__)
        own = raised_in.f_locals.get("graph_module") is graph_module
        if own and str(error).startswith("Missing out variants"):
            # The same error object, so it keeps the frame that raised it and has no cause.
            if note := device_note([graph_module]):
                error.args = (f"{error}{note}",)
        raise


def device_note(graph_modules: Iterable[torch.fx.GraphModule]) -> str:
    """The paragraph added where lowering fails on a program that holds a tensor on a device
    other than cpu or meta, naming the first such node; '' for other programs."""
    for graph_module in graph_modules:
        for node in graph_module.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor) and val.device.type not in ("cpu", "meta"):
                return (
                    f"\n\nThe program holds tensors on {val.device} (node {node.name!r}), "
                    "and operators decomposed for that device may have no CPU kernel. If "
                    "it is meant for the CPU, call torch.export.passes.move_to_device_pass("
                    "exported_program, 'cpu') before to_edge or to_edge_transform_and_lower."
                )
    return ""
