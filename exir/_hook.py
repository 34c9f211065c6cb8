# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Wires the device guard into ExecuTorch lazily, from the startup .pth line.

Runs at every interpreter start, so it imports nothing beyond sys and os: a meta path finder
waits for the first import of an ExecuTorch module and, for the modules in _patch.SITES, patches
each right after it executes. _patch, which holds the table and does the wrapping, loads with
the first executorch.* import; torch and executorch are imported by the user's code, never here.

EXECUTORCH_DEVICE_GUARD (ENV_VAR) turns the guard off at interpreter start when its value is 0,
false, off or no, in any case, surrounding whitespace ignored. Anything else leaves it on: unset,
empty (a variable cleared, or filled from an empty setting), 1, true, on or yes, and any other
value too, which is a typo: startup() says so on stderr, once per process, naming the values it
knows. A guard against a crash stays on unless it is turned off by name.
"""

import os
import sys

ENV_VAR = "EXECUTORCH_DEVICE_GUARD"
OFF = ("0", "false", "off", "no")  # ENV_VAR's values that turn the guard off
ON = ("1", "true", "on", "yes")  # those that leave it on, as unset or empty does

if False:  # type checkers only: typing.TYPE_CHECKING would import typing at every start
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    from . import _patch


class _Finder:
    """Meta path finder that patches a guarded module right after its loader executes it."""

    def __init__(self) -> None:
        # Names being looked up through the other finders; importlib's per-module lock makes
        # this re-entrancy guard safe across threads.
        self._finding: set[str] = set()

    def find_spec(
        self,
        fullname: str,
        path: "Sequence[str] | None",
        target: "ModuleType | None" = None,
    ) -> "ModuleSpec | None":
        if not fullname.startswith("executorch.") or fullname in self._finding:
            return None
        import functools
        import importlib.util

        from . import _patch

        if fullname not in _patch.MODULES:
            return None
        self._finding.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.discard(fullname)
        loader = spec.loader if spec else None
        exec_module = getattr(loader, "exec_module", None)
        # A loader shared by several specs may have been wrapped already.
        if (
            exec_module is not None
            and getattr(exec_module, "func", None) is not _exec_and_patch
        ):
            try:
                loader.exec_module = functools.partial(_exec_and_patch, exec_module)  # type: ignore[union-attr, method-assign]
            except AttributeError:  # a loader with read-only attributes: leave it alone
                pass
        return spec


def _exec_and_patch(exec_module: object, module: object) -> None:
    exec_module(module)  # type: ignore[operator]
    from . import _patch

    _patch.patch_module(module)  # type: ignore[arg-type]


def finder() -> "_Finder | None":
    for found in sys.meta_path:
        if isinstance(found, _Finder):
            return found
    return None


def turned_off() -> str | None:
    """ENV_VAR's value where it turns the guard off (the module docstring's rule), else None."""
    value = os.environ.get(ENV_VAR, "")
    return value if value.strip().lower() in OFF else None


def unknown() -> str | None:
    """ENV_VAR's value where it is none of OFF, ON or empty: a typo, which leaves the guard on."""
    value = os.environ.get(ENV_VAR, "")
    return value if value.strip() and value.strip().lower() not in OFF + ON else None


def startup() -> None:
    """Called by the .pth line at interpreter start: install unless turned_off(), saying so
    where the switch holds an unknown() value. The line goes to sys.stderr, not through
    warnings: that module is not loaded at a plain interpreter start, and its warning would point
    at the .pth line ("<string>:1"), which is no place a user can change. Runs once: in a venv,
    site.py may read the .pth file twice (its venv step, then its main one: Python 3.11)."""
    if turned_off() is not None or finder() is not None:
        return
    typo = unknown()
    if typo is not None and sys.stderr is not None:
        sys.stderr.write(
            f"executorch-device-guard: {ENV_VAR}={typo!r} is not a value it knows, so the guard "
            f"stays on; {', '.join(OFF)} turn it off, {', '.join(ON)} or empty leave it on.\n"
        )
    install()


def install() -> None:
    """Guards the ExecuTorch modules imported from now on and those already imported. Idempotent."""
    if finder() is None:
        sys.meta_path.insert(0, _Finder())
    if any(name.startswith("executorch.") for name in sys.modules):
        from . import _patch

        for name in sorted(_patch.MODULES & set(sys.modules)):
            _patch.patch_module(sys.modules[name])


def uninstall() -> None:
    """Removes the finder, restores every patched function and forgets skips and warnings."""
    installed = finder()
    if installed is not None:
        sys.meta_path.remove(installed)
    if "executorch_device_guard._patch" in sys.modules:
        from . import _patch

        _patch.restore_all()


def status() -> "_patch.Status":
    """Reports the guard's state; loads _patch, but neither torch nor executorch."""
    from . import _patch

    return _patch.status(finder() is not None)
