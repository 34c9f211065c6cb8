# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Child-process checks: ExecuTorch's own failure without the guard, the named InternalError with it.

Each case runs in a fresh interpreter where only the installed startup line can activate the guard,
so what it shows is what installing the package does. The tests reuse these scripts and `run_child`.
"""

import os
import re
import subprocess
import sys
from typing import List, NamedTuple, Optional, Tuple

from ._hook import ENV_VAR

SIGSEGV = -11

_EXPORT = """
import torch
from torch.export import export
from executorch.exir import to_edge_transform_and_lower
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
"""
# The reproducer with the model on meta: no data, and without the guard no name either.
META_MODEL = _EXPORT + """
model = model.to("meta")
to_edge_transform_and_lower(export(model, (torch.ones(2, 4, device="meta"),))).to_executorch()
"""
CUDA_MODEL = _EXPORT + """
model = model.cuda()
to_edge_transform_and_lower(export(model, (torch.ones(2, 4).cuda(),))).to_executorch()
"""
# The same model on the CPU: prints the digest of its program.
CPU_PROGRAM = _EXPORT + """
import hashlib
program = to_edge_transform_and_lower(export(model, (torch.ones(2, 4),))).to_executorch()
print(hashlib.sha256(program.buffer).hexdigest())
"""


class Case(NamedTuple):
    name: str
    script: str
    guard: bool
    returncode: int
    stderr_has: Tuple[str, ...]


CASES = (
    Case("meta model, guard off", META_MODEL, False, 1, ("NULL pointer access",)),
    Case("meta model, guard on", META_MODEL, True, 1, ("InternalError: Constant 'p_0_weight'", "holds no data")),
)
CUDA_CASES = (
    Case("CUDA model, guard off", CUDA_MODEL, False, SIGSEGV, ()),
    Case("CUDA model, guard on", CUDA_MODEL, True, 1, ("InternalError: Constant 'p_0_weight'", "is on cuda:0")),
)


def start_child(script: str, guard: bool, python: str = sys.executable) -> "subprocess.Popen[str]":
    """Starts `script` in a fresh interpreter with the guard's startup hook on or off."""
    return subprocess.Popen(
        [python, "-c", script],
        env={**os.environ, ENV_VAR: "1" if guard else "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_child(script: str, guard: bool) -> Tuple[int, str, str]:
    """Runs `script` to its end: (exit status, stdout, stderr); a crash is a negative status."""
    child = start_child(script, guard)
    stdout, stderr = child.communicate()
    return child.returncode, stdout, stderr


def failure(case: Case, returncode: int, stderr: str) -> Optional[str]:
    """Says how a child's result differs from what the case expects, or None if it matches."""
    if returncode != case.returncode:
        return f"exit status {returncode}, expected {case.returncode}: {stderr[-2000:]}"
    missing = [text for text in case.stderr_has if text not in stderr]
    return f"stderr lacks {missing}: {stderr[-2000:]}" if missing else None


def run_cases(
    cases: Tuple[Case, ...], python: str = sys.executable
) -> List[Tuple[Case, Optional[str]]]:
    """Runs the cases side by side and pairs each with its failure, if any."""
    children = [(case, start_child(case.script, case.guard, python)) for case in cases]
    results = []
    for case, child in children:
        _, stderr = child.communicate()
        results.append((case, failure(case, child.returncode, stderr)))
    return results


def cpu_program_failure(python: str = sys.executable) -> Optional[str]:
    """Says how a CPU program fails to serialize byte for byte as without the guard, or None.

    Also what tells that ExecuTorch's own export fails on this install (e.g. no flatc binary), in
    which case the error cases above prove nothing: they fail before serialization.
    """
    children = {guard: start_child(CPU_PROGRAM, guard, python) for guard in (True, False)}
    digests = {}
    for guard, child in children.items():
        stdout, stderr = child.communicate()
        if child.returncode != 0:
            # The chain of exceptions: the cause (e.g. no flatc found) comes before the last one.
            raised = [line for line in stderr.splitlines() if re.match(r"[\w.]+(Error|Exception): ", line)]
            return (
                f"ExecuTorch's own export of a CPU model fails here (guard {'on' if guard else 'off'}, "
                f"exit status {child.returncode}): {' / '.join(raised) or stderr.strip()[-500:]}"
            )
        digests[guard] = stdout.split()[-1]
    if digests[True] != digests[False]:
        return f"the CPU program differs with the guard: {digests[True]} vs {digests[False]}"
    return None
