# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Wires the device guard into ExecuTorch lazily, from the startup .pth line.

Runs at every interpreter start, so it imports nothing beyond sys and os: a meta path finder waits
for the first import of a guarded ExecuTorch module and patches it right after the module executes
(after virtualenv's _virtualenv.py finder). torch and executorch are imported by the user's code,
never by this module. It owns the table of sites and the finder; _patch, loaded only once there is
something to wrap or to report, does the wrapping and never imports this module back.
"""

import os
import sys

ENV_VAR = "EXECUTORCH_DEVICE_GUARD"

# Every place where ExecuTorch reads tensor bytes on the host, and the three where lowering a
# program exported on a device fails first: (module, attribute, function in _sites that wraps it,
# first executorch release that has it). Adding a site is one row here and
# one function in _sites.
SITES: tuple[tuple[str, str, str, str], ...] = (
    ("executorch.exir.emit._emitter", "_Emitter._tensor_spec_to_evalue", "emitter_constant", "1.0.0"),
    ("executorch.exir.emit._emitter", "_Emitter._emit_prim_getters", "emitter_constant_methods", "1.0.0"),
    ("executorch.devtools.bundled_program.core", "BundledProgram._emit_bundled_tensor", "bundled_tensor", "1.0.0"),
    ("executorch.exir._serialize._named_data_store", "NamedDataStore.add_named_data", "named_data", "1.0.0"),
    ("executorch.exir._serialize._named_data_store", "_tensor_to_bytes", "named_data_bytes", "1.2.0"),
    ("executorch.backends.xnnpack.operators.node_visitor", "get_param_tensor", "xnnpack_constant", "1.0.0"),
    ("executorch.backends.xnnpack.operators.node_visitor", "NodeVisitor.get_quant_params", "xnnpack_quant_scales", "1.0.0"),
    ("executorch.backends.vulkan.serialization.vulkan_graph_builder", "VkGraphBuilder.get_param_tensor", "vulkan_constant", "1.0.0"),
    ("executorch.exir.verification.verifier", "EXIRATenDialectVerifierBase.__call__", "lowering_verifier", "1.0.0"),
    ("executorch.exir.program._program", "_generate_edge_program", "edge_program", "1.0.0"),
    ("executorch.exir.passes", "ToOutVarPass.call", "out_variants", "1.0.0"),
)
_MODULES = frozenset(site[0] for site in SITES)


class _Finder:
    """Meta path finder that patches a guarded module right after its loader executes it."""

    def __init__(self) -> None:
        # Names being looked up through the other finders; importlib's per-module lock makes this
        # re-entrancy guard safe across threads.
        self._finding: set[str] = set()

    def find_spec(self, fullname: str, path: object, target: object = None) -> object:
        if fullname not in _MODULES or fullname in self._finding:
            return None
        import functools
        import importlib.util

        self._finding.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.discard(fullname)
        exec_module = getattr(spec.loader, "exec_module", None) if spec else None
        # A loader shared by several specs may have been wrapped already.
        if exec_module is not None and getattr(exec_module, "func", None) is not _exec_and_patch:
            try:
                spec.loader.exec_module = functools.partial(_exec_and_patch, exec_module)
            except AttributeError:  # a loader with read-only attributes: leave the module alone
                pass
        return spec


def _exec_and_patch(exec_module: object, module: object) -> None:
    exec_module(module)  # type: ignore[operator]
    from . import _patch

    _patch.patch_module(module, SITES)


def finder() -> "_Finder | None":
    return next((f for f in sys.meta_path if isinstance(f, _Finder)), None)


def startup() -> None:
    """Called by the .pth line at interpreter start: install unless EXECUTORCH_DEVICE_GUARD=0."""
    if os.environ.get(ENV_VAR, "1") != "0":
        install()


def install() -> None:
    """Guards the ExecuTorch modules imported from now on and those already imported. Idempotent."""
    if finder() is None:
        sys.meta_path.insert(0, _Finder())
    loaded = [sys.modules[name] for name in sorted(_MODULES) if name in sys.modules]
    if loaded:
        from . import _patch

        for module in loaded:
            _patch.patch_module(module, SITES)


def uninstall() -> None:
    """Removes the finder and restores every patched ExecuTorch function."""
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
