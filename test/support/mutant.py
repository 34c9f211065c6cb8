# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A pytest plugin for `nox -s mutations`: with MUTANT=WRAPPER in the environment (a site
table's `wrapper`, such as "_export_sites.emitter_constant"), that wrapper calls its original
and nothing else, in this process's guard."""

import functools
import os
from typing import Any


def pytest_configure() -> None:
    import executorch.exir  # noqa: F401  # before the wrappers, whose import would patch it

    import executorch_device_guard as guard
    from executorch_device_guard._wrapping import wrapper_home

    def passthrough(original: Any, *args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    wrappers, name = wrapper_home(os.environ["MUTANT"])
    setattr(wrappers, name, functools.wraps(getattr(wrappers, name))(passthrough))
    guard.uninstall()
    guard.install()
