# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The series applied: to the installed release; and, with --upstream-git, to upstream main
at REF as its CI would see it: each patch alone, `git am` and `git format-patch` round trip,
pytest's collection, Buck's targets, and with --lint and --actionlint upstream's linters."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from upstream import patches, series
from upstream.patches import Patch
from upstream.runner import capture, environment

LINT_WORKFLOW = ".github/workflows/lint.yml"
LINT_FILES = (".lintrunner.toml", LINT_WORKFLOW, ".flake8", "pyproject.toml")
LINT_FILES += ("requirements-lintrunner.txt",)
LINTERS = "FLAKE8,UFMT,NEWLINE,ETCAPITAL,LICENSELINT,TORCH_AO_IMPORT"
BUCK_FILES = ("BUCK", "TARGETS", "targets.bzl")


@pytest.fixture(scope="session")
def upstream(pytestconfig: pytest.Config, workdir: Path) -> Path:
    """REF's versions of the files that the series touches, and of the lint config, in a
    new repository: the fetched snapshot lacks a few blobs, so git cannot write REF's tree."""
    git_dir = pytestconfig.getoption("upstream_git")
    if not git_dir:
        pytest.skip("needs --upstream-git")
    paths = {"pytest.ini", *LINT_FILES}
    for patch in patches.read().patches:
        for file in patch.diff:
            paths.add(file.path)
            if file.is_added_file:
                for name in BUCK_FILES:
                    paths.add(str(Path(file.path).parent / name))
    source = ("git", "--git-dir", git_dir)
    listing = ("ls-tree", "-r", "--name-only", series.REF, "--", *sorted(paths))
    listed = capture(*source, *listing).stdout.split()
    archive = [*source, "archive", series.REF, "--", *listed]
    tar = subprocess.run(archive, capture_output=True, check=True).stdout
    folder = workdir / "upstream"
    folder.mkdir()
    subprocess.run(["tar", "-x", "-C", str(folder)], input=tar, check=True)
    series.commit_all(folder, "base")
    return folder


@pytest.fixture(scope="session")
def am(upstream: Path, workdir: Path) -> Path:
    """A clone of `upstream` with the merge set, then the follow-ups, applied by `git am`
    (upstream/series.py), each kind's `git format-patch` in workdir/exported-KIND."""
    folder = workdir / "am"
    identity = ("-c", "user.name=check", "-c", "user.email=c@localhost")
    clone = ("git", "clone", "-q", *identity, str(upstream), str(folder))
    subprocess.run(clone, check=True, capture_output=True)
    for kind in (series.SERIES, series.FOLLOWUP):
        series.apply(folder, series.BASE if kind == series.FOLLOWUP else "HEAD", kind)
        exported = workdir / f"exported-{kind.name}"
        exported.mkdir()
        series.export(folder, kind, exported)
    series.git(
        folder, "checkout", "-q", series.BRANCHES[series.SERIES], env=series.GIT_ENV
    )
    followups = [str(path) for path in series.patches(series.FOLLOWUP)]
    series.git(folder, "am", "-q", *followups, env=series.GIT_ENV)
    return folder


def changed(am: Path, kind: str = "AM") -> list[str]:
    """The files that the whole series adds (A) or changes (M)."""
    diff = ("diff", "--name-only", f"--diff-filter={kind}", series.BASE)
    return series.git(am, *diff, env=series.GIT_ENV).split()


def test_the_series_applies_to_the_installed_release(patched: Path) -> None:
    assert (patched / "exir" / "emit" / "_emitter.py").is_file()


def test_each_patch_applies_alone_to_main(patch: Patch, upstream: Path) -> None:
    assert series.git_apply(upstream, [patch.path], "--check") is None


@pytest.mark.parametrize(
    "kind", [series.SERIES, series.FOLLOWUP], ids=["merge set", "follow-ups"]
)
def test_git_am_and_format_patch_give_back_the_files(
    kind: Path, am: Path, workdir: Path
) -> None:
    exported = series.patches(workdir / f"exported-{kind.name}")
    ours = series.patches(kind)
    assert [p.read_bytes() for p in exported] == [p.read_bytes() for p in ours]


def test_pytest_collects_the_series_tests_as_upstream_ci(
    am: Path, patched: Path, unpatched: Path, workdir: Path
) -> None:
    """As upstream's unittest jobs collect (`pytest -n auto`, pytest.ini's testpaths), the
    patched copy with the series' pytest.ini collects every series test but those that the
    CI PR's commands name and those of files that only Buck runs, with no error that an unpatched one lacks with main's: two test
    files of one basename, in folders without __init__.py, import as one module."""
    inis = {
        "unpatched": series.git(am, "show", f"{series.BASE}:pytest.ini"),
        "patched": (am / "pytest.ini").read_text(),
    }
    found = {}
    for state, tree in (("unpatched", unpatched), ("patched", patched)):
        config = workdir / f"{state}.ini"
        config.write_text(inis[state])
        args = ["-c", config, "--rootdir", ".", "--collect-only", "-q"]
        env = environment(False, tree.parent)
        done = capture(sys.executable, "-m", "pytest", *args, cwd=tree, env=env)
        print(f"\n{state}: exit {done.returncode}\n{done.stdout[-1500:]}")
        assert done.returncode in (0, 2) and " collected" in done.stdout, done.stderr
        found[state] = done.stdout
    errors = {}
    for state, text in found.items():
        errors[state] = set(re.findall(r"^ERROR (\S+)", text, re.M))
    run_whole = []  # the test files that CI commands run whole
    for command in patches.read().commands:
        run_whole += re.findall(r"(\S+\.py)(?:\s|$)", command)
    missing = []
    for test in patches.read().tests:
        path = test.split("::")[0]
        # Training's test/test.py is Buck's alone: pytest's default pattern leaves it out,
        # and the patch's text says so.
        buck_only = not Path(path).name.startswith("test_")
        if test not in found["patched"] and path not in run_whole and not buck_only:
            missing.append(test)
    new_errors = errors["patched"] - errors["unpatched"]
    assert not new_errors and not missing, (new_errors, missing)


def test_each_python_file_added_is_named_in_its_folder_s_buck(am: Path) -> None:
    """Meta imports every PR into Buck, where a file in no target breaks the build."""
    for path in [Path(p) for p in changed(am, "A") if p.endswith(".py")]:
        texts = []
        for name in BUCK_FILES:
            file = am / path.parent / name
            if file.exists():
                texts.append(file.read_text())
        assert any(path.name in text for text in texts), path


def test_upstream_linters_report_nothing(
    pytestconfig: pytest.Config, am: Path, workdir: Path
) -> None:
    """lintrunner with upstream's config at its pins (lintrunner and its adapters as its
    lint workflow installs them, `lintrunner init` the linters), on each file that the
    series adds or changes."""
    if not pytestconfig.getoption("lint"):
        pytest.skip("needs --lint")
    workflow = (am / LINT_WORKFLOW).read_text()
    pins = list(
        dict.fromkeys(re.findall(r"\blintrunner(?:-adapters)?==[\w.]+", workflow))
    )
    venv = workdir / "lint"  # its bin first on PATH, as `python -m lintrunner_adapters`
    path = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    env = {**series.GIT_ENV, "PATH": path, "VIRTUAL_ENV": str(venv)}
    env["XDG_DATA_HOME"] = str(workdir)  # lintrunner's records
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [venv / "bin/python", "-m", "pip", "install", "-q", *pins]
    subprocess.run(pip, check=True)
    lintrunner = (venv / "bin/lintrunner", "--take", LINTERS)
    subprocess.run([*lintrunner, "init"], cwd=am, env=env, check=True)
    tee = workdir / "lint.json"
    done = capture(*lintrunner, "--tee-json", tee, *changed(am), cwd=am, env=env)
    print(f"\nlintrunner: exit {done.returncode}\n{done.stdout}{done.stderr}")
    messages = ["no messages written"]
    if tee.exists():
        messages = tee.read_text().splitlines()
    assert (done.returncode, messages) == (0, [])


def test_actionlint_finds_nothing_new_in(
    pytestconfig: pytest.Config, workflow: str, am: Path, workdir: Path
) -> None:
    """actionlint on the workflow as main has it and as patched: clean, or no problem that
    main's lacks (compared without their places)."""
    actionlint = pytestconfig.getoption("actionlint")
    if not actionlint:
        pytest.skip("needs --actionlint")
    texts = {
        "main": series.git(am, "show", f"{series.BASE}:{workflow}"),
        "patched": (am / workflow).read_text(),
    }
    found = {}
    for state, text in texts.items():
        (workdir / state / workflow).parent.mkdir(parents=True, exist_ok=True)
        (workdir / state / workflow).write_text(text)
        done = capture(*shlex.split(actionlint), workflow, cwd=workdir / state)
        print(f"\n{state}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        problems = []
        for line in done.stdout.splitlines():
            if ": " in line:
                problems.append(line.split(": ", 1)[-1])
        found[state] = done.returncode, sorted(problems)
    assert found["patched"][0] == 0 or found["patched"] == found["main"]
