# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The emitter guard in this process, off and on: a meta model says that it has no data, lowered
to the portable path or to XNNPACK, a constant without storage fails as it does without the
guard, and CPU programs serialize byte for byte as without it. Device memory:
test_device_sites.py (simulated), test_cuda.py (a GPU)."""

import hashlib
import importlib.util
import unittest

import pytest
import torch
from executorch.exir import (
    EdgeCompileConfig,
    ExecutorchBackendConfig,
    to_edge,
    to_edge_transform_and_lower,
)
from executorch.exir.error import InternalError
from torch.export import export

from test.support import children
from test.support.guard import guard_set
from test.support.models import WithBuffer, WithConstant, linear

pytestmark = [pytest.mark.release, pytest.mark.wrappers]

HAS_DEVICE_PROPAGATION = all(
    importlib.util.find_spec(f"executorch.exir.{module}")
    for module in ("passes.propagate_device_config", "backend.test.device_util")
)


def device_tagged(config: ExecutorchBackendConfig) -> object:
    """add(x, offset) delegated to a cuda:0 backend; offset stays a top-level constant."""
    from executorch.exir.backend.test.device_util import DeviceAwarePartitioner

    unchecked = EdgeCompileConfig(_check_ir_validity=False)
    edge = to_edge(export(WithBuffer(), (torch.ones(2, 4),)), compile_config=unchecked)
    return edge.to_backend(DeviceAwarePartitioner()).to_executorch(config)


def cpu_programs() -> dict[str, object]:
    """Digests of programs of each kind of constant, and of their external data."""
    torch.manual_seed(0)
    x = (torch.ones(2, 4),)
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()
    )
    lowered = {
        "linear": to_edge_transform_and_lower(export(linear(), x)).to_executorch(),
        "conv_bn": to_edge_transform_and_lower(
            export(conv.eval(), (torch.randn(1, 3, 8, 8),))
        ).to_executorch(),
        "buffer": to_edge_transform_and_lower(export(WithBuffer(), x)).to_executorch(),
        "lifted_constant": to_edge_transform_and_lower(
            export(WithConstant(), x)
        ).to_executorch(),
        "constant_methods": to_edge_transform_and_lower(
            export(linear(), x), constant_methods={"table": torch.arange(5.0), "n": 3}
        ).to_executorch(),
        "external_constants": to_edge_transform_and_lower(
            export(linear(), x)
        ).to_executorch(ExecutorchBackendConfig(external_constants=True)),
    }
    if HAS_DEVICE_PROPAGATION:
        from executorch.exir.passes import MemoryPlanningPass
        from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig

        # Without the H2D copy, PropagateDevicePass tags offset's own spec CUDA; its storage stays on the CPU.
        lowered["device_tagged"] = device_tagged(
            ExecutorchBackendConfig(
                propagate_device_config=PropagateDeviceConfig(
                    skip_h2d_for_method_inputs=True
                ),
                memory_planning_pass=MemoryPlanningPass(
                    alloc_graph_input=False, alloc_graph_output=False
                ),
            )
        )
    digests: dict[str, object] = {}
    if HAS_DEVICE_PROPAGATION:
        from executorch.exir.schema import DeviceType, Tensor

        values = (
            lowered["device_tagged"]._emitter_output.program.execution_plan[0].values
        )  # type: ignore[attr-defined]
        digests["cuda-tagged constants"] = sum(
            isinstance(v.val, Tensor)
            and v.val.data_buffer_idx > 0
            and v.val.extra_tensor_info is not None
            and v.val.extra_tensor_info.device_type == DeviceType.CUDA
            for v in values
        )
    for name, program in lowered.items():
        digests[name] = hashlib.sha256(program.buffer).hexdigest()  # type: ignore[attr-defined]
        for key, data in program._tensor_data.items():  # type: ignore[attr-defined]
            digests[f"{name}/{key}"] = hashlib.sha256(bytes(data)).hexdigest()
    return digests


class TestEmitter(unittest.TestCase):
    def test_meta_model_raises_null_pointer_unguarded_and_holds_no_data_guarded(
        self,
    ) -> None:
        with (
            guard_set(False),
            self.assertRaisesRegex(InternalError, "NULL pointer access"),
        ):
            children.meta_model()
        with (
            guard_set(True),
            self.assertRaisesRegex(
                InternalError,
                r"^Failed with error: Constant 'p_0_weight' \(shape \[3, 4\], dtype "
                r"torch.float32\) is on meta, not in host memory\. A meta or fake tensor "
                r"holds no data: export the module with its real weights loaded in host "
                r"memory\.\n",
            ),
        ):
            children.meta_model()

    def test_meta_model_to_xnnpack_raises_null_pointer_unguarded_and_holds_no_data_guarded(
        self,
    ) -> None:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )

        program = export(linear().to("meta"), (torch.ones(2, 4, device="meta"),))
        for on, error, text in (
            (False, ValueError, "^NULL pointer access$"),
            (True, RuntimeError, "^XNNPACK constant 'p_0_weight' .* holds no data\\.$"),
        ):
            with guard_set(on), self.assertRaisesRegex(error, text):
                to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])

    @unittest.skipUnless(
        HAS_DEVICE_PROPAGATION, "this ExecuTorch has no device propagation"
    )
    def test_constant_without_storage_fails_at_its_node_either_way(self) -> None:
        # The H2D copy of a constant gets a const spec without storage (executorch 1.5.1): an
        # AttributeError, which the emitter reports with its node and the graph.
        errors = []
        for on in (False, True):
            with guard_set(on), self.assertRaises(InternalError) as raised:
                device_tagged(ExecutorchBackendConfig())
            errors.append(str(raised.exception))
        for error in errors:
            self.assertRegex(
                error, r"'NoneType' object has no attribute '(nbytes|device)'"
            )
        # The node and its graph.
        self.assertEqual(*(error.split("\n", 1)[1] for error in errors))

    def test_cpu_programs_are_byte_identical(self) -> None:
        with guard_set(False):
            unguarded = cpu_programs()
        with guard_set(True):
            self.assertEqual(cpu_programs(), unguarded)
        self.assertGreaterEqual(len(unguarded), 7)
        # The program has a CUDA-tagged constant whose storage is on the CPU.
        if HAS_DEVICE_PROPAGATION:
            self.assertEqual(unguarded["cuda-tagged constants"], 1)
