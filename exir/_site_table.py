# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The table of guarded sites: where each is in ExecuTorch, since which release, and which of
the guard's functions wraps it. Read by the import hook at the first executorch import, before
torch is loaded, so it imports nothing but the standard library.
"""

from typing import NamedTuple


class Site(NamedTuple):
    """A function of ExecuTorch that reads tensor bytes on the host, or where lowering a program
    exported on a device fails first, and the guard's function that wraps it, by name: the
    wrappers import torch, and this table is read at the first executorch import, before torch."""

    module: str
    qualname: str
    wrapper: str  # "area module.function" in this package, e.g. "_export_sites.emitter_constant"
    since: str  # the first executorch release that has it


class Operator(NamedTuple):
    """An operator of ExecuTorch's C++ custom ops library registered for every device
    (CompositeExplicitAutograd) with a kernel that reads host memory: on a device tensor it dies
    of SIGSEGV. Importing `module` loads the library, and _llm_sites.device_kernels then refuses
    device tensors for it; where ExecuTorch registers it for the host alone, it refuses them
    itself, and the site is skipped without a warning."""

    module: str
    qualname: str  # torch's name, "llama::custom_sdpa": all its overloads
    since: str  # the first executorch release that has it


# The module that loads ExecuTorch's LLM custom ops library (libcustom_ops_aot_lib).
CUSTOM_OPS = "executorch.extension.llm.custom_ops.custom_ops"

SITES: tuple[Site | Operator, ...] = (
    Site(
        "executorch.exir.emit._emitter",
        "_Emitter._tensor_spec_to_evalue",
        "_export_sites.emitter_constant",
        "1.0.0",
    ),
    Site(
        "executorch.exir.emit._emitter",
        "_Emitter._emit_prim_getters",
        "_export_sites.emitter_constant_methods",
        "1.0.0",
    ),
    Site(
        "executorch.devtools.bundled_program.core",
        "BundledProgram.serialize_to_schema",
        "_export_sites.bundled_values",
        "1.0.0",
    ),
    Site(
        "executorch.exir._serialize._named_data_store",
        "_tensor_to_bytes",
        "_export_sites.named_data_bytes",
        "1.2.0",
    ),
    Site(
        "executorch.backends.xnnpack.operators.node_visitor",
        "get_param_tensor",
        "_export_sites.xnnpack_constant",
        "1.0.0",
    ),
    Site(
        "executorch.backends.vulkan.serialization.vulkan_graph_builder",
        "VkGraphBuilder.get_param_tensor",
        "_export_sites.vulkan_constant",
        "1.0.0",
    ),
    Site(
        "executorch.exir.verification.verifier",
        "EXIRATenDialectVerifierBase.__call__",
        "_export_sites.aten_verifier",
        "1.0.0",
    ),
    Site(
        "executorch.exir.program._program",
        "_gen_edge_manager_for_partitioners",
        "_export_sites.edge_manager",
        "1.0.0",
    ),
    Site(
        "executorch.exir.passes",
        "ToOutVarPass.call",
        "_export_sites.out_variants",
        "1.0.0",
    ),
    Site(
        "executorch.runtime",
        "Runtime.load_program",
        "_runtime_sites.runtime_program",
        "1.0.0",
    ),
    Site(
        "executorch.runtime",
        "Program.load_method",
        "_runtime_sites.runtime_method",
        "1.0.0",
    ),
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
        "_llm_sites.llm_image_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner._llm_runner",
        "make_audio_input",
        "_llm_sites.llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner._llm_runner",
        "make_raw_audio_input",
        "_llm_sites.llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner",
        "make_image_input",
        "_llm_sites.llm_image_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner",
        "make_audio_input",
        "_llm_sites.llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.llm.runner",
        "make_raw_audio_input",
        "_llm_sites.llm_audio_input",
        "1.1.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_lib",
        "get_sgd_optimizer",
        "_training_sites.sgd_parameters",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_lib",
        "ExecuTorchSGD.step",
        "_training_sites.sgd_gradients",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_module",
        "_load_for_executorch_for_training",
        "_training_sites.training_program",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_module",
        "_load_for_executorch_for_training_from_buffer",
        "_training_sites.training_buffer",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training.pybindings._training_module",
        "TrainingModule.forward_backward",
        "_training_sites.training_inputs",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training",
        "get_sgd_optimizer",
        "_training_sites.sgd_parameters",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training",
        "_load_for_executorch_for_training",
        "_training_sites.training_program",
        "1.0.0",
    ),
    Site(
        "executorch.extension.training",
        "_load_for_executorch_for_training_from_buffer",
        "_training_sites.training_buffer",
        "1.0.0",
    ),
)
MODULES = frozenset(site.module for site in SITES)
# Each wrapper once, by the name the table gives it.
WRAPPERS = tuple(
    dict.fromkeys(site.wrapper for site in SITES if isinstance(site, Site))
)
