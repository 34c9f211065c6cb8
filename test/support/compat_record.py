# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The row of one `nox -s compat` run in records/compat/RESULTS.md, in place of the last run's,
and its tests that did not pass, with pytest's reason, each note naming the runs where it holds.
Run by noxfile.py in the session's virtualenv, which has junitparser and tabulate:

    python -m test.support.compat_record RELEASE TORCH FLATC SELF_CHECK_OUTPUT JUNIT
"""

import re
import sys
from datetime import date
from pathlib import Path

from packaging.version import Version
from tabulate import tabulate

from .junit import counts, read

RESULTS = Path(__file__).resolve().parents[2] / "records" / "compat" / "RESULTS.md"
HEADERS = ["executorch", "torch", "flatc", "sites guarded", "self-check"]
HEADERS += ["tests P/F/E/S", "run"]
INTRO = """# ExecuTorch 1.x on the CPU

`nox -s compat` (noxfile.py): a row per release and torch, each from its own run on the
project's 2-core x86_64 CPU machine, Python 3.11; no GPU, so CUDA tests skip.

"""


def order(release: str, torch: str) -> tuple[Version, Version]:
    """Releases and torch versions sorted as PEP 440 orders them, as the guard compares them."""
    return Version(release), Version(torch)


def run_order(run: str) -> tuple[Version, Version]:
    """order() of a run as the notes name it, "1.5.1 (2.13.0)"."""
    release, torch = run.removesuffix(")").split(" (")
    return order(release, torch)


def without_paths(text: str) -> str:
    """`text` with each virtualenv's site-packages named so: records hold no machine paths."""
    return re.sub(r"/\S*?/site-packages", "<site-packages>", text)


def row(release: str, torch: str, flatc: str, status: str, junit: Path) -> list[str]:
    """The run's cells, from the self-check's output and the tests' junit."""
    site = r"^  (guarded|SKIPPED)  executorch\.\S+?(\w+)(?::\s+(.*))?$"
    sites = re.findall(site, status, re.M)
    guarded = [state for state, _, _ in sites if state == "guarded"]
    notes = [f"{len(guarded)} of {len(sites)}"]
    for state, name, why in sites:
        if state == "SKIPPED":
            notes.append(f"`{name}`: {why}")
    missing = re.findall(r"^not importable: executorch\.(\S+) \((.*)\)$", status, re.M)
    for module, why in missing:
        notes.append(f"`{module}` not importable: {why}")
    cases = re.findall(r"^  (ok|FAIL) +\S", status, re.M)
    checked = f"{cases.count('ok')} of {len(cases)} ok" if cases else "did not run"
    tests = counts(case.outcome for case in read(junit).values())
    return [release, torch, flatc, "; ".join(notes), checked, tests, f"{date.today()}"]


def write(release: str, torch: str, flatc: str, status: str, junit: Path) -> None:
    """RESULTS with this run's row and notes in place of the last run's."""
    cells = row(release, torch, flatc, status, junit)
    lines = RESULTS.read_text().splitlines() if RESULTS.exists() else []
    rows = []
    for line in lines:
        if line.startswith("| "):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    rows = [old for old in rows[1:] if old[:2] != cells[:2] and set(old[0]) != {"-"}]
    rows.append(cells)
    rows.sort(key=lambda cells: order(cells[0], cells[1]))
    this = f"{release} ({torch})"
    notes: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("- "):
            runs, note = line[2:].split(": `", 1)
            notes[note] = [run for run in runs.split(", ") if run != this]
    for test, case in read(junit).items():
        if case.outcome != "passed":
            note = f"{test}`: {case.outcome}: {without_paths(case.summary)}"
            notes.setdefault(note, []).append(this)
    text = INTRO + tabulate(rows, HEADERS, tablefmt="github", disable_numparse=True)
    text += "\n\nNot passed, with pytest's reason:\n\n"
    for note, runs in sorted(notes.items()):
        if runs:
            text += f"- {', '.join(sorted(runs, key=run_order))}: `{note}\n"
    RESULTS.write_text(text)


if __name__ == "__main__":
    release, torch, flatc, status, junit = sys.argv[1:]
    status_text = without_paths(Path(status).read_text())
    write(release, torch, flatc, status_text, Path(junit))
