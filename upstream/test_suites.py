# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""With --suites: upstream's own suites give the same outcomes in the patched copy as in an
unpatched one (guard off), and in the installed release guarded as unguarded (the series'
tests left out of the comparison)."""

import json
import os
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from tabulate import tabulate

from test.support import junit
from upstream import patches
from upstream.runner import PROBE, REPO, capture, environment, pytest_job, run_jobs

# Chosen to reach every guarded site in minutes on 2 cores. Left out: Vulkan's delegate
# tests (they need its runtime, not in the CPU wheel) and most of XNNPACK's slow op tests.
XNN = "backends/xnnpack/test/ops/"
SUITES = (
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
    "runtime/test",
    "extension/llm/custom_ops/test_update_cache.py,"
    "extension/llm/custom_ops/test_sdpa_with_kv_cache.py",
    "extension/llm/runner/test",
    "extension/training/pybindings/test/test.py",
)


# What the probe (test/support/children.py) must find in each setup.
PROBES = {
    "patched": {"wrapped": False, "checks": True},
    "unpatched": {"wrapped": False, "checks": False},
    "guarded": {"wrapped": True, "checks": False},
    "unguarded": {"wrapped": False, "checks": False},
}


class Comparison(NamedTuple):
    row: tuple[str, ...]  # suite, outcomes in each setup, identical?, seconds
    differences: list[str]
    broken: list[str]  # runs that did not complete, with their output's end


def compare(
    setups: dict[str, tuple[Path, bool]], suite: str, workers: int, workdir: Path
) -> Comparison:
    """The suite (comma-separated targets) in both setups (name -> executorch folder and
    guard), one run at a time with `workers` xdist workers; the series' own tests are not
    compared."""
    skip = tuple(patches.junit_prefix(test) for test in patches.read().tests)
    jobs = {}
    for name, (tree, guard) in setups.items():
        out = workdir / name
        jobs[name] = pytest_job(tree, suite.split(","), out, guard, workers)
    done = run_jobs(jobs, 1, workdir)
    broken, outcomes = [], []
    for name, run in done.items():
        if not run.completed:
            broken.append(f"{suite} [{name}]:\n{run.log[-3000:]}")
        kept = {}
        for test, case in run.cases.items():
            if not test.startswith(skip):
                kept[test] = case.outcome
        outcomes.append(kept)
    first, second = setups
    x, y = outcomes
    differences = []
    for test in sorted(set(x) | set(y)):
        if x.get(test) != y.get(test):
            case = done[first].cases.get(test) or done[second].cases.get(test)
            why = case.summary if case else ""
            differences.append(
                f"{test}: {first} {x.get(test)}, {second} {y.get(test)} [{why}]"
            )
    targets = [target.split("::")[0] for target in suite.split(",")]
    title = suite
    if len(targets) > 1:
        title = f"{os.path.commonpath(targets)}/ ({len(targets)} targets)"
    counts = [junit.counts(kept.values()) for kept in outcomes]
    seconds = " / ".join(f"{run.seconds:.0f}" for run in done.values())
    row = (title, *counts, "yes" if x == y else "NO", seconds)
    return Comparison(row, differences, broken)


@pytest.fixture(scope="session")
def setups(
    pytestconfig: pytest.Config, root: Path, patched: Path, unpatched: Path
) -> dict[str, dict[str, tuple[Path, bool]]]:
    """The two comparisons: the patched and an unpatched copy (guard off), and the installed
    release guarded and unguarded; each setup's probe first."""
    if not pytestconfig.getoption("suites"):
        pytest.skip("needs --suites")
    found = {
        "patched": {"patched": (patched, False), "unpatched": (unpatched, False)},
        "guarded": {"guarded": (root, True), "unguarded": (root, False)},
    }
    for comparison in found.values():
        for name, (tree, guard) in comparison.items():
            env = environment(guard, tree.parent)
            done = capture(sys.executable, "-m", *PROBE, env=env, cwd=REPO)
            assert json.loads(done.stdout) == PROBES[name], done.stderr[-3000:]
    return found


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("comparison", ["patched", "guarded"])
def test_upstream_suites_give_the_same_outcomes(
    comparison: str,
    suite: str,
    setups: dict[str, dict[str, tuple[Path, bool]]],
    workers: int,
    workdir: Path,
) -> None:
    out = workdir / f"suite{SUITES.index(suite)}-{comparison}"
    found = compare(setups[comparison], suite, workers, out)
    headers = ("suite", *setups[comparison], "identical", "s")
    print("\n" + tabulate([found.row], headers, tablefmt="github"))
    assert not found.broken, "\n".join(found.broken)
    assert not found.differences, "\n".join(found.differences)
