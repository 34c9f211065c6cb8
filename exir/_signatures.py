# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The names of a function's positional parameters, for Python functions and for pybind11
bindings, which inspect cannot read: the guard wraps a site only where ExecuTorch's function
still takes the parameters that its wrapper relies on."""

import inspect
import re
from collections.abc import Callable
from typing import Any

_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)


def positional_names(function: Callable[..., Any]) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except ValueError:  # a pybind11 function or method
        return _pybind11_positional_names(function)
    return [p.name for p in parameters if p.kind in _POSITIONAL]


def _pybind11_positional_names(function: Callable[..., Any]) -> list[str]:
    """The positional parameter names in the signature that pybind11 writes as the first line
    of a function's docstring, `name(a: T, b: U = 1) -> R`; `*args` and the keyword-only
    parameters come after a `*`. One overload only: an overloaded function's docstring
    starts otherwise."""
    found = re.match(
        rf"{re.escape(function.__name__)}\((.*)\) -> ", function.__doc__ or ""
    )
    if found is None:
        raise TypeError(f"no signature found for {function.__name__}")
    positional = found[1].partition("*")[0]
    return re.findall(r"(?:^|, )(\w+): ", positional)
