# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The wrappers that _hook.SITES puts around ExecuTorch's host reads of tensor bytes.

Each takes the original function first, then the leading parameters it relies on, named as in
ExecuTorch: _patch compares those names with the original's signature before it wraps anything.
Imported only once a guarded ExecuTorch module has been imported, so torch is already loaded.
"""

import copy
from typing import Any, Callable

import torch

from ._host_data import check_host_constant, constant_fqn, host_storage, host_tensor
from .emit._constant_guard import check_constant, check_constant_methods

Original = Callable[..., Any]


def emitter_constant(original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any) -> Any:
    check_constant(self, spec)
    return original(self, spec, *args, **kwargs)


def emitter_constant_methods(
    original: Original, self: Any, prim_getters: Any, *args: Any, **kwargs: Any
) -> Any:
    check_constant_methods(prim_getters)
    return original(self, prim_getters, *args, **kwargs)


def bundled_tensor(original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any) -> Any:
    if spec.allocated_memory != 0:
        spec = copy.copy(spec)
        spec.storage = host_storage(spec.storage, spec.shape, spec.dtype, "Bundled test tensor")
    return original(self, spec, *args, **kwargs)


def named_data(
    original: Original, self: Any, key: str, data: Any, *args: Any, **kwargs: Any
) -> Any:
    if isinstance(data, torch.Tensor):
        data = host_tensor(data, f"Named data {key!r}")
    return original(self, key, data, *args, **kwargs)


def xnnpack_constant(original: Original, exp_prog: Any, node: Any) -> Any:
    tensor = original(exp_prog, node)
    if isinstance(tensor, torch.Tensor):
        _check_tensor(tensor, lambda: constant_fqn(exp_prog, node))
    return tensor


def xnnpack_quant_scales(
    original: Original, self: Any, quant_params: Any, *args: Any, **kwargs: Any
) -> Any:
    if quant_params.per_channel:
        _check_tensor(
            quant_params.scale,
            lambda: f"per-channel scales of {constant_fqn(self.exported_program, quant_params.q_input)}",
        )
    return original(self, quant_params, *args, **kwargs)


def vulkan_constant(original: Original, self: Any, node: Any) -> Any:
    tensor = original(self, node)
    _check_tensor(tensor, lambda: constant_fqn(self.program, node))
    return tensor


def _check_tensor(tensor: torch.Tensor, name: Callable[[], str]) -> None:
    if tensor.numel() != 0:
        check_host_constant(tensor.untyped_storage(), tensor.shape, tensor.dtype, name)
