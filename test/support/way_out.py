# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Programs exported on a GPU, as users meet them: what lowering them says, and the way out that
the errors name, measured.

    python -m test.support.way_out errors      # on a GPU machine: each attention model,
                                               # exported on cuda:0 and not moved, lowered
                                               # both ways, both configs
    python -m test.support.way_out export DIR  # on a GPU machine: moved with
                                               # move_to_device_pass, lowered to the portable
                                               # path and to XNNPACK, DIR/*.pte saved
    python -m test.support.way_out run DIR     # where executorch.runtime runs: outputs vs
                                               # the CPU model

export and run are apart because executorch.runtime may not run where the GPU is (its torch may be
older than the runtime expects). Expected outputs come from a CPU copy of each model.
"""

import copy
import sys
from pathlib import Path

import torch
import torch.nn.functional as F


class DeviceCreated(torch.nn.Module):
    """A forward that makes a tensor on its input's device, as models often do."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + torch.arange(x.shape[-1], device=x.device)


class Attention(torch.nn.Module):
    """A self-attention block: causal, masked (a boolean mask) or grouped-query (2 key heads)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.kv_heads = 2 if kind == "grouped_query" else 4
        self.q = torch.nn.Linear(64, 64)
        self.kv = torch.nn.Linear(64, 2 * 16 * self.kv_heads)
        self.out = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q(x).unflatten(-1, (4, 16)).transpose(1, 2)
        k, v = (
            t.unflatten(-1, (self.kv_heads, 16)).transpose(1, 2)
            for t in self.kv(x).chunk(2, dim=-1)
        )
        if self.kind == "grouped_query":
            k, v = (t.repeat_interleave(2, dim=1) for t in (k, v))
        mask = None
        if self.kind == "masked":
            mask = torch.ones(
                x.shape[1], x.shape[1], dtype=torch.bool, device=x.device
            ).tril()
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=self.kind != "masked"
        )
        return self.out(y.transpose(1, 2).flatten(2))


def models() -> dict[str, tuple[torch.nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        d_model=16, nhead=2, dim_feedforward=32, batch_first=True
    )
    x = torch.randn(1, 32, 64)
    return {
        "reproducer": (
            torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()),
            torch.randn(2, 4),
        ),
        "device_created": (DeviceCreated(), torch.randn(2, 4)),
        "transformer": (
            torch.nn.TransformerEncoder(
                layer, num_layers=2, enable_nested_tensor=False
            ),
            torch.randn(1, 5, 16),
        ),
        "causal": (Attention("causal"), x),
        "masked": (Attention("masked"), x),
        "grouped_query": (Attention("grouped_query"), x),
        "causal_bf16": (Attention("causal").to(torch.bfloat16), x.to(torch.bfloat16)),
    }


ATTENTION = ("transformer", "causal", "masked", "grouped_query", "causal_bf16")


def lower(
    program: "torch.export.ExportedProgram", backend: str, validate: bool = True
) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    partitioner = [XnnpackPartitioner()] if backend == "xnnpack" else []
    config = EdgeCompileConfig(_check_ir_validity=validate)
    edge = to_edge_transform_and_lower(
        program, partitioner=partitioner, compile_config=config
    )
    return edge.to_executorch().buffer


def errors() -> int:
    """Each attention model, exported on cuda:0 and not moved, lowered to the portable path and to
    XNNPACK, validated and not: prints the error, and fails unless every one names the device and
    move_to_device_pass."""
    from torch.export import export

    unnamed = 0
    for name in ATTENTION:
        model, x = models()[name]
        program = export(model.eval().cuda(), (x.cuda(),))
        ops = sorted(
            {
                str(n.target)
                for n in program.run_decompositions().graph.nodes
                if "attention" in str(n.target)
            }
        )
        print(f"{name}: decomposed on cuda:0 to {', '.join(ops)}")
        for backend in ("portable", "xnnpack"):
            for validate in (True, False):
                try:
                    lower(program, backend, validate)
                    message, kind = "lowered", "-"
                except Exception as error:  # what the user sees
                    message, kind = str(error), type(error).__name__
                named = (
                    "cuda:0" in message
                    and "move_to_device_pass(exported_program, 'cpu')" in message
                )
                unnamed += not named
                config = "default" if validate else "_check_ir_validity=False"
                print(
                    f"  {backend}, {config}: {kind}, {'names' if named else 'DOES NOT NAME'} the device and the call"
                )
                print("    " + message.strip().replace("\n", "\n    ")[:1200])
    print(f"{unnamed} error(s) without the device and the call")
    return 1 if unnamed else 0


def export_all(out: Path) -> None:
    from torch.export import export
    from torch.export.passes import move_to_device_pass

    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    for name, (model, x) in models().items():
        model.eval()
        expected[name] = (x, copy.deepcopy(model)(x))
        program = move_to_device_pass(export(model.cuda(), (x.cuda(),)), "cpu")
        for backend in ("portable", "xnnpack"):
            (out / f"{name}-{backend}.pte").write_bytes(lower(program, backend))
            print(
                f"{name}: exported on {next(model.parameters()).device}, moved, lowered to {backend}"
            )
    torch.save(expected, out / "expected.pt")


def run_all(folder: Path) -> int:
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    expected = torch.load(folder / "expected.pt")
    failed = 0
    for pte in sorted(folder.glob("*.pte")):
        x, reference = expected[pte.stem.rsplit("-", 1)[0]]
        (output,) = runtime.load_program(pte).load_method("forward").execute([x])
        difference = (output.float() - reference.float()).abs().max().item()
        limit = 1e-4 if reference.dtype == torch.float32 else 5e-2
        failed += difference >= limit
        print(
            f"{pte.name}: max abs difference from the CPU model {difference:.2e} ({reference.dtype}, limit {limit:g})"
        )
    print(f"{failed} program(s) over their limit")
    return 1 if failed else 0


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "errors":
        sys.exit(errors())
    folder = Path(sys.argv[2])
    sys.exit(export_all(folder) if command == "export" else run_all(folder))
