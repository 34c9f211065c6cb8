# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The way out that the error names, measured: programs exported on a GPU, moved to the host with
torch.export.passes.move_to_device_pass, lowered to the portable path and to XNNPACK, then run.

    python test/way_out.py export DIR   # on a GPU machine: writes DIR/*.pte and DIR/expected.pt
    python test/way_out.py run DIR      # on any machine with executorch.runtime: compares outputs

The two steps are apart because executorch.runtime may not run where the GPU is (its torch may be
older than the runtime expects). Expected outputs come from a CPU copy of each model.
"""

import copy
import sys
from pathlib import Path
from typing import Dict, Tuple

import torch


class DeviceCreated(torch.nn.Module):
    """A forward that makes a tensor on its input's device, as models often do."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + torch.arange(x.shape[-1], device=x.device)


def models() -> Dict[str, Tuple[torch.nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    return {
        "reproducer": (torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), torch.randn(2, 4)),
        "device_created": (DeviceCreated(), torch.randn(2, 4)),
        "transformer": (torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), torch.randn(1, 5, 16)),
    }


def export_all(out: Path) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import export
    from torch.export.passes import move_to_device_pass

    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    for name, (model, x) in models().items():
        model.eval()
        expected[name] = (x, copy.deepcopy(model)(x))
        program = move_to_device_pass(export(model.cuda(), (x.cuda(),)), "cpu")
        for backend, partitioner in (("portable", []), ("xnnpack", [XnnpackPartitioner()])):
            pte = to_edge_transform_and_lower(program, partitioner=partitioner).to_executorch()
            (out / f"{name}-{backend}.pte").write_bytes(pte.buffer)
            print(f"{name}: exported on {next(model.parameters()).device}, moved, lowered to {backend}")
    torch.save(expected, out / "expected.pt")


def run_all(folder: Path) -> int:
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    expected = torch.load(folder / "expected.pt")
    worst = 0.0
    for pte in sorted(folder.glob("*.pte")):
        x, reference = expected[pte.stem.rsplit("-", 1)[0]]
        (output,) = runtime.load_program(pte).load_method("forward").execute([x])
        difference = (output - reference).abs().max().item()
        worst = max(worst, difference)
        print(f"{pte.name}: max abs difference from the CPU model {difference:.2e}")
    print(f"worst {worst:.2e}")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    sys.exit(export_all(folder) if command == "export" else run_all(folder))
