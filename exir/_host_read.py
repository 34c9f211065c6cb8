# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the guard says where ExecuTorch would read a tensor's bytes in host memory and the
tensor's storage is elsewhere: the check on the storage's device (a tensor's own device can be
a fake tensor's, whose storage is on meta), and the message naming the tensor, its shape, dtype
and device, and the way out at that site. Every site's error is built here."""

from collections.abc import Sequence

import torch

# The way out, by kind of site.
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
    """`subject` names the tensor as ExecuTorch knows it at that site ("Constant 'p_0_weight'",
    "Bundled input 0 of test case 1 of method 'forward'"), and `advice`, what_to_do()'s answer
    at most sites, ends it."""
    return f"{subject} (shape {list(shape)}, dtype {dtype}) is on {device}, not in host memory. {advice}."


def refuse_off_host(
    tensor: torch.Tensor,
    error: type[Exception],
    way_out: str,
    subject: str,
    *names: object,
) -> None:
    """Raises `error` where `tensor` has bytes outside host memory; an empty one has none to
    read. `subject` is a format string of `names`, filled only when raising, so that the
    success path builds no string."""
    device = tensor.untyped_storage().device
    if device.type != "cpu" and tensor.numel() != 0:
        raise error(
            host_read_message(
                subject.format(*names),
                tensor.shape,
                tensor.dtype,
                device,
                what_to_do(device, way_out),
            )
        )
