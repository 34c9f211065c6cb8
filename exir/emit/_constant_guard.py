# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""Stops the emitter before it reads a constant that is not in host memory.

_Emitter._tensor_spec_to_evalue reads every constant's bytes from spec.storage.data_ptr() on the
host; for a device storage that read is a SIGSEGV. check_constant runs first and raises
InternalError naming the constant, which run_node passes through unchanged.
"""

import contextlib
from contextvars import ContextVar
from typing import Any, Iterator, Optional

from executorch.exir.tensor import TensorSpec

from executorch_device_guard._host_data import check_host_constant, constant_fqn

# The constant method being emitted: _emit_prim_getters runs after the graphs, so the emitter's
# node is the last node of the last method and names nothing.
_CONSTANT_METHOD: ContextVar[Optional[str]] = ContextVar(
    "constant_method", default=None
)


@contextlib.contextmanager
def constant_method(method: str) -> Iterator[None]:
    """Names the constants emitted inside the block by the constant method returning them."""
    token = _CONSTANT_METHOD.set(method)
    try:
        yield
    finally:
        _CONSTANT_METHOD.reset(token)


def constant_name(emitter: Any, spec: TensorSpec) -> str:  # pyre-ignore[2]: an _Emitter
    """Names the constant the emitter is on: its fully qualified name where known, else its node."""
    method = _CONSTANT_METHOD.get()
    if method is not None:
        return f"returned by constant method {method!r}"
    info = spec.extra_tensor_info
    if info is not None and info.fully_qualified_name:
        return repr(info.fully_qualified_name)
    # Only the top-level emitter holds the exported program, and only its placeholders name weights.
    program = getattr(emitter, "exported_program", None)
    if program is not None:
        return constant_fqn(program, emitter.node)
    return f"at node {emitter.node.name!r}"


def check_constant(
    emitter: Any, spec: TensorSpec
) -> None:  # pyre-ignore[2]: an _Emitter
    """Raises InternalError for a constant with bytes to serialize that the host cannot read."""
    if spec.const and spec.allocated_memory != 0:
        check_host_constant(
            spec.storage, spec.shape, spec.dtype, lambda: constant_name(emitter, spec)
        )
