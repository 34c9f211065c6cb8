# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The same cases on a real GPU: every test here is named test_cuda_* and needs CUDA.

GPU runners select them with `pytest test/test_cuda.py` (or `-k cuda`); .ci/gpu fails if any is
skipped on a machine that has a GPU.
"""

import importlib.util
import unittest

import torch
from cases import BUNDLE, ChildCaseTest, MODEL, NAMED_DATA, XNNPACK
from executorch_device_guard._selfcheck import Case, cpu_program_failure, CUDA_CASES, SIGSEGV

_CUDA_BACKEND = MODEL + """
from executorch.backends.cuda.cuda_backend import CudaBackend
from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
from executorch.exir import EdgeCompileConfig
model, x = model.cuda(), tuple(t.cuda() for t in x)
edge = to_edge_transform_and_lower(
    export(model, x),
    partitioner=[CudaPartitioner([CudaBackend.generate_method_name_compile_spec("forward")])],
    compile_config=EdgeCompileConfig(_check_ir_validity=False),
)
program = edge.to_executorch()
assert len(program.buffer) > 0
"""

_BUNDLED = MODEL + BUNDLE + """
# Test values computed by the CUDA model, as users do.
inputs = [torch.randn(2, 4).cuda()]
expected = [model.cuda()(*inputs)]
on_host = bundle([t.cpu() for t in inputs], [t.cpu() for t in expected])
assert bundle(inputs, expected) == on_host, "bundled bytes differ from the CPU result"
"""

_XNNPACK = XNNPACK + """
model, x = model.cuda(), tuple(t.cuda() for t in x)
to_edge_transform_and_lower(export(model, x), partitioner=[XnnpackPartitioner()]).to_executorch()
"""

_NAMED_DATA = NAMED_DATA + """
for tensor in layouts.values():
    assert stored(tensor.cuda()) == stored(tensor), "named data differs from the CPU result"
"""


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TestCuda(ChildCaseTest):
    def test_cuda_portable_reproducer(self) -> None:
        self.assertEqual([c.returncode for c in CUDA_CASES], [SIGSEGV, 1])
        self.assert_cases(*CUDA_CASES)

    def test_cuda_cpu_program_byte_identical(self) -> None:
        self.assertIsNone(cpu_program_failure())

    @unittest.skipUnless(
        importlib.util.find_spec("executorch.backends.cuda") is not None,
        "this ExecuTorch has no CUDA backend",
    )
    def test_cuda_backend_lowering_still_works(self) -> None:
        self.assert_cases(Case("CudaPartitioner, guard on", _CUDA_BACKEND, True, 0, ()))

    def test_cuda_bundled_program_matches_cpu(self) -> None:
        self.assert_cases(
            Case("bundled CUDA values, guard off", _BUNDLED, False, SIGSEGV, ()),
            Case("bundled CUDA values, guard on", _BUNDLED, True, 0, ()),
        )

    def test_cuda_xnnpack(self) -> None:
        self.assert_cases(
            Case("xnnpack CUDA model, guard off", _XNNPACK, False, SIGSEGV, ()),
            Case("xnnpack CUDA model, guard on", _XNNPACK, True, 1, ("InternalError: XNNPACK constant '0.weight'", "cuda:0")),
        )

    def test_cuda_named_data_matches_cpu(self) -> None:
        self.assert_cases(
            Case("named data CUDA, guard off", _NAMED_DATA, False, 1, ("can't convert cuda:0",)),
            Case("named data CUDA, guard on", _NAMED_DATA, True, 0, ()),
        )


if __name__ == "__main__":
    unittest.main()
