# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the series does, run in patched copies of the installed release: its tests pass
there, and with --alone each patch's own alone; CI's commands pass as written; the package
passes the series' tests and raises the series' errors word for word; with --mutations,
each code hunk is needed by its patch's tests. A patch that changes C++ is left out of the
copies, which lack its built change: the package, which makes it, runs its tests."""

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from upstream import patches, series
from upstream.patches import Hunk, Patch
from upstream.runner import MESSAGES, META, PROBE, Job, Run, pytest_job, run_jobs


@pytest.fixture(scope="session")
def on_patched(patched: Path, workdir: Path, workers: int) -> dict[str, Run]:
    """In the patched copy, each a fresh interpreter: the series' tests, each CI command as
    written and the probe with the messages, guard off; the meta model with the guard on."""
    found = patches.read()
    jobs = {
        "series": pytest_job(patched, found.copy_tests, workdir / "series"),
        "messages": Job(patched.parent, MESSAGES, "messages-series"),
        "both": Job(patched.parent, META, "meta-both", True),
    }
    for i, command in enumerate(found.commands):
        jobs[command] = Job(patched.parent, shlex.split(command)[2:], f"ci-{i}")
    return run_jobs(jobs, workers, workdir)


# Tests of how a follow-up makes its change rather than of what a user sees, which the package
# reaches another way: 0008 registers the custom ops' host kernels for the CPU alone, the
# package gives each device key a kernel that refuses (the same NotImplementedError).
HOW_NOT_WHAT = (
    "extension/llm/custom_ops/test_update_cache.py::UpdateCacheDeviceTest::test_host_kernels_are_registered_for_cpu_only",
)


@pytest.fixture(scope="session")
def against(
    pytestconfig: pytest.Config, root: Path, workdir: Path, workers: int
) -> dict[str, Run]:
    """The series' test files alone applied to a copy of the installed release, each run
    guarded: the probe, those tests (but those of --leave-out's patches, and HOW_NOT_WHAT) and
    the package's messages."""
    found = patches.read()
    paths = [patch.path for patch in found.patches]
    left_out = pytestconfig.getoption("leave_out")
    assert set(left_out) <= {patch.name for patch in found.patches}, left_out
    tests = []
    for patch in found.patches:
        if patch.name not in left_out:
            tests += patch.tests
    include = [f"--include={pattern}" for pattern in patches.TEST_FILES]
    tree, error = series.patched_copy(root, workdir / "tests-only", paths, *include)
    if error:
        pytest.skip(f"the series' test files do not apply to this release's: {error}")
    jobs = {
        "probe": Job(tree.parent, PROBE, "probe-on", True),
        "series": pytest_job(
            tree, tests, workdir / "series-on", guard=True, deselect=HOW_NOT_WHAT
        ),
        "messages": Job(tree.parent, MESSAGES, "messages-package", True),
    }
    return run_jobs(jobs, workers, workdir)


@pytest.fixture(scope="session")
def alone(
    pytestconfig: pytest.Config, root: Path, workdir: Path, workers: int
) -> dict[str, Run]:
    """Each patch with tests applied alone to a copy of the installed release, its own tests
    run there, guard off, --workers copies at a time."""
    if not pytestconfig.getoption("alone"):
        pytest.skip("needs --alone")
    jobs = {}
    with_tests = []
    for patch in patches.read().patches:
        if patch.tests and not patch.built:
            with_tests.append(patch)
    for i, patch in enumerate(with_tests):
        tree, error = series.patched_copy(root, workdir / f"alone-{i}", [patch.path])
        assert error is None, error
        jobs[patch.name] = pytest_job(tree, patch.tests, workdir / f"alone-{i}")
    return run_jobs(jobs, workers, workdir)


@pytest.fixture(scope="session")
def mutants(
    pytestconfig: pytest.Config, patched: Path, workdir: Path, workers: int
) -> dict[int, Run]:
    """Each code hunk reverted in its own copy of the patched tree, and the series' tests run
    there, --workers copies at a time; in each, a crash fails the test that crashed (its xdist
    worker restarts)."""
    if not pytestconfig.getoption("mutations"):
        pytest.skip("needs --mutations")
    found = patches.read()
    jobs = {}
    for hunk in found.hunks:
        tree = series.copy_package(patched, workdir / f"mutant-{hunk.number}")
        diff = f"--- a/{hunk.file.path}\n+++ b/{hunk.file.path}\n{hunk.hunk}"
        reverse = ["git", "apply", "-R", "-"]
        reverted = subprocess.run(
            reverse, input=diff, cwd=tree, capture_output=True, text=True
        )
        assert reverted.returncode == 0, f"does not revert: {reverted.stderr}"
        jobs[hunk.number] = pytest_job(
            tree, found.copy_tests, workdir / f"m{hunk.number}"
        )
    return run_jobs(jobs, workers, workdir)


def test_each_patch_alone_passes_its_own_tests(
    patch: Patch, gpu: bool, request: pytest.FixtureRequest
) -> None:
    if patch.ci_only:
        pytest.skip("workflows only: test_ci_commands_pass_as_written runs them")
    if patch.built:
        pytest.skip(
            "changes C++, which a copy of the wheel lacks: "
            "test_against_package_the_series_tests_pass runs its tests"
        )
    assert patch.tests, "it adds no tests of its own"
    request.getfixturevalue("alone")[patch.name].assert_passed(gpu)


def test_the_series_tests_pass_in_the_patched_tree(
    on_patched: dict[str, Run], gpu: bool
) -> None:
    probe = on_patched["messages"].printed()["probe"]
    assert probe == {"wrapped": False, "checks": True}
    on_patched["series"].assert_passed(gpu)


def test_ci_commands_pass_as_written(
    command: str, on_patched: dict[str, Run], gpu: bool
) -> None:
    """In the patched copy's root: each test they name exists; with a GPU, none skips."""
    done = on_patched[command]
    print(f"\n{command}: exit {done.returncode} in {done.seconds:.1f} s")
    print(done.log[-1500:])
    assert done.returncode == 0
    assert not (gpu and re.search(r"\d+ skipped|skipped=\d+", done.log))


def test_against_package_the_series_tests_pass(
    against: dict[str, Run], gpu: bool
) -> None:
    assert against["probe"].printed() == {"wrapped": True, "checks": False}
    against["series"].assert_passed(gpu)


def test_the_package_raises_the_series_errors(
    against: dict[str, Run], on_patched: dict[str, Run]
) -> None:
    """Each raising site gives the same error, word for word, with the package as with the
    series' code: device memory (simulated) names cuda:0, meta names meta; with both, the
    meta model's error is raised once."""
    patched = on_patched["messages"].printed()["errors"]
    both = on_patched["both"].log
    print(json.dumps(patched, indent=1))
    assert len(patched) == 16
    assert against["messages"].printed()["errors"] == patched
    for site, error in patched.items():
        named = "on meta" if site.endswith("meta") else "on cuda:0"
        assert named in error or site.endswith("cpu"), error
    meta = patched["emitter, meta"].split("\n")[0]
    assert both.count("InternalError: ") == 1 and meta in both, both[-3000:]


def test_each_hunk_is_needed_by_its_patch_tests(
    hunk: Hunk, mutants: dict[int, Run], gpu: bool
) -> None:
    """With the hunk reverted, its own patch's tests fail, and no other test but those of
    later patches, which build on it."""
    found = patches.read()
    done = mutants[hunk.number]
    own = tuple(patches.junit_prefix(t) for t in found.patches[hunk.patch].tests)
    later = []
    for patch in found.patches[hunk.patch + 1 :]:
        later += [patches.junit_prefix(test) for test in patch.tests]
    failing = set()
    for test, case in done.cases.items():
        if case.outcome not in ("passed", "skipped"):
            failing.add(test)
    mine = sorted(test for test in failing if test.startswith(own))
    others = []
    for test in sorted(failing - set(mine)):
        if not test.startswith(tuple(later)):
            others.append(test)
    print(f"\nreverted:\n{hunk.hunk}its tests that fail:")
    print([(test, done.cases[test].summary) for test in mine])
    skipped = []
    for test, case in done.cases.items():
        if case.outcome == "skipped" and test.startswith(own):
            skipped.append(test)
    outcomes = [case.outcome for case in done.cases.values()]
    if failing and "passed" not in outcomes:  # a module that all import
        print("every test file errors: executorch no longer imports")
    elif not mine and skipped and not gpu:
        pytest.skip(f"only its CUDA tests, skipped without a GPU, catch it: {skipped}")
    else:
        assert done.completed and mine and not others, f"also failing: {others}"
