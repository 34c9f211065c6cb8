# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Runs upstream ExecuTorch's own tests with the guard on and off and compares per-test outcomes.

The tests ship inside the installed executorch wheel. Each suite runs in a pytest subprocess with
EXECUTORCH_DEVICE_GUARD=1 and with =0; the startup .pth line then guards (or not) every pytest
process, xdist workers included. The guard must not change any upstream outcome: the exit status
is 1 when one differs. upstream/check.py compares a patched and an unpatched copy the same way.

    python -m upstream.suites -n 2                       # the default suites
    python -m upstream.suites -n 2 exir/emit/test/test_emit.py
    python -m upstream.suites a/test_x.py::TestX::test_y,a/test_z.py   # one suite, two targets
"""

import argparse
import importlib.util
import json
import os
import signal
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
    """The guard on or off, `pythonpath` (a copy of executorch) first on sys.path. Without one, tests run in the
    installed wheel, and no .pyc files (pytest's assertion rewriting) are written into it; with one, Python writes its
    bytecode caches as usual, so that the next child loads torch's modules from them (6 s here, not 11)."""
    env = {**os.environ, "EXECUTORCH_DEVICE_GUARD": "1" if guard else "0"}
    if pythonpath is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    return env


def parse_junit(path: Path) -> Tuple[Dict[str, str], Dict[str, str]]:
    """Per-test outcome and first message line, keyed by 'dotted.module.Class::test'."""
    outcomes: Dict[str, str] = {}
    messages: Dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase") if path.exists() else ():
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                message = (child.get("message") or "").strip().partition("\n")[0]
                # Collection and setup errors carry a generic message; the raised error is in the last "E " line.
                raised = [line[1:].strip() for line in (child.text or "").splitlines() if line[:2] == "E "]
                message = (f"{message}: {raised[-1]}" if child.tag == "error" and raised else message)[:200]
        if _SEVERITY[outcome] >= _SEVERITY[outcomes.get(test, "passed")]:
            outcomes[test], messages[test] = outcome, message
    return outcomes, messages


def _pytest_args(root: Path, targets: Sequence[str], xml: Path, workers: int) -> List[str]:
    return [
        "-c", os.devnull,  # no ini file from around the cwd
        "--rootdir", str(root),  # node ids relative to the executorch package
        "--import-mode=importlib",  # upstream test files share basenames (test_serialization.py)
        "-p", "no:cacheprovider", "-q", "-rA", "--continue-on-collection-errors", f"--junitxml={xml}",
        *(["-n", str(workers)] if workers > 0 else []), *(str(root / target) for target in targets),
    ]


def _run_result(xml: Path, log: Path, returncode: int, seconds: float) -> Run:
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else "not started"
    return Run(*parse_junit(xml), returncode, tail, seconds)


def run_pytest(root: Path, targets: Sequence[str], env: Dict[str, str], workers: int, timeout: float, workdir: Path,
               name: str) -> Run:
    """The targets in a pytest subprocess with `env`; junit XML and log in workdir/<name>.xml and .log."""
    xml, log = workdir / f"{name}.xml", workdir / f"{name}.log"
    start = time.monotonic()
    with open(log, "w") as out:
        try:
            returncode = subprocess.run([sys.executable, "-m", "pytest", *_pytest_args(root, targets, xml, workers)],
                                        env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                                        timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            returncode = -1
    return _run_result(xml, log, returncode, time.monotonic() - start)


# Run by run_forked: imports pytest's plugins and the modules of torch that ExecuTorch imports, but not ExecuTorch,
# then runs each pytest in a child forked from it, `workers` at a time, its copy of executorch first on sys.path (and
# on PYTHONPATH, for the test's own children). A child whose tests imported executorch from elsewhere exits with 3, as
# pytest does on an internal error: not a completed run. PYTORCH_NVML_BASED_CUDA_CHECK=1 has torch.cuda.is_available()
# ask NVML, so that the imports leave CUDA to the children, which drop it.
_FORKED = """
import json, os, sys, time
import pytest, torch, torch._dynamo, torch._inductor.fx_passes.post_grad
from importlib.metadata import entry_points
for plugin in entry_points(group="pytest11"):
    plugin.load()
assert not torch.cuda.is_initialized()
runs, workers, children = json.loads(sys.stdin.read()), int(sys.argv[1]), {}
def reap():
    pid, status = os.wait()
    index, started = children.pop(pid)
    print(json.dumps([index, os.waitstatus_to_exitcode(status), time.monotonic() - started]), flush=True)
for index, (site, log, args) in enumerate(runs):
    if len(children) == workers:
        reap()
    pid = os.fork()
    if pid == 0:
        status = 3
        try:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))
            sys.path.insert(0, site)
            out = open(log, "w")
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            status = int(pytest.main(args))
            outside = [m.__file__ for n, m in list(sys.modules.items()) if n.split(".")[0] == "executorch"
                       and getattr(m, "__file__", None) and not m.__file__.startswith(site + os.sep)]
            if outside:
                print(f"executorch imported from outside {site}: {outside[:3]}")
                status = 3
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    children[pid] = index, time.monotonic()
while children:
    reap()
"""


def run_forked(runs: Sequence[Tuple[Path, Sequence[str], str]], workers: int, timeout: float,
               workdir: Path) -> List[Run]:
    """run_pytest (no xdist, the guard off) for each (copy of the executorch package, its targets, name), the copy's
    folder first on sys.path, in children forked from one interpreter (_FORKED): each imports only its own ExecuTorch,
    4 to 5 s of CPU less than a fresh interpreter. `timeout` is for all of them; at its end every child is killed.
    They run copies only, so they write bytecode, as with environment(False, copy)."""
    files = [(workdir / f"{name}.xml", workdir / f"{name}.log") for _, _, name in runs]
    order = [(str(root.parent), str(log), _pytest_args(root, targets, xml, 0))
             for (root, targets, _), (xml, log) in zip(runs, files)]
    env = {**os.environ, "EXECUTORCH_DEVICE_GUARD": "0", "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    with subprocess.Popen([sys.executable, "-c", _FORKED, str(max(workers, 1))], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, cwd=workdir, env=env, start_new_session=True) as server:
        try:
            stdout, _ = server.communicate(json.dumps(order), timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            stdout, _ = server.communicate()
    done = {index: (returncode, seconds) for index, returncode, seconds in map(json.loads, stdout.splitlines())}
    return [_run_result(xml, log, *done.get(index, (-1, timeout))) for index, (xml, log) in enumerate(files)]


def completed(run: Run) -> bool:  # pytest exits 0 or 1 after a complete run; anything else (or no junit) is broken
    return run.returncode in (0, 1) and bool(run.outcomes)


def counts(outcomes: Dict[str, str]) -> str:  # passed/failed/error/skipped, as in the results tables
    return "/".join(str(sum(1 for o in outcomes.values() if o == kind)) for kind in OUTCOMES)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:  # markdown, columns aligned
    widths = [max(len(r[i]) for r in [*rows, headers]) for i in range(len(headers))]
    return ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"
            for row in [headers, tuple("-" * w for w in widths), *rows]]


class Comparison(NamedTuple):
    rows: List[Tuple[str, ...]]  # suite, outcome counts per setup, identical?, seconds per setup
    differences: List[str]
    not_passed: List[str]  # the same outcome in both setups, but not passed
    broken: List[str]  # runs that did not complete, with their log tails


def compare(setups: Dict[str, Tuple[Path, Dict[str, str]]], suites: Sequence[str], workers: int, timeout: float,
            workdir: Path, leave_out: Tuple[str, ...] = ()) -> Comparison:
    """Each suite (comma-separated pytest targets) in both setups (name -> executorch folder, env); tests whose
    junit names start with `leave_out` are not compared."""
    result = Comparison([], [], [], [])
    a, b = setups
    for index, suite in enumerate(suites):
        runs = [run_pytest(root, suite.split(","), env, workers, timeout, workdir, f"suite{index}-{name}")
                for name, (root, env) in setups.items()]
        result.broken.extend(f"{suite} [{name}]:\n{run.log_tail}" for name, run in zip(setups, runs)
                             if not completed(run))
        x, y = ({t: o for t, o in run.outcomes.items() if not t.startswith(leave_out)} for run in runs)
        for test in sorted(set(x) | set(y)):
            if x.get(test) != y.get(test):
                result.differences.append(f"{test}: {a} {x.get(test, 'absent')}, {b} {y.get(test, 'absent')}  "
                                          f"[{runs[0].messages.get(test) or runs[1].messages.get(test, '')}]")
            elif x[test] != "passed":
                result.not_passed.append(f"{test}: {x[test]}  [{runs[0].messages.get(test, '')}]")
        targets = [target.split("::")[0] for target in suite.split(",")]
        name = suite if len(targets) == 1 else f"{os.path.commonpath(targets)}/ ({len(targets)} targets)"
        result.rows.append((name, counts(x), counts(y), "yes" if x == y else "NO",
                            f"{runs[0].seconds:.0f} / {runs[1].seconds:.0f}"))
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", default=list(DEFAULT_SUITES),
                        help="pytest targets relative to the executorch package; commas join several targets into "
                             "one suite (default: the built-in suites)")
    parser.add_argument("-n", "--workers", type=int, default=0, help="pytest-xdist workers per run (0: no xdist)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed for one pytest run")
    args = parser.parse_args(argv)
    root, started = executorch_root(), time.monotonic()
    code = "import executorch.exir.emit._emitter as e; print(hasattr(e._Emitter._tensor_spec_to_evalue, '__wrapped__'))"
    wrapped = [subprocess.run([sys.executable, "-c", code], env=environment(guard), capture_output=True, text=True)
               .stdout.split()[-1:] == ["True"] for guard in (True, False)]
    print(f"executorch package: {root}; the emitter wrapped with the guard on, off: {wrapped}")
    if wrapped != [True, False]:
        return 2
    with tempfile.TemporaryDirectory(prefix="upstream-") as tmp:
        result = compare({"guarded": (root, environment(True)), "unguarded": (root, environment(False))},
                         args.suites, args.workers, args.timeout, Path(tmp))
    print("\n".join(table(("suite", "guarded P/F/E/S", "unguarded P/F/E/S", "identical", "s, guarded / unguarded"),
                          result.rows)))
    print(f"\ntotal time: {time.monotonic() - started:.0f} s")
    for title, lines in (("not passed in either mode (same outcome both ways)", result.not_passed),
                         ("OUTCOMES DIFFER", result.differences), ("pytest did not complete", result.broken)):
        if lines:
            print(f"\n{title}:\n" + "\n".join(f"  {line}" for line in lines))
    return 1 if result.differences or result.broken else 0


if __name__ == "__main__":
    sys.exit(main())
