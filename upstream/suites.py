# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Runs upstream ExecuTorch tests with the guard on and off and compares per-test outcomes.

The tests ship inside the installed executorch wheel. Each suite runs twice in a pytest subprocess,
with EXECUTORCH_DEVICE_GUARD=1 and =0; the startup .pth line then guards (or not) every pytest
process, xdist workers included. The guard must not change any upstream outcome, so the script
exits non-zero when one differs.

    python -m upstream.suites -n 2                       # the default suites
    python -m upstream.suites -n 2 exir/emit/test/test_emit.py
    python -m upstream.suites a/test_x.py::TestX::test_y,a/test_z.py   # one suite, two targets

A suite is one or more pytest targets (files, folders or node ids), comma-separated, relative to
the executorch package folder. upstream/check.py runs suites the same way, on patched and unpatched
copies of ExecuTorch: it reuses environment(), run_pytest(), completed(), counts(), compare() and
table(); upstream/compat.py reads the compat sessions' junit with parse_junit(), counts() and table().
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

_XNN_OPS = "backends/xnnpack/test/ops/"

# Chosen to reach every guarded site (emitter constants, bundled tensors, named data, XNNPACK
# weights and per-channel scales, Vulkan graph builder, and the three places where lowering fails
# first: the verifiers, building the Edge program, ToOutVarPass) in minutes on 2 cores. Left out:
# backends/vulkan/test/test_vulkan_delegate.py, which needs the Vulkan runtime (not in the CPU wheel:
# every run fails with error 0x20, NotFound) and is slow; the full XNNPACK test_linear.py (over 15
# minutes) and test_conv2d.py (about 4 minutes), of which a handful of weight-serialising tests run.
DEFAULT_SUITES: Tuple[str, ...] = (
    "exir/emit/test/test_emit.py",
    "devtools/bundled_program/test",
    "exir/_serialize/test",
    "backends/xnnpack/test/serialization",
    ",".join(
        _XNN_OPS + test
        for test in (
            "test_linear.py::TestLinear::test_fp32_addmm",
            "test_linear.py::TestLinear::test_qd8_f32_per_channel_linear",
            "test_linear.py::TestLinear::test_linear_with_force_non_static_weights_for_f32_linear",
            "test_conv2d.py::TestConv2d::test_fp32_conv2d",
            "test_conv2d.py::TestConv2d::test_qs8_conv2d_per_channel",
            "test_conv2d.py::TestConv2d::test_dq_conv2d",
        )
    ),
    "backends/vulkan/test/test_serialization.py,backends/vulkan/test/test_vulkan_compile_options.py",
    "exir/program/test/test_program.py",
    "exir/tests/test_passes.py",
    "exir/tests/test_verification.py,exir/verification/test/test_verifier.py",
)

ENV_VAR = "EXECUTORCH_DEVICE_GUARD"
OUTCOMES = ("passed", "failed", "error", "skipped")
# When junitxml lists a test twice (a call failure and a teardown error), the worst one counts.
_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


class Run(NamedTuple):
    """One pytest invocation: per-test outcomes and first message lines, exit code, log tail."""

    outcomes: Dict[str, str]
    messages: Dict[str, str]
    returncode: int
    log_tail: str
    seconds: float


def executorch_root() -> Path:
    """The installed executorch package folder, found without importing executorch here."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not installed in this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def environment(guard: bool, pythonpath: Optional[Path] = None) -> Dict[str, str]:
    """This process's environment with the guard on or off, and `pythonpath` first on sys.path."""
    env = dict(os.environ)
    env[ENV_VAR] = "1" if guard else "0"
    # Keep pytest's assertion rewriting from writing .pyc files into the installed wheel.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(pythonpath)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
    return env


def guard_is_active(guard: bool, cwd: str) -> bool:
    """Whether a fresh interpreter with this env value wraps the emitter: what pytest will see."""
    code = (
        "import executorch.exir.emit._emitter as e; "
        "print(hasattr(e._Emitter._tensor_spec_to_evalue, '__wrapped__'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=environment(guard),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[-1:] == ["True"]


def parse_junit(path: Path) -> Tuple[Dict[str, str], Dict[str, str]]:
    """Per-test outcome and first message line, keyed by 'dotted.module.Class::test'."""
    outcomes: Dict[str, str] = {}
    messages: Dict[str, str] = {}
    if not path.exists():
        return outcomes, messages
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                message = (child.get("message") or "").strip().partition("\n")[0]
                # Collection and setup errors carry a generic message; the raised error is in
                # the text's last "E   " line.
                raised = [l[1:].strip() for l in (child.text or "").splitlines() if l[:2] == "E "]
                if child.tag == "error" and raised:
                    message = f"{message}: {raised[-1]}"
                message = message[:200]
        if _SEVERITY[outcome] >= _SEVERITY[outcomes.get(test, "passed")]:
            outcomes[test] = outcome
            messages[test] = message
    return outcomes, messages


def run_pytest(
    root: Path,
    targets: Sequence[str],
    env: Dict[str, str],
    workers: int,
    timeout: float,
    workdir: Path,
    name: str = "pytest",
) -> Run:
    """Runs the targets in a pytest subprocess with `env`, outside this repository's pytest
    configuration; junit XML and log go to workdir/<name>.xml and .log."""
    xml = workdir / f"{name}.xml"
    log = workdir / f"{name}.log"
    command = [
        sys.executable, "-m", "pytest",
        "-c", os.devnull,  # no ini file: ignore any pyproject.toml/pytest.ini around the cwd
        "--rootdir", str(root),  # node ids relative to the executorch package
        "--import-mode=importlib",  # upstream test files share basenames (test_serialization.py)
        "-p", "no:cacheprovider",
        "-q", "-rA",
        "--continue-on-collection-errors",
        f"--junitxml={xml}",
    ]
    if workers > 0:
        command += ["-n", str(workers)]
    command += [str(root / target) for target in targets]
    start = time.monotonic()
    with open(log, "w") as out:
        try:
            returncode = subprocess.run(
                command, env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            returncode = -1
    seconds = time.monotonic() - start
    outcomes, messages = parse_junit(xml)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    return Run(outcomes, messages, returncode, tail, seconds)


def completed(run: Run) -> bool:
    """pytest exits 0 or 1 after a complete run; anything else (or no junit) is broken."""
    return run.returncode in (0, 1) and bool(run.outcomes)


def counts(outcomes: Dict[str, str]) -> str:
    """Passed/failed/error/skipped counts, as in the results tables."""
    return "/".join(str(sum(1 for o in outcomes.values() if o == kind)) for kind in OUTCOMES)


def label(spec: str) -> str:
    """A suite's name in the table: the suite itself, or the folder of its several targets."""
    targets = spec.split(",")
    if len(targets) == 1:
        return spec
    common = os.path.commonpath([t.split("::")[0] for t in targets])
    return f"{common}/ ({len(targets)} targets)"


def compare(a: Run, b: Run, names: Tuple[str, str]) -> Tuple[List[str], List[str]]:
    """Tests whose outcome differs between the runs, and tests that did not pass in either."""
    differences: List[str] = []
    both_failing: List[str] = []
    for test in sorted(set(a.outcomes) | set(b.outcomes)):
        x, y = a.outcomes.get(test, "absent"), b.outcomes.get(test, "absent")
        if x != y:
            differences.append(f"{test}: {names[0]} {x}, {names[1]} {y}  [{a.messages.get(test, '')}]")
        elif x != "passed":
            both_failing.append(f"{test}: {x}  [{a.messages.get(test, '')}]")
    return differences, both_failing


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    """A markdown table with aligned columns."""
    widths = [max(len(r[i]) for r in [*rows, headers]) for i in range(len(headers))]
    return [
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"
        for row in [headers, tuple("-" * w for w in widths), *rows]
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", default=list(DEFAULT_SUITES),
                        help="pytest targets relative to the executorch package; commas join "
                             "several targets into one suite (default: the built-in suites)")
    parser.add_argument("-n", "--workers", type=int, default=0,
                        help="pytest-xdist workers per run (0: no xdist)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds allowed for one pytest run")
    args = parser.parse_args(argv)

    root = executorch_root()
    started = time.monotonic()
    print(f"executorch package: {root}")
    with tempfile.TemporaryDirectory(prefix="upstream-") as tmp:
        guarded_active = guard_is_active(True, tmp)
        unguarded_active = guard_is_active(False, tmp)
        print(f"sanity: {ENV_VAR}=1 emitter wrapped: {guarded_active}; "
              f"{ENV_VAR}=0 emitter wrapped: {unguarded_active}")
        if not guarded_active or unguarded_active:
            print("the guard is not switched by the environment variable as expected")
            return 2

        rows: List[Tuple[str, str, str, str]] = []
        differences: List[str] = []
        both_failing: List[str] = []
        broken = False
        for index, spec in enumerate(args.suites):
            targets = [t for t in spec.split(",") if t]
            runs: Dict[bool, Run] = {}
            for guard in (True, False):
                mode = "guarded" if guard else "unguarded"
                workdir = Path(tmp) / f"suite{index}-{'on' if guard else 'off'}"
                workdir.mkdir()
                runs[guard] = run_pytest(
                    root, targets, environment(guard), args.workers, args.timeout, workdir, mode
                )
                run = runs[guard]
                print(f"  {label(spec)} [{ENV_VAR}={int(guard)}]: exit {run.returncode}, "
                      f"{len(run.outcomes)} tests, {run.seconds:.0f} s", flush=True)
                if not completed(run):
                    broken = True
                    print(f"pytest did not complete:\n{run.log_tail}")
            on, off = runs[True].outcomes, runs[False].outcomes
            rows.append((label(spec), counts(on), counts(off), "yes" if on == off else "NO"))
            differ, not_passed = compare(runs[True], runs[False], ("guarded", "unguarded"))
            differences += differ
            both_failing += not_passed

    print()
    print("\n".join(table(("suite", "guarded P/F/E/S", "unguarded P/F/E/S", "identical"), rows)))
    print(f"\ntotal time: {time.monotonic() - started:.0f} s")
    if both_failing:
        print("\nnot passed in either mode (same outcome both ways):")
        print("\n".join(f"  {line}" for line in both_failing))
    if differences:
        print("\nOUTCOMES DIFFER:")
        print("\n".join(f"  {line}" for line in differences))
    return 1 if differences or broken else 0


if __name__ == "__main__":
    sys.exit(main())
