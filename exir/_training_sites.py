# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""ExecuTorch's training extension: the SGD optimizer, which reads and updates its tensors'
memory on the host, and TrainingModule.forward_backward, whose bindings read a program's
inputs in host memory unless the program plans them on a device.

A TrainingModule's plans are read from the program that its loader loaded (its bytes, or its
file mapped as it loads it), once, as it loads it; one built otherwise, or from a program that the guard cannot read, is taken to read every
input on the host, the safe assumption. The plans are kept by the TrainingModule, a Python
object, since the bindings' module that it holds takes no weak reference.
"""

import weakref
from collections.abc import Callable
from typing import Any

import torch

from ._host_read import HOST_TENSORS, refuse_off_host
from ._program_plan import Plans
from ._runtime_sites import check_inputs, mapped, plans_of

Original = Callable[..., Any]

# The TrainingModules that a guarded loader made, each with its program's plans (None: unread).
_module_plans: "weakref.WeakKeyDictionary[Any, Plans | None]" = (
    weakref.WeakKeyDictionary()
)


def training_program(original: Original, path: Any) -> Any:
    """_load_for_executorch_for_training: the plans of the file it loaded, mapped now."""
    module = original(path)
    _module_plans[module] = plans_of(mapped(path))
    return module


def training_buffer(original: Original, buffer: Any) -> Any:
    """_load_for_executorch_for_training_from_buffer: the plans of the bytes it loaded."""
    module = original(buffer)
    _module_plans[module] = plans_of(buffer)
    return module


def training_inputs(
    original: Original, self: Any, method_name: Any, inputs: Any
) -> Any:
    """TrainingModule.forward_backward, which runs the method on its inputs through the
    bindings' run_method: its inputs checked as executorch.runtime's are (a name that
    is not a string is the bindings' to refuse)."""
    if isinstance(method_name, str):
        plans = _module_plans.get(self)
        host_inputs = None if plans is None else plans.get(method_name)
        check_inputs(inputs, method_name, host_inputs, tensor_alone=False)
    return original(self, method_name, inputs)


def _check_named_tensors(kind: str, tensors: Any) -> None:
    """Checks the optimizer's tensors, in the dict's order, once the bindings
    have taken them as names and tensors (anything else keeps their error)."""
    if isinstance(tensors, dict) and all(
        isinstance(name, str) and isinstance(tensor, torch.Tensor)
        for name, tensor in tensors.items()
    ):
        for name, tensor in tensors.items():
            refuse_off_host(tensor, RuntimeError, HOST_TENSORS, "{} {!r}", kind, name)


def sgd_parameters(
    original: Original, named_params: Any, *args: Any, **kwargs: Any
) -> Any:
    """get_sgd_optimizer, whose optimizer updates its parameters' memory on the host."""
    _check_named_tensors("Parameter", named_params)
    return original(named_params, *args, **kwargs)


def sgd_gradients(original: Original, self: Any, arg0: Any) -> Any:
    """ExecuTorchSGD.step, which reads the gradients on the host; arg0 is pybind11's name for
    its unnamed parameter."""
    _check_named_tensors("Gradient", arg0)
    return original(self, arg0)
