# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Skips, with the reason, the tests that do not apply to the installed ExecuTorch release;
with MUTANT=NAME in the environment, removes the check of the wrapper NAME (nox -s mutations)."""

import functools
import os
from importlib.metadata import version
from typing import Any

import pytest

RELEASE: tuple[int, ...] = tuple(
    int(part) for part in version("executorch").split(".")[:2]
)
# (first release it applies to, node id prefix, reason)
NOT_APPLICABLE = (
    (
        (1, 1),
        "test/test_device_sites.py::TestSimulatedDevice::test_named_device_data_is_the_cpu_bytes",
        "executorch 1.0.x's NamedDataStore.add_named_data takes bytes, not tensors",
    ),
    (
        (1, 2),
        "test/test_device_sites.py::TestSimulatedDevice::test_named_data_of_a_channels_last_view",
        "before executorch 1.2.0 there is no _tensor_to_bytes, where the guard stores a view's values",
    ),
)


def not_applicable(nodeid: str) -> str | None:
    """Why the test does not apply to the installed release, or None."""
    for first, prefix, reason in NOT_APPLICABLE:
        if RELEASE < first and nodeid.startswith(prefix):
            return reason
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        reason = not_applicable(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_configure() -> None:
    """The mutant: the wrapper calls its original and nothing else, in this process's guard."""
    name = os.environ.get("MUTANT")
    if name:
        import executorch_device_guard as guard
        from executorch_device_guard import _sites

        def passthrough(original: Any, *args: Any, **kwargs: Any) -> Any:
            return original(*args, **kwargs)

        _sites.WRAPPERS[name] = functools.wraps(_sites.WRAPPERS[name])(passthrough)
        guard.uninstall()
        guard.install()
