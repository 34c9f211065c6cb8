# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The series' patch files are the source, edited as commits in an ExecuTorch checkout
(CONTRIBUTING.md, The upstream series): `apply CHECKOUT REF` branches device-guard at REF (tagged
device-guard-base) and runs `git am`; `export CHECKOUT` writes the commits above the tag back
with `git format-patch`, free of local commit ids and the git version; `copy DEST [-- OPT]`
makes DEST/executorch, the installed release with every patch applied. --followup does the
same for upstream/followup/ on branch device-guard-followup."""

import argparse
import email
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

SERIES = Path(__file__).resolve().parent
FOLLOWUP = SERIES / "followup"
BASE = "device-guard-base"
REF = "cff6f4dd32"  # upstream main, which the series is based on (CONTRIBUTING.md)
BRANCHES = {SERIES: "device-guard", FOLLOWUP: "device-guard-followup"}
CPP = ("*.cpp", "*.h")  # C++ sources, which the executorch wheel ships built
# What the wheel lacks of the repository (the top-level test/ among it), left out when a patch
# is applied to it.
NOT_IN_WHEEL = ("*BUCK", "*TARGETS", "*.bzl", ".github/*", "pytest.ini", "test/*", *CPP)
# No user or system git config.
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def executorch_root() -> Path:
    """The installed executorch package folder, found without importing executorch."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not installed in this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def patches(folder: Path = SERIES) -> list[Path]:
    return sorted(folder.glob("[0-9][0-9][0-9][0-9]-*.patch"))


def every_patch() -> list[Path]:
    """The merge set, then the follow-ups; each applies alone to main and after the others."""
    return [*patches(), *patches(FOLLOWUP)]


def git(checkout: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """git's output; its errors go to the terminal."""
    return subprocess.check_output(
        ["git", "-C", str(checkout), *args], text=True, env=env
    )


def commit_all(folder: Path, message: str) -> None:
    """A new repository of `folder`'s files, in one commit by a check identity."""
    identity = ("-c", "user.name=check", "-c", "user.email=c@localhost")
    git(folder, "init", "-q", "-b", "main", env=GIT_ENV)
    git(folder, "add", "-A", env=GIT_ENV)
    git(folder, *identity, "commit", "-q", "-m", message, env=GIT_ENV)


def subject(path: Path) -> str:
    text = email.message_from_string(path.read_text())["Subject"]
    return re.sub(r"^\[PATCH[^]]*\] ", "", " ".join(text.split()))


def apply(checkout: Path, ref: str, folder: Path = SERIES) -> None:
    git(checkout, "checkout", "-q", "-b", BRANCHES[folder], ref)
    git(checkout, "tag", "-f", BASE, ref)
    git(checkout, "am", "-q", "--3way", *map(str, patches(folder)))


def export(checkout: Path, folder: Path = SERIES, out: Path | None = None) -> None:
    """Writes the branch of `folder`'s patches into `out` (default: `folder`)."""
    branch, out = BRANCHES[folder], out or folder
    stopped = git(checkout, "rev-parse", "--git-path", "rebase-apply").strip()
    head = git(checkout, "rev-parse", "--abbrev-ref", "HEAD").strip()
    dirty = git(checkout, "status", "--porcelain", "--untracked-files=no")
    if head != branch or Path(checkout, stopped).exists() or dirty:
        sys.exit(f"export needs {branch} checked out, clean, no rebase or am stopped")
    with tempfile.TemporaryDirectory() as tmp:
        git(
            checkout, "-c", "core.abbrev=12", "format-patch", "-q", "--zero-commit",
            "--no-signature", "-o", tmp, f"{BASE}..{branch}", env=GIT_ENV,
        )  # fmt: skip
        if not patches(Path(tmp)):
            sys.exit(f"no commits above {BASE}")
        names = {subject(path): path.name[4:] for path in patches(out)}
        for path in patches(out):
            path.unlink()
        for path in patches(Path(tmp)):
            name = path.name[:4] + names.get(subject(path), path.name[4:])
            shutil.move(path, out / name)


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or hard links not allowed there
        shutil.copy2(source, target)


def copy_package(root: Path, site: Path) -> Path:
    """site/executorch: a copy of the executorch folder `root`, without bytecode caches. Its
    files are hard links where it can (0.3 s, not 5 s, for 4,500 files): `git apply`, which is
    what changes a copy, replaces each file that it changes, so the installed release stays."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(root, site / "executorch", ignore=ignore, copy_function=_link)
    return site / "executorch"


def git_apply(tree: Path, paths: Sequence[Path], *options: str) -> str | None:
    """`git apply` of each patch in turn onto `tree`, never fuzzy: git's error, or None."""
    env = {**GIT_ENV, "GIT_CEILING_DIRECTORIES": str(tree.resolve().parent)}
    for path in paths:
        apply = ["git", "apply", *options, str(path)]
        done = subprocess.run(apply, cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode:
            return f"{path.name}: {done.stderr}{done.stdout}"
    return None


def patched_copy(
    root: Path, site: Path, paths: Sequence[Path], *options: str
) -> tuple[Path, str | None]:
    """copy_package(root, site) with these patches applied by git apply OPTIONS, less what
    the wheel lacks: the copy, and git's error or None."""
    tree = copy_package(root, site)
    excludes = [f"--exclude={pattern}" for pattern in NOT_IN_WHEEL]
    return tree, git_apply(tree, paths, *excludes, *options)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followup", action="store_true", help="upstream/followup/")
    parser.add_argument("command", choices=("apply", "export", "copy"))
    parser.add_argument("path", type=Path, help="the checkout; for copy, DEST")
    parser.add_argument("rest", nargs="*", help="apply: REF; copy: git apply options")
    args = parser.parse_args(argv)
    folder = FOLLOWUP if args.followup else SERIES
    if args.command == "copy":
        tree, error = patched_copy(
            executorch_root(), args.path, every_patch(), *args.rest
        )
        print(error or tree)
        return 1 if error else 0
    if args.command == "apply" and len(args.rest) != 1:
        parser.error("apply needs REF, the upstream revision to build on")
    try:
        if args.command == "apply":
            apply(args.path, args.rest[0], folder)
        else:
            export(args.path, folder)
    except subprocess.CalledProcessError as error:  # git said why, above
        return error.returncode
    log = git(args.path, "log", "--oneline", f"{BASE}..{BRANCHES[folder]}")
    print("\n".join(log.splitlines()[::-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
