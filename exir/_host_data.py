# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""Tensor bytes that ExecuTorch serializes on the host.

The serializers read a tensor's bytes through ctypes from its storage's data_ptr(). For a storage
in device memory (CUDA, XPU, MPS, ...) that is a device address and the read kills the process; a
meta or fake storage has no bytes at all. Model constants on a device are an unsupported export
and raise InternalError; plain data (bundled test values, named data) is copied to the host.
"""

import copy
from typing import Optional, Sequence

import torch
from executorch.exir.error import InternalError
from executorch.exir.tensor import TensorSpec
from torch.export import ExportedProgram

_WAY_OUT = (
    "Move the module and its example inputs to the CPU before torch.export.export(), or lower "
    "it with a backend that owns device weights (e.g. CudaPartitioner from executorch.backends.cuda)."
)


def _describe(what: str, shape: Sequence[int], dtype: torch.dtype) -> str:
    return f"{what} (shape {list(shape)}, dtype {dtype})"


def _no_data(description: str) -> InternalError:
    return InternalError(
        f"{description} is a meta or fake tensor and holds no data to serialize. Load real "
        "values first, e.g. module.to_empty(device='cpu') followed by load_state_dict()."
    )


def _check_storage(
    storage: Optional[torch.UntypedStorage],
    shape: Sequence[int],
    dtype: torch.dtype,
    name: str,
) -> None:
    if storage is not None and storage.device.type == "cpu":
        return
    description = _describe(f"Constant {name}", shape, dtype)
    if storage is None:
        raise InternalError(f"{description} has no storage to serialize.")
    if storage.device.type == "meta":
        raise _no_data(description)
    raise InternalError(
        f"{description} is on {storage.device}, but ExecuTorch serializes constants from host "
        f"memory and cannot read device memory. {_WAY_OUT}"
    )


def check_host_spec(spec: TensorSpec, name: str) -> None:
    """Raises InternalError unless the host can read the bytes of a constant spec.

    Looks at the storage's device, not at spec.device: PropagateDevicePass tags specs with the
    device they run on while their bytes stay in host memory.
    """
    if spec.const and spec.allocated_memory != 0:
        _check_storage(spec.storage, spec.shape, spec.dtype, name)


def check_host_tensor(tensor: torch.Tensor, name: str) -> None:
    """Raises InternalError unless the host can read the bytes of a constant tensor."""
    if tensor.numel() != 0:
        _check_storage(tensor.untyped_storage(), tensor.shape, tensor.dtype, name)


def constant_name(program: ExportedProgram, node: torch.fx.Node) -> str:
    """The fully qualified name of a constant's node where the graph signature has one."""
    signature = program.graph_signature
    for names in (
        signature.inputs_to_parameters,
        signature.inputs_to_buffers,
        signature.inputs_to_lifted_tensor_constants,
    ):
        if node.name in names:
            return repr(names[node.name])
    return repr(node.target) if node.op == "get_attr" else f"at node {node.name!r}"


def host_storage(
    storage: torch.UntypedStorage, shape: Sequence[int], dtype: torch.dtype, name: str
) -> torch.UntypedStorage:
    """Plain data's storage in host memory: itself, or one bulk copy of a device storage."""
    if storage.device.type == "cpu":
        return storage
    if storage.device.type == "meta":
        raise _no_data(_describe(name, shape, dtype))
    return torch.empty(storage.nbytes(), dtype=torch.uint8).untyped_storage().copy_(storage)


def host_spec(spec: TensorSpec, name: str) -> TensorSpec:
    """Plain data's spec, or a copy of it whose storage is in host memory."""
    if (
        spec.allocated_memory == 0
        or spec.storage is None
        or spec.storage.device.type == "cpu"
    ):
        return spec
    host = copy.copy(spec)
    host.storage = host_storage(spec.storage, spec.shape, spec.dtype, name)
    return host


def host_tensor(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Plain data in host memory, over a copy of its whole storage.

    Keeping the storage, offset and strides gives every serializer the bytes that it reads for
    the same values on the CPU, channels-last and other strided layouts included.
    """
    storage = tensor.untyped_storage()
    if storage.device.type == "cpu":
        return tensor
    host = host_storage(storage, tensor.shape, tensor.dtype, name)
    return torch.empty(0, dtype=tensor.dtype).set_(
        host, tensor.storage_offset(), tensor.size(), tensor.stride()
    )
