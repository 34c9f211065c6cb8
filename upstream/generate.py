# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Generates the upstream patch series (upstream/*.patch) from the package's own modules.

The files that ExecuTorch would own sit in this repository at their upstream paths
(exir/_host_data.py, exir/tests/simulated_device.py and one test module beside each changed
file); they go in as they are, with upstream's license header and `executorch_device_guard` read
as `executorch.exir`. The table PATCHES says which call goes where in ExecuTorch's code (the
checks of exir/_host_data.py that the package's wrappers in exir/_sites.py make) and which Buck
entries each patch adds. Every touched Python file is formatted with upstream's ufmt settings.

Python sources come from the installed executorch wheel (BASE_RELEASE), whose executorch/ folder
has the repository's layout. The wheel has no Buck files and no .github/: those come from an
upstream checkout (--upstream-git, at --ref). Without one, --check compares everything but the
Buck and workflow hunks.

    python upstream/generate.py --upstream-git DIR --ref main    # rewrite the series
    python upstream/generate.py --check [--upstream-git DIR]     # exit 1 if a patch differs
"""

import argparse
import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "upstream"
BASE_RELEASE = "1.5.1"

PACKAGE_HEADER = "# Copyright (c) executorch-device-guard authors.\n"
UPSTREAM_HEADER = "# Copyright (c) Meta Platforms, Inc. and affiliates.\n"
# ExecuTorch's formatter settings, from its pyproject.toml.
UFMT_CONFIG = """[tool.usort]
first_party_detection = false

[tool.black]
target-version = ["py38", "py39", "py310", "py311", "py312", "py313"]
"""
AUTHOR = "executorch-device-guard <device-guard@users.noreply.github.com>"
DATE = "Mon, 30 Nov 2026 12:00:00 +0000"
WORKFLOW = ".github/workflows/cuda.yml"
BUCK_FILES = ("BUCK", "TARGETS", "targets.bzl")


class Edit(NamedTuple):
    """One call put into an ExecuTorch function.

    `how`: "first" (before the function's first statement), "before" or "after" (the statement
    holding `anchor`), or "replace" (`anchor` by `code`, in the function's text).
    """

    path: str
    function: str
    how: str
    anchor: str
    code: str
    imports: str


class BuckEdit(NamedTuple):
    """One change to a Buck file: `text`, a label, added to the deps of `target` ("deps"), or
    `text`, a new target, added after `target` ("after")."""

    path: str
    target: str
    how: str
    text: str


class Patch(NamedTuple):
    """One patch of the series; its message is upstream/messages/<slug>.md (title, then body)."""

    slug: str
    new_files: Tuple[str, ...]
    edits: Tuple[Edit, ...]
    buck: Tuple[BuckEdit, ...]


_IMPORT = "from executorch.exir._host_data import {}"
_HOST_DATA_DEP = "//executorch/exir:host_data"


def _target(rule: str, name: str, srcs: Sequence[str], deps: Sequence[str]) -> str:
    """A Buck target in the style of the file that gets it: `rule(` opens it, as there."""
    lines = [rule, f'    name = "{name}",', "    srcs = ["]
    lines += [f'        "{src}",' for src in srcs]
    lines += ["    ],", "    deps = ["]
    lines += [f'        "{dep}",' for dep in deps]
    lines += ["    ],", ")"]
    return "\n".join(lines) + "\n"


_TEST_DEPS = ("//caffe2:torch", "//executorch/exir:error", "//executorch/exir:lib")
_SIMULATION_DEP = "//executorch/exir/tests:simulated_device"

PATCHES: Tuple[Patch, ...] = (
    Patch(
        "emitter",
        ("exir/_host_data.py", "exir/tests/simulated_device.py", "exir/emit/test/test_emit_device_constants.py"),
        (
            Edit(
                "exir/emit/_emitter.py",
                "_TopLevelEmitter.placeholder",
                "after",
                "if initialize_buffer and is_mutable_buffer:",
                "check_host_spec(spec, repr(fqn))",
                _IMPORT.format("check_host_spec, check_host_tensor"),
            ),
            Edit(
                "exir/emit/_emitter.py",
                "_Emitter._emit_prim_getters",
                "before",
                "self._tensor_spec_to_evalue(",
                'check_host_tensor(val, f"returned by constant method {method!r}")',
                "",
            ),
        ),
        (
            BuckEdit(
                "exir/BUCK",
                "error",
                "after",
                _target(
                    "fbcode_target(_kind = runtime.python_library,",
                    "host_data",
                    ["_host_data.py"],
                    [":error", ":tensor", "//caffe2:torch"],
                ),
            ),
            BuckEdit("exir/emit/BUCK", "emit", "deps", _HOST_DATA_DEP),
            BuckEdit(
                "exir/tests/targets.bzl",
                "asr_joiner",
                "after",
                _target(
                    "runtime.python_library(",
                    "simulated_device",
                    ["simulated_device.py"],
                    ["//caffe2:torch"],
                ),
            ),
            BuckEdit(
                "exir/emit/test/BUCK",
                "emit",
                "after",
                _target(
                    "fbcode_target(_kind = runtime.python_test,",
                    "emit_device_constants",
                    ["test_emit_device_constants.py"],
                    [*_TEST_DEPS, _SIMULATION_DEP],
                ),
            ),
        ),
    ),
    Patch(
        "bundled-program",
        ("devtools/bundled_program/test/test_bundle_device_data.py",),
        (
            Edit(
                "devtools/bundled_program/core.py",
                "BundledProgram._emit_bundled_tensor",
                "first",
                "",
                'spec = host_spec(spec, "Bundled test tensor")',
                _IMPORT.format("host_spec"),
            ),
        ),
        (
            BuckEdit("devtools/bundled_program/BUCK", "core", "deps", _HOST_DATA_DEP),
            BuckEdit(
                "devtools/bundled_program/test/BUCK",
                "bundle_data",
                "after",
                _target(
                    "fbcode_target(_kind = python_unittest,",
                    "bundle_device_data",
                    ["test_bundle_device_data.py"],
                    [
                        *_TEST_DEPS,
                        "//executorch/devtools/bundled_program:config",
                        "//executorch/devtools/bundled_program:core",
                        "//executorch/devtools/bundled_program/serialize:lib",
                        _SIMULATION_DEP,
                    ],
                ),
            ),
        ),
    ),
    Patch(
        "named-data",
        ("exir/_serialize/test/test_named_data_device.py",),
        (
            Edit(
                "exir/_serialize/_named_data_store.py",
                "NamedDataStore.add_named_data",
                "before",
                "real_tensor_layout = TensorLayout.from_tensor(data)",
                'data = host_tensor(data, f"Named data {key!r}")',
                _IMPORT.format("host_tensor"),
            ),
            Edit(
                "exir/_serialize/_named_data_store.py",
                "_tensor_to_bytes",
                "replace",
                "return bytes(tensor.untyped_storage())",
                "return (\n"
                "            torch.empty(0, dtype=torch.uint8)\n"
                "            .set_(tensor.untyped_storage())\n"
                "            .numpy()\n"
                "            .tobytes()\n"
                "        )",
                "",
            ),
        ),
        (
            BuckEdit("exir/_serialize/BUCK", "lib", "deps", _HOST_DATA_DEP),
            BuckEdit(
                "exir/_serialize/test/BUCK",
                "test_named_data_store",
                "after",
                _target(
                    "fbcode_target(_kind = runtime.python_test,",
                    "test_named_data_device",
                    ["test_named_data_device.py"],
                    [
                        "//caffe2:torch",
                        "//executorch/exir:error",
                        "//executorch/exir/_serialize:lib",
                        _SIMULATION_DEP,
                    ],
                ),
            ),
        ),
    ),
    Patch(
        "xnnpack",
        ("backends/xnnpack/test/test_xnnpack_device_constants.py",),
        (
            Edit(
                "backends/xnnpack/operators/node_visitor.py",
                "NodeVisitor.get_serialized_buffer_index",
                "after",
                "assert const_val is not None",
                "check_host_tensor(const_val, constant_name(self.exported_program, get_attr_node))",
                _IMPORT.format("check_host_tensor, constant_name"),
            ),
            Edit(
                "backends/xnnpack/operators/node_visitor.py",
                "NodeVisitor.get_quant_params",
                "after",
                "scale = cast(torch.Tensor, quant_params.scale)",
                "check_host_tensor(scale, "
                'f"per-channel scales of {constant_name(self.exported_program, quant_params.q_input)}")',
                "",
            ),
        ),
        (
            BuckEdit("backends/xnnpack/operators/BUCK", "operators", "deps", _HOST_DATA_DEP),
            BuckEdit(
                "backends/xnnpack/test/BUCK",
                "test_xnnpack_serialization",
                "after",
                _target(
                    "fbcode_target(_kind = runtime.python_test,",
                    "test_xnnpack_device_constants",
                    ["test_xnnpack_device_constants.py"],
                    [
                        "//caffe2:torch",
                        "//executorch/backends/xnnpack/operators:operators",
                        "//executorch/backends/xnnpack/serialization:xnnpack_schema",
                        "//executorch/exir:error",
                        "//executorch/exir/_serialize:lib",
                        _SIMULATION_DEP,
                    ],
                ),
            ),
        ),
    ),
    Patch(
        "vulkan",
        ("backends/vulkan/test/test_vulkan_device_constants.py",),
        (
            Edit(
                "backends/vulkan/serialization/vulkan_graph_builder.py",
                "VkGraphBuilder.get_param_tensor",
                "before",
                "return tensor",
                "check_host_tensor(tensor, constant_name(self.program, node))",
                _IMPORT.format("check_host_tensor, constant_name"),
            ),
        ),
        (
            BuckEdit("backends/vulkan/serialization/targets.bzl", "lib", "deps", _HOST_DATA_DEP),
            BuckEdit(
                "backends/vulkan/test/targets.bzl",
                "test_serialization",
                "after",
                _target(
                    "python_unittest(",
                    "test_vulkan_device_constants",
                    ["test_vulkan_device_constants.py"],
                    [
                        "//caffe2:torch",
                        "//executorch/backends/vulkan/serialization:lib",
                        "//executorch/exir:error",
                        "//executorch/exir/backend:utils",
                        _SIMULATION_DEP,
                    ],
                ),
            ),
        ),
    ),
)

# The CUDA-gated test joins the job of .github/workflows/cuda.yml that runs CUDA Python tests, on
# changes to the files whose edits could bring the crash back: (job, or "" for the trigger, line
# after which to insert, lines inserted).
CUDA_TEST = "exir/emit/test/test_emit_device_constants.py"
WORKFLOW_PATHS = ("exir/_host_data.py", "exir/emit/_emitter.py", CUDA_TEST)
WORKFLOW_EDITS: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = (
    ("", "      - backends/aoti/**", tuple(f"      - {path}" for path in WORKFLOW_PATHS)),
    ("  unittest-cuda:", "contains(needs.changed-files.outputs.changed-files, 'backends/aoti') ||", tuple(
        f"      contains(needs.changed-files.outputs.changed-files, '{path}') ||" for path in WORKFLOW_PATHS
    )),
    ("  unittest-cuda:", '        python -m pytest backends/cuda/tests backends/cuda/passes/tests -v -o "addopts="', (
        "",
        "        # Lowering a CUDA module to the portable path raises instead of crashing",
        f'        python -m pytest {CUDA_TEST}::TestEmitCudaModule -v -o "addopts="',
    )),
)


def executorch_root() -> Path:
    """The installed executorch package, found without importing it."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not installed in this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def upstream_file(path: str) -> str:
    """A file of this repository as upstream's: its license header, `executorch.exir` for the
    package."""
    text = (REPO / path).read_text()
    assert text.startswith(PACKAGE_HEADER), f"{path} lacks the package's license header"
    return UPSTREAM_HEADER + text[len(PACKAGE_HEADER):].replace(
        "executorch_device_guard", "executorch.exir"
    )


def _function(tree: ast.Module, qualname: str) -> ast.AST:
    node: ast.AST = tree
    for name in qualname.split("."):
        node = next(
            n
            for n in ast.iter_child_nodes(node)
            if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name
        )
    return node


def _statement(function: ast.AST, lines: List[str], anchor: str) -> ast.stmt:
    """The innermost statement of `function` whose text holds `anchor`."""
    found = [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.stmt)
        and node is not function
        and anchor in "".join(lines[node.lineno - 1 : node.end_lineno])
    ]
    assert found, f"{anchor!r} not found"
    return min(found, key=lambda n: n.end_lineno - n.lineno)


def apply_edit(text: str, edit: Edit) -> str:
    """Puts `edit.code` into its function; ufmt formats it afterwards."""
    lines = text.splitlines(keepends=True)
    function = _function(ast.parse(text), edit.function)
    if edit.how == "replace":
        start, end = function.lineno - 1, function.end_lineno
        body = "".join(lines[start:end])
        assert body.count(edit.anchor) == 1, f"{edit.anchor!r} is not unique in {edit.function}"
        lines[start:end] = [body.replace(edit.anchor, edit.code)]
    else:
        if edit.how == "first":
            body = function.body  # type: ignore[attr-defined]
            docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            statement = body[1 if docstring else 0]
        else:
            statement = _statement(function, lines, edit.anchor)
        first, last = statement.lineno - 1, statement.end_lineno
        indent = re.match(r"\s*", lines[first]).group()
        where = last if edit.how == "after" else first
        lines[where:where] = [indent + edit.code + "\n"]
    return add_import("".join(lines), edit.imports) if edit.imports else "".join(lines)


def add_import(text: str, line: str) -> str:
    """Adds an import line after the module's last one; ufmt sorts it afterwards."""
    last_import = max(
        n.end_lineno for n in ast.parse(text).body if isinstance(n, (ast.Import, ast.ImportFrom))
    )
    lines = text.splitlines(keepends=True)
    lines.insert(last_import, line + "\n")
    return "".join(lines)


def _target_span(lines: List[str], name: str) -> Tuple[int, int]:
    """The lines [start, end) of the call that defines target `name` in a Buck file."""
    (line,) = [i for i, text in enumerate(lines) if re.match(rf'\s*name = "{re.escape(name)}",', text)]
    indent = len(lines[line]) - len(lines[line].lstrip())
    start = next(i for i in range(line - 1, -1, -1) if len(lines[i]) - len(lines[i].lstrip()) < indent)
    depth = 0
    for end in range(start, len(lines)):
        depth += lines[end].count("(") + lines[end].count("[") - lines[end].count(")") - lines[end].count("]")
        if depth == 0:
            return start, end + 1
    raise AssertionError(f"target {name!r} does not close")


def apply_buck_edit(text: str, edit: BuckEdit) -> str:
    """Adds a dep to a target, in sorted place among the //executorch deps, or a target after it."""
    lines = text.splitlines(keepends=True)
    start, end = _target_span(lines, edit.target)
    if edit.how == "after":
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        block = "".join(indent + line if line.strip() else line for line in edit.text.splitlines(keepends=True))
        lines[end:end] = ["\n", block]
        return "".join(lines)
    deps = next(i for i in range(start, end) if lines[i].strip() == "deps = [")
    close = next(i for i in range(deps, end) if lines[i].strip().startswith("]"))
    entries = [i for i in range(deps + 1, close) if lines[i].strip().startswith('"//executorch/')]
    label = f'"{edit.text}",'
    after = [i for i in entries if lines[i].strip().split()[0] < label]
    where = (after[-1] + 1) if after else (entries[0] if entries else close)
    indent = lines[deps + 1][: len(lines[deps + 1]) - len(lines[deps + 1].lstrip())]
    lines[where:where] = [indent + label + "\n"]
    return "".join(lines)


def edit_workflow(text: str) -> str:
    lines = text.splitlines()
    for job, after, inserted in WORKFLOW_EDITS:
        start = lines.index(job) if job else 0
        where = next(i for i in range(start, len(lines)) if lines[i].strip() == after.strip()) + 1
        lines[where:where] = inserted
    return "\n".join(lines) + "\n"


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": DATE,
        "GIT_COMMITTER_DATE": DATE,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    name, email = AUTHOR[: AUTHOR.index(" <")], AUTHOR[AUTHOR.index("<") + 1 : -1]
    identity = ["-c", f"user.name={name}", "-c", f"user.email={email}", "-c", "core.abbrev=12"]
    return subprocess.run(
        ["git", *identity, *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


def _message(slug: str) -> str:
    return (OUT / "messages" / f"{slug}.md").read_text()


def upstream_text(git_dir: str, ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{ref}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def is_buck(path: str) -> bool:
    return path.rsplit("/", 1)[-1] in BUCK_FILES


def generate(root: Path, git_dir: Optional[str], ref: str) -> Dict[str, str]:
    """The series as {file name: text}; without an upstream checkout, without Buck edits and the
    workflow patch."""
    total = len(PATCHES) + 1
    patches: Dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="series-") as tmp:
        repo = Path(tmp)
        _git(repo, "init", "-q")
        (repo / "pyproject.toml").write_text(UFMT_CONFIG)
        (repo / ".git" / "info" / "exclude").write_text("pyproject.toml\n")
        sources = {edit.path for patch in PATCHES for edit in patch.edits}
        bucks = {edit.path for patch in PATCHES for edit in patch.buck} if git_dir else set()
        for path in sorted(sources | bucks | ({WORKFLOW} if git_dir else set())):
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            if path in sources:
                shutil.copyfile(root / path, repo / path)
            else:
                (repo / path).write_text(upstream_text(git_dir, ref, path))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "base")
        for number, patch in enumerate(PATCHES, 1):
            for path in patch.new_files:
                (repo / path).parent.mkdir(parents=True, exist_ok=True)
                (repo / path).write_text(upstream_file(path))
            for edit in patch.edits:
                (repo / edit.path).write_text(apply_edit((repo / edit.path).read_text(), edit))
            for edit in patch.buck if git_dir else ():
                (repo / edit.path).write_text(apply_buck_edit((repo / edit.path).read_text(), edit))
            python = sorted({*patch.new_files, *(edit.path for edit in patch.edits)})
            subprocess.run([sys.executable, "-m", "ufmt", "--quiet", "format", *python], cwd=repo, check=True)
            patches.update(_commit(repo, number, total, patch.slug, _message(patch.slug)))
        if git_dir:
            (repo / WORKFLOW).write_text(edit_workflow((repo / WORKFLOW).read_text()))
            patches.update(_commit(repo, total, total, "ci", _message("ci")))
    return patches


def _commit(repo: Path, number: int, total: int, slug: str, message: str) -> Dict[str, str]:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    text = _git(repo, "format-patch", "-1", "--stdout", "--zero-commit", "--no-signature", "HEAD")
    text = text.replace("Subject: [PATCH] ", f"Subject: [PATCH {number}/{total}] ", 1)
    return {f"{number:04d}-{slug}.patch": text}


def sections(patch: str) -> Tuple[str, Dict[str, str]]:
    """A patch's message (up to its diffstat) and its diff of each file."""
    message, _, diff = patch.partition("\ndiff --git ")
    files = {}
    for section in ("diff --git " + diff).split("\ndiff --git ")[0 if diff else 1 :]:
        section = section if section.startswith("diff --git ") else "diff --git " + section
        files[section.split(" b/", 1)[1].split("\n", 1)[0]] = section.rstrip("\n")
    return message.split("\n---\n", 1)[0], files


def differences(generated: Dict[str, str], committed: Dict[str, str], whole: bool) -> List[str]:
    """Where the committed series differs from the generated one; without an upstream checkout
    (not `whole`), Buck and workflow hunks are not compared."""
    found = []
    for name in sorted(set(generated) | set(committed)):
        if not whole and name.endswith("-ci.patch"):
            continue
        if name not in generated or name not in committed:
            found.append(f"upstream/{name}: {'not generated' if name in committed else 'not committed'}")
            continue
        (message, files), (old_message, old_files) = sections(generated[name]), sections(committed[name])
        if message != old_message:
            found.append(f"upstream/{name}: the message differs")
        if not whole:
            old_files = {path: text for path, text in old_files.items() if not is_buck(path)}
        elif generated[name] != committed[name] and message == old_message and files == old_files:
            found.append(f"upstream/{name}: the diffstat differs")
        for path in sorted(set(files) | set(old_files)):
            if files.get(path) != old_files.get(path):
                found.append(f"upstream/{name}: {path} differs")
    return found


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executorch", type=Path, help="an executorch package folder (default: installed)")
    parser.add_argument("--upstream-git", help="a git directory of pytorch/executorch, for Buck files and the workflow")
    parser.add_argument("--ref", default="refs/heads/main", help="its revision to read them from")
    parser.add_argument("--check", action="store_true", help="compare with upstream/ instead of writing")
    args = parser.parse_args(argv)

    series = generate(args.executorch or executorch_root(), args.upstream_git, args.ref)
    committed = {p.name: p.read_text() for p in OUT.glob("*.patch")}
    if args.check:
        found = differences(series, committed, bool(args.upstream_git))
        print("\n".join(found) or f"the committed series is generated from this code"
              f"{'' if args.upstream_git else ' (Buck and workflow hunks not compared: no --upstream-git)'}")
        return 1 if found else 0
    if not args.upstream_git:
        parser.error("writing the series needs --upstream-git (Buck files and the workflow)")
    for name in set(committed) - set(series):
        (OUT / name).unlink()
    for name, text in series.items():
        (OUT / name).write_text(text)
    print("\n".join(f"upstream/{name}" for name in sorted(series)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
