# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Wraps the sites of an ExecuTorch module as the site table says, and puts everything back.

A site is wrapped only if its function is where the table says and its leading parameters carry
the names that its wrapper expects; otherwise ExecuTorch's internals differ from the releases
the guard was written for, and that site keeps ExecuTorch's own behaviour, with one warning. An
operator site gets kernels that refuse device tensors, or is left alone likewise. The wrappers,
which import torch, are imported only when a site of theirs is wrapped.
"""

import functools
import importlib
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

from . import _release
from ._signatures import positional_names
from ._site_table import SITES, Operator, Site


class Patched(NamedTuple):
    owner: Any  # the module or class that holds the function
    attr: str
    original: Callable[..., Any]
    guarded: Callable[..., Any]


class Registered(NamedTuple):
    library: Any  # the torch.library.Library that holds an operator site's kernels


# What the guard has done in this process; restore_all() empties all three. WARNED holds the
# one site warned about: the first that differs from the supported releases.
PATCHED: dict[str, Patched | Registered] = {}  # site -> its wrapping or kernels
SKIPPED: dict[str, str] = {}  # site -> why it was left alone
WARNED: list[str] = []
# Why an operator site is left alone where ExecuTorch registers its kernel for the host alone.
HOST_ONLY = "registered for CPU only: ExecuTorch refuses other devices itself"


def site_name(site: Site | Operator) -> str:
    return f"{site.module}.{site.qualname}"


def wrapper_home(name: str) -> tuple[ModuleType, str]:
    """The module of this package that holds the wrapper `name` ("area module.function", as the
    site table names it), imported now, and the function's name there."""
    module, _, function = name.rpartition(".")
    return importlib.import_module(f"{__package__}.{module}"), function


def wrapper(site: Site) -> Callable[..., Any]:
    """The guard's function that wraps `site`."""
    wrappers, function = wrapper_home(site.wrapper)
    found: Callable[..., Any] = getattr(wrappers, function)
    return found


def patch_module(
    module: ModuleType, sites: tuple[Site | Operator, ...] = SITES
) -> None:
    """Wraps every site of `module` that is not wrapped (a reload makes new ones) or skipped,
    and registers the kernels of its operator sites."""
    for site in sites:
        name = site_name(site)
        if site.module != module.__name__ or name in SKIPPED:
            continue
        try:
            if isinstance(site, Operator):
                _register(name, site)
            else:
                _patch(name, module, site)
        except Exception as e:  # never break `import executorch`
            # A site that came later: nothing changed, nothing to say.
            if _release.before(site.since):
                SKIPPED[name] = (
                    f"not in executorch {_release.installed()} (added in {site.since})"
                )
                continue
            if not WARNED:
                warnings.warn(
                    f"executorch-device-guard left {name} unpatched on executorch "
                    f"{_release.installed()}: {e}. This ExecuTorch differs from the releases "
                    "the guard supports, so the sites that differ keep their own behaviour; "
                    "`python -m executorch_device_guard` lists them.",
                    RuntimeWarning,
                    stacklevel=2,
                )
                WARNED.append(name)
            SKIPPED[name] = str(e)


def left_alone(module: str, why: str) -> None:
    """Records every site of `module` as left alone, for status(): the import hook could not
    reach the module."""
    for site in SITES:
        if site.module == module:
            SKIPPED[site_name(site)] = why


def _patch(name: str, module: ModuleType, site: Site) -> None:
    # Looked up in the namespaces themselves: getattr on a module that is still executing
    # would blame a circular import for a function that moved.
    *path, attr = site.qualname.split(".")
    owner: Any = module
    for part in path:
        owner = getattr(owner, "__dict__", {}).get(part)
    if attr not in getattr(owner, "__dict__", {}):
        raise LookupError(f"moved: {site.qualname} is not defined in {module.__name__}")
    original = vars(owner)[attr]
    for patched in PATCHED.values():
        # install() again, or a name that a module bound to another site's guarded function
        # (`from ._llm_runner import make_image_input`): already guarded, restored with the rest.
        if isinstance(patched, Patched) and patched.guarded is original:
            PATCHED[name] = Patched(owner, attr, patched.original, original)
            return
    around = wrapper(site)
    expected = positional_names(around)[1:]
    found = positional_names(original)[: len(expected)]
    if found != expected:
        raise TypeError(
            f"changed: expected leading parameters {expected}, found {found}"
        )

    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        return around(original, *args, **kwargs)

    setattr(owner, attr, guarded)
    PATCHED[name] = Patched(owner, attr, original, guarded)


def _register(name: str, site: Operator) -> None:
    if name in PATCHED:  # install() again, or a reload: the kernels outlive the module
        return
    from . import _llm_sites

    library = _llm_sites.device_kernels(site.qualname)
    if library is None:
        SKIPPED[name] = HOST_ONLY
    else:
        PATCHED[name] = Registered(library)


def restore_all() -> None:
    """Puts every original function back, removes the operator sites' kernels, and forgets the
    skipped sites and the warning."""
    for patched in PATCHED.values():
        if isinstance(patched, Registered):
            patched.library._destroy()
        else:
            setattr(patched.owner, patched.attr, patched.original)
    PATCHED.clear()
    SKIPPED.clear()
    WARNED.clear()


class Status(NamedTuple):
    """Whether the guard is installed, on which ExecuTorch, and which sites it has patched so far."""

    installed: bool
    executorch_version: str | None
    patched: list[str]
    skipped: dict[str, str]


def status(installed: bool) -> Status:
    """The guard's state; `installed`: whether the import hook's finder is on sys.meta_path."""
    version = _release.installed()
    return Status(
        installed,
        None if version is None else str(version),
        sorted(PATCHED),
        dict(SKIPPED),
    )
