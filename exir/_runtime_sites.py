# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The guard of executorch.runtime: a method's inputs, which the bindings read in host memory
unless the program plans them on a device (_program_plan)."""

import os
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _release
from ._host_read import HOST_TENSORS, RUNTIME_INPUT, host_read_message, what_to_do
from ._program_plan import InputPlan, Source

Original = Callable[..., Any]

# executorch.runtime's programs and methods loaded while the guard was on: where each program's
# bytes are, and each method's InputPlan. Weak: ExecuTorch's objects live as they would.
_program_sources: "weakref.WeakKeyDictionary[Any, Source]" = weakref.WeakKeyDictionary()
_method_plans: "weakref.WeakKeyDictionary[Any, InputPlan]" = weakref.WeakKeyDictionary()
# From executorch 1.5.0 the bindings refuse an input on a device other than the CPU or CUDA.
_BINDINGS_REFUSE_OTHER_DEVICES = not _release.before("1.5.0")


def runtime_program(
    original: Original, self: Any, data: Any, *args: Any, **kwargs: Any
) -> Any:
    """Keeps where the program's bytes are: its absolute path (the working directory may
    change before the guard reads it), or the bytes that the Program holds."""
    program = original(self, data, *args, **kwargs)
    path = isinstance(data, (str, os.PathLike))
    _program_sources[program] = os.path.abspath(data) if path else program._data
    return program


def runtime_method(original: Original, self: Any, name: str) -> Any:
    method = original(self, name)
    if self in _program_sources and method not in _method_plans:
        _method_plans[method] = InputPlan(_program_sources[self], name)
    return method


def runtime_inputs(original: Original, self: Any, inputs: Sequence[Any]) -> Any:
    """The follow-up's check where the bindings convert each input, in their order, up to the
    first input they refuse themselves: a CUDA tensor for an input that the method reads in host
    memory. Before 1.5.0 the bindings take a tensor on any device, which the method reads on the
    host: those raise too. Host inputs, every call's path, cost one device check each."""
    for value in inputs:
        if (
            type(value) is torch.Tensor
            and value.layout == torch.strided  # sparse tensors have no storage to ask
            and value.untyped_storage().device.type != "cpu"
        ):
            break
    else:
        return original(self, inputs)
    plan = _method_plans.get(self)
    if plan is None:  # loaded before the guard was on
        return original(self, inputs)
    for index, value in enumerate(inputs):
        if type(value) is not torch.Tensor:  # exactly, as the bindings take it
            if value is None or isinstance(value, (int, float)):
                continue
            break
        if value.layout != torch.strided:  # the bindings' to refuse
            break
        if not value.is_contiguous() and not (
            value.dim() == 4 and value.is_contiguous(memory_format=torch.channels_last)
        ):
            break
        device = value.untyped_storage().device
        if device.type == "cpu" or value.numel() == 0:
            continue
        if device.type == "cuda":
            refused = index in plan.host_inputs
        elif _BINDINGS_REFUSE_OTHER_DEVICES:
            break
        else:
            refused = True
        if refused:
            raise RuntimeError(
                host_read_message(
                    f"Input {index} of method {plan.method!r}",
                    value.shape,
                    value.dtype,
                    device,
                    what_to_do(
                        device, RUNTIME_INPUT if device.type == "cuda" else HOST_TENSORS
                    ),
                )
            )
    return original(self, inputs)
