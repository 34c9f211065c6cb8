# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Runs pytest on upstream ExecuTorch's own tests, and compares per-test outcomes.

    python -m upstream.suites -n 2             # the default suites, guard on vs off
    python -m upstream.suites a/test_x.py::TestX::test_y,a/test_z.py   # one suite, 2 targets

The tests ship in the executorch wheel. Each suite runs with EXECUTORCH_DEVICE_GUARD=1 and
=0, and the guard must change no outcome (exit status 1 if one differs). check.py compares
patched and unpatched copies the same way, and runs short runs in children forked from one
interpreter (run_forked).
"""

import argparse
import importlib.util
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Sequence
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
OUTCOMES = ("passed", "failed", "error", "skipped")
SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
TIMEOUT = 1800.0  # seconds for one run


class Run(NamedTuple):
    """A pytest run: per-test outcomes and first message lines, exit status, output."""

    outcomes: dict[str, str]
    messages: dict[str, str]
    returncode: int
    log: str
    seconds: float

    @property
    def completed(self) -> bool:  # pytest exits 0 or 1 after a complete run
        return self.returncode in (0, 1) and bool(self.outcomes)

    @property
    def counts(self) -> str:  # passed/failed/error/skipped
        return "/".join(str(list(self.outcomes.values()).count(o)) for o in OUTCOMES)


def executorch_root() -> Path:
    """The installed executorch package folder, found without importing executorch."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not installed in this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def environment(guard: bool, site: Path | None = None) -> dict[str, str]:
    """The guard on or off, and `site`, a folder with a copy of executorch, first on
    sys.path. Without one, tests run in the installed wheel, and write no bytecode there."""
    env = {**os.environ, "EXECUTORCH_DEVICE_GUARD": str(int(guard))}
    if site is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(site), env.get("PYTHONPATH")])
        )
    return env


def parse_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Per-test outcome and first message line, keyed 'dotted.module.Class::test'; of a
    test listed twice (a failed call and a teardown error), the worst."""
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase") if path.exists() else ():
        test, outcome, message = (
            f"{case.get('classname')}::{case.get('name')}",
            "passed",
            "",
        )
        for child in (c for c in case if c.tag in ("failure", "error", "skipped")):
            outcome = {"failure": "failed"}.get(child.tag, child.tag)
            message = (child.get("message") or "").strip().partition("\n")[0]
            # A collection error's message is generic: the error is the last "E " line.
            raised = [
                x[1:].strip() for x in (child.text or "").splitlines() if x[:2] == "E "
            ]
            message += f": {raised[-1]}" if child.tag == "error" and raised else ""
        if SEVERITY[outcome] >= SEVERITY[outcomes.get(test, "passed")]:
            outcomes[test], messages[test] = outcome, message[:200]
    return outcomes, messages


def pytest_args(
    root: Path, targets: Sequence[str], xml: Path, workers: int = 0
) -> list[str]:
    """For `targets` relative to `root`, an executorch folder: no ini file, ids relative to
    `root`, importlib's import mode (upstream's test files share basenames), a junit."""
    args = [
        "-c",
        os.devnull,
        "--rootdir",
        str(root),
        "--import-mode=importlib",
        "-q",
        "-rA",
    ]
    args += ["-p", "no:cacheprovider", "-p", "no:warnings", f"--junitxml={xml}"]
    return (
        args + ["-n", str(workers)] * bool(workers) + [str(root / t) for t in targets]
    )


def result(workdir: Path, name: str, returncode: int, seconds: float) -> Run:
    log = workdir / f"{name}.log"
    text = log.read_text(errors="replace") if log.exists() else "not started"
    return Run(*parse_junit(workdir / f"{name}.xml"), returncode, text, seconds)


def run_pytest(
    root: Path,
    targets: Sequence[str],
    env: dict[str, str],
    workers: int,
    workdir: Path,
    name: str,
) -> Run:
    """The targets in a fresh pytest process; its junit and log in workdir/NAME.*."""
    start = time.monotonic()
    args = pytest_args(root, targets, workdir / f"{name}.xml", workers)
    with open(workdir / f"{name}.log", "w") as out:
        try:
            command = [sys.executable, "-m", "pytest", *args]
            done = subprocess.run(
                command, env=env, cwd=workdir, stdout=out, stderr=out, timeout=TIMEOUT
            )
            returncode = done.returncode
        except subprocess.TimeoutExpired:
            returncode = -1
    return result(workdir, name, returncode, time.monotonic() - start)


class Forked(NamedTuple):
    """`python -m ARGV` in a forked child, in SITE/executorch (the repository's layout),
    with `site` first on sys.path and the guard installed if `guard`."""

    site: Path
    argv: list[str]
    name: str  # its log is workdir/NAME.log, and its junit workdir/NAME.xml if it writes one
    guard: bool = False


def serve(workers: int, preload: Sequence[str]) -> None:
    """run_forked's server: imports pytest's plugins and torch (and `preload`, from the
    runs' one site), then forks a child for each run that it reads as JSON from stdin,
    `workers` at a time, and prints their exit statuses. torch.cuda.is_available() asks
    NVML here, so that CUDA starts in the children only."""
    from importlib.metadata import entry_points

    import pytest  # noqa: F401
    import torch

    runs = json.load(sys.stdin)
    try:
        for plugin in entry_points(group="pytest11"):
            plugin.load()
        sys.path[:0] = [runs[0][0]] if preload else []
        for module in preload:
            __import__(module)
        assert not torch.cuda.is_initialized(), f"CUDA started, importing {preload}"
    except BaseException:  # no child runs: each run's log says why
        for _, _, log, _ in runs:
            Path(log).write_text(traceback.format_exc())
        raise
    children: dict[int, tuple[int, float]] = {}

    def reap() -> None:
        pid, status = os.wait()
        index, started = children.pop(pid)
        done = [index, os.waitstatus_to_exitcode(status), time.monotonic() - started]
        print(json.dumps(done), flush=True)

    for index, forked in enumerate(runs):
        if len(children) == workers:
            reap()
        pid = os.fork()
        if pid == 0:
            _child(*forked)
        children[pid] = index, time.monotonic()
    while children:
        reap()


def _child(site: str, argv: list[str], log: str, guard: bool) -> None:
    """One run, as `python -m` runs it in the repository's root; it leaves by os._exit. A
    run whose ExecuTorch modules came from outside `site` exits with 3, as pytest does on an
    internal error: not a completed run."""
    status = 3
    try:
        del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [site, os.environ.get("PYTHONPATH")])
        )
        os.chdir(os.path.join(site, "executorch"))
        sys.path[:0] = [os.getcwd(), *[site] * (site not in sys.path)]
        out = open(log, "w")
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        if guard:
            import executorch_device_guard

            executorch_device_guard.install()
        sys.argv = list(argv)
        try:
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as done:
            status = (
                done.code if isinstance(done.code, int) else int(done.code is not None)
            )
        except BaseException:  # as the interpreter reports an uncaught error
            traceback.print_exc()
            status = 1
        modules = [
            m for n, m in list(sys.modules.items()) if n.split(".")[0] == "executorch"
        ]
        files = [getattr(m, "__file__", None) for m in modules]
        outside = [f for f in files if f and not f.startswith(site + os.sep)]
        if outside:
            print(f"executorch imported from outside {site}: {outside[:3]}")
            status = 3
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def run_forked(
    runs: Sequence[Forked],
    workers: int,
    timeout: float,
    workdir: Path,
    preload: Sequence[str] = (),
) -> list[Run]:
    """Each run in a child forked from one interpreter that has imported torch (serve):
    4 to 5 s of CPU less than a fresh one each. `timeout` is for all of them; at its end
    every child is killed. A run gives outcomes where it asks pytest for a junit."""
    order = [
        (str(r.site), r.argv, str(workdir / f"{r.name}.log"), r.guard) for r in runs
    ]
    env = {
        **os.environ,
        "EXECUTORCH_DEVICE_GUARD": "0",
        "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
    }
    command = [sys.executable, "-m", "upstream.suites", "--serve", str(max(workers, 1))]
    command += [f"--preload={module}" for module in preload]
    repo = Path(__file__).resolve().parents[1]
    pipes: dict[str, Any] = {
        "stdin": subprocess.PIPE,
        "stdout": subprocess.PIPE,
        "text": True,
    }
    with subprocess.Popen(
        command, cwd=repo, env=env, start_new_session=True, **pipes
    ) as server:
        try:
            stdout, _ = server.communicate(json.dumps(order), timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            stdout, _ = server.communicate()
    done = {
        i: (code, seconds) for i, code, seconds in map(json.loads, stdout.splitlines())
    }
    return [
        result(workdir, r.name, *done.get(i, (-1, timeout))) for i, r in enumerate(runs)
    ]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Markdown, columns aligned."""
    cells = [tuple(map(str, row)) for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in cells
    ]
    rule = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([lines[0], rule, *lines[1:]])


class Comparison(NamedTuple):
    rows: list[tuple[str, ...]]  # suite, outcomes in each setup, identical?, seconds
    differences: list[str]
    not_passed: list[str]  # the same outcome in both setups, not passed
    broken: list[str]  # runs that did not complete, with their output's end


def compare(
    setups: dict[str, tuple[Path, dict[str, str]]],
    suites: Sequence[str],
    workers: int,
    workdir: Path,
    skip: tuple[str, ...] = (),
) -> Comparison:
    """Each suite (comma-separated targets) in both setups (name -> executorch folder and
    env); tests whose junit names start with `skip` are not compared."""
    found = Comparison([], [], [], [])
    (a, b) = setups
    for index, suite in enumerate(suites):
        runs = [
            run_pytest(
                root, suite.split(","), env, workers, workdir, f"suite{index}-{name}"
            )
            for name, (root, env) in setups.items()
        ]
        found.broken.extend(
            f"{suite} [{n}]:\n{r.log[-3000:]}"
            for n, r in zip(setups, runs)
            if not r.completed
        )
        x, y = (
            {t: o for t, o in r.outcomes.items() if not t.startswith(skip)}
            for r in runs
        )
        for test in sorted(set(x) | set(y)):
            why = runs[0].messages.get(test) or runs[1].messages.get(test, "")
            if x.get(test) != y.get(test):
                found.differences.append(
                    f"{test}: {a} {x.get(test)}, {b} {y.get(test)} [{why}]"
                )
            elif x[test] != "passed":
                found.not_passed.append(f"{test}: {x[test]} [{why}]")
        targets = [target.split("::")[0] for target in suite.split(",")]
        name = (
            suite
            if len(targets) == 1
            else f"{os.path.commonpath(targets)}/ ({len(targets)} targets)"
        )
        counts = [Run(outcomes, {}, 0, "", 0).counts for outcomes in (x, y)]
        seconds = f"{runs[0].seconds:.0f} / {runs[1].seconds:.0f}"
        found.rows.append((name, *counts, "yes" if x == y else "NO", seconds))
    return found


def report(found: Comparison, headers: Sequence[str]) -> str:
    """The table, then what did not pass, differs or broke."""
    lines = [table(headers, found.rows)]
    for title, items in (
        ("Not passed in either setup (the same outcome both ways)", found.not_passed),
        ("OUTCOMES DIFFER", found.differences),
        ("pytest did not complete", found.broken),
    ):
        lines += [f"\n{title}:\n", *(f"- {line}" for line in items)] if items else []
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", default=list(DEFAULT_SUITES))
    parser.add_argument(
        "-n", "--workers", type=int, default=0, help="xdist workers a run"
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--preload", action="append", default=[], help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.preload)
        return 0
    root, started = executorch_root(), time.monotonic()
    code = "from executorch.exir.emit._emitter import _Emitter as E; print(hasattr(E._tensor_spec_to_evalue, '__wrapped__'))"
    run = [sys.executable, "-c", code]
    wrapped = [
        subprocess.run(
            run, env=environment(on), capture_output=True, text=True
        ).stdout.strip()
        for on in (True, False)
    ]
    print(
        f"executorch package: {root}; the emitter wrapped with the guard on, off: {wrapped}"
    )
    if wrapped != ["True", "False"]:
        return 2
    with tempfile.TemporaryDirectory(prefix="upstream-") as tmp:
        setups = {
            "guarded": (root, environment(True)),
            "unguarded": (root, environment(False)),
        }
        found = compare(setups, args.suites, args.workers, Path(tmp))
    print(
        report(
            found,
            (
                "suite",
                "guarded P/F/E/S",
                "unguarded P/F/E/S",
                "identical",
                "s, on / off",
            ),
        )
    )
    print(f"\ntotal time: {time.monotonic() - started:.0f} s")
    return 1 if found.differences or found.broken else 0


if __name__ == "__main__":
    sys.exit(main())
