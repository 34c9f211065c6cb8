# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The series' checks: their options, their parametrization, and the fixtures that more than
one check module uses. Without options, the fast checks run, on copies of the installed
release, which has the repository's layout; each option adds the checks that it names
(CONTRIBUTING.md, The upstream series). Run them in one pytest process (no -n): the checks
run their own pytest children, --workers at a time.

    python -m pytest upstream -rA            # the fast checks (nox -s series)
    python -m pytest upstream -k sizes -rA   # the sizes that the review limits
    python -m pytest upstream -rA --alone --mutations --suites --upstream-git DIR \\
        --lint --actionlint actionlint --junitxml=check.xml
"""

import sys
from pathlib import Path

import pytest

from upstream import patches, series
from upstream.runner import capture


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("upstream series")
    group.addoption(
        "--alone",
        action="store_true",
        help="each patch with tests applied alone, its own tests run there",
    )
    group.addoption(
        "--mutations",
        action="store_true",
        help="each code hunk reverted: the series' tests must catch it",
    )
    group.addoption(
        "--suites",
        action="store_true",
        help="upstream's suites, patched against unpatched and guarded against not",
    )
    group.addoption(
        "--upstream-git",
        default="",
        metavar="DIR",
        help="an ExecuTorch git directory holding REF: apply, git am, collection, BUCK",
    )
    group.addoption(
        "--lint",
        action="store_true",
        help="upstream's lintrunner (installed from the package index), with --upstream-git",
    )
    group.addoption(
        "--actionlint",
        default="",
        metavar="COMMAND",
        help="actionlint on each workflow that the series changes, with --upstream-git",
    )
    group.addoption(
        "--require-cuda",
        action="store_true",
        help="fail where there is no CUDA device, rather than skip CUDA tests",
    )
    group.addoption(
        "--leave-out",
        action="append",
        default=[],
        metavar="PATCH",
        help="a patch (followup/0007-runtime-inputs.patch) whose tests the package does "
        "not run, where ExecuTorch's part that they test cannot load with this torch",
    )
    group.addoption(
        "--workers",
        type=int,
        default=2,
        help="pytest runs at a time; for a suite, its xdist workers (default 2)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A check of each patch, CI command, workflow and reverted hunk, by its argument."""
    found = patches.read()
    names = [patch.name for patch in found.patches]
    if "patch" in metafunc.fixturenames:
        metafunc.parametrize("patch", found.patches, ids=names)
    if "command" in metafunc.fixturenames:
        ids = [command[:60] for command in found.commands]
        metafunc.parametrize("command", found.commands, ids=ids)
    if "workflow" in metafunc.fixturenames:
        metafunc.parametrize("workflow", found.workflows, ids=found.workflows)
    if "hunk" in metafunc.fixturenames:
        ids = [hunk.id(found.patches) for hunk in found.hunks]
        metafunc.parametrize("hunk", found.hunks, ids=ids)


@pytest.fixture(scope="session")
def workers(pytestconfig: pytest.Config) -> int:
    return int(pytestconfig.getoption("workers"))


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("check")


@pytest.fixture(scope="session")
def root() -> Path:
    return series.executorch_root()


@pytest.fixture(scope="session")
def gpu(pytestconfig: pytest.Config) -> bool:
    """Whether the tests' children see a CUDA device; with --require-cuda, they must."""
    code = "import torch; print(torch.cuda.is_available())"
    found = capture(sys.executable, "-c", code).stdout.strip() == "True"
    assert found or not pytestconfig.getoption("require_cuda"), "no CUDA device"
    return found


@pytest.fixture(scope="session")
def unpatched(root: Path, workdir: Path) -> Path:
    return series.copy_package(root, workdir / "unpatched")


@pytest.fixture(scope="session")
def patched(root: Path, workdir: Path) -> Path:
    """The installed release with every patch applied."""
    paths = [patch.path for patch in patches.read().patches]
    tree, error = series.patched_copy(root, workdir / "site", paths)
    assert error is None, error
    return tree
