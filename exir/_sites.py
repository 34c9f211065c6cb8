# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The wrappers that _hook.SITES puts around ExecuTorch's host reads of tensor bytes.

Each takes the original function first, then the leading parameters it relies on, named as in
ExecuTorch: _patch compares those names with the original's signature before it wraps anything.
Each calls at its site what the upstream patch series (upstream/generate.py) puts there.
Imported only once a guarded ExecuTorch module has been imported, so torch is already loaded.
"""

from typing import Any, Callable, Dict

import torch

from ._host_data import (
    check_host_tensor,
    constant_fqn,
    host_spec,
    host_tensor,
    storage_bytes,
)
from .emit._constant_guard import check_constant, constant_method

Original = Callable[..., Any]


def emitter_constant(original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any) -> Any:
    check_constant(self, spec)
    return original(self, spec, *args, **kwargs)


def emitter_constant_methods(
    original: Original, self: Any, prim_getters: Dict[str, Any], *args: Any, **kwargs: Any
) -> Any:
    # One method at a time, so that its constants are named by it; the plans are the same.
    plans = []
    for method, value in prim_getters.items():
        with constant_method(method):
            plans += original(self, {method: value}, *args, **kwargs)
    return plans


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
    # Dense non-contiguous layouts (channels-last) are stored with their whole storage.
    if tensor.is_contiguous():
        return original(tensor)
    return storage_bytes(tensor.untyped_storage())


def xnnpack_constant(original: Original, exp_prog: Any, node: Any) -> Any:
    tensor = original(exp_prog, node)
    if isinstance(tensor, torch.Tensor):
        check_host_tensor(tensor, lambda: constant_fqn(exp_prog, node))
    return tensor


def xnnpack_quant_scales(
    original: Original, self: Any, quant_params: Any, *args: Any, **kwargs: Any
) -> Any:
    if quant_params.per_channel:
        check_host_tensor(
            quant_params.scale,
            lambda: f"per-channel scales of {constant_fqn(self.exported_program, quant_params.q_input)}",
        )
    return original(self, quant_params, *args, **kwargs)


def vulkan_constant(original: Original, self: Any, node: Any) -> Any:
    tensor = original(self, node)
    check_host_tensor(tensor, lambda: constant_fqn(self.program, node))
    return tensor
