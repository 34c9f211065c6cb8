# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Wraps the functions that _hook.SITES names, or leaves them alone with one warning.

_hook owns the table and the finder and passes in what this module needs from them; this module
never imports _hook, so the two do not import each other. A site is wrapped only if its function
is where the table says and its leading parameters carry the names that the wrapper in _sites
expects; otherwise ExecuTorch's internals differ from the releases this guard was written for,
and that site keeps ExecuTorch's own behaviour.
"""

import functools
import inspect
import re
import warnings
from importlib import metadata
from types import ModuleType
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

_MARK = "_executorch_device_guard"

# Site ("module.Class.function") -> (owner, attribute, original function), for uninstall.
PATCHED: Dict[str, Tuple[Any, str, Callable[..., Any]]] = {}
# Site -> why it was left alone; status() lists them all.
SKIPPED: Dict[str, str] = {}
# The one site warned about: the first that differs from the releases the guard was written for.
WARNED: List[str] = []


def patch_module(module: ModuleType, sites: Sequence[Tuple[str, str, str, str]]) -> None:
    """Wraps every site of `module` among `sites` (rows of _hook.SITES) that is not wrapped (a reload
    makes new ones) or skipped."""
    for module_name, qualname, wrapper, since in sites:
        site = f"{module_name}.{qualname}"
        if module_name == module.__name__ and site not in SKIPPED:
            try:
                _patch(site, module, qualname, wrapper)
            except Exception as e:  # never break `import executorch`
                if _release_before(since):  # the site came later: nothing changed, nothing to say
                    SKIPPED[site] = f"not in executorch {_executorch_version()} (added in {since})"
                    continue
                if not WARNED:
                    warnings.warn(
                        f"executorch-device-guard left {site} unpatched: {e}. This ExecuTorch "
                        "differs from the releases the guard supports, so the sites that differ "
                        "keep their own behaviour; `python -m executorch_device_guard` lists them.",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    WARNED.append(site)
                SKIPPED[site] = str(e)


@functools.lru_cache(maxsize=None)
def _executorch_version() -> Optional[str]:
    try:
        return metadata.version("executorch")
    except metadata.PackageNotFoundError:
        return None


def _release_before(since: str) -> bool:
    """Whether the installed executorch release is older than `since` (unknown: not older)."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", _executorch_version() or "")
    return found is not None and tuple(map(int, found.groups())) < tuple(map(int, since.split(".")))


def _patch(site: str, module: ModuleType, qualname: str, wrapper: str) -> None:
    *path, attr = qualname.split(".")
    owner: Any = functools.reduce(getattr, path, module)
    if attr not in vars(owner):
        raise AttributeError(f"{qualname} is not defined in {module.__name__}")
    original = vars(owner)[attr]
    if getattr(original, _MARK, False):  # wrapped already, maybe by another copy of this package
        return
    from . import _sites

    around = getattr(_sites, wrapper)
    expected = _positional_names(around)[1:]
    found = _positional_names(original)[: len(expected)]
    if found != expected:
        raise TypeError(f"expected leading parameters {expected}, found {found}")

    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        return around(original, *args, **kwargs)

    setattr(guarded, _MARK, True)
    setattr(owner, attr, guarded)
    PATCHED[site] = (owner, attr, original)


def _positional_names(function: Callable[..., Any]) -> List[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = inspect.signature(function).parameters.values()
    return [p.name for p in parameters if p.kind in kinds]


def restore_all() -> None:
    """Puts every original function back."""
    for owner, attr, original in PATCHED.values():
        setattr(owner, attr, original)
    PATCHED.clear()


class Status(NamedTuple):
    """Whether the guard is installed, on which ExecuTorch, and which sites it has patched so far."""

    installed: bool
    executorch_version: Optional[str]
    patched: List[str]
    skipped: Dict[str, str]


def status(installed: bool) -> Status:
    """The guard's state; `installed`: whether _hook's finder is on sys.meta_path."""
    return Status(installed, _executorch_version(), sorted(PATCHED), dict(SKIPPED))
