# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The table of guarded sites, and the wrapping: each site's function is wrapped, or left alone
with one warning; an operator site gets kernels for the devices, or is left alone likewise.

A site is wrapped only if its function is where the table says and its leading parameters carry
the names that its wrapper in _sites expects; otherwise ExecuTorch's internals differ from the
releases this guard was written for, and that site keeps ExecuTorch's own behaviour. Loaded with
the first executorch.* import or status(), before torch: it imports what it needs when it
needs it. _sites, which imports torch, loads only when wrapping.
"""

import functools
import re
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple


class Site(NamedTuple):
    """A host read of tensor bytes in ExecuTorch, or a place where lowering a program exported on
    a device fails first, and the function of _sites that wraps it, by name: _sites imports
    torch, and this table is read at the first executorch import, before torch."""

    module: str
    qualname: str
    wrapper_name: str  # the wrapper's __name__, its key in _sites.WRAPPERS
    since: str  # the first executorch release that has it


class Operator(NamedTuple):
    """An operator of ExecuTorch's C++ custom ops library registered for every device
    (CompositeExplicitAutograd) with a kernel that reads host memory: on a device tensor it dies
    of SIGSEGV. Importing `module` loads the library, and _llm_sites.device_kernels then refuses
    device tensors for it; where ExecuTorch registers it for CPU alone, as the follow-up does,
    the site is skipped without a warning."""

    module: str
    qualname: str  # torch's name, "llama::custom_sdpa": all its overloads
    since: str  # the first executorch release that has it


# The module that loads ExecuTorch's LLM custom ops library (libcustom_ops_aot_lib).
CUSTOM_OPS = "executorch.extension.llm.custom_ops.custom_ops"

SITES: tuple[Site | Operator, ...] = (
    Site(
        "executorch.exir.emit._emitter",
        "_Emitter._tensor_spec_to_evalue",
        "emitter_constant",
        "1.0.0",
    ),
    Site(
        "executorch.exir.emit._emitter",
        "_Emitter._emit_prim_getters",
        "emitter_constant_methods",
        "1.0.0",
    ),
    Site(
        "executorch.devtools.bundled_program.core",
        "BundledProgram.serialize_to_schema",
        "bundled_values",
        "1.0.0",
    ),
    Site(
        "executorch.exir._serialize._named_data_store",
        "_tensor_to_bytes",
        "named_data_bytes",
        "1.2.0",
    ),
    Site(
        "executorch.backends.xnnpack.operators.node_visitor",
        "get_param_tensor",
        "xnnpack_constant",
        "1.0.0",
    ),
    Site(
        "executorch.backends.vulkan.serialization.vulkan_graph_builder",
        "VkGraphBuilder.get_param_tensor",
        "vulkan_constant",
        "1.0.0",
    ),
    Site(
        "executorch.exir.verification.verifier",
        "EXIRATenDialectVerifierBase.__call__",
        "aten_verifier",
        "1.0.0",
    ),
    Site(
        "executorch.exir.program._program",
        "_gen_edge_manager_for_partitioners",
        "edge_manager",
        "1.0.0",
    ),
    Site("executorch.exir.passes", "ToOutVarPass.call", "out_variants", "1.0.0"),
    Site("executorch.runtime", "Runtime.load_program", "runtime_program", "1.0.0"),
    Site("executorch.runtime", "Program.load_method", "runtime_method", "1.0.0"),
    Operator(CUSTOM_OPS, "llama::sdpa_with_kv_cache", "1.0.0"),
    Operator(CUSTOM_OPS, "llama::custom_sdpa", "1.0.0"),
    Operator(CUSTOM_OPS, "llama::custom_quantized_sdpa", "1.0.0"),
    Operator(CUSTOM_OPS, "llama::update_cache", "1.0.0"),
    Operator(CUSTOM_OPS, "llama::update_cache_with_indices", "1.0.0"),
    Operator(CUSTOM_OPS, "llama::fast_hadamard_transform", "1.0.0"),
    Operator(CUSTOM_OPS, "llama::channelwise_gated_delta_rule", "1.4.0"),
    Operator(CUSTOM_OPS, "llama::gated_delta_rule", "1.5.0"),
    Operator(CUSTOM_OPS, "llama::quantized_moe_ffn", "1.5.0"),
    Operator(CUSTOM_OPS, "preprocess::tile_crop", "1.0.0"),
    # The bindings where they are defined, and again where a package re-exports them: a name
    # bound there before the guard was installed holds the unguarded function.
    Site(
        "executorch.extension.llm.runner._llm_runner",
        "make_image_input",
        "llm_image_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner._llm_runner",
        "make_audio_input",
        "llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner._llm_runner",
        "make_raw_audio_input",
        "llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner",
        "make_image_input",
        "llm_image_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner",
        "make_audio_input",
        "llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner",
        "make_raw_audio_input",
        "llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_lib",
        "get_sgd_optimizer",
        "sgd_parameters",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_lib",
        "ExecuTorchSGD.step",
        "sgd_gradients",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_module",
        "_load_for_executorch_for_training",
        "training_program",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_module",
        "_load_for_executorch_for_training_from_buffer",
        "training_buffer",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_module",
        "TrainingModule.forward_backward",
        "training_inputs",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training",
        "get_sgd_optimizer",
        "sgd_parameters",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training",
        "_load_for_executorch_for_training",
        "training_program",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training",
        "_load_for_executorch_for_training_from_buffer",
        "training_buffer",
        "1.0.0",
    ),
)
MODULES = frozenset(site.module for site in SITES)


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


def wrapper(site: Site) -> Callable[..., Any]:
    """The function of _sites that wraps `site`, imported now, when torch is loaded."""
    from . import _sites

    return _sites.WRAPPERS[site.wrapper_name]


def patch_module(
    module: ModuleType, sites: tuple[Site | Operator, ...] = SITES
) -> None:
    """Wraps every site of `module` that is not wrapped (a reload makes new ones) or skipped,
    and registers the kernels of its operator sites."""
    for site in sites:
        name = f"{site.module}.{site.qualname}"
        if site.module != module.__name__ or name in SKIPPED:
            continue
        try:
            if isinstance(site, Operator):
                _register(name, site)
            else:
                _patch(name, module, site)
        except Exception as e:  # never break `import executorch`
            # A site that came later: nothing changed, nothing to say.
            if _release_before(site.since):
                SKIPPED[name] = (
                    f"not in executorch {_executorch_version()} (added in {site.since})"
                )
                continue
            if not WARNED:
                warnings.warn(
                    f"executorch-device-guard left {name} unpatched: {e}. This ExecuTorch differs from "
                    "the releases the guard supports, so the sites that differ keep their own behaviour; "
                    "`python -m executorch_device_guard` lists them.",
                    RuntimeWarning,
                    stacklevel=2,
                )
                WARNED.append(name)
            SKIPPED[name] = str(e)


def _executorch_version() -> str | None:
    # Imported here: the first executorch import loads this module.
    from importlib import metadata

    try:
        return metadata.version("executorch")
    except metadata.PackageNotFoundError:
        return None


def _release_before(since: str) -> bool:
    """Whether the installed executorch release is older than `since` (unknown: not older)."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", _executorch_version() or "")
    return found is not None and tuple(map(int, found.groups())) < tuple(
        map(int, since.split("."))
    )


def _patch(name: str, module: ModuleType, site: Site) -> None:
    *path, attr = site.qualname.split(".")
    owner: Any = functools.reduce(getattr, path, module)
    if attr not in vars(owner):
        raise AttributeError(f"{site.qualname} is not defined in {module.__name__}")
    original = vars(owner)[attr]
    for patched in PATCHED.values():
        # install() again, or a name that a module bound to another site's guarded function
        # (`from ._llm_runner import make_image_input`): already guarded, restored with the rest.
        if isinstance(patched, Patched) and patched.guarded is original:
            PATCHED[name] = Patched(owner, attr, patched.original, original)
            return
    around = wrapper(site)
    expected = _positional_names(around)[1:]
    found = _positional_names(original)[: len(expected)]
    if found != expected:
        raise TypeError(f"expected leading parameters {expected}, found {found}")

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
        SKIPPED[name] = (
            "registered for CPU only: ExecuTorch refuses other devices itself"
        )
    else:
        PATCHED[name] = Registered(library)


def _positional_names(function: Callable[..., Any]) -> list[str]:
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        parameters = inspect.signature(function).parameters.values()
    except ValueError:  # a pybind11 function or method, which inspect cannot read
        return _pybind11_positional_names(function)
    return [p.name for p in parameters if p.kind in kinds]


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
    """The guard's state; `installed`: whether _hook's finder is on sys.meta_path."""
    return Status(installed, _executorch_version(), sorted(PATCHED), dict(SKIPPED))
