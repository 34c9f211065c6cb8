# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""python -m executorch_device_guard: the guard's status and the self-check, whose child
processes do every import of torch and ExecuTorch; each finding ends in one line that says what
is wrong and what to do (FAIL, with exit status 1, or WARNING), or OK."""

import json
import sys

from . import __version__, status
from ._hook import ENV_VAR, OFF, turned_off
from ._selfcheck import (
    CASES,
    CPU_CASE,
    CUDA_CASES,
    case_failure,
    cpu_program_failure,
    flatc_answer,
    missing_package,
    start_cases,
    start_child,
    too_old,
    unexpected_skips,
)


def headline(installed: bool) -> str:
    """The status line: installed or not, and the switch's value where it turned the guard off."""
    off = turned_off()
    switch = (
        f"{ENV_VAR}={off.strip()}"
        if off is not None
        else f"{ENV_VAR}={'/'.join(OFF)} turns it off"
    )
    return f"executorch-device-guard {__version__}: installed={installed} ({switch})"


def main() -> int:
    print(headline(status().installed), flush=True)
    absent = missing_package()
    if absent is not None:
        print(f"FAIL: {absent}")
        return 1
    # All side by side: the sites' state decides only whether the CUDA cases run too.
    state_child = start_child("status")
    cpu_child = start_child("cpu", guard=True)
    case_children = start_cases(CASES)
    stdout, stderr = state_child.communicate()
    if state_child.returncode != 0:
        for child in (cpu_child, *case_children):
            child.kill()
            child.communicate()
        print(stderr[-3000:])
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        print(
            f"FAIL: importing torch and ExecuTorch's guarded modules fails in a fresh "
            f"interpreter (exit status {state_child.returncode}): {last}"
        )
        return 1
    state = json.loads(stdout.strip().splitlines()[-1])
    print(
        f"executorch {state['executorch']}, torch {state['torch']}, CUDA available: {state['cuda']}"
    )
    for module, why in state["not_importable"].items():
        print(f"not importable: {module} ({why})")
    for site in state["patched"]:
        print(f"  guarded  {site}")
    for site, why in state["skipped"].items():
        print(f"  SKIPPED  {site}: {why}")

    cases = CASES + (CUDA_CASES if state["cuda"] else ())
    if state["cuda"]:
        case_children += start_cases(CUDA_CASES)
    print(f"self-check ({len(cases) + 1} child processes):")
    results = [
        (case.name, case_failure(case, child))
        for case, child in zip(cases, case_children)
    ]
    cpu = cpu_program_failure(cpu_child)
    results.append((CPU_CASE, cpu))
    for name, failure in results:
        print(
            f"  {'ok  ' if failure is None else 'FAIL'} {name}"
            + (f"\n{failure}" if failure else "")
        )

    failures = []
    flatc = flatc_answer(cpu) if cpu else None
    if flatc is not None:
        failures.append(flatc)
    skipped = unexpected_skips(state["skipped"])
    if skipped:
        failures.append(
            f"the guard left {len(skipped)} site(s) of executorch {state['executorch']} "
            "alone (SKIPPED above): this release differs where the guard looks, so they keep "
            "ExecuTorch's own behaviour; lower on the CPU, or call "
            "torch.export.passes.move_to_device_pass(exported_program, 'cpu') first."
        )
    failed = [name for name, failure in results if failure]
    if failed and flatc is None:
        failures.append(
            f"{len(failed)} of {len(results)} self-check cases failed (above): the guard "
            "does not behave here as on the releases it supports; report this output."
        )
    old = too_old()
    for answer in failures:
        print(f"FAIL: {answer}")
    if old is not None:
        print(f"WARNING: {old}")
    if not failures and old is None:
        print(
            f"OK: the self-check passed on executorch {state['executorch']}, "
            f"{len(state['patched'])} sites guarded."
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
