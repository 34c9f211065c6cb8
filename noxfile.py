# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The repository's sessions, each in a fresh virtualenv (`nox --list`): tests (CI, with lint),
lint, compat (every released executorch 1.x), mutations, suites, bench and series (arguments
after -- go to the script). torch is pinned: from the public index on Linux, an unpinned
torch is the CUDA build of several GB. pip, not uv: uv ignores pip's configuration.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import nox

sys.path.insert(0, os.path.dirname(__file__))
from upstream import BASE_RELEASE  # noqa: E402

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["lint", "tests"]

TORCH = "torch==2.13.0"
OTHER_RELEASE = "1.4.1"  # the tests session's second release, the newest before BASE_RELEASE's minor
# The tests whose outcome depends on the ExecuTorch release; the others (installs, the
# benchmark, the Buck check) test this repository's tools, on BASE_RELEASE only.
RELEASE_TESTS = (
    "test/test_emitter.py",
    "test/test_sites.py",
    "test/test_device_sites.py",
    "test/test_cuda.py",
    "test/test_series.py",
)
# (executorch, torch, torchao): the newest torch and torchao that each release allows and pip
# finds, and 1.5.1 with the newest torch, which `pip install executorch==1.5.1` takes.
COMPAT = (
    ("1.0.0", "2.9.1", "0.14.0"),
    ("1.0.1", "2.9.1", "0.14.0"),
    ("1.1.0", "2.13.0", "0.15.0"),
    ("1.2.0", "2.13.0", "0.18.0"),
    ("1.3.1", "2.13.0", "0.18.0"),
    ("1.4.0", "2.13.0", "0.18.0"),
    ("1.4.1", "2.13.0", "0.18.0"),
    ("1.5.0", "2.13.0", "0.18.0"),
    ("1.5.1", "2.13.0", "0.18.0"),
    ("1.5.1", "2.14.1", "0.18.0"),
)
# Releases that ship flatc, but do not find it.
SHIPPED_FLATC = ("1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1")
# Each run's raw results, committed: RUN.txt and RUN.xml.
COMPAT_DIR = Path("test/compat")
PYTEST = ("pytest", "-n", "2", "-rs")


def install(session: nox.Session, *args: str) -> None:
    """pip install without byte-compiling (about half of an install's time); the tests write
    the bytecode of what they import, so PYTHONDONTWRITEBYTECODE, set on some machines, is
    dropped (None: nox leaves it out of every command's environment)."""
    session.install("--no-compile", *args)
    session.env["PYTHONDONTWRITEBYTECODE"] = None


@nox.session
def lint(session: nox.Session) -> None:
    """ruff format and ruff check on the project's Python, mypy --strict on the package."""
    session.install("ruff==0.17.6", "mypy==1.14.1")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    session.run("mypy", "--strict", "--ignore-missing-imports", "exir")


@nox.session
def tests(session: nox.Session) -> None:
    """Every test on BASE_RELEASE, then RELEASE_TESTS with OTHER_RELEASE in its place, in one
    environment: torch, the same pin for both, is installed once. CUDA tests skip without a GPU."""
    install(session, TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[test]")
    session.run(*PYTEST, *session.posargs)
    install(session, TORCH, f"executorch=={OTHER_RELEASE}")
    session.run(*PYTEST, *RELEASE_TESTS, *session.posargs)


@nox.session
@nox.parametrize(("executorch", "torch", "torchao"), list(COMPAT))
def compat(session: nox.Session, executorch: str, torch: str, torchao: str) -> None:
    """The release's tests and self-check into COMPAT_DIR; compat_table renders them all."""
    session.notify("compat_table")
    name = f"{executorch}-torch{torch}"
    # A run that stops early leaves no row, rather than an old one.
    for suffix in ("txt", "xml"):
        (COMPAT_DIR / f"{name}.{suffix}").unlink(missing_ok=True)
    install(
        session,
        f"torch=={torch}",
        f"torchao=={torchao}",
        f"executorch=={executorch}",
        "-e",
        ".[test]",
    )
    lines = ""
    if executorch in SHIPPED_FLATC:
        code = "import importlib.util as u; print(u.find_spec('executorch').submodule_search_locations[0])"
        folder = session.run("python", "-c", code, silent=True).strip()
        session.env["FLATC_EXECUTABLE"] = f"{folder}/data/bin/flatc"
        lines = "FLATC_EXECUTABLE: the wheel's executorch/data/bin/flatc\n"
    # A failing self-check still lets the tests give the release its row; the session fails last.
    status = session.run(
        "python", "-m", "executorch_device_guard", silent=True, success_codes=[0, 1]
    )
    COMPAT_DIR.mkdir(exist_ok=True)
    (COMPAT_DIR / f"{name}.txt").write_text(
        lines + status.replace(os.getcwd() + os.sep, "")
    )
    junit = COMPAT_DIR / f"{name}.xml"
    try:
        session.run(*PYTEST, f"--junitxml={junit}", *RELEASE_TESTS)
    finally:  # failing tests leave a row too, without this machine's paths
        if junit.exists():
            junit.write_text(junit.read_text().replace(os.getcwd() + os.sep, ""))
    if not re.search(r"^self-check \(", status, re.M) or re.search(
        r"^(  FAIL |Traceback)", status, re.M
    ):
        session.error(f"the self-check failed: {COMPAT_DIR}/{name}.txt")


@nox.session(venv_backend="none")
def compat_table(session: nox.Session) -> None:
    """test/compat/RESULTS.md from what the compat sessions left in COMPAT_DIR."""
    session.run(sys.executable, "-m", "upstream.compat", str(COMPAT_DIR), external=True)


@nox.session
def mutations(session: nox.Session) -> None:
    """Each site's check removed in turn (conftest.py's MUTANT): the package's tests in this
    process must fail; with none removed, they pass."""
    install(session, TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[test]")
    tests = (
        "test/test_device_sites.py",
        "test/test_emitter.py",
        "-p",
        "no:cacheprovider",
        "-q",
    )
    session.run("pytest", *tests)
    code = "from executorch_device_guard import _sites; print(*_sites.WRAPPERS)"
    names = session.run("python", "-c", code, silent=True, stderr=subprocess.DEVNULL)
    for name in names.split():
        session.log(f"MUTANT={name}")
        out = session.run(
            "pytest",
            "-x",
            *tests,
            env={"MUTANT": name},
            success_codes=[1, -11],
            silent=True,
        )
        assert isinstance(out, str)
        crashed = re.findall(r'File "[^"]*(test/\w+\.py)", line \d+ in (test_\w+)', out)
        failures = re.findall(r"^(?:SUB)?FAILED(?:\[.*?\]|\(.*?\))? (\S+)", out, re.M)
        failures += [f"{path}::{test} (died of SIGSEGV)" for path, test in crashed]
        session.log(f"fails {failures[0]}" if failures else "no test failed")


@nox.session
def suites(session: nox.Session) -> None:
    """Upstream's own suites from the wheel, guard on and off: identical outcomes."""
    install(session, TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[test]")
    session.run("python", "-m", "upstream.suites", "-n", "2", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """bench/bench.py on the series' base release; installed as pip does, since it times imports."""
    session.install(TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[bench]")
    session.run("python", "bench/bench.py", *session.posargs)


@nox.session
def series(session: nox.Session) -> None:
    """python -m upstream.check on the series' base release (mypy at upstream's pin)."""
    install(
        session, TORCH, f"executorch=={BASE_RELEASE}", "-e", ".[test]", "mypy==1.14.1"
    )
    session.run("python", "-m", "upstream.check", *session.posargs)
