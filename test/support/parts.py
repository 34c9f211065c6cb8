# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which of ExecuTorch's compiled parts run here. Each release builds its runtime, its LLM
custom ops library and its bindings against one torch: with another (the GPU machines' torch
2.11 and executorch 1.5.1) they fail to load or misread host tensors, guard or not, so the
tests of a part that does not run here skip, saying why; .ci/gpu leaves out its patch."""

import functools
import importlib
from importlib.metadata import version

import torch

from executorch_device_guard import _release
from executorch_device_guard._site_table import CUSTOM_OPS

from . import children
from .models import llm_inputs

PARTS = ("runtime", "custom ops", "llm runner", "training")


@functools.cache
def not_here(part: str) -> str | None:
    """Why `part`, one of PARTS, does not run here, or None."""
    if part == "runtime":
        # In a child, where a runtime that crashes takes only the child down (1.5.1's
        # runtime loads with torch 2.11, but runs no program there).
        status, _, stderr = children.run("host_runtime", guard=False)
        if status == 0:
            return None
        last = (stderr.strip().splitlines() or [""])[-1]
        return (
            f"executorch {version('executorch')}'s runtime does not run programs with "
            f"torch {torch.__version__} (exit status {status}): {last}"
        )
    if part == "llm runner" and _release.before("1.1.0"):
        return "the LLM runner's bindings came in executorch 1.1.0"
    try:
        if part == "custom ops":
            importlib.import_module(CUSTOM_OPS)
        elif part == "llm runner":
            from executorch.extension.llm.runner import make_image_input

            make_image_input(llm_inputs()["make_image_input"][1])
        else:
            from executorch.extension.training import get_sgd_optimizer

            # The optimizer keeps pointers into its tensors: they must outlive it.
            parameter, gradient = torch.ones(2), torch.ones(2)
            get_sgd_optimizer({"w": parameter}).step({"w": gradient})
    except Exception as error:  # whatever they raise where they do not run
        return (
            f"executorch's {part} does not run with torch {torch.__version__}: "
            f"{type(error).__name__}: {error}"
        )
    return None
