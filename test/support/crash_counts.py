# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How often a child of children.py ends each way, guard off and on, each run in a fresh
interpreter, for the GPU record: `python test/support/crash_counts.py CHILD RUNS [DIR]`.
With DIR, a third column runs the guard from DIR/executorch_device_guard (another commit's
exir/, laid out as the package), which the installed startup line then imports."""

import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from executorch_device_guard import ENV_VAR
from side_by_side import ending

HERE = Path(__file__).resolve().parent


def run(child: str, guard: bool, package: str | None) -> str:
    env = {**os.environ, ENV_VAR: "1" if guard else "0"}
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join((package, str(HERE)))
    done = subprocess.run(
        [sys.executable, "-m", "children", child],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
    )
    return ending(done.returncode, done.stderr)


def main(child: str, runs: int, package: str | None = None) -> None:
    sides = {"guard off": (False, None), "guard on": (True, None)}
    if package is not None:
        sides[f"guard on, from {Path(package).name}"] = (
            True,
            str(Path(package).resolve()),
        )
    # Interleaved, so that a drift of the machine hits each side alike.
    order = [side for _ in range(runs) for side in sides]
    with ThreadPoolExecutor(max_workers=8) as pool:
        endings = list(pool.map(lambda side: run(child, *sides[side]), order))
    for side in sides:
        counts = Counter(e for s, e in zip(order, endings) if s == side)
        print(f"{child}, {side}, {runs} runs:")
        for found, count in counts.most_common():
            print(f"  {count:3d}  {found}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:4])
