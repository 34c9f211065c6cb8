# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import os
import unittest

import torch
from executorch.exir._serialize._named_data_store import (
    _tensor_to_bytes,
    NamedDataStore,
    NamedDataStoreOutput,
)
from executorch.exir.error import InternalError
from executorch_device_guard.tests.simulated_device import simulate_device


def stored(tensor: torch.Tensor) -> NamedDataStoreOutput:
    store = NamedDataStore()
    store.add_named_data("w", tensor)
    return store.get_named_data_store_output()


@unittest.skipUnless(os.name == "posix", "simulated device memory needs POSIX mmap")
class TestNamedDataDevice(unittest.TestCase):
    def test_device_data_is_stored_as_on_the_cpu(self) -> None:
        weight = torch.randn(2, 3, 4, 5)
        for layout in (torch.contiguous_format, torch.channels_last):
            with self.subTest(layout=layout):
                tensor = weight.to(memory_format=layout)
                on_device = simulate_device(tensor.clone(memory_format=layout))
                self.assertEqual(stored(on_device), stored(tensor))

    def test_channels_last_is_read_in_one_piece(self) -> None:
        for tensor in (
            torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
            torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d),
        ):
            expected = bytes(tensor.untyped_storage())
            self.assertEqual(_tensor_to_bytes(simulate_device(tensor)), expected)

    def test_meta_data_has_no_data(self) -> None:
        with self.assertRaisesRegex(
            InternalError, "Named data 'w' .* is a meta or fake tensor and holds no data"
        ):
            stored(torch.empty(2, 3, device="meta"))


if __name__ == "__main__":
    unittest.main()
