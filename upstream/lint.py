# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Runs upstream's lintrunner linters on the files that the patch series adds or changes.

Upstream's CI lints changed files with lintrunner, its .lintrunner.toml and the tools pinned in
requirements-lintrunner.txt (lintrunner itself is pinned in .github/workflows/lint.yml). This does the same in a
scratch git repository holding upstream's config at a revision and the given files at their repository paths, so
that the config's include and exclude patterns apply as upstream's do.

    python -m upstream.lint --setup VENV --git-dir DIR --ref main    # once, needs PyPI
    python -m upstream.lint --git-dir DIR --ref main --python VENV/bin/python exir/x.py=FILE ...
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

# NEWLINE reports extra blank lines at the end and CRLF, not a missing final newline. ETCAPITAL's and
# TORCH_AO_IMPORT's patterns use Perl's `(?!` and `(?:`, but lintrunner-adapters 0.14.1 runs `grep -E`, which reads
# them as `(!` and `(:`: they miss real code, here as in upstream's CI, so run_lintrunner also applies them as meant.
LINTERS = ("FLAKE8", "UFMT", "NEWLINE", "ETCAPITAL", "LICENSELINT", "TORCH_AO_IMPORT")
# What the linters read at the root: lintrunner's config, flake8's, usort's and black's settings, their init's pins.
CONFIG = (".lintrunner.toml", ".flake8", "pyproject.toml", "requirements-lintrunner.txt")
WORKFLOW = ".github/workflows/lint.yml"  # where upstream pins lintrunner and lintrunner-adapters
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}  # no user or system git config
TAKE = ("--configs", ".lintrunner.toml", "--take", ",".join(LINTERS))


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True).stdout


def _env(python: str, data: Path) -> Dict[str, str]:
    """The venv's bin first on PATH: upstream's linters run as `python -m lintrunner_adapters`.
    lintrunner 0.12.7 ignores --data-path: XDG_DATA_HOME keeps its run records out of ~/.local."""
    bin_dir = Path(python).parent  # not resolved: the venv's python is a link to the base one
    return {**GIT_ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "VIRTUAL_ENV": str(bin_dir.parent), "XDG_DATA_HOME": str(data)}


def tool_pins(git_dir: str, ref: str) -> List[str]:
    """lintrunner and lintrunner-adapters as upstream's lint workflow installs them."""
    text = _git(git_dir, "show", f"{ref}:{WORKFLOW}")
    pins = list(dict.fromkeys(re.findall(r"\blintrunner(?:-adapters)?==[\w.]+", text)))
    if len(pins) != 2:
        raise ValueError(f"{WORKFLOW} at {ref} pins {pins}, not lintrunner and lintrunner-adapters")
    return pins


def _canonical(pin: str) -> str:
    name, _, version = pin.partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


def make_repo(git_dir: str, ref: str, files: Mapping[str, Path], repo: Path) -> None:
    """A new git repository at `repo` (lintrunner lints inside one, with the settings at its root): upstream's CONFIG
    at `ref` committed on main, whose merge base lintrunner init asks for, then `files` at their paths, added."""
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=GIT_ENV)
    for path in CONFIG:
        (repo / path).write_text(_git(git_dir, "show", f"{ref}:{path}"))
    identity = ["-c", "user.name=lint", "-c", "user.email=lint@localhost"]
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=GIT_ENV)
    subprocess.run(["git", *identity, "commit", "-q", "-m", "config"], cwd=repo, check=True, env=GIT_ENV)
    for path, source in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, repo / path)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=GIT_ENV)


def run_lintrunner(git_dir: str, ref: str, files: Mapping[str, Path], workdir: Path, python: str) -> Tuple[bool, str]:
    """Lints `files` (repository path -> file on disk) as upstream's CI would at `ref`, in `workdir` (new or empty):
    whether lintrunner exited 0, no lint message, every tool at upstream's pin; a report of revision, tools, output."""
    repo, tee = workdir / "repo", workdir / "lint.json"
    make_repo(git_dir, ref, files, repo)
    commit = _git(git_dir, "log", "-1", "--format=%h %cs", ref).strip()
    code = "import importlib.metadata as m\nfor d in m.distributions(): print(f\"{d.metadata['Name']}=={d.version}\")"
    listed = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    installed = {_canonical(line) for line in listed.split()}
    requirements = (repo / "requirements-lintrunner.txt").read_text()
    pins = tool_pins(git_dir, ref) + re.findall(r"^([\w.-]+==[^\s#;]+)", requirements, re.M)
    stale = [pin for pin in pins if _canonical(pin) not in installed]
    head = [f"upstream {ref} ({commit}): {', '.join(CONFIG)}", f"tools: {', '.join(pins)}"]
    if stale:  # not upstream's setup: its result would not count
        return False, f"{head[0]}\nnot installed in {python} (run --setup): {', '.join(stale)}"
    command = ["lintrunner", *TAKE, "--tee-json", str(tee), *sorted(files)]
    start = time.monotonic()
    result = subprocess.run([str(Path(python).parent / command[0]), *command[1:]], cwd=repo,
                            env=_env(python, workdir / "data"), capture_output=True, text=True)
    seconds = time.monotonic() - start
    messages = tee.read_text().splitlines() if tee.exists() else []
    import tomllib  # Python 3.11; only the maintainers' full check gets here
    # The grep linters' patterns as meant (see LINTERS); ETCAPITAL's TOML literal string doubles backslashes (`\\W`).
    found = []
    for linter in tomllib.loads((repo / ".lintrunner.toml").read_text())["linter"]:
        patterns = [arg[len("--pattern="):] for arg in linter["command"] if arg.startswith("--pattern=")]
        if linter["code"] in LINTERS and "grep_linter" in linter["command"] and patterns:
            pattern = re.compile(patterns[0].replace("\\\\", "\\"))
            found += [f"{linter['code']} {path}:{number}: {text.strip()}" for path in sorted(files)
                      for number, text in enumerate((repo / path).read_text(errors="replace").splitlines(), 1)
                      if pattern.search(text)]
    lines = [*head, f"$ cd {repo} && {shlex.join(command)}",
             f"exit {result.returncode}, {len(messages)} lint messages, {seconds:.1f} s",
             (result.stdout + result.stderr).rstrip(),
             f"the grep linters' patterns as meant (Python re), on the same files: {len(found)} match(es)", *found]
    return result.returncode == 0 and not messages and not found, "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True, help="a git directory of pytorch/executorch")
    parser.add_argument("--ref", default="main", help="the revision whose lint setup to use")
    parser.add_argument("--setup", type=Path, metavar="VENV", help="create VENV with the linters")
    parser.add_argument("--python", help="the python of a VENV made with --setup")
    parser.add_argument("--workdir", type=Path, help="a new folder to lint in (default: temporary)")
    parser.add_argument("files", nargs="*", metavar="PATH=FILE", help="repository path = file")
    args = parser.parse_args(argv)
    if args.setup:  # upstream's lintrunner pins; `lintrunner init` pip-installs the linters: later runs need no network
        subprocess.run([sys.executable, "-m", "venv", str(args.setup)], check=True)
        python = str(args.setup / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", *tool_pins(args.git_dir, args.ref)], check=True)
        with tempfile.TemporaryDirectory() as scratch:
            make_repo(args.git_dir, args.ref, {}, Path(scratch) / "repo")
            command = [str(args.setup / "bin" / "lintrunner"), "init", *TAKE]
            subprocess.run(command, cwd=Path(scratch) / "repo", env=_env(python, Path(scratch) / "data"), check=True)
        print(f"linters' python: {python}")
        return 0
    if not args.python or not args.files:
        parser.error("give --python and PATH=FILE arguments, or --setup VENV")
    files = {path: Path(file) for path, _, file in (f.partition("=") for f in args.files)}
    with tempfile.TemporaryDirectory() as scratch:
        ok, report = run_lintrunner(args.git_dir, args.ref, files, args.workdir or Path(scratch), args.python)
    print(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
