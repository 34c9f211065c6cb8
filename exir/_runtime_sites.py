# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The wrappers of executorch.runtime (the site table's rows for Runtime.load_program and
Program.load_method), and the check of a method's inputs that training shares: a tensor in
device memory for an input that the method reads on the host is refused with a RuntimeError naming it,
before the bindings read it as host memory (SIGSEGV).

Which inputs a method reads on the host is read from the program that ExecuTorch loaded (its
bytes, or its file mapped as ExecuTorch loads it), once, with its first method (_program_plan).
A program that the guard cannot read runs as ExecuTorch alone runs it, but for device inputs,
which are refused: host memory is the safe assumption. Each Method that a guarded Program loads
gets its own execute, which checks the inputs and calls the bindings as ExecuTorch's does: a
call of host tensors costs one device test an input and nothing more (bench/RESULTS.md). It
stays on the Method after uninstall(). Imported once executorch.runtime is, so torch is loaded.
"""

import mmap
import os
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _release
from ._host_read import HOST_TENSORS, RUNTIME_INPUT, host_read_message, what_to_do
from ._program_plan import Plans, input_plans

Original = Callable[..., Any]

# executorch.runtime's programs loaded while the guard was on: each with its bytes or its file's
# mapping until its first method is loaded, then with its methods' plans (None for a program
# that the guard cannot read). Weak: ExecuTorch's objects live as they would.
_program_sources: "weakref.WeakKeyDictionary[Any, bytes | mmap.mmap | None]" = (
    weakref.WeakKeyDictionary()
)
_program_plans: "weakref.WeakKeyDictionary[Any, Plans | None]" = (
    weakref.WeakKeyDictionary()
)
# From executorch 1.5.0 the bindings refuse an input on a device other than the CPU or CUDA.
_BINDINGS_REFUSE_OTHER_DEVICES = not _release.before("1.5.0")


def mapped(path: Any) -> mmap.mmap | None:
    """The file at `path` mapped as it is now, as ExecuTorch maps it when it loads it: deleted
    or replaced afterwards, the mapping still holds the program that was loaded. None where it
    cannot be mapped (gone already, or empty): ExecuTorch's to say what that means."""
    try:
        with open(path, "rb") as file:
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def plans_of(source: bytes | mmap.mmap | None) -> Plans | None:
    """The plans of the program in `source`; None where the guard cannot read them, whatever the
    reading raised: ExecuTorch's own errors are the ones a user gets."""
    if source is None:
        return None
    try:
        return input_plans(source)
    except Exception:
        return None


def runtime_program(
    original: Original, self: Any, data: Any, *args: Any, **kwargs: Any
) -> Any:
    """Keeps the program that ExecuTorch has just loaded: the bytes that the Program holds, or
    its file, mapped now. Reading its plans waits for its first method (loading a program
    costs less than reading them: bench/RESULTS.md)."""
    program = original(self, data, *args, **kwargs)
    path = isinstance(data, (str, os.PathLike))
    _program_sources[program] = mapped(data) if path else program._data
    return program


def _reference_execute(self: Any, inputs: Sequence[Any]) -> Any:
    return self._method(inputs)


def _calls_bindings(execute: Any) -> bool:
    """Whether `execute` is ExecuTorch's Method.execute as every release has it: one call of
    the bindings' method, which the guarded execute then makes itself."""
    code = getattr(execute, "__code__", None)
    reference = _reference_execute.__code__
    return (
        code is not None
        and code.co_code == reference.co_code
        and code.co_names == reference.co_names
    )


def runtime_method(original: Original, self: Any, name: str) -> Any:
    """Gives the Method, once, an execute that checks its inputs against its plan, unless the
    plan leaves nothing to refuse."""
    method = original(self, name)
    if self in _program_sources and self not in _program_plans:
        _program_plans[self] = plans_of(_program_sources.pop(self))
    if self in _program_plans and "execute" not in vars(method):
        plans = _program_plans[self]
        host_inputs = None if plans is None else plans.get(name)
        if host_inputs == frozenset() and _BINDINGS_REFUSE_OTHER_DEVICES:
            return method  # every input planned on a device: nothing to refuse
        execute = type(method).execute
        if _calls_bindings(execute):
            call = method._method
        else:
            call = types.MethodType(execute, method)
        method.execute = _checked(call, name, host_inputs)
    return method


def _checked(
    call: Callable[[Any], Any], method: str, host_inputs: frozenset[int] | None
) -> Callable[[Any], Any]:
    """`call`, the method's execution, after check_inputs; a list or tuple of host tensors,
    every call's path, passes with one is_cpu test each (a loop: map() and all() cost more,
    bench/RESULTS.md)."""

    def execute(inputs: Sequence[Any]) -> Any:
        if inputs.__class__ in (list, tuple):
            try:
                for value in inputs:
                    if not value.is_cpu:
                        break
                else:
                    return call(inputs)
            except Exception:  # a value that is not a tensor: check_inputs decides
                pass
        check_inputs(inputs, method, host_inputs, tensor_alone=True)
        return call(inputs)

    return execute


def check_inputs(
    inputs: Any,
    method: str,
    host_inputs: frozenset[int] | None,
    tensor_alone: bool,
) -> None:
    """The check where the bindings convert each input, in their order, up to the first
    input they refuse themselves: a CUDA tensor for an input that the method reads in host
    memory (every input, where `host_inputs` is None: a program the guard cannot read).
    Before 1.5.0 the bindings take a tensor on any device, which the method reads on the host:
    those raise too. The bindings take a list, a tuple or another sequence, and, where
    `tensor_alone`, a tensor as one input; anything else they refuse with their own error."""
    if tensor_alone and type(inputs) is torch.Tensor:
        values: Sequence[Any] = (inputs,)
    elif isinstance(inputs, (list, tuple)):
        values = inputs
    elif isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
        try:
            values = tuple(inputs)
        except Exception:  # the bindings' to refuse
            return
    else:
        return
    for index, value in enumerate(values):
        if type(value) is not torch.Tensor:  # exactly, as the bindings take it
            if value is None or isinstance(value, (int, float)):
                continue
            return
        if value.layout != torch.strided:  # the bindings' to refuse
            return
        if not value.is_contiguous() and not (
            value.dim() == 4 and value.is_contiguous(memory_format=torch.channels_last)
        ):
            return
        device = value.untyped_storage().device
        if device.type == "cpu" or value.numel() == 0:
            continue
        if device.type == "cuda":
            refused = host_inputs is None or index in host_inputs
        elif _BINDINGS_REFUSE_OTHER_DEVICES:
            return
        else:
            refused = True
        if refused:
            raise RuntimeError(
                host_read_message(
                    f"Input {index} of method {method!r}",
                    value.shape,
                    value.dtype,
                    device,
                    what_to_do(
                        device, RUNTIME_INPUT if device.type == "cuda" else HOST_TENSORS
                    ),
                )
            )
