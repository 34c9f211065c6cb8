# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""ExecuTorch's LLM extensions: the kernels that refuse device tensors for its custom ops
(the site table's Operator rows), and the wrappers of the LLM runner's input functions, which copy a
tensor's bytes on the host. Loads no exporter: an LLM app imports only the runner.
"""

from collections.abc import Callable
from typing import Any, NoReturn

import torch

from ._host_read import HOST_TENSORS, host_read_message, refuse_off_host, what_to_do

Original = Callable[..., Any]


def _device_keys() -> tuple[str, ...]:
    """The dispatch key of each device that torch knows but the host and meta (CUDA, HIP, XLA,
    MPS, IPU, XPU, HPU, VE, Lazy, MTIA, MAIA, PrivateUse1 to 3 in torch 2.13), and of its
    quantized, sparse and nested tensors where this torch has one: torch's dense backends in its
    own order, so that a device torch adds is among them."""
    names = list(torch._C.DispatchKey.__members__)
    first, last = names.index("StartOfDenseBackends"), names.index("EndOfDenseBackends")
    devices = [key for key in names[first + 1 : last] if key not in ("CPU", "Meta")]
    found = []
    for functionality in ("", "Quantized", "Sparse", "SparseCsr", "NestedTensor"):
        for device in devices:
            try:
                torch._C._dispatch_key_parse(functionality + device)
            except RuntimeError:  # no such key in this torch
                continue
            found.append(functionality + device)
    return tuple(found)


# Memory the host does not read: each of these keys that would reach ExecuTorch's host kernel
# gets a kernel that refuses, as torch refuses a key for which an operator has no kernel.
DEVICE_KEYS = _device_keys()


def device_kernels(qualname: str) -> torch.library.Library | None:
    """A library that gives each overload of the operator, for each of DEVICE_KEYS without a
    kernel of its own, one that raises as torch does for an operator registered for the host
    alone: ExecuTorch registers its host kernels for every device (CompositeExplicitAutograd),
    where they read device memory as host memory. None where ExecuTorch registers them for the
    host alone, so that torch refuses other devices itself.

    A `.out` overload without a Meta kernel gets a refusal for Meta too: ExecuTorch's kernel
    would run on no data (abort or SIGSEGV). Functional overloads are left alone there: a fake
    kernel may be registered later, and before torch 2.13 register_fake refuses an operator
    with a Meta kernel. Of those, only preprocess::tile_crop lacks one in the supported releases
    (op_tile_crop_aot.py registers it when imported); without it, tile_crop on meta still
    crashes.

    These kernels make _dispatch_has_kernel_for_dispatch_key(overload, "CUDA") true; a real
    CUDA kernel registered later (in C++, or from Python from torch 2.13) replaces them, with
    torch's warning. Before torch 2.13, register_fake of a `.out` overload
    after the guard's Meta refusal is refused; ExecuTorch registers none."""
    namespace = qualname.split("::")[0]
    overloads = [
        name
        for name in torch._C._dispatch_get_all_op_names()
        if name == qualname or name.startswith(f"{qualname}.")
    ]
    if not overloads:
        raise LookupError(f"{qualname} is not registered")
    if all(
        torch._C._dispatch_has_kernel_for_dispatch_key(overload, "CPU")
        and not torch._C._dispatch_has_kernel_for_dispatch_key(
            overload, "CompositeExplicitAutograd"
        )
        for overload in overloads
    ):
        return None
    for overload in overloads:
        if not torch._C._dispatch_has_kernel_for_dispatch_key(
            overload, "CompositeExplicitAutograd"
        ):
            raise LookupError(f"{overload} has no kernel for every device")
    library = torch.library.Library(namespace, "IMPL")  # type: ignore[no-untyped-call, unused-ignore]
    for overload in overloads:
        keys = DEVICE_KEYS + (("Meta",) if overload.endswith(".out") else ())
        for key in keys:
            if torch._C._dispatch_has_computed_kernel_for_dispatch_key(
                overload, key
            ) and not torch._C._dispatch_has_kernel_for_dispatch_key(overload, key):
                library.impl(overload, _refusal(overload, key), key)  # type: ignore[no-untyped-call, unused-ignore]
    return library


def _refusal(overload: str, key: str) -> Callable[..., NoReturn]:
    """The kernel of `overload` for dispatch key `key`: torch's first sentence where an operator
    has no kernel for that key (torch 2.13's words), then, on purpose more than torch says, the
    first tensor off the CPU by its argument's name, its device and what to do."""
    namespace, name = overload.split("::")
    packet, _, overload_name = name.partition(".")
    operator = getattr(getattr(torch.ops, namespace), packet)
    schema = getattr(operator, overload_name or "default")._schema
    arguments = [argument.name for argument in schema.arguments]

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        if key == "Meta":
            message = (
                f"{overload}: attempted to run this operator with Meta tensors, but there "
                "was no fake impl or Meta kernel registered."
            )
        else:
            message = (
                f"Could not run '{overload}' with arguments from the '{key}' backend."
            )
        for argument, value in [*zip(arguments, args), *kwargs.items()]:
            if isinstance(value, torch.Tensor):
                device = value.untyped_storage().device
                if device.type != "cpu":
                    message += " " + host_read_message(
                        f"Argument {argument!r}",
                        value.shape,
                        value.dtype,
                        device,
                        what_to_do(device, HOST_TENSORS),
                    )
                    break
        raise NotImplementedError(message)

    return refuse


def llm_image_input(original: Original, image_tensor: Any) -> Any:
    """make_image_input, which copies the image's bytes on the host."""
    if isinstance(image_tensor, torch.Tensor):
        refuse_off_host(
            image_tensor,
            RuntimeError,
            HOST_TENSORS,
            "{}'s argument 'image_tensor'",
            original.__name__,
        )
    return original(image_tensor)


def llm_audio_input(original: Original, audio_tensor: Any) -> Any:
    """make_audio_input and make_raw_audio_input, which copy the audio's bytes on the host."""
    if isinstance(audio_tensor, torch.Tensor):
        refuse_off_host(
            audio_tensor,
            RuntimeError,
            HOST_TENSORS,
            "{}'s argument 'audio_tensor'",
            original.__name__,
        )
    return original(audio_tensor)
