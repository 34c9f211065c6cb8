# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The users' pages against what they describe: the README's length and its commands (the test
command is the one CI runs), every relative link of the pages, every quoted message against the
package's own as it raises it, the site table against SITES, and the supported releases against
their record."""

import re
import unittest
from pathlib import Path

from executorch_device_guard import _site_table
from test.support import children

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SITES_PAGE = REPO / "docs" / "sites.md"
PAGES = (README, SITES_PAGE, REPO / "CONTRIBUTING.md")


def anchor(heading: str) -> str:
    """GitHub's anchor for a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def blocks(page: Path, language: str) -> list[str]:
    """The page's fenced code blocks in `language`."""
    return re.findall(rf"^```{language}\n(.*?)^```$", page.read_text(), re.M | re.S)


class TestReadme(unittest.TestCase):
    def test_readme_is_at_most_150_lines(self) -> None:
        self.assertLessEqual(len(README.read_text().splitlines()), 150)

    def test_the_fresh_machine_commands_come_first_and_ci_runs_the_test_one(
        self,
    ) -> None:
        first, test = [
            line for line in blocks(README, "bash")[0].splitlines() if line[0] != "#"
        ]
        self.assertLess(
            README.read_text().index(first), README.read_text().index("## ")
        )
        self.assertRegex(first, r" \. && \.venv/bin/python -m executorch_device_guard$")
        self.assertIn(test, (REPO / ".ci" / "run").read_text().splitlines())

    def test_relative_links_resolve(self) -> None:
        for page in PAGES:
            for target in re.findall(r"\]\(([^)]+)\)", page.read_text()):
                if re.match(r"\w+:", target):
                    continue
                with self.subTest(page=page.name, link=target):
                    path, _, fragment = target.partition("#")
                    found = (page.parent / path).resolve() if path else page
                    self.assertTrue(found.exists(), found)
                    if fragment:
                        headings = re.findall(r"^#+ (.*)$", found.read_text(), re.M)
                        self.assertIn(fragment, [anchor(h) for h in headings])

    def test_quoted_messages_are_the_packages_own(self) -> None:
        """Each line of a quoted message (a `text` block) is a line of an error that the
        package raises, with the device simulated on the CPU (children.messages)."""
        status, stdout, stderr = children.run("messages", guard=True)
        self.assertEqual(status, 0, stderr)
        raised = {
            line
            for message in children.result(stdout)["errors"].values()
            for line in message.splitlines()
        }
        quoted = [
            (page.name, line)
            for page in (README, SITES_PAGE)
            for block in blocks(page, "text")
            for line in block.splitlines()
        ]
        self.assertGreaterEqual(len(quoted), 8)
        for page, line in quoted:
            with self.subTest(page=page, line=line[:60]):
                self.assertIn(line, raised)

    def test_site_table_matches_code(self) -> None:
        rows = re.findall(
            r"^\| `(executorch\.[\w.]+)` \| `([\w.:]+)` \|",
            SITES_PAGE.read_text(),
            re.M,
        )
        self.assertEqual(
            rows, [(site.module, site.qualname) for site in _site_table.SITES]
        )

    def test_supported_releases_are_their_records(self) -> None:
        """Each row's count of sites guarded is that of each of its runs in the record."""
        record = (REPO / "records" / "compat" / "RESULTS.md").read_text()
        recorded = {
            (release, torch): guarded.split(";")[0]
            for release, torch, guarded in re.findall(
                r"^\| (\d\S*) +\| (\S+) +\| [^|]+\| ([^|]+)\|", record, re.M
            )
        }
        table = README.read_text().partition("## Supported releases")[2]
        rows = re.findall(r"^\| (\d[^|]*) \| ([^|]+) \| (\d+ of \d+) \|", table, re.M)
        runs = [
            ((release, torch), count)
            for releases, torches, count in rows
            for release in releases.split(", ")
            for torch in torches.split(", ")
        ]
        self.assertEqual(sorted(key for key, _ in runs), sorted(recorded))
        for key, count in runs:
            with self.subTest(run=key):
                self.assertEqual(recorded[key].strip(), count)
