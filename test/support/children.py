# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The programs that tests run in a fresh interpreter, by name: `python -m
test.support.children NAME`, from the repository's root.

Only where the behaviour needs one: what the startup line does, an install in another
environment, a reproducer that can die of a signal, and a patched copy of ExecuTorch, which
cannot be imported beside the installed one. A child prints what its function returns as JSON.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from executorch_device_guard import ENV_VAR

REPO = Path(__file__).resolve().parents[2]


def run(
    name: str,
    guard: bool | str,
    python: str = sys.executable,
    args: tuple[str, ...] = (),
) -> Any:
    """Runs child NAME with ARGS, the guard's startup hook on or off, or ENV_VAR set to GUARD
    where it is a string: (exit status, stdout, stderr)."""
    value = guard if isinstance(guard, str) else "1" if guard else "0"
    env = {**os.environ, ENV_VAR: value}
    done = subprocess.run(
        [python, "-m", __name__, name, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout, done.stderr


def result(stdout: str) -> Any:
    """What the child's function returned."""
    return json.loads(stdout.strip().splitlines()[-1])


def startup() -> dict[str, Any]:
    """What interpreter start imported of torch, ExecuTorch and the package, and its finders."""
    from executorch_device_guard import _hook

    ours = ("torch", "executorch", "executorch_device_guard")
    return {
        "modules": sorted(m for m in sys.modules if m.split(".")[0] in ours),
        "finders": sum(isinstance(f, _hook._Finder) for f in sys.meta_path),
    }


def loaders() -> dict[str, list[Any]]:
    """Each guarded module's loader, once every site's module is imported: its type, its own
    attributes, whether __spec__.loader is the same object, and whether uninstall() left both
    as they were."""
    import importlib

    from executorch_device_guard import _hook, _site_table

    modules = []
    for name in sorted(_site_table.MODULES):
        try:
            modules.append(importlib.import_module(name))
        except Exception:  # a part that does not load here: the same either way
            continue
    found = [
        (m.__loader__, m.__spec__.loader)  # type: ignore[union-attr]
        for m in modules
    ]
    _hook.uninstall()
    kept = [
        m.__loader__ is module and m.__spec__.loader is spec  # type: ignore[union-attr]
        for m, (module, spec) in zip(modules, found)
    ]
    return {
        m.__name__: [
            type(module).__name__,
            sorted(vars(module)),  # an attribute set on ExecuTorch's loader shows here
            str(spec is module),
            str(all_kept),
        ]
        for m, (module, spec), all_kept in zip(modules, found, kept)
    }


def runner_import() -> dict[str, bool]:
    """Whether importing the LLM runner, first of ExecuTorch, loads the exporter
    (executorch.exir, seconds of imports), and whether its input functions are wrapped."""
    from executorch.extension.llm import runner

    return {
        "exir": "executorch.exir" in sys.modules,
        "guarded": hasattr(runner.make_image_input, "__wrapped__"),
    }


def meta_model() -> None:
    """The reproducer on meta: with the guard, "holds no data"; without, "NULL pointer access"."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import export

    from .models import linear

    model = linear().to("meta")
    to_edge_transform_and_lower(
        export(model, (torch.ones(2, 4, device="meta"),))
    ).to_executorch()


def messages() -> dict[str, Any]:
    """The probe, and the error that each raising site gives: for meta tensors, for tensors in
    device memory simulated on the CPU, and for lowering a program exported with fake cpu or
    cuda inputs."""
    import torch
    from executorch.backends.vulkan.serialization.vulkan_graph_builder import (
        VkGraphBuilder,
    )
    from executorch.backends.xnnpack.operators.node_visitor import NodeVisitor
    from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNGraph
    from executorch.devtools.bundled_program.config import (
        MethodTestCase,
        MethodTestSuite,
    )
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir.backend.utils import DelegateMappingBuilder
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.export import export

    from .models import EfficientAttention, linear
    from .simulated_device import SimulatedDeviceStorage, simulate_device

    found: dict[str, str] = {}

    def record(name: str, call: Callable[[], object]) -> None:
        try:
            call()
            found[name] = "no error"
        except Exception as error:
            found[name] = f"{type(error).__name__}: {error}"

    host_program = to_edge_transform_and_lower(
        export(linear(), (torch.ones(2, 4),))
    ).to_executorch()
    for kind, device in (("meta", "meta"), ("device", "cpu")):
        placed = (
            partial(torch.Tensor.to, device="meta")
            if kind == "meta"
            else simulate_device
        )
        program = export(linear().to(device), (torch.ones(2, 4, device=device),))
        edge = to_edge_transform_and_lower(program)
        if kind == "device":
            for weights in (edge.exported_program().state_dict, program.state_dict):
                if not isinstance(
                    weights["0.weight"].untyped_storage(), SimulatedDeviceStorage
                ):
                    simulate_device(weights["0.weight"])
        record(f"emitter, {kind}", edge.to_executorch)
        with_table = to_edge_transform_and_lower(
            export(linear(), (torch.ones(2, 4),)),
            constant_methods={"get_table": placed(torch.ones(2, 3))},
        )
        record(f"constant method, {kind}", with_table.to_executorch)
        case = MethodTestCase(
            inputs=[torch.ones(2, 4)], expected_outputs=[placed(torch.ones(2, 3))]
        )
        bundled = BundledProgram(host_program, [MethodTestSuite("forward", [case])])
        record(f"bundled, {kind}", bundled.serialize_to_schema)
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        visitor = NodeVisitor(program, {}, NamedDataStore())
        graph = XNNGraph("0", [], [], 0, [], [], [])
        read = visitor.get_serialized_buffer_index
        record(
            f"XNNPACK weight, {kind}",
            partial(read, weight, graph, {}, False, False, None),
        )
        builder = VkGraphBuilder(
            program, DelegateMappingBuilder(generated_identifiers=True)
        )
        record(
            f"Vulkan weight, {kind}", partial(builder.maybe_add_constant_tensor, weight)
        )
    unchecked = EdgeCompileConfig(_check_ir_validity=False)
    for device in ("cpu", "cuda"):
        with FakeTensorMode():
            attention = export(
                EfficientAttention(), (torch.empty(1, 2, 4, 8, device=device),)
            )
        record(f"to_edge, {device}", partial(to_edge, attention))
        record(
            f"to_edge_transform_and_lower, {device}",
            partial(to_edge_transform_and_lower, attention),
        )
        unvalidated = partial(to_edge, attention, compile_config=unchecked)
        record(
            f"to_executorch unvalidated, {device}",
            lambda edge=unvalidated: edge().to_executorch(),
        )
    return {"probe": probe(), "errors": found}


def cuda_portable() -> None:
    """The issue's reproducer on cuda:0, to the portable path."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import export

    from .models import linear

    model = linear().cuda()
    to_edge_transform_and_lower(
        export(model, (torch.ones(2, 4).cuda(),))
    ).to_executorch()


def cuda_delegated(backend: str) -> None:
    """The same, lowered to XNNPACK or Vulkan."""
    import torch
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import (
        VulkanPartitioner,
    )
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import export

    from .models import linear

    partitioner = {"xnnpack": XnnpackPartitioner, "vulkan": VulkanPartitioner}[backend]
    program = export(linear().cuda(), (torch.ones(2, 4).cuda(),))
    to_edge_transform_and_lower(program, partitioner=[partitioner()])


def cuda_constant_method() -> None:
    """A constant_methods value on cuda:0, with the program on the CPU."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import export

    from .models import linear

    to_edge_transform_and_lower(
        export(linear(), (torch.ones(2, 4),)),
        constant_methods={"get_table": torch.ones(2, 3).cuda()},
    ).to_executorch()


def cuda_bundled() -> None:
    """Bundled test values computed on cuda:0, as users compute them."""
    from .models import bundle, cuda_values

    bundle(*cuda_values())


def host_runtime() -> None:
    """x + y run by executorch.runtime on host tensors: whether the runtime runs here."""
    import torch
    from executorch.runtime import Runtime

    from .models import host_program

    program = Runtime.get().load_program(host_program(True))
    (result,) = program.load_method("forward").execute([torch.ones(2, 4)] * 2)
    assert torch.equal(result, torch.full((2, 4), 2.0))


def cuda_runtime(planning: str) -> None:
    """x + y lowered on the CPU, its inputs planned in host memory or not planned, run by
    executorch.runtime with y on cuda:0."""
    import torch
    from executorch.runtime import Runtime

    from .models import host_program

    program = Runtime.get().load_program(host_program(planning == "planned"))
    method = program.load_method("forward")
    method.execute([torch.ones(2, 4), torch.ones(2, 4).cuda()])


def cuda_custom_op(name: str) -> None:
    """ExecuTorch's LLM custom op llama::NAME on cuda:0."""
    import torch
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from .models import custom_op_arguments

    getattr(torch.ops.llama, name)(*custom_op_arguments(name, "cuda"))
    torch.cuda.synchronize()


def cuda_llama() -> None:
    """The llama example's Transformer with the custom ops, one token on cuda:0."""
    import torch
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from .models import llama_step

    llama_step("cuda")
    torch.cuda.synchronize()


def cuda_llm_input(function: str) -> None:
    """An LLM runner input function given its tensor on cuda:0."""
    from executorch.extension.llm import runner

    from .models import llm_inputs

    getattr(runner, function)(llm_inputs()[function][1].cuda())


def cuda_sgd(on_cuda: str) -> None:
    """An SGD step with the parameter and its gradient on cuda:0 ("parameter"), or with the
    gradient alone there ("gradient")."""
    import torch
    from executorch.extension.training import get_sgd_optimizer

    parameter = torch.ones(2, 3, device="cuda" if on_cuda == "parameter" else "cpu")
    get_sgd_optimizer({"w": parameter}).step({"w": torch.ones(2, 3).cuda()})


def cuda_forward_backward() -> None:
    """A training step of TrainStep's program, loaded from bytes, with its input x on cuda:0."""
    import torch  # noqa: F401  # first: the training bindings need its libraries loaded
    from executorch.extension.training import (
        _load_for_executorch_for_training_from_buffer,
    )

    from .models import training_buffer

    buffer, (x, y) = training_buffer()
    module = _load_for_executorch_for_training_from_buffer(buffer)
    module.forward_backward("forward", (x.cuda(), y))


def probe() -> dict[str, bool]:
    """For the series' checks (upstream/): whether the guard wraps the emitter's read of
    constants, and whether that read has the series' check."""
    import inspect

    from executorch.exir.emit._emitter import _Emitter

    read = _Emitter._tensor_spec_to_evalue
    has = "move_to_device_pass" in inspect.getsource(read)
    return {"wrapped": hasattr(read, "__wrapped__"), "checks": has}


CHILDREN: dict[str, Callable[..., object | None]] = {
    f.__name__: f
    for f in (
        startup,
        loaders,
        runner_import,
        meta_model,
        messages,
        cuda_portable,
        cuda_delegated,
        cuda_constant_method,
        cuda_bundled,
        host_runtime,
        cuda_runtime,
        cuda_custom_op,
        cuda_llama,
        cuda_llm_input,
        cuda_sgd,
        cuda_forward_backward,
        probe,
    )
}


def main(argv: list[str]) -> None:
    returned = CHILDREN[argv[1]](*argv[2:])
    if returned is not None:
        print(json.dumps(returned))


if __name__ == "__main__":
    main(sys.argv)
