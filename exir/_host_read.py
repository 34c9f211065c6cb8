# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

from typing import NoReturn, Sequence

import torch
from executorch.exir.error import InternalError


def host_read_error(
    subject: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> InternalError:
    """The series' message at each host read of a constant: `subject` names the site's kind of
    constant and the constant, as the series' code there does ("Constant '0.weight'", "XNNPACK
    constant 'weight'", "XNNPACK per-channel scales of 'weight'", "Vulkan constant 'weight'")."""
    where = (
        "is a meta or fake tensor and holds no data"
        if device.type == "meta"
        else f"is on {device}, not in host memory. Call torch.export.passes"
        ".move_to_device_pass(exported_program, 'cpu') before lowering"
    )
    return InternalError(f"{subject} (shape {list(shape)}, dtype {dtype}) {where}.")


def raise_for_device(error: Exception, graph_module: torch.fx.GraphModule, chained: bool = True) -> NoReturn:
    """The series' lowering errors: the same type with the line that names the first node holding a
    tensor on a device other than cpu or meta, chained as the series' site does (the verifiers
    re-raise, ToOutVarPass raises its error with the line); `error` itself for any other program."""
    for node in graph_module.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type not in ("cpu", "meta"):
            raise type(error)(
                f"{str(error).rstrip()}\nThe program holds tensors on {val.device} (node "
                f"{node.name!r}), so its operators were chosen for that device; to lower it for the host, "
                "call torch.export.passes.move_to_device_pass(exported_program, 'cpu') first."
            ) from (error if chained else None)
    raise error
