# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""python -m executorch_device_guard: the guard's status, then the self-check in child processes."""

import importlib
import sys

from . import __version__, status
from ._hook import ENV_VAR, OFF, turned_off
from ._selfcheck import CASES, CUDA_CASES, cpu_program_failure, run_cases
from ._site_table import MODULES


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
    import torch

    for module in sorted(MODULES):
        try:
            importlib.import_module(module)
        # A backend this ExecuTorch build lacks, or bindings built for another torch, which
        # the LLM runner reports with RuntimeError (and a package whose bindings failed
        # leaves a stale namespace package: a KeyError at its next import).
        except Exception as e:
            print(f"not importable: {module} ({e})")
    state = status()
    print(headline(state.installed))
    print(
        f"executorch {state.executorch_version}, torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}"
    )
    for site in state.patched:
        print(f"  guarded  {site}")
    for site, reason in state.skipped.items():
        print(f"  SKIPPED  {site}: {reason}")

    cases = CASES + (CUDA_CASES if torch.cuda.is_available() else ())
    print(f"self-check ({len(cases) + 1} child processes):")
    results = [(case.name, failure) for case, failure in run_cases(cases)]
    results.append(
        (
            "CPU program, byte-identical with and without the guard",
            cpu_program_failure(),
        )
    )
    for name, failure in results:
        print(
            f"  {'ok  ' if failure is None else 'FAIL'} {name}"
            + (f"\n{failure}" if failure else "")
        )
    return 1 if any(failure for _, failure in results) else 0


if __name__ == "__main__":
    sys.exit(main())
