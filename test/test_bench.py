# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Smoke test: bench/bench.py --quick runs end to end, and what it meters is the guard.

Timings belong in bench/RESULTS.md; this checks what the table says of the guard's behaviour:
interpreter start imports neither torch nor executorch, and the guard's own code ran, metered,
in every guarded run (bench.py also refuses a child whose guard state is not the asked one).
"""

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench.py"


def rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by measurement, without its header and rule."""
    cells = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in stdout.splitlines()
        if line.startswith("| ")
    ]
    return {row[0]: row[1:] for row in cells[1:]}


def test_quick_benchmark_meters_the_guard(tmp_path: Path) -> None:
    out = tmp_path / "table.md"
    command = [
        sys.executable,
        str(BENCH),
        "--quick",
        "--section",
        "cpu",
        "--out",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    table = rows(done.stdout)
    assert table["interpreter start: torch / executorch imported"][0] == "neither"
    own = {
        name: cells[0]
        for name, cells in table.items()
        if re.match(r"[\d.]+ ms \(", cells[0])
    }
    # to_executorch() twice, the first import, XNNPACK.
    assert len(own) == 4, table.keys()
    for name, cell in own.items():
        metered = re.match(r"([\d.]+) ms \(([\d.]+)%\)", cell)
        assert metered and float(metered[1]) > 0 and float(metered[2]) < 100, (
            name,
            cell,
        )
    calls = re.search(
        r"\((\d+) calls\)", next(name for name in own if name.startswith("XNNPACK"))
    )
    assert calls and int(calls[1]) > 0
    assert any(name.startswith("named data host") for name in table)
    assert out.read_text().startswith(done.stdout.split("\n\n")[0])
