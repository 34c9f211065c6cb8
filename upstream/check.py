# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Checks the upstream series, read from its patch files, as ExecuTorch's maintainers would:
each check is a test in this file, run by pytest (-k picks some), mostly on copies of the
installed release, which has the repository's layout (CONTRIBUTING.md, The upstream series, lists them).

    python -m upstream.check -k sizes   # the sizes that the review limits
    python -m upstream.check            # on the installed release: apply, run the tests
    python -m upstream.check --alone --mutations --suites --upstream-git DIR --lint \\
        --actionlint actionlint --out upstream/RESULTS.md
"""

import argparse
import email
import fnmatch
import functools
import importlib.util
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from unidiff import PatchSet

from upstream import series, suites
from upstream.suites import Job, Run, pytest_run

REPO = Path(__file__).resolve().parents[1]
TEST_FILE, TEST_CODE = "*/test/*test_*.py", "*/test/*"
# What the review asks (issue 27): non-test Python lines added per patch and in all (not
# blank or comment-only); words of a PR text, subject to `---`; characters of a subject.
MAX_LINES = {"0001-emitter.patch": 15, "followup/0004-device-lowering.patch": 30}
MAX_SERIES_LINES, MAX_WORDS, MAX_SUBJECT = 85, 200, 72
PROBE, MESSAGES = ["children", "probe"], ["children", "messages"]
META = ["children", "meta_model"]
LINTERS = "FLAKE8,UFMT,NEWLINE,ETCAPITAL,LICENSELINT,TORCH_AO_IMPORT"
LINT_WORKFLOW = ".github/workflows/lint.yml"
LINT_FILES = (".lintrunner.toml", LINT_WORKFLOW, ".flake8", "pyproject.toml")
LINT_FILES += ("requirements-lintrunner.txt",)
BUCK_FILES = ("BUCK", "TARGETS", "targets.bzl")
REF = "cff6f4dd32"  # upstream main, which the series is based on (CONTRIBUTING.md)
SUMMARY = r"^(?:\||(?:PASSED|FAILED|ERROR|SKIPPED) ).*\n"  # tables, pytest's -rA lines


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("alone", "mutations", "suites", "lint", "require-cuda"):
        parser.add_argument(f"--{flag}", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--upstream-git", default="")
    parser.add_argument("--actionlint", default="")
    parser.add_argument("--out", type=Path)
    parser.add_argument("-k", default="test")
    return parser.parse_args(argv)


@functools.cache
def options() -> argparse.Namespace:
    """main()'s options, handed to the checks in UPSTREAM_CHECK."""
    return arguments(shlex.split(os.environ.get("UPSTREAM_CHECK", "")))


class Patch(NamedTuple):
    path: Path
    diff: PatchSet

    @property
    def name(self) -> str:  # under upstream/: the follow-ups' numbers start again
        return self.path.relative_to(series.SERIES).as_posix()

    @property
    def ci_only(self) -> bool:  # workflows and nothing else: CI wiring
        return all(file.path.startswith(".github/") for file in self.diff)

    @property
    def tests(self) -> tuple[str, ...]:
        """pytest ids: the test files that it adds; `path::Class::test` for each test
        method that it adds to a file (`path::test` for a function)."""
        ids = []
        for file in (f for f in self.diff if fnmatch.fnmatch(f.path, TEST_FILE)):
            ids += [file.path] if file.is_added_file else []
            for hunk in [] if file.is_added_file else file:
                above = [hunk.section_header]  # git's: the last unindented line above
                for line in (line for line in hunk if not line.is_removed):
                    found = re.match(r"(\s*)(?:async\s+)?def (test\w*)", line.value)
                    if line.is_added and found:
                        owner = _class_above(above, len(found[1]))
                        ids.append(f"{file.path}::{owner}{found[2]}")
                    above.append(line.value)
        return tuple(ids)

    @property
    def text(self) -> str:  # the PR text: the subject, and the message up to `---`
        body = email.message_from_string(self.path.read_text()).get_payload()
        return series.subject(self.path) + "\n" + body.split("\n---\n", 1)[0]

    @property
    def code_lines(self) -> tuple[int, int]:
        """Non-test Python lines that it adds: (changed, re-indented), a re-indented line
        being one that its hunk removes with other indentation, as `git diff -w` omits."""
        changed = moved = 0
        for hunk in (h for file in self.diff if _is_code(file) for h in file):
            removed = Counter(line.value.strip() for line in hunk if line.is_removed)
            for text in (line.value.strip() for line in hunk if line.is_added):
                if not text or text.startswith("#"):
                    continue
                if removed[text]:
                    moved, removed[text] = moved + 1, removed[text] - 1
                else:
                    changed += 1
        return changed, moved

    @property
    def commands(self) -> list[str]:  # pytest and unittest commands added to workflows
        added = "".join(x.value for f in self.diff for h in f for x in h if x.is_added)
        lines = re.sub(r"\\\n\s*", "", added).splitlines()
        found = [re.match(r"\s*(python -m (pytest|unittest) .*)", c) for c in lines]
        return [c[1].strip() for c in found if c]


def _is_code(file: Any) -> bool:
    return file.path.endswith(".py") and not fnmatch.fnmatch(file.path, TEST_CODE)


def _class_above(above: list[str], indent: int) -> str:
    """'Class::' for the nearest line above, less indented than `indent`, that opens one."""
    for line in reversed(above if indent else []):
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            found = re.match(r"\s*class (\w+)", line)
            return f"{found[1]}::" if found else ""
    return ""


def junit_prefix(test: str) -> str:
    """How junit names a pytest id's tests: 'module.', 'module.Class::test', 'module::test'."""
    path, _, name = test.partition("::")
    module, (cls, _, function) = path[:-3].replace("/", "."), name.rpartition("::")
    if cls:
        return f"{module}.{cls}::{function}"
    return f"{module}::{function}" if function else f"{module}."


def code_hunks(patch: Patch) -> list[tuple[Any, Any]]:
    """Its hunks of Python files that exist before it, but for tests and comment-only ones."""

    def code(hunk: Any, added: bool) -> list[str]:
        lines = [x for x in hunk if (x.is_added if added else x.is_removed)]
        return [x.value.partition("#")[0].rstrip() for x in lines]

    files = [f for f in patch.diff if _is_code(f) and not f.is_added_file]
    return [(f, h) for f in files for h in f if code(h, True) != code(h, False)]


class Series(NamedTuple):
    patches: list[Patch]
    tests: tuple[str, ...]  # the pytest ids of every patch's tests
    hunks: list[tuple[int, Any, Any]]  # (patch index, file, hunk) of code_hunks
    commands: list[str]  # test commands that the patches add to workflows, each once
    workflows: list[str]  # the workflows that the patches change


@functools.cache
def facts() -> Series:
    """The patch files, read when the checks are collected."""
    patches = [Patch(p, PatchSet.from_filename(str(p))) for p in series.every_patch()]
    hunks = [(i, f, h) for i, patch in enumerate(patches) for f, h in code_hunks(patch)]
    commands = [c for patch in patches for c in patch.commands]
    commands = list(dict.fromkeys(commands))  # one command can be in two workflows
    workflows = sorted(
        {f.path for p in patches for f in p.diff if f.path.startswith(".github/")}
    )
    return Series(
        patches, sum((p.tests for p in patches), ()), hunks, commands, workflows
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The checks of each patch, CI command, workflow and hunk."""
    found = facts()
    names = [p.name for p in found.patches]
    hunks = [f"{names[i][:-6]}:{f.path}:{h.target_start}" for i, f, h in found.hunks]
    for name, values, ids in (
        ("patch", found.patches, names),
        ("command", found.commands, [c[:60] for c in found.commands]),
        ("workflow", found.workflows, found.workflows),
        ("number", range(len(found.hunks)), hunks),
    ):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, values, ids=ids)


def run(*command: Any, **kwargs: Any) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def git(repo: Path, *args: str) -> str:
    """git in `repo`, without the user's and the system's config."""
    return run("git", *args, cwd=repo, env=series.GIT_ENV, check=True).stdout


def printed(done: Run) -> Any:
    """What a run printed last, as JSON."""
    assert done.returncode == 0, done.log[-3000:]
    return json.loads(done.log.splitlines()[-1])


def assert_passed(done: Run, gpu: bool) -> None:
    """Every test passed; only CUDA tests skip, and only without a GPU."""
    assert gpu or not options().require_cuda, "--require-cuda, and no CUDA device"
    print(f"\nP/F/E/S {done.counts} in {done.seconds:.1f} s")
    for test, outcome in sorted(done.outcomes.items()):
        print(f"  {outcome:7} {test} {done.messages.get(test, '')}")
    bad = [t for t, o in done.outcomes.items() if o in ("failed", "error")]
    skip = [t for t, o in done.outcomes.items() if o == "skipped"]
    bad += [t for t in skip if gpu or "cuda" not in t.lower()]
    assert done.completed and not bad, f"not passing: {bad}\n{done.log[-5000:]}"


def jobs(runs: dict[Any, Job], workdir: Path) -> dict[Any, Run]:
    done = suites.run_jobs(list(runs.values()), options().workers, workdir)
    return dict(zip(runs, done, strict=True))


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("check")


@pytest.fixture(scope="session")
def root() -> Path:
    return suites.executorch_root()


@pytest.fixture(scope="session")
def gpu() -> bool:  # as the tests' children see it
    code = "import torch; print(torch.cuda.is_available())"
    return run(sys.executable, "-c", code).stdout.strip() == "True"


@pytest.fixture(scope="session")
def unpatched(root: Path, workdir: Path) -> Path:
    return series.copy_package(root, workdir / "unpatched")


@pytest.fixture(scope="session")
def patched(root: Path, workdir: Path) -> Path:
    tree, error = series.patched_copy(
        root, workdir / "site", [p.path for p in facts().patches]
    )
    assert error is None, error
    return tree


def test_sizes() -> None:
    rows = []
    for p in facts().patches:
        subject = len(series.subject(p.path))
        rows.append((p.name, *p.code_lines, len(p.text.split()), subject))
    columns = ("patch", "lines", "re-indented", "words", "subject")
    print("\n" + suites.table(columns, rows))
    total, limit = sum(row[1] for row in rows), MAX_SERIES_LINES
    found = [f"{r[0]}: {r[1]} lines" for r in rows if r[1] > MAX_LINES.get(r[0], limit)]
    found += [f"the series: {total} lines"] * (total > MAX_SERIES_LINES)
    found += [f"{r[0]}: {r[3]} words" for r in rows if r[3] > MAX_WORDS]
    found += [f"{r[0]}: {r[4]}-character subject" for r in rows if r[4] > MAX_SUBJECT]
    added = [
        f.path
        for p in facts().patches
        for f in p.diff
        if f.is_added_file and _is_code(f)
    ]
    found += [f"{path}: a new module, which no check here types" for path in added]
    assert not found


def test_the_series_applies_to_the_installed_release(patched: Path) -> None:
    assert (patched / "exir" / "emit" / "_emitter.py").is_file()


@pytest.fixture(scope="session")
def alone(root: Path, workdir: Path) -> dict[str, Run]:
    """Each patch with tests applied alone to a copy of the installed release, its own tests
    run there, guard off, --workers copies at a time."""
    if not options().alone:
        pytest.skip("needs --alone")
    runs = {}
    for i, patch in enumerate(p for p in facts().patches if p.tests):
        tree, error = series.patched_copy(root, workdir / f"alone-{i}", [patch.path])
        assert error is None, error
        runs[patch.name] = pytest_run(tree, patch.tests, workdir / f"alone-{i}")
    return jobs(runs, workdir)


def test_each_patch_alone_passes_its_own_tests(
    patch: Patch, gpu: bool, request: Any
) -> None:
    if patch.ci_only:
        pytest.skip("workflows only: test_ci_commands_pass_as_written runs them")
    assert patch.tests, "it adds no tests of its own"
    assert_passed(request.getfixturevalue("alone")[patch.name], gpu)


@pytest.fixture(scope="session")
def on_patched(patched: Path, workdir: Path) -> dict[str, Run]:
    """In the patched copy, each a fresh interpreter: the series' tests, each CI command as
    written and the probe with the messages, guard off; the meta model with the guard on."""
    runs = {
        "series": pytest_run(patched, facts().tests, workdir / "series"),
        "messages": Job(patched.parent, MESSAGES, "messages-series"),
        "both": Job(patched.parent, META, "meta-both", True),
    }
    for i, command in enumerate(facts().commands):
        runs[command] = Job(patched.parent, shlex.split(command)[2:], f"ci-{i}")
    return jobs(runs, workdir)


def test_the_series_tests_pass_in_the_patched_tree(on_patched: Any, gpu: bool) -> None:
    probe = printed(on_patched["messages"])["probe"]
    assert probe == {"wrapped": False, "checks": True}
    assert_passed(on_patched["series"], gpu)


def test_ci_commands_pass_as_written(command: str, on_patched: Any, gpu: bool) -> None:
    """In the patched copy's root: each test they name exists; with a GPU, none skips."""
    done = on_patched[command]
    print(f"\n{command}: exit {done.returncode} in {done.seconds:.1f} s")
    print(done.log[-1500:])
    assert done.returncode == 0
    assert not (gpu and re.search(r"\d+ skipped|skipped=\d+", done.log))


@pytest.fixture(scope="session")
def against(root: Path, workdir: Path) -> dict[str, Run]:
    """The series' test files alone applied to a copy of the installed release, each run
    guarded: the probe, those tests and the package's messages."""
    if importlib.util.find_spec("executorch_device_guard") is None:
        pytest.skip("executorch-device-guard is not installed")
    paths, include = [p.path for p in facts().patches], f"--include={TEST_FILE}"
    tree, error = series.patched_copy(root, workdir / "tests-only", paths, include)
    if error:
        pytest.skip(f"the series' test files do not apply to this release's: {error}")
    runs = {
        "probe": Job(tree.parent, PROBE, "probe-on", True),
        "series": pytest_run(tree, facts().tests, workdir / "series-on", guard=True),
        "messages": Job(tree.parent, MESSAGES, "messages-package", True),
    }
    return jobs(runs, workdir)


def test_against_package_the_series_tests_pass(against: Any, gpu: bool) -> None:
    assert printed(against["probe"]) == {"wrapped": True, "checks": False}
    assert_passed(against["series"], gpu)


def test_the_package_raises_the_series_errors(against: Any, on_patched: Any) -> None:
    """Each raising site gives the same error, word for word, with the package as with the
    series' code: device memory (simulated) names cuda:0, meta names meta; with both, the
    meta model's error is raised once."""
    patched, both = printed(on_patched["messages"])["errors"], on_patched["both"].log
    print(json.dumps(patched, indent=1))
    assert len(patched) == 16 and printed(against["messages"])["errors"] == patched
    for site, error in patched.items():
        named = "on meta" if site.endswith("meta") else "on cuda:0"
        assert named in error or site.endswith("cpu"), error
    meta = patched["emitter, meta"].split("\n")[0]
    assert both.count("InternalError: ") == 1 and meta in both, both[-3000:]


@pytest.fixture(scope="session")
def mutants(patched: Path, workdir: Path) -> list[tuple[str, Run | None]]:
    """Each of the series' hunks reverted in its own copy of the patched tree, and the series'
    tests run there, where a crash fails the test that crashed (its xdist worker restarts)."""
    if not options().mutations:
        pytest.skip("needs --mutations")
    runs, errors = {}, {}
    for number, (_, file, hunk) in enumerate(facts().hunks):
        tree = series.copy_package(patched, workdir / f"mutant-{number}")
        diff = f"--- a/{file.path}\n+++ b/{file.path}\n{hunk}"
        reverted = run("git", "apply", "-R", "-", input=diff, cwd=tree)
        errors[number] = reverted.stderr
        if not reverted.returncode:
            runs[number] = pytest_run(tree, facts().tests, workdir / f"m{number}")
    done = jobs(runs, workdir)
    return [(errors[number], done.get(number)) for number in range(len(facts().hunks))]


def test_each_hunk_is_needed_by_its_patch_tests(
    number: int, mutants: Any, gpu: bool
) -> None:
    index, _, hunk = facts().hunks[number]
    error, done = mutants[number]
    assert done is not None, f"does not revert: {error}"
    own = tuple(junit_prefix(t) for t in facts().patches[index].tests)
    later = tuple(
        junit_prefix(t) for p in facts().patches[index + 1 :] for t in p.tests
    )
    failing = {t for t, o in done.outcomes.items() if o not in ("passed", "skipped")}
    mine = sorted(t for t in failing if t.startswith(own))
    others = sorted(t for t in failing - set(mine) if not t.startswith(later))
    print(f"\nreverted:\n{hunk}its tests that fail:")
    print([(t, done.messages[t]) for t in mine])
    skipped = [t for t, o in done.outcomes.items() if o == "skipped"]
    skipped = [t for t in skipped if t.startswith(own)]
    if failing and "passed" not in done.outcomes.values():  # a module that all import
        print("every test file errors: executorch no longer imports")
    elif not mine and skipped and not gpu:
        pytest.skip(f"only its CUDA tests, skipped without a GPU, catch it: {skipped}")
    else:
        assert done.completed and mine and not others, f"also failing: {others}"


@pytest.fixture(scope="session", params=["patched", "guarded"])
def suite_outcomes(request: Any, root: Path, workdir: Path) -> suites.Comparison:
    """Upstream's suites, without the series' tests, in the patched and an unpatched copy
    (guard off), or in the installed release, guard on and off (`nox -s suites`); each
    setup's probe first."""
    if not options().suites:
        pytest.skip("needs --suites")
    if request.param == "patched":
        plain = request.getfixturevalue("unpatched")
        setups = {"patched": (request.getfixturevalue("patched"), False)}
        setups["unpatched"] = plain, False
        probes = [{"wrapped": False, "checks": checks} for checks in (True, False)]
    else:
        setups = {"guarded": (root, True), "unguarded": (root, False)}
        probes = [{"wrapped": wrapped, "checks": False} for wrapped in (True, False)]
    for (tree, guard), expected in zip(setups.values(), probes):
        env = suites.environment(guard, tree.parent)
        done = run(sys.executable, "-m", *PROBE, env=env, cwd=REPO / "test")
        assert json.loads(done.stdout) == expected
    skip, out = tuple(junit_prefix(t) for t in facts().tests), workdir / request.param
    found = suites.compare(setups, suites.DEFAULT_SUITES, options().workers, out, skip)
    print("\n" + found.report)
    return found


@pytest.mark.parametrize("suite", suites.DEFAULT_SUITES)
def test_upstream_suites_give_the_same_outcomes(
    suite: str, suite_outcomes: Any
) -> None:
    found, index = suite_outcomes, suites.DEFAULT_SUITES.index(suite)
    assert not [line for line in found.broken if line.startswith(suite)]
    row = found.rows[index]
    assert row[3] == "yes", [line for line in found.differences if row[0] in line]


@pytest.fixture(scope="session")
def upstream(workdir: Path) -> Path:
    """REF's versions of the files that the series touches, and of the lint config, in a
    new repository: the fetched snapshot lacks a few blobs, so git cannot write REF's tree."""
    if not options().upstream_git:
        pytest.skip("needs --upstream-git")
    paths = {f.path for p in facts().patches for f in p.diff}
    paths |= {"pytest.ini", *LINT_FILES}
    added = [Path(f.path) for p in facts().patches for f in p.diff if f.is_added_file]
    paths |= {str(path.parent / name) for path in added for name in BUCK_FILES}
    source = ("git", "--git-dir", options().upstream_git)
    listed = run(*source, "ls-tree", "-r", "--name-only", REF, "--", *paths)
    archive = [*source, "archive", REF, "--", *listed.stdout.split()]
    tar = subprocess.run(archive, capture_output=True, check=True).stdout
    (folder := workdir / "upstream").mkdir()
    subprocess.run(["tar", "-x", "-C", str(folder)], input=tar, check=True)
    series.commit_all(folder, "base")
    return folder


@pytest.fixture(scope="session")
def am(upstream: Path, workdir: Path) -> Path:
    """A clone of `upstream` with the merge set, then the follow-ups, applied by `git am`
    (upstream/series.py), each kind's `git format-patch` in workdir/exported-KIND."""
    folder = workdir / "am"
    identity = ("-c", "user.name=check", "-c", "user.email=c@localhost")
    run("git", "clone", "-q", *identity, str(upstream), str(folder), check=True)
    for kind in (series.SERIES, series.FOLLOWUP):
        series.apply(folder, series.BASE if kind == series.FOLLOWUP else "HEAD", kind)
        (workdir / f"exported-{kind.name}").mkdir()
        series.export(folder, kind, workdir / f"exported-{kind.name}")
    git(folder, "checkout", "-q", series.BRANCHES[series.SERIES])
    git(folder, "am", "-q", *map(str, series.patches(series.FOLLOWUP)))
    return folder


def changed(am: Path, kind: str = "AM") -> list[str]:
    return git(am, "diff", "--name-only", f"--diff-filter={kind}", series.BASE).split()


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
    CI PR's commands name, with no error that an unpatched one lacks with main's: two test
    files of one basename, in folders without __init__.py, import as one module."""
    inis = {"unpatched": git(am, "show", f"{series.BASE}:pytest.ini")}
    inis["patched"] = (am / "pytest.ini").read_text()
    found = {}
    for state, tree in (("unpatched", unpatched), ("patched", patched)):
        (config := workdir / f"{state}.ini").write_text(inis[state])
        args = ["-c", config, "--rootdir", ".", "--collect-only", "-q"]
        env = suites.environment(False, tree.parent)
        done = run(sys.executable, "-m", "pytest", *args, cwd=tree, env=env)
        print(f"\n{state}: exit {done.returncode}\n{done.stdout[-1500:]}")
        assert done.returncode in (0, 2) and " collected" in done.stdout, done.stderr
        found[state] = done.stdout
    errors = [set(re.findall(r"^ERROR (\S+)", text, re.M)) for text in found.values()]
    whole = [
        re.findall(r"(\S+\.py)(?:\s|$)", c) for c in facts().commands
    ]  # files run whole
    missing = [t for t in facts().tests if t not in found["patched"]]
    missing = [t for t in missing if not any(t.split("::")[0] in w for w in whole)]
    assert not errors[1] - errors[0] and not missing, (errors, missing)


def test_each_python_file_added_is_named_in_its_folder_s_buck(am: Path) -> None:
    """Meta imports every PR into Buck, where a file in no target breaks the build."""
    for path in (Path(p) for p in changed(am, "A") if p.endswith(".py")):
        files = [am / path.parent / name for name in BUCK_FILES]
        texts = [file.read_text() for file in files if file.exists()]
        assert any(path.name in text for text in texts), path


def test_upstream_linters_report_nothing(am: Path, workdir: Path) -> None:
    """lintrunner with upstream's config at its pins (lintrunner and its adapters as its
    lint workflow installs them, `lintrunner init` the linters), on each file that the
    series adds or changes."""
    if not options().lint:
        pytest.skip("needs --lint")
    workflow = (am / LINT_WORKFLOW).read_text()
    pins = re.findall(r"\blintrunner(?:-adapters)?==[\w.]+", workflow)
    venv = workdir / "lint"  # its bin first on PATH, as `python -m lintrunner_adapters`
    path = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    env = {**series.GIT_ENV, "PATH": path, "VIRTUAL_ENV": str(venv)}
    env["XDG_DATA_HOME"] = str(workdir)  # lintrunner's records
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [venv / "bin/python", "-m", "pip", "install", "-q", *dict.fromkeys(pins)]
    subprocess.run(pip, check=True)
    lintrunner = (venv / "bin/lintrunner", "--take", LINTERS)
    subprocess.run([*lintrunner, "init"], cwd=am, env=env, check=True)
    tee, paths = workdir / "lint.json", changed(am)
    done = run(*lintrunner, "--tee-json", tee, *paths, cwd=am, env=env)
    print(f"\nlintrunner: exit {done.returncode}\n{done.stdout}{done.stderr}")
    messages = tee.read_text().splitlines() if tee.exists() else ["no messages written"]
    assert (done.returncode, messages) == (0, [])


def test_actionlint_finds_nothing_new_in(
    workflow: str, am: Path, workdir: Path
) -> None:
    if not options().actionlint:
        pytest.skip("needs --actionlint")
    found = {}
    main = git(am, "show", f"{series.BASE}:{workflow}")
    for state, text in (("main", main), ("patched", (am / workflow).read_text())):
        (workdir / state / workflow).parent.mkdir(parents=True, exist_ok=True)
        (workdir / state / workflow).write_text(text)
        done = run(*shlex.split(options().actionlint), workflow, cwd=workdir / state)
        print(f"\n{state}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        problems = [x.split(": ", 1)[-1] for x in done.stdout.splitlines() if ": " in x]
        found[state] = done.returncode, sorted(problems)  # without places
    assert found["patched"][0] == 0 or found["patched"] == found["main"]


def main(argv: list[str]) -> int:
    """pytest on this file in a child, its output shown and, with --out, kept."""
    args = arguments(argv)
    env = {**os.environ, "UPSTREAM_CHECK": shlex.join(argv)}
    with tempfile.TemporaryDirectory(prefix="upstream-check-") as tmp:
        command = [sys.executable, "-m", "pytest", __file__, "-v", "-s", "-rA"]
        command += ["-p", "no:cacheprovider", "-p", "no:xdist", "--tb=short"]
        command += [f"--basetemp={tmp}/t", "-k", args.k]
        pipe, both = subprocess.PIPE, subprocess.STDOUT
        with subprocess.Popen(
            command, cwd=REPO, env=env, stdout=pipe, stderr=both, text=True
        ) as child:
            lines = []
            for line in child.stdout or ():
                print(line, end="", flush=True)
                lines.append(line)
        if args.out:
            args.out.write_text(report(args, argv, "".join(lines), tmp))
    return child.returncode


def report(args: argparse.Namespace, argv: list[str], output: str, tmp: str) -> str:
    """The run as markdown, without this machine's paths: its tables (the sizes, the suites),
    pytest's line for each check, and its outcome."""
    blobs = [
        f"{p.name} ({run('git', 'hash-object', p.path).stdout[:12]})"
        for p in facts().patches
    ]
    text = (
        f"# The upstream series: check\n\n"
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n"
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}, executorch {version('executorch')}\n"
        f"- Command: `python -m upstream.check {shlex.join(argv)}`\n"
        f"- Series: {', '.join(blobs)}\n\n```\n"
        + "".join(re.findall(SUMMARY, output, re.M))
        + output.rstrip().rpartition("\n")[2]
        + "\n```\n"
    )
    places = {tmp: "<tmp>", sysconfig.get_path("purelib"): "<site-packages>"}
    places |= {str(REPO): ".", args.upstream_git: "<pytorch/executorch>"}
    places |= {sysconfig.get_path("stdlib"): "<stdlib>", os.path.expanduser("~"): "~"}
    for path, name in places.items():
        text = text.replace(path, name) if path else text
    return text


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
