# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The wrappers that _hook.SITES puts around ExecuTorch's host reads of tensor bytes.

Each takes the original function first, then the leading parameters it relies on, named as in
ExecuTorch: _patch compares those names with the original's signature before it wraps anything.
Each makes the checks of _host_data that the upstream series (upstream/generate.py) makes at that
site. Imported only once a guarded ExecuTorch module has been imported, so torch is loaded.
"""

from typing import Any, Callable, Dict, cast

import torch
from torch.utils import _pytree as pytree

from ._host_data import (
    check_host_spec,
    check_host_tensor,
    constant_name,
    host_spec,
    host_tensor,
)

Original = Callable[..., Any]


def _emitter_constant_name(emitter: Any, spec: Any) -> str:
    """The series checks top-level placeholders where _TopLevelEmitter.placeholder finds their
    fully qualified name; from outside, the same lookup is made here."""
    from executorch.exir.emit._emitter import _TopLevelEmitter  # loaded: it calls this

    node = emitter.node
    if isinstance(emitter, _TopLevelEmitter) and node.op == "placeholder":
        fqn, _ = emitter._find_fqn_for_placeholder(node.target, spec)
        if fqn is not None:
            return repr(fqn)
    return f"at node {node.name!r}"


def emitter_constant(original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any) -> Any:
    if spec.const:
        check_host_spec(spec, _emitter_constant_name(self, spec))
    return original(self, spec, *args, **kwargs)


def emitter_constant_methods(
    original: Original, self: Any, prim_getters: Dict[str, Any], *args: Any, **kwargs: Any
) -> Any:
    for method, values in prim_getters.items():
        for value in pytree.tree_leaves(values):
            if isinstance(value, torch.Tensor):
                check_host_tensor(value, f"returned by constant method {method!r}")
    return original(self, prim_getters, *args, **kwargs)


def bundled_tensor(original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any) -> Any:
    spec = host_spec(spec, "Bundled test tensor")
    return original(self, spec, *args, **kwargs)


def named_data(
    original: Original, self: Any, key: str, data: Any, *args: Any, **kwargs: Any
) -> Any:
    if isinstance(data, torch.Tensor):
        data = host_tensor(data, f"Named data {key!r}")
    return original(self, key, data, *args, **kwargs)


def named_data_bytes(original: Original, tensor: torch.Tensor) -> bytes:
    if tensor.is_contiguous():
        return original(tensor)
    return torch.empty(0, dtype=torch.uint8).set_(tensor.untyped_storage()).numpy().tobytes()


def xnnpack_constant(original: Original, exp_prog: Any, node: Any) -> Any:
    tensor = original(exp_prog, node)
    if isinstance(tensor, torch.Tensor):
        check_host_tensor(tensor, constant_name(exp_prog, node))
    return tensor


def xnnpack_quant_scales(
    original: Original, self: Any, quant_params: Any, *args: Any, **kwargs: Any
) -> Any:
    if quant_params.per_channel:
        check_host_tensor(
            cast(torch.Tensor, quant_params.scale),
            f"per-channel scales of {constant_name(self.exported_program, quant_params.q_input)}",
        )
    return original(self, quant_params, *args, **kwargs)


def vulkan_constant(original: Original, self: Any, node: Any) -> Any:
    tensor = original(self, node)
    check_host_tensor(tensor, constant_name(self.program, node))
    return tensor
