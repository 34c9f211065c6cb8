# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which inputs of a method the runtime reads in host memory, read from its program.

The runtime reads an input in the memory that the program gives it: the device of its
ExtraTensorInfo (programs before executorch 1.3.0 have none: host memory). Before 1.4.0 no
program plans a method's inputs on a device, and the CUDA backend takes device inputs itself,
so no input of a method that delegates to it counts as read on the host. From 1.4.0 a CUDA
method's inputs are planned on the host, with a copy to the device, unless it is exported with
skip_h2d_for_method_inputs. The Python bindings expose neither the devices nor the delegates,
so the guard reads the program with the flatbuffers package (a dependency of every executorch
release) by the field slots of schema/program.fbs, which only ever appends fields. ExecuTorch's
own reader, deserialize_pte_binary, converts the whole program to JSON with the flatc binary in
a subprocess, and its generated classes came in 1.2.0.
"""

import functools
import mmap
from collections.abc import Iterator

from flatbuffers import encode, number_types, packer
from flatbuffers.table import Table

from . import _release

Source = str | bytes  # a .pte file's absolute path, or its bytes

# Field slots (4 + 2 * the field's index in its table) and enum values of schema/program.fbs.
EXECUTION_PLAN = 6  # Program
NAME, VALUES, INPUTS, DELEGATES = 4, 8, 10, 18  # ExecutionPlan
DELEGATE_ID = 4  # BackendDelegate
VAL_TYPE, VAL = 4, 6  # EValue
EXTRA_TENSOR_INFO = 22  # Tensor
DEVICE_TYPE = 10  # ExtraTensorInfo
TENSOR, CPU = 5, 0  # KernelTypes.Tensor, DeviceType.CPU
CUDA_BACKEND = "CudaBackend"
CUDA_BACKEND_TAKES_DEVICE_INPUTS = _release.before("1.4.0")


class InputPlan:
    """A loaded method's program and name; which inputs it reads on the host is read once, on
    the first device tensor."""

    def __init__(self, source: Source, method: str) -> None:
        self.source, self.method = source, method

    @functools.cached_property
    def host_inputs(self) -> frozenset[int]:
        if isinstance(self.source, bytes):
            return host_inputs(self.source, self.method)
        try:
            with open(self.source, "rb") as file:
                with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    return host_inputs(data, self.method)
        # The file is gone since it was loaded: ExecuTorch's to run as it is.
        except OSError:
            return frozenset()


def _tables(table: Table, slot: int) -> Iterator[Table]:
    """The tables of the vector field at `slot`; none where the field is absent."""
    offset = table.Offset(slot)
    if offset:
        start = table.Vector(offset)
        for i in range(table.VectorLen(offset)):
            yield Table(table.Bytes, table.Indirect(start + 4 * i))


def _table(table: Table, slot: int) -> Table | None:
    offset = table.Offset(slot)
    return Table(table.Bytes, table.Indirect(table.Pos + offset)) if offset else None


def _string(table: Table, slot: int) -> str:
    offset = table.Offset(slot)
    return bytes(table.String(table.Pos + offset)).decode() if offset else ""


def host_inputs(data: bytes | mmap.mmap, method: str) -> frozenset[int]:
    """The indices of the tensor inputs that `method` of the program `data` reads in host
    memory; none for a method that it lacks."""
    buffer = memoryview(data)
    program = Table(buffer, encode.Get(packer.uoffset, buffer, 0))
    for plan in _tables(program, EXECUTION_PLAN):
        if _string(plan, NAME) != method:
            continue
        if CUDA_BACKEND_TAKES_DEVICE_INPUTS and any(
            _string(d, DELEGATE_ID) == CUDA_BACKEND for d in _tables(plan, DELEGATES)
        ):
            return frozenset()
        values = plan.Vector(plan.Offset(VALUES))
        inputs = plan.Offset(INPUTS)
        found = set()
        for i in range(plan.VectorLen(inputs) if inputs else 0):
            value_index = plan.Get(number_types.Int32Flags, plan.Vector(inputs) + 4 * i)
            value = Table(buffer, plan.Indirect(values + 4 * value_index))
            kind = value.Offset(VAL_TYPE)
            if (
                not kind
                or value.Get(number_types.Uint8Flags, value.Pos + kind) != TENSOR
            ):
                continue
            tensor = _table(value, VAL)
            info = _table(tensor, EXTRA_TENSOR_INFO) if tensor else None
            if (
                info is None
                or not (device := info.Offset(DEVICE_TYPE))
                or info.Get(number_types.Int8Flags, info.Pos + device) == CPU
            ):
                found.add(i)
        return frozenset(found)
    return frozenset()
