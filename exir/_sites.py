# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The wrappers that _patch puts, one for each row of _patch.SITES, around ExecuTorch's host reads
of tensor bytes, and around the three places where lowering a program exported on a device fails
before the emitter; and the kernels that refuse device tensors for the operator sites.

Each takes the original function first, then the leading parameters it relies on, named as in
ExecuTorch: _patch compares those names with the original's signature before it wraps anything.
Each does what the upstream series (upstream/) does at that site: raise its error before a host
read of device memory (messages built in _host_read; upstream/test_behaviour.py compares them
word for word), store a view's own elements, or add the device to a lowering error. Nothing is
copied to the host. Names are computed only when raising. Imported only once a guarded
ExecuTorch module has been imported, so torch is loaded.
"""

import os
import traceback
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import torch
from torch._export.verifier import SpecViolationError

from ._host_read import (
    BUNDLED,
    CONSTANT_METHODS,
    HOST_TENSORS,
    MOVE_PROGRAM,
    REAL_WEIGHTS,
    RUNTIME_INPUT,
    device_note,
    host_read_message,
    what_to_do,
)
from ._patch import _release_before
from ._program_plan import InputPlan, Source

Original = Callable[..., Any]


def emitter_constant(
    original: Original, self: Any, spec: Any, *args: Any, **kwargs: Any
) -> Any:
    if spec.const:
        device = spec.storage.device
        if device.type != "cpu" and spec.allocated_memory != 0:
            # Imported here: the LLM runner's sites, also in this module, load no exir.
            from executorch.exir.error import InternalError

            advice = REAL_WEIGHTS if device.type == "meta" else MOVE_PROGRAM
            message = host_read_message(
                f"Constant {self.node.name!r}", spec.shape, spec.dtype, device, advice
            )
            raise InternalError(self._emit_node_specific_error(self.node, message))
    return original(self, spec, *args, **kwargs)


def emitter_constant_methods(
    original: Original,
    self: Any,
    prim_getters: dict[str, Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """The series' check of each constant_methods tensor, in _emit_prim_getters' order and
    before any read, up to the first value that _emit_prim_getters refuses itself."""
    from executorch.exir.error import InternalError
    from executorch.extension import pytree

    supported = (float, bool, int, str, torch.dtype, torch.layout)
    for method, values in prim_getters.items():
        for value in pytree.tree_flatten(values)[0]:
            if isinstance(value, torch.Tensor):
                device = value.untyped_storage().device
                if device.type != "cpu" and value.numel() != 0:
                    raise InternalError(
                        host_read_message(
                            f"Constant {method!r}",
                            value.shape,
                            value.dtype,
                            device,
                            CONSTANT_METHODS,
                        )
                    )
            elif not isinstance(value, supported):
                return original(self, prim_getters, *args, **kwargs)
    return original(self, prim_getters, *args, **kwargs)


def _bundled_tensors(suites: Any) -> Iterator[tuple[str, int, int, str, torch.Tensor]]:
    """serialize_to_schema's tensors in its order, each with its kind, position, test case
    and method; up to the first value that it refuses itself."""
    for suite in suites:
        for case_index, case in enumerate(suite.test_cases):
            for position, value in enumerate(case.inputs):
                if type(value) is torch.Tensor:
                    yield "input", position, case_index, suite.method_name, value
                elif type(value) not in (int, bool, float):
                    return
            for position, value in enumerate(case.expected_outputs):
                if type(value) is not torch.Tensor:
                    return
                yield "expected output", position, case_index, suite.method_name, value


def bundled_values(original: Original, self: Any, *args: Any, **kwargs: Any) -> Any:
    """The follow-up's check of each value that serialize_to_schema reads, in its order and
    before any read: it raises where the follow-up would, with the same name."""
    if getattr(self, "_bundled_program_in_schema", None) is None:
        for kind, position, case, method, tensor in _bundled_tensors(
            self.method_test_suites
        ):
            device = tensor.untyped_storage().device
            if device.type != "cpu" and tensor.numel() != 0:
                name = f"Bundled {kind} {position} of test case {case} of method {method!r}"
                message = host_read_message(
                    name,
                    tensor.shape,
                    tensor.dtype,
                    device,
                    what_to_do(device, BUNDLED),
                )
                raise RuntimeError(message)
    return original(self, *args, **kwargs)


def named_data_bytes(original: Original, tensor: torch.Tensor) -> Any:
    """The tensor's own elements in its dim order, not its whole storage (upstream stores the
    storage of any non-contiguous tensor, so a channels-last view stores other tensors' data)."""
    if not tensor.is_contiguous():
        from executorch.exir.tensor import dim_order_from_stride

        tensor = tensor.permute(dim_order_from_stride(tensor.stride())).contiguous()
        return tensor.view(torch.uint8).numpy().tobytes()  # numpy has no float8
    return original(tensor)


def xnnpack_constant(original: Original, exp_prog: Any, node: Any) -> Any:
    tensor = original(exp_prog, node)
    if isinstance(tensor, torch.Tensor):
        device = tensor.untyped_storage().device
        if device.type != "cpu" and tensor.numel() != 0:
            raise RuntimeError(
                host_read_message(
                    f"XNNPACK constant {node.name!r}",
                    tensor.shape,
                    tensor.dtype,
                    device,
                    what_to_do(device, MOVE_PROGRAM),
                )
            )
    return tensor


def vulkan_constant(original: Original, self: Any, node: Any) -> Any:
    tensor = original(self, node)
    device = tensor.untyped_storage().device
    if device.type != "cpu" and tensor.numel() != 0:
        raise RuntimeError(
            host_read_message(
                f"Vulkan constant {node.name!r}",
                tensor.shape,
                tensor.dtype,
                device,
                what_to_do(device, MOVE_PROGRAM),
            )
        )
    return tensor


def aten_verifier(original: Original, self: Any, *args: Any, **kwargs: Any) -> Any:
    """The ATen-dialect check that to_edge runs on each program's graph module, whose error
    the follow-up chains to one that ends with device_note."""
    try:
        return original(self, *args, **kwargs)
    except SpecViolationError as error:
        if note := device_note(a for a in args if isinstance(a, torch.fx.GraphModule)):
            raise SpecViolationError(f"{error}{note}") from error
        raise


def edge_manager(
    original: Original, partitioner: Any, aten_programs: Any, *args: Any, **kwargs: Any
) -> Any:
    """to_edge_transform_and_lower's conversion of its programs, where the follow-up does
    the same with the programs' graphs."""
    try:
        return original(partitioner, aten_programs, *args, **kwargs)
    except SpecViolationError as error:
        graphs = (program.graph_module for program in aten_programs.values())
        if note := device_note(graphs):
            raise SpecViolationError(f"{error}{note}") from error
        raise


def out_variants(original: Original, self: Any, graph_module: Any) -> Any:
    """ToOutVarPass, whose error the follow-up builds with device_note of the graph module that
    lacks out variants. The pass calls itself for control flow: only the call whose own frame
    raised adds the note, so an error passes the calls around it as it is."""
    try:
        return original(self, graph_module)
    except RuntimeError as error:
        *_, (raised_in, _) = traceback.walk_tb(error.__traceback__)
        own = raised_in.f_locals.get("graph_module") is graph_module
        if own and str(error).startswith("Missing out variants"):
            # The series builds its message with the note where it raises: the same error,
            # raised in the same frame, with no cause.
            if note := device_note([graph_module]):
                error.args = (f"{error}{note}",)
        raise


# executorch.runtime's programs and methods loaded while the guard was on: where each program's
# bytes are, and each method's InputPlan. Weak: ExecuTorch's objects live as they would.
_program_sources: "weakref.WeakKeyDictionary[Any, Source]" = weakref.WeakKeyDictionary()
_method_plans: "weakref.WeakKeyDictionary[Any, InputPlan]" = weakref.WeakKeyDictionary()
# From executorch 1.5.0 the bindings refuse an input on a device other than the CPU or CUDA.
_BINDINGS_REFUSE_OTHER_DEVICES = not _release_before("1.5.0")


def runtime_program(
    original: Original, self: Any, data: Any, *args: Any, **kwargs: Any
) -> Any:
    """Keeps where the program's bytes are: its absolute path (the working directory may
    change before the guard reads it), or the bytes that the Program holds."""
    program = original(self, data, *args, **kwargs)
    path = isinstance(data, (str, os.PathLike))
    _program_sources[program] = os.path.abspath(data) if path else program._data
    return program


def runtime_method(original: Original, self: Any, name: str) -> Any:
    method = original(self, name)
    if self in _program_sources and method not in _method_plans:
        _method_plans[method] = InputPlan(_program_sources[self], name)
    return method


def runtime_inputs(original: Original, self: Any, inputs: Sequence[Any]) -> Any:
    """The follow-up's check where the bindings convert each input, in their order, up to the
    first input they refuse themselves: a CUDA tensor for an input that the method reads in host
    memory. Before 1.5.0 the bindings take a tensor on any device, which the method reads on the
    host: those raise too. Host inputs, every call's path, cost one device check each."""
    for value in inputs:
        if (
            type(value) is torch.Tensor
            and value.layout == torch.strided  # sparse tensors have no storage to ask
            and value.untyped_storage().device.type != "cpu"
        ):
            break
    else:
        return original(self, inputs)
    plan = _method_plans.get(self)
    if plan is None:  # loaded before the guard was on
        return original(self, inputs)
    for index, value in enumerate(inputs):
        if type(value) is not torch.Tensor:  # exactly, as the bindings take it
            if value is None or isinstance(value, (int, float)):
                continue
            break
        if value.layout != torch.strided:  # the bindings' to refuse
            break
        if not value.is_contiguous() and not (
            value.dim() == 4 and value.is_contiguous(memory_format=torch.channels_last)
        ):
            break
        device = value.untyped_storage().device
        if device.type == "cpu" or value.numel() == 0:
            continue
        if device.type == "cuda":
            refused = index in plan.host_inputs
        elif _BINDINGS_REFUSE_OTHER_DEVICES:
            break
        else:
            refused = True
        if refused:
            raise RuntimeError(
                host_read_message(
                    f"Input {index} of method {plan.method!r}",
                    value.shape,
                    value.dtype,
                    device,
                    what_to_do(
                        device, RUNTIME_INPUT if device.type == "cuda" else HOST_TENSORS
                    ),
                )
            )
    return original(self, inputs)


# The dispatch keys of devices whose memory the host does not read; HIP tensors dispatch as CUDA.
# The follow-up refuses every key but CPU; the guard refuses these, a subset.
DEVICE_KEYS = ("CUDA", "XPU", "MPS")


def device_kernels(qualname: str) -> torch.library.Library | None:
    """A library that gives each overload of the operator, for each of DEVICE_KEYS without a
    kernel of its own, one that raises where the follow-up's torch refuses the call: the
    follow-up registers the host kernels for CPU alone, not for every device. None where
    ExecuTorch already does so.

    A `.out` overload without a Meta kernel gets a refusal for Meta too, as in the follow-up:
    ExecuTorch's kernel would run on no data (abort or SIGSEGV). Functional overloads are left
    alone there: a fake kernel may be registered later, and before torch 2.13 register_fake
    refuses an operator with a Meta kernel. Of those, only preprocess::tile_crop lacks one in
    the supported releases (op_tile_crop_aot.py registers it when imported); without it,
    tile_crop still crashes on meta where the follow-up raises: the one difference.

    Unlike the follow-up, these kernels make _dispatch_has_kernel_for_dispatch_key(overload,
    "CUDA") true; a real CUDA kernel registered later (in C++, or from Python from torch 2.13)
    replaces them, with torch's warning. Before torch 2.13, register_fake of a `.out` overload
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
            if not torch._C._dispatch_has_kernel_for_dispatch_key(overload, key):
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


def _check_host_tensor(tensor: torch.Tensor, subject: str, *names: object) -> None:
    """The follow-ups' check where ExecuTorch's bindings copy a tensor's bytes on the host:
    their RuntimeError for one elsewhere; an empty one has no bytes to copy. `subject` is a
    format string of `names`, filled only when raising."""
    device = tensor.untyped_storage().device
    if device.type != "cpu" and tensor.numel() != 0:
        raise RuntimeError(
            host_read_message(
                subject.format(*names),
                tensor.shape,
                tensor.dtype,
                device,
                what_to_do(device, HOST_TENSORS),
            )
        )


def llm_image_input(original: Original, image_tensor: Any) -> Any:
    """make_image_input, which copies the image's bytes on the host."""
    if isinstance(image_tensor, torch.Tensor):
        _check_host_tensor(
            image_tensor, "{}'s argument 'image_tensor'", original.__name__
        )
    return original(image_tensor)


def llm_audio_input(original: Original, audio_tensor: Any) -> Any:
    """make_audio_input and make_raw_audio_input, which copy the audio's bytes on the host."""
    if isinstance(audio_tensor, torch.Tensor):
        _check_host_tensor(
            audio_tensor, "{}'s argument 'audio_tensor'", original.__name__
        )
    return original(audio_tensor)


def _check_named_tensors(kind: str, tensors: Any) -> None:
    """The follow-up's check of the optimizer's tensors, in the dict's order, once the bindings
    have taken them as names and tensors (anything else keeps their error)."""
    if isinstance(tensors, dict) and all(
        isinstance(name, str) and isinstance(tensor, torch.Tensor)
        for name, tensor in tensors.items()
    ):
        for name, tensor in tensors.items():
            _check_host_tensor(tensor, "{} {!r}", kind, name)


def sgd_parameters(
    original: Original, named_params: Any, *args: Any, **kwargs: Any
) -> Any:
    """get_sgd_optimizer, whose optimizer updates its parameters' memory on the host."""
    _check_named_tensors("Parameter", named_params)
    return original(named_params, *args, **kwargs)


def sgd_gradients(original: Original, self: Any, arg0: Any) -> Any:
    """ExecuTorchSGD.step, which reads the gradients on the host; arg0 is pybind11's name for
    its unnamed parameter."""
    _check_named_tensors("Gradient", arg0)
    return original(self, arg0)


# Each wrapper by its __name__, which _patch.SITES names; test/support/mutant.py replaces one.
WRAPPERS: dict[str, Original] = {
    function.__name__: function
    for function in (
        emitter_constant,
        emitter_constant_methods,
        bundled_values,
        named_data_bytes,
        xnnpack_constant,
        vulkan_constant,
        aten_verifier,
        edge_manager,
        out_variants,
        runtime_program,
        runtime_method,
        runtime_inputs,
        llm_image_input,
        llm_audio_input,
        sgd_parameters,
        sgd_gradients,
    )
}
