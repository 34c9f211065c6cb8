# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Wires the device guard into ExecuTorch lazily, from the startup .pth line.

Runs at every interpreter start, so it imports nothing beyond sys and os: a meta path finder
waits for the first import of a module in the site table (_site_table, loaded then) and lends
that one import a loader of the guard's, which runs ExecuTorch's own loader and then wraps the
module's sites (_wrapping). The module keeps ExecuTorch's loader as its __loader__ and
__spec__.loader (wrapt's chained loader), so nothing of ExecuTorch's refers to the guard once
uninstall() has put the functions back. torch and executorch are imported by the user's code,
never here.

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
    from typing import Any

    from . import _wrapping


class _Finder:
    """Meta path finder that gives a guarded module's import the guard's loader."""

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
        from . import _site_table

        if fullname not in _site_table.MODULES:
            return None
        self._finding.add(fullname)
        try:
            spec = self._find_with_others(fullname, path, target)
        finally:
            self._finding.discard(fullname)
        if spec is None:
            return None
        if not hasattr(spec.loader, "exec_module"):
            from . import _wrapping

            _wrapping.left_alone(
                fullname,
                f"its loader, {type(spec.loader).__name__}, has no exec_module to wrap",
            )
            return spec
        spec.loader = _Loader(spec.loader)  # type: ignore[assignment]
        return spec

    def _find_with_others(
        self,
        fullname: str,
        path: "Sequence[str] | None",
        target: "ModuleType | None",
    ) -> "ModuleSpec | None":
        """The spec that the import system would find without this finder: a new one for each
        import or reload, so the guard's loader is lent to that import alone."""
        for other in sys.meta_path:
            find_spec = getattr(other, "find_spec", None)
            if other is not self and find_spec is not None:
                spec: ModuleSpec | None = find_spec(fullname, path, target)
                if spec is not None:
                    return spec
        return None


class _Loader:
    """ExecuTorch's loader of a guarded module for one import, followed by the wrapping of the
    module's sites; anything else is ExecuTorch's loader's."""

    def __init__(self, loader: "Any") -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> "Any":
        return getattr(self.loader, name)

    def exec_module(self, module: "ModuleType") -> None:
        # The module's own references go back to ExecuTorch's loader before its code runs.
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        if getattr(module.__spec__, "loader", None) is self:
            module.__spec__.loader = self.loader  # type: ignore[union-attr]
        self.loader.exec_module(module)
        from . import _wrapping

        _wrapping.patch_module(module)


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
        from . import _site_table, _wrapping

        for name in sorted(_site_table.MODULES & set(sys.modules)):
            _wrapping.patch_module(sys.modules[name])


def uninstall() -> None:
    """Removes the finder, restores every patched function and forgets skips and warnings."""
    installed = finder()
    if installed is not None:
        sys.meta_path.remove(installed)
    if f"{__package__}._wrapping" in sys.modules:
        from . import _wrapping

        _wrapping.restore_all()


def status() -> "_wrapping.Status":
    """Reports the guard's state; loads _wrapping, but neither torch nor executorch."""
    from . import _wrapping

    return _wrapping.status(finder() is not None)
