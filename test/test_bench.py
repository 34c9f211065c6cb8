# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Smoke test: bench/bench.py --quick runs end to end and prints its table.

Asserts on the table's content, never on timings: those belong in bench/RESULTS.md.
"""

import subprocess
import sys
from pathlib import Path
from typing import Dict, List

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench.py"


def _table_rows(stdout: str) -> Dict[str, List[str]]:
    """The markdown table's rows by measurement, without the header and its rule."""
    lines = [line for line in stdout.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    assert cells and cells[0][:4] == ["measurement", "guarded", "unguarded / baseline", "ratio"], stdout
    return {row[0]: row[1:] for row in cells[1:]}


def test_quick_benchmark_prints_the_table(tmp_path: Path) -> None:
    out = tmp_path / "table.md"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--section", "cpu", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = _table_rows(proc.stdout)

    timed = [name for name in rows if name.startswith(("to_executorch(),", "first `import executorch.exir`"))]
    assert len(timed) == 9, rows.keys()  # two models and the import: wall, CPU time, the guard's own time
    assert any(name.startswith("to_executorch(), many-small (20 constants") for name in timed), timed
    for name in timed:
        guarded, unguarded, ratio = rows[name][:3]
        unit = " ms" if "the guard's" in name else " s"
        assert guarded.endswith(unit) and unguarded.endswith(" s" if unit == " s" else " s wall"), rows[name]
        assert float(ratio) > 0, rows[name]

    start = [name for name in rows if name.startswith("interpreter start")]
    assert len(start) == 5, start
    assert rows["interpreter start, torch / executorch imported"][0] == "neither"

    # Host and simulated cuda:0 channels-last next to contiguous, channels-last-3d, next to upstream.
    named = [name for name in rows if name.startswith("named data ")]
    assert len(named) == 4, named
    assert sum("channels-last vs contiguous" in name for name in named) == 2, named
    assert any("channels-last-3d" in name for name in named), named
    assert any("guarded vs upstream" in name for name in named), named

    # XNNPACK: the guard's metered share per size (its wrappers ran), the shares side by side, the profile.
    xnnpack = [name for name in rows if name.startswith("XNNPACK")]
    assert len(xnnpack) == 3, xnnpack
    metered = "XNNPACK lowering + to_executorch(), 4 x Linear(16, 16), time in the guard's wrappers ("
    assert any(name.startswith(metered) and int(name[len(metered) :].split()[0]) > 0 for name in xnnpack), xnnpack
    assert any("cProfile: the package's functions" in name for name in xnnpack), xnnpack
    for name in xnnpack:
        assert rows[name][0].endswith("%" if "as layers grow" in name else "%)"), rows[name]
    assert any(line.startswith("| measurement") for line in out.read_text().splitlines())
