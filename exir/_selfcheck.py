# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The self-check's child processes: ExecuTorch's own failure without the guard, the named
InternalError with it, and a CPU program byte-identical either way.

Each runs `python -m executorch_device_guard._selfcheck MODEL` in a fresh interpreter, where
only the installed startup line can activate the guard, so what it shows is what installing
the package does; a crash shows as a negative exit status.
"""

import hashlib
import os
import re
import subprocess
import sys
from typing import Any, NamedTuple

from ._hook import ENV_VAR

SIGSEGV = -11


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
        ("InternalError: Failed with error: Constant 'p_0_weight'", "holds no data"),
    ),
)
CUDA_CASES = (
    Case("CUDA model, guard off", "cuda", False, SIGSEGV, ()),
    Case(
        "CUDA model, guard on",
        "cuda",
        True,
        1,
        ("InternalError: Failed with error: Constant 'p_0_weight'", "is on cuda:0"),
    ),
)


def start_child(model: str, guard: bool) -> "subprocess.Popen[str]":
    """The reproducer on `model` ("cpu" prints its program's digest) in a fresh interpreter."""
    return subprocess.Popen(
        [sys.executable, "-m", __name__, model],
        env={**os.environ, ENV_VAR: "1" if guard else "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_cases(cases: tuple[Case, ...]) -> list[tuple[Case, str | None]]:
    """Runs the cases side by side; each with how its child's result differs from the case, or None."""
    children = [(case, start_child(case.model, case.guard)) for case in cases]
    results: list[tuple[Case, str | None]] = []
    for case, child in children:
        _, stderr = child.communicate()
        missing = [text for text in case.stderr_has if text not in stderr]
        wrong = child.returncode != case.returncode
        found = (
            f"exit status {child.returncode}, expected {case.returncode}"
            if wrong
            else ""
        )
        found = found or (f"stderr lacks {missing}" if missing else "")
        results.append((case, f"{found}: {stderr[-2000:]}" if found else None))
    return results


def cpu_program_failure() -> str | None:
    """How a CPU program fails to serialize byte for byte as without the guard, or None: one
    child, the guard installed at its start, lowers it, then again with the guard uninstalled.

    Also what tells that ExecuTorch's own export fails on this install (e.g. no flatc binary),
    in which case the error cases above prove nothing: they fail before serialization.
    """
    stdout, stderr = (child := start_child("cpu", True)).communicate()
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


if __name__ == "__main__":
    from . import _hook

    # The CPU program: guarded, then not.
    for _ in range(2 if sys.argv[1] == "cpu" else 1):
        program = _lower(sys.argv[1]).to_executorch()
        print(hashlib.sha256(program.buffer).hexdigest())
        _hook.uninstall()
