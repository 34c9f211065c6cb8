# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Generates the upstream patch series (upstream/*.patch) from this repository.

Seven PRs, one per owner and change: 0001 checks constants where the emitter reads them, 0002
stores named data of views as their own values (CPU only), 0003 to 0006 copy or raise at the other
host reads of tensor bytes (named data, bundled programs, XNNPACK, Vulkan), 0007 names the device
where lowering a program exported on one fails first. The files that ExecuTorch would own sit in
this repository at their upstream paths (exir/_host_read.py and the test modules); a new test file
goes in as it is, with upstream's license header, and a test module whose tests belong in an
existing upstream test file is merged into it. The table PATCHES says what each PR changes in
ExecuTorch's code and which Buck, workflow and pytest.ini lines it adds. Every touched Python file
is formatted with upstream's ufmt settings.

Python sources come from the installed executorch wheel (BASE_RELEASE), whose executorch/ folder
has the repository's layout. The wheel has no Buck files, no .github/ and no pytest.ini: those come
from an upstream checkout (--upstream-git, at --ref). Without one, --check compares everything but
those hunks.

    python -m upstream.generate --upstream-git DIR --ref main    # rewrite the series
    python -m upstream.generate --check [--upstream-git DIR]     # exit 1 if a patch differs
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
import textwrap
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
# Files of upstream's repository that the wheel lacks: read from --upstream-git.
NOT_IN_WHEEL = ("BUCK", "TARGETS", "targets.bzl", "pytest.ini")


class Edit(NamedTuple):
    """A change to an ExecuTorch function; `code` is indented like the statement it joins.

    `how`: "before" or "after" the innermost statement holding `anchor`, or "replace" (`anchor` by
    `code`, in the function's or class's text).
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


class LineEdit(NamedTuple):
    """Lines put into a file that the wheel lacks, after the first line equal to `after` (ignoring
    indentation) that follows the line `section` ("" for the file's start)."""

    path: str
    section: str
    after: str
    lines: Tuple[str, ...]


class Patch(NamedTuple):
    """One patch of the series; its message is upstream/messages/<slug>.md (title, then body).

    `files` are written from this repository as they are, but for the top-level functions in
    `leave_out` (a later patch adds them). `merged` pairs a test module of this repository with
    the existing upstream test file that receives its imports and definitions."""

    slug: str
    files: Tuple[str, ...]
    merged: Tuple[Tuple[str, str], ...]
    edits: Tuple[Edit, ...]
    buck: Tuple[BuckEdit, ...]
    lines: Tuple[LineEdit, ...]
    leave_out: Tuple[str, ...] = ()


def _label_order(label: str) -> Tuple[bool, List[str]]:
    """Buildifier's order of deps: local labels first, then by package, then by name."""
    return not label.startswith(":"), label.split(":")


def _target(rule: str, name: str, srcs: Sequence[str], deps: Sequence[str]) -> str:
    """A Buck target in the style of the file that gets it: `rule(` opens it, as there."""
    lines = [rule, f'    name = "{name}",', "    srcs = ["]
    lines += [f'        "{src}",' for src in srcs]
    lines += ["    ],", "    deps = ["]
    lines += [f'        "{dep}",' for dep in sorted(deps, key=_label_order)]
    lines += ["    ],", ")"]
    return "\n".join(lines) + "\n"


WORKFLOW = ".github/workflows/cuda.yml"
_CHANGED = "contains(needs.changed-files.outputs.changed-files, '{}') ||"


def _cuda_job(after: Tuple[str, str], paths: Sequence[str], comment: str, tests: str) -> Tuple[LineEdit, ...]:
    """A patch's CUDA tests in the unittest-cuda job: `paths` trigger it, after the trigger `after[0]`
    of the previous patch or of upstream, and a step of its own runs `tests`, after the command
    `after[1]`."""
    return (
        LineEdit(WORKFLOW, "", f"- {after[0]}", tuple(f"      - {path}" for path in paths)),
        LineEdit(WORKFLOW, "  unittest-cuda:", _CHANGED.format(after[0].removesuffix("/**")),
                 tuple(f"      {_CHANGED.format(path)}" for path in paths)),
        LineEdit(WORKFLOW, "  unittest-cuda:", after[1], ("", f"        # {comment}", _pytest(tests))),
    )


def _pytest(tests: str) -> str:
    return f'        python -m pytest {tests} -v -o "addopts="'


_EMITTER = "exir/emit/_emitter.py"
_PROGRAM = "exir/program/_program.py"
_NAMED_DATA = "exir/_serialize/_named_data_store.py"
_HOST_READ = "from executorch.exir._host_read import {}"
_HOST_READ_DEP = "//executorch/exir:host_read"
_TEST_DEPS = ("//caffe2:torch", "//executorch/exir:error")
_EMIT_TEST = "exir/emit/test/test_emit.py"
_NAMED_DATA_TEST = "exir/_serialize/test/test_named_data_store.py"
_BUNDLE_TEST = "devtools/bundled_program/test/test_bundle_data.py"
_XNNPACK_TEST = "backends/xnnpack/test/test_xnnpack_device_constants.py"
_VULKAN_TEST = "backends/vulkan/test/test_serialization.py"
_PROGRAM_TEST = "exir/program/test/test_program.py"
_CUDA_STEP = 'python -m pytest backends/cuda/tests backends/cuda/passes/tests -v -o "addopts="'


# 0001 checks where the emitter reads constant bytes. The check names a top-level constant by its
# fully qualified name; the base class's default, which a control flow subgraph's emitter uses,
# goes in with it, as one edit.
_TO_EVALUE = """    def _tensor_spec_to_evalue(
        self, spec: TensorSpec, constant_tag: Optional[str] = None
    ) -> EValue:
        \"\"\"Constructs an EValue from the given TensorSpec.\"\"\"

        allocation_info = None
        buffer_idx = 0

        # Need to memory plan
        # Some users set mem_id on all tensors and then rely on the
        # default algos to set offsets, so need to check both.
        if spec.mem_id is not None and spec.mem_offset is not None:
            # Tensor is an activation.
            allocation_info = self._get_allocation_info(spec)

        # Tensor is either a constant tensor, or a mutable tensor with an initial state.
        if spec.const:
            # Tensor with a blob we need to serialize. May not actually be constant at runtime
            # if it's a weight with an associated gradient.
"""
_EMITTER_READ = """            spec_array_type = (
                ctypes.c_char * typing.cast(torch.UntypedStorage, spec.storage).nbytes()
            )

            buffer_data = (
                bytes(
                    ctypes.cast(
                        typing.cast(torch.UntypedStorage, spec.storage).data_ptr(),
"""
_EMITTER_CHECK = """            storage = typing.cast(torch.UntypedStorage, spec.storage)
            if storage.device.type != "cpu" and spec.allocated_memory != 0:
                fqn, _ = self._find_fqn_for_placeholder(self.node.target, spec)
                name = f"at node {self.node.name!r}" if fqn is None else repr(fqn)
                raise host_read_error(name, spec.shape, spec.dtype, storage.device)
            spec_array_type = ctypes.c_char * storage.nbytes()

            buffer_data = (
                bytes(
                    ctypes.cast(
                        storage.data_ptr(),
"""
_FQN_DEFAULT = """    def _find_fqn_for_placeholder(
        self, target: _Target, spec: TensorSpec
    ) -> Tuple[Optional[str], bool]:
        return None, False

"""


def _device_check(tensor: str, program: str, node: str, what: str = "") -> str:
    """A backend's check at its host read of a constant tensor, named only when raising."""
    call = f"get_tensor_name({program}, {node})"
    name = f'"{what}" + repr({call})' if what else f"repr({call})"
    return (
        f"device = {tensor}.untyped_storage().device\n"
        'if device.type != "cpu":\n'
        f"    name = {name}\n"
        f"    raise host_read_error(name, {tensor}.shape, {tensor}.dtype, device)"
    )


PATCHES: Tuple[Patch, ...] = (
    Patch(
        "emitter",
        ("exir/_host_read.py",),
        (("exir/emit/test/test_emit_device_constants.py", _EMIT_TEST),),
        (
            Edit(_EMITTER, "_Emitter", "replace", _TO_EVALUE + _EMITTER_READ, _FQN_DEFAULT + _TO_EVALUE + _EMITTER_CHECK,
                 _HOST_READ.format("host_read_error")),
            Edit(_EMITTER, "_Emitter._emit_prim_getters", "replace", "TensorSpec.from_tensor(val, const=True)",
                 "TensorSpec.from_tensor(val.cpu(), const=True)", ""),
        ),
        (
            BuckEdit("exir/BUCK", "error", "after",
                     _target("fbcode_target(_kind = runtime.python_library,", "host_read", ["_host_read.py"],
                             [":error", "//caffe2:torch"])),
            BuckEdit("exir/emit/BUCK", "emit", "deps", _HOST_READ_DEP),
        ),
        _cuda_job(("backends/aoti/**", _CUDA_STEP), ("exir/_host_read.py", _EMITTER, _EMIT_TEST),
                  "Constants in device memory raise InternalError instead of crashing to_executorch()",
                  f"{_EMIT_TEST}::TestEmitCudaConstants"),
        ("raise_for_device",),
    ),
    Patch(
        "named-data-views",
        (),
        (("exir/_serialize/test/test_named_data_views.py", _NAMED_DATA_TEST),),
        (
            Edit(_NAMED_DATA, "_tensor_to_bytes", "replace",
                 "    Uses numpy().tobytes() which is faster than bytes(untyped_storage())\n"
                 "    for C-contiguous tensors. Falls back to untyped_storage() for\n"
                 "    non-contiguous tensors (e.g., channels_last) to preserve memory layout.\n"
                 '    """\n'
                 "    if not tensor.is_contiguous():\n"
                 "        # For non-C-contiguous tensors (e.g., channels_last), use untyped_storage\n"
                 "        # to preserve the actual memory layout\n"
                 "        return bytes(tensor.untyped_storage())\n",
                 "    Uses numpy().tobytes(). A non-contiguous tensor (e.g., channels_last) is\n"
                 "    stored in its dim order: its own elements, not a view's whole storage.\n"
                 '    """\n'
                 "    if not tensor.is_contiguous():\n"
                 "        dim_order = list(dim_order_from_stride(tensor.stride()))\n"
                 "        tensor = tensor.permute(dim_order).contiguous()\n",
                 "from executorch.exir.tensor import dim_order_from_stride"),
        ),
        (),
        (),
    ),
    Patch(
        "named-data-device",
        (),
        (("exir/_serialize/test/test_named_data_device.py", _NAMED_DATA_TEST),),
        (
            Edit(_NAMED_DATA, "NamedDataStore.add_named_data", "before",
                 "real_tensor_layout = TensorLayout.from_tensor(data)", "data = data.cpu()", ""),
        ),
        (),
        _cuda_job((_EMIT_TEST, _pytest(f"{_EMIT_TEST}::TestEmitCudaConstants").strip()), (_NAMED_DATA_TEST,),
                  "Named data in device memory is stored as on the CPU",
                  f"{_NAMED_DATA_TEST}::TestNamedDataDevice"),
    ),
    Patch(
        "bundled-program",
        (),
        (("devtools/bundled_program/test/test_bundle_device_data.py", _BUNDLE_TEST),),
        (
            Edit("devtools/bundled_program/core.py", "BundledProgram.serialize_to_schema", "replace",
                 "TensorSpec.from_tensor(input_val, const=True)", "TensorSpec.from_tensor(input_val.cpu(), const=True)", ""),
            Edit("devtools/bundled_program/core.py", "BundledProgram.serialize_to_schema", "replace",
                 "TensorSpec.from_tensor(expected_output_tensor, const=True)",
                 "TensorSpec.from_tensor(expected_output_tensor.cpu(), const=True)", ""),
        ),
        (
            BuckEdit("devtools/bundled_program/test/BUCK", "bundle_data", "deps",
                     "//executorch/devtools/bundled_program/serialize:lib"),
            BuckEdit("devtools/bundled_program/test/BUCK", "bundle_data", "deps", "//executorch/exir:lib"),
        ),
        _cuda_job((_NAMED_DATA_TEST, _pytest(f"{_NAMED_DATA_TEST}::TestNamedDataDevice").strip()), (_BUNDLE_TEST,),
                  "Bundled test values in device memory are bundled as on the CPU",
                  f"{_BUNDLE_TEST}::TestBundleDeviceData"),
    ),
    Patch(
        "xnnpack",
        (_XNNPACK_TEST,),
        (),
        (
            Edit("backends/xnnpack/operators/node_visitor.py", "NodeVisitor.get_serialized_buffer_index", "after",
                 "assert const_val is not None", _device_check("const_val", "self.exported_program", "get_attr_node"),
                 _HOST_READ.format("host_read_error") + "\nfrom executorch.backends.xnnpack.utils.utils import get_tensor_name"),
            Edit("backends/xnnpack/operators/node_visitor.py", "NodeVisitor.get_quant_params", "after",
                 "scale = cast(torch.Tensor, quant_params.scale)",
                 _device_check("scale", "self.exported_program", "quant_params.q_input", "scales of "), ""),
        ),
        (
            BuckEdit("backends/xnnpack/operators/BUCK", "operators", "deps", _HOST_READ_DEP),
            BuckEdit("backends/xnnpack/test/BUCK", "test_xnnpack_serialization", "after",
                     _target("fbcode_target(_kind = runtime.python_test,", "test_xnnpack_device_constants",
                             ["test_xnnpack_device_constants.py"], [
                         *_TEST_DEPS,
                         "//executorch/backends/xnnpack/operators:operators",
                         "//executorch/backends/xnnpack/serialization:xnnpack_schema",
                         "//executorch/exir/_serialize:lib",
                     ])),
        ),
        _cuda_job((_BUNDLE_TEST, _pytest(f"{_BUNDLE_TEST}::TestBundleDeviceData").strip()), (_XNNPACK_TEST,),
                  "XNNPACK weights and scales in device memory raise InternalError", _XNNPACK_TEST),
    ),
    Patch(
        "vulkan",
        (),
        (("backends/vulkan/test/test_vulkan_device_constants.py", _VULKAN_TEST),),
        (
            Edit("backends/vulkan/serialization/vulkan_graph_builder.py", "VkGraphBuilder.maybe_add_constant_tensor",
                 "before", "array_type = ctypes.c_char * size", _device_check("tensor", "self.program", "node"),
                 _HOST_READ.format("host_read_error") + "\nfrom executorch.backends.vulkan.utils import get_tensor_name"),
        ),
        (
            BuckEdit("backends/vulkan/serialization/targets.bzl", "lib", "deps", _HOST_READ_DEP),
            BuckEdit("backends/vulkan/test/targets.bzl", "test_serialization", "deps", "//executorch/exir:error"),
            BuckEdit("backends/vulkan/test/targets.bzl", "test_serialization", "deps",
                     "//executorch/exir/backend:utils"),
        ),
        (
            LineEdit("pytest.ini", "testpaths =", "backends/transforms", (f"    {_VULKAN_TEST}",)),
            *_cuda_job((_XNNPACK_TEST, _pytest(_XNNPACK_TEST).strip()), (_VULKAN_TEST,),
                       "Vulkan constants in device memory raise InternalError",
                       f"{_VULKAN_TEST}::TestVulkanDeviceConstants"),
        ),
    ),
    Patch(
        "device-lowering",
        ("exir/_host_read.py",),
        (("exir/program/test/test_program_device.py", _PROGRAM_TEST),),
        (
            Edit(_PROGRAM, "to_edge", "replace",
                 '            except ExportError as e:\n'
                 '                logging.info(f"Input program {name} is not in ATen dialect.")\n'
                 "                raise e\n",
                 '            except ExportError as e:\n'
                 '                logging.info(f"Input program {name} is not in ATen dialect.")\n'
                 "                raise e\n"
                 "            except SpecViolationError as e:\n"
                 "                raise_for_device(e, gm)\n",
                 "from torch._export.verifier import SpecViolationError\n" + _HOST_READ.format("raise_for_device")),
            Edit(_PROGRAM, "to_edge", "replace", "def to_edge(\n", "def to_edge(  # noqa: C901\n", ""),
            Edit(_PROGRAM, "to_edge_transform_and_lower", "replace",
                 "    edge_manager = _gen_edge_manager_for_partitioners(\n"
                 "        partitioner, aten_programs, config, constant_methods, generate_etrecord\n"
                 "    )\n",
                 "    try:\n"
                 "        edge_manager = _gen_edge_manager_for_partitioners(\n"
                 "            partitioner, aten_programs, config, constant_methods, generate_etrecord\n"
                 "        )\n"
                 "    except SpecViolationError as e:\n"
                 "        raise_for_device(e, *(p.graph_module for p in aten_programs.values()))\n",
                 "from torch._export.verifier import SpecViolationError\n" + _HOST_READ.format("raise_for_device")),
            Edit("exir/passes/__init__.py", "ToOutVarPass.call", "replace",
                 'raise RuntimeError(f"Missing out variants: {missing_out_vars}")',
                 'error = RuntimeError(f"Missing out variants: {missing_out_vars}")\n'
                 "            raise_for_device(error, graph_module)",
                 _HOST_READ.format("raise_for_device")),
        ),
        (
            BuckEdit("exir/program/BUCK", "program", "deps", _HOST_READ_DEP),
            BuckEdit("exir/passes/BUCK", "lib", "deps", _HOST_READ_DEP),
        ),
        _cuda_job((_VULKAN_TEST, _pytest(f"{_VULKAN_TEST}::TestVulkanDeviceConstants").strip()), (_PROGRAM_TEST,),
                  "Programs exported with tensors on a GPU name the device where lowering fails",
                  f"{_PROGRAM_TEST}::TestDeviceLoweringCuda"),
    ),
)


def executorch_root() -> Path:
    """The installed executorch package, found without importing it."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not installed in this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def upstream_file(path: str, leave_out: Sequence[str] = ()) -> str:
    """A file of this repository as upstream's: its license header, and without the top-level
    functions `leave_out` and the names that only they import."""
    text = (REPO / path).read_text()
    assert text.startswith(PACKAGE_HEADER), f"{path} lacks the package's license header"
    text = UPSTREAM_HEADER + text[len(PACKAGE_HEADER):]
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    for node in reversed(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name in leave_out:
            del lines[node.lineno - 1 : node.end_lineno]
    kept = "".join(lines)
    used = {n.id for n in ast.walk(ast.parse(kept)) if isinstance(n, ast.Name)}
    for node in reversed(ast.parse(kept).body):
        if isinstance(node, ast.ImportFrom) and leave_out:
            names = [a.name for a in node.names if a.name in used]
            lines[node.lineno - 1 : node.end_lineno] = [f"from {node.module} import {', '.join(names)}\n"]
    return "".join(lines) if leave_out else text


def merge_tests(target: str, fragment: str) -> str:
    """An upstream test file with the imports and definitions of a test module of this
    repository: its classes and helpers go before the `if __name__ == "__main__":` block."""
    tree = ast.parse(fragment)
    lines = fragment.splitlines(keepends=True)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    main = [n for n in tree.body if isinstance(n, ast.If)]
    start, end = imports[-1].end_lineno, (main[0].lineno - 1 if main else len(lines))
    definitions = "".join(lines[start:end]).strip("\n") + "\n"
    target = add_import(target, "\n".join(ast.get_source_segment(fragment, n) for n in imports))
    body = ast.parse(target).body
    where = next((n.lineno - 1 for n in body if isinstance(n, ast.If)), None)
    target_lines = target.splitlines(keepends=True)
    at = len(target_lines) if where is None else where
    target_lines[at:at] = ["\n\n", definitions, "\n\n"]
    return "".join(target_lines)


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
        statement = _statement(function, lines, edit.anchor)
        first, last = statement.lineno - 1, statement.end_lineno
        indent = re.match(r"\s*", lines[first]).group()
        code = textwrap.indent(edit.code, indent) + "\n"
        where = last if edit.how == "after" else first
        lines[where:where] = [code]
    return add_import("".join(lines), edit.imports) if edit.imports else "".join(lines)


def add_import(text: str, imports: str) -> str:
    """Adds each import line to an import from the same module, else to the module's first block
    of imports, but for the names that the module imports already, from wherever; ufmt sorts and
    wraps them afterwards."""
    for new in ast.parse(imports).body:
        line = ast.unparse(new)
        body = ast.parse(text).body
        lines = text.splitlines(keepends=True)
        if isinstance(new, ast.Import):
            if not any(isinstance(n, ast.Import) and ast.unparse(n) == line for n in body):
                first = next(i for i, n in enumerate(body) if isinstance(n, (ast.Import, ast.ImportFrom)))
                lines.insert(body[first].lineno - 1, line + "\n")
                text = "".join(lines)
            continue
        assert isinstance(new, ast.ImportFrom) and not any(a.asname for a in new.names), line
        bound = {a.asname or a.name for n in body if isinstance(n, ast.ImportFrom) for a in n.names}
        new.names = [a for a in new.names if a.name not in bound]
        if not new.names:
            continue
        line = ast.unparse(new)
        same = [n for n in body if isinstance(n, ast.ImportFrom) and n.module == new.module and n.level == 0]
        if same:
            names = sorted({a.name for a in [*same[0].names, *new.names]}, key=str.lower)
            lines[same[0].lineno - 1 : same[0].end_lineno] = [f"from {new.module} import {', '.join(names)}\n"]
        else:
            first = next(i for i, n in enumerate(body) if isinstance(n, (ast.Import, ast.ImportFrom)))
            block = body[first:]
            last = next((i for i, n in enumerate(block) if not isinstance(n, (ast.Import, ast.ImportFrom))), len(block))
            lines.insert(block[last - 1].end_lineno, line + "\n")
        text = "".join(lines)
    return text


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
    after = [i for i in entries if _label_order(lines[i].strip().strip('",')) < _label_order(edit.text)]
    where = (after[-1] + 1) if after else (entries[0] if entries else close)
    indent = lines[deps + 1][: len(lines[deps + 1]) - len(lines[deps + 1].lstrip())]
    lines[where:where] = [f'{indent}"{edit.text}",\n']
    return "".join(lines)


def apply_line_edit(text: str, edit: LineEdit) -> str:
    lines = text.splitlines()
    start = lines.index(edit.section) if edit.section else 0
    where = next(i for i in range(start, len(lines)) if lines[i].strip() == edit.after.strip()) + 1
    lines[where:where] = edit.lines
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


def in_wheel(path: str) -> bool:
    """Whether the executorch wheel has this file of upstream's repository (no Buck files,
    .github/ or pytest.ini)."""
    return not path.startswith(".github/") and path.rsplit("/", 1)[-1] not in NOT_IN_WHEEL


def generate(root: Path, git_dir: Optional[str], ref: str) -> Dict[str, str]:
    """The series as {file name: text}; without an upstream checkout, without the hunks of files
    that the wheel lacks."""
    patches: Dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="series-") as tmp:
        repo = Path(tmp)
        _git(repo, "init", "-q")
        (repo / "pyproject.toml").write_text(UFMT_CONFIG)
        (repo / ".git" / "info" / "exclude").write_text("pyproject.toml\n")
        sources = {edit.path for patch in PATCHES for edit in patch.edits}
        sources |= {target for patch in PATCHES for _, target in patch.merged}
        others = {edit.path for patch in PATCHES for edit in (*patch.buck, *patch.lines)} if git_dir else set()
        for path in sorted(sources | others):
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            if path in sources:
                shutil.copyfile(root / path, repo / path)
            else:
                (repo / path).write_text(upstream_text(git_dir, ref, path))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "base")
        for number, patch in enumerate(PATCHES, 1):
            for path in patch.files:
                (repo / path).parent.mkdir(parents=True, exist_ok=True)
                (repo / path).write_text(upstream_file(path, patch.leave_out))
            for fragment, target in patch.merged:
                (repo / target).write_text(merge_tests((repo / target).read_text(), (REPO / fragment).read_text()))
            for edit in patch.edits:
                (repo / edit.path).write_text(apply_edit((repo / edit.path).read_text(), edit))
            for edit in patch.buck if git_dir else ():
                (repo / edit.path).write_text(apply_buck_edit((repo / edit.path).read_text(), edit))
            for edit in patch.lines if git_dir else ():
                (repo / edit.path).write_text(apply_line_edit((repo / edit.path).read_text(), edit))
            python = sorted({*patch.files, *(t for _, t in patch.merged), *(edit.path for edit in patch.edits)})
            subprocess.run([sys.executable, "-m", "ufmt", "--quiet", "format", *python], cwd=repo, check=True)
            patches.update(_commit(repo, number, len(PATCHES), patch.slug, _message(patch.slug)))
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
    (not `whole`), the hunks of files that the wheel lacks are not compared."""
    found = []
    for name in sorted(set(generated) | set(committed)):
        if name not in generated or name not in committed:
            found.append(f"upstream/{name}: {'not generated' if name in committed else 'not committed'}")
            continue
        (message, files), (old_message, old_files) = sections(generated[name]), sections(committed[name])
        if message != old_message:
            found.append(f"upstream/{name}: the message differs")
        if not whole:
            old_files = {path: text for path, text in old_files.items() if in_wheel(path)}
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
              f"{'' if args.upstream_git else ' (the hunks of files that the wheel lacks not compared: no --upstream-git)'}")
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
