# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The series' loop: upstream/*.patch are the source, edited as commits in an ExecuTorch checkout.

    python -m upstream.series apply CHECKOUT REF   # branch device-guard at REF, `git am` the series
    # edit, test and commit there (`git commit --amend`, `git rebase -i device-guard-base`)
    python -m upstream.series export CHECKOUT      # `git format-patch` the branch back into upstream/

`apply` tags REF as device-guard-base, so that `export` writes the commits above it and nothing
else; it refuses a branch that exists (delete it to start over). Each commit message is its PR text.
A patch keeps its file name while its subject stays; a new subject gets format-patch's name. Export
ignores the user's and the system's git config (cover letters, sign-offs, diff prefixes), and
`--zero-commit`, `--no-signature` and 12-digit hashes keep the files free of local commit ids and of
the git version.
"""

import argparse
import email
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence

SERIES = Path(__file__).resolve().parent
BRANCH, BASE = "device-guard", "device-guard-base"


def patches(folder: Path = SERIES) -> List[Path]:
    return sorted(folder.glob("[0-9][0-9][0-9][0-9]-*.patch"))


def git(checkout: Path, *args: str, **env: str) -> str:
    """git's output; its errors go to the terminal."""
    return subprocess.run(["git", "-C", str(checkout), *args], check=True, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, **env}).stdout


def subject(path: Path) -> str:
    return re.sub(r"^\[PATCH[^]]*\] ", "", " ".join(email.message_from_string(path.read_text())["Subject"].split()))


def apply(checkout: Path, ref: str) -> None:
    git(checkout, "checkout", "-q", "-b", BRANCH, ref)
    git(checkout, "tag", "-f", BASE, ref)
    git(checkout, "am", "-q", "--3way", *(str(path) for path in patches()))


def export(checkout: Path, folder: Path = SERIES) -> None:
    stopped = Path(checkout, git(checkout, "rev-parse", "--git-path", "rebase-apply").strip()).exists()
    dirty = git(checkout, "status", "--porcelain", "--untracked-files=no")
    if git(checkout, "rev-parse", "--abbrev-ref", "HEAD").strip() != BRANCH or stopped or dirty:
        sys.exit(f"export needs {BRANCH} checked out, no changes, and no rebase or am stopped")
    with tempfile.TemporaryDirectory() as tmp:
        git(checkout, "-c", "core.abbrev=12", "format-patch", "-q", "--zero-commit", "--no-signature", "-o", tmp,
            f"{BASE}..{BRANCH}", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
        if not patches(Path(tmp)):
            sys.exit(f"no commits above {BASE}")
        names = {subject(path): path.name[4:] for path in patches(folder)}
        for path in patches(folder):
            path.unlink()
        for path in patches(Path(tmp)):
            shutil.move(path, folder / (path.name[:4] + names.get(subject(path), path.name[4:])))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    apply_parser = commands.add_parser("apply", help="branch at REF and `git am` the series")
    apply_parser.add_argument("checkout", type=Path)
    apply_parser.add_argument("ref", help="the upstream revision to build on, e.g. main")
    commands.add_parser("export", help="`git format-patch` the branch into upstream/").add_argument("checkout", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "apply":
            apply(args.checkout, args.ref)
        else:
            export(args.checkout)
    except subprocess.CalledProcessError as error:  # git said why, above
        return error.returncode
    print("\n".join(git(args.checkout, "log", "--oneline", f"{BASE}..{BRANCH}").splitlines()[::-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
