# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Renders what `nox -s compat` left, one run a release and torch, as FOLDER/RESULTS.md.

    python -m upstream.compat test/compat

FOLDER/RELEASE-torchVERSION.txt holds the output of `python -m executorch_device_guard`
(after a FLATC_EXECUTABLE line where the session set it), and .xml pytest's junit XML. The
folder is committed, so a run's row stays until that run's session runs again.
"""

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from upstream.suites import Run, parse_junit, table


def row(junit: Path) -> tuple[list[str], list[str]]:
    """A run's row, and its tests that did not pass, with pytest's reason."""
    release, torch = junit.stem.split("-torch")
    status = (
        junit.with_suffix(".txt").read_text()
        if junit.with_suffix(".txt").exists()
        else ""
    )
    sites = re.findall(
        r"^  (guarded|SKIPPED)  executorch\.(\S+?)(?::\s+(.*))?$", status, re.M
    )
    skipped = [
        f"`{site.rsplit('.', 1)[-1]}`: {why}"
        for state, site, why in sites
        if state != "guarded"
    ]
    missing = re.findall(r"^not importable: executorch\.(\S+) \((.*)\)$", status, re.M)
    skipped += [f"`{module}` not importable: {why}" for module, why in missing]
    cases = re.findall(r"^  (ok|FAIL) +\S", status, re.M)
    outcomes, messages = parse_junit(junit)
    flatc = (
        "shipped binary, via `FLATC_EXECUTABLE`"
        if status.startswith("FLATC")
        else "found"
    )
    guarded = f"{sum(s == 'guarded' for s, _, _ in sites)} of {len(sites)}" + "".join(
        f"; {s}" for s in skipped
    )
    self_check = f"{cases.count('ok')} of {len(cases)} ok" if cases else "did not run"
    counts = Run(outcomes, messages, 0, "", 0).counts
    failed = [
        f"{release} (torch {torch}): `{t}`: {o}: {messages[t]}"
        for t, o in outcomes.items()
        if o != "passed"
    ]
    return [release, torch, flatc, guarded, self_check, counts], failed


def render(folder: Path) -> str:
    runs = sorted(
        folder.glob("*.xml"), key=lambda p: [int(x) for x in re.findall(r"\d+", p.stem)]
    )
    rows, failed = (
        zip(*(row(junit) for junit in runs))
        if runs
        else sys.exit(f"no junit XML in {folder}")
    )
    dates = [
        next(ET.parse(junit).getroot().iter("testsuite")).get("timestamp", "")[:10]
        for junit in runs
    ]
    headers = (
        "executorch",
        "torch",
        "flatc",
        "sites guarded",
        "self-check",
        "tests P/F/E/S",
    )
    return (
        f"# ExecuTorch 1.x on the CPU\n\n`nox -s compat`, last run {max(dates)}: each release in a fresh "
        "virtual environment with the pins of `COMPAT` in noxfile.py and this package editable; "
        "`python -m executorch_device_guard`, then `pytest -n 2 -rs --junitxml` on `RELEASE_TESTS`. "
        "No GPU: CUDA tests skip. The raw results are beside this file.\n\n"
        f"{table(headers, rows)}\n\nNot passed, with pytest's reason:\n\n"
        + "".join(f"- {line}\n" for lines in failed for line in lines)
    )


if __name__ == "__main__":
    Path(sys.argv[1], "RESULTS.md").write_text(render(Path(sys.argv[1])))
