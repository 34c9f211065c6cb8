# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Checks the upstream series, read from its patch files, as ExecuTorch's maintainers would.

    python -m upstream.check --counts   # the sizes that the review limits
    python -m upstream.check            # on the installed release: apply, run the tests
    python -m upstream.check --mutations --suites --mypy --upstream-git DIR \\
        --lint-python VENV/bin/python --actionlint actionlint --out upstream/RESULTS.md

Each check is a test in this file, run by pytest (-k picks some). On copies of the installed
release, which has the repository's layout without Buck files, .github/ or pytest.ini: each
patch alone passes its tests, the whole series passes them with the guard off, the CI
patch's commands pass as written, and the package agrees with it; --against-package, the
series' test files alone pass with the guard on; --mutations, each non-test hunk reverted
fails its own patch's tests only; --suites, upstream's suites give the same outcomes with
and without the series. --upstream-git: each patch applies alone to --ref, `git am` and
`format-patch` give the files back, pytest collects the tests as upstream's CI does, and the
Buck, lint (made by --lint-setup VENV), actionlint and mypy checks.
"""

import argparse
import email
import fnmatch
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import iniconfig
import pytest
from unidiff import PatchSet

from upstream import buck, series, suites

REPO = Path(__file__).resolve().parents[1]
TEST_FILE, TEST_CODE = "*/test/*test_*.py", "*/test/*"
# What the review asks (issue 27): non-test Python lines added per patch and in all (not
# blank or comment-only); words of a PR text, subject to `---`; characters of a subject.
MAX_LINES = {"0001-emitter.patch": 15, "followup/0001-device-lowering.patch": 30}
MAX_SERIES_LINES, MAX_WORDS, MAX_SUBJECT = 85, 200, 72
PRELOAD = (  # imported once from a patched copy, before the runs on it are forked
    "executorch.exir",
    "executorch.devtools.bundled_program.core",
    "executorch.backends.xnnpack.partition.xnnpack_partitioner",
    "executorch.backends.vulkan.serialization.vulkan_graph_builder",
)
LINTERS = "FLAKE8,UFMT,NEWLINE,ETCAPITAL,LICENSELINT,TORCH_AO_IMPORT"
LINT_PINS, LINT_WORKFLOW = "requirements-lintrunner.txt", ".github/workflows/lint.yml"
LINT_FILES = (".lintrunner.toml", ".flake8", "pyproject.toml", LINT_PINS, LINT_WORKFLOW)


class Options(NamedTuple):  # main()'s, handed to the tests in UPSTREAM_CHECK
    workers: int = 2
    mutations: bool = False
    suites: bool = False
    against_package: bool = False
    upstream_git: str = ""
    ref: str = "refs/heads/main"
    lint_python: str = ""
    actionlint: str = ""
    mypy: bool = False
    require_cuda: bool = False


OPTIONS = Options(**json.loads(os.environ.get("UPSTREAM_CHECK", "{}")))


class Patch(NamedTuple):
    path: Path
    diff: PatchSet

    @property
    def name(self) -> str:  # under upstream/: the follow-ups' numbers start again
        return self.path.relative_to(series.SERIES).as_posix()

    @property
    def ci_only(self) -> bool:  # workflows and nothing else: the merge set's CI wiring
        return all(file.path.startswith(".github/") for file in self.diff)

    @property
    def tests(self) -> tuple[str, ...]:
        """pytest ids: the test files that it adds; `path::Class::test` for each test
        method that it adds to a file (`path::test` for a function)."""
        ids = []
        for file in (f for f in self.diff if fnmatch.fnmatch(f.path, TEST_FILE)):
            if file.is_added_file:
                ids.append(file.path)
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
        return [
            c.strip() for c in lines if re.match(r"\s*python -m (pytest|unittest) ", c)
        ]


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


PATCHES = [Patch(p, PatchSet.from_filename(str(p))) for p in series.every_patch()]
TESTS = sum((patch.tests for patch in PATCHES), ())
HUNKS = [(i, f, h) for i, patch in enumerate(PATCHES) for f, h in code_hunks(patch)]
COMMANDS = [c for patch in PATCHES if patch.ci_only for c in patch.commands]
WORKFLOWS = sorted({f.path for p in PATCHES for f in p.diff if p.ci_only})


def run(*command: str, **kwargs: Any) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def needs_the_package() -> None:  # a GPU runner may check the series without it
    if importlib.util.find_spec("executorch_device_guard") is None:
        pytest.skip("executorch-device-guard is not installed")


def probe() -> dict[str, bool]:
    """Whether the guard wraps the emitter's read of constants, and whether that read has
    the series' check (a forked child also checks where ExecuTorch came from)."""
    import inspect

    from executorch.exir.emit._emitter import _Emitter

    read = _Emitter._tensor_spec_to_evalue
    has = "move_to_device_pass" in inspect.getsource(read)
    return {"wrapped": hasattr(read, "__wrapped__"), "checks": has}


def probed(done: suites.Run) -> dict[str, bool]:
    assert done.returncode == 0, done.log[-3000:]
    return json.loads(done.log.splitlines()[-1])


def assert_passed(done: suites.Run, gpu: bool) -> None:
    """Every test passed; only CUDA tests skip, and only without a GPU."""
    assert gpu or not OPTIONS.require_cuda, "--require-cuda, and no CUDA device"
    print(f"\nP/F/E/S {done.counts} in {done.seconds:.1f} s")
    for test, outcome in sorted(done.outcomes.items()):
        print(f"  {outcome:7} {test} {done.messages.get(test, '')}")
    skip = [t for t, o in done.outcomes.items() if o == "skipped"]
    bad = [t for t, o in done.outcomes.items() if o in ("failed", "error")]
    bad += [t for t in skip if gpu or "cuda" not in t.lower()]
    assert done.completed and not bad, f"not passing: {bad}\n{done.log[-5000:]}"


def pytest_run(tree: Path, tests: Any, name: str, guard: bool = False) -> suites.Forked:
    """A forked pytest run of `tests` in `tree`, a copy of the executorch folder."""
    args = suites.pytest_args(tree, tests, tree.parents[1] / f"{name}.xml")
    return suites.Forked(tree.parent, ["pytest", *args], name, guard)


def forked(
    runs: dict[str, suites.Forked], workdir: Path, preload: Any = PRELOAD
) -> Any:
    timeout = suites.TIMEOUT * len(runs)
    done = suites.run_forked(
        list(runs.values()), OPTIONS.workers, timeout, workdir, preload
    )
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


def copy(root: Path, site: Path, paths: Any) -> Path:
    """A copy of the installed release in `site`, with these patches applied."""
    tree = series.copy_package(root, site)
    error = series.git_apply(tree, paths, *series.wheel_options())
    if error:
        pytest.fail(error)
    return tree


@pytest.fixture(scope="session")
def patched(root: Path, workdir: Path) -> Path:
    return copy(root, workdir / "site", [p.path for p in PATCHES])


def test_sizes() -> None:
    rows = [
        (p.name, *p.code_lines, len(p.text.split()), len(series.subject(p.path)))
        for p in PATCHES
    ]
    print(
        "\n" + suites.table(("patch", "lines", "re-indented", "words", "subject"), rows)
    )
    total = sum(row[1] for row in rows)
    found = [
        f"{r[0]}: {r[1]} lines"
        for r in rows
        if r[1] > MAX_LINES.get(r[0], MAX_SERIES_LINES)
    ]
    found += [f"the series: {total} lines"] * (total > MAX_SERIES_LINES)
    found += [f"{r[0]}: {r[3]} words" for r in rows if r[3] > MAX_WORDS]
    found += [f"{r[0]}: {r[4]}-character subject" for r in rows if r[4] > MAX_SUBJECT]
    assert not found


def test_the_series_applies_to_the_installed_release(patched: Path) -> None:
    assert (patched / "exir" / "emit" / "_emitter.py").is_file()


@pytest.fixture(scope="session")
def alone(root: Path, workdir: Path) -> dict[str, suites.Run]:
    """Each patch with tests applied alone to a copy of the installed release, its own tests
    run there, guard off, --workers copies at a time."""
    with_tests = [p for p in PATCHES if p.tests]
    runs = {}
    for i, patch in enumerate(with_tests):
        tree = copy(root, workdir / f"alone-{i}", [patch.path])
        runs[patch.name] = pytest_run(tree, patch.tests, f"alone-{i}")
    return forked(runs, workdir, ())


@pytest.mark.parametrize("patch", PATCHES, ids=[p.name for p in PATCHES])
def test_each_patch_alone_passes_its_own_tests(
    patch: Patch, gpu: bool, request: Any
) -> None:
    if patch.ci_only:
        pytest.skip("workflows only: test_ci_commands_pass_as_written runs them")
    assert patch.tests, "it adds no tests of its own"
    assert_passed(request.getfixturevalue("alone")[patch.name], gpu)


@pytest.fixture(scope="session")
def on_patched(patched: Path, workdir: Path) -> dict[str, suites.Run]:
    """Forked from one interpreter that has imported the patched copy: the probe, the
    series' tests and each CI command as written (guard off), the meta case off and on."""
    site, meta = patched.parent, ["executorch_device_guard._selfcheck", "meta"]
    runs = {
        "probe": suites.Forked(site, ["upstream.check", "--probe"], "probe"),
        "series": pytest_run(patched, TESTS, "series"),
        "meta, guard off": suites.Forked(site, meta, "meta-off"),
        "meta, guard on": suites.Forked(site, meta, "meta-on", True),
    }
    for i, command in enumerate(COMMANDS):
        runs[command] = suites.Forked(site, shlex.split(command)[2:], f"ci-{i}")
    return forked(runs, workdir)


def test_the_series_tests_pass_in_the_patched_tree(on_patched: Any, gpu: bool) -> None:
    assert probed(on_patched["probe"]) == {"wrapped": False, "checks": True}
    assert_passed(on_patched["series"], gpu)


@pytest.mark.parametrize("command", COMMANDS, ids=[c[:60] for c in COMMANDS])
def test_ci_commands_pass_as_written(command: str, on_patched: Any, gpu: bool) -> None:
    """In the patched copy's root: each test they name exists; with a GPU, none skips."""
    done = on_patched[command]
    print(
        f"\n{command}: exit {done.returncode} in {done.seconds:.1f} s\n{done.log[-1500:]}"
    )
    assert done.returncode == 0
    assert not (gpu and re.search(r"\d+ skipped|skipped=\d+", done.log))


def test_the_package_agrees_with_the_patched_tree(on_patched: Any) -> None:
    """Its meta case gives the series' message with the guard off; raises once with it."""
    needs_the_package()
    text = "InternalError: Failed with error: Constant 'p_0_weight' (shape [3, 4], dtype torch.float32) is a meta"
    for done in (on_patched["meta, guard off"], on_patched["meta, guard on"]):
        found = (done.returncode, done.log.count("InternalError: "), text in done.log)
        assert found == (1, 1, True), done.log[-3000:]


def test_against_package_the_series_tests_pass(
    root: Path, workdir: Path, gpu: bool
) -> None:
    """The series' test files alone, applied to a copy of the installed release, guard on."""
    needs_the_package()
    tree = series.copy_package(root, workdir / "tests-only")
    error = series.git_apply(tree, [p.path for p in PATCHES], f"--include={TEST_FILE}")
    if error:
        pytest.skip(f"the series' test files do not apply to this release's: {error}")
    runs = {
        "probe": suites.Forked(
            tree.parent, ["upstream.check", "--probe"], "probe-on", True
        ),
        "series": pytest_run(tree, TESTS, "series-on", guard=True),
    }
    done = forked(runs, workdir)
    assert probed(done["probe"]) == {"wrapped": True, "checks": False}
    assert_passed(done["series"], gpu)


@pytest.fixture(scope="session")
def mutants(patched: Path, workdir: Path) -> list[tuple[str, suites.Run | None]]:
    """Each of HUNKS reverted in its own copy of the patched tree, and the series' tests run
    there under one xdist worker, so that a crash is a failed test."""

    def mutate(number: int) -> tuple[str, suites.Run | None]:
        _, file, hunk = HUNKS[number]
        site = workdir / f"mutant-{number}"
        tree = series.copy_package(patched, site)
        diff = f"--- a/{file.path}\n+++ b/{file.path}\n{hunk}"
        reverted = run("git", "apply", "-R", "-", input=diff, cwd=tree)
        env = suites.environment(False, site)
        if reverted.returncode:
            return reverted.stderr, None
        done = suites.run_pytest(tree, TESTS, env, 1, workdir, site.name)
        shutil.rmtree(site)
        return "", done

    with ThreadPoolExecutor(OPTIONS.workers) as pool:
        return list(pool.map(mutate, range(len(HUNKS))))


@pytest.mark.skipif(not OPTIONS.mutations, reason="needs --mutations")
@pytest.mark.parametrize(
    "number",
    range(len(HUNKS)),
    ids=[f"{PATCHES[i].name[:-6]}:{f.path}:{h.target_start}" for i, f, h in HUNKS],
)
def test_each_hunk_is_needed_by_its_patch_tests(
    number: int, mutants: Any, gpu: bool
) -> None:
    index, _, hunk = HUNKS[number]
    error, done = mutants[number]
    assert done is not None, f"does not revert: {error}"
    own = tuple(junit_prefix(t) for t in PATCHES[index].tests)
    later = tuple(junit_prefix(t) for p in PATCHES[index + 1 :] for t in p.tests)
    failing = {t: o for t, o in done.outcomes.items() if o not in ("passed", "skipped")}
    mine = sorted(t for t in failing if t.startswith(own))
    others = sorted(t for t in failing if t not in mine and not t.startswith(later))
    passed = list(done.outcomes.values()).count("passed")
    print(
        f"\nreverted:\n{hunk}its tests that fail: {[(t, done.messages[t]) for t in mine]}"
    )
    skipped = [
        t for t, o in done.outcomes.items() if o == "skipped" and t.startswith(own)
    ]
    if failing and not passed:  # a module that everything imports: nothing imports
        print("every test file errors: executorch no longer imports")
    elif not mine and skipped and not gpu:
        pytest.skip(
            f"only its CUDA tests, skipped without a GPU, can catch it: {skipped}"
        )
    else:
        assert done.completed and mine and not others, f"also failing: {others}"


@pytest.fixture(scope="session")
def compared(root: Path, patched: Path, workdir: Path) -> suites.Comparison:
    """Upstream's suites in the patched and an unpatched copy, guard off, without the
    series' tests; each copy's probe first."""
    setups = {
        "patched": patched,
        "unpatched": series.copy_package(root, workdir / "plain"),
    }
    for name, tree in setups.items():
        env = suites.environment(False, tree.parent)
        done = run(sys.executable, "-m", "upstream.check", "--probe", env=env, cwd=REPO)
        assert json.loads(done.stdout) == {
            "wrapped": False,
            "checks": name == "patched",
        }
    envs = {
        name: (tree, suites.environment(False, tree.parent))
        for name, tree in setups.items()
    }
    skip = tuple(junit_prefix(t) for t in TESTS)
    found = suites.compare(envs, suites.DEFAULT_SUITES, OPTIONS.workers, workdir, skip)
    print(
        "\n" + suites.report(found, ("suite", "patched", "unpatched", "identical", "s"))
    )
    return found


@pytest.mark.skipif(not OPTIONS.suites, reason="needs --suites")
@pytest.mark.parametrize("suite", suites.DEFAULT_SUITES)
def test_upstream_suites_give_the_same_outcomes_patched(
    suite: str, compared: Any
) -> None:
    assert not [line for line in compared.broken if line.startswith(suite)]
    row = compared.rows[suites.DEFAULT_SUITES.index(suite)]
    assert row[3] == "yes", [line for line in compared.differences if row[0] in line]


def test_mypy_strict_on_the_files_that_the_series_adds(
    patched: Path, workdir: Path
) -> None:
    added = {f.path for p in PATCHES for f in p.diff if f.is_added_file and _is_code(f)}
    if not OPTIONS.mypy or not added:
        pytest.skip(
            "needs --mypy" if not OPTIONS.mypy else "the series adds no Python file"
        )
    files = sorted(f"executorch/{path}" for path in added)
    strict = ("--strict", "--explicit-package-bases", "--ignore-missing-imports")
    done = run(sys.executable, "-m", "mypy", *strict, *files, cwd=patched.parent)
    ours = [line for line in done.stdout.splitlines() if line.split(":", 1)[0] in files]
    assert not ours and "error:" not in done.stderr, done.stdout + done.stderr


def git(repo: Path, *args: str, **kwargs: Any) -> "subprocess.CompletedProcess[str]":
    """git in `repo`, without the user's and the system's config: a check identity."""
    identity = ("-c", "user.name=check", "-c", "user.email=c@localhost")
    return run(
        "git", *identity, *args, cwd=repo, env=series.GIT_ENV, check=True, **kwargs
    )


@pytest.fixture(scope="session")
def upstream(workdir: Path) -> Path:
    """--ref's versions of the files that the series touches, and of the lint config, in a
    new repository: the fetched snapshot lacks a few blobs, so git cannot write --ref's tree."""
    if not OPTIONS.upstream_git:
        pytest.skip("needs --upstream-git")
    source = ("git", "--git-dir", OPTIONS.upstream_git)
    paths = sorted(
        {f.path for p in PATCHES for f in p.diff} | {"pytest.ini", *LINT_FILES}
    )
    existing = run(
        *source, "ls-tree", "-r", "--name-only", OPTIONS.ref, "--", *paths
    ).stdout
    archive = [*source, "archive", OPTIONS.ref, "--", *existing.split()]
    tar = subprocess.run(archive, capture_output=True, check=True)
    folder = workdir / "upstream"
    folder.mkdir()
    subprocess.run(["tar", "-x", "-C", str(folder)], input=tar.stdout, check=True)
    for command in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-q", "-m", "base"],
    ):
        git(folder, *command)
    return folder


@pytest.fixture(scope="session")
def am(upstream: Path, workdir: Path) -> Path:
    """A clone of `upstream` with the merge set, then the follow-ups, applied by `git am`
    (upstream/series.py), each kind's `git format-patch` in workdir/exported-KIND."""
    folder = workdir / "am"
    run("git", "clone", "-q", str(upstream), str(folder), check=True)
    git(folder, "config", "user.name", "check")
    git(folder, "config", "user.email", "c@localhost")
    for kind in (series.SERIES, series.FOLLOWUP):
        series.apply(folder, series.BASE if kind == series.FOLLOWUP else "HEAD", kind)
        (workdir / f"exported-{kind.name}").mkdir()
        series.export(folder, kind, workdir / f"exported-{kind.name}")
    git(folder, "checkout", "-q", series.BRANCHES[series.SERIES])
    git(folder, "am", "-q", *map(str, series.patches(series.FOLLOWUP)))
    return folder


@pytest.mark.parametrize("patch", PATCHES, ids=[p.name for p in PATCHES])
def test_each_patch_applies_alone_to_main(patch: Patch, upstream: Path) -> None:
    assert series.git_apply(upstream, [patch.path], "--check") is None


@pytest.mark.parametrize(
    "kind", [series.SERIES, series.FOLLOWUP], ids=["merge set", "follow-ups"]
)
def test_git_am_and_format_patch_give_back_the_files(
    kind: Path, am: Path, workdir: Path
) -> None:
    exported = series.patches(workdir / f"exported-{kind.name}")
    assert [p.read_bytes() for p in exported] == [
        p.read_bytes() for p in series.patches(kind)
    ]


def changed(am: Path, kind: str = "AM") -> list[str]:
    return git(
        am, "diff", "--name-only", f"--diff-filter={kind}", series.BASE
    ).stdout.split()


def test_pytest_collects_the_series_tests_as_upstream_ci(
    am: Path, patched: Path, root: Path, workdir: Path
) -> None:
    """As upstream's unittest jobs run it (`pytest -n auto` over pytest.ini's testpaths), of
    the series' test files and every file of their basenames there: with the series'
    pytest.ini in the patched copy, no error that main's unpatched lacks (two files of one
    basename, in folders without __init__.py, import as one module)."""
    source = ("git", "--git-dir", OPTIONS.upstream_git)
    tree = set(run(*source, "ls-tree", "-r", "--name-only", OPTIONS.ref).stdout.split())
    ours = {
        f.path for p in PATCHES for f in p.diff if fnmatch.fnmatch(f.path, TEST_FILE)
    }
    names = {Path(path).name for path in ours}
    candidates = ours | {path for path in tree if Path(path).name in names}
    ini = {
        "unpatched": git(am, "show", f"{series.BASE}:pytest.ini").stdout,
        "patched": (am / "pytest.ini").read_text(),
    }
    copies = {
        "unpatched": series.copy_package(root, workdir / "collect"),
        "patched": patched,
    }
    errors = {}
    for state, folder in copies.items():
        (workdir / f"{state}.ini").write_text(ini[state])
        config = iniconfig.IniConfig(str(workdir / f"{state}.ini"))["pytest"]
        walked = (
            shlex.split(config.get("testpaths", "")),
            shlex.split(config.get("addopts", "")),
        )
        paths = candidates if state == "patched" else candidates & tree
        found = sorted(
            p for p in paths if _collected(p, *walked) and (folder / p).exists()
        )
        args = (
            "-c",
            str(workdir / f"{state}.ini"),
            "--rootdir",
            ".",
            "--collect-only",
            "-q",
        )
        env = suites.environment(False, folder.parent)
        done = run(sys.executable, "-m", "pytest", *args, *found, cwd=folder, env=env)
        errors[state] = set(re.findall(r"^ERROR (\S+)", done.stdout, re.MULTILINE))
        print(f"\n{state}: exit {done.returncode}, {found}\n{done.stdout[-2000:]}")
    assert not errors["patched"] - errors["unpatched"]


def _collected(path: str, testpaths: list[str], addopts: list[str]) -> bool:
    """Whether pytest, walking its testpaths, reaches `path`: under one of them, and no
    --ignore or --ignore-glob names it or a folder that it enters below that one."""
    entry = next(
        (
            e.rstrip("/")
            for e in testpaths
            if f"{path}/".startswith(f"{e.rstrip('/')}/")
        ),
        None,
    )
    walked = [
        str(p)
        for p in (Path(path), *Path(path).parents)
        if len(str(p)) > len(entry or path)
    ]
    ignored = [
        o.split("=", 1)[1].rstrip("/") for o in addopts if o.startswith("--ignore=")
    ]
    globs = [o.split("=", 1)[1] for o in addopts if o.startswith("--ignore-glob=")]
    return (
        entry is not None
        and not set(ignored) & set(walked)
        and not any(fnmatch.filter(walked, g) for g in globs)
    )


def test_buck_targets_own_the_files_and_their_imports(am: Path, workdir: Path) -> None:
    added, modified = changed(am, "A"), changed(am, "M")
    for path in added + modified:
        (workdir / "buck" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(am / path, workdir / "buck" / path)
    patched = buck.Tree.from_git(OPTIONS.upstream_git, OPTIONS.ref, workdir / "buck")
    found = buck.check(
        patched, buck.Tree.from_git(OPTIONS.upstream_git, OPTIONS.ref), added, modified
    )
    print("\n" + "\n".join(found.info))
    assert not found.problems


def lint_pins(repo: Path) -> list[str]:
    """lintrunner and its adapters as upstream's lint workflow installs them, then linters."""
    pins = re.findall(
        r"\blintrunner(?:-adapters)?==[\w.]+", (repo / LINT_WORKFLOW).read_text()
    )
    linters = re.findall(r"^([\w.-]+==[^\s#;]+)", (repo / LINT_PINS).read_text(), re.M)
    return [*dict.fromkeys(pins), *linters]


def lint_env(python: str, data: Path) -> dict[str, str]:
    """The venv's bin first on PATH (as `python -m lintrunner_adapters`), records in `data`."""
    # Not resolved: the venv's python links to the base one.
    folder = os.path.dirname(python)
    path = f"{folder}{os.pathsep}{os.environ['PATH']}"
    return {
        **series.GIT_ENV,
        "PATH": path,
        "VIRTUAL_ENV": os.path.dirname(folder),
        "XDG_DATA_HOME": str(data),
    }


def test_upstream_linters_report_nothing(am: Path, workdir: Path) -> None:
    """lintrunner with upstream's config at its pins, on each file that the series adds or
    changes; ETCAPITAL's and TORCH_AO_IMPORT's Perl patterns, which upstream's adapter runs
    with `grep -E` (they never match there), also as meant."""
    if not OPTIONS.lint_python:
        pytest.skip("needs --lint-python")
    import tomllib  # Python 3.11; only the maintainers' full check gets here

    code = "import importlib.metadata as m\nfor d in m.distributions(): print(d.name, d.version)"
    have = {
        _canonical("==".join(x.split()))
        for x in run(OPTIONS.lint_python, "-c", code).stdout.splitlines()
    }
    assert not [p for p in lint_pins(am) if _canonical(p) not in have], (
        f"{OPTIONS.lint_python} lacks a pin"
    )
    tee, paths = workdir / "lint.json", changed(am)
    command = (
        os.path.join(os.path.dirname(OPTIONS.lint_python), "lintrunner"),
        "--take",
        LINTERS,
    )
    done = run(
        *command,
        "--tee-json",
        str(tee),
        *paths,
        cwd=am,
        env=lint_env(OPTIONS.lint_python, workdir),
    )
    print(
        f"\n{shlex.join(command)}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    )
    meant = []
    for linter in tomllib.loads((am / ".lintrunner.toml").read_text())["linter"]:
        pattern = [a[10:] for a in linter["command"] if a.startswith("--pattern=")]
        if linter["code"] in LINTERS and "grep_linter" in linter["command"] and pattern:
            # TOML doubles backslashes.
            found = re.compile(pattern[0].replace("\\\\", "\\"))
            for path in paths:
                lines = (am / path).read_text().splitlines()
                meant += [
                    f"{linter['code']} {path}:{n}"
                    for n, x in enumerate(lines, 1)
                    if found.search(x)
                ]
    messages = tee.read_text().splitlines() if tee.exists() else ["no messages written"]
    assert (done.returncode, messages, meant) == (0, [], [])


def _canonical(pin: str) -> str:
    name, _, version = pin.partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_actionlint_finds_nothing_new_in(
    workflow: str, am: Path, workdir: Path
) -> None:
    if not OPTIONS.actionlint:
        pytest.skip("needs --actionlint")
    found = {}
    for state in ("main", "patched"):
        text = (
            (am / workflow).read_text()
            if state == "patched"
            else git(am, "show", f"{series.BASE}:{workflow}").stdout
        )
        (workdir / state / workflow).parent.mkdir(parents=True, exist_ok=True)
        (workdir / state / workflow).write_text(text)
        done = run(*shlex.split(OPTIONS.actionlint), workflow, cwd=workdir / state)
        print(f"\n{state}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        problems = [
            x.split(": ", 1)[-1] for x in done.stdout.splitlines() if ": " in x
        ]  # without places
        found[state] = done.returncode, sorted(problems)
    assert found["patched"][0] == 0 or found["patched"] == found["main"]


def lint_setup(venv: Path, options: Options) -> None:
    """VENV with upstream's lintrunner at its pins, and `lintrunner init` in a scratch
    repository with its config, which pip-installs the linters: later runs need no network."""
    with tempfile.TemporaryDirectory() as scratch:
        for path in LINT_FILES:
            show = ("show", f"{options.ref}:{path}")
            text = run("git", "--git-dir", options.upstream_git, *show).stdout
            (Path(scratch) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(scratch) / path).write_text(text)
        for command in (
            ["init", "-q", "-b", "main"],
            ["add", "-A"],
            ["commit", "-q", "-m", "lint"],
        ):
            git(Path(scratch), *command)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [
                str(venv / "bin/python"),
                "-m",
                "pip",
                "install",
                *lint_pins(Path(scratch))[:2],
            ],
            check=True,
        )
        env = lint_env(str(venv / "bin/python"), Path(scratch))
        subprocess.run(
            [str(venv / "bin/lintrunner"), "init", "--take", LINTERS],
            cwd=scratch,
            env=env,
            check=True,
        )


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in Options._field_defaults.items():
        kind = (
            {"action": "store_true"}
            if default is False
            else {"type": type(default), "default": default}
        )
        parser.add_argument("--" + name.replace("_", "-"), **kind)
    for flag in ("--counts", "--probe"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--lint-setup", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("-k", default="test")
    args = parser.parse_args(argv)
    options = Options(*(vars(args)[name] for name in Options._fields))
    os.environ["UPSTREAM_CHECK"] = json.dumps(options._asdict())
    if args.probe:
        print(json.dumps(probe()))
        return 0
    if args.lint_setup:
        lint_setup(args.lint_setup, options)
        return 0
    picked = (
        "test_sizes"
        if args.counts
        else "against_package"
        if args.against_package
        else "test"
    )
    with tempfile.TemporaryDirectory(prefix="upstream-check-") as tmp:
        command = [
            sys.executable,
            "-m",
            "pytest",
            __file__,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
        ]
        command += [
            "-v",
            "-s",
            "-rfEs",
            "--tb=short",
            f"--basetemp={tmp}/t",
            "-k",
            f"({picked}) and ({args.k})",
        ]
        with subprocess.Popen(
            command,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as done:
            lines = []
            for line in done.stdout or ():
                print(line, end="", flush=True)
                lines.append(line)
        if args.out:
            args.out.write_text(report("".join(lines), tmp, args))
    return done.returncode


def report(output: str, tmp: str, args: argparse.Namespace) -> str:
    """The run as markdown, without this machine's paths."""
    hashes = ", ".join(
        f"{p.name} ({run('git', 'hash-object', str(p.path)).stdout[:12]})"
        for p in PATCHES
    )
    text = (
        f"# The upstream series: check\n\n- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n"
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"executorch {importlib.metadata.version('executorch')}\n"
        f"- Command: `{shlex.join(['python', '-m', 'upstream.check', *sys.argv[1:]])}`\n"
        f"- Series: {hashes}\n\n```\n{output}```\n"
    )
    places = {
        tmp: "<tmp>",
        str(suites.executorch_root()): "<site-packages>/executorch",
        str(REPO): ".",
    }
    places |= {
        args.upstream_git: "<pytorch/executorch>",
        os.path.dirname(os.path.dirname(args.lint_python)): "<lint venv>",
    }
    for path, name in places.items():
        text = text.replace(path, name) if len(path) > 1 else text
    return text


if __name__ == "__main__":
    sys.exit(main())
