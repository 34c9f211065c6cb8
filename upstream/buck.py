# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Checks the series' Buck entries: Meta imports every ExecuTorch PR into Buck, where a Python file in no target's
srcs, or an import whose target is missing from `deps`, breaks the build though pip and CMake pass. Upstream's BUCK
and .bzl files run on starlark-pyo3, Meta's macros stubbed, on the patched tree and on main; new breaks are problems."""

import ast
import functools
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import starlark

BUILD_FILES = ("BUCK", "TARGETS")
PYTHON_KINDS = {
    "python_library",
    "python_test",
    "python_binary",
    "python_unittest",
    "python_pytest",
}
# Buck's, which native.* names as well.
BUILTINS = ("glob", "package_name", "read_config")
DIALECT, GLOBALS = (
    starlark.Dialect.extended(),
    starlark.Globals.extended_by([starlark.LibraryExtension.StructType]),
)
# Every module starts with this. A rule records itself through `_record` (Python) and returns what helpers such
# as get_*_deps() do, a list; the rest stands for what Meta's macro files and Buck define, as fbcode sees them.
PRELUDE = """
def _rule(kind):
    return lambda *args, **kwargs: _record(kind, kwargs.get("name"), kwargs.get("srcs"), kwargs.get("deps")) or []
fbcode_target = lambda _kind, **kwargs: _kind(**kwargs)
non_fbcode_target = lambda *args, **kwargs: None
is_fbcode = lambda: True
is_xplat = lambda: False
get_oss_build_kwargs = lambda *args, **kwargs: {}
op_target = lambda **kwargs: kwargs
subdir_glob = lambda *args, **kwargs: {}
paths = struct(basename = lambda p: p.rpartition("/")[2], join = lambda *parts: "/".join(parts))
select = lambda choices: choices.get("DEFAULT", choices.values()[0])
host_info = lambda: struct(os = struct(is_linux = True, is_macos = False, is_windows = False))
"""
# So that loads of these get the prelude's.
DEFINED = set(re.findall(r"^(\w+) =", PRELUDE, re.M))


class Tree:
    """A source tree as a set of repo-relative paths; texts are read on demand, once, as few are needed."""

    def __init__(self, files: set[str], read: Callable[[str], str]) -> None:
        self.files = frozenset(files)
        self.dirs = {
            "/".join(parts[:i])
            for parts in (f.split("/") for f in files)
            for i in range(len(parts))
        }
        self.read: Callable[[str], str] = functools.lru_cache(maxsize=None)(read)

    @classmethod
    def from_git(cls, git_dir: str, ref: str, overlay: Path | None = None) -> "Tree":
        """Upstream at `ref`, with the files under `overlay` (the series' patched files) replacing or adding."""

        def git(*args: str) -> str:
            command = ["git", "--git-dir", git_dir, *args]
            return subprocess.run(
                command, capture_output=True, encoding="utf-8", check=True
            ).stdout

        patched = (
            {
                p.relative_to(overlay).as_posix()
                for p in overlay.rglob("*")
                if p.is_file()
            }
            if overlay
            else set()
        )
        return cls(
            set(git("ls-tree", "-r", "-z", "--name-only", ref).split("\0")) - {""}
            | patched,
            lambda path: (
                (overlay / path).read_text("utf-8")
                if overlay and path in patched
                else git("show", f"{ref}:{path}")
            ),
        )

    def module_file(self, module: str) -> str | None:
        """File defining an executorch module ('' for a folder without __init__.py); None if nothing does."""
        rel = "/".join(module.split(".")[1:])
        files = [p for p in (f"{rel}.py", f"{rel}/__init__.py") if p in self.files]
        return files[0] if files else "" if rel in self.dirs else None

    def imports(self, path: str) -> set[str]:
        """executorch modules a file imports anywhere: lazy and guarded imports need deps in Buck as well."""
        found: set[str] = set()
        for node in ast.walk(ast.parse(self.read(path), path)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        ("executorch/" + path).split("/")[: -node.level] + [base]
                    ).strip(".")
                modules = [f"{base}.{alias.name}" for alias in node.names]
                found.update(
                    m if self.module_file(m) is not None else base for m in modules
                )
        return {m for m in found if m.startswith("executorch.")}


# A Python rule as Buck sees it, with srcs as repo paths and ExecuTorch deps as //executorch/... labels.
class Target(NamedTuple):
    label: str
    kind: str
    srcs: list[str]
    deps: list[str]


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _label(folder: str, name: str) -> str:
    return f"//executorch/{folder}:{name}" if folder else f"//executorch:{name}"


def _split(label: str, package: str) -> tuple[str, str] | None:
    """(folder, name) of a label inside ExecuTorch, relative ones to `package`; None outside it (//caffe2:torch)."""
    label = label.lstrip("@")
    if "//" not in label:
        return package, label.lstrip(":")
    for cell in ("fbsource//xplat/executorch", "fbcode//executorch", "//executorch"):
        if label.startswith(cell) and label[len(cell) : len(cell) + 1] in (
            "",
            "/",
            ":",
        ):
            folder, _, name = label[len(cell) :].lstrip("/").partition(":")
            return folder, name or folder.rpartition("/")[2]
    return None


def _stand_in(name: str, text: str) -> str:
    """Starlark for a name that only Meta's files define: a struct of the attributes that `text` uses (`is_*` ones
    False: `runtime.is_oss` takes the fbcode view), a list for a CONSTANT, else a rule."""
    # The lookahead leaves out "x.bzl".
    attributes = sorted(
        set(re.findall(rf"\b{re.escape(name)}\.(\w+)\b(?![\"'])", text))
    )
    values = {
        a: a
        if a in BUILTINS
        else "False"
        if a.startswith("is_")
        else f'_rule("{name}.{a}")'
        for a in attributes
    }
    if values:
        return f"struct({', '.join(f'{a} = {v}' for a, v in values.items())})"
    return "[]" if name.isupper() else f'_rule("{name}")'


class Package:
    """A folder with a build file, evaluated."""

    def __init__(self, path: str) -> None:
        self.path = path
        # Every target declared, of any rule, so that deps on C++ rules resolve.
        self.names: set[str] = set()
        self.targets: list[Target] = []  # the Python ones
        self.error: str | None = (
            None  # what stopped upstream's Starlark: a finding rather than a crash
        )

    def declare(
        self, kind: str, name: Any, srcs: Any, deps: Any
    ) -> None:  # a rule called in Starlark, via `_rule`
        if not isinstance(name, str):
            return
        self.names.add(name)
        # The kind with or without runtime. or native.; a dict of srcs maps module names to files.
        if kind.rpartition(".")[2] in PYTHON_KINDS:
            files = srcs.values() if isinstance(srcs, dict) else srcs or []
            files = [
                _join(self.path, s)
                for s in files
                if isinstance(s, str) and ":" not in s
            ]
            deps = [
                _label(*where) if (where := _split(d, self.path)) else d
                for d in deps or []
                if isinstance(d, str)
            ]
            self.targets.append(Target(_label(self.path, name), kind, files, deps))


class Buck:
    """A tree's Buck packages, each evaluated on first use with its own glob and package_name."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        # Reverse order puts x/TARGETS before x/BUCK, so BUCK wins where a folder has both.
        self.build_files = {
            p.rpartition("/")[0]: p
            for p in sorted(tree.files, reverse=True)
            if p.rpartition("/")[2] in BUILD_FILES
        }
        self.packages: dict[str, Package] = {}
        # Names that upstream's files use but neither they nor starlark define.
        self.unknown: set[str] = set()

    def package(self, folder: str) -> Package:
        while folder not in self.packages:
            package = self.packages[folder] = Package(folder)
            try:
                self.evaluate(
                    package,
                    self.build_files[folder],
                    self.tree.read(self.build_files[folder]),
                )
            except starlark.StarlarkError as error:
                unknown = re.search(r"Variable `(\w+)` not found", str(error))
                # A name nobody defines: a rule, and run it again.
                if unknown and unknown[1] not in self.unknown:
                    self.unknown.add(unknown[1])
                    del self.packages[folder]
                else:  # the innermost error, 'path:line:column: message': upstream's own mistake, not a load of it
                    message = re.search(
                        r"^error: (?:(?:StarlarkError|error): )*(.*)$", str(error), re.M
                    )
                    place = re.search(r"^ *--> (\S+)$", str(error), re.M)
                    package.error = f"{place[1] if place else '?'}: {message[1] if message else error}"
        return self.packages[folder]

    def evaluate(self, package: Package, path: str, text: str) -> starlark.FrozenModule:
        code, module, folder = (
            starlark.parse(path, text, DIALECT),
            starlark.Module(),
            path.rpartition("/")[0],
        )
        loaded = {
            alias: name
            for load in code.loads()
            for alias, name in load.symbols.items()
            if name not in DEFINED
        }

        def load(label: str) -> starlark.FrozenModule:
            file = _join(*where) if (where := _split(label, folder)) else ""
            if file.endswith(".bzl") and file in self.tree.files:
                return self.evaluate(package, file, self.tree.read(file))
            stubs = "".join(
                f"{name} = {_stand_in(alias, text)}\n" for alias, name in loaded.items()
            )
            return self.evaluate(package, label, stubs)

        for name, function in (
            ("_record", package.declare),
            ("glob", functools.partial(self.glob, package.path)),
            ("package_name", lambda: package.path),
            ("print", lambda *args, **kwargs: None),
            ("read_config", lambda section, key, default=None: default),
        ):
            module.add_callable(name, function)
        unknown = "".join(
            f'{name} = _rule("{name}")\n' for name in sorted(self.unknown)
        )
        prelude = f"{PRELUDE}native = {_stand_in('native', text)}\n{unknown}"
        starlark.eval(module, starlark.parse("prelude", prelude), GLOBALS)
        starlark.eval(module, code, GLOBALS, starlark.FileLoader(load))
        return module.freeze()

    def glob(
        self,
        folder: str,
        include: Sequence[str],
        exclude: Sequence[str] = (),
        **_: object,
    ) -> list[str]:
        """Buck's glob: `*` stays inside one folder, `**` spans any number of them, files of subpackages never match."""

        def regex(pattern: str) -> "re.Pattern[str]":
            rx = "".join(
                "(?:[^/]+/)*"
                if part == "**"
                else re.escape(part).replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
                + "/"
                for part in pattern.split("/")
            )
            return re.compile(rx[:-1] if rx.endswith("/") else rx + "[^/]+")

        keep, drop = [regex(p) for p in include], [regex(p) for p in exclude]
        rels = [
            p[len(folder) + 1 :] if folder else p
            for p in self.tree.files
            if self.package_of(p) == folder
        ]
        return sorted(
            r
            for r in rels
            if any(x.fullmatch(r) for x in keep)
            and not any(x.fullmatch(r) for x in drop)
        )

    def package_of(self, path: str) -> str | None:
        """Nearest folder above a file with a build file: only its targets may list the file."""
        while path:
            path = path.rpartition("/")[0]
            if path in self.build_files:
                return path
        return None

    def owners(self, path: str) -> list[Target]:
        folder = self.package_of(path)
        return (
            []
            if folder is None
            else [t for t in self.package(folder).targets if path in t.srcs]
        )

    def violations(self, target: Target) -> dict[tuple[str, str, str], str]:
        """Rules b and c for one target, keyed so that the same break in main and in the patched tree compares equal."""
        found: dict[tuple[str, str, str], str] = {}
        for src in target.srcs:
            if src not in self.tree.files:
                found[(target.label, "src", src)] = (
                    f"{target.label}: srcs lists {src}, which does not exist"
                )
                continue
            try:
                modules = self.tree.imports(src) if src.endswith(".py") else set()
            except SyntaxError as error:
                found[(target.label, "syntax", src)] = (
                    f"{target.label}: {src} does not parse: {error}"
                )
                continue
            for module in sorted(modules):
                file = self.tree.module_file(module)
                owners = [t.label for t in self.owners(file)] if file else []
                why = (
                    ", which no file in the tree defines"
                    if file is None
                    else f" ({file}, owned by {', '.join(owners) or 'no target'}), which is not in its deps"
                )
                if (
                    file is None
                    or file
                    and not {target.label, *target.deps} & set(owners)
                ):
                    found.setdefault(
                        (target.label, "import", module),
                        f"{target.label}: {src} imports {module}{why}",
                    )
        for dep in target.deps:
            where = _split(dep, "") if dep.startswith("//executorch") else None
            if where and (
                where[0] not in self.build_files
                or where[1] not in self.package(where[0]).names
            ):
                found[(target.label, "dep", dep)] = (
                    f"{target.label}: dep {dep} names no existing target"
                )
        return found


# Problems break Meta's Buck import; info says which targets were checked and what main already breaks.
class Report(NamedTuple):
    problems: list[str]
    info: list[str]


def check(
    tree: Tree, base: Tree, added: Sequence[str], changed: Sequence[str]
) -> Report:
    """Checks the Buck entries for files the series adds or changes in `tree` (patched `base`)."""
    report, new, old = Report([], []), Buck(tree), Buck(base)
    for path in added:
        owners = [t.label for t in new.owners(path)]
        if path.endswith(".py") and len(owners) != 1:
            report.problems.append(
                f"{path}: in the srcs of {len(owners)} targets ({', '.join(owners) or 'none'}), "
                "must be in exactly one"
            )
    targets: dict[str, Target] = {}
    for path in sorted({*added, *changed}):
        folder, _, name = path.rpartition("/")
        # An edited build file: check all its targets.
        if name in BUILD_FILES or name.endswith(".bzl"):
            targets.update(
                (t.label, t)
                for t in (
                    new.package(folder).targets if folder in new.build_files else []
                )
            )
        elif name.endswith(".py"):
            listed = new.owners(path)
            targets.update((t.label, t) for t in listed)
            report.info.append(
                f"{path}: owned by {', '.join(t.label for t in listed) or 'no target'}"
            )
    for label, target in sorted(targets.items()):
        folder = (_split(label, "") or ("", ""))[
            0
        ]  # main's target of the same label, if any
        before = (
            [t for t in old.package(folder).targets if t.label == label]
            if folder in old.build_files
            else []
        )
        known = old.violations(before[0]) if before else {}
        found = new.violations(target)
        report.info.extend(
            f"already in main: {message}"
            for key, message in found.items()
            if key in known
        )
        report.problems.extend(
            message for key, message in found.items() if key not in known
        )
    for folder, package in sorted(new.packages.items()):
        if package.error and folder in old.build_files and old.package(folder).error:
            report.info.append(f"already in main: {package.error}")
        elif package.error:
            report.problems.append(package.error)
    return report
