# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest

import torch
from executorch.exir._serialize._named_data_store import NamedDataStore


class TestNamedDataViews(unittest.TestCase):
    def test_channels_last_view_stores_its_own_values(self) -> None:
        batch = torch.arange(120.0).reshape(2, 3, 4, 5)
        view = batch.to(memory_format=torch.channels_last)[1:]
        store = NamedDataStore()
        store.add_named_data("w", view)
        output = store.get_named_data_store_output()
        entry = output.pte_data["w"]
        layout = entry.tensor_layout
        buffer = output.buffers[entry.buffer_index]
        self.assertIsNotNone(layout)
        self.assertIsInstance(buffer, bytes)
        self.assertEqual(layout.dim_order, [0, 2, 3, 1])
        stored = torch.frombuffer(bytearray(buffer), dtype=view.dtype)
        read_back = stored.reshape([layout.sizes[d] for d in layout.dim_order]).permute(0, 3, 1, 2)
        self.assertTrue(torch.equal(read_back, view))

    def test_channels_last_tensor_is_stored_as_before(self) -> None:
        tensor = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
        store = NamedDataStore()
        store.add_named_data("w", tensor)
        (buffer,) = store.get_named_data_store_output().buffers
        self.assertEqual(buffer, bytes(tensor.untyped_storage()))


if __name__ == "__main__":
    unittest.main()
