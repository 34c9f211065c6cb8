# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the device guard costs, and that its cost stays flat as constants grow: one table,
guarded next to unguarded, measured in one run.

    python bench/bench.py

The guard is wired in at interpreter start, so each measurement runs in fresh child
processes, guarded and unguarded in pairs whose first side alternates, so that a shared
machine's drifts hit both sides alike. pyperf was weighed and not used: it times a statement
in worker processes of one environment, while here the two sides differ in the environment
at interpreter start, and the figure that matters, the guard's own time, is metered inside
each guarded child, which pyperf does not report. Whole-run ratios cannot show 1% on a
shared machine; the guard's own time, metered in each guarded run, can.

`Method.execute` of a small program (executorch.runtime) is timed per call over CALLS calls of
host inputs, the path every run takes; `python bench/bench.py execute` measures only that.

`to_executorch()` and XNNPACK's lowering run at each of SIZES constants. An XNNPACK lowering
of 2,500 layers takes minutes on 2 cores, so its sizes run XNNPACK_PAIRS pairs: the guard's
share, not the wall ratio, is the row that shows whether its cost grows with the program."""

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from statistics import median
from typing import Any

# Imported at interpreter start, by the startup line, guard on or off.
from executorch_device_guard import _hook, install, status, uninstall

SIZES = (250, 1000, 2500)  # constants: buffers of 16 floats, or Linear(16, 16) weights
STARTS = 15  # interpreter starts
PAIRS = 3  # guarded and unguarded runs per measurement
XNNPACK_PAIRS = 1
CALLS = 20_000  # Method.execute calls per child, after as many again to warm up
HEADERS = ("measurement", "guarded", "unguarded", "ratio", "spread", "goal", "met")


def child(args: list[str], guard: bool) -> "subprocess.CompletedProcess[str]":
    """`python ARGS`: from the package's cached bytecode, as from a wheel."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env[_hook.ENV_VAR] = str(int(guard))
    command = [sys.executable, *args]
    ran = subprocess.run(command, env=env, capture_output=True, text=True)
    if ran.returncode:
        raise RuntimeError(f"{args} (guard {guard}) failed:\n{ran.stderr[-4000:]}")
    return ran


class Meter:
    """The guard's own wall time in a guarded child (errs high: its clock reads count)."""

    def __init__(self) -> None:
        self.seconds = 0.0

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
            return self.add(wrapper)(self.add(original, -1), *args, **kwargs)

        metered.__wrapped__ = wrapper  # type: ignore[attr-defined]  # _patch reads its parameters
        return metered


def meter_sites(meter: Meter) -> None:
    """Each site's wrapper metered, where the guard is on; after ExecuTorch is imported."""
    from executorch_device_guard import _sites

    if status().installed:
        uninstall()
        for name, wrapper in list(_sites.WRAPPERS.items()):
            _sites.WRAPPERS[name] = meter.own(wrapper)
        install()


def to_executorch_child(meter: Meter, size: int) -> float:
    """One to_executorch() call's wall time, of `size` buffers (the guard's work is per
    constant)."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    class ManySmall(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for i in range(size):
                self.register_buffer(f"b{i}", torch.randn(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.stack(list(self.buffers())).sum(0)

    with torch.no_grad():
        exported = torch.export.export(ManySmall().eval(), (torch.randn(1, 16),))
        edge = to_edge_transform_and_lower(exported)
    meter_sites(meter)
    start = time.perf_counter()
    edge.to_executorch()
    return time.perf_counter() - start


def xnnpack_child(meter: Meter, size: int) -> float:
    """XNNPACK's lowering and to_executorch() of `size` Linear(16, 16) layers without bias:
    `size` small constants, each read by the guarded XNNPACK site."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.exir import to_edge_transform_and_lower

    layers = [torch.nn.Linear(16, 16, bias=False) for _ in range(size)]
    with torch.no_grad():
        exported = torch.export.export(
            torch.nn.Sequential(*layers).eval(), (torch.randn(1, 16),)
        )
    meter_sites(meter)
    start = time.perf_counter()
    lowered = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    lowered.to_executorch()
    return time.perf_counter() - start


def execute_child(meter: Meter) -> float:
    """One `Method.execute` call's wall time, of x + y on two 2x4 host tensors: the guard's
    check of each input, on the path of every call. The meter's clock reads would be a large
    part of a call, so the guard's own time is metered in calls after the timed ones."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    class Add(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + y

    inputs = [torch.randn(2, 4), torch.randn(2, 4)]
    exported = torch.export.export(Add(), tuple(inputs))
    buffer = to_edge_transform_and_lower(exported).to_executorch().buffer
    program = Runtime.get().load_program(buffer)
    method = program.load_method("forward")
    for _ in range(CALLS):
        method.execute(inputs)
    start = time.perf_counter()
    for _ in range(CALLS):
        method.execute(inputs)
    wall = (time.perf_counter() - start) / CALLS
    meter_sites(meter)  # the guard keeps the loaded method's program across this
    for _ in range(CALLS):
        method.execute(inputs)
    meter.seconds /= CALLS
    return wall


def import_child(meter: Meter) -> float:
    """The first `import executorch.exir`, the guard's finder and patching metered."""
    _hook._Finder.find_spec = meter.add(_hook._Finder.find_spec)  # type: ignore[method-assign]
    _hook._exec_and_patch = meter.own(_hook._exec_and_patch)
    start = time.perf_counter()
    import executorch.exir  # noqa: F401

    return time.perf_counter() - start


class Paired:
    """Guarded next to unguarded runs of one measurement."""

    def __init__(self, args: list[str], pairs: int) -> None:
        order = []
        for i in range(pairs):
            order += [(True, False), (False, True)][i % 2]
        runs = []
        for guard in order:
            log = child([__file__, "--child", *args], guard).stdout
            runs.append(json.loads(log.splitlines()[-1]))
        if [run["patched"] > 0 for run in runs] != order:
            raise RuntimeError(
                f"{args}: a child's guard is not what it was asked to be"
            )
        self.on = [run for run, guard in zip(runs, order) if guard]
        self.off = [run for run, guard in zip(runs, order) if not guard]
        self.ratios = sorted(a["wall"] / b["wall"] for a, b in zip(self.on, self.off))
        self.shares = sorted(run["guard"] / run["wall"] for run in self.on)

    def rows(self, name: str) -> list[list[str]]:
        """The median ratio of wall times, met within 1%; the guard's own share of the
        guarded wall, met within 1%."""
        ratio, share = median(self.ratios), median(self.shares)
        own = median(run["guard"] for run in self.on)
        walls = [
            f"{median(r['wall'] for r in side):.3f} s" for side in (self.on, self.off)
        ]
        spread = f"{self.ratios[0] - 1:+.1%} .. {self.ratios[-1] - 1:+.1%}"
        shares = f"+{self.shares[0]:.3%} .. +{self.shares[-1]:.3%}"
        return [
            [f"{name}, wall", *walls, f"{ratio:.3f}", spread, "within 1%"]
            + ["yes" if abs(ratio - 1) <= 0.01 else "no"],
            [
                f"{name}, time in the guard's own code",
                f"{own * 1e3:.2f} ms ({share:.3%})",
            ]
            + ["-", "-", shares, "within 1%", "yes" if share <= 0.01 else "no"],
        ]


def execute_rows(paired: Paired) -> list[list[str]]:
    """Per call, in microseconds, the guard's own time as a share of the unmetered guarded
    wall; no goal: a call of a small program is mostly overhead."""
    walls = [
        f"{median(r['wall'] for r in side) * 1e6:.2f} us"
        for side in (paired.on, paired.off)
    ]
    own = median(run["guard"] for run in paired.on)
    spread = f"{paired.ratios[0] - 1:+.1%} .. {paired.ratios[-1] - 1:+.1%}"
    shares = f"+{paired.shares[0]:.1%} .. +{paired.shares[-1]:.1%}"
    name = "`Method.execute`, 2 host inputs, per call"
    return [
        [f"{name}, wall", *walls, f"{median(paired.ratios):.3f}", spread, "-", "-"],
        [f"{name}, time in the guard's own code", f"{own * 1e6:.2f} us"]
        + ["-", "-", shares, "-", "-"],
    ]


def print_table(rows: list[list[str]], started: float) -> None:
    from importlib.metadata import version

    names = ("torch", "executorch", "executorch-device-guard")
    versions = ", ".join(f"{name} {version(name)}" for name in names)
    print(f"\n{os.cpu_count()} cores, Python {sys.version.split()[0]}, {versions}\n")
    for row in [HEADERS, ["-" * len(h) for h in HEADERS], *rows]:
        print("| " + " | ".join(row) + " |")
    print(
        f"\n{PAIRS} pairs ({XNNPACK_PAIRS} for XNNPACK), {time.perf_counter() - started:.0f} s"
    )


def start_rows() -> list[list[str]]:
    """What the startup line costs at interpreter start, and what it imports."""
    child(["-c", "pass"], True)  # writes the package's bytecode once
    costs = []
    heavy = set()
    for _ in range(STARTS):
        stderr = child(["-X", "importtime", "-c", "pass"], True).stderr
        # Lines "import time: self | cumulative | module", modules indented by depth.
        found = re.findall(r"^import time: +\d+ \| +(\d+) \| *(\S+)$", stderr, re.M)
        for microseconds, module in found:
            if module == "executorch_device_guard":
                costs.append(int(microseconds) / 1e6)
            if module.split(".")[0] in ("torch", "executorch"):
                heavy.add(module)
    spread = f"{min(costs) * 1e3:.2f} .. {max(costs) * 1e3:.2f} ms"
    took, imported = median(costs), ", ".join(sorted(heavy)) or "neither"
    return [
        ["interpreter start: import time of the startup line", f"{took * 1e3:.2f} ms"]
        + ["-", "-", spread, "< 1 ms", "yes" if took < 1e-3 else "no"],
        ["interpreter start: torch / executorch imported", imported]
        + ["-", "-", "-", "neither", "no" if heavy else "yes"],
    ]


def scaling_row(name: str, measured: list[Paired]) -> list[str]:
    """The guard's share at each size: flat if the largest is within 1% of the run."""
    shares = [median(paired.shares) for paired in measured]
    cells = " / ".join(f"{share:.3%}" for share in shares)
    sizes = " / ".join(str(size) for size in SIZES)
    flat = max(shares) <= 0.01
    return [
        f"{name}, the guard's share at {sizes} constants",
        cells,
        *("-", "-", "-", "within 1% at each", "yes" if flat else "no"),
    ]


def main() -> None:
    if sys.argv[1:2] == ["--child"]:  # prints its times, and how many sites it patched
        meter = Meter()
        if sys.argv[2:3] == ["to_executorch"]:
            wall = to_executorch_child(meter, int(sys.argv[3]))
        elif sys.argv[2:3] == ["xnnpack"]:
            wall = xnnpack_child(meter, int(sys.argv[3]))
        elif sys.argv[2:3] == ["execute"]:
            wall = execute_child(meter)
        else:
            wall = import_child(meter)
        patched = len(status().patched)
        print(json.dumps({"wall": wall, "guard": meter.seconds, "patched": patched}))
        return
    started = time.perf_counter()
    if sys.argv[1:2] == ["execute"]:
        print_table(execute_rows(Paired(["execute"], PAIRS)), started)
        return
    rows = start_rows()
    rows += Paired([], PAIRS).rows("first `import executorch.exir`")
    rows += execute_rows(Paired(["execute"], PAIRS))
    for kind, title, pairs in (
        ("to_executorch", "to_executorch()", PAIRS),
        ("xnnpack", "XNNPACK lowering + to_executorch()", XNNPACK_PAIRS),
    ):
        measured = []
        for size in SIZES:
            paired = Paired([kind, str(size)], pairs)
            rows += paired.rows(f"{title}, {size} constants")
            measured.append(paired)
            print(f"{title}, {size} constants: {time.perf_counter() - started:.0f} s")
        rows.append(scaling_row(title, measured))
    print_table(rows, started)


if __name__ == "__main__":
    main()
