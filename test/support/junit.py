# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""pytest's JUnit XML (--junitxml), read with junitparser: the one reader for the package's
tests (test_sites.py), the series' checks (upstream/) and the compat record
(compat_record.py): one vocabulary of outcomes, pytest's."""

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from junitparser import Error, Failure, JUnitXml, Skipped, TestSuite

OUTCOMES = ("passed", "failed", "error", "skipped")  # the order of counts()
# Of two outcomes of one test, the later in this order stands.
WORSE = ("passed", "skipped", "failed", "error")
KINDS = {Failure: "failed", Error: "error", Skipped: "skipped"}


class Case(NamedTuple):
    """A test's outcome, with junit's message and its text (a traceback, a crash's output)."""

    outcome: str
    message: str = ""
    text: str = ""

    @property
    def summary(self) -> str:
        """The message's first line; for an error, with the last "E " line of its text, since
        a collection error's message is generic."""
        line = self.message.strip().partition("\n")[0]
        raised = [x[2:].strip() for x in self.text.split("\n") if x.startswith("E ")]
        if self.outcome == "error" and raised:
            line += f": {raised[-1]}"
        return line[:200]


def read(path: Path) -> dict[str, Case]:
    """Each test, keyed 'dotted.module.Class::test', with its worst outcome: a test can be
    listed twice (a failed call and a teardown error; a failed subtest). No file, no tests."""
    found: dict[str, Case] = {}
    if not path.exists():
        return found
    xml = JUnitXml.fromfile(str(path))
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    for suite in suites:
        for case in suite:
            test = f"{case.classname}::{case.name}"
            worst = Case("passed")
            for result in case.result:
                outcome = KINDS[type(result)]
                if WORSE.index(outcome) > WORSE.index(worst.outcome):
                    worst = Case(outcome, result.message or "", result.text or "")
            before = found.get(test, Case("passed"))
            if WORSE.index(worst.outcome) >= WORSE.index(before.outcome):
                found[test] = worst
    return found


def counts(outcomes: Iterable[str]) -> str:
    """'passed/failed/error/skipped'."""
    listed = list(outcomes)
    return "/".join(str(listed.count(outcome)) for outcome in OUTCOMES)
