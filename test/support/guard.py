# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The tests that run in this process find the guard as interpreter start left it (the
startup line installs it unless ENV_VAR turns it off), and leave it so."""

import contextlib
from collections.abc import Iterator

import executorch_device_guard as guard


@contextlib.contextmanager
def guard_set(on: bool) -> Iterator[None]:
    """The guard installed (`on`) or not, for the block; then as it was."""
    was = guard.status().installed
    guard.install() if on else guard.uninstall()
    try:
        yield
    finally:
        guard.install() if was else guard.uninstall()
