# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""A CPU stand-in for device memory, so that the crash and the guard can be shown without a GPU.

To the host, a CUDA storage is a storage whose device is cuda:0 and whose data_ptr() is an address
it cannot read. SimulatedDeviceStorage is exactly that: it reports cuda:0 and a pointer into a
PROT_NONE mapping, so a host read through ctypes dies with SIGSEGV as it does on a GPU machine,
while torch's own bulk copy (storage.cpu()) still sees the real bytes, as a device-to-host copy
would. The tensor's numpy() refuses as torch does for CUDA, and element reads (storage[i], one
transfer each on a GPU) are counted. A host read that the guard misses kills the process, so tests
use it in child interpreters.
"""

import ctypes
import mmap

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_PROT_NONE = 0  # Python's mmap module names PROT_READ/WRITE/EXEC only
_UNREADABLE_SIZE = 1 << 30  # address space only: PROT_NONE pages are never backed
_UNREADABLE = _libc.mmap(
    None, _UNREADABLE_SIZE, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0
)
assert _UNREADABLE not in (None, ctypes.c_void_p(-1).value), "mmap failed"


class SimulatedDeviceStorage(torch.UntypedStorage):
    """Host bytes that present themselves as cuda:0 memory."""

    # storage[i] reads; on a GPU each is a transfer across the bus (bytes(storage) makes one a byte).
    element_reads = 0

    @property
    def device(self) -> torch.device:
        return torch.device("cuda:0")

    def data_ptr(self) -> int:
        return _UNREADABLE

    def __getitem__(self, index: object) -> object:
        SimulatedDeviceStorage.element_reads += 1
        return super().__getitem__(index)


def _numpy(*args: object, **kwargs: object) -> None:
    raise TypeError(
        "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
    )


def simulate_device(tensor: torch.Tensor) -> torch.Tensor:
    """Makes `tensor` report its storage as cuda:0 memory the host cannot read; returns it."""
    real = tensor.untyped_storage()
    assert real.nbytes() <= _UNREADABLE_SIZE
    simulated = SimulatedDeviceStorage(real.nbytes())
    simulated.copy_(real)
    tensor.untyped_storage = lambda: simulated
    tensor.numpy = _numpy  # as torch answers for a CUDA tensor
    return tensor


def lower_on_device(backend: type, only: str = "") -> None:
    """Makes `backend` see the constants of each program it lowers on cuda:0, as for a CUDA model.

    Those whose name contains `only`, if given. Serializers read the program's state_dict and
    constants, which passes before the backend may have copied: hence at preprocess.
    """
    preprocess = backend.preprocess

    def on_device(program: object, compile_specs: object) -> object:
        for name, tensor in [*program.state_dict.items(), *program.constants.items()]:
            if only in name:
                simulate_device(tensor)
        return preprocess(program, compile_specs)

    backend.preprocess = staticmethod(on_device)
