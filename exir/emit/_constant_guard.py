# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Stops the emitter before it reads a constant that is not in host memory.

_Emitter._tensor_spec_to_evalue reads every constant's bytes from spec.storage.data_ptr() on the
host; for a device storage that read is a SIGSEGV. These checks run first and raise InternalError
naming the constant, which run_node passes through unchanged.
"""

# pyre-strict

from typing import Any, Dict

import torch
from executorch.exir.tensor import TensorSpec
from torch.utils import _pytree as pytree

from .._host_data import check_host_constant, constant_fqn


def constant_name(emitter: Any, spec: TensorSpec) -> str:  # pyre-ignore[2]: an _Emitter
    """Names the constant the emitter is on: its fully qualified name where known, else its node."""
    info = spec.extra_tensor_info
    if info is not None and info.fully_qualified_name:
        return repr(info.fully_qualified_name)
    # Only the top-level emitter holds the exported program, and only its placeholders name weights.
    program = getattr(emitter, "exported_program", None)
    if program is not None:
        return constant_fqn(program, emitter.node)
    return f"at node {emitter.node.name!r}"


def check_constant(emitter: Any, spec: TensorSpec) -> None:  # pyre-ignore[2]: an _Emitter
    """Raises InternalError for a constant with bytes to serialize that the host cannot read."""
    if spec.const and spec.allocated_memory != 0:
        check_host_constant(
            spec.storage, spec.shape, spec.dtype, lambda: constant_name(emitter, spec)
        )


def check_constant_methods(prim_getters: Dict[str, Any]) -> None:
    """Checks constant_methods tensors by method name: the emitter's node is stale for them."""
    for method, value in prim_getters.items():
        for leaf in pytree.tree_leaves(value):
            if isinstance(leaf, torch.Tensor) and leaf.numel() != 0:
                check_host_constant(
                    leaf.untyped_storage(),
                    leaf.shape,
                    leaf.dtype,
                    lambda method=method: f"returned by constant method {method!r}",
                )
