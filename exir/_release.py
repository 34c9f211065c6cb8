# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The installed ExecuTorch release, and the one rule by which the guard and its tests compare
releases: PEP 440's, through `packaging` (which ExecuTorch depends on too), so that a
pre-release or a dev build of 1.5.0 counts as older than 1.5.0. Imports nothing of the package,
and packaging only when a release is first compared (its import costs more than the guard's
own work at the first `import executorch.exir`, where no comparison is needed).
"""

import functools
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.version import Version


@functools.cache
def installed() -> "Version | None":
    """The installed executorch's version; None where it is not installed or its version is
    not one PEP 440 can read."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(metadata.version("executorch"))
    except (metadata.PackageNotFoundError, InvalidVersion):
        return None


def before(release: str) -> bool:
    """Whether the installed executorch is older than `release`; an unknown one is not."""
    from packaging.version import Version

    found = installed()
    return found is not None and found < Version(release)
