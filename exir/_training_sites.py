# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The guard of ExecuTorch's training bindings: the SGD optimizer, which reads and updates its
parameters and gradients in host memory."""

from collections.abc import Callable
from typing import Any

import torch

from ._host_read import HOST_TENSORS, refuse_off_host

Original = Callable[..., Any]


def _check_named_tensors(kind: str, tensors: Any) -> None:
    """Checks the optimizer's tensors in the dict's order, where the bindings take them as
    names and tensors (anything else keeps the bindings' error)."""
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
