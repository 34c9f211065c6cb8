# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the test modules share: a TestCase that runs child cases side by side."""

import unittest

from executorch_device_guard._selfcheck import Case, run_cases


class ChildCaseTest(unittest.TestCase):
    def assert_cases(self, *cases: Case) -> None:
        """Runs the cases side by side; each child must end as its case expects."""
        for case, failure in run_cases(cases):
            self.assertIsNone(failure, case.name)
