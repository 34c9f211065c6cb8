# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The repository's sessions, each in a fresh virtualenv (`nox --list`): tests (CI's .ci/run), compat (every
released executorch 1.x, then test/COMPAT_RESULTS.md), bench and series (`nox -s series -- --mutations`: arguments
after -- go to the script). torch is pinned to 2.13.0, the CPU build that pip finds here: an unpinned torch pulls a
CUDA build of several GB. pip, not uv: uv ignores pip's configuration and would fetch that CUDA build.
"""

import os
import re
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["tests"]

TORCH = "torch==2.13.0"
BASE_RELEASE = "1.5.1"  # the release the series is based on: upstream/check.py's BASE_RELEASE
OTHER_RELEASE = "1.4.1"  # the tests session's second release, the newest before BASE_RELEASE's minor version
# The tests whose outcome depends on the ExecuTorch release (test_series.py: the series' tests against
# the package); the others (installs, the benchmark, the Buck check) test this repository's tools and
# run on BASE_RELEASE only.
RELEASE_TESTS = (
    "test/test_emitter.py", "test/test_sites.py", "test/test_device_sites.py", "test/test_cuda.py",
    "test/test_series.py",
)
# executorch release -> (torch, torchao): the newest of each that the release allows and that pip
# finds here. 1.0.x pin torch<2.10: 2.9.1 comes from the registry as a CUDA build (it runs on the CPU).
COMPAT = {
    "1.0.0": ("2.9.1", "0.14.0"),
    "1.0.1": ("2.9.1", "0.14.0"),
    "1.1.0": ("2.13.0", "0.15.0"),
    "1.2.0": ("2.13.0", "0.18.0"),
    "1.3.1": ("2.13.0", "0.18.0"),
    "1.4.0": ("2.13.0", "0.18.0"),
    "1.4.1": ("2.13.0", "0.18.0"),
    "1.5.0": ("2.13.0", "0.18.0"),
    "1.5.1": ("2.13.0", "0.18.0"),
}
# These wheels ship flatc but do not find it (1.2.0 and 1.3.1 only for bundled programs).
SHIPPED_FLATC = ("1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1")
# Each release's raw results, committed: its self-check's output (RELEASE.txt) and pytest's junit XML (RELEASE.xml), so
# that one release's session renders the rows of all of them.
COMPAT_DIR = "test/compat"
# worksteal: the idle worker takes the tests queued behind a long one (conftest.py deals the long ones out first).
PYTEST = ("pytest", "-n", "2", "--dist", "worksteal", "-rs")


def install_uncompiled(session: nox.Session, *args: str) -> None:
    """pip install without byte-compiling: pip compiles all 16,000 modules of the environment, about half of an
    install's time (67 s with it, 32 s without, here), while a full test run imports about 4,200, whose bytecode
    Python writes on first import. PYTHONDONTWRITEBYTECODE, set on some machines, would have every process compile
    them again (importing torch and ExecuTorch: 18 s instead of 7), so the session unsets it. The bench session
    installs as pip does by default: the benchmark times imports."""
    session.install("--no-compile", *args)
    session.env["PYTHONDONTWRITEBYTECODE"] = None  # None: nox leaves it out of every command's environment


@nox.session
def tests(session: nox.Session) -> None:
    """Every test on BASE_RELEASE, then RELEASE_TESTS with OTHER_RELEASE installed in its place: one environment,
    so torch, the same pin for both, is installed once (about 30 s of the command). CUDA tests skip without a GPU."""
    install_uncompiled(session, TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[test]")
    session.run(*PYTEST, *session.posargs)
    install_uncompiled(session, TORCH, f"executorch=={OTHER_RELEASE}")
    session.run(*PYTEST, *RELEASE_TESTS, *session.posargs)


def in_checkout(text: str) -> str:
    """The raw results are committed: their paths relative to the checkout, none of this machine's."""
    return text.replace(os.getcwd() + os.sep, "")


@nox.session
@nox.parametrize("executorch", list(COMPAT))
def compat(session: nox.Session, executorch: str) -> None:
    """The release's tests and self-check, into COMPAT_DIR; then compat_table renders them."""
    session.notify("compat_table")
    for suffix in ("txt", "xml"):  # a run that stops early leaves no row, rather than an old one
        Path(f"{COMPAT_DIR}/{executorch}.{suffix}").unlink(missing_ok=True)
    torch, torchao = COMPAT[executorch]
    install_uncompiled(session, f"torch=={torch}", f"torchao=={torchao}", f"executorch=={executorch}", "-e", ".[test]")
    flatc = ""
    if executorch in SHIPPED_FLATC:
        package = "import importlib.util; print(importlib.util.find_spec('executorch').submodule_search_locations[0])"
        session.env["FLATC_EXECUTABLE"] = session.run("python", "-c", package, silent=True).strip() + "/data/bin/flatc"
        flatc = "FLATC_EXECUTABLE: the wheel's executorch/data/bin/flatc\n"
    # A failing self-check (exit status 1: a FAIL line, a traceback, or no self-check at all) still
    # lets the tests run, so that the release gets its row; the session fails at the end.
    status = session.run("python", "-m", "executorch_device_guard", silent=True, success_codes=[0, 1])
    os.makedirs(COMPAT_DIR, exist_ok=True)
    Path(f"{COMPAT_DIR}/{executorch}.txt").write_text(in_checkout(flatc + status))
    junit = Path(f"{COMPAT_DIR}/{executorch}.xml")
    try:
        session.run(*PYTEST, f"--junitxml={junit}", *RELEASE_TESTS)
    finally:  # failing tests leave a row too
        if junit.exists():
            junit.write_text(in_checkout(junit.read_text()))
    if not re.search(r"^self-check \(", status, re.M) or re.search(r"^(  FAIL |Traceback)", status, re.M):
        session.error(f"the self-check failed: {COMPAT_DIR}/{executorch}.txt")


@nox.session(venv_backend="none")
def compat_table(session: nox.Session) -> None:
    """test/COMPAT_RESULTS.md from what the compat sessions left in COMPAT_DIR."""
    session.run(sys.executable, "-m", "upstream.compat", COMPAT_DIR, "test/COMPAT_RESULTS.md", external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """bench/bench.py on the series' base release."""
    session.install(TORCH, f"executorch=={BASE_RELEASE}", "-e", ".")
    session.run("python", "bench/bench.py", *session.posargs)


@nox.session
def series(session: nox.Session) -> None:
    """python -m upstream.check on the series' base release (mypy at upstream's pin for --mypy)."""
    install_uncompiled(session, TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[test]", "mypy==1.14.1")
    session.run("python", "-m", "upstream.check", *session.posargs)
