# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Every guarded site with the guard on, in this process: device memory simulated on the CPU
(simulated_device.py) at each host read, and programs exported with fake cuda tensors where
lowering fails first.

The upstream series tests device constants with `meta` tensors on the CPU and real CUDA behind a
skip; the package also tests the device branch on machines without a GPU. test_sites.py runs each
of these with the guard off, where it crashes (SIGSEGV) or fails as ExecuTorch does today.
"""

import hashlib
import io
import os
import re
import tempfile
import traceback
import unittest
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder
from executorch.backends.xnnpack.operators.node_visitor import NodeVisitor
from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNGraph
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import (
    EdgeCompileConfig,
    ExecutorchBackendConfig,
    to_edge,
    to_edge_transform_and_lower,
)
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.utils import DelegateMappingBuilder
from executorch.exir.error import ExportError, InternalError
from torch._export.verifier import SpecViolationError
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export import export

from executorch_device_guard import _release, _site_table
from test.support.guard import guard_set
from test.support.models import (
    CRASHING_OPS,
    EfficientAttention,
    WithBuffer,
    WithConstant,
    WithEmpty,
    WithKVCache,
    custom_op_arguments,
    device_inputs_program,
    host_program,
    linear,
    llm_inputs,
    stored,
    training_buffer,
)
from test.support.parts import not_here
from test.support.simulated_device import simulate_device, simulated_is_cpu

pytestmark = [pytest.mark.release, pytest.mark.wrappers]

ON_CUDA = "is on cuda:0, not in host memory"
RUNTIME_UNAVAILABLE = not_here("runtime")
ON_META = "is on meta, not in host memory. A meta or fake tensor holds no data."
LLM_RUNNER = not_here("llm runner")
TRAINING = not_here("training")
# The dispatch keys of the devices that torch 2.13 knows, whose memory the host does not read,
# and some of their quantized and sparse tensors' keys.
DEVICES = (
    "CUDA",
    "HIP",
    "XLA",
    "MPS",
    "IPU",
    "XPU",
    "HPU",
    "VE",
    "Lazy",
    "MTIA",
    "MAIA",
)
DEVICES += ("PrivateUse1", "PrivateUse2", "PrivateUse3", "QuantizedCUDA", "SparseCUDA")
DEVICES += ("SparseCsrCUDA", "QuantizedPrivateUse1", "SparsePrivateUse1")


@unittest.skipUnless(os.name == "posix", "simulated device memory needs POSIX mmap")
class TestSimulatedDevice(unittest.TestCase):
    def test_emitter_names_each_kind_of_constant(self) -> None:
        x = (torch.ones(2, 4),)
        weight, buffer, constant, external = (
            to_edge_transform_and_lower(export(module, x))
            for module in (linear(), WithBuffer(), WithConstant(), linear())
        )
        simulate_device(weight.exported_program().state_dict["0.weight"])
        simulate_device(buffer.exported_program().state_dict["offset"])
        simulate_device(constant.exported_program().constants["table"])
        simulate_device(external.exported_program().state_dict["0.weight"])
        external_constants = ExecutorchBackendConfig(external_constants=True)
        for edge, config, name in (
            (weight, None, "'p_0_weight' (shape [3, 4]"),
            (buffer, None, "'b_offset' (shape [4]"),
            (constant, None, "'c_table' (shape [4]"),
            (external, external_constants, "'p_0_weight' (shape [3, 4]"),
        ):
            with (
                self.subTest(name=name),
                self.assertRaisesRegex(
                    InternalError, f"Constant {re.escape(name)}.* {ON_CUDA}"
                ),
            ):
                edge.to_executorch(config)

    def test_constant_method_device_value_raises_naming_its_method(self) -> None:
        edge = to_edge_transform_and_lower(
            export(linear(), (torch.ones(2, 4),)),
            constant_methods={"get_table": simulate_device(torch.ones(2, 3))},
        )
        with self.assertRaises(InternalError) as raised:
            edge.to_executorch()
        self.assertEqual(
            str(raised.exception),
            f"Constant 'get_table' (shape [2, 3], dtype torch.float32) {ON_CUDA}. "
            "Pass host tensors in constant_methods.",
        )

    def test_constant_method_value_that_executorch_refuses_first_keeps_its_error(
        self,
    ) -> None:
        edge = to_edge_transform_and_lower(
            export(linear(), (torch.ones(2, 4),)),
            constant_methods={
                "device": torch.device("cpu"),
                "get_table": simulate_device(torch.ones(2, 3)),
            },
        )
        with self.assertRaisesRegex(ExportError, "Error emitting device which returns"):
            edge.to_executorch()

    def test_emitter_serializes_an_empty_device_constant(self) -> None:
        edge = to_edge_transform_and_lower(export(WithEmpty(), (torch.ones(2, 4),)))
        simulate_device(edge.exported_program().state_dict["empty"])
        self.assertGreater(len(edge.to_executorch().buffer), 0)

    def test_bundled_device_values_raise_naming_their_test_case(self) -> None:
        model = linear()
        program = to_edge_transform_and_lower(
            export(model, (torch.ones(2, 4),))
        ).to_executorch()
        inputs = [torch.randn(2, 4)]
        outputs: list[torch.Tensor] = [model(*inputs)]
        cases = [MethodTestCase(inputs=inputs, expected_outputs=outputs)] * 2
        on_device = (
            [
                MethodTestCase(
                    inputs=[simulate_device(inputs[0].clone())],
                    expected_outputs=outputs,
                )
            ],
            [
                MethodTestCase(
                    inputs=inputs,
                    expected_outputs=[simulate_device(outputs[0].clone())],
                )
            ],
        )
        errors = []
        for case in on_device:
            suite = MethodTestSuite("forward", cases + case)
            with self.assertRaises(RuntimeError) as raised:
                serialize_from_bundled_program_to_flatbuffer(
                    BundledProgram(program, [suite])
                )
            errors.append(str(raised.exception))
        way_out = f"{ON_CUDA}. Pass host tensors to MethodTestCase."
        self.assertEqual(
            errors,
            [
                "Bundled input 0 of test case 2 of method 'forward' (shape [2, 4], "
                f"dtype torch.float32) {way_out}",
                "Bundled expected output 0 of test case 2 of method 'forward' (shape "
                f"[2, 3], dtype torch.float32) {way_out}",
            ],
        )

    @unittest.skipIf(
        _release.before("1.2.0"),
        "before executorch 1.2.0, add_named_data takes bytes (1.0.x) or reads a tensor "
        "element by element, which the simulated device memory refuses",
    )
    def test_named_device_data_keeps_executorch_s_own_error(self) -> None:
        with self.assertRaisesRegex(TypeError, "can't convert cuda:0"):
            stored(simulate_device(torch.randn(2, 3, 4, 5)))

    @unittest.skipIf(
        _release.before("1.2.0"),
        "before executorch 1.2.0 there is no _tensor_to_bytes, where the guard stores a "
        "view's values",
    )
    def test_named_data_of_a_channels_last_view_is_its_own_values(self) -> None:
        view = (
            torch.arange(120.0)
            .reshape(2, 3, 4, 5)
            .to(memory_format=torch.channels_last)[1:]
        )
        output = stored(view)
        layout = output.pte_data["w"].tensor_layout
        buffer = output.buffers[output.pte_data["w"].buffer_index]
        values = torch.frombuffer(bytearray(buffer), dtype=view.dtype)
        self.assertEqual(layout.dim_order, [0, 2, 3, 1])
        self.assertTrue(
            torch.equal(values.reshape(1, 4, 5, 3).permute(0, 3, 1, 2), view)
        )

    def test_xnnpack_weight_raises(self) -> None:
        program = export(linear(), (torch.ones(2, 4),))
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        graph = XNNGraph(
            version="0",
            xnodes=[],
            xvalues=[],
            num_externs=0,
            input_ids=[],
            output_ids=[],
            constant_data=[],
        )
        visitor = NodeVisitor(program, {}, NamedDataStore())
        simulate_device(program.state_dict["0.weight"])
        with self.assertRaisesRegex(
            RuntimeError, f"^XNNPACK constant 'p_0_weight' .* {ON_CUDA}"
        ):
            visitor.get_serialized_buffer_index(
                weight,
                graph,
                vals_to_ids={},
                convert_to_nhwc=False,
                swap_in_out_for_weights=False,
                quant_params=None,
            )

    def test_vulkan_weight_raises(self) -> None:
        program = export(linear(), (torch.ones(2, 4),))
        simulate_device(program.state_dict["0.weight"])
        builder = VkGraphBuilder(
            program, DelegateMappingBuilder(generated_identifiers=True)
        )
        (weight,) = [n for n in program.graph.nodes if n.name == "p_0_weight"]
        with self.assertRaisesRegex(
            RuntimeError, f"^Vulkan constant 'p_0_weight' .* {ON_CUDA}"
        ):
            builder.maybe_add_constant_tensor(weight)


@unittest.skipUnless(os.name == "posix", "simulated device memory needs POSIX mmap")
@unittest.skipIf(RUNTIME_UNAVAILABLE is not None, str(RUNTIME_UNAVAILABLE))
class TestRuntime(unittest.TestCase):
    """Each test keeps its Program: a Method loaded from bytes reads them where the Program
    holds them, and ExecuTorch frees them with the Program (a crash, guard or not)."""

    def setUp(self) -> None:
        self.enterContext(simulated_is_cpu())

    def load(self, source: Any) -> Any:
        """executorch.runtime's program from `source`, imported here: the runtime of 1.1.0 to
        1.3.1 does not load with torch 2.13, and the other classes do not need it."""
        from executorch.runtime import Runtime

        return Runtime.get().load_program(source)

    def inputs(self, device_index: int | None = None) -> list[torch.Tensor]:
        """x and y of host_program, the one at `device_index` in simulated device memory."""
        inputs = [torch.randn(2, 4), torch.randn(2, 4)]
        if device_index is not None:
            simulate_device(inputs[device_index])
        return inputs

    def test_runtime_refuses_device_inputs_that_the_method_reads_on_the_host(
        self,
    ) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for planned in (True, False):
                buffer = host_program(planned)
                (path := Path(tmp, "add.pte")).write_bytes(buffer)
                sources = {"bytes": buffer, "path": path}
                if not _release.before(
                    "1.1.0"
                ):  # 1.0's load_program takes no file object
                    sources["file"] = io.BytesIO(buffer)
                for kind, source in {**sources, "str": str(path)}.items():
                    program = self.load(source)
                    method = program.load_method("forward")
                    for index in (0, 1):
                        message = (
                            f"Input {index} of method 'forward' (shape [2, 4], dtype "
                            f"torch.float32) {ON_CUDA}. Pass host tensors with .cpu(), "
                            "or, for a method meant to take device inputs, lower with "
                            "CudaPartitioner and skip the input copies as "
                            "https://docs.pytorch.org/executorch/main/backends/cuda/"
                            "cuda-overview.html shows."
                        )
                        with self.assertRaisesRegex(
                            RuntimeError,
                            f"^{re.escape(message)}$",
                            msg=f"planned {planned}, from {kind}, input {index}",
                        ):
                            method.execute(self.inputs(index))
                    x, y = self.inputs()
                    (result,) = method.execute([x, y])
                    self.assertTrue(torch.equal(result, x + y))

    def test_runtime_decides_by_the_program_it_loaded_whatever_becomes_of_its_file(
        self,
    ) -> None:
        """The plans are read as ExecuTorch loads the file: deleted or replaced afterwards (by a
        program that plans its inputs on the device, or by garbage), the guard decides as
        before. ExecuTorch maps the file, so writing into it after loading crashes ExecuTorch
        itself, guard or not: replacing is a new file at the path."""
        host = host_program(True)
        replacements: dict[str, bytes | None] = {"deleted": None}
        replacements["garbage"] = bytes(range(256)) * 4
        if not _release.before("1.4.0"):
            replacements["device program"] = device_inputs_program()
        with tempfile.TemporaryDirectory() as tmp:
            for change, new in replacements.items():
                for kind in (Path, str):
                    path = Path(tmp, "add.pte")
                    path.write_bytes(host)
                    method = (program := self.load(kind(path))).load_method("forward")
                    path.unlink()
                    if new is not None:
                        Path(tmp, "new.pte").write_bytes(new)
                        os.replace(Path(tmp, "new.pte"), path)
                    with self.assertRaisesRegex(
                        RuntimeError,
                        f"^Input 1 of method 'forward' .* {ON_CUDA}",
                        msg=f"{change}, {kind.__name__}",
                    ):
                        method.execute(self.inputs(1))
                    x, y = self.inputs()
                    (result,) = method.execute([x, y])
                    self.assertTrue(torch.equal(result, x + y))
                    del program

    def test_runtime_arguments_of_the_wrong_kind_keep_executorch_s_error(
        self,
    ) -> None:
        x, y = self.inputs()
        arguments = [torch.tensor(1.0), x, None, {"x": x, "y": y}, "xy", [x, "y"]]
        arguments += [[x], (x, y, x), [x, None], range(2), iter([x, y])]
        errors = {}
        for on in (False, True):
            with guard_set(on):
                program = self.load(host_program(True))
                method = program.load_method("forward")
                for index, argument in enumerate(arguments):
                    try:
                        method.execute(argument)
                    except Exception as error:  # whichever ExecuTorch raises
                        # pybind11 names the bindings' method object by its address
                        text = re.sub(r" at 0x[0-9a-f]+", "", str(error))
                        errors[on, index] = f"{type(error).__name__}: {text}"
                    else:
                        self.fail(f"{argument!r} ran")
        for index, argument in enumerate(arguments):
            with self.subTest(argument=type(argument).__name__):
                self.assertEqual(errors[True, index], errors[False, index])

    def test_runtime_inputs_that_the_bindings_refuse_first_keep_their_error(
        self,
    ) -> None:
        program = self.load(host_program(True))
        method = program.load_method("forward")
        x, y = self.inputs(1)
        refused = [
            ([x.t(), y], "^Input 0 ?for method forward should be contiguous"),
            (["x", y], "^Unsupported python type <class 'str'>"),
        ]
        if not _release.before("1.5.0"):
            meta = torch.ones(2, 4, device="meta")
            refused.append(([meta, y], "^Input 0 for method forward is on device meta"))
        for inputs, error in refused:
            with self.subTest(error=error), self.assertRaisesRegex(RuntimeError, error):
                method.execute(inputs)

    @unittest.skipIf(
        _release.before("1.4.0"),
        "before executorch 1.4.0 no program plans a method's inputs on a device",
    )
    def test_runtime_runs_device_inputs_that_the_program_plans_on_the_device(
        self,
    ) -> None:
        buffer, inputs = device_inputs_program(), self.inputs(0)
        outcomes = []
        for on in (False, True):
            with guard_set(on):
                program = self.load(buffer)
                method = program.load_method("forward")
                # What ExecuTorch does next, guard or not: on a CPU build of torch, the
                # bindings cannot return the output that the program leaves on cuda:0.
                try:
                    outcomes.append(repr(method.execute(inputs)))
                except RuntimeError as error:
                    outcomes.append(str(error).split("\n")[0])
        self.assertEqual(outcomes[0], outcomes[1])
        self.assertNotIn("not in host memory", outcomes[1])

    def test_runtime_meta_inputs_say_they_hold_no_data(self) -> None:
        program = self.load(host_program(True))
        method = program.load_method("forward")
        x = torch.ones(2, 4)
        if not _release.before("1.5.0"):  # the bindings refuse a meta tensor themselves
            error = (
                "Input 1 for method forward is on device meta, and only CPU and CUDA "
                "tensors can be passed to a method."
            )
        else:  # a method copies nothing from it, and runs on what its input held
            error = (
                "Input 1 of method 'forward' (shape [2, 4], dtype torch.float32) is on "
                "meta, not in host memory. A meta or fake tensor holds no data."
            )
        with self.assertRaisesRegex(RuntimeError, f"^{re.escape(error)}$"):
            method.execute([x, torch.ones(2, 4, device="meta")])


@unittest.skipIf(not_here("custom ops"), not_here("custom ops"))
class TestCustomOps(unittest.TestCase):
    """ExecuTorch's LLM custom ops, whose kernel for every device reads host memory. Without a
    GPU, a call reaches an operator's kernel for a device by dispatching to that device's key;
    on meta, the `.out` variants have no Meta kernel of their own."""

    def test_custom_ops_on_a_device_raise_naming_the_operator_and_the_tensor(
        self,
    ) -> None:
        for name, argument in CRASHING_OPS.items():
            for key in DEVICES:
                arguments = custom_op_arguments(name, "cpu")
                simulate_device(arguments[0])
                operator = getattr(torch.ops.llama, name).default
                keys = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))
                with self.assertRaisesRegex(
                    NotImplementedError,
                    rf"^Could not run 'llama::{name}' with arguments from the '{key}' "
                    rf"backend\. Argument '{argument}' \(shape \[1, 1, 2, 4\], dtype "
                    rf"torch\.float32\) {ON_CUDA}\. Pass host tensors with "
                    r"\.cpu\(\)\.$",
                ):
                    operator.redispatch(keys, *arguments)

    def test_out_variants_on_meta_raise_saying_they_hold_no_data(self) -> None:
        value = torch.rand(1, 1, 2, 4, device="meta")
        cache = torch.zeros(1, 8, 2, 4, device="meta")
        with self.assertRaisesRegex(
            NotImplementedError,
            r"^llama::update_cache\.out: attempted to run this operator with Meta tensors, "
            r"but there was no fake impl or Meta kernel registered\. Argument 'value' "
            rf"\(shape \[1, 1, 2, 4\], dtype torch\.float32\) {ON_META}$",
        ):
            torch.ops.llama.update_cache.out(
                value, cache, 0, out=torch.empty(1, device="meta")
            )

    def test_tile_crop_keeps_its_meta_path_for_a_fake_kernel(self) -> None:
        """op_tile_crop_aot.py registers it when imported, after the guard; before torch 2.13,
        register_fake refuses an operator with a Meta kernel (allow_override=False)."""
        library = torch.library.Library("preprocess", "FRAGMENT")  # type: ignore[no-untyped-call]
        self.addCleanup(library._destroy)
        torch.library.register_fake(
            "preprocess::tile_crop",
            lambda image, tile_size: image.new_empty(4, 3, tile_size, tile_size),
            lib=library,
            allow_override=False,
        )
        image = torch.rand(3, 448, 448, device="meta")
        tiles = torch.ops.preprocess.tile_crop(image, 224)
        self.assertEqual((tiles.device.type, tiles.shape), ("meta", (4, 3, 224, 224)))

    def test_every_overload_of_each_operator_site_refuses_each_device(self) -> None:
        for site in _site_table.SITES:
            if isinstance(site, _site_table.Operator) and not _release.before(
                site.since
            ):
                overloads = [
                    name
                    for name in torch._C._dispatch_get_all_op_names()
                    if name.partition(".")[0] == site.qualname
                ]
                self.assertNotEqual(overloads, [], site.qualname)
                for overload in overloads:
                    keys = DEVICES
                    for key in keys + (("Meta",) if overload.endswith(".out") else ()):
                        self.assertTrue(
                            torch._C._dispatch_has_kernel_for_dispatch_key(
                                overload, key
                            ),
                            f"{overload} has no {key} kernel",
                        )

    def test_custom_ops_on_host_meta_and_fake_tensors_are_as_unguarded(self) -> None:
        def outputs(device: str) -> list[torch.Tensor]:
            """Each op's arguments after the call (caches are updated in place), and its
            result, but update_cache's, which is left uninitialized."""
            torch.manual_seed(0)
            found = []
            for name in CRASHING_OPS:
                arguments = custom_op_arguments(name, device)
                result = getattr(torch.ops.llama, name)(*arguments)
                found += [a for a in arguments if isinstance(a, torch.Tensor)]
                found += [] if name == "update_cache" else [result]
            return found

        def lowered() -> list[str]:
            """The exported, edge and ExecuTorch programs, from fake tensors."""
            torch.manual_seed(0)
            x = tuple(torch.rand(1, 1, 2, 4) for _ in range(3))
            program = export(WithKVCache(), x)
            edge = to_edge(program)
            buffer = edge.to_executorch().buffer
            graphs = (program.graph, edge.exported_program().graph)
            return [*map(str, graphs), hashlib.sha256(buffer).hexdigest()]

        with guard_set(False):
            host, meta, programs = outputs("cpu"), outputs("meta"), lowered()
        with guard_set(True):
            for unguarded, guarded in zip(host, outputs("cpu"), strict=True):
                self.assertTrue(torch.equal(unguarded, guarded))
            for unguarded, guarded in zip(meta, outputs("meta"), strict=True):
                self.assertEqual(
                    (guarded.device.type, guarded.shape), ("meta", unguarded.shape)
                )
            self.assertEqual(lowered(), programs)


class TestLowering(unittest.TestCase):
    def lowering_errors(self, device: str) -> list[Exception]:
        """What to_edge, to_edge_transform_and_lower, and to_executorch unvalidated raise."""
        with FakeTensorMode():
            program = export(
                EfficientAttention(), (torch.empty(1, 2, 4, 8, device=device),)
            )
        unchecked = EdgeCompileConfig(_check_ir_validity=False)
        errors = []
        for lower in (
            lambda: to_edge(program),
            lambda: to_edge_transform_and_lower(program),
            lambda: to_edge(program, compile_config=unchecked).to_executorch(),
        ):
            try:  # not assertRaises, which drops the traceback
                lower()
            except (SpecViolationError, RuntimeError) as error:
                errors.append(error)
            else:
                self.fail("lowering passed")
        return errors

    def test_lowering_errors_name_the_device_and_the_way_out(self) -> None:
        # No subTest: test_sites.py runs this under pytest-forked, which drops their reports.
        for error in self.lowering_errors("cuda"):
            self.assertRegex(
                str(error),
                r"\n\nThe program holds tensors on cuda:0 \(node 'q'\), and operators "
                r"decomposed for that device may have no CPU kernel\. If it is meant for "
                r"the CPU, call torch\.export\.passes\.move_to_device_pass\("
                r"exported_program, 'cpu'\) before to_edge or to_edge_transform_and_lower\.$",
            )
            # The verifier's error is the cause of one with the note, as in the series.
            first = error.__cause__ or error
            self.assertIs(type(first), type(error))
            raised_in = traceback.extract_tb(first.__traceback__)[-1].filename
            where = "verifier.py" if isinstance(error, SpecViolationError) else "passes"
            self.assertIn(where, raised_in)

    def test_lowering_errors_of_host_programs_are_word_for_word_as_unguarded(
        self,
    ) -> None:
        for device in ("cpu", "meta"):
            with guard_set(False):
                unguarded = [str(error) for error in self.lowering_errors(device)]
            with guard_set(True):
                self.assertEqual(
                    [str(error) for error in self.lowering_errors(device)], unguarded
                )


def installed_both_ways() -> Iterator[None]:
    """The guard installed as the test process's start left it, if it did, when ExecuTorch's
    modules were imported; then installed again after them, where a package's names were bound
    to the functions it re-exports, unguarded."""
    for reinstalled in (False, True):
        if reinstalled:
            with guard_set(False):
                pass
        with guard_set(True):
            yield


class TestBindings(unittest.TestCase):
    """The LLM runner's and training's bindings, which copy tensor bytes in C++: simulated
    device memory does not reach them (they read the real host storage), meta does, and so
    does a fake tensor, whose storage is on meta whatever device it reports."""

    @unittest.skipIf(LLM_RUNNER is not None, str(LLM_RUNNER))
    def test_llm_runner_meta_inputs_raise_naming_their_argument(self) -> None:
        from executorch.extension.llm import runner

        for function, (argument, tensor) in llm_inputs().items():
            for meta in (tensor.to("meta"), FakeTensorMode().from_tensor(tensor)):
                with self.assertRaises(RuntimeError) as raised:
                    getattr(runner, function)(meta)
                self.assertEqual(
                    str(raised.exception),
                    f"{function}'s argument {argument!r} (shape {list(tensor.shape)}, "
                    f"dtype {tensor.dtype}) {ON_META}",
                )

    @unittest.skipIf(LLM_RUNNER is not None, str(LLM_RUNNER))
    def test_llm_runner_inputs_raise_by_every_name_whatever_the_import_order(
        self,
    ) -> None:
        """Where the bindings define them and where the runner's package re-exports them: as
        imported with the guard on, then with the guard installed after the import (the
        package's names were bound to the unguarded functions)."""
        from executorch.extension.llm import runner
        from executorch.extension.llm.runner import _llm_runner

        for _ in installed_both_ways():
            for module in (runner, _llm_runner):
                for function, (argument, tensor) in llm_inputs().items():
                    with self.assertRaisesRegex(
                        RuntimeError,
                        f"^{function}'s argument '{argument}' .*{ON_META}$",
                    ):
                        getattr(module, function)(tensor.to("meta"))

    @unittest.skipIf(TRAINING is not None, str(TRAINING))
    def test_sgd_raises_by_every_name_whatever_the_import_order(self) -> None:
        from executorch.extension import training
        from executorch.extension.training.pybindings import _training_lib

        meta = torch.ones(2, 3, device="meta")
        for _ in installed_both_ways():
            for module in (training, _training_lib):
                with self.assertRaisesRegex(
                    RuntimeError, f"^Parameter 'w' .*{ON_META}$"
                ):
                    module.get_sgd_optimizer({"w": meta})

    @unittest.skipIf(TRAINING is not None, str(TRAINING))
    def test_forward_backward_refuses_device_inputs_that_the_program_reads_on_the_host(
        self,
    ) -> None:
        """Loaded from bytes or from a file (deleted after loading), or a TrainingModule built
        around the bindings' module, whose program the guard has not read: host memory."""
        from executorch.extension import training
        from executorch.extension.pybindings.portable_lib import (
            _load_for_executorch_from_buffer,
        )

        buffer, (x, y) = training_buffer()
        with tempfile.TemporaryDirectory() as tmp:
            (path := Path(tmp, "train.pte")).write_bytes(buffer)
            modules = {
                "bytes": training._load_for_executorch_for_training_from_buffer(buffer),
                "file": training._load_for_executorch_for_training(str(path)),
                "built": training.TrainingModule(
                    _load_for_executorch_from_buffer(buffer)
                ),
            }
        message = (
            f"Input 0 of method 'forward' (shape [3], dtype torch.float32) {ON_CUDA}. "
            "Pass host tensors with .cpu(), or, for a method meant to take device inputs, "
            "lower with CudaPartitioner and skip the input copies as "
            "https://docs.pytorch.org/executorch/main/backends/cuda/cuda-overview.html shows."
        )
        for loaded, module in modules.items():
            with self.assertRaisesRegex(
                RuntimeError, f"^{re.escape(message)}$", msg=loaded
            ):
                module.forward_backward("forward", (simulate_device(x.clone()), y))
            (loss,) = module.forward_backward("forward", (x, y))
            self.assertEqual(loss.shape, ())

    @unittest.skipIf(TRAINING is not None, str(TRAINING))
    def test_forward_backward_of_a_program_it_read_leaves_extra_inputs_to_executorch(
        self,
    ) -> None:
        """A device tensor past the program's inputs: the guard, which read the program,
        leaves it to ExecuTorch, which refuses the count before it reads any input."""
        from executorch.extension import training

        buffer, (x, y) = training_buffer()
        with tempfile.TemporaryDirectory() as tmp:
            (path := Path(tmp, "train.pte")).write_bytes(buffer)
            modules = (
                training._load_for_executorch_for_training_from_buffer(buffer),
                training._load_for_executorch_for_training(str(path)),
            )
        for module in modules:
            with self.assertRaises(RuntimeError) as raised:
                module.forward_backward("forward", (x, y, simulate_device(x.clone())))
            self.assertNotIn("not in host memory", str(raised.exception))

    @unittest.skipIf(TRAINING is not None, str(TRAINING))
    def test_sgd_meta_tensors_raise_naming_them(self) -> None:
        from executorch.extension.training import get_sgd_optimizer

        parameter = torch.ones(2, 3)
        for meta in (parameter.to("meta"), FakeTensorMode().from_tensor(parameter)):
            with self.assertRaisesRegex(
                RuntimeError,
                rf"^Parameter 'w' \(shape \[2, 3\], dtype torch.float32\) {ON_META}$",
            ):
                get_sgd_optimizer({"b": parameter[0], "w": meta})
            optimizer = get_sgd_optimizer({"w": parameter})
            with self.assertRaisesRegex(
                RuntimeError,
                rf"^Gradient 'w' \(shape \[2, 3\], dtype torch.float32\) {ON_META}$",
            ):
                optimizer.step({"w": meta})
        optimizer.step({"w": torch.ones(2, 3)})
        self.assertTrue(torch.equal(parameter, torch.full((2, 3), 0.9)))
