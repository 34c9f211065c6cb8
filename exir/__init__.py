# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Where ExecuTorch would read a tensor's bytes in host memory and the tensor is in device
memory (a crash, mostly SIGSEGV), raises an error first that names the tensor, its device and
the way out; ExecuTorch's own error type at each site (InternalError in the emitter).

Installing the package is enough: its startup line (executorch_device_guard.pth) calls
_hook.startup() in every Python process, and the guard wires itself into ExecuTorch when the
guarded modules are first imported. ENV_VAR, EXECUTORCH_DEVICE_GUARD, turns that off (_hook's
docstring gives the rule). This module is imported at interpreter start, so it imports nothing
but _hook (os and sys); status() loads _wrapping.
"""

from ._hook import ENV_VAR, install, status, uninstall

__version__ = "0.1.0"
__all__ = ["ENV_VAR", "install", "status", "uninstall"]
