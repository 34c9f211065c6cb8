# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The tests that run in this process find the guard as interpreter start left it (the
startup line installs it unless ENV_VAR turns it off), and leave it so."""

import contextlib
import functools
import importlib
from collections.abc import Iterator
from importlib.metadata import version

import executorch_device_guard as guard
from executorch_device_guard._patch import CUSTOM_OPS

# The installed executorch release, (major, minor): some tests apply from a release on.
RELEASE = tuple(int(part) for part in version("executorch").split(".")[:2])


@contextlib.contextmanager
def guard_set(on: bool) -> Iterator[None]:
    """The guard installed (`on`) or not, for the block; then as it was."""
    was = guard.status().installed
    guard.install() if on else guard.uninstall()
    try:
        yield
    finally:
        guard.install() if was else guard.uninstall()


@functools.cache
def custom_ops_error() -> str | None:
    """Why ExecuTorch's LLM custom ops library does not load here (it is built for one torch),
    or None: it is loaded, and the guard has its operators if it is installed."""
    try:
        importlib.import_module(CUSTOM_OPS)
    except Exception as error:
        return f"the LLM custom ops library does not load with this torch: {error}"
    return None
