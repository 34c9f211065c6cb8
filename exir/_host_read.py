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
    name: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> InternalError:
    why = (
        "is a meta or fake tensor and holds no data to serialize. "
        "Load real values first."
        if device.type == "meta"
        else f"is on {device}, but ExecuTorch serializes constants from host memory. "
        "Export on the CPU, or move the exported program with "
        "torch.export.passes.move_to_device_pass(exported_program, 'cpu') and lower "
        "it as usual; to run on the device, lower with a backend that keeps weights "
        "on it (CudaPartitioner for CUDA)."
    )
    return InternalError(f"Constant {name} (shape {list(shape)}, dtype {dtype}) {why}")


def raise_for_device(
    error: Exception, *graph_modules: torch.fx.GraphModule
) -> NoReturn:
    for node in (node for module in graph_modules for node in module.graph.nodes):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type not in ("cpu", "meta"):
            raise type(error)(
                f"{str(error).strip().splitlines()[0]}\nThis program holds tensors on "
                f"{val.device} (at node {node.name!r}), where PyTorch chose its operators. "
                "Call torch.export.passes.move_to_device_pass(exported_program, 'cpu') "
                "before lowering, or keep it there with CudaPartitioner (for CUDA)."
            ) from error
    raise error
