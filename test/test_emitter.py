# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The emitter guard, end to end, in child interpreters with the installed startup hook.

The issue's reproducer with its weight simulated on cuda:0 crashes to_executorch() without the
guard and raises InternalError naming the device and the constant with it; a meta model says it
has no data; CPU programs serialize byte for byte as before.
"""

import importlib.util
import json
import unittest

from cases import ChildCaseTest, MODEL, MODULES
from executorch_device_guard._selfcheck import Case, CASES, SIGSEGV, start_child

# The reproducer, lowered on the CPU, then its weight simulated on cuda:0 (after MODEL).
_SIMULATED_WEIGHT = MODEL + """
edge = to_edge_transform_and_lower(export(model, x))
simulate_device(edge.exported_program().state_dict["0.weight"])
edge.to_executorch()
"""

_PREAMBLE = MODEL + MODULES + """
from executorch.exir import ExecutorchBackendConfig

def linear():
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
"""

_DEVICE_TAGGED = """
from executorch.exir import EdgeCompileConfig, to_edge
from executorch.exir.backend.test.device_util import DeviceAwarePartitioner
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig

def device_tagged(config):
    # add(x, offset) is delegated to a cuda:0 backend; offset stays a top-level constant.
    edge = to_edge(export(WithBuffer(), x), compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return edge.to_backend(DeviceAwarePartitioner()).to_executorch(config)
"""
_HAS_DEVICE_PROPAGATION = (
    importlib.util.find_spec("executorch.exir.passes.propagate_device_config") is not None
    and importlib.util.find_spec("executorch.exir.backend.test.device_util") is not None
)


class TestEmitterGuard(ChildCaseTest):
    def test_simulated_weight_segfaults_unguarded_and_raises_guarded(self) -> None:
        self.assert_cases(
            Case("simulated cuda:0 weight, guard off", _SIMULATED_WEIGHT, False, SIGSEGV, ()),
            Case("simulated cuda:0 weight, guard on", _SIMULATED_WEIGHT, True, 1,
                 ("InternalError: Constant 'p_0_weight' (shape [3, 4], dtype torch.float32) is on cuda:0",)),
        )

    def test_meta_model_says_it_has_no_data(self) -> None:
        self.assertEqual([(case.guard, case.returncode) for case in CASES], [(False, 1), (True, 1)])
        self.assert_cases(*CASES)

    @unittest.skipUnless(_HAS_DEVICE_PROPAGATION, "this ExecuTorch has no device propagation")
    def test_constant_without_storage_fails_as_before(self) -> None:
        # The H2D copy of a constant gets a const spec with no storage (executorch 1.5.1): an
        # AttributeError that the emitter wraps with the whole graph, guard or no guard.
        script = _PREAMBLE + _DEVICE_TAGGED + "device_tagged(ExecutorchBackendConfig())\n"
        self.assert_cases(
            Case("no storage, guard off", script, False, 1, ("'NoneType' object has no attribute 'nbytes'",)),
            Case("no storage, guard on", script, True, 1, ("'NoneType' object has no attribute 'device'",)),
        )


_SERIALIZE = _PREAMBLE + """
import hashlib
from executorch.exir.emit._emitter import _Emitter

def conv_bn():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()

def lowered(model, inputs, **kwargs):
    return to_edge_transform_and_lower(export(model, inputs), **kwargs)

torch.manual_seed(0)
programs = {
    "linear": lowered(linear(), x).to_executorch(),
    "conv_bn": lowered(conv_bn(), (torch.randn(1, 3, 8, 8),)).to_executorch(),
    "buffer": lowered(WithBuffer(), x).to_executorch(),
    "lifted_constant": lowered(WithConstant(), x).to_executorch(),
    "constant_methods": lowered(linear(), x, constant_methods={"table": torch.arange(5.0), "n": 3}).to_executorch(),
    "external_constants": lowered(linear(), x).to_executorch(ExecutorchBackendConfig(external_constants=True)),
}
digests = {}
for name, program in programs.items():
    digests[name] = hashlib.sha256(program.buffer).hexdigest()
    for key, data in program._tensor_data.items():
        digests[f"{name}/{key}"] = hashlib.sha256(bytes(data)).hexdigest()
DEVICE_PROPAGATION = False
"""
_SERIALIZE_DEVICE_TAGGED = _DEVICE_TAGGED + """
from executorch.exir.schema import DeviceType, Tensor
# Without the H2D copy, PropagateDevicePass tags offset's own spec CUDA; its storage stays on the CPU.
program = device_tagged(
    ExecutorchBackendConfig(
        propagate_device_config=PropagateDeviceConfig(skip_h2d_for_method_inputs=True),
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False),
    )
)
digests["device_tagged"] = hashlib.sha256(program.buffer).hexdigest()
values = program._emitter_output.program.execution_plan[0].values
tagged = [
    v.val for v in values
    if isinstance(v.val, Tensor) and v.val.data_buffer_idx > 0 and v.val.extra_tensor_info is not None
    and v.val.extra_tensor_info.device_type == DeviceType.CUDA
]
digests["cuda_tagged_constants"] = len(tagged)
"""
_REPORT = """
print(json.dumps({"guarded": hasattr(_Emitter._tensor_spec_to_evalue, "__wrapped__"), "digests": digests}))
"""


class TestCpuProgramsUnchanged(unittest.TestCase):
    def test_cpu_programs_are_byte_identical(self) -> None:
        script = "import json\n" + _SERIALIZE
        if _HAS_DEVICE_PROPAGATION:
            script += _SERIALIZE_DEVICE_TAGGED
        script += _REPORT
        children = {guard: start_child(script, guard) for guard in (True, False)}  # side by side
        outputs = {guard: child.communicate() for guard, child in children.items()}
        runs = {}
        for guard, (stdout, stderr) in outputs.items():
            self.assertEqual(children[guard].returncode, 0, stderr[-3000:])
            runs[guard] = json.loads(stdout.strip().splitlines()[-1])
        self.assertTrue(runs[True]["guarded"])
        self.assertFalse(runs[False]["guarded"])
        self.assertEqual(runs[True]["digests"], runs[False]["digests"])
        self.assertGreaterEqual(len(runs[True]["digests"]), 7)
        if _HAS_DEVICE_PROPAGATION:
            # The device-propagation program really has a CUDA-tagged constant with CPU storage.
            self.assertEqual(runs[True]["digests"]["cuda_tagged_constants"], 1)


if __name__ == "__main__":
    unittest.main()
