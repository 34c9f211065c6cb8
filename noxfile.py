# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The repository's sessions, each in a fresh virtualenv; arguments after -- go to the script.
torch is pinned: from the public index on Linux, an unpinned torch is the CUDA build of
several GB. pip, not uv: uv ignores pip's configuration."""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nox

sys.path.insert(0, os.path.dirname(__file__))
from upstream import BASE_RELEASE  # noqa: E402
from upstream.suites import Run, parse_junit, table  # noqa: E402

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["lint", "tests"]

TORCH, BASE = "torch==2.13.0", f"executorch=={BASE_RELEASE}"
OTHER_RELEASE = "1.4.1"  # the newest before BASE_RELEASE's minor
# The tests whose outcome depends on the ExecuTorch release; the others (installs, the
# benchmark, the Buck check) test this repository's tools, on BASE_RELEASE only.
RELEASE_TESTS = tuple(
    f"test/test_{name}.py"
    for name in ("emitter", "sites", "device_sites", "cuda", "series")
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
SHIPPED_FLATC = ("1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1")  # ship it, do not find it
COMPAT_DIR = Path("test/compat")  # each run's raw results, committed: RUN.txt, RUN.xml
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
    """Every test on BASE_RELEASE, then RELEASE_TESTS on OTHER_RELEASE, in one environment:
    torch, the same pin for both, is installed once. CUDA tests skip without a GPU."""
    install(session, TORCH, BASE, "-e", ".[test]")
    session.run(*PYTEST, *session.posargs)
    install(session, TORCH, f"executorch=={OTHER_RELEASE}")
    session.run(*PYTEST, *RELEASE_TESTS, *session.posargs)


@nox.session
@nox.parametrize(("executorch", "torch", "torchao"), list(COMPAT))
def compat(session: nox.Session, executorch: str, torch: str, torchao: str) -> None:
    """The release's tests and self-check into COMPAT_DIR; compat_table renders them all."""
    session.notify("compat_table")
    name, here = f"{executorch}-torch{torch}", os.getcwd() + os.sep
    text, junit = COMPAT_DIR / f"{name}.txt", COMPAT_DIR / f"{name}.xml"
    for old in (text, junit):  # a run that stops early leaves no row, not an old one
        old.unlink(missing_ok=True)
    pins = (f"torch=={torch}", f"torchao=={torchao}", f"executorch=={executorch}")
    install(session, *pins, "-e", ".[test]")
    status = ""
    if executorch in SHIPPED_FLATC:
        code = "from upstream.suites import executorch_root; print(executorch_root())"
        folder = session.run("python", "-c", code, silent=True).strip()
        session.env["FLATC_EXECUTABLE"] = f"{folder}/data/bin/flatc"
        status = "FLATC_EXECUTABLE: the wheel's executorch/data/bin/flatc\n"
    # A failing self-check still lets the tests give the release its row; it fails last.
    command = ("python", "-m", "executorch_device_guard")
    status += session.run(*command, silent=True, success_codes=[0, 1])
    text.write_text(status.replace(here, ""))
    try:
        session.run(*PYTEST, f"--junitxml={junit}", *RELEASE_TESTS)
    finally:  # failing tests leave a row too, without this machine's paths
        if junit.exists():
            junit.write_text(junit.read_text().replace(here, ""))
    failed = re.search(r"^(  FAIL |Traceback)", status, re.M)
    if failed or not re.search(r"^self-check \(", status, re.M):
        session.error(f"the self-check failed: {text}")


HEADERS = "executorch|torch|flatc|sites guarded|self-check|tests P/F/E/S".split("|")
INTRO = """# ExecuTorch 1.x on the CPU

`nox -s compat` (noxfile.py), last run {}; no GPU, so CUDA tests skip. Raw results beside.

"""


def row(junit: Path) -> tuple[list[str], list[str]]:
    """A run's row, and its tests that did not pass, with pytest's reason."""
    release, torch = junit.stem.split("-torch")
    text = junit.with_suffix(".txt")
    status = text.read_text() if text.exists() else ""
    site = r"^  (guarded|SKIPPED)  executorch\.\S+?(\w+)(?::\s+(.*))?$"
    sites = re.findall(site, status, re.M)
    skipped = [f"`{name}`: {why}" for state, name, why in sites if state == "SKIPPED"]
    missing = re.findall(r"^not importable: executorch\.(\S+) \((.*)\)$", status, re.M)
    skipped += [f"`{module}` not importable: {why}" for module, why in missing]
    guarded = f"{sum(s == 'guarded' for s, _, _ in sites)} of {len(sites)}"
    cases = re.findall(r"^  (ok|FAIL) +\S", status, re.M)
    checked = f"{cases.count('ok')} of {len(cases)} ok" if cases else "did not run"
    flatc = "shipped binary, via `FLATC_EXECUTABLE`" * status.startswith("FLATC")
    outcomes, messages = parse_junit(junit)
    failed = [(t, o) for t, o in outcomes.items() if o != "passed"]
    failed = [f"{release} ({torch}): `{t}`: {o}: {messages[t]}" for t, o in failed]
    cells = [release, torch, flatc or "found", "; ".join([guarded, *skipped]), checked]
    return [*cells, Run(outcomes, messages).counts], failed


def numbers(name: str) -> list[int]:
    return [int(number) for number in re.findall(r"\d+", name)]


@nox.session(venv_backend="none")
def compat_table(session: nox.Session) -> None:
    """COMPAT_DIR/RESULTS.md from each run's RUN.txt, the self-check's output, and RUN.xml,
    pytest's junit: a run's row stays until its session runs again."""
    runs = sorted(COMPAT_DIR.glob("*.xml"), key=lambda p: numbers(p.stem))
    if not runs:
        session.error(f"no junit XML in {COMPAT_DIR}")
    rows, failed = zip(*map(row, runs))
    dates = [next(ET.parse(p).iter("testsuite")).get("timestamp", "") for p in runs]
    lines = [f"- {line}\n" for run in failed for line in run]
    text = INTRO.format(max(dates)[:10]) + table(HEADERS, rows)
    text += "\n\nNot passed, with pytest's reason:\n\n" + "".join(lines)
    (COMPAT_DIR / "RESULTS.md").write_text(text)


@nox.session
def mutations(session: nox.Session) -> None:
    """Each site's check removed in turn (test/mutant.py): the package's tests in this
    process fail (exit status 1) or crash (-11); with none removed, they pass."""
    install(session, TORCH, BASE, "-e", ".[test]")
    pytest = ("python", "-m", "pytest", "-p", "no:cacheprovider", "-q")
    tests = ("test/test_device_sites.py", "test/test_emitter.py")
    session.run(*pytest, *tests)
    code = "from executorch_device_guard import _sites; print(*_sites.WRAPPERS)"
    names = session.run("python", "-c", code, silent=True, stderr=subprocess.DEVNULL)
    for name in names.split():
        session.log(f"MUTANT={name}")
        mutant = ("-p", "test.mutant", "-x", "--tb=no", "-rf", *tests)
        session.run(*pytest, *mutant, env={"MUTANT": name}, success_codes=[1, -11])


@nox.session
def suites(session: nox.Session) -> None:
    """Upstream's own suites from the wheel, guard on and off: identical outcomes."""
    install(session, TORCH, BASE, "-e", ".[test]")
    check = ("python", "-m", "upstream.check", "--suites", "-k", "guarded")
    session.run(*check, *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """bench/bench.py on the series' base release; installed as pip does (it times imports)."""
    session.install(TORCH, BASE, "-e", ".[bench]")
    session.run("python", "bench/bench.py", *session.posargs)


@nox.session
def series(session: nox.Session) -> None:
    """python -m upstream.check on the series' base release."""
    install(session, TORCH, BASE, "-e", ".[test]")
    session.run("python", "-m", "upstream.check", *session.posargs)
