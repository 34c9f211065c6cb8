# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""upstream/buck.py on a small tree in upstream's Buck style, no checkout needed: a clean series passes, and a new
file in no target's srcs, an import missing from deps, a dep on no target and a broken BUCK are each a problem."""

import unittest

from upstream import buck

# exir's targets come from an in-repo targets.bzl: lib only in fbcode's view, a C++ rule, a glob that must not
# reach into the exir/emit package.
TARGETS_BZL = """
load("@fbsource//xplat/executorch/build:runtime_wrapper.bzl", "runtime")

def define_common_targets():
    runtime.python_library(name = "schema", srcs = ["schema.py"])
    runtime.cxx_library(name = "kernels", srcs = ["kernels.cpp"])
    if not runtime.is_oss:
        runtime.python_library(
            name = "lib",
            srcs = native.glob(["**/*.py"], exclude = ["schema.py"]),
            deps = [":schema", ":kernels"],
        )
"""
EMIT_BUCK = """
load("@fbsource//xplat/executorch/build:runtime_wrapper.bzl", "runtime")
load("@fbcode_macros//build_defs:build_file_migration.bzl", "fbcode_target", "non_fbcode_target")
load("@fbcode_macros//build_defs:python_unittest.bzl", "python_unittest")

fbcode_target(_kind = runtime.python_library,
    name = "emit",
    srcs = ["_emitter.py"],
    deps = [
        "//caffe2:torch",
        "//executorch/exir:lib",
    ],
)

fbcode_target(_kind = python_unittest,
    name = "test_emit",
    srcs = ["test/test_emit.py"],
    deps = [":emit"],
)

non_fbcode_target(_kind = runtime.python_library, name = "xplat_emit", srcs = ["_emitter.py"])
"""
MAIN = {
    "exir/BUCK": 'load(":targets.bzl", "define_common_targets")\n\ndefine_common_targets()\n',
    "exir/targets.bzl": TARGETS_BZL,
    "exir/kernels.cpp": "",
    "exir/schema.py": "import dataclasses\n",
    "exir/lib.py": "from executorch.exir.schema import Program\n",
    "exir/emit/BUCK": EMIT_BUCK,
    "exir/emit/test/test_emit.py": "import unittest\n",
}
SERIES = {  # what the series adds or changes
    "exir/emit/_emitter.py": "import torch\nfrom executorch.exir import lib\n",
    "exir/emit/test/test_emit.py": "from executorch.exir.emit._emitter import emit\n",
    "exir/lib.py": "from executorch.exir.schema import Program\n\nVERSION = 2\n",
}


def check(
    patched: dict[str, str], in_main: dict[str, str] | None = None
) -> buck.Report:
    """The series with `patched` on top, against main with `in_main`, as upstream/check.py calls it."""
    main = {**MAIN, **(in_main or {})}
    files = {**main, **SERIES, **patched}
    added = sorted(p for p in files if p not in main)
    changed = sorted({*SERIES, *patched} - set(added))
    return buck.check(
        buck.Tree(set(files), files.__getitem__),
        buck.Tree(set(main), main.__getitem__),
        added,
        changed,
    )


class TestBuck(unittest.TestCase):
    def test_clean_series_has_no_problems(self) -> None:
        report = check({})
        self.assertEqual(report.problems, [])
        self.assertEqual(
            report.info,
            [
                "exir/emit/_emitter.py: owned by //executorch/exir/emit:emit",
                "exir/emit/test/test_emit.py: owned by //executorch/exir/emit:test_emit",
                "exir/lib.py: owned by //executorch/exir:lib",
            ],
        )

    def test_new_file_in_no_srcs(self) -> None:
        report = check({"exir/emit/_extra.py": "import torch\n"})
        self.assertEqual(
            report.problems,
            [
                "exir/emit/_extra.py: in the srcs of 0 targets (none), must be in exactly one"
            ],
        )

    def test_import_missing_from_deps(self) -> None:
        report = check(
            {"exir/emit/BUCK": EMIT_BUCK.replace('"//executorch/exir:lib",', "")}
        )
        self.assertEqual(
            report.problems,
            [
                "//executorch/exir/emit:emit: exir/emit/_emitter.py imports executorch.exir.lib (exir/lib.py, owned by "
                "//executorch/exir:lib), which is not in its deps"
            ],
        )

    def test_dep_on_no_target(self) -> None:
        report = check(
            {
                "exir/emit/BUCK": EMIT_BUCK.replace(
                    '":emit"', '":emit", "//executorch/exir:lib_typo"'
                )
            }
        )
        self.assertEqual(
            report.problems,
            [
                "//executorch/exir/emit:test_emit: dep //executorch/exir:lib_typo names no existing target"
            ],
        )

    def test_broken_build_file_is_a_problem_unless_main_has_it(self) -> None:
        broken = (
            EMIT_BUCK
            + 'fbcode_target(_kind = runtime.python_library, name = 1 + "a")\n'
        )
        self.assertEqual(
            check({"exir/emit/BUCK": broken}).problems,
            [
                "exir/emit/BUCK:22:54: Operation `+` not supported for types `int` and `string`"
            ],
        )
        # oncall: a name that nothing defines.
        broken = MAIN["exir/BUCK"] + 'oncall("executorch" + 1)\n'
        report = check({"exir/BUCK": broken}, in_main={"exir/BUCK": broken})
        self.assertEqual(report.problems, [])
        self.assertIn(
            "already in main: exir/BUCK:4:8: Operation `+` not supported for types `string` and `int`",
            report.info,
        )
