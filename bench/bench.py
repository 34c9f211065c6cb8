# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the device guard costs: one table, guarded next to unguarded, measured in one run.

    python bench/bench.py

The guard is wired in at interpreter start, so each measurement runs in fresh child
processes, guarded and unguarded in pairs whose first side alternates, so that a shared
machine's drifts hit both sides alike. Whole-run ratios cannot show 1% on such a machine;
the guard's own time, metered in each guarded run, can."""

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

SMALL_CONSTANTS = 1000  # buffers of 16 floats each
STARTS = 15  # interpreter starts
PAIRS = 5  # guarded and unguarded runs per measurement
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


def to_executorch_child(meter: Meter) -> float:
    """One to_executorch() call's wall time, of SMALL_CONSTANTS constants (the guard's work is
    per constant), each site's wrapper metered."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from executorch_device_guard import _sites  # after ExecuTorch, which it imports

    class ManySmall(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for i in range(SMALL_CONSTANTS):
                self.register_buffer(f"b{i}", torch.randn(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.stack(list(self.buffers())).sum(0)

    with torch.no_grad():
        exported = torch.export.export(ManySmall().eval(), (torch.randn(1, 16),))
        edge = to_edge_transform_and_lower(exported)
    if status().installed:
        uninstall()
        _sites.WRAPPERS.update({k: meter.own(w) for k, w in _sites.WRAPPERS.items()})
        install()
    start = time.perf_counter()
    edge.to_executorch()
    return time.perf_counter() - start


def import_child(meter: Meter) -> float:
    """The first `import executorch.exir`, the guard's finder and patching metered."""
    _hook._Finder.find_spec = meter.add(_hook._Finder.find_spec)  # type: ignore[method-assign]
    _hook._exec_and_patch = meter.own(_hook._exec_and_patch)
    start = time.perf_counter()
    import executorch.exir  # noqa: F401

    return time.perf_counter() - start


def paired_rows(name: str, args: list[str]) -> list[list[str]]:
    """Guarded next to unguarded in PAIRS pairs, which side first alternating: the median
    ratio of wall times, met within 1%; and the guard's own share of the guarded wall."""
    order = [on for i in range(PAIRS) for on in ((True, False), (False, True))[i % 2]]
    logs = [child([__file__, "--child", *args], on).stdout for on in order]
    runs = [json.loads(log.splitlines()[-1]) for log in logs]
    if [run["patched"] > 0 for run in runs] != order:
        raise RuntimeError(f"{args}: a child's guard is not what it was asked to be")
    on, off = ([r for r, side in zip(runs, order) if side == s] for s in (True, False))
    ratios = sorted(a["wall"] / b["wall"] for a, b in zip(on, off))
    shares = sorted(run["guard"] / run["wall"] for run in on)
    ratio, share, own = median(ratios), median(shares), median(r["guard"] for r in on)
    walls = [f"{median(r['wall'] for r in side):.3f} s" for side in (on, off)]
    return [
        [f"{name}, wall", *walls, f"{ratio:.3f}"]
        + [f"{ratios[0] - 1:+.1%} .. {ratios[-1] - 1:+.1%}", "within 1%"]
        + ["yes" if abs(ratio - 1) <= 0.01 else "no"],
        [f"{name}, time in the guard's own code", f"{own * 1e3:.2f} ms ({share:.3%})"]
        + ["-", "-", f"+{shares[0]:.3%} .. +{shares[-1]:.3%}", "within 1%"]
        + ["yes" if share <= 0.01 else "no"],
    ]


def start_rows() -> list[list[str]]:
    """What the startup line costs at interpreter start, and what it imports."""
    child(["-c", "pass"], True)  # writes the package's bytecode once
    costs, heavy = [], set()
    for _ in range(STARTS):
        stderr = child(["-X", "importtime", "-c", "pass"], True).stderr
        # Lines "import time: self | cumulative | module", modules indented by depth.
        found = re.findall(r"^import time: +\d+ \| +(\d+) \| *(\S+)$", stderr, re.M)
        costs += [int(us) / 1e6 for us, m in found if m == "executorch_device_guard"]
        heavy |= {m for _, m in found if m.split(".")[0] in ("torch", "executorch")}
    spread = f"{min(costs) * 1e3:.2f} .. {max(costs) * 1e3:.2f} ms"
    took, imported = median(costs), ", ".join(sorted(heavy)) or "neither"
    return [
        ["interpreter start: import time of the startup line", f"{took * 1e3:.2f} ms"]
        + ["-", "-", spread, "< 1 ms", "yes" if took < 1e-3 else "no"],
        ["interpreter start: torch / executorch imported", imported]
        + ["-", "-", "-", "neither", "no" if heavy else "yes"],
    ]


def main() -> None:
    if sys.argv[1:2] == ["--child"]:  # prints its times, and how many sites it patched
        meter = Meter()
        wall = to_executorch_child(meter) if sys.argv[2:] else import_child(meter)
        patched = len(status().patched)
        print(json.dumps({"wall": wall, "guard": meter.seconds, "patched": patched}))
        return
    from importlib.metadata import version

    started, rows = time.perf_counter(), start_rows()
    rows += paired_rows("first `import executorch.exir`", [])
    rows += paired_rows("to_executorch()", ["to_executorch"])
    names = ("torch", "executorch", "executorch-device-guard")
    versions = ", ".join(f"{name} {version(name)}" for name in names)
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {versions}\n")
    for row in [HEADERS, ["-" * len(h) for h in HEADERS], *rows]:
        print("| " + " | ".join(row) + " |")
    print(f"\n{PAIRS} pairs, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
