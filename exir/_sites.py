# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The wrappers that _patch puts, one for each row of _patch.SITES, around ExecuTorch's host reads
of tensor bytes, and around the three places where lowering a program exported on a device fails
before the emitter.

Each takes the original function first, then the leading parameters it relies on, named as in
ExecuTorch: _patch compares those names with the original's signature before it wraps anything.
Each applies the rule that the upstream series (upstream/) puts at that site: a copy to the host,
a view's own elements in its dim order, or the error that the series' code raises there (messages
built in _host_read; test_series.py compares them word for word). XNNPACK's per-channel
scales, which the series leaves to their weight's check, are guarded here too. Names are computed
only when raising. Imported only once a guarded ExecuTorch module has been imported, so torch is
loaded.
"""

import copy
from collections.abc import Callable
from typing import Any

import torch
from executorch.exir.error import InternalError
from torch._export.verifier import SpecViolationError
from torch.utils._pytree import tree_map_only

from ._host_read import host_read_message, raise_with_device_hint

Original = Callable[..., Any]


def emitter_constant(
    original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any
) -> Any:
    if spec.const:
        storage = spec.storage
        if storage.device.type != "cpu" and spec.allocated_memory != 0:
            message = host_read_message(
                f"Constant {self.node.name!r}", spec.shape, spec.dtype, storage.device
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
    """The values of constant methods are the user's plain data, copied to the host as the series
    does with `val.cpu()` (a CPU tensor's .cpu() is the tensor itself)."""
    on_host = tree_map_only(torch.Tensor, lambda tensor: tensor.cpu(), prim_getters)
    return original(self, on_host, *args, **kwargs)


def bundled_tensor(
    original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any
) -> Any:
    """The series bundles `value.cpu()`; from here only the spec is at hand: its storage is copied
    to the host in one piece (a meta storage raises torch's own "no data" error)."""
    if spec.allocated_memory != 0 and spec.storage.device.type != "cpu":
        spec = copy.copy(spec)
        spec.storage = spec.storage.cpu()
    return original(self, spec, *args, **kwargs)


def named_data(
    original: Original, self: Any, key: str, data: Any, *args: Any, **kwargs: Any
) -> Any:
    if isinstance(data, torch.Tensor):
        data = data.cpu()
    return original(self, key, data, *args, **kwargs)


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
        if device.type != "cpu":
            from executorch.backends.xnnpack.utils.utils import get_tensor_name

            name = get_tensor_name(exp_prog, node)
            message = host_read_message(
                f"XNNPACK constant {name!r}", tensor.shape, tensor.dtype, device
            )
            raise InternalError(message)
    return tensor


def xnnpack_quant_scales(
    original: Original, self: Any, quant_params: Any, *args: Any, **kwargs: Any
) -> Any:
    """Per-channel scales, a second ctypes read. The series leaves them to the check of their
    weight, which define_tensor serializes first; here they are guarded in their own right."""
    if quant_params.per_channel:
        scale = quant_params.scale
        device = scale.untyped_storage().device
        if device.type != "cpu":
            from executorch.backends.xnnpack.utils.utils import get_tensor_name

            name = get_tensor_name(self.exported_program, quant_params.q_input)
            message = host_read_message(
                f"XNNPACK per-channel scales of {name!r}",
                scale.shape,
                scale.dtype,
                device,
            )
            raise InternalError(message)
    return original(self, quant_params, *args, **kwargs)


def vulkan_constant(original: Original, self: Any, node: Any) -> Any:
    tensor = original(self, node)
    device = tensor.untyped_storage().device
    if device.type != "cpu" and tensor.numel() != 0:
        from executorch.backends.vulkan.utils import get_tensor_name

        name = get_tensor_name(self.program, node)
        message = host_read_message(
            f"Vulkan constant {name!r}", tensor.shape, tensor.dtype, device
        )
        raise InternalError(message)
    return tensor


def to_edge(original: Original, *args: Any, **kwargs: Any) -> Any:
    """to_edge's check that each program is in the ATen dialect, where the follow-up adds its line
    from that program's graph. ExecuTorch's et_logger hides to_edge's parameters, so the programs
    are found among the arguments by type. _generate_edge_program's errors come named already."""
    try:
        return original(*args, **kwargs)
    except SpecViolationError as error:
        values = [
            v
            for a in (*args, *kwargs.values())
            for v in (a.values() if isinstance(a, dict) else (a,))
        ]
        graphs = [
            v.graph_module
            for v in values
            if isinstance(v, torch.export.ExportedProgram)
        ]
        raise_with_device_hint(error, graphs)


def edge_program(
    original: Original, config: Any, program: Any, *args: Any, **kwargs: Any
) -> Any:
    """The Edge-dialect check that the decomposed program's ExportedProgram runs when it is built:
    the follow-up catches its error around that call, in this function."""
    try:
        return original(config, program, *args, **kwargs)
    except SpecViolationError as error:
        raise_with_device_hint(error, (program.graph_module,))


def out_variants(original: Original, self: Any, graph_module: Any) -> Any:
    """ToOutVarPass, where the follow-up adds the hint to the error it raises; the pass calls
    itself for control flow, so an error already named passes as it is."""
    try:
        return original(self, graph_module)
    except RuntimeError as error:
        if not str(error).startswith("Missing out variants"):
            raise
        raise_with_device_hint(error, (graph_module,))


WRAPPERS: dict[str, Original] = {
    function.__name__: function
    for function in (
        emitter_constant,
        emitter_constant_methods,
        bundled_tensor,
        named_data,
        named_data_bytes,
        xnnpack_constant,
        xnnpack_quant_scales,
        vulkan_constant,
        to_edge,
        edge_program,
        out_variants,
    )
}
