# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Skips, with the reason, the tests that do not apply to the installed ExecuTorch release, and runs the
longest tests first."""

import os
from importlib.metadata import version
from typing import List, Optional, Tuple

import pytest

RELEASE: Tuple[int, ...] = tuple(int(part) for part in version("executorch").split(".")[:2])
# (first release it applies to, node id prefix, reason), the first match counts.
NOT_APPLICABLE: Tuple[Tuple[Tuple[int, int], str, str], ...] = (
    (
        (1, 1),
        "test/test_device_sites.py::TestSimulatedDevice::test_named_device_data_is_the_cpu_bytes",
        "executorch 1.0.x's NamedDataStore.add_named_data takes bytes, not tensors",
    ),
)


# The tests that take 20 s or more (a copy of ExecuTorch patched and tested in child processes, the benchmark's
# children, pip installs), slowest first, by node id prefix.
FIRST: Tuple[str, ...] = (
    "test/test_series.py::TestSeries::test_patched_executorch_passes_without_the_runtime_guard",
    "test/test_bench.py",
    "test/test_sites.py",
    "test/test_series.py",
    "test/test_activation.py::TestInstalls",
    "test/test_emitter.py::TestCpuProgramsUnchanged",
)


def not_applicable(nodeid: str) -> Optional[str]:
    """Why the test does not apply to the installed release, or None."""
    for first, prefix, reason in NOT_APPLICABLE:
        if RELEASE < first and nodeid.startswith(prefix):
            return reason
    return None


def _rank(item: pytest.Item) -> int:
    return next((rank for rank, path in enumerate(FIRST) if item.nodeid.startswith(path)), len(FIRST))


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Puts the FIRST tests first (the sort is stable), then deals them out to the xdist workers like cards: the
    worksteal scheduler gives each worker a contiguous share of the list, the smaller shares first, and a worker that
    runs out steals from the end of another's, so each share starts with long tests and ends with short ones. Marks
    each test that does not apply to the installed release as skipped, with its reason."""
    items.sort(key=_rank)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = [item for first in reversed(range(workers)) for item in items[first::workers]]
    for item in items:
        reason = not_applicable(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
