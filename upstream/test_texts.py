# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The sizes that the review limits (issue 27), read from the patch files alone."""

from tabulate import tabulate

from upstream import patches, series

# Non-test Python lines added (not blank or comment-only), per patch and in all.
MAX_LINES = {"0001-emitter.patch": 15, "followup/0004-device-lowering.patch": 30}
MAX_SERIES_LINES = 85
MAX_WORDS = 200  # of a PR text: the subject, and the message up to `---`
MAX_SUBJECT = 72  # characters


def test_sizes() -> None:
    rows = []
    for patch in patches.read().patches:
        lines, moved = patch.code_lines
        subject = len(series.subject(patch.path))
        rows.append((patch.name, lines, moved, len(patch.text.split()), subject))
    headers = ("patch", "lines", "re-indented", "words", "subject")
    print("\n" + tabulate(rows, headers, tablefmt="github"))
    found = []
    for name, lines, _, words, subject in rows:
        if lines > MAX_LINES.get(name, MAX_SERIES_LINES):
            found.append(f"{name}: {lines} lines")
        if words > MAX_WORDS:
            found.append(f"{name}: {words} words")
        if subject > MAX_SUBJECT:
            found.append(f"{name}: {subject}-character subject")
    total = sum(row[1] for row in rows)
    if total > MAX_SERIES_LINES:
        found.append(f"the series: {total} lines")
    for patch in patches.read().patches:
        for file in patch.diff:
            if file.is_added_file and patches.is_code(file):
                found.append(f"{file.path}: a new module, which no check here types")
    assert not found


def test_issue_texts() -> None:
    """A follow-up that could not be built and tested here is an issue text instead of a
    patch: a title, the reproducer, what users see, the fix in words, within a PR text's
    limits; its patch is gone from followup/."""
    found = []
    for path in sorted((series.SERIES / "issues").glob("*.md")):
        text = path.read_text()
        title = text.splitlines()[0]
        if not title.startswith("# ") or len(title) - 2 > MAX_SUBJECT:
            found.append(f"{path.name}: title {title!r}")
        if len(text.split()) > MAX_WORDS:
            found.append(f"{path.name}: {len(text.split())} words")
        for section in (
            "### Repro",
            "### What users see today",
            "### What the fix would do",
        ):
            if section not in text:
                found.append(f"{path.name}: no {section!r}")
        if any(series.FOLLOWUP.glob(f"[0-9][0-9][0-9][0-9]-{path.stem}.patch")):
            found.append(f"{path.name}: its patch is still in followup/")
    assert not found
