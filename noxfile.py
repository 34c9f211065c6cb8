# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The repository's sessions, each in a fresh virtualenv (pip's, which reads pip's config);
torch is pinned: on Linux an unpinned torch is the CUDA build of several GB."""

import re
import subprocess
from pathlib import Path

import nox
import tomllib

PYPROJECT = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())
BASE_RELEASE = PYPROJECT["tool"]["executorch-device-guard"]["base-release"]

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["lint", "tests", "series"]

TORCH, BASE = "torch==2.13.0", f"executorch=={BASE_RELEASE}"
# (executorch, torch, torchao): the newest torch and torchao that each release allows and pip
# finds; 1.5.1, which declares no torch requirement, with each newer torch too. torch 2.15.0
# is over the cap of these machines' pip configuration: `PIP_CONSTRAINT=EMPTY_FILE nox ...`.
COMPAT = [(release, "2.9.1", "0.14.0") for release in ("1.0.0", "1.0.1")]
COMPAT += [("1.1.0", "2.13.0", "0.15.0")]
COMPAT += [
    (r, "2.13.0", "0.18.0") for r in ("1.2.0", "1.3.1", "1.4.0", "1.4.1", "1.5.0")
]
COMPAT += [("1.5.1", torch, "0.18.0") for torch in ("2.13.0", "2.14.1", "2.15.0")]
SHIPPED_FLATC = ("1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1")  # ship it, do not find it
PYTEST = ("pytest", "-n", "2", "-rs")


def install(session: nox.Session, *args: str) -> None:
    """pip install without byte-compiling (half of an install's time): the tests write the
    bytecode of what they import, so PYTHONDONTWRITEBYTECODE, set on some machines, is unset."""
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
    """The package's tests (test/) on BASE_RELEASE; the other releases are `compat`'s. CUDA
    tests skip without a GPU."""
    install(session, TORCH, BASE, "-e", ".[test]")
    session.run(*PYTEST, *session.posargs)


@nox.session
def series(session: nox.Session) -> None:
    """The upstream series' fast checks (upstream/, CONTRIBUTING.md lists them) on
    BASE_RELEASE, whose sources the patches match; the slow ones need their options."""
    install(session, TORCH, BASE, "-e", ".[test]")
    session.run("pytest", "upstream", "-rA", *session.posargs)


@nox.session
@nox.parametrize(("executorch", "torch", "torchao"), COMPAT)
def compat(session: nox.Session, executorch: str, torch: str, torchao: str) -> None:
    """The release's self-check and tests: its row in records/compat/RESULTS.md, in place of
    its last one (test/support/compat_record.py)."""
    pins = (f"torch=={torch}", f"torchao=={torchao}", f"executorch=={executorch}")
    install(session, *pins, "-e", ".[test]")
    flatc = "found"
    if executorch in SHIPPED_FLATC:
        code = "from upstream.series import executorch_root; print(executorch_root())"
        folder = session.run("python", "-c", code, silent=True).strip()
        session.env["FLATC_EXECUTABLE"] = f"{folder}/data/bin/flatc"
        flatc = "shipped binary, via `FLATC_EXECUTABLE`"
    # A failing self-check still lets the tests give the release its row; it fails last.
    command = ("python", "-m", "executorch_device_guard")
    status = session.run(*command, silent=True, success_codes=[0, 1])
    tmp = Path(session.create_tmp())
    junit, output = tmp / "junit.xml", tmp / "self-check.txt"
    junit.unlink(missing_ok=True)
    output.write_text(status)
    try:
        session.run(*PYTEST, f"--junitxml={junit}", "-m", "release")
    finally:  # failing tests give a row too
        record = (
            "python",
            "-m",
            "test.support.compat_record",
            executorch,
            torch,
            flatc,
        )
        session.run(*record, str(output), str(junit))
    # The self-check's last line is "OK: ..." where it passed, else its FAIL: lines.
    if not re.search(r"^OK: ", status, re.M):
        session.error(f"the self-check failed:\n{status}")


@nox.session
def mutations(session: nox.Session) -> None:
    """Each site's check removed in turn (test/support/mutant.py): the package's tests in this
    process fail (exit status 1) or crash (-11, or -6 where the bindings abort); with none
    removed, they pass."""
    install(session, TORCH, BASE, "-e", ".[test]")
    pytest = ("python", "-m", "pytest", "-p", "no:cacheprovider", "-q")
    tests = ("-m", "wrappers")
    session.run(*pytest, *tests)
    code = "from executorch_device_guard._site_table import WRAPPERS; print(*WRAPPERS)"
    names = session.run("python", "-c", code, silent=True, stderr=subprocess.DEVNULL)
    for name in names.split():
        session.log(f"MUTANT={name}")
        mutant = ("-p", "test.support.mutant", "-x", "--tb=no", "-rf", *tests)
        env = {"MUTANT": name}
        session.run(*pytest, *mutant, env=env, success_codes=[1, -11, -6])


@nox.session
def bench(session: nox.Session) -> None:
    """bench/bench.py on the series' base release; installed as pip does (it times imports)."""
    session.install(TORCH, BASE, "-e", ".")
    session.run("python", "bench/bench.py")
