# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which inputs each method of a program reads in host memory, read from the program that
ExecuTorch loaded: its bytes, or its file as mapped when ExecuTorch loaded it.

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

import mmap
from collections.abc import Iterator

from flatbuffers import encode, number_types, packer
from flatbuffers.table import Table

from . import _release

# A method's name -> the indices of the tensor inputs that it reads in host memory.
Plans = dict[str, frozenset[int]]

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


def _vector(table: Table, slot: int) -> tuple[int, int]:
    """The start and length of the vector field at `slot` (0, 0 where it is absent). A length
    that the buffer cannot hold raises: a corrupted program is not read past its end."""
    offset = table.Offset(slot)
    if not offset:
        return 0, 0
    start, length = table.Vector(offset), table.VectorLen(offset)
    if start + 4 * length > len(table.Bytes):
        raise ValueError("a vector runs past the program's end")
    return start, length


def _tables(table: Table, slot: int) -> Iterator[Table]:
    """The tables of the vector field at `slot`; none where the field is absent."""
    start, length = _vector(table, slot)
    for i in range(length):
        yield Table(table.Bytes, table.Indirect(start + 4 * i))


def _table(table: Table, slot: int) -> Table | None:
    offset = table.Offset(slot)
    return Table(table.Bytes, table.Indirect(table.Pos + offset)) if offset else None


def _string(table: Table, slot: int) -> str:
    offset = table.Offset(slot)
    return bytes(table.String(table.Pos + offset)).decode() if offset else ""


def _host_inputs(plan: Table) -> frozenset[int]:
    """The indices of the tensor inputs that the execution plan `plan` reads in host memory."""
    if CUDA_BACKEND_TAKES_DEVICE_INPUTS and any(
        _string(d, DELEGATE_ID) == CUDA_BACKEND for d in _tables(plan, DELEGATES)
    ):
        return frozenset()
    values, _ = _vector(plan, VALUES)
    inputs, count = _vector(plan, INPUTS)
    found = set()
    for i in range(count):
        value_index = plan.Get(number_types.Int32Flags, inputs + 4 * i)
        value = Table(plan.Bytes, plan.Indirect(values + 4 * value_index))
        kind = value.Offset(VAL_TYPE)
        if not kind or value.Get(number_types.Uint8Flags, value.Pos + kind) != TENSOR:
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


def input_plans(data: bytes | mmap.mmap) -> Plans:
    """Each method of the program `data` by name, with the inputs it reads in host memory.
    Raises whatever a program it cannot read makes the flatbuffer reader raise (struct.error,
    UnicodeDecodeError, IndexError, ValueError...): the caller decides what that means."""
    buffer = memoryview(data)
    program = Table(buffer, encode.Get(packer.uoffset, buffer, 0))
    return {
        _string(plan, NAME): _host_inputs(plan)
        for plan in _tables(program, EXECUTION_PLAN)
    }
