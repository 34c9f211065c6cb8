# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The repository's sessions: each makes a fresh virtual environment (virtualenv, pip) and
installs what it needs. `nox --list` shows them.

    nox -s tests                 # the CI versions, 1.5.1 and 1.4.1 (CI's .ci/run)
    nox -s bench -- --quick      # bench/bench.py, arguments after --
    nox -s series -- --mutations # python -m upstream.check on the release the series is based on

torch is pinned to 2.13.0, the CPU build that pip finds here: an unpinned torch pulls a CUDA build
of several GB. pip, not uv: uv ignores pip's configuration and would fetch that CUDA build.
"""

import nox

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["tests"]

TORCH = "torch==2.13.0"
BASE_RELEASE = "1.5.1"  # the release the series is based on: upstream/generate.py's BASE_RELEASE


@nox.session
@nox.parametrize("executorch", ["1.5.1", "1.4.1"])
def tests(session: nox.Session, executorch: str) -> None:
    """The test suite on one release; CUDA tests skip without a GPU."""
    session.install(TORCH, f"executorch=={executorch}", "-e", ".[test]")
    session.run("pytest", "-n", "2", "-rs", "test", "exir", "devtools", "backends", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """bench/bench.py on the series' base release."""
    session.install(TORCH, f"executorch=={BASE_RELEASE}", "-e", ".")
    session.run("python", "bench/bench.py", *session.posargs)


@nox.session
def series(session: nox.Session) -> None:
    """upstream/check.py on the series' base release (mypy at upstream's pin for --mypy)."""
    session.install(TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[test]", "mypy==1.14.1")
    session.run("python", "-m", "upstream.check", *session.posargs)
