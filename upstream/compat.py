# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Renders what `nox -s compat` left, one release each, as the markdown of test/COMPAT_RESULTS.md.

    python -m upstream.compat test/compat test/COMPAT_RESULTS.md

For each release FOLDER/RELEASE.txt holds the output of `python -m executorch_device_guard` (after
a FLATC_EXECUTABLE line where the session set it) and FOLDER/RELEASE.xml pytest's junit XML. The
folder is committed, so a release's row stays until that release's session runs again.
"""

import os
import re
import sys
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path
from typing import Dict, List

from upstream.suites import counts, parse_junit, table


def run_date(junit: Path) -> date:
    """The day pytest ran, from its junit XML: a committed file's mtime is that of its checkout."""
    return date.fromisoformat(next(ET.parse(junit).getroot().iter("testsuite")).get("timestamp", "")[:10])


def render(folder: Path) -> str:
    """The releases' table, the per-test table, and the reason of every test that did not pass."""
    releases = sorted((p.stem for p in folder.glob("*.xml")), key=lambda v: tuple(map(int, v.split("."))))
    if not releases:
        raise SystemExit(f"no junit XML in {folder}: run the compat sessions first")
    rows: List[List[str]] = []
    outcomes: Dict[str, Dict[str, str]] = {}
    reasons: Dict[str, Dict[str, List[str]]] = {}  # outcome and message -> test -> releases
    for release in releases:
        status_file = folder / f"{release}.txt"
        status = status_file.read_text() if status_file.exists() else ""
        torch = re.search(r"^executorch \S+, torch (\S+),", status, re.M)
        sites = re.findall(r"^  (guarded|SKIPPED)  executorch\.(\S+?)(?::\s+(.*))?$", status, re.M)
        skipped = "".join(f"; `{site.split('.')[-1]}`: {reason}" for state, site, reason in sites if state != "guarded")
        # A module that does not import lists none of its sites: named apart, not counted.
        missing = re.findall(r"^not importable: executorch\.(\S+) \((.*)\)$", status, re.M)
        skipped += "".join(f"; `{module}` not importable: {reason}" for module, reason in missing)
        cases = re.findall(r"^  (ok|FAIL) +\S", status, re.M)
        outcome, message = parse_junit(folder / f"{release}.xml")
        for test, result in outcome.items():
            name = ".".join(test.split("::")[0].split(".")[-2:]) + "::" + test.split("::")[1]
            outcomes.setdefault(name, {})[release] = result
            if result != "passed":
                reasons.setdefault(f"{result}: {message[test]}", {}).setdefault(name, []).append(release)
        rows.append([
            release,
            torch.group(1) if torch else "?",
            "shipped binary, via `FLATC_EXECUTABLE`" if status.startswith("FLATC_EXECUTABLE") else "found",
            f"{sum(state == 'guarded' for state, _, _ in sites)} of {len(sites)}{skipped}",
            f"{cases.count('ok')} of {len(cases)} ok" if cases else "did not run",
            counts(outcome),
        ])
    when = max(run_date(folder / f"{release}.xml") for release in releases)
    mark = {"passed": "P", "failed": "**F**", "error": "**E**", "skipped": "S"}
    lines = [
        "# ExecuTorch 1.x on the CPU",
        "",
        f"`nox -s compat`, {when:%Y-%m-%d}, {os.cpu_count()} cores: each release in a fresh virtual environment with the pins of"
        " `COMPAT` in noxfile.py and this package editable; `python -m executorch_device_guard`, then"
        " `pytest -n 2 -rs --junitxml` on the tests of `RELEASE_TESTS`. No GPU: CUDA tests skip.",
        "",
        *table(("executorch", "torch", "flatc", "sites guarded", "self-check", "tests P/F/E/S"), rows),
        "",
        "Per test (P passed, F failed, E error, S skipped, - not collected):",
        "",
        *table(("test", *releases), [[f"`{t}`", *(mark[r[v]] if v in r else "-" for v in releases)]
                                     for t, r in sorted(outcomes.items())]),
        "",
        "Not passed, by the reason pytest gives:",
        "",
        *(f"- {reason}: " + "; ".join(
            f"`{test}` ({'every release' if where == releases else ', '.join(where)})" for test, where in tests.items()
        ) for reason, tests in sorted(reasons.items())),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(render(Path(sys.argv[1])))
