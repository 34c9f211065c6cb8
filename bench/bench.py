# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the device guard costs: one table, guarded next to unguarded, measured in one run.

    python bench/bench.py [--out F]

The guard is wired in at interpreter start, so each measurement runs in child processes,
guarded and unguarded in pairs whose first side alternates, so that a shared machine's
drifts hit both sides alike. Whole-run ratios cannot show 1% on such a machine; the guard's
own time, metered in each guarded run, can."""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any, NamedTuple

# Imported at interpreter start, by the startup line, guard on or off.
from executorch_device_guard import _hook, install, status, uninstall

GUARD, PACKAGE = "EXECUTORCH_DEVICE_GUARD", "executorch_device_guard"
# For upstream.suites' table.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
Runs = list[tuple[list[str], bool]]  # children: --child arguments, guard on or off
Results = list[dict[str, Any]]  # what each child printed


SMALL_CONSTANTS = 2000  # parameters + buffers of "many small", 16 floats each
LARGE = (3, 4096)  # "few large": layers of Linear(width, width)
STARTS = 15  # interpreter starts per side
XNNPACK_LAYERS = (250, 1000, 2500)  # Linear(16, 16) layers, a row each
PAIRS = 7  # guarded and unguarded runs per measurement


class Row(NamedTuple):
    measurement: str
    guarded: str
    baseline: str = "-"
    ratio: str = "-"
    spread: str = "-"
    goal: str = "-"
    met: str = "-"


def seconds(x: float) -> str:
    return f"{x:.3f} s"


def millis(x: float) -> str:
    return f"{x * 1e3:.2f} ms"


def yes_no(met: bool) -> str:
    return "yes" if met else "no"


class Pairs(NamedTuple):
    """Guarded (`on`) and baseline (`off`) values, pair by pair."""

    on: list[float]
    off: list[float]

    def ratio_row(self, name: str, unit: Callable[[float], str], goal: float) -> Row:
        """Met within `goal` of 1, or within the A/A noise (baseline to baseline)."""
        ratios = [a / b for a, b in zip(self.on, self.off)]
        later = self.off[1:] or self.off
        noise = median(abs(b / a - 1) for a, b in zip(self.off, later))
        spread = f"{min(ratios) - 1:+.1%} .. {max(ratios) - 1:+.1%} (A/A ±{noise:.1%})"
        miss = abs(median(ratios) - 1)
        met = "yes" if miss <= goal else "no, within noise" if miss <= noise else "no"
        cells = f"{median(ratios):.3f}", spread, f"within {goal * 100:g}%", met
        return Row(name, unit(median(self.on)), unit(median(self.off)), *cells)


def order(pairs: int) -> list[bool]:
    """Guarded or not, run by run: `pairs` pairs, which side first alternating."""
    return [on for i in range(pairs) for on in [(True, False), (False, True)][i % 2]]


def paired(sides: list[bool], values: list[float]) -> Pairs:
    on = [value for side, value in zip(sides, values) if side]
    return Pairs(on, [value for side, value in zip(sides, values) if not side])


def timed(call: Callable[..., object], *args: Any) -> float:
    start = time.perf_counter()
    call(*args)
    return time.perf_counter() - start


def interleaved(call: Callable[[bool], object], pairs: int) -> Pairs:
    """call(True)'s and call(False)'s wall times, in this process."""
    sides = order(pairs)
    return paired(sides, [timed(call, on) for on in sides])


def child(args: list[str], guard: bool) -> "subprocess.CompletedProcess[str]":
    """`python ARGS`: from the package's cached bytecode, as from a wheel."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env[GUARD] = str(int(guard))
    command = [sys.executable, *args]
    ran = subprocess.run(command, env=env, capture_output=True, text=True)
    if ran.returncode:
        raise RuntimeError(f"{args} (guard {guard}) failed:\n{ran.stderr[-4000:]}")
    return ran


def measured(runs: Runs) -> Results:
    """Each child's last line, one at a time; refused unless only guarded ones patch."""
    logs = [child([__file__, "--child", *args], on).stdout for args, on in runs]
    results = [json.loads(log.splitlines()[-1]) for log in logs]
    for (args, on), result in zip(runs, results):
        if bool(result.pop("patched")) != on:
            raise RuntimeError(f"{GUARD}={int(on)}, {args}: the child's guard differs")
    return results


class Meter:
    """The guard's own wall time in a guarded child (errs high: its clock reads count)."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def add(self, function: Callable[..., Any], sign: int = 1) -> Callable[..., Any]:
        """`function`, its time counted (with sign -1, taken off)."""

        def metered(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += sign * (time.perf_counter() - start)

        return metered

    def own(self, wrapper: Callable[..., Any]) -> Callable[..., Any]:
        """`wrapper(original, ...)`, metered less the original that it calls."""

        def metered(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self.add(wrapper)(self.add(original, -1), *args, **kwargs)

        metered.__wrapped__ = wrapper  # type: ignore[attr-defined]  # _patch reads its parameters
        return metered


def meter_sites() -> Meter:
    """Every site's wrapper, metered, through the public uninstall() and install()."""
    from executorch_device_guard import _sites

    meter = Meter()
    if status().installed:
        uninstall()
        _sites.WRAPPERS.update({k: meter.own(w) for k, w in _sites.WRAPPERS.items()})
        install()
    return meter


def to_executorch_child(model: str) -> dict[str, Any]:
    """One to_executorch() call: it mutates the program, and a second would be warm."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    class ManySmall(torch.nn.Module):
        def __init__(self, n: int) -> None:  # half parameters, half buffers
            super().__init__()
            self.weights = torch.nn.ParameterList(map(torch.randn, [16] * (n // 2)))
            for i in range(n - n // 2):
                self.register_buffer(f"b{i}", torch.randn(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            w = torch.cat(list(self.weights)).reshape(-1, 16).sum(0)
            return x * w + torch.cat(list(self.buffers())).reshape(-1, 16).sum(0)

    layers, width = LARGE
    if model == "many-small":
        module, x = ManySmall(SMALL_CONSTANTS), torch.randn(1, 16)
        what = f"{SMALL_CONSTANTS} constants of 16 floats"
    else:
        linears = (torch.nn.Linear(width, width, bias=False) for _ in range(layers))
        module, x = torch.nn.Sequential(*linears), torch.randn(1, width)
        what = f"{layers} x {width}^2 float32"
    with torch.no_grad():
        edge = to_edge_transform_and_lower(torch.export.export(module.eval(), (x,)))
    meter = meter_sites()
    wall, cpu = time.perf_counter(), time.process_time()
    program = edge.to_executorch()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    what += f", {len(program.buffer) / 1e6:.1f} MB .pte"
    return {"wall": wall, "cpu": cpu, "guard": meter.seconds, "what": what}


def import_child() -> dict[str, Any]:
    """The first `import executorch.exir`, the guard's finder and patching metered."""
    meter = Meter()
    _hook._Finder.find_spec = meter.add(_hook._Finder.find_spec)  # type: ignore[method-assign]
    _hook._exec_and_patch = meter.own(_hook._exec_and_patch)
    wall, cpu = time.perf_counter(), time.process_time()
    import executorch.exir  # noqa: F401

    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall": wall, "cpu": cpu, "guard": meter.seconds}


def xnnpack_child(layers: int) -> dict[str, Any]:
    """The XNNPACK lowering and to_executorch() of `layers` x Linear(16, 16): small
    constants, so that the run is made of the per-constant work that calls the guard."""
    import executorch.backends.xnnpack.partition.xnnpack_partitioner as xnnpack
    import torch
    from executorch.exir import to_edge_transform_and_lower

    module = torch.nn.Sequential(*(torch.nn.Linear(16, 16) for _ in range(layers)))
    with torch.no_grad():
        exported = torch.export.export(module.eval(), (torch.randn(1, 16),))
    meter = meter_sites()
    start = time.perf_counter()
    partitioner = [xnnpack.XnnpackPartitioner()]
    to_edge_transform_and_lower(exported, partitioner=partitioner).to_executorch()
    wall = time.perf_counter() - start
    return {"wall": wall, "guard": meter.seconds, "calls": meter.calls}


def share_row(name: str, own: float, share: float, of: float, spread: str = "-") -> Row:
    """The guard's own time, `share` of the run's wall time `of`: met within 1%."""
    cells = f"{millis(own)} ({share:.3%})", f"of {seconds(of)}", "-", spread
    return Row(name, *cells, "within 1%", yes_no(share <= 0.01))


def pair_rows(name: str, own: str, sides: list[bool], runs: Results) -> list[Row]:
    """Guarded next to unguarded (wall, CPU), and the guard's share of guarded wall."""
    title = f"{name} ({runs[0]['what']})" if "what" in runs[0] else name
    keys = "wall", "cpu", "guard"
    wall, cpu, guard = (paired(sides, [run[key] for run in runs]) for key in keys)
    shares = [g / w for g, w in zip(guard.on, wall.on)]
    spread = f"+{min(shares):.3%} .. +{max(shares):.3%}"
    name_own = f"{name}, time in the guard's {own}"
    return [
        wall.ratio_row(f"{title}, wall", seconds, 0.01),
        cpu.ratio_row(f"{name}, CPU time", seconds, 0.01),
        share_row(name_own, median(guard.on), median(shares), median(wall.on), spread),
    ]


def start_rows() -> list[Row]:
    """What the startup line costs at interpreter start, and what it imports."""
    child(["-c", "pass"], True)  # writes the package's bytecode once
    costs: list[float] = []
    heavy: set[str] = set()
    for _ in range(STARTS):
        stderr = child(["-X", "importtime", "-c", "pass"], True).stderr
        # Lines "import time: self | cumulative | module", modules indented by depth.
        found = re.findall(r"^import time: +\d+ \| +(\d+) \|( *)(\S+)$", stderr, re.M)
        ours = [(len(p), int(us)) for us, p, m in found if m.split(".")[0] == PACKAGE]
        costs.append(sum(us for depth, us in ours if depth == min(ours)[0]) / 1e6)
        heavy |= {m for *_, m in found if m.split(".")[0] in ("torch", "executorch")}
    starts = interleaved(lambda on: child(["-c", "pass"], on), STARTS)
    took, span = median(costs), f"{millis(min(costs))} .. {millis(max(costs))}"
    name = "interpreter start: import time of the startup line"
    met = yes_no(took < 1e-3)
    rows = [Row(name, millis(took), spread=span, goal="< 1 ms", met=met)]
    name, imported = "interpreter start: torch / executorch imported", sorted(heavy)
    met = yes_no(not heavy)
    rows.append(Row(name, ", ".join(imported) or "neither", goal="neither", met=met))
    name = "interpreter start, `python -c pass` guard on vs off, wall"
    return [*rows, starts.ratio_row(name, millis, 0.025)]


def xnnpack_rows(runs: Results) -> list[Row]:
    """Per size, the guard's share of one guarded run (minutes at full size)."""
    rows: list[Row] = []
    shares: list[str] = []
    for layers, run in zip(XNNPACK_LAYERS, runs):
        share, guard, calls = run["guard"] / run["wall"], run["guard"], run["calls"]
        shares.append(f"{share:.3%} ({guard / calls * 1e6:.1f} us a call)")
        name = f"XNNPACK lowering + to_executorch(), {layers} x Linear(16, 16), the guard's share ({calls} calls)"
        rows.append(share_row(name, guard, share, run["wall"]))
    grown = " / ".join(map(str, XNNPACK_LAYERS))
    name = f"XNNPACK, the guard's share as layers grow ({grown})"
    return [*rows, Row(name, " / ".join(shares), goal="flat")]


def measure() -> list[Row]:
    """Every row; the children one at a time."""
    sides = order(PAIRS)
    models = ("many-small", "few-large")
    children: Runs = [(["to_executorch", m], on) for m in models for on in sides]
    children += [(["xnnpack", str(n)], True) for n in XNNPACK_LAYERS]
    results = measured(children)
    rows = start_rows()
    for model in models:
        runs = [results.pop(0) for _ in sides]
        rows += pair_rows(f"to_executorch(), {model}", "wrappers", sides, runs)
    runs = measured([(["import"], on) for on in sides])
    rows += pair_rows(
        "first `import executorch.exir`", "finder and patching", sides, runs
    )
    return rows + xnnpack_rows(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # prints its result, and whether the guard patched any site
        kind, *rest = args.child
        if kind == "to_executorch":
            result = to_executorch_child(rest[0])
        elif kind == "xnnpack":
            result = xnnpack_child(int(rest[0]))
        else:
            result = import_child()
        print(json.dumps({**result, "patched": len(status().patched)}))
        return
    from importlib.metadata import version

    from upstream.suites import table

    started, rows = time.perf_counter(), measure()
    names = ("torch", "executorch", "executorch-device-guard")
    versions = ", ".join(f"{name} {version(name)}" for name in names)
    text = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {versions}\n\n"
    text += table(Row._fields, rows)
    print(f"{text}\n\n{PAIRS} pairs, {time.perf_counter() - started:.0f} s")
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
