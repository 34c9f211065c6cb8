# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Skips, with the reason, the tests that do not apply to the installed ExecuTorch release.

The series' tests are upstream's files and test upstream main; older releases lack what some of
them test.
"""

from importlib.metadata import version
from typing import List, Optional, Tuple

import pytest

RELEASE: Tuple[int, ...] = tuple(int(part) for part in version("executorch").split(".")[:2])
_BYTES_ONLY = "executorch 1.0.x's NamedDataStore.add_named_data takes bytes, not tensors"
# (first release it applies to, node id prefix, reason), the first match counts.
NOT_APPLICABLE: Tuple[Tuple[Tuple[int, int], str, str], ...] = (
    ((1, 1), "exir/_serialize/test/test_named_data_", _BYTES_ONLY),
    ((1, 1), "test/test_device_sites.py::TestSimulatedDevice::test_named_device_data_is_the_cpu_bytes", _BYTES_ONLY),
    (
        (1, 2),
        "exir/_serialize/test/test_named_data_views.py",
        "the fix wraps _tensor_to_bytes, which executorch has from 1.2.0; before, a view's named data"
        " is its whole storage, with or without the guard",
    ),
)


def not_applicable(nodeid: str) -> Optional[str]:
    """Why the test does not apply to the installed release, or None."""
    for first, prefix, reason in NOT_APPLICABLE:
        if RELEASE < first and nodeid.startswith(prefix):
            return reason
    return None


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Marks each test that does not apply to the installed release as skipped, with its reason."""
    for item in items:
        reason = not_applicable(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
