# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How each of test_cuda.py's crashing cases ends with the guard off and with it on, each in a
fresh interpreter, as a table for the GPU record: `python test/support/side_by_side.py`.

A case ends in a signal, in the exception it raised, or in exit status 0. test_cuda.py
asserts these outcomes; this prints them, so that the record shows what each site does today
next to the guard's error.
"""

import re
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

import children
import torch
from parts import not_here
from tabulate import tabulate

# (part of ExecuTorch that the case needs, or None; child; its arguments)
CASES: tuple[tuple[str | None, str, tuple[str, ...]], ...] = (
    (None, "cuda_portable", ()),
    (None, "cuda_delegated", ("xnnpack",)),
    (None, "cuda_delegated", ("vulkan",)),
    (None, "cuda_constant_method", ()),
    (None, "cuda_bundled", ()),
    ("runtime", "cuda_runtime", ("planned",)),
    ("runtime", "cuda_runtime", ("unplanned",)),
    ("custom ops", "cuda_custom_op", ("custom_sdpa",)),
    ("custom ops", "cuda_custom_op", ("update_cache",)),
    ("custom ops", "cuda_custom_op", ("sdpa_with_kv_cache",)),
    ("custom ops", "cuda_custom_op", ("fast_hadamard_transform",)),
    ("custom ops", "cuda_llama", ()),
    ("llm runner", "cuda_llm_input", ("make_image_input",)),
    ("llm runner", "cuda_llm_input", ("make_audio_input",)),
    ("llm runner", "cuda_llm_input", ("make_raw_audio_input",)),
    ("training", "cuda_sgd", ("parameter",)),
    ("training", "cuda_sgd", ("gradient",)),
    ("training", "cuda_forward_backward", ()),
)


def ending(status: int, stderr: str) -> str:
    """A signal by its name, else the last exception line of stderr (the emitter prints the
    graph after its error), else the exit status."""
    if status < 0:
        return signal.Signals(-status).name
    raised = re.findall(r"^[\w.]+(?:Error|Exception): .*$", stderr, re.M)
    return raised[-1] if status and raised else f"exit status {status}"


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA device")
        return 1
    rows, skipped = [], []
    with ThreadPoolExecutor(max_workers=4) as pool:
        for part, child, args in CASES:
            if part and (why := not_here(part)):
                skipped.append(f"{child} {' '.join(args)}: {why}")
                continue
            off, on = (
                pool.submit(children.run, child, guard, args=args)
                for guard in (False, True)
            )
            rows.append((child, *args, off, on))
    table = []
    for child, *args, off, on in rows:
        name = f"{child} {' '.join(args)}".strip()
        table.append((name, ending(*off.result()[::2]), ending(*on.result()[::2])))
    print(tabulate(table, ("case", "guard off", "guard on"), tablefmt="github"))
    for line in skipped:
        print(f"not run: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
