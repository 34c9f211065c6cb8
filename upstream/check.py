# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Applies the upstream patch series to a copy of the installed ExecuTorch and tests the result.

The series must stand on its own: applied to ExecuTorch's own source, with the runtime guard off
(EXECUTORCH_DEVICE_GUARD=0) and the patched copy first on sys.path, it must give what the guard
gives. The script copies the installed executorch package folder (it has the repository's layout)
to a temporary folder and applies the patches that it can hold with `git apply` (never fuzzy), then
runs in child processes:

- the series' own tests (exir/tests/test_host_data.py of the patched copy);
- the package's child-process cases (executorch_device_guard._selfcheck) whose expected result is
  the guard's, and the package's own copy of the test module, against the patched tree;
- the simulated-weight reproducer with the runtime guard on as well: it raises once, one message;
- with --suites, upstream's own tests of the files that the series changes, in the patched and in an
  unpatched copy: the per-test outcomes must be identical.

With --upstream-git, it also checks that the whole series applies to an upstream revision (and
reports it for the previous release), lints the files that the series adds or changes with
upstream's flake8 and ufmt settings, and with --actionlint runs actionlint on the workflow before
and after the CI patch.

    python upstream/check.py                      # apply to the installed release, run the tests
    python upstream/check.py -n 2 --suites --upstream-git DIR --actionlint 'node run.js' --out R.md

Every check prints one summary line (ok/FAIL); the exit status is 1 if any failed.
"""

import argparse
import importlib.metadata
import importlib.util
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
from types import ModuleType
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
SERIES = REPO / "upstream"
OLDER_RELEASE = "v1.4.1"  # reported, not required: the series is based on the newest release
# Upstream's tests of each file that the series changes (a suite may join targets with commas).
SUITES = (
    "exir/emit/test/test_emit.py",
    "devtools/bundled_program/test",
    "exir/_serialize/test/test_named_data_store.py",
    "backends/xnnpack/test/serialization",
    "backends/vulkan/test/test_serialization.py",
)
TIMEOUT = 1800.0  # seconds for one pytest run
ERROR_LINE = "executorch.exir.error.InternalError:"


def _load(name: str, path: Path) -> ModuleType:
    """A script of this repository as a module: it lies outside the package."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# test/upstream.py runs and compares pytest suites; generate.py holds upstream's formatter settings.
runner = _load("_upstream_tests", REPO / "test" / "upstream.py")
generate = _load("_upstream_generate", SERIES / "generate.py")
TEST_MODULE: str = generate.TEST_MODULE
WORKFLOW: str = generate.WORKFLOW


class Patch(NamedTuple):
    """A patch file of the series and the repository paths that it changes or creates."""

    path: Path
    files: Tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def in_wheel(self) -> bool:
        """The wheel ships the source tree without .github/: such patches need a checkout."""
        return not any(f.startswith(".github/") for f in self.files)


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
    }


def git_apply(patch: Path, folder: Path, *options: str) -> Optional[str]:
    """Runs `git apply` in `folder`; git's message if it fails, else None."""
    result = _run(["git", "apply", *options, str(patch)], cwd=folder, env=_git_env(folder))
    return None if result.returncode == 0 else (result.stderr + result.stdout).strip()


def offsets(patch: Path, folder: Path) -> List[str]:
    """The hunks that git would apply at other lines than the patch says (never with fuzz)."""
    result = _run(["git", "apply", "--check", "-v", str(patch)], cwd=folder, env=_git_env(folder))
    return [line.rstrip(".") for line in result.stderr.splitlines() if "offset" in line]


def _difference(hunk: List[str], lines: List[str]) -> str:
    """Where a rejected hunk's context (its ' ' and '-' lines) and the file part, at its place."""
    start = int(hunk[0].split()[1][1:].split(",")[0])
    expected = [line[1:] for line in hunk[1:] if line[:1] in (" ", "-")]
    for offset, line in enumerate(expected):
        number = start + offset
        found = lines[number - 1] if number <= len(lines) else "(end of file)"
        if found != line:
            return f"line {number}: the patch expects {line!r}, the file has {found!r}"
    return "the context is there, but git found it ambiguous or misplaced"


class Applied(NamedTuple):
    """A patch applied: git's error if it did not apply, else its hunks at other lines."""

    patch: Patch
    error: Optional[str]
    offsets: List[str]


def apply_series(patches: Sequence[Patch], folder: Path) -> List[Applied]:
    """Checks, then applies, each patch in turn; returns each with git's error, if any.

    A patch that does not apply goes in with --reject (the hunks that apply), so that the later
    patches keep their base where they can; each rejected hunk is added to the error with the
    first line where the file differs from its context.
    """
    results: List[Applied] = []
    for patch in patches:
        moved: List[str] = []
        error = git_apply(patch.path, folder, "--check")
        if error is None:
            moved = offsets(patch.path, folder)
            error = git_apply(patch.path, folder)
        else:
            before = {
                path: (folder / path).read_text().splitlines()
                for path in patch.files
                if (folder / path).is_file()
            }
            git_apply(patch.path, folder, "--reject")
            for path in patch.files:
                rejected = folder / f"{path}.rej"
                if not rejected.exists():
                    continue
                hunk: List[str] = []
                for line in rejected.read_text().splitlines()[1:] + ["@@"]:
                    if line.startswith("@@") and hunk:
                        where = _difference(hunk, before.get(path, []))
                        error += f"\nrejected: {path} {hunk[0]}\n  {where}"
                        hunk = []
                    hunk.append(line)
                rejected.unlink()
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


# Run in a child: where executorch comes from, and what the emitter's constant read looks like.
PROBE = """
import inspect, json, sys
import executorch
import executorch.exir.emit._emitter as emitter
function = emitter._Emitter._tensor_spec_to_evalue
print(json.dumps({
    "executorch": getattr(executorch, "__file__", None) or list(executorch.__path__)[0],
    "files": [getattr(m, "__file__", None) or "" for n, m in list(sys.modules.items())
              if n.startswith("executorch.")],
    "wrapped": hasattr(function, "__wrapped__"),
    "checks": "check_constant(" in inspect.getsource(inspect.unwrap(function)),
}))
"""


def probe(env: Dict[str, str], site: Path, wrapped: bool, checks: bool) -> Optional[str]:
    """Says how a child with `env` differs from: executorch from `site` (every executorch module
    it loads), the runtime guard's wrapper present or not, the patched check present or not."""
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
        calls = "calls" if seen["checks"] else "lacks"
        problems.append(f"_tensor_spec_to_evalue {calls} check_constant(")
    return "; ".join(problems) or None


def cuda_available(env: Dict[str, str]) -> Tuple[bool, str]:
    """Whether torch sees a GPU in a child, and torch's version."""
    code = "import torch; print(torch.__version__, torch.cuda.is_available())"
    result = _run([sys.executable, "-c", code], env=env)
    words = result.stdout.split()
    return words[-1:] == ["True"], (words[0] if words else "?")


def run_tests(
    report: Report, title: str, root: Path, targets: Sequence[str], env: Dict[str, str],
    workers: int, workdir: Path, allowed_skips: Sequence[str],
) -> bool:
    """Runs pytest with test/upstream.py's runner; every test must pass, or skip where allowed."""
    workdir.mkdir(parents=True)
    run = runner.run_pytest(root, targets, env, workers, TIMEOUT, workdir, "pytest")
    report.say(f"{title}: exit {run.returncode}, {len(run.outcomes)} tests, {run.seconds:.0f} s "
               f"(P/F/E/S {runner.counts(run.outcomes)})")
    report.say()
    rows = [(test, run.outcomes[test], run.messages.get(test, "")) for test in sorted(run.outcomes)]
    for line in runner.table(("test", "outcome", "message"), rows or [("(none)", "", "")]):
        report.say(line)
    report.say()
    bad = [
        test for test, outcome in run.outcomes.items()
        if outcome in ("failed", "error")
        or (outcome == "skipped" and not any(s in test for s in allowed_skips))
    ]
    if not runner.completed(run) or bad or run.returncode != 0:
        report.block(run.log_tail)
    return runner.completed(run) and run.returncode == 0 and not bad


def section_installed(report: Report, patches: Sequence[Patch], patched: Path) -> bool:
    """The patches that the wheel's tree can hold, applied to the copy: what the tests run on."""
    report.say("## The series on the installed release")
    report.say()
    results = apply_series([p for p in patches if p.in_wheel], patched)
    report_applied(report, results)
    return report.check(
        f"applies to executorch {executorch_version()} (installed): "
        f"{'yes' if all(r.error is None for r in results) else 'no'}",
        all(r.error is None for r in results),
    )


def section_upstream(
    report: Report, patches: Sequence[Patch], git_dir: str, ref: str, workdir: Path
) -> None:
    """The whole series against `ref` (required) and the previous release (reported)."""
    revisions = [(ref, True)] + ([(OLDER_RELEASE, False)] if ref != OLDER_RELEASE else [])
    for revision, required in revisions:
        commit = _run(["git", "--git-dir", git_dir, "log", "-1", "--format=%h %cs", revision])
        if commit.returncode != 0:
            report.check(f"upstream {revision}: not found in {git_dir}", False, required)
            continue
        folder = workdir / f"upstream-{revision}"
        folder.mkdir()
        # Only the files that the series touches; new files need no base, and any that already
        # exist upstream are exported so that git reports them.
        paths = sorted({f for p in patches for f in p.files})
        git = ["git", "--git-dir", git_dir]
        existing = _run([*git, "ls-tree", "-r", "--name-only", revision, "--", *paths]).stdout.split()
        if existing:  # with no path, git archive would export the whole tree
            archive = subprocess.run(
                [*git, "archive", "--format=tar", revision, "--", *existing],
                capture_output=True, check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        report.say(f"upstream `{revision}` ({commit.stdout.strip()}):")
        results = apply_series(patches, folder)
        report_applied(report, results)
        applies = all(r.error is None for r in results)
        report.check(
            f"applies to upstream {revision}: {'yes' if applies else 'no'}"
            + ("" if required else " (reported only: the series is based on the newest release)"),
            applies, required,
        )
        report.say()


def section_lint(
    report: Report, patches: Sequence[Patch], patched: Path, git_dir: str, ref: str,
    python: str, workdir: Path,
) -> None:
    """flake8 with upstream's .flake8 and ufmt with upstream's settings, on the patched files."""
    files = sorted({f for p in patches if p.in_wheel for f in p.files if f.endswith(".py")})
    workdir.mkdir()
    config = _run(["git", "--git-dir", git_dir, "show", f"{ref}:.flake8"])
    if config.returncode != 0:
        report.check(f"flake8: no .flake8 at {ref}: {config.stderr.strip()}", False)
        return
    (workdir / ".flake8").write_text(config.stdout)
    (workdir / "pyproject.toml").write_text(generate.UFMT_CONFIG)
    for path in files:
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(patched / path, workdir / path)
    report.say(f"Files: {', '.join(f'`{f}`' for f in files)}")
    report.say()
    linters = (
        (f"flake8 (upstream {ref} .flake8)", ["-m", "flake8", "--config", ".flake8"]),
        ("ufmt check (upstream's usort/black settings)", ["-m", "ufmt", "check"]),
    )
    for name, arguments in linters:
        version = _run([python, *arguments[:2], "--version"], cwd=workdir).stdout.split("\n")[0]
        result = _run([python, *arguments, *files], cwd=workdir)
        report.say(f"{name}, {version.strip()}: exit {result.returncode}")
        output = (result.stdout + result.stderr).strip()
        if output:
            report.block(output)
        report.check(f"{name.split(' ')[0]} on the {len(files)} files that the series adds or changes",
                     result.returncode == 0)


def section_actionlint(
    report: Report, patches: Sequence[Patch], git_dir: str, ref: str, command: str, workdir: Path
) -> None:
    """actionlint on the workflow at `ref` and with the CI patch; the patch adds no problem."""
    ci = [p for p in patches if WORKFLOW in p.files]
    if not ci:
        report.check(f"actionlint: no patch of the series changes {WORKFLOW}", False)
        return
    workflow = _run(["git", "--git-dir", git_dir, "show", f"{ref}:{WORKFLOW}"])
    problems: Dict[str, Tuple[int, List[str]]] = {}
    for name in ("unpatched", "patched"):
        folder = workdir / "workflow" / name
        (folder / WORKFLOW).parent.mkdir(parents=True)
        (folder / WORKFLOW).write_text(workflow.stdout)
        if name == "patched":
            for patch in ci:
                error = git_apply(patch.path, folder)
                if error is not None:
                    report.block(error)
                    report.check(f"actionlint: {patch.name} does not apply to {ref}:{WORKFLOW}", False)
                    return
        result = _run([*shlex.split(command), WORKFLOW], cwd=folder)
        output = (result.stdout + result.stderr).strip()
        report.say(f"actionlint on {name} `{WORKFLOW}` ({ref}): exit {result.returncode}"
                   f"{'' if output else ', no problems'}")
        if output:
            report.block(output)
        # Compare problems without their line and column, which the patch shifts.
        lines = [line.split(": ", 1)[-1] for line in result.stdout.splitlines()]
        problems[name] = (result.returncode, sorted(lines))
    ok = problems["patched"][0] in (0, 1) and (
        problems["patched"][0] == 0 or problems["patched"] == problems["unpatched"]
    )
    report.check(f"actionlint: the patched workflow has no problem that {ref}'s lacks", ok)


def section_tests(
    report: Report, patched: Path, workers: int, require_cuda: bool, workdir: Path
) -> None:
    """The patched tree alone (guard off) gives the guard's results; with the guard, one error."""
    site = patched.parent
    off = runner.environment(False, site)
    on = runner.environment(True, site)
    gpu, torch_version = cuda_available(off)
    report.say(f"torch {torch_version}, CUDA available: {gpu}")
    report.say()
    problem = probe(off, site, wrapped=False, checks=True)
    report.check(f"patched tree first on sys.path, runtime guard off, patched emitter: "
                 f"{problem or 'yes'}", problem is None)
    if require_cuda:
        report.check(f"a CUDA device is available (--require-cuda): {gpu}", gpu)

    report.say()
    report.say("### The series' own tests, in the patched tree")
    report.say()
    skips = () if require_cuda or gpu else ("TestEmitterOnCuda",)
    ok = run_tests(report, f"`{TEST_MODULE}` of the patched copy", patched, [TEST_MODULE], off,
                   workers, workdir / "own", skips)
    skipping = " (CUDA class skips without a GPU)" if skips else " (none skipped)"
    report.check(f"the series' tests pass{skipping}", ok)
    report.say()

    report.say("### The package's cases against the patched tree (runtime guard off)")
    report.say()
    try:
        from executorch_device_guard import _selfcheck
    except Exception as error:  # the package is being edited, or not installed here
        report.check(f"import executorch_device_guard._selfcheck: {error!r}", False)
        return
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = off["PYTHONPATH"]  # the cases' children inherit it
    try:
        cases = [c for c in _selfcheck.CASES if c.guard] + (
            [c for c in _selfcheck.CUDA_CASES if c.guard] if gpu else []
        )
        for case, failure in _selfcheck.run_cases(tuple(c._replace(guard=False) for c in cases)):
            report.check(f"package case '{case.name}': same result with the runtime guard off",
                         failure is None)
            if failure is not None:
                report.block(failure)
        report.say()
        ok = run_tests(report, "the package's `exir/tests/test_host_data.py`", REPO,
                       ["exir/tests/test_host_data.py"], off, workers, workdir / "package", skips)
        report.check("the package's test module passes against the patched tree", ok)
        report.say()

        report.say("### Composition: the patched tree with the runtime guard on")
        report.say()
        problem = probe(on, site, wrapped=True, checks=True)
        report.check(f"runtime guard on over the patched emitter: {problem or 'yes'}", problem is None)
        returncode, _, stderr = _selfcheck.run_child(_selfcheck.SIMULATED_WEIGHT, True)
        errors = [line for line in stderr.splitlines() if line.startswith(ERROR_LINE)]
        named = stderr.count("Constant '0.weight'")
        report.say(f"simulated cuda:0 weight: exit {returncode}, {len(errors)} `{ERROR_LINE}` "
                   f"line(s), `Constant '0.weight'` {named} time(s)")
        report.block("\n".join(errors) or stderr[-3000:])
        once = returncode == 1 and len(errors) == 1 and named == 1
        report.check("the two raise once, with one message", once)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def section_suites(
    report: Report, root: Path, patched: Path, workers: int, workdir: Path
) -> None:
    """Upstream's suites in the patched and an unpatched copy, both guard off, same setup."""
    report.say("### Upstream's suites: patched vs unpatched copy (runtime guard off in both)")
    report.say()
    plain = copy_package(root, workdir / "plain")
    copies = {"patched": patched, "unpatched": plain}
    for name, folder in copies.items():
        env = runner.environment(False, folder.parent)
        problem = probe(env, folder.parent, wrapped=False, checks=name == "patched")
        report.check(f"{name} copy first on sys.path, runtime guard off: {problem or 'yes'}",
                     problem is None)
    rows: List[Tuple[str, str, str, str, str]] = []
    differences: List[str] = []
    not_passed: List[str] = []
    for index, suite in enumerate(SUITES):
        runs = {}
        for name, folder in copies.items():
            run_dir = workdir / f"suite{index}-{name}"
            run_dir.mkdir()
            env = runner.environment(False, folder.parent)
            run = runner.run_pytest(folder, suite.split(","), env, workers, TIMEOUT, run_dir, name)
            runs[name] = run
            report.say(f"- {suite} [{name}]: exit {run.returncode}, {len(run.outcomes)} tests, "
                       f"{run.seconds:.0f} s")
            if not runner.completed(run):
                report.block(run.log_tail)
                report.check(f"{suite} [{name}]: pytest completed", False)
        a, b = runs["patched"], runs["unpatched"]
        differ, failing = runner.compare(a, b, ("patched", "unpatched"))
        differences += differ
        not_passed += failing
        rows.append((suite, runner.counts(a.outcomes), runner.counts(b.outcomes),
                     "yes" if a.outcomes == b.outcomes else "NO",
                     f"{a.seconds:.0f} / {b.seconds:.0f}"))
    report.say()
    headers = ("suite", "patched P/F/E/S", "unpatched P/F/E/S", "identical", "s, patched / unpatched")
    for line in runner.table(headers, rows):
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
    parser.add_argument("-n", "--workers", type=int, default=0, metavar="N",
                        help="pytest-xdist workers (0: none)")
    parser.add_argument("--suites", action="store_true",
                        help="also compare upstream's suites, patched vs unpatched (minutes)")
    parser.add_argument("--upstream-git", metavar="DIR", help="a git directory of pytorch/executorch")
    parser.add_argument("--ref", default="main", help="its revision that the series must apply to")
    parser.add_argument("--actionlint", metavar="CMD",
                        help="command that runs actionlint on a workflow file (with --upstream-git)")
    parser.add_argument("--require-cuda", action="store_true",
                        help="fail if no GPU is seen or any test skips (for GPU machines)")
    parser.add_argument("--lint-python", default=sys.executable, metavar="PATH",
                        help="the interpreter that has flake8 and ufmt (default: this one)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="also write the report to this markdown file")
    args = parser.parse_args(argv)
    if args.actionlint and not args.upstream_git:
        parser.error("--actionlint reads the workflow from --upstream-git")

    started = time.monotonic()
    report = Report()
    root = runner.executorch_root()
    patches = read_series()
    report.say("# The upstream patch series: check")
    report.say()
    report.say(f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    report.say(f"- Machine: {os.cpu_count()} cores, {platform.machine()}, "
               f"Python {platform.python_version()}")
    report.say(f"- executorch {executorch_version()} installed at `{root}`")
    command = shlex.join(["python", "upstream/check.py", *(sys.argv[1:] if argv is None else argv)])
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
            section_upstream(report, patches, args.upstream_git, args.ref, workdir)
            report.say("## Lint")
            report.say()
            section_lint(report, patches, patched, args.upstream_git, args.ref, args.lint_python,
                         workdir / "lint")
            report.say()
            if args.actionlint:
                section_actionlint(report, patches, args.upstream_git, args.ref, args.actionlint,
                                   workdir)
                report.say()
        report.say("## Tests in the patched tree")
        report.say()
        if not applied:
            report.check("tests: not run, the series does not apply to the installed release", False)
        else:
            step = time.monotonic()
            section_tests(report, patched, args.workers, args.require_cuda, workdir / "runs")
            report.say()
            report.say(f"Tests: {time.monotonic() - step:.0f} s.")
            report.say()
            if args.suites:
                step = time.monotonic()
                section_suites(report, root, patched, args.workers, workdir)
                report.say()
                report.say(f"Suites: {time.monotonic() - step:.0f} s.")
                report.say()

    report.say("## Summary")
    report.say()
    report.say("```")
    for result in report.results:
        report.say(f"{'ok  ' if result.ok else 'FAIL' if result.required else 'no  '}  {result.name}")
    report.say("```")
    report.say()
    report.say(f"total time: {time.monotonic() - started:.0f} s; "
               f"{'FAILED' if report.failed() else 'all checks passed'}")
    if args.out:
        args.out.write_text("\n".join(report.lines) + "\n")
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
