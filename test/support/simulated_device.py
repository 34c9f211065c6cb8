# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Device memory as the host sees it, for the package's tests on machines without a GPU.

A simulated storage reports cuda:0 and a data_ptr() into a PROT_NONE mapping, so a host read
through ctypes crashes as it does on a GPU, while a copy to a host storage, or the tensor's own
.cpu(), gets the real values as a device-to-host copy would. Reading it element by element (one
transfer each on a GPU) or through numpy raises. The mapping needs POSIX mmap.
"""

import contextlib
import ctypes
import functools
import mmap
from collections.abc import Iterator
from typing import NoReturn

import torch

_UNREADABLE_SIZE = 1 << 30


@functools.cache
def _unreadable_address() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    prot_none = 0
    address: int = libc.mmap(
        None,
        _UNREADABLE_SIZE,
        prot_none,
        mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
        -1,
        0,
    )
    assert address not in (None, ctypes.c_void_p(-1).value), "mmap failed"
    return address


class SimulatedDeviceStorage(torch.UntypedStorage):
    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda:0")

    def data_ptr(self) -> int:
        return _unreadable_address()

    def __getitem__(self, index: int) -> NoReturn:
        raise AssertionError("simulated device memory read element by element")


def _numpy(*, force: bool = False) -> NoReturn:
    raise TypeError(
        "can't convert cuda:0 device type tensor to numpy. "
        "Use Tensor.cpu() to copy the tensor to host memory first."
    )


def simulate_device(tensor: torch.Tensor) -> torch.Tensor:
    """Makes `tensor`'s storage report cuda:0 memory that the host cannot read."""
    real = tensor.untyped_storage()
    assert real.nbytes() <= _UNREADABLE_SIZE
    simulated = SimulatedDeviceStorage(real.nbytes())  # type: ignore[no-untyped-call]
    simulated.copy_(real)
    # What .cpu() gives for a device tensor: the same values and strides.
    host = tensor.clone()
    tensor.untyped_storage = lambda: simulated  # type: ignore[method-assign]
    tensor.numpy = _numpy  # type: ignore[method-assign]
    tensor.cpu = lambda: host  # type: ignore[method-assign]
    return tensor


@contextlib.contextmanager
def simulated_is_cpu() -> Iterator[None]:
    """Tensor.is_cpu false for a tensor in simulated device memory, for the block, as for a
    real device tensor: the runtime's check of every call reads is_cpu, which torch takes from
    the tensor's own device (cpu for these), not from the storage that simulate_device set."""
    host = torch._C.TensorBase.is_cpu.__get__
    torch.Tensor.is_cpu = property(  # type: ignore[method-assign, assignment]
        lambda t: (
            host(t) and not isinstance(t.untyped_storage(), SimulatedDeviceStorage)
        )
    )
    try:
        yield
    finally:
        del torch.Tensor.is_cpu
