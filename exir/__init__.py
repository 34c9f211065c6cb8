# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Turns ExecuTorch's SIGSEGV on device-resident tensors into a clear InternalError.

Installing the package is enough: its startup line (executorch_device_guard.pth) calls
_hook.startup() in every Python process, and the guard wires itself into ExecuTorch when the
guarded modules are first imported. ENV_VAR, EXECUTORCH_DEVICE_GUARD, turns that off (_hook's
docstring gives the rule). This module is imported at interpreter start, so it imports nothing
but _hook (os and sys); status() loads _patch.
"""

from ._hook import ENV_VAR, install, status, uninstall

__version__ = "0.1.0"
__all__ = ["ENV_VAR", "install", "status", "uninstall"]
