# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Without the guard, the cases of exir/tests/test_host_data.py fail as ExecuTorch does today.

exir/tests/test_host_data.py (the upstream series' tests) asserts what the guard does at each
host read; here the same child scripts run with EXECUTORCH_DEVICE_GUARD=0 and must crash or fail,
so that those tests can fail.
"""

import executorch_device_guard.tests.test_host_data as series
from cases import ChildCaseTest
from executorch_device_guard._selfcheck import Case, SIGSEGV

_NAMED_DATA_CHANNELS_LAST = series.NAMED_DATA + """
stored(simulate_device(layouts["channels_last"].clone(memory_format=torch.preserve_format)))
assert SimulatedDeviceStorage.element_reads == weight.nbytes, SimulatedDeviceStorage.element_reads
"""


def _unguarded(name: str, script: str, returncode: int, *stderr_has: str) -> Case:
    return Case(f"{name}, guard off", script, False, returncode, stderr_has)


class TestUnguardedSites(ChildCaseTest):
    def test_emitter(self) -> None:
        emitter = series.TestEmitterDeviceConstants
        self.assert_cases(
            *(
                _unguarded(name, script, SIGSEGV)
                for name, script in (
                    ("weight", emitter.WEIGHT),
                    ("buffer", emitter.BUFFER),
                    ("lifted constant", emitter.LIFTED_CONSTANT),
                    ("external constant", emitter.EXTERNAL_CONSTANT),
                    ("constant method", emitter.CONSTANT_METHOD),
                )
            ),
            _unguarded("meta", emitter.META, 1, "NULL pointer access"),
        )

    def test_bundled_program(self) -> None:
        bundled = series.TestBundledProgramDeviceData
        self.assert_cases(
            _unguarded("bundled on cuda:0", bundled.ON_DEVICE, SIGSEGV),
            _unguarded("bundled meta", bundled.META, 1, "NULL pointer access"),
        )

    def test_named_data(self) -> None:
        named = series.TestNamedDataDeviceData
        self.assert_cases(
            _unguarded("named data on cuda:0", named.ON_DEVICE, 1, "can't convert cuda:0"),
            _unguarded("named data channels-last: byte by byte", _NAMED_DATA_CHANNELS_LAST, 0),
            _unguarded("named data meta", named.META, 1, "to numpy"),
        )

    def test_xnnpack(self) -> None:
        xnnpack = series.TestXnnpackDeviceConstants
        self.assert_cases(
            _unguarded("xnnpack on cuda:0", xnnpack.ON_DEVICE, SIGSEGV),
            _unguarded("xnnpack meta", xnnpack.META, 1, "NULL pointer access"),
            _unguarded("xnnpack scales on cuda:0", xnnpack.SCALES_ON_DEVICE, SIGSEGV),
        )

    def test_vulkan(self) -> None:
        self.assert_cases(_unguarded("vulkan on cuda:0", series.TestVulkanDeviceConstants.ON_DEVICE, SIGSEGV))

