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

`Method.execute` (executorch.runtime) of programs that add 2 and 16 host tensors, the path every
run takes, is timed per call in this one process: a Method loaded with the guard on next to one
loaded with it off (each guarded Method gets its own checked execute), in ROUNDS rounds of BATCH
calls each, the sides in turn, with the ways of checking that were weighed beside them.
`python bench/bench.py execute` measures only that.

`to_executorch()` and XNNPACK's lowering run at each of SIZES constants. An XNNPACK lowering
of 2,500 layers takes minutes on 2 cores, so its sizes run XNNPACK_PAIRS pairs: the guard's
share, not the wall ratio, is the row that shows whether its cost grows with the program."""

import importlib
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
ROUNDS, BATCH = (
    1000,
    100,
)  # Method.execute: rounds of the sides in turn, calls a side a round
HEADERS = ("measurement", "guarded", "unguarded", "ratio", "spread", "goal", "met")
EXECUTE_HEADERS = ("measurement", "median", "unguarded", "more", "spread of more")
EXECUTE_HEADERS += ("more, fastest rounds", "goal", "met")


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

        metered.__wrapped__ = wrapper  # type: ignore[attr-defined]  # _wrapping reads its parameters
        return metered


def meter_sites(meter: Meter) -> None:
    """Each site's wrapper metered, where the guard is on; after ExecuTorch is imported."""
    from executorch_device_guard._site_table import WRAPPERS
    from executorch_device_guard._wrapping import wrapper_home

    if status().installed:
        uninstall()
        for name in WRAPPERS:
            wrappers, function = wrapper_home(name)
            setattr(wrappers, function, meter.own(getattr(wrappers, function)))
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


def import_child(meter: Meter) -> float:
    """The first `import executorch.exir`, the guard's finder and patching metered."""
    _hook._Finder.find_spec = meter.add(_hook._Finder.find_spec)  # type: ignore[method-assign]
    if _hook.finder() is not None:
        # The wrapping module, which the hook imports at the first guarded module, imported
        # here (and metered) so that its patch_module can be metered.
        wrapping = meter.add(importlib.import_module)(
            "executorch_device_guard._wrapping"
        )
        wrapping.patch_module = meter.add(wrapping.patch_module)
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


def execute_options(method: Any, original: Callable[..., Any]) -> dict[str, Any]:
    """The ways of checking a call's inputs that were weighed, each as an execute of `method`
    (loaded unguarded): _wrapping's wrapping of Method.execute (two Python calls a call) with
    f8934a6's storage test of each input, or with this code's is_cpu test; and this code's
    checked execute calling ExecuTorch's Method.execute (one more call) instead of the
    bindings."""
    import types

    import torch

    from executorch_device_guard import _runtime_sites

    def storage_test(original: Any, self: Any, inputs: Any) -> Any:
        for value in inputs:
            if type(value) is torch.Tensor and value.layout == torch.strided:
                if value.untyped_storage().device.type != "cpu":
                    break
        return original(self, inputs)

    def is_cpu_test(original: Any, self: Any, inputs: Any) -> Any:
        for value in inputs:
            if not value.is_cpu:
                break
        return original(self, inputs)

    def wrapped(around: Any) -> Any:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            return around(original, *args, **kwargs)

        return types.MethodType(guarded, method)

    bound = types.MethodType(original, method)
    return {
        "wrapper of Method.execute, storage test (f8934a6)": wrapped(storage_test),
        "wrapper of Method.execute, is_cpu test": wrapped(is_cpu_test),
        "checked execute calling Method.execute": _runtime_sites._checked(
            bound, "forward", frozenset()
        ),
    }


def execute_rows() -> list[list[str]]:
    """Per call, in microseconds: each side's median, and the median of its difference from the
    unguarded call of the same round, with the middle half and the whole range of those
    differences, and the difference of the sides' fastest rounds (the least disturbed on a
    shared machine); and the cost of each further input, from 2 to 16, by the medians."""
    import os

    import torch
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Method, Runtime

    class AddAll(torch.nn.Module):
        """The sum of its inputs: a call that does almost nothing but take them."""

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            total = inputs[0]
            for value in inputs[1:]:
                total = total + value
            return total

    load = os.getloadavg()
    rows, costs = [], {}
    for count in (2, 16):
        inputs = [torch.randn(2, 4) for _ in range(count)]
        program = torch.export.export(AddAll(), tuple(inputs))
        buffer = to_edge_transform_and_lower(program).to_executorch().buffer
        programs = []  # a Method reads its program's bytes: they must outlive it
        sides: dict[str, Callable[..., Any]] = {}
        for guard in (False, True):
            install() if guard else uninstall()
            programs.append(Runtime.get().load_program(buffer))
            sides["guard on" if guard else "guard off"] = (
                programs[-1].load_method("forward").execute
            )
        uninstall()
        programs.append(Runtime.get().load_program(buffer))
        sides.update(
            execute_options(programs[-1].load_method("forward"), Method.execute)
        )
        install()
        times: dict[str, list[float]] = {side: [] for side in sides}
        for round in range(ROUNDS):
            names = list(sides)
            names = names[round % len(names) :] + names[: round % len(names)]
            for name in names:
                execute = sides[name]
                start = time.perf_counter()
                for _ in range(BATCH):
                    execute(inputs)
                times[name].append((time.perf_counter() - start) / BATCH * 1e6)
        off = times["guard off"]
        for name, measured in times.items():
            more = sorted(a - b for a, b in zip(measured, off))
            quarter, three = more[len(more) // 4], more[3 * len(more) // 4]
            costs[count, name] = median(more)
            goal = "-" if count != 2 or name == "guard off" else "<= +0.3 us"
            met = "-" if goal == "-" else "yes" if median(more) <= 0.3 else "no"
            rows.append(
                [
                    f"`Method.execute`, {count} host inputs, {name}",
                    f"{median(measured):.2f} us",
                    f"{median(off):.2f} us",
                    f"{median(more):+.3f} us",
                    f"{quarter:+.3f} .. {three:+.3f} us (all {more[0]:+.3f} .. {more[-1]:+.3f})",
                    f"{min(measured) - min(off):+.3f} us",
                    goal,
                    met,
                ]
            )
    for name in [n for (count, n) in costs if count == 2 and n != "guard off"]:
        each = (costs[16, name] - costs[2, name]) / 14
        rows.append(
            [f"`Method.execute`, {name}, each further input", f"{each:+.3f} us"]
            + ["-", "-", "-", "-", "<= +0.03 us", "yes" if each <= 0.03 else "no"]
        )
    rows.append(
        [
            f"load average (1, 5, 15 min) at start: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}"
        ]
        + ["-"] * 7
    )
    return rows


def load_rows() -> list[list[str]]:
    """What the guard adds to loading a program (Runtime.load_program, guard off), of a small
    program and of one with 64 MiB of constants, from a file and from bytes: at load, a file's
    mapping (bytes: nothing); at the first load_method, reading the plans, next to that
    load_method; and, for the record, reading the plans at load instead. ROUNDS // 20 rounds,
    medians and ranges."""
    import tempfile
    from pathlib import Path

    import torch
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    from executorch_device_guard._runtime_sites import mapped, plans_of

    uninstall()
    rows = []
    for name, layers in (("x + y", 0), ("16 x Linear(1024, 1024)", 16)):
        model = torch.nn.Sequential(
            *(torch.nn.Linear(1024, 1024) for _ in range(layers))
        )
        example = (torch.randn(1, 1024),)
        edge = to_edge_transform_and_lower(torch.export.export(model.eval(), example))
        buffer = edge.to_executorch().buffer
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder, "program.pte")
            path.write_bytes(buffer)
            for source, data in (("file", str(path)), ("bytes", buffer)):
                times: dict[str, list[float]] = {}
                for _ in range(ROUNDS // 20):
                    clock = [time.perf_counter()]
                    program = Runtime.get().load_program(data)
                    clock.append(time.perf_counter())
                    held = mapped(data) if source == "file" else program._data
                    clock.append(time.perf_counter())
                    program.load_method("forward")
                    clock.append(time.perf_counter())
                    plans_of(held)
                    clock.append(time.perf_counter())
                    steps = ("load", "mapping", "method", "plans")
                    for key, before, after in zip(steps, clock, clock[1:]):
                        times.setdefault(key, []).append((after - before) * 1e6)
                    del program, held
                size = f"{name} ({len(buffer) >> 10} KiB), from {source}"
                for what, ours, theirs in (
                    (
                        "at load: the file's mapping (bytes: the Program's)",
                        "mapping",
                        "load",
                    ),
                    ("at the first load_method: the plans", "plans", "method"),
                    ("the plans read at load instead", "plans", "load"),
                ):
                    share = median(times[ours]) / median(times[theirs])
                    rows.append(
                        [
                            f"{size}, {what}",
                            f"{median(times[ours]):.1f} us",
                            f"{median(times[theirs]):.1f} us ({theirs})",
                            f"{share:.1%}",
                            f"{min(times[ours]):.1f} .. {max(times[ours]):.1f} us; "
                            f"{theirs} {min(times[theirs]):.1f} .. {max(times[theirs]):.1f} us",
                            "-",
                            "< 10%",
                            "yes" if share < 0.1 else "no",
                        ]
                    )
    install()
    return rows


def print_table(
    rows: list[list[str]], footer: str, headers: tuple[str, ...] = HEADERS
) -> None:
    from importlib.metadata import version

    names = ("torch", "executorch", "executorch-device-guard")
    versions = ", ".join(f"{name} {version(name)}" for name in names)
    print(f"\n{os.cpu_count()} cores, Python {sys.version.split()[0]}, {versions}\n")
    for row in [headers, ["-" * len(h) for h in headers], *rows]:
        print("| " + " | ".join(row) + " |")
    print(f"\n{footer}")


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
        else:
            wall = import_child(meter)
        patched = len(status().patched)
        print(json.dumps({"wall": wall, "guard": meter.seconds, "patched": patched}))
        return
    started = time.perf_counter()
    rounds = f"{ROUNDS} rounds of {BATCH} calls a side"
    if sys.argv[1:2] == ["execute"]:
        execute = execute_rows() + load_rows()
        print_table(
            execute, f"{rounds}, {time.perf_counter() - started:.0f} s", EXECUTE_HEADERS
        )
        return
    rows = start_rows()
    rows += Paired([], PAIRS).rows("first `import executorch.exir`")
    execute = execute_rows() + load_rows()
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
    took = f"{time.perf_counter() - started:.0f} s"
    print_table(rows, f"{PAIRS} pairs ({XNNPACK_PAIRS} for XNNPACK), {took}")
    print_table(execute, rounds, EXECUTE_HEADERS)


if __name__ == "__main__":
    main()
