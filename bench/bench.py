# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the device guard costs: one table, guarded next to unguarded.

The guard is wired in at interpreter start, so every CPU measurement runs in fresh child processes with
EXECUTORCH_DEVICE_GUARD=1 or 0, and times what a user pays once per process: the first to_executorch(), the interpreter
start, the first import of executorch.exir. Guarded and unguarded children alternate (the first of each pair alternates
too), and each pair gives one ratio, so the slow drifts of a shared machine hit both sides alike. The XNNPACK lowering
of many layers takes minutes a run, so its rows rest on the guard's own time metered inside each guarded run. The GPU
section runs in this process. `--section cpu` includes the XNNPACK rows; `xnnpack` runs them alone."""

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from statistics import median
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

GUARD = "EXECUTORCH_DEVICE_GUARD"
PACKAGE = "executorch_device_guard"
COLUMNS = ("measurement", "guarded", "unguarded / baseline", "ratio", "spread", "A/A noise", "goal", "met?")


@dataclass(frozen=True)
class Sizes:
    """Model and tensor sizes: the issue's for a real run, tiny ones for the smoke test."""

    small_constants: int  # parameters + buffers of the "many small" model, 16 floats each
    large_layers: int  # Linear(width, width) layers of the "few large" model
    large_width: int
    gpu_shape: Tuple[int, int, int, int]  # 4-D, so that it has a channels-last layout
    start_runs: int  # interpreter starts per side
    named_shape: Tuple[int, int, int, int]  # named data on the host and simulated on cuda:0
    per_byte_shape: Tuple[int, int, int, int]  # next to upstream's per-byte path: seconds a MiB
    xnnpack_layers: Tuple[int, ...]  # Linear(16, 16) layers lowered to XNNPACK, one size per row
    profile_layers: int  # the size profiled with cProfile


FULL = Sizes(2000, 3, 4096, (32, 256, 80, 80), 15, (8, 64, 64, 64), (4, 16, 64, 64), (250, 1000, 2500), 1000)
QUICK = Sizes(20, 3, 64, (2, 16, 32, 32), 3, (2, 4, 8, 8), (1, 2, 4, 4), (4,), 4)


@dataclass(frozen=True)
class Row:
    measurement: str
    guarded: str
    baseline: str = "-"
    ratio: str = "-"
    spread: str = "-"
    noise: str = "-"
    goal: str = "-"
    met: str = "-"


# Statistics and formatting
def seconds(x: float) -> str:
    return f"{x:.3f} s"


def millis(x: float) -> str:
    return f"{x * 1e3:.2f} ms"


def verdict(met: bool, within_noise: bool = False) -> str:
    return "yes" if met else "no, within noise" if within_noise else "no"


@dataclass(frozen=True)
class Pairs:
    """Times of interleaved guarded (`on`) and baseline (`off`) runs, pair by pair."""

    on: List[float]
    off: List[float]

    @property
    def ratios(self) -> List[float]:
        return [a / b for a, b in zip(self.on, self.off)]

    @property
    def ratio(self) -> float:
        return median(self.ratios)

    @property
    def noise(self) -> Optional[float]:
        """Run-to-run noise of the baseline alone: median |b[i+1] / b[i] - 1| over its runs."""
        return median(abs(b / a - 1) for a, b in zip(self.off, self.off[1:])) if len(self.off) > 1 else None

    def cells(self, invert: bool = False) -> Tuple[str, str]:
        """The spread and A/A noise columns."""
        ratios = [1 / r for r in self.ratios] if invert else self.ratios
        spread = f"{(min(ratios) - 1) * 100:+.1f}% .. {(max(ratios) - 1) * 100:+.1f}%"
        return spread, "-" if self.noise is None else f"±{self.noise * 100:.1f}%"


def ratio_row(name: str, pairs: Pairs, unit: Callable[[float], str], limit: float) -> Row:
    """Row for times guarded / unguarded, met if the median pair ratio is within `limit` of 1."""
    off_by, goal = abs(pairs.ratio - 1), f"within {limit * 100:.0f}%"
    met = verdict(off_by <= limit, off_by <= (pairs.noise or 0))
    return Row(name, unit(median(pairs.on)), unit(median(pairs.off)), f"{pairs.ratio:.3f}", *pairs.cells(), goal, met)


def added_row(name: str, pairs: Pairs, limit: float) -> Row:
    """Row for interpreter starts: met if the guard adds under `limit` seconds (median vs median)."""
    added = median(pairs.on) - median(pairs.off)
    met = verdict(added < limit, added <= (pairs.noise or 0) * median(pairs.off))
    goal = f"< {limit * 1e3:g} ms added"
    return replace(ratio_row(name, pairs, millis, 0), goal=goal, met=f"{met} ({added * 1e3:+.2f} ms)")


def share_row(name: str, part: float, whole: float, whole_name: str, limit: float) -> Row:
    """A part of one run's time, as a share of that run's whole."""
    share = part / whole
    cells = f"{millis(part)} ({share * 100:.3f}%)", f"of {seconds(whole)} {whole_name}", f"{1 + share:.5f}"
    return Row(name, *cells, goal=f"within {limit * 100:g}%", met=verdict(share <= limit))


def throughput_row(name: str, nbytes: int, timed: Pairs, baseline: str, goal: str, named_data: bool) -> Row:
    """Row for GB/s, the measured side's over the baseline's, met at 0.90 or more. Named-data rows also
    show the measured side's time, and tell a miss within the A/A noise from one outside it."""
    throughput, goal = 1 / timed.ratio, f">= 0.90 x {goal}"
    on, off = (f"{nbytes / median(times) / 1e9:.2f} GB/s" for times in (timed.on, timed.off))
    on = f"{on} ({millis(median(timed.on))})" if named_data else on
    met = verdict(throughput >= 0.90, named_data and 1 - throughput <= (timed.noise or 0))
    return Row(name, on, f"{off} ({baseline})", f"{throughput:.3f}", *timed.cells(invert=True), goal, met)


def markdown(rows: Sequence[Row]) -> str:
    cells = [COLUMNS] + [tuple(vars(row).values()) for row in rows]
    widths = [max(len(str(line[i])) for line in cells) for i in range(len(COLUMNS))]
    lines = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths)) + " |" for line in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


# Measuring: child processes, interleaving, the guard's own time
def run_child(argv: Sequence[str], guard: bool) -> subprocess.CompletedProcess:
    # PYTHONDONTWRITEBYTECODE is dropped so that the package loads from cached bytecode, as from a pip-installed
    # wheel; an editable install would otherwise recompile it at every interpreter start, counted as the guard's.
    env = dict(os.environ, **{GUARD: "1" if guard else "0"})
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child {list(argv)} (guard={guard}) failed:\n{proc.stderr[-4000:]}")
    return proc


def child_result(argv: Sequence[str], guard: bool) -> Dict[str, Any]:
    """A child's result, the JSON it prints last; refused unless a guarded child, and only it, patched sites."""
    result = json.loads(run_child([__file__, *argv], guard).stdout.strip().splitlines()[-1])
    if bool(result["patched"]) != guard:
        raise RuntimeError(f"{GUARD}={int(guard)} but the child patched {result['patched']} sites")
    return result


def emit(result: Dict[str, Any]) -> None:
    """Child: prints its result for the parent, with the number of sites the guard patched."""
    import executorch_device_guard

    print(json.dumps({**result, "patched": len(executorch_device_guard.status().patched)}))


def interleaved(measure: Callable[[bool], Dict[str, float]], pairs: int) -> Dict[str, Pairs]:
    """Runs measure(True) and measure(False) `pairs` times each, alternating which goes first. measure
    returns its times by clock ("wall", "cpu"); the result pairs them up clock by clock."""
    result: Dict[str, Pairs] = {}
    for i in range(pairs):
        for guard in (True, False) if i % 2 == 0 else (False, True):
            for clock, value in measure(guard).items():
                timed = result.setdefault(clock, Pairs([], []))
                (timed.on if guard else timed.off).append(value)
    return result


def timed_call(fn: Callable[[], object], cuda: bool = False) -> float:
    """Seconds of one fn() call in this process, between two synchronizations if `cuda`."""
    import torch

    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def in_process(call: Callable[[bool], object], pairs: int, cuda: bool) -> Pairs:
    """call(True) next to call(False) in this process, after one warm-up each (allocator, lazy imports)."""
    call(True), call(False)
    return interleaved(lambda on: {"wall": timed_call(lambda: call(on), cuda)}, pairs)["wall"]


class Meter:
    """Sums the wall time spent in the guard's own functions, in a guarded child. On a shared machine the
    run-to-run noise of whole runs is far above 1%, while the guard's own share of a run barely moves with the
    load, so it tells whether the 1% goal holds. wrap() counts only the outermost of nested metered calls."""

    def __init__(self) -> None:
        self.seconds, self.depth, self.calls = 0.0, 0, 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def metered(*args: Any, **kwargs: Any) -> Any:
            self.depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.seconds += time.perf_counter() - start

        return metered

    def own(self, wrapper: Callable[..., Any]) -> Callable[..., Any]:
        """A _sites wrapper that adds its own time, less that of the original it calls, and counts its
        calls. Subtracting the original also keeps a wrapper that runs inside another's original from
        being counted twice; the meter's own closure and clock reads count as the guard's: it errs high."""

        @functools.wraps(wrapper)  # _patch reads the wrapper's parameter names through __wrapped__
        def metered(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            inside = 0.0

            def timed_original(*args: Any, **kwargs: Any) -> Any:
                nonlocal inside
                start = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    inside += time.perf_counter() - start

            self.calls += 1
            start = time.perf_counter()
            try:
                return wrapper(timed_original, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start - inside

        return metered


def meter_sites(active: bool = True) -> Meter:
    """Child, guarded and `active`: re-wraps every site's _sites wrapper metered, through the public
    uninstall() and install(). Call it after importing executorch.exir: _sites imports it."""
    import executorch_device_guard

    meter = Meter()
    if executorch_device_guard.status().patched and active:
        from executorch_device_guard import _hook, _sites

        executorch_device_guard.uninstall()
        for name in {wrapper for _, _, wrapper, _ in _hook.SITES}:
            setattr(_sites, name, meter.own(getattr(_sites, name)))
        executorch_device_guard.install()
    return meter


def child_rows(argv: List[str], pairs: int, name: str, own: str) -> List[Row]:
    """A child's timed call, guarded next to unguarded (wall, CPU), and the guard's own time in it as a share
    of the guarded runs' wall time. A child's "what", if any, goes into the first row's name."""
    info: Dict[str, Any] = {}

    def measure(guard: bool) -> Dict[str, float]:
        info.update(child_result(argv, guard))
        return {clock: info[clock] for clock in ("wall", "cpu", "guard")}

    timed = interleaved(measure, pairs)
    first = f"{name} ({info['what']})" if "what" in info else name
    guard, wall = timed["guard"].on, timed["wall"].on
    shares = [g / w for g, w in zip(guard, wall)]
    share, spread = median(shares), f"+{min(shares) * 100:.3f}% .. +{max(shares) * 100:.3f}%"
    cells = millis(median(guard)), f"of {seconds(median(wall))} wall", f"{1 + share:.4f}", spread, "-"
    return [
        ratio_row(f"{first}, wall", timed["wall"], seconds, 0.01),
        ratio_row(f"{name}, CPU time", timed["cpu"], seconds, 0.01),
        Row(f"{name}, time in the guard's {own}", *cells, "within 1%", verdict(share <= 0.01)),
    ]


# 1. to_executorch()
def to_executorch_child(model: str, sizes: Sizes) -> None:
    """Child: builds, exports and lowers one model, then times its one to_executorch() call. One timed
    call per process: to_executorch() mutates the lowered program, so a second call on it fails, and a
    second lowering in the same process would run with warm caches that a user's single export lacks."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    class ManySmall(torch.nn.Module):
        """Half parameters, half buffers, 16 floats each, read by a few concatenations. Few nodes keep
        export and lowering affordable: ExecuTorch's own passes grow faster than linearly with the
        number of constants (about 25 s of to_executorch() for 2,000 here)."""

        def __init__(self, n: int) -> None:
            super().__init__()
            self.weights = torch.nn.ParameterList(torch.randn(16) for _ in range(n // 2))
            self.buffer_names = [f"b{i}" for i in range(n - n // 2)]
            for name in self.buffer_names:
                self.register_buffer(name, torch.randn(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            w = torch.cat(list(self.weights)).reshape(-1, 16).sum(0)
            b = torch.cat([getattr(self, name) for name in self.buffer_names]).reshape(-1, 16).sum(0)
            return x * w + b

    width = sizes.large_width  # few-large: a chain of square Linear layers, layers x width^2 float32 weights
    layers = (torch.nn.Linear(width, width, bias=False) for _ in range(sizes.large_layers))
    module = ManySmall(sizes.small_constants) if model == "many-small" else torch.nn.Sequential(*layers)
    with torch.no_grad():
        exported = torch.export.export(module.eval(), (torch.randn(1, 16 if model == "many-small" else width),))
    edge = to_edge_transform_and_lower(exported)
    meter = meter_sites()
    wall, cpu = time.perf_counter(), time.process_time()
    program = edge.to_executorch()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    constants = len(exported.state_dict) + len(exported.constants)
    large = f"{constants} x {width}^2 float32, {len(program.buffer) / 1e6:.1f} MB .pte"
    what = f"{constants} constants of 16 floats" if model == "many-small" else large
    emit({"wall": wall, "cpu": cpu, "guard": meter.seconds, "what": what})


# 2. XNNPACK lowering of many layers
def xnnpack_child(layers: int, profile: bool) -> None:
    """Child: exports `layers` x Linear(16, 16), then times its XNNPACK lowering and to_executorch(). 16 x 16 keeps
    every constant small (1 KiB of weight, 64 B of bias), so the run is made of per-constant work, the part that calls
    the guard's wrappers, rather than of copying bytes that the guard never touches: the share it gives the guard is a
    worst case. `profile` uses cProfile instead."""
    import cProfile
    import pstats

    import executorch_device_guard
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    module = torch.nn.Sequential(*(torch.nn.Linear(16, 16) for _ in range(layers)))
    with torch.no_grad():
        exported = torch.export.export(module.eval(), (torch.randn(1, 16),))

    def lower() -> Any:
        return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()

    meter = meter_sites(active=not profile)
    profiler = cProfile.Profile()
    wall = time.perf_counter()
    profiler.runcall(lower) if profile else lower()
    result = {"wall": time.perf_counter() - wall, "guard": meter.seconds, "calls": meter.calls}
    if profile:
        # The self time of the functions defined in the package's files, plus that of the C functions
        # they call (isinstance, untyped_storage), which cProfile times as functions of their own.
        package = os.path.dirname(executorch_device_guard.__file__) + os.sep
        stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
        ours = {key: entry for key, entry in stats.items() if key[0].startswith(package)}
        called = [t for key, entry in stats.items() if key[0] == "~" for c, t in entry[4].items() if c in ours]
        result["profiled"] = sum(entry[2] for entry in stats.values())
        result["package"] = sum(entry[2] for entry in list(ours.values()) + called)
        result["package_calls"] = sum(entry[1] for entry in ours.values())
    emit(result)


def xnnpack_rows(sizes: Sizes) -> List[Row]:
    """Per size, the guard's own share of one guarded run, metered in that run, so that the load of a shared machine
    hits both parts of the share alike; then a cProfile of one size. No unguarded children: ExecuTorch's lowering grows
    faster than the square of the layers (on 2 cores 2,000 take 4 minutes, 4,000 take 20), and an unguarded run next to
    each would double the section's time for a whole-run ratio that run-to-run noise of 5-10% would swamp."""
    rows, shares, per_call = [], [], []
    for layers in sizes.xnnpack_layers:
        on = child_result(["--child-xnnpack", str(layers)], True)
        shares.append(f"{on['guard'] / on['wall'] * 100:.3f}%")
        per_call.append(f"{on['guard'] / on['calls'] * 1e6:.1f}")
        name = f"XNNPACK lowering + to_executorch(), {layers} x Linear(16, 16), time in the guard's wrappers"
        rows.append(share_row(f"{name} ({on['calls']} calls)", on["guard"], on["wall"], "wall", 0.01))
    name = f"XNNPACK, the guard's share as layers grow ({' / '.join(map(str, sizes.xnnpack_layers))})"
    rows.append(Row(name, " / ".join(shares), " / ".join(per_call) + " us a call", goal="flat as layers grow"))
    profiled = child_result(["--child-xnnpack", str(sizes.profile_layers), "--child-profile"], True)
    what = f"XNNPACK lowering + to_executorch(), {sizes.profile_layers} x Linear(16, 16), cProfile"
    name = f"{what}: the package's functions and their C calls ({profiled['package_calls']} calls)"
    rows.append(share_row(name, profiled["package"], profiled["profiled"], "profiled", 0.005))
    return rows


# 3. Interpreter start
def startup_import(importtime: str) -> Tuple[float, float, List[str]]:
    """From `-X importtime` lines: seconds the startup line adds (cumulative, with the stdlib it pulls in),
    its own modules' self time, and the torch/executorch modules imported at start (should be none)."""
    entries = []  # (self us, cumulative us, depth, module name)
    for line in importtime.splitlines():
        if line.startswith("import time:") and "[us]" not in line:
            self_us, cumulative_us, name = line[len("import time:") :].split("|")
            entries.append((int(self_us), int(cumulative_us), (len(name) - len(name.lstrip()) - 1) // 2, name.strip()))
    ours = [e for e in entries if e[3] == PACKAGE or e[3].startswith(PACKAGE + ".")]
    top = min((e[2] for e in ours), default=0)
    heavy = [e[3] for e in entries if e[3].split(".")[0] in ("torch", "executorch")]
    return sum(e[1] for e in ours if e[2] == top) / 1e6, sum(e[0] for e in ours) / 1e6, heavy


def start_rows(sizes: Sizes) -> List[Row]:
    run_child(["-c", "pass"], True)  # warm-up: writes the package's bytecode cache once
    runs = [startup_import(run_child(["-X", "importtime", "-c", "pass"], True).stderr) for _ in range(sizes.start_runs)]
    cumulative, self_time, heavy = [r[0] for r in runs], [r[1] for r in runs], {m for r in runs for m in r[2]}

    def measure(guard: bool) -> Dict[str, float]:
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        run_child(["-c", "pass"], guard)
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"wall": wall, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}

    def under_1_ms(name: str, times: List[float]) -> Row:
        mid, spread = median(times), f"{millis(min(times))} .. {millis(max(times))}"
        return Row(f"interpreter start, {name}", millis(mid), spread=spread, goal="< 1 ms", met=verdict(mid < 1e-3))

    starts = interleaved(measure, sizes.start_runs)
    heavy_cell = ", ".join(sorted(heavy)) or "neither"
    return [
        under_1_ms("import time the startup line adds (cumulative, incl. stdlib it imports)", cumulative),
        under_1_ms(f"self time of {PACKAGE}.* modules", self_time),
        Row("interpreter start, torch / executorch imported", heavy_cell, goal="neither", met=verdict(not heavy)),
        # Both sides run the startup line (EXECUTORCH_DEVICE_GUARD=0 only skips install()), so these
        # isolate install(); their goal is the "< 1 ms added".
        added_row("interpreter start, `python -c pass` guard on vs off, wall", starts["wall"], 1e-3),
        added_row("interpreter start, `python -c pass` guard on vs off, CPU time", starts["cpu"], 1e-3),
    ]


# 4. First import of executorch.exir
def import_child() -> None:
    """Child: times the first `import executorch.exir` (bench.py's own stdlib imports load first). A guarded
    child also meters the guard's part: its finder, which sees every import, and the patching that follows each
    guarded module's execution (not the module's own execution). That reaches into _hook's internals, and
    status() loads only after the timed import, so that nothing of the guard is imported ahead of it."""
    from executorch_device_guard import _hook

    meter = Meter()
    if any(isinstance(f, _hook._Finder) for f in sys.meta_path):
        _hook._Finder.find_spec = meter.wrap(_hook._Finder.find_spec)  # type: ignore[method-assign]
        exec_and_patch = _hook._exec_and_patch

        def patch_only(exec_module: Callable[[Any], None], module: Any) -> None:
            exec_module(module)
            meter.wrap(exec_and_patch)(lambda _: None, module)

        _hook._exec_and_patch = patch_only  # type: ignore[assignment]
    wall, cpu = time.perf_counter(), time.process_time()
    import executorch.exir  # noqa: F401

    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    emit({"wall": wall, "cpu": cpu, "guard": meter.seconds})


# 5. Named data and the GPU: host copies of plain data
def named_data_rows(sizes: Sizes, pairs: int) -> List[Row]:
    """NamedDataStore.add_named_data() end to end, in this process, for dense layouts: channels-last next to contiguous,
    on the host, simulated on cuda:0 and (with CUDA) on the GPU: the guarded store copies device data once and reads a
    channels-last storage in one piece, so both layouts should store at the same speed. Then next to upstream's own path
    (the guard uninstalled), which reads a channels-last storage one byte per Python call."""
    import executorch.exir._serialize._named_data_store as named_data_store
    import executorch_device_guard as guard
    import torch

    sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test"))
    from simulated_device import simulate_device  # the tests' helper, not part of the package

    def store(tensor: Any) -> None:
        named_data_store.NamedDataStore().add_named_data("w", tensor)

    guard.install()
    places = [("host", sizes.named_shape), ("simulated cuda:0", sizes.named_shape)]
    if torch.cuda.is_available():
        places.append(("cuda", sizes.gpu_shape))
    rows = []
    for place, shape in places:
        contiguous = torch.randn(shape, device="cuda" if place == "cuda" else "cpu")
        channels_last = contiguous.contiguous(memory_format=torch.channels_last)
        channels_last_3d = contiguous.unsqueeze(2).contiguous(memory_format=torch.channels_last_3d)
        if place == "simulated cuda:0":
            contiguous, channels_last = simulate_device(contiguous), simulate_device(channels_last)
        nbytes = contiguous.untyped_storage().nbytes()
        both = in_process(lambda on: store(channels_last if on else contiguous), pairs, place == "cuda")
        name = f"named data {place} {nbytes / 2**20:.3g} MiB, add_named_data() channels-last vs contiguous"
        rows.append(throughput_row(name, nbytes, both, "contiguous", "contiguous GB/s", True))
        if place == "host":
            # TensorLayout refuses 5-D channels-last named data; its bytes come from the same read.
            took = median(timed_call(lambda: named_data_store._tensor_to_bytes(channels_last_3d)) for _ in range(pairs))
            name = f"named data host {nbytes / 2**20:.3g} MiB, channels-last-3d, _tensor_to_bytes(): time"
            rows.append(Row(name, millis(took), goal="< 500 ms", met=verdict(took < 0.5)))

    small = torch.randn(sizes.per_byte_shape).contiguous(memory_format=torch.channels_last)
    nbytes = small.untyped_storage().nbytes()

    def guarded_or_upstream(guarded: bool) -> Dict[str, float]:
        guard.install() if guarded else guard.uninstall()
        return {"wall": timed_call(lambda: store(small))}

    versus = interleaved(guarded_or_upstream, min(pairs, 3))["wall"]
    guard.install()
    name = f"named data host {nbytes / 2**20:.3g} MiB channels-last, add_named_data() guarded vs upstream"
    upstream = f"{seconds(median(versus.off))} (upstream: a Python call a byte)"
    cells = millis(median(versus.on)), upstream, f"{versus.ratio:.4f}", *versus.cells()
    return rows + [Row(name, *cells, "faster", verdict(versus.ratio < 1))]


def gpu_rows(sizes: Sizes, pairs: int) -> List[Row]:
    """NamedDataStore.add_named_data() of a CUDA tensor, which the guard copies to the host with tensor.cpu(), next to
    the same call handed tensor.cpu() by its caller: the guard's copy should cost no more than the caller's own."""
    import torch

    if not torch.cuda.is_available():
        return [Row("GPU section", "skipped: CUDA not available")]
    import executorch_device_guard
    from executorch.exir._serialize._named_data_store import NamedDataStore

    executorch_device_guard.install()
    contiguous = torch.randn(sizes.gpu_shape, device="cuda")
    channels_last = contiguous.contiguous(memory_format=torch.channels_last)
    rows = []
    for layout, tensor in (("contiguous", contiguous), ("channels-last", channels_last)):
        nbytes = tensor.untyped_storage().nbytes()
        timed = in_process(lambda on: NamedDataStore().add_named_data("w", tensor if on else tensor.cpu()), pairs, True)
        name = f"GPU {layout} {nbytes / 2**20:.3g} MiB, add_named_data(cuda tensor)"
        rows.append(throughput_row(name, nbytes, timed, "add_named_data(tensor.cpu())", "the caller's copy", False))
    return rows


def machine() -> str:
    from importlib import metadata

    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    line = f"{cpu}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"
    line += "".join(f", {name} {metadata.version(name)}" for name in ("torch", "executorch", "executorch-device-guard"))
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        line += f", {torch.cuda.get_device_name()}"
    return line


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="tiny sizes, one pair: the smoke test")
    add("--pairs", type=int, help="guarded/unguarded pairs per measurement (default 7, quick 1; GPU at least 5)")
    add("--section", choices=("all", "cpu", "xnnpack", "gpu"), default="all")
    add("--out", help="also write the table (markdown) to this file")
    add("--child-to-executorch", choices=("many-small", "few-large"), help=argparse.SUPPRESS)
    add("--child-import", action="store_true", help=argparse.SUPPRESS)
    add("--child-xnnpack", type=int, help=argparse.SUPPRESS)
    add("--child-profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.child_to_executorch:
        to_executorch_child(args.child_to_executorch, sizes)
    elif args.child_import:
        import_child()
    elif args.child_xnnpack:
        xnnpack_child(args.child_xnnpack, args.child_profile)
    if args.child_to_executorch or args.child_import or args.child_xnnpack:
        return 0
    pairs = args.pairs or (1 if args.quick else 7)
    started = time.perf_counter()
    rows: List[Row] = []
    if args.section in ("all", "cpu"):
        rows += start_rows(sizes)
        for model in ("many-small", "few-large"):
            argv = ["--child-to-executorch", model] + (["--quick"] if args.quick else [])
            rows += child_rows(argv, pairs, f"to_executorch(), {model}", "wrappers")
        rows += child_rows(["--child-import"], pairs, "first `import executorch.exir`", "finder and patching")
    if args.section in ("all", "cpu", "xnnpack"):
        rows += xnnpack_rows(sizes)
    if args.section in ("all", "cpu", "gpu"):
        rows += named_data_rows(sizes, max(pairs, 5) if args.section == "gpu" else pairs)
    if args.section in ("all", "gpu"):
        rows += gpu_rows(sizes, max(pairs, 5))
    table = f"{machine()}\n\n{markdown(rows)}"
    print(table)
    print(f"\n{pairs} pairs, {'quick' if args.quick else 'full'} sizes, {time.perf_counter() - started:.0f} s")
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
