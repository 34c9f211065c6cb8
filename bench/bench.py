# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the device guard costs: one table, guarded next to unguarded, measured in one run.

    python bench/bench.py [--quick] [--section all|cpu|xnnpack|gpu|aa] [--out FILE]

The guard is wired in at interpreter start, so each CPU measurement runs in fresh child
processes (`bench.py --child ...`, guard on or off) and times what a user pays once per
process. Guarded and unguarded children alternate in pairs, the first of a pair alternating
too, and each pair gives one ratio, so a shared machine's drifts hit both sides alike: not
pyperf, which runs each side's processes back to back and, A/A on 2 cores, was 10 times
noisier (`--section aa` measures both). Whole-run ratios cannot show 1% on such a machine;
the guard's own time, metered inside each guarded run, can. The XNNPACK lowering of many
layers takes minutes a run: its rows are the guard's metered share only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import mean, median
from typing import Any, NamedTuple

GUARD = "EXECUTORCH_DEVICE_GUARD"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# For upstream.suites' run_forked and table, and the tests' simulated device.
sys.path.insert(0, REPO)
PRELOAD = (
    "executorch.exir",
    "executorch.backends.xnnpack.partition.xnnpack_partitioner",
)


class Sizes(NamedTuple):
    small_constants: (
        int  # parameters + buffers of the "many small" model, 16 floats each
    )
    large: tuple[
        int, int
    ]  # (layers, width) of Linear(width, width) in the "few large" one
    starts: int  # interpreter starts per side
    named: tuple[
        int, ...
    ]  # a 4-D tensor of named data, on the host and simulated on cuda:0
    per_byte: tuple[int, ...]  # named data next to upstream's per-byte path
    xnnpack: tuple[int, ...]  # layers of Linear(16, 16) lowered to XNNPACK, a row each
    gpu: tuple[int, ...]  # a 4-D CUDA tensor


FULL = Sizes(
    2000,
    (3, 4096),
    15,
    (8, 64, 64, 64),
    (4, 16, 64, 64),
    (250, 1000, 2500),
    (32, 256, 80, 80),
)
QUICK = Sizes(20, (3, 64), 3, (2, 4, 8, 8), (1, 2, 4, 4), (4,), (2, 16, 32, 32))


class Row(NamedTuple):
    measurement: str
    guarded: str
    baseline: str = "-"
    ratio: str = "-"
    spread: str = "-"
    goal: str = "-"
    met: str = "-"


class Pairs(NamedTuple):
    """Interleaved guarded (`on`) and baseline (`off`) times, pair by pair."""

    on: list[float]
    off: list[float]

    def ratio_row(self, name: str, unit: Callable[[float], str], goal: float) -> Row:
        """Met if the median pair ratio is within `goal` of 1, or within the A/A noise: the
        median change from one baseline run to the next."""
        ratios = [a / b for a, b in zip(self.on, self.off)]
        ratio, noise = (
            median(ratios),
            median(abs(b / a - 1) for a, b in zip(self.off, self.off[1:] or self.off)),
        )
        spread = f"{(min(ratios) - 1) * 100:+.1f}% .. {(max(ratios) - 1) * 100:+.1f}% (A/A ±{noise * 100:.1f}%)"
        met = (
            "yes"
            if abs(ratio - 1) <= goal
            else "no, within noise"
            if abs(ratio - 1) <= noise
            else "no"
        )
        cells = unit(median(self.on)), unit(median(self.off)), f"{ratio:.3f}", spread
        return Row(name, *cells, f"within {goal * 100:g}%", met)


def seconds(x: float) -> str:
    return f"{x:.3f} s"


def millis(x: float) -> str:
    return f"{x * 1e3:.2f} ms"


def interleaved(
    measure: Callable[[bool], dict[str, float]], pairs: int
) -> dict[str, Pairs]:
    """measure(True) and measure(False), `pairs` times each, which first alternating; measure
    returns its times by name; the result pairs them up name by name."""
    result: dict[str, Pairs] = {}
    for i in range(pairs):
        for on in (True, False) if i % 2 == 0 else (False, True):
            for name, value in measure(on).items():
                (
                    result.setdefault(name, Pairs([], [])).on
                    if on
                    else result[name].off
                ).append(value)
    return result


def child(args: Sequence[str], guard: bool) -> "subprocess.CompletedProcess[str]":
    # No PYTHONDONTWRITEBYTECODE: the package loads from cached bytecode, as from a wheel.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, *args],
        env={**env, GUARD: str(int(guard))},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(
            f"{list(args)} (guard {guard}) failed:\n{done.stderr[-4000:]}"
        )
    return done


def measured(
    runs: Sequence[tuple[list[str], bool]], fresh: bool = False
) -> list[dict[str, Any]]:
    """Each child's measurement, the JSON it prints last, one child at a time: in a fresh
    interpreter, or forked from one that has imported torch and ExecuTorch (upstream's
    run_forked). Refused unless the guard wrapped something in each guarded child only."""
    if fresh:
        outputs = [child([__file__, "--child", *args], on).stdout for args, on in runs]
    else:
        from upstream.suites import Forked, executorch_root, run_forked

        site = executorch_root().parent
        forked = [
            Forked(site, ["bench.bench", "--child", *a], str(i), on)
            for i, (a, on) in enumerate(runs)
        ]
        with tempfile.TemporaryDirectory() as tmp:
            done = run_forked(forked, 1, 3600, Path(tmp), PRELOAD)
        outputs = [
            r.log if r.returncode == 0 else sys.exit(r.log[-4000:]) for r in done
        ]
    results = [json.loads(out.splitlines()[-1]) for out in outputs]
    for (args, on), found in zip(runs, results):
        if bool(found.pop("patched")) != on:
            raise RuntimeError(
                f"{GUARD}={int(on)} for {args}, but the child's guard state differs"
            )
    return results


class Meter:
    """Sums the wall time spent in the guard's own code in a guarded child: each _sites wrapper
    less the original that it calls (errs high: the meter's own clock reads count)."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def own(self, wrapper: Callable[..., Any]) -> Callable[..., Any]:
        def metered(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            inside = 0.0

            def timed(*args: Any, **kwargs: Any) -> Any:
                nonlocal inside
                start = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    inside += time.perf_counter() - start

            self.calls += 1
            start = time.perf_counter()
            try:
                return wrapper(timed, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start - inside

        metered.__wrapped__ = wrapper  # type: ignore[attr-defined]  # _patch reads its parameters
        return metered


def meter_sites() -> Meter:
    """Child: every site's wrapper, metered, through the public uninstall() and install()."""
    import executorch_device_guard as guard
    from executorch_device_guard import _sites

    meter = Meter()
    if guard.status().installed:
        guard.uninstall()
        for name, wrapper in list(_sites.WRAPPERS.items()):
            _sites.WRAPPERS[name] = meter.own(wrapper)
        guard.install()
    return meter


def report(result: dict[str, Any]) -> None:
    """Child: prints its result, with whether the guard has patched any site."""
    import executorch_device_guard as guard

    print(json.dumps({**result, "patched": len(guard.status().patched)}))


def to_executorch_child(model: str, sizes: Sizes) -> None:
    """Child: builds, exports and lowers one model, then times its one to_executorch() call:
    it mutates the lowered program, and a second lowering would run with warm caches."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    class ManySmall(torch.nn.Module):
        """Half parameters, half buffers, 16 floats each, read by a few concatenations."""

        def __init__(self, n: int) -> None:
            super().__init__()
            self.weights = torch.nn.ParameterList(
                torch.randn(16) for _ in range(n // 2)
            )
            for i in range(n - n // 2):
                self.register_buffer(f"b{i}", torch.randn(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            w = torch.cat(list(self.weights)).reshape(-1, 16).sum(0)
            return x * w + torch.cat(list(self.buffers())).reshape(-1, 16).sum(0)

    layers, width = sizes.large
    if model == "many-small":
        module, x = ManySmall(sizes.small_constants), torch.randn(1, 16)
    else:
        module = torch.nn.Sequential(
            *(torch.nn.Linear(width, width, bias=False) for _ in range(layers))
        )
        x = torch.randn(1, width)
    with torch.no_grad():
        edge = to_edge_transform_and_lower(torch.export.export(module.eval(), (x,)))
    meter = meter_sites()
    wall, cpu = time.perf_counter(), time.process_time()
    program = edge.to_executorch()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    what = (
        f"{sizes.small_constants} constants of 16 floats"
        if model == "many-small"
        else f"{layers} x {width}^2 float32"
    )
    report(
        {
            "wall": wall,
            "cpu": cpu,
            "guard": meter.seconds,
            "what": f"{what}, {len(program.buffer) / 1e6:.1f} MB .pte",
        }
    )


def import_child() -> None:
    """Child: times the first `import executorch.exir`; a guarded child meters the guard's
    finder, which sees every import, and the patching after each guarded module."""
    from executorch_device_guard import _hook

    own = 0.0
    find_spec, exec_and_patch = _hook._Finder.find_spec, _hook._exec_and_patch

    def metered_find(*args: Any) -> Any:
        nonlocal own
        start = time.perf_counter()
        try:
            return find_spec(*args)
        finally:
            own += time.perf_counter() - start

    def patch_only(exec_module: Any, module: Any) -> None:
        nonlocal own
        exec_module(module)
        start = time.perf_counter()
        exec_and_patch(lambda _: None, module)
        own += time.perf_counter() - start

    _hook._Finder.find_spec, _hook._exec_and_patch = metered_find, patch_only  # type: ignore[method-assign]
    wall, cpu = time.perf_counter(), time.process_time()
    import executorch.exir  # noqa: F401

    report(
        {
            "wall": time.perf_counter() - wall,
            "cpu": time.process_time() - cpu,
            "guard": own,
        }
    )


def xnnpack_child(layers: int) -> None:
    """Child: times the XNNPACK lowering and to_executorch() of `layers` x Linear(16, 16): small
    constants, so that the run is made of the per-constant work that calls the guard."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.exir import to_edge_transform_and_lower

    module = torch.nn.Sequential(*(torch.nn.Linear(16, 16) for _ in range(layers)))
    with torch.no_grad():
        exported = torch.export.export(module.eval(), (torch.randn(1, 16),))
    meter = meter_sites()
    wall = time.perf_counter()
    to_edge_transform_and_lower(
        exported, partitioner=[XnnpackPartitioner()]
    ).to_executorch()
    report(
        {
            "wall": time.perf_counter() - wall,
            "guard": meter.seconds,
            "calls": meter.calls,
        }
    )


def child_rows(
    args: list[str], pairs: int, name: str, own: str, fresh: bool = False
) -> list[Row]:
    """A child's timed call guarded next to unguarded (wall, CPU), and the guard's own time as
    a share of the guarded runs' wall time."""
    order = [
        on
        for i in range(pairs)
        for on in ((True, False) if i % 2 == 0 else (False, True))
    ]
    results = measured([(args, on) for on in order], fresh)
    what = {result.pop("what", "") for result in results}
    timed = interleaved(lambda on: results.pop(0), pairs)  # in the same order
    title = f"{name} ({what.pop()})" if any(what) else name
    shares = [g / w for g, w in zip(timed["guard"].on, timed["wall"].on)]
    share = f"{millis(median(timed['guard'].on))} ({median(shares) * 100:.3f}%)"
    spread = f"+{min(shares) * 100:.3f}% .. +{max(shares) * 100:.3f}%"
    met = "yes" if median(shares) <= 0.01 else "no"
    return [
        timed["wall"].ratio_row(f"{title}, wall", seconds, 0.01),
        timed["cpu"].ratio_row(f"{name}, CPU time", seconds, 0.01),
        Row(
            f"{name}, time in the guard's {own}",
            share,
            f"of {seconds(median(timed['wall'].on))}",
            "-",
            spread,
            "within 1%",
            met,
        ),
    ]


def start_rows(sizes: Sizes) -> list[Row]:
    """What the startup line costs at interpreter start, and what it imports."""
    child(["-c", "pass"], True)  # writes the package's bytecode once
    cumulative, heavy = [], set()
    for _ in range(sizes.starts):
        lines = child(["-X", "importtime", "-c", "pass"], True).stderr.splitlines()
        entries = [
            line.split("|")
            for line in lines
            if line.startswith("import time:") and "[us]" not in line
        ]
        ours = [
            e
            for e in entries
            if e[2].strip().split(".")[0] == "executorch_device_guard"
        ]
        top = min(len(e[2]) - len(e[2].lstrip()) for e in ours)
        cumulative.append(
            sum(int(e[1]) for e in ours if len(e[2]) - len(e[2].lstrip()) == top) / 1e6
        )
        heavy |= {
            e[2].strip()
            for e in entries
            if e[2].strip().split(".")[0] in ("torch", "executorch")
        }

    def start(on: bool) -> dict[str, float]:
        begin = time.perf_counter()
        child(["-c", "pass"], on)
        return {"wall": time.perf_counter() - begin}

    starts = interleaved(start, sizes.starts)["wall"]
    return [
        Row(
            "interpreter start: import time of the startup line",
            millis(median(cumulative)),
            spread=f"{millis(min(cumulative))} .. {millis(max(cumulative))}",
            goal="< 1 ms",
            met="yes" if median(cumulative) < 1e-3 else "no",
        ),  # fmt: skip
        Row(
            "interpreter start: torch / executorch imported",
            ", ".join(sorted(heavy)) or "neither",
            goal="neither",
            met="no" if heavy else "yes",
        ),  # fmt: skip
        starts.ratio_row(
            "interpreter start, `python -c pass` guard on vs off, wall", millis, 0.025
        ),
    ]


def xnnpack_rows(sizes: Sizes) -> list[Row]:
    """Per size, the guard's metered share of one guarded run, and how it grows."""
    rows, shares = [], []
    runs = measured([(["xnnpack", str(layers)], True) for layers in sizes.xnnpack])
    for layers, run in zip(sizes.xnnpack, runs):
        share = run["guard"] / run["wall"]
        shares.append(
            f"{share * 100:.3f}% ({run['guard'] / run['calls'] * 1e6:.1f} us a call)"
        )
        name = f"XNNPACK lowering + to_executorch(), {layers} x Linear(16, 16), the guard's share ({run['calls']} calls)"
        rows.append(Row(name, f"{millis(run['guard'])} ({share * 100:.3f}%)", f"of {seconds(run['wall'])}",
                        goal="within 1%", met="yes" if share <= 0.01 else "no"))  # fmt: skip
    sizes_text = " / ".join(map(str, sizes.xnnpack))
    return rows + [
        Row(
            f"XNNPACK, the guard's share as layers grow ({sizes_text})",
            " / ".join(shares),
            goal="flat",
        )
    ]


def timed(fn: Callable[[], object], cuda: bool = False) -> float:
    import torch

    torch.cuda.synchronize() if cuda else None
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize() if cuda else None
    return time.perf_counter() - start


def in_process(call: Callable[[bool], object], pairs: int, cuda: bool = False) -> Pairs:
    """call(True) next to call(False) in this process, after one warm-up each."""
    call(True), call(False)
    return interleaved(lambda on: {"wall": timed(lambda: call(on), cuda)}, pairs)[
        "wall"
    ]


def throughput(name: str, nbytes: int, pairs: Pairs, baseline: str) -> Row:
    """GB/s of `on` over that of `off`, met at 0.90 or more (or within the A/A noise)."""
    # off / on: the throughput ratio.
    row = Pairs(pairs.off, pairs.on).ratio_row(name, seconds, 0.10)
    rates = (f"{nbytes / median(t) / 1e9:.2f} GB/s" for t in (pairs.on, pairs.off))
    met = "yes" if float(row.ratio) >= 0.90 else row.met
    return row._replace(
        guarded=next(rates),
        baseline=f"{next(rates)} ({baseline})",
        goal=">= 0.90",
        met=met,
    )


def named_data_rows(sizes: Sizes, pairs: int) -> list[Row]:
    """add_named_data() with the guard: channels-last next to contiguous, on the host, simulated
    on cuda:0 and on a GPU (a device tensor is copied once, a channels-last one read in one
    piece); then a channels-last tensor next to upstream's per-byte path (guard uninstalled)."""
    import executorch_device_guard as guard
    import torch
    from executorch.exir._serialize._named_data_store import (
        NamedDataStore,
        _tensor_to_bytes,
    )

    from test.simulated_device import simulate_device

    def store(tensor: torch.Tensor) -> None:
        NamedDataStore().add_named_data("w", tensor)

    guard.install()
    places = [("host", sizes.named), ("simulated cuda:0", sizes.named)]
    places += [("cuda", sizes.gpu)] if torch.cuda.is_available() else []
    rows = []
    for place, shape in places:
        contiguous = torch.randn(shape, device="cuda" if place == "cuda" else "cpu")
        channels_last = contiguous.contiguous(memory_format=torch.channels_last)
        if place == "simulated cuda:0":
            contiguous, channels_last = (
                simulate_device(contiguous),
                simulate_device(channels_last),
            )
        nbytes = contiguous.untyped_storage().nbytes()
        both = in_process(
            lambda on, cl=channels_last, c=contiguous: store(cl if on else c),
            pairs,
            place == "cuda",
        )
        name = f"named data {place} {nbytes / 2**20:.3g} MiB, add_named_data() channels-last vs contiguous"
        rows.append(throughput(name, nbytes, both, "contiguous"))
    three_d = (
        torch.randn(sizes.named)
        .unsqueeze(2)
        .contiguous(memory_format=torch.channels_last_3d)
    )
    took = median(timed(lambda: _tensor_to_bytes(three_d)) for _ in range(pairs))
    rows.append(Row("named data host, channels-last-3d, _tensor_to_bytes()", millis(took), goal="< 500 ms",
                    met="yes" if took < 0.5 else "no"))  # fmt: skip
    small = torch.randn(sizes.per_byte).contiguous(memory_format=torch.channels_last)

    def guarded_or_upstream(on: bool) -> dict[str, float]:
        guard.install() if on else guard.uninstall()
        return {"wall": timed(lambda: store(small))}

    versus = interleaved(guarded_or_upstream, min(pairs, 3))["wall"]
    guard.install()
    nbytes = small.untyped_storage().nbytes()
    name = f"named data host {nbytes / 2**20:.3g} MiB channels-last, guarded vs upstream (a Python call a byte)"
    faster = "yes" if median(versus.on) < median(versus.off) else "no"
    return rows + [
        versus.ratio_row(name, seconds, 0)._replace(goal="faster", met=faster)
    ]


def gpu_rows(sizes: Sizes, pairs: int) -> list[Row]:
    """add_named_data() of a CUDA tensor, which the guard copies with tensor.cpu(), next to the
    same call handed tensor.cpu() by its caller: the guard's copy should cost no more."""
    import torch

    if not torch.cuda.is_available():
        return [Row("GPU rows", "skipped: CUDA not available")]
    import executorch_device_guard as guard
    from executorch.exir._serialize._named_data_store import NamedDataStore

    guard.install()
    contiguous = torch.randn(sizes.gpu, device="cuda")
    rows = []
    for layout, tensor in (
        ("contiguous", contiguous),
        ("channels-last", contiguous.contiguous(memory_format=torch.channels_last)),
    ):
        nbytes = tensor.untyped_storage().nbytes()
        both = in_process(
            lambda on, x=tensor: NamedDataStore().add_named_data(
                "w", x if on else x.cpu()
            ),
            pairs,
            True,
        )
        rows.append(
            throughput(
                f"GPU {layout} {nbytes / 2**20:.3g} MiB, add_named_data(cuda tensor)",
                nbytes,
                both,
                "tensor.cpu()",
            )
        )
    return rows


def aa_rows(sizes: Sizes) -> list[Row]:
    """`python -c pass` against itself, five times each way: pyperf (each side's processes back
    to back) and interleaved pairs. The A/A ratio should be 1; how far it lands is the noise."""
    import pyperf

    found: dict[str, list[float]] = {"pyperf": [], "pairs": []}
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            means = []
            for side in "ab":
                out = os.path.join(tmp, f"{side}.json")
                command = [
                    "-m",
                    "pyperf",
                    "command",
                    "--processes=20",
                    "--values=3",
                    "--warmups=0",
                    "-q",
                    "-o",
                    out,
                ]
                child([*command, "--", sys.executable, "-c", "pass"], True)
                means.append(pyperf.Benchmark.load(out).mean())
            found["pyperf"].append(means[1] / means[0])
        pairs = interleaved(
            lambda on: {"wall": timed(lambda: child(["-c", "pass"], True))}, 60
        )["wall"]
        found["pairs"].append(median(a / b for a, b in zip(pairs.on, pairs.off)))
    return [
        Row(
            f"A/A `python -c pass`, {how}: mean |ratio - 1| of 5",
            f"{mean(abs(r - 1) for r in ratios) * 100:.2f}%",
            spread=" / ".join(f"{r:.3f}" for r in ratios),
        )  # fmt: skip
        for how, ratios in found.items()
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes, one pair: the smoke test"
    )
    parser.add_argument(
        "--pairs", type=int, help="pairs per measurement (default 7, quick 1)"
    )
    parser.add_argument(
        "--section", choices=("all", "cpu", "xnnpack", "gpu", "aa"), default="all"
    )
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.child:
        kind, *rest = args.child
        to_executorch_child(
            rest[0], sizes
        ) if kind == "to_executorch" else import_child() if kind == "import" else xnnpack_child(
            int(rest[0])
        )
        return 0
    pairs, started, rows = (
        args.pairs or (1 if args.quick else 7),
        time.perf_counter(),
        [],
    )
    quick = ["--quick"] if args.quick else []
    if args.section in ("all", "cpu"):
        rows += start_rows(sizes)
        for model in ("many-small", "few-large"):
            rows += child_rows(
                ["to_executorch", model, *quick],
                pairs,
                f"to_executorch(), {model}",
                "wrappers",
            )
        rows += child_rows(
            ["import"],
            pairs,
            "first `import executorch.exir`",
            "finder and patching",
            True,
        )
    if args.section in ("all", "cpu", "xnnpack"):
        rows += xnnpack_rows(sizes)
    if args.section in ("all", "cpu", "gpu"):
        rows += named_data_rows(
            sizes, max(pairs, 5) if args.section == "gpu" else pairs
        )
    if args.section in ("all", "gpu"):
        rows += gpu_rows(sizes, max(pairs, 5))
    if args.section == "aa":
        rows += aa_rows(sizes)
    from importlib import metadata

    versions = ", ".join(
        f"{n} {metadata.version(n)}"
        for n in ("torch", "executorch", "executorch-device-guard")
    )
    from upstream.suites import table

    text = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {versions}\n\n{table(Row._fields, rows)}"
    print(
        f"{text}\n\n{pairs} pairs, {'quick' if args.quick else 'full'} sizes, {time.perf_counter() - started:.0f} s"
    )
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
