# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

from collections.abc import Iterable, Sequence

import torch

# What the series says after where the tensor is, at each kind of site.
MOVE_PROGRAM = "Call torch.export.passes.move_to_device_pass(exported_program, 'cpu') before to_edge or to_edge_transform_and_lower"
CONSTANT_METHODS = "Pass host tensors in constant_methods"
BUNDLED = "Pass host tensors to MethodTestCase"
HOST_TENSORS = "Pass host tensors with .cpu()"
RUNTIME_INPUT = f"{HOST_TENSORS}, or, for a method meant to take device inputs, lower with CudaPartitioner and skip the input copies as https://docs.pytorch.org/executorch/main/backends/cuda/cuda-overview.html shows"
NO_DATA = "A meta or fake tensor holds no data"
# The emitter's, where a program's constants are its module's weights.
REAL_WEIGHTS = (
    f"{NO_DATA}: export the module with its real weights loaded in host memory"
)


def what_to_do(device: torch.device, way_out: str) -> str:
    """The way out of device memory at a site, unless the storage is on meta, which holds no
    data to move."""
    return NO_DATA if device.type == "meta" else way_out


def host_read_message(
    subject: str,
    shape: Sequence[int],
    dtype: torch.dtype,
    device: torch.device,
    advice: str,
) -> str:
    """The series' message where a host read of tensor bytes meets a storage off the host:
    `subject` names the tensor as the series' code at that site does ("Constant 'p_0_weight'",
    "XNNPACK constant 'p_0_weight'", "Bundled input 0 of test case 1 of method 'forward'"),
    and `advice`, what_to_do()'s answer at most sites, ends it."""
    return f"{subject} (shape {list(shape)}, dtype {dtype}) is on {device}, not in host memory. {advice}."


def device_note(graph_modules: Iterable[torch.fx.GraphModule]) -> str:
    """The paragraph that the series' follow-up adds where lowering fails: the first node
    holding a tensor on a device other than cpu or meta; '' for the others."""
    for graph_module in graph_modules:
        for node in graph_module.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor) and val.device.type not in ("cpu", "meta"):
                return (
                    f"\n\nThe program holds tensors on {val.device} (node {node.name!r}), "
                    "and operators decomposed for that device may have no CPU kernel. If "
                    "it is meant for the CPU, call torch.export.passes.move_to_device_pass("
                    "exported_program, 'cpu') before to_edge or to_edge_transform_and_lower."
                )
    return ""
