# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""Checks for tensor bytes that ExecuTorch reads on the host.

ExecuTorch's serializers read a tensor's bytes through ctypes, from its storage's data_ptr(). For a
storage in device memory (CUDA, XPU, MPS, ...) that pointer is a device address and the read kills
the process with SIGSEGV; a meta or fake storage has no bytes at all (its pointer is 0). Model
constants on a device are an unsupported export and raise InternalError; plain data (bundled test
values, named data) is copied to the host once, in bulk.
"""

import copy
from typing import Callable, Optional, Sequence

import torch
from executorch.exir.error import InternalError
from executorch.exir.tensor import TensorSpec
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

_WAY_OUT = (
    "Move the module and its example inputs to the CPU before torch.export.export(), or lower "
    "it with a backend that owns device weights (e.g. CudaPartitioner from executorch.backends.cuda)."
)
_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def _describe(what: str, shape: Sequence[int], dtype: torch.dtype) -> str:
    return f"{what} (shape {list(shape)}, dtype {dtype})"


def _no_data(description: str) -> InternalError:
    return InternalError(
        f"{description} is a meta or fake tensor and holds no data to serialize. Load real "
        "values first, e.g. module.to_empty(device='cpu') followed by load_state_dict()."
    )


def check_host_constant(
    storage: Optional[torch.UntypedStorage],
    shape: Sequence[int],
    dtype: torch.dtype,
    name: Callable[[], str],
) -> None:
    """Raises InternalError unless a model constant's bytes can be read on the host.

    Looks at the storage's device, never at TensorSpec.device: PropagateDevicePass tags specs
    with the device they will run on while their bytes stay in host memory. `name` is called only
    on failure, since finding a constant's name can cost a scan of the graph signature.
    """
    if storage is not None and storage.device.type == "cpu":
        return
    description = _describe(f"Constant {name()}", shape, dtype)
    if storage is None:
        raise InternalError(
            f"{description} has no storage, so there are no bytes to serialize."
        )
    if storage.device.type == "meta":
        raise _no_data(description)
    raise InternalError(
        f"{description} is on {storage.device}, but ExecuTorch serializes constants from host "
        f"memory and cannot read device memory. {_WAY_OUT}"
    )


def check_host_tensor(tensor: torch.Tensor, name: Callable[[], str]) -> None:
    """check_host_constant for a constant held as a tensor; an empty one has nothing to read."""
    if tensor.numel() != 0:
        check_host_constant(tensor.untyped_storage(), tensor.shape, tensor.dtype, name)


def host_storage(
    storage: torch.UntypedStorage, shape: Sequence[int], dtype: torch.dtype, name: str
) -> torch.UntypedStorage:
    """Returns plain data's storage in host memory: itself, or one bulk copy of a device storage."""
    if storage.device.type == "cpu":
        return storage
    if storage.device.type == "meta":
        raise _no_data(_describe(name, shape, dtype))
    return storage.cpu()


def host_spec(spec: TensorSpec, name: str) -> TensorSpec:
    """Returns plain data's spec, or a copy of it whose storage is in host memory."""
    if spec.allocated_memory == 0 or spec.storage.device.type == "cpu":
        return spec
    host = copy.copy(spec)
    host.storage = host_storage(spec.storage, spec.shape, spec.dtype, name)
    return host


def host_tensor(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Returns plain data backed by host memory, laid over a copy of its whole storage.

    Keeping the storage, offset and strides makes every serializer see exactly the bytes it sees
    for the same values on the CPU, including for non-contiguous and channels-last tensors.
    """
    storage = tensor.untyped_storage()
    if storage.device.type == "cpu":
        return tensor
    host = host_storage(storage, tensor.shape, tensor.dtype, name)
    return torch.empty(0, dtype=tensor.dtype).set_(
        host, tensor.storage_offset(), tensor.size(), tensor.stride()
    )


def storage_bytes(storage: torch.UntypedStorage) -> bytes:
    """Returns a host storage's bytes in one read: bytes(storage) makes one Python call a byte."""
    return torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()


def constant_fqn(program: ExportedProgram, node: torch.fx.Node) -> str:
    """Names a constant's node by its fully qualified name where the graph signature has one."""
    for spec in program.graph_signature.input_specs:
        if spec.kind in _CONSTANT_KINDS and spec.arg.name == node.name:
            return repr(spec.target)
    return repr(node.target) if node.op == "get_attr" else f"at node {node.name!r}"
