# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""pytest on patched copies of ExecuTorch (upstream's own tests: the executorch wheel ships
them), each run a fresh `python -m`, its tests in xdist workers, which are fresh interpreters
(CUDA cannot start again in a fork) and restart after a crash, so that a crash fails one test.
Each run's outcomes come from its JUnit file (test/support/junit.py)."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from executorch_device_guard import ENV_VAR
from test.support import children
from test.support.junit import Case, counts, read

REPO = Path(__file__).resolve().parents[1]  # test.support lies there
# Child programs of test/support/children.py, run as `python -m test.support.children NAME`.
PROBE = [children.__name__, "probe"]
MESSAGES = [children.__name__, "messages"]
META = [children.__name__, "meta_model"]
TIMEOUT = 1800  # seconds for one test


class Run(NamedTuple):
    """A finished run: each test's outcome (where it wrote a JUnit file), exit status, output."""

    cases: dict[str, Case]
    returncode: int = 0
    seconds: float = 0.0
    log: str = ""

    @property
    def completed(self) -> bool:
        """pytest exits 0 or 1 after a complete run."""
        return self.returncode in (0, 1) and bool(self.cases)

    @property
    def counts(self) -> str:
        return counts(case.outcome for case in self.cases.values())

    def assert_passed(self, gpu: bool) -> None:
        """Every test passed; only CUDA tests skip, and only without a GPU."""
        print(f"\nP/F/E/S {self.counts} in {self.seconds:.1f} s")
        bad = []
        for test, case in sorted(self.cases.items()):
            print(f"  {case.outcome:7} {test} {case.summary}")
            if case.outcome in ("failed", "error"):
                bad.append(test)
            if case.outcome == "skipped" and (gpu or "cuda" not in test.lower()):
                bad.append(test)
        assert self.completed and not bad, f"not passing: {bad}\n{self.log[-5000:]}"

    def printed(self) -> Any:
        """What the run printed last, as JSON."""
        assert self.returncode == 0, self.log[-3000:]
        return json.loads(self.log.splitlines()[-1])


class Job(NamedTuple):
    """`python -m ARGV` in SITE/executorch (the repository's layout), with `site` first on
    sys.path and the repository (test.support) last, the guard on if `guard`."""

    site: Path
    argv: list[str]
    name: str  # its log is workdir/NAME.log, and its JUnit workdir/NAME.xml if it writes one
    guard: bool = False


def capture(*command: Any, **kwargs: Any) -> "subprocess.CompletedProcess[str]":
    """A command's exit status and output, as text."""
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def environment(guard: bool, site: Path) -> dict[str, str]:
    """For a fresh interpreter: the guard on or off, `site` first on sys.path."""
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, ENV_VAR: f"{guard:d}", "PYTHONPATH": path}


def pytest_job(
    tree: Path,
    tests: Sequence[str],
    out: Path,
    guard: bool = False,
    workers: int = 1,
    deselect: Sequence[str] = (),
) -> Job:
    """pytest on `tests`, relative to `tree`, an executorch folder, its JUnit OUT.xml: no ini
    file, importlib's import mode (upstream's test files share basenames)."""
    args = ["pytest", "-c", os.devnull, "--rootdir", str(tree), "-q", "-rA"]
    args += ["-n", str(workers), f"--max-worker-restart={len(tests)}"]  # a crash each
    args += [f"--timeout={TIMEOUT}", "-o", "timeout_func_only=true"]
    args += ["--import-mode=importlib", "-p", "no:cacheprovider", "-p", "no:warnings"]
    args.append(f"--junitxml={out}.xml")
    for test in tests:
        args.append(str(tree / test))
    for test in deselect:
        args += ["--deselect", test]  # a node ID, relative to the rootdir, `tree`
    return Job(tree.parent, args, out.name, guard)


def run_job(job: Job, workdir: Path) -> Run:
    """The job run to its end: its output kept in workdir/NAME.log, its tests' outcomes read
    from workdir/NAME.xml where it wrote one."""
    env = environment(job.guard, job.site)
    env["PYTHONPATH"] += os.pathsep + str(REPO)
    log, started = workdir / f"{job.name}.log", time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", *job.argv],
            cwd=job.site / "executorch",
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    cases = read(log.with_suffix(".xml"))
    text = log.read_text(errors="replace")
    return Run(cases, done.returncode, time.monotonic() - started, text)


def run_jobs(jobs: dict[Any, Job], workers: int, workdir: Path) -> dict[Any, Run]:
    """The jobs, `workers` at a time, by the same keys."""
    workdir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(workers, 1)) as pool:
        done = pool.map(lambda job: run_job(job, workdir), jobs.values())
        return dict(zip(jobs, done, strict=True))
