# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Generates the upstream patch series (upstream/*.patch) from the package's own modules.

The modules that ExecuTorch would own (exir/_host_data.py, exir/emit/_constant_guard.py,
exir/tests/simulated_device.py and the tests in exir/tests/test_host_data.py) go in as they are,
with upstream's license header and `executorch_device_guard` read as `executorch.exir`. At each
host read, the table EDITS says which call goes where: the same call that the package's wrapper
in exir/_sites.py makes. Every touched file is then formatted with upstream's ufmt settings.

The base is the ExecuTorch source of the installed executorch wheel, whose executorch/ folder has
the repository's layout. The last patch edits .github/workflows/cuda.yml, which the wheel lacks: it
is made from an upstream checkout (--upstream-git) and otherwise kept as committed.

    python upstream/generate.py                                  # rewrite patches 1-5
    python upstream/generate.py --upstream-git DIR --ref main    # rewrite all six
    python upstream/generate.py --check                          # exit 1 if a patch differs
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
TEST_MODULE = "exir/tests/test_host_data.py"
WORKFLOW = ".github/workflows/cuda.yml"


class Edit(NamedTuple):
    """One call put into an ExecuTorch function.

    `how`: "first" (before the function's first statement), "before" or "after" (the statement
    holding `anchor`), "wrap" (the statement holding `anchor`, inside `code`, a with-header), or
    "replace" (`anchor` by `code`, in the function's text).
    """

    path: str
    function: str
    how: str
    anchor: str
    code: str
    imports: str


class Patch(NamedTuple):
    """One patch of the series; its message is upstream/messages/<slug>.md (title, then body)."""

    slug: str
    new_files: Tuple[str, ...]
    tests: Tuple[str, ...]  # classes of TEST_MODULE this patch adds
    edits: Tuple[Edit, ...]


_HOST_DATA = "from executorch.exir._host_data import {}"

PATCHES: Tuple[Patch, ...] = (
    Patch(
        "emitter",
        ("exir/_host_data.py", "exir/emit/_constant_guard.py", "exir/tests/simulated_device.py"),
        ("ChildTestCase", "TestEmitterDeviceConstants", "TestEmitterOnCuda"),
        (
            Edit(
                "exir/emit/_emitter.py",
                "_Emitter._tensor_spec_to_evalue",
                "first",
                "",
                "check_constant(self, spec)",
                "from executorch.exir.emit._constant_guard import check_constant, constant_method",
            ),
            Edit(
                "exir/emit/_emitter.py",
                "_Emitter._emit_prim_getters",
                "wrap",
                "self._tensor_spec_to_evalue(",
                "with constant_method(method):",
                "",
            ),
        ),
    ),
    Patch(
        "bundled-program",
        (),
        ("TestBundledProgramDeviceData",),
        (
            Edit(
                "devtools/bundled_program/core.py",
                "BundledProgram._emit_bundled_tensor",
                "first",
                "",
                'spec = host_spec(spec, "Bundled test tensor")',
                _HOST_DATA.format("host_spec"),
            ),
        ),
    ),
    Patch(
        "named-data",
        (),
        ("TestNamedDataDeviceData",),
        (
            Edit(
                "exir/_serialize/_named_data_store.py",
                "NamedDataStore.add_named_data",
                "before",
                "real_tensor_layout = TensorLayout.from_tensor(data)",
                'data = host_tensor(data, f"Named data {key!r}")',
                _HOST_DATA.format("host_tensor, storage_bytes"),
            ),
            Edit(
                "exir/_serialize/_named_data_store.py",
                "_tensor_to_bytes",
                "replace",
                "return bytes(tensor.untyped_storage())",
                "return storage_bytes(tensor.untyped_storage())",
                "",
            ),
        ),
    ),
    Patch(
        "xnnpack",
        (),
        ("TestXnnpackDeviceConstants",),
        (
            Edit(
                "backends/xnnpack/operators/node_visitor.py",
                "NodeVisitor.get_serialized_buffer_index",
                "after",
                "assert const_val is not None",
                "check_host_tensor(const_val, lambda: constant_fqn(self.exported_program, get_attr_node))",
                _HOST_DATA.format("check_host_tensor, constant_fqn"),
            ),
            Edit(
                "backends/xnnpack/operators/node_visitor.py",
                "NodeVisitor.get_quant_params",
                "before",
                "scale = cast(torch.Tensor, quant_params.scale)",
                "check_host_tensor(quant_params.scale, lambda: "
                'f"per-channel scales of {constant_fqn(self.exported_program, quant_params.q_input)}")',
                "",
            ),
        ),
    ),
    Patch(
        "vulkan",
        (),
        ("TestVulkanDeviceConstants",),
        (
            Edit(
                "backends/vulkan/serialization/vulkan_graph_builder.py",
                "VkGraphBuilder.get_param_tensor",
                "before",
                "return tensor",
                "check_host_tensor(tensor, lambda: constant_fqn(self.program, node))",
                _HOST_DATA.format("check_host_tensor, constant_fqn"),
            ),
        ),
    ),
)

# The CUDA-gated test joins the job of upstream's .github/workflows/cuda.yml that runs CUDA Python
# tests: (job, or "" for the trigger, line after which to insert, lines inserted).
WORKFLOW_PATHS = ("exir/_host_data.py", "exir/emit/", "exir/tests/test_host_data.py")
WORKFLOW_EDITS: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = (
    ("", "      - backends/aoti/**", tuple(
        f"      - {path}**" if path.endswith("/") else f"      - {path}" for path in WORKFLOW_PATHS
    )),
    ("  unittest-cuda:", "contains(needs.changed-files.outputs.changed-files, 'backends/aoti') ||", tuple(
        f"      contains(needs.changed-files.outputs.changed-files, '{path}') ||" for path in WORKFLOW_PATHS
    )),
    ("  unittest-cuda:", '        python -m pytest backends/cuda/tests backends/cuda/passes/tests -v -o "addopts="', (
        "",
        "        # Lowering a CUDA module to the portable path raises instead of crashing",
        f'        python -m pytest {TEST_MODULE}::TestEmitterOnCuda -v -o "addopts="',
    )),
)


def executorch_root() -> Path:
    """The installed executorch package, found without importing it."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not installed in this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def upstream_module(path: str) -> str:
    """A package module as upstream's: its license header, `executorch.exir` for the package."""
    text = (REPO / path).read_text()
    assert text.startswith(PACKAGE_HEADER), f"{path} lacks the package's license header"
    return UPSTREAM_HEADER + text[len(PACKAGE_HEADER):].replace(
        "executorch_device_guard", "executorch.exir"
    )


def test_module(classes: Sequence[str]) -> str:
    """TEST_MODULE with only `classes` and the module-level names that they use."""
    text = upstream_module(TEST_MODULE)
    tree = ast.parse(text)
    drop = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name not in classes]
    while True:
        kept = [n for n in tree.body if n not in drop]
        used = {
            name.id
            for node in kept
            for name in ast.walk(node)
            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Load)
        }
        unused = [
            n
            for n in kept
            if isinstance(n, ast.Assign)
            and all(isinstance(t, ast.Name) and t.id not in used for t in n.targets)
        ]
        if not unused:
            break
        drop += unused
    lines = text.splitlines(keepends=True)
    for node in sorted(drop, key=lambda n: -n.lineno):
        del lines[node.lineno - 1 : node.end_lineno]
    return "".join(lines)


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
        if edit.how == "wrap":
            lines[first:last] = [indent + edit.code + "\n"] + ["    " + l for l in lines[first:last]]
        else:
            where = last if edit.how == "after" else first
            lines[where:where] = [indent + edit.code + "\n"]
    text = "".join(lines)
    if edit.imports:
        tree = ast.parse(text)
        last_import = max(
            n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
        )
        lines = text.splitlines(keepends=True)
        lines.insert(last_import, edit.imports + "\n")
        text = "".join(lines)
    return text


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


def generate(root: Path, workflow: Optional[str]) -> Dict[str, str]:
    """The series as {file name: text}; the workflow patch only if its base is given."""
    total = len(PATCHES) + 1
    patches: Dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="series-") as tmp:
        repo = Path(tmp)
        _git(repo, "init", "-q")
        (repo / "pyproject.toml").write_text(UFMT_CONFIG)
        (repo / ".git" / "info" / "exclude").write_text("pyproject.toml\n")
        touched = sorted({edit.path for patch in PATCHES for edit in patch.edits})
        for path in touched:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / path, repo / path)
        if workflow is not None:
            (repo / WORKFLOW).parent.mkdir(parents=True, exist_ok=True)
            (repo / WORKFLOW).write_text(workflow)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "base")
        classes: List[str] = []
        for number, patch in enumerate(PATCHES, 1):
            changed = [TEST_MODULE, *patch.new_files]
            for path in patch.new_files:
                (repo / path).parent.mkdir(parents=True, exist_ok=True)
                (repo / path).write_text(upstream_module(path))
            classes += patch.tests
            (repo / TEST_MODULE).parent.mkdir(parents=True, exist_ok=True)
            (repo / TEST_MODULE).write_text(test_module(classes))
            for edit in patch.edits:
                target = repo / edit.path
                target.write_text(apply_edit(target.read_text(), edit))
                changed.append(edit.path)
            subprocess.run(
                [sys.executable, "-m", "ufmt", "--quiet", "format", *sorted(set(changed))],
                cwd=repo,
                check=True,
            )
            patches.update(_commit(repo, number, total, patch.slug, _message(patch.slug)))
        if workflow is not None:
            (repo / WORKFLOW).write_text(edit_workflow(workflow))
            patches.update(_commit(repo, total, total, "ci", _message("ci")))
    return patches


def _commit(repo: Path, number: int, total: int, slug: str, message: str) -> Dict[str, str]:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    text = _git(repo, "format-patch", "-1", "--stdout", "--zero-commit", "--no-signature", "HEAD")
    text = text.replace("Subject: [PATCH] ", f"Subject: [PATCH {number}/{total}] ", 1)
    return {f"{number:04d}-{slug}.patch": text}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executorch", type=Path, help="an executorch package folder (default: installed)")
    parser.add_argument("--upstream-git", help="a git directory of pytorch/executorch, for the workflow patch")
    parser.add_argument("--ref", default="main", help="its revision to read the workflow from")
    parser.add_argument("--check", action="store_true", help="compare with upstream/ instead of writing")
    args = parser.parse_args(argv)

    root = args.executorch or executorch_root()
    workflow = None
    if args.upstream_git:
        workflow = subprocess.run(
            ["git", "--git-dir", args.upstream_git, "show", f"{args.ref}:{WORKFLOW}"],
            check=True, capture_output=True, text=True,
        ).stdout
    series = generate(root, workflow)
    committed = {p.name: p.read_text() for p in OUT.glob("*.patch")}
    if workflow is None:  # the workflow patch stays as committed
        series.update({name: text for name, text in committed.items() if name.endswith("-ci.patch")})
    if args.check:
        differ = sorted(name for name in set(series) | set(committed) if series.get(name) != committed.get(name))
        for name in differ:
            print(f"differs from the generated series: upstream/{name}")
        return 1 if differ else 0
    for name in set(committed) - set(series):
        (OUT / name).unlink()
    for name, text in series.items():
        (OUT / name).write_text(text)
    print("\n".join(f"upstream/{name}" for name in sorted(series)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
