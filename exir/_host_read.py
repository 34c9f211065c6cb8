# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

from collections.abc import Iterable, Sequence
from typing import NoReturn

import torch


def host_read_message(
    subject: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> str:
    """The series' message at each host read of a constant: `subject` names the site's kind of
    constant and the constant, as the series' code there does ("Constant 'p_0_weight'", "XNNPACK
    constant 'weight'", "XNNPACK per-channel scales of 'weight'", "Vulkan constant 'weight'")."""
    where = (
        "is a meta or fake tensor and holds no data"
        if device.type == "meta"
        else f"is on {device}, not in host memory. Call torch.export.passes"
        ".move_to_device_pass(exported_program, 'cpu') before lowering"
    )
    return f"{subject} (shape {list(shape)}, dtype {dtype}) {where}."


def device_hint(graph_module: torch.fx.GraphModule) -> str:
    """The paragraph that the series' follow-up adds where lowering fails: the first node
    holding a tensor on a device other than cpu or meta, and the way out; '' for the others."""
    for node in graph_module.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type not in ("cpu", "meta"):
            return (
                f"\n\nThe program holds tensors on {val.device} (node {node.name!r}); "
                "operators decomposed on that device may have no portable kernel. To lower "
                "it for the CPU, call torch.export.passes.move_to_device_pass("
                "exported_program, 'cpu') before to_edge or to_edge_transform_and_lower."
            )
    return ""


def raise_with_device_hint(
    error: Exception, graph_modules: Iterable[torch.fx.GraphModule]
) -> NoReturn:
    """`error` again, with its traceback, and with the device_hint of the first of
    `graph_modules` that has one, as the follow-up raises it; as it is if none has one, or
    it has it."""
    if "The program holds tensors on " not in str(error):
        for graph_module in graph_modules:
            hint = device_hint(graph_module)
            if hint:
                error.args = (f"{str(error).rstrip()}{hint}", *error.args[1:])
                break
    raise error
