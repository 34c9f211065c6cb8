# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""pytest on upstream ExecuTorch's own tests (the executorch wheel ships them) and on patched
copies, each run a fresh `python -m`, its tests in xdist workers, which are fresh interpreters
(CUDA cannot start again in a fork) and restart after a crash, so that a crash fails one test;
compared for --suites."""

import importlib.util
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

# Chosen to reach every guarded site in minutes on 2 cores. Left out: Vulkan's delegate
# tests (they need its runtime, not in the CPU wheel) and most of XNNPACK's slow op tests.
XNN = "backends/xnnpack/test/ops/"
DEFAULT_SUITES = (
    "exir/emit/test/test_emit.py",
    "devtools/bundled_program/test",
    "exir/_serialize/test",
    "backends/xnnpack/test/serialization",
    f"{XNN}test_linear.py::TestLinear::test_fp32_addmm,"
    f"{XNN}test_linear.py::TestLinear::test_qd8_f32_per_channel_linear,"
    f"{XNN}test_linear.py::TestLinear::test_linear_with_force_non_static_weights_for_f32_linear,"
    f"{XNN}test_conv2d.py::TestConv2d::test_fp32_conv2d,"
    f"{XNN}test_conv2d.py::TestConv2d::test_qs8_conv2d_per_channel,"
    f"{XNN}test_conv2d.py::TestConv2d::test_dq_conv2d",
    "backends/vulkan/test/test_serialization.py,backends/vulkan/test/test_vulkan_compile_options.py",
    "exir/program/test/test_program.py",
    "exir/tests/test_passes.py",
    "exir/tests/test_verification.py,exir/verification/test/test_verifier.py",
)
OUTCOMES = ("passed", "failed", "error", "skipped")  # the order of counts
WORSE = ("passed", "skipped", "failed", "error")
TIMEOUT = 1800  # seconds for one test


class Run(NamedTuple):
    """A pytest run: per-test outcomes and first message lines, exit status, output."""

    outcomes: dict[str, str]
    messages: dict[str, str]
    returncode: int = 0
    seconds: float = 0.0
    log: str = ""

    @property
    def completed(self) -> bool:  # pytest exits 0 or 1 after a complete run
        return self.returncode in (0, 1) and bool(self.outcomes)

    @property
    def counts(self) -> str:  # passed/failed/error/skipped
        return "/".join(str(list(self.outcomes.values()).count(o)) for o in OUTCOMES)


class Job(NamedTuple):
    """`python -m ARGV` in SITE/executorch (the repository's layout), with `site` first on
    sys.path and test/ (children.py) last, the guard on if `guard`."""

    site: Path
    argv: list[str]
    name: str  # its log is workdir/NAME.log, and its junit workdir/NAME.xml if it writes one
    guard: bool = False


def executorch_root() -> Path:
    """The installed executorch package folder, found without importing executorch."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not installed in this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def environment(guard: bool, site: Path) -> dict[str, str]:
    """For a fresh interpreter: the guard on or off, `site` first on sys.path."""
    # Imported here: noxfile.py imports this module where the package is not installed.
    from executorch_device_guard import ENV_VAR

    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, ENV_VAR: f"{guard:d}", "PYTHONPATH": path}


def parse_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Per-test outcome and first message line, keyed 'dotted.module.Class::test'; of a
    test listed twice (a failed call and a teardown error), the worst."""
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase") if path.exists() else ():
        test = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in (c for c in case if c.tag in ("failure", "error", "skipped")):
            outcome = "failed" if child.tag == "failure" else child.tag
            message = (child.get("message") or "").strip().partition("\n")[0]
            # A collection error's message is generic: the error is the last "E " line.
            raised = [x[2:] for x in (child.text or "").split("\n") if x[:2] == "E "]
            if child.tag == "error" and raised:
                message += f": {raised[-1].strip()}"
        if WORSE.index(outcome) >= WORSE.index(outcomes.get(test, "passed")):
            outcomes[test], messages[test] = outcome, message[:200]
    return outcomes, messages


def pytest_run(
    tree: Path, tests: Sequence[str], out: Path, guard: bool = False, workers: int = 1
) -> Job:
    """A pytest run of `tests`, relative to `tree`, an executorch folder, its junit OUT.xml:
    no ini file, importlib's import mode (upstream's test files share basenames)."""
    args = ["pytest", "-c", os.devnull, "--rootdir", str(tree), "-q", "-rA"]
    restarts = f"--max-worker-restart={len(tests)}"  # a crash per target
    args += ["-n", str(workers), restarts]
    args += [f"--timeout={TIMEOUT}", "-o", "timeout_func_only=true"]
    args += ["--import-mode=importlib", "-p", "no:cacheprovider", "-p", "no:warnings"]
    args += [f"--junitxml={out}.xml"]
    args += [str(tree / test) for test in tests]
    return Job(tree.parent, args, out.name, guard)


def run_jobs(runs: Sequence[Job], workers: int, workdir: Path) -> list[Run]:
    """The runs, `workers` at a time; a run gives outcomes where it asks pytest for a junit."""
    workdir.mkdir(parents=True, exist_ok=True)
    tests = str(Path(__file__).resolve().parents[1] / "test")

    def one(job: Job) -> Run:
        env = environment(job.guard, job.site)
        env["PYTHONPATH"] += os.pathsep + tests
        log, started = workdir / f"{job.name}.log", time.monotonic()
        with log.open("w") as out:
            done = subprocess.run(
                [sys.executable, "-m", *job.argv],
                cwd=job.site / "executorch",
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        found = parse_junit(log.with_suffix(".xml"))
        text = log.read_text(errors="replace")
        return Run(*found, done.returncode, time.monotonic() - started, text)

    with ThreadPoolExecutor(max(workers, 1)) as pool:
        return list(pool.map(one, runs))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Markdown, columns aligned."""
    cells = [[str(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(map(len, column)) for column in zip(*cells)]
    cells.insert(1, ["-" * width for width in widths])
    return "\n".join("| " + " | ".join(map(str.ljust, r, widths)) + " |" for r in cells)


class Comparison(NamedTuple):
    rows: list[tuple[str, ...]]  # suite, outcomes in each setup, identical?, seconds
    differences: list[str]
    broken: list[str]  # runs that did not complete, with their output's end
    report: str  # the table, then what differs or broke


def compare(
    setups: dict[str, tuple[Path, bool]],
    suites: Sequence[str],
    workers: int,
    workdir: Path,
    skip: tuple[str, ...] = (),
) -> Comparison:
    """Each suite (comma-separated targets) in both setups (name -> executorch folder and
    guard), one run at a time with `workers` xdist workers; tests whose junit names start
    with `skip` are not compared."""
    runs = []
    for i, suite in enumerate(suites):
        for name, (tree, guard) in setups.items():
            out = workdir / f"suite{i}-{name}"
            runs.append(pytest_run(tree, suite.split(","), out, guard, workers))
    done = run_jobs(runs, 1, workdir)
    found, (a, b) = Comparison([], [], [], ""), setups
    for suite, pair in zip(suites, zip(done[::2], done[1::2])):
        for name, run in zip(setups, pair):
            if not run.completed:
                found.broken.append(f"{suite} [{name}]:\n{run.log[-3000:]}")
        x, y = (
            {t: o for t, o in r.outcomes.items() if not t.startswith(skip)}
            for r in pair
        )
        for test in sorted(set(x) | set(y)):
            why = pair[0].messages.get(test) or pair[1].messages.get(test, "")
            line = f"{test}: {a} {x.get(test)}, {b} {y.get(test)} [{why}]"
            if x.get(test) != y.get(test):
                found.differences.append(line)
        targets = [target.split("::")[0] for target in suite.split(",")]
        if len(targets) > 1:
            suite = f"{os.path.commonpath(targets)}/ ({len(targets)} targets)"
        counts = [Run(outcomes, {}).counts for outcomes in (x, y)]
        seconds = " / ".join(f"{r.seconds:.0f}" for r in pair)
        found.rows.append((suite, *counts, "yes" if x == y else "NO", seconds))
    lines = [table(("suite", *setups, "identical", "s"), found.rows)]
    for title, items in (
        ("OUTCOMES DIFFER", found.differences),
        ("pytest did not complete", found.broken),
    ):
        lines += [f"\n{title}:\n", *(f"- {line}" for line in items)] if items else []
    return found._replace(report="\n".join(lines))
