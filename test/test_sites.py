# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The other host reads: bundled programs, named data, XNNPACK and Vulkan, in child interpreters.

Each case shows today's failure with the guard off and the guarded behaviour with it on: an
InternalError for model constants, bytes identical to the CPU result for plain data.
"""

import unittest

from cases import BUNDLE, ChildCaseTest, MODEL, NAMED_DATA
from executorch_device_guard._selfcheck import Case, SIGSEGV, SIMULATION

_MODEL = SIMULATION + MODEL

_BUNDLED = _MODEL + BUNDLE + """
inputs = [torch.randn(2, 4)]
expected_outputs = [model(*inputs)]
"""
_BUNDLED_ON_DEVICE = _BUNDLED + """
on_device = bundle([simulate_device(t.clone()) for t in inputs], [simulate_device(t.clone()) for t in expected_outputs])
assert on_device == bundle(inputs, expected_outputs), "bundled bytes differ from the CPU result"
"""
_BUNDLED_META = _BUNDLED + """
bundle([torch.empty(2, 4, device="meta")], expected_outputs)
"""

_NAMED_DATA = SIMULATION + NAMED_DATA
_NAMED_DATA_ON_DEVICE = _NAMED_DATA + """
for name, tensor in layouts.items():
    simulated = simulate_device(tensor.clone(memory_format=torch.preserve_format))
    reads = SimulatedDeviceStorage.element_reads
    assert stored(simulated) == stored(tensor), f"{name}: named data differs from the CPU result"
    assert SimulatedDeviceStorage.element_reads == reads, f"{name}: read byte by byte"
"""
_NAMED_DATA_CHANNELS_LAST = _NAMED_DATA + """
stored(simulate_device(layouts["channels_last"].clone(memory_format=torch.preserve_format)))
assert SimulatedDeviceStorage.element_reads == weight.nbytes, SimulatedDeviceStorage.element_reads
"""
_NAMED_DATA_META = _NAMED_DATA + """
stored(torch.empty(2, 3, device="meta"))
"""

_XNNPACK = _MODEL + """
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
"""
_XNNPACK_ON_DEVICE = _XNNPACK + """
lower_on_device(XnnpackBackend)
to_edge_transform_and_lower(export(model, x), partitioner=[XnnpackPartitioner()])
"""
_XNNPACK_META = _XNNPACK + """
model, x = model.to("meta"), (torch.ones(2, 4, device="meta"),)
to_edge_transform_and_lower(export(model, x), partitioner=[XnnpackPartitioner()])
"""
_XNNPACK_SCALES_ON_DEVICE = _XNNPACK + """
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    get_symmetric_quantization_config,
    XNNPACKQuantizer,
)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
prepared = prepare_pt2e(export(model, x).module(), quantizer)
prepared(*x)
quantized = export(convert_pt2e(prepared), x)
lower_on_device(XnnpackBackend, only="_scale_")  # the int8 weight stays on the host
to_edge_transform_and_lower(quantized, partitioner=[XnnpackPartitioner()])
"""

_VULKAN_ON_DEVICE = _MODEL + """
from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from executorch.backends.vulkan.vulkan_preprocess import VulkanBackend
lower_on_device(VulkanBackend)
to_edge_transform_and_lower(export(model, x), partitioner=[VulkanPartitioner()])
"""

_DEVICE_ERROR = ("InternalError", "cuda:0", "Move the module and its example inputs to the CPU")
_NO_DATA = ("InternalError", "holds no data")


class TestGuardedSites(ChildCaseTest):
    def test_bundled_program(self) -> None:
        self.assert_cases(
            Case("bundled on cuda:0, guard off", _BUNDLED_ON_DEVICE, False, SIGSEGV, ()),
            Case("bundled on cuda:0, guard on: CPU bytes", _BUNDLED_ON_DEVICE, True, 0, ()),
            Case("bundled meta, guard off", _BUNDLED_META, False, 1, ("NULL pointer access",)),
            Case("bundled meta, guard on", _BUNDLED_META, True, 1, (*_NO_DATA, "Bundled test tensor")),
        )

    def test_named_data(self) -> None:
        self.assert_cases(
            Case("named data on cuda:0, guard off", _NAMED_DATA_ON_DEVICE, False, 1, ("can't convert cuda:0",)),
            Case("named data on cuda:0, guard on: CPU bytes, one copy", _NAMED_DATA_ON_DEVICE, True, 0, ()),
            Case("named data channels-last, guard off: byte by byte", _NAMED_DATA_CHANNELS_LAST, False, 0, ()),
            Case("named data meta, guard off", _NAMED_DATA_META, False, 1, ("to numpy",)),
            Case("named data meta, guard on", _NAMED_DATA_META, True, 1, (*_NO_DATA, "Named data 'w'")),
        )

    def test_xnnpack(self) -> None:
        self.assert_cases(
            Case("xnnpack on cuda:0, guard off", _XNNPACK_ON_DEVICE, False, SIGSEGV, ()),
            Case("xnnpack on cuda:0, guard on", _XNNPACK_ON_DEVICE, True, 1, (*_DEVICE_ERROR, "Constant '0.weight'")),
            Case("xnnpack meta, guard off", _XNNPACK_META, False, 1, ("NULL pointer access",)),
            Case("xnnpack meta, guard on", _XNNPACK_META, True, 1, (*_NO_DATA, "Constant '0.weight'")),
        )

    def test_xnnpack_per_channel_scales(self) -> None:
        self.assert_cases(
            Case("xnnpack scales on cuda:0, guard off", _XNNPACK_SCALES_ON_DEVICE, False, SIGSEGV, ()),
            Case("xnnpack scales on cuda:0, guard on", _XNNPACK_SCALES_ON_DEVICE, True, 1, (*_DEVICE_ERROR, "per-channel scales")),
        )

    def test_vulkan(self) -> None:
        self.assert_cases(
            Case("vulkan on cuda:0, guard off", _VULKAN_ON_DEVICE, False, SIGSEGV, ()),
            Case("vulkan on cuda:0, guard on", _VULKAN_ON_DEVICE, True, 1, (*_DEVICE_ERROR, "Constant '0.weight'")),
        )


if __name__ == "__main__":
    unittest.main()
