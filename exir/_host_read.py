# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

from typing import Sequence

import torch
from executorch.exir.error import InternalError
from torch.export import ExportedProgram


def constant_name(program: ExportedProgram, node: torch.fx.Node) -> str:
    fqns = {s.arg.name: s.target for s in program.graph_signature.input_specs}
    return repr(fqns[node.name]) if fqns.get(node.name) else f"at node {node.name!r}"


def host_read_error(
    name: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> InternalError:
    if device.type == "meta":
        return InternalError(
            f"Constant {name} (shape {list(shape)}, dtype {dtype}) is a meta or fake tensor and holds no data to serialize. Load real values first."
        )
    return InternalError(
        f"Constant {name} (shape {list(shape)}, dtype {dtype}) is on {device}, but ExecuTorch serializes constants from host memory. "
        "Export on the CPU, or move the exported program with torch.export.passes.move_to_device_pass(exported_program, 'cpu') and lower it as usual. "
        "To run on the device, use a backend that owns device weights (CudaPartitioner)."
    )
