# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest

import torch
from executorch.exir._serialize._named_data_store import (
    NamedDataStore,
    NamedDataStoreOutput,
)


def stored(tensor: torch.Tensor) -> NamedDataStoreOutput:
    store = NamedDataStore()
    store.add_named_data("w", tensor)
    return store.get_named_data_store_output()


class TestNamedDataDevice(unittest.TestCase):
    def test_meta_data_has_no_data(self) -> None:
        with self.assertRaises(NotImplementedError):
            stored(torch.empty(2, 3, device="meta"))

    @unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
    def test_cuda_data_is_stored_as_on_the_cpu(self) -> None:
        channels_last = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
        for tensor in (torch.randn(2, 3, 4, 5), channels_last, channels_last[1:]):
            with self.subTest(stride=tensor.stride()):
                self.assertEqual(stored(tensor.cuda()), stored(tensor))


if __name__ == "__main__":
    unittest.main()
