# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

from typing import Sequence

import torch
from executorch.exir.error import InternalError


def host_read_error(
    name: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> InternalError:
    detail = (
        "is a meta or fake tensor and holds no data to serialize. Load real values first."
        if device.type == "meta"
        else f"is on {device}, but ExecuTorch serializes constants from host memory. "
        "Export on the CPU, or move the exported program with torch.export.passes.move_to_device_pass(exported_program, 'cpu') and lower it as usual; "
        "to run on the device, lower with a backend that keeps weights on it (CudaPartitioner for CUDA)."
    )
    return InternalError(f"Constant {name} (shape {list(shape)}, dtype {dtype}) {detail}")
