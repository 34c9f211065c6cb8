# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A pytest plugin for `nox -s mutations`: with MUTANT=NAME in the environment, the _sites
wrapper NAME calls its original and nothing else, in this process's guard."""

import functools
import os
from typing import Any


def pytest_configure() -> None:
    import executorch.exir  # noqa: F401  # before _sites, whose import would patch it
    import executorch_device_guard as guard
    from executorch_device_guard import _sites

    def passthrough(original: Any, *args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    name = os.environ["MUTANT"]
    _sites.WRAPPERS[name] = functools.wraps(_sites.WRAPPERS[name])(passthrough)
    guard.uninstall()
    guard.install()
