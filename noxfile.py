# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The repository's sessions, each in a fresh virtualenv (pip's, which reads pip's config);
torch is pinned: on Linux an unpinned torch is the CUDA build of several GB."""

import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import nox

sys.path.insert(0, os.path.dirname(__file__))
from upstream import BASE_RELEASE  # noqa: E402
from upstream.suites import Run, parse_junit, table  # noqa: E402

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["lint", "tests"]

TORCH, BASE = "torch==2.13.0", f"executorch=={BASE_RELEASE}"
# The tests whose outcome depends on the ExecuTorch release; test_activation's installs run
# on BASE_RELEASE only.
RELEASE_TESTS = tuple(
    f"test/test_{name}.py" for name in ("emitter", "sites", "device_sites", "cuda")
)
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
# A row per run, kept until its session runs again.
RESULTS = Path("test/compat/RESULTS.md")
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
    """Every test on BASE_RELEASE, then the series' check there (upstream/check.py); the
    other releases are `compat`'s. CUDA tests skip without a GPU."""
    install(session, TORCH, BASE, "-e", ".[test]")
    session.run(*PYTEST, *session.posargs)
    session.run("python", "-m", "upstream.check")


@nox.session
@nox.parametrize(("executorch", "torch", "torchao"), COMPAT)
def compat(session: nox.Session, executorch: str, torch: str, torchao: str) -> None:
    """The release's self-check and tests: its row in RESULTS, in place of its last one."""
    pins = (f"torch=={torch}", f"torchao=={torchao}", f"executorch=={executorch}")
    install(session, *pins, "-e", ".[test]")
    flatc = "found"
    if executorch in SHIPPED_FLATC:
        code = "from upstream.suites import executorch_root; print(executorch_root())"
        folder = session.run("python", "-c", code, silent=True).strip()
        session.env["FLATC_EXECUTABLE"] = f"{folder}/data/bin/flatc"
        flatc = "shipped binary, via `FLATC_EXECUTABLE`"
    # A failing self-check still lets the tests give the release its row; it fails last.
    command = ("python", "-m", "executorch_device_guard")
    status = session.run(*command, silent=True, success_codes=[0, 1])
    junit = Path(session.create_tmp(), "junit.xml")
    junit.unlink(missing_ok=True)
    try:
        session.run(*PYTEST, f"--junitxml={junit}", *RELEASE_TESTS)
    finally:  # failing tests give a row too
        write_row(executorch, torch, flatc, status, junit)
    failed = re.search(r"^(  FAIL |Traceback)", status, re.M)
    if failed or not re.search(r"^self-check \(", status, re.M):
        session.error(f"the self-check failed:\n{status}")


HEADERS = "executorch|torch|flatc|sites guarded|self-check|tests P/F/E/S|run".split("|")
INTRO = """# ExecuTorch 1.x on the CPU

`nox -s compat` (noxfile.py): a row per release and torch, each from its own run on the
project's 2-core x86_64 CPU machine, Python 3.11; no GPU, so CUDA tests skip.

"""


def write_row(release: str, torch: str, flatc: str, status: str, junit: Path) -> None:
    """RESULTS with this run's row in place of the last run's, and its tests that did not pass,
    with pytest's reason, each line of those naming the runs where it holds."""
    site = r"^  (guarded|SKIPPED)  executorch\.\S+?(\w+)(?::\s+(.*))?$"
    sites = re.findall(site, status, re.M)
    skipped = [f"`{name}`: {why}" for state, name, why in sites if state == "SKIPPED"]
    missing = re.findall(r"^not importable: executorch\.(\S+) \((.*)\)$", status, re.M)
    skipped += [f"`{module}` not importable: {why}" for module, why in missing]
    count = f"{sum(s == 'guarded' for s, _, _ in sites)} of {len(sites)}"
    cases = re.findall(r"^  (ok|FAIL) +\S", status, re.M)
    checked = f"{cases.count('ok')} of {len(cases)} ok" if cases else "did not run"
    outcomes, messages = parse_junit(junit)
    counts, day = Run(outcomes, messages).counts, f"{date.today():%Y-%m-%d}"
    guarded = "; ".join([count, *skipped])
    cells = [release, torch, flatc, guarded, checked, counts, day]
    lines = RESULTS.read_text().splitlines() if RESULTS.exists() else []
    rows = [
        [c.strip() for c in x.strip("|").split("|")] for x in lines if x[:2] == "| "
    ]
    rows = [r for r in rows[2:] if r[:2] != cells[:2]] + [cells]
    this, notes = f"{release} ({torch})", {}
    for runs, note in (x[2:].split(": `", 1) for x in lines if x[:2] == "- "):
        notes[note] = [run for run in runs.split(", ") if run != this]
    for test, outcome in outcomes.items():
        if outcome != "passed":
            notes.setdefault(f"{test}`: {outcome}: {messages[test]}", []).append(this)
    rows.sort(key=lambda r: (numbers(r[0]), numbers(r[1])))
    text = INTRO + table(HEADERS, rows) + "\n\nNot passed, with pytest's reason:\n\n"
    text += "\n".join(
        f"- {', '.join(sorted(runs, key=numbers))}: `{note}"
        for note, runs in sorted(notes.items())
        if runs
    )
    RESULTS.write_text(text + "\n")


def numbers(text: str) -> list[int]:
    return [int(number) for number in re.findall(r"\d+", text)]


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
        mutant = ("-p", "mutant", "-x", "--tb=no", "-rf", *tests)
        # -p imports the plugin before pytest's pythonpath takes effect
        env = {"MUTANT": name, "PYTHONPATH": "test"}
        session.run(*pytest, *mutant, env=env, success_codes=[1, -11])


@nox.session
def bench(session: nox.Session) -> None:
    """bench/bench.py on the series' base release; installed as pip does (it times imports)."""
    session.install(TORCH, BASE, "-e", ".")
    session.run("python", "bench/bench.py")
