# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The guard on a real GPU. Every test here needs CUDA: GPU runners run this file, and .ci/gpu fails
if one skips there. Guarded, each case runs in this process; unguarded, the ones that crash run in
a child (test/support/children.py), where the crash is its exit status."""

import importlib.util
import unittest

import children
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.error import InternalError
from executorch_device_guard._selfcheck import SIGSEGV
from guard import guard_set
from models import (
    CRASHING_OPS,
    linear,
    llm_inputs,
    stored,
)
from parts import not_here
from torch.export import export

ON_CUDA = r"\(shape \[3, 4\], dtype torch.float32\) is on cuda:0, not in host memory"
CUDA_TAIL = r"is on cuda:0, not in host memory\. Pass host tensors with \.cpu\(\)\.$"


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TestCuda(unittest.TestCase):
    def assert_crashes_unguarded(self, child: str, *args: str) -> None:
        status, _, stderr = children.run(child, guard=False, args=args)
        self.assertEqual(status, SIGSEGV, stderr[-3000:])

    def test_cuda_portable_reproducer_crashes_unguarded_and_raises_guarded(
        self,
    ) -> None:
        self.assert_crashes_unguarded("cuda_portable")
        with (
            guard_set(True),
            self.assertRaisesRegex(InternalError, f"Constant 'p_0_weight' {ON_CUDA}"),
        ):
            children.cuda_portable()

    def test_cuda_delegated_crashes_unguarded_and_raises_guarded(self) -> None:
        for backend, name in (("xnnpack", "XNNPACK"), ("vulkan", "Vulkan")):
            with self.subTest(backend=backend):
                self.assert_crashes_unguarded("cuda_delegated", backend)
                with (
                    guard_set(True),
                    self.assertRaisesRegex(
                        RuntimeError, f"^{name} constant 'p_0_weight' {ON_CUDA}"
                    ),
                ):
                    children.cuda_delegated(backend)

    def test_cuda_constant_method_crashes_unguarded_and_raises_guarded(self) -> None:
        self.assert_crashes_unguarded("cuda_constant_method")
        with (
            guard_set(True),
            self.assertRaisesRegex(
                InternalError,
                r"^Constant 'get_table' \(shape \[2, 3\], dtype torch.float32\) is on "
                r"cuda:0, not in host memory\. Pass host tensors in constant_methods\.$",
            ),
        ):
            children.cuda_constant_method()

    def test_cuda_bundled_values_crash_unguarded_and_raise_guarded(self) -> None:
        self.assert_crashes_unguarded("cuda_bundled")
        with (
            guard_set(True),
            self.assertRaisesRegex(
                RuntimeError,
                r"^Bundled input 0 of test case 0 of method 'forward' \(shape \[2, 4\], "
                r"dtype torch.float32\) is on cuda:0, not in host memory\. Pass host "
                r"tensors to MethodTestCase\.$",
            ),
        ):
            children.cuda_bundled()

    def test_cuda_named_data_keeps_executorch_s_own_error(self) -> None:
        for tensor in (
            torch.randn(2, 3, 4, 5),
            torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)[1:],
        ):
            with (
                self.subTest(stride=tensor.stride()),
                guard_set(True),
                self.assertRaisesRegex(TypeError, "can't convert cuda:0"),
            ):
                stored(tensor.cuda())

    def test_cuda_runtime_inputs_crash_unguarded_and_raise_guarded(self) -> None:
        if why := not_here("runtime"):
            self.skipTest(why)
        for planning in ("planned", "unplanned"):
            with self.subTest(planning=planning):
                self.assert_crashes_unguarded("cuda_runtime", planning)
                with (
                    guard_set(True),
                    self.assertRaisesRegex(
                        RuntimeError,
                        r"^Input 1 of method 'forward' \(shape \[2, 4\], dtype "
                        r"torch.float32\) is on cuda:0, not in host memory\. Pass host "
                        r"tensors with \.cpu\(\), or, for a method meant to take device "
                        r"inputs, lower with CudaPartitioner and skip the input copies as "
                        r"https://docs\.pytorch\.org/executorch/main/backends/cuda/"
                        r"cuda-overview\.html shows\.$",
                    ),
                ):
                    children.cuda_runtime(planning)

    @unittest.skipIf(not_here("custom ops"), not_here("custom ops"))
    def test_cuda_custom_ops_crash_unguarded_and_raise_guarded(self) -> None:
        for name, argument in CRASHING_OPS.items():
            with self.subTest(op=name):
                self.assert_crashes_unguarded("cuda_custom_op", name)
                with (
                    guard_set(True),
                    self.assertRaisesRegex(
                        NotImplementedError,
                        rf"^Could not run 'llama::{name}' with arguments from the 'CUDA' "
                        rf"backend\. Argument '{argument}' \(shape \[1, 1, 2, 4\], "
                        r"dtype torch\.float32\) is on cuda:0, not in host memory\. ",
                    ),
                ):
                    children.cuda_custom_op(name)

    @unittest.skipIf(not_here("custom ops"), not_here("custom ops"))
    def test_cuda_llama_with_custom_ops_crashes_unguarded_and_raises_guarded(
        self,
    ) -> None:
        self.assert_crashes_unguarded("cuda_llama")
        with (
            guard_set(True),
            self.assertRaisesRegex(
                NotImplementedError,
                r"^Could not run 'llama::\w+' with arguments from the 'CUDA' backend\. "
                r"Argument '\w+' \(shape \[.*\) is on cuda:0, not in host memory\. ",
            ),
        ):
            children.cuda_llama()

    @unittest.skipUnless(
        importlib.util.find_spec("executorch.backends.cuda"), "no CUDA backend"
    )
    def test_cuda_backend_lowering_keeps_its_device_weights(self) -> None:
        from executorch.backends.cuda.cuda_backend import CudaBackend
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner

        spec = CudaBackend.generate_method_name_compile_spec("forward")
        edge = to_edge_transform_and_lower(
            export(linear().cuda(), (torch.ones(2, 4).cuda(),)),
            partitioner=[CudaPartitioner([spec])],
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
        with guard_set(True):
            self.assertGreater(len(edge.to_executorch().buffer), 0)

    def test_cuda_llm_runner_inputs_crash_unguarded_and_raise_guarded(self) -> None:
        if why := not_here("llm runner"):
            self.skipTest(why)
        from executorch.extension.llm import runner

        for function, (argument, tensor) in llm_inputs().items():
            with self.subTest(function=function):
                self.assert_crashes_unguarded("cuda_llm_input", function)
                shape = ", ".join(map(str, tensor.shape))
                with (
                    guard_set(True),
                    self.assertRaisesRegex(
                        RuntimeError,
                        rf"^{function}'s argument '{argument}' \(shape \[{shape}\], "
                        rf"dtype {tensor.dtype}\) {CUDA_TAIL}",
                    ),
                ):
                    getattr(runner, function)(tensor.cuda())

    def test_cuda_sgd_crashes_unguarded_and_raises_guarded(self) -> None:
        if why := not_here("training"):
            self.skipTest(why)
        from executorch.extension.training import get_sgd_optimizer

        for on_cuda in ("parameter", "gradient"):
            with self.subTest(on_cuda=on_cuda):
                self.assert_crashes_unguarded("cuda_sgd", on_cuda)
        shape = r"'w' \(shape \[2, 3\], dtype torch.float32\)"
        parameter = torch.ones(2, 3)
        with guard_set(True):
            with self.assertRaisesRegex(
                RuntimeError, rf"^Parameter {shape} {CUDA_TAIL}"
            ):
                get_sgd_optimizer({"w": parameter.cuda()})
            optimizer = get_sgd_optimizer({"w": parameter})
            with self.assertRaisesRegex(
                RuntimeError, rf"^Gradient {shape} {CUDA_TAIL}"
            ):
                optimizer.step({"w": torch.ones(2, 3).cuda()})

    def test_cuda_forward_backward_fails_unguarded_and_raises_guarded(self) -> None:
        """Unguarded, the bindings' run_method takes the device input as host memory (1.2.0 on
        an H100: SIGSEGV in 32 of 32 runs), or the runtime refuses it."""
        if why := not_here("training"):
            self.skipTest(why)
        status, _, stderr = children.run("cuda_forward_backward", guard=False)
        failed = "Failed to execute method forward" in stderr
        self.assertTrue(status == SIGSEGV or failed, stderr[-3000:])
        with (
            guard_set(True),
            self.assertRaisesRegex(
                RuntimeError,
                r"^Input 0 of method 'forward' \(shape \[3\], dtype torch.float32\) is on "
                r"cuda:0, not in host memory\. Pass host tensors with \.cpu\(\), or, for a "
                r"method meant to take device inputs, lower with CudaPartitioner",
            ),
        ):
            children.cuda_forward_backward()
