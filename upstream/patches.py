# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The series as the checks see it, read from its patch files with unidiff: each patch's
tests (as pytest ids), its PR text, the code lines it adds, the test commands it adds to
workflows, and the hunks that a mutation check reverts."""

import email
import fnmatch
import functools
import re
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

from unidiff import PatchSet

from upstream import series

# Upstream's test modules, in test/ or beside the code; training's is test/test.py, which only
# Buck runs (pytest's default pattern leaves it out, a file named on its command line is run).
TEST_FILES = ("*/test_*.py", "*/test/test.py")
# What upstream's tests hold, helpers included: test/ beside the code, and the top-level test/
# (the models and fixtures that the runtime's tests load).
TEST_CODE = ("test/*", "*/test/*")


def is_test_file(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in TEST_FILES)


def is_code(file: Any) -> bool:
    """A Python file that is not test code: the review counts its lines."""
    path = file.path
    test = any(fnmatch.fnmatch(path, p) for p in (*TEST_CODE, *TEST_FILES))
    return path.endswith(".py") and not test


def class_above(above: list[str], indent: int) -> str:
    """'Class::' for the nearest line above, less indented than `indent`, that opens one."""
    if not indent:
        return ""
    for line in reversed(above):
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            found = re.match(r"\s*class (\w+)", line)
            return f"{found[1]}::" if found else ""
    return ""


class Patch(NamedTuple):
    path: Path
    diff: PatchSet

    @property
    def name(self) -> str:
        """Its path under upstream/: the follow-ups' numbers start again."""
        return self.path.relative_to(series.SERIES).as_posix()

    @property
    def built(self) -> bool:
        """Whether it changes C++, which the wheel ships built: a patched copy of the wheel
        lacks that change, so here its tests run against the package, which makes it;
        source_build.py builds it and runs them against the build (RESULTS.md)."""
        return any(
            fnmatch.fnmatch(file.path, pattern)
            for file in self.diff
            for pattern in series.CPP
        )

    @property
    def ci_only(self) -> bool:
        """Workflows and nothing else: CI wiring."""
        return all(file.path.startswith(".github/") for file in self.diff)

    @property
    def tests(self) -> tuple[str, ...]:
        """pytest ids: the test files that it adds; `path::Class::test` for each test
        method that it adds to a file (`path::test` for a function)."""
        ids = []
        for file in self.diff:
            if not is_test_file(file.path):
                continue
            if file.is_added_file:
                ids.append(file.path)
                continue
            for hunk in file:
                above = [hunk.section_header]  # git's: the last unindented line above
                for line in hunk:
                    if line.is_removed:
                        continue
                    found = re.match(r"(\s*)(?:async\s+)?def (test\w*)", line.value)
                    if line.is_added and found:
                        owner = class_above(above, len(found[1]))
                        ids.append(f"{file.path}::{owner}{found[2]}")
                    above.append(line.value)
        return tuple(ids)

    @property
    def text(self) -> str:
        """The PR text: the subject, and the message up to `---`."""
        body = email.message_from_string(self.path.read_text()).get_payload()
        return series.subject(self.path) + "\n" + body.split("\n---\n", 1)[0]

    @property
    def code_lines(self) -> tuple[int, int]:
        """Non-test Python lines that it adds, not blank or comment-only: (changed,
        re-indented), a re-indented line being one that its hunk removes with other
        indentation, as `git diff -w` omits."""
        changed = moved = 0
        for file in self.diff:
            if not is_code(file):
                continue
            for hunk in file:
                removed = Counter(x.value.strip() for x in hunk if x.is_removed)
                for line in hunk:
                    text = line.value.strip()
                    if not line.is_added or not text or text.startswith("#"):
                        continue
                    if removed[text]:
                        moved += 1
                        removed[text] -= 1
                    else:
                        changed += 1
        return changed, moved

    @property
    def commands(self) -> list[str]:
        """The pytest and unittest commands that it adds to workflows."""
        added = ""
        for file in self.diff:
            for hunk in file:
                added += "".join(line.value for line in hunk if line.is_added)
        found = []
        for line in re.sub(r"\\\n\s*", "", added).splitlines():
            command = re.match(r"\s*(python -m (pytest|unittest) .*)", line)
            if command:
                found.append(command[1].strip())
        return found

    @property
    def code_hunks(self) -> list[tuple[Any, Any]]:
        """(file, hunk) of its hunks of Python files that exist before it, but for tests
        and hunks that change comments only."""

        def code(hunk: Any, added: bool) -> list[str]:
            lines = [x for x in hunk if (x.is_added if added else x.is_removed)]
            return [x.value.partition("#")[0].rstrip() for x in lines]

        found = []
        for file in self.diff:
            if is_code(file) and not file.is_added_file:
                for hunk in file:
                    if code(hunk, True) != code(hunk, False):
                        found.append((file, hunk))
        return found


class Hunk(NamedTuple):
    """A hunk that a mutation check reverts: its place in Series.hunks, its patch's."""

    number: int
    patch: int
    file: Any
    hunk: Any

    def id(self, patches: list[Patch]) -> str:
        name = patches[self.patch].name.removesuffix(".patch")
        return f"{name}:{self.file.path}:{self.hunk.target_start}"


class Series(NamedTuple):
    patches: list[Patch]
    tests: tuple[str, ...]  # the pytest ids of every patch's tests
    copy_tests: tuple[str, ...]  # those of the patches that a patched copy holds whole
    hunks: list[Hunk]  # the code hunks of those patches
    commands: list[str]  # test commands that the patches add to workflows, each once
    workflows: list[str]  # the workflows that the patches change


@functools.cache
def read() -> Series:
    """The merge set, then the follow-ups, read once per process."""
    patches = []
    for path in series.every_patch():
        patches.append(Patch(path, PatchSet.from_filename(str(path))))
    tests: tuple[str, ...] = ()
    copy_tests: tuple[str, ...] = ()
    hunks, commands, workflows = [], [], set()
    for index, patch in enumerate(patches):
        tests += patch.tests
        if not patch.built:
            copy_tests += patch.tests
            for file, hunk in patch.code_hunks:
                hunks.append(Hunk(len(hunks), index, file, hunk))
        for command in patch.commands:
            if command not in commands:  # one command can be in two workflows
                commands.append(command)
        for file in patch.diff:
            if file.path.startswith(".github/"):
                workflows.add(file.path)
    return Series(patches, tests, copy_tests, hunks, commands, sorted(workflows))


def junit_prefix(test: str) -> str:
    """How JUnit names a pytest id's tests: 'module.', 'module.Class::test', 'module::test'."""
    path, _, name = test.partition("::")
    module = path.removesuffix(".py").replace("/", ".")
    cls, _, function = name.rpartition("::")
    if cls:
        return f"{module}.{cls}::{function}"
    if function:
        return f"{module}::{function}"
    return f"{module}."
