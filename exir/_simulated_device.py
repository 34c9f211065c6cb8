# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A CPU stand-in for device memory, so that the crash and the guard can be shown without a GPU.

To the host, a CUDA storage is a storage whose device is cuda:0 and whose data_ptr() is an address
it cannot read. SimulatedDeviceStorage is exactly that: it reports cuda:0 and a pointer into a
PROT_NONE mapping, so a host read through ctypes dies with SIGSEGV as it does on a GPU machine,
while torch's own bulk copy (storage.cpu()) still sees the real bytes, as a device-to-host copy
would. Self-contained (torch and the stdlib only): tests run its source in child interpreters
that must not import executorch_device_guard.
"""

import ctypes
import mmap

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_PROT_NONE = 0  # Python's mmap module names PROT_READ/WRITE/EXEC only
_UNREADABLE_SIZE = 1 << 30  # address space only: PROT_NONE pages are never backed
_UNREADABLE = _libc.mmap(
    None, _UNREADABLE_SIZE, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0
)
assert _UNREADABLE not in (None, ctypes.c_void_p(-1).value), "mmap failed"


class SimulatedDeviceStorage(torch.UntypedStorage):
    """Host bytes that present themselves as cuda:0 memory."""

    @property
    def device(self) -> torch.device:
        return torch.device("cuda:0")

    def data_ptr(self) -> int:
        return _UNREADABLE


def simulate_device(tensor: torch.Tensor) -> torch.Tensor:
    """Makes `tensor` report its storage as cuda:0 memory the host cannot read; returns it."""
    real = tensor.untyped_storage()
    assert real.nbytes() <= _UNREADABLE_SIZE
    simulated = SimulatedDeviceStorage(real.nbytes())
    simulated.copy_(real)
    tensor.untyped_storage = lambda: simulated
    return tensor
