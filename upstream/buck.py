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
import posixpath
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import starlark

BUILD_FILES = ("BUCK", "TARGETS")
# A Python rule's kind, with or without runtime. or native.
PYTHON_KIND = re.compile(r"(.*\.)?python_(library|test|binary|unittest|pytest)")
# A label in ExecuTorch's cell, as fbsource, fbcode or the open-source build names it: (folder, name).
CELL = re.compile(
    r"@*(?:fbsource//xplat/|fbcode//|//)executorch(?![^/:])/*([^:]*):?(.*)"
)
DIALECT = starlark.Dialect.extended()
GLOBALS = starlark.Globals.extended_by([starlark.LibraryExtension.StructType])
# Every module starts with this, and loads of its names get it. A rule records itself through `_record` (Python)
# and returns a list, as get_*_deps() helpers do; the rest stands for Meta's macros and Buck's, as fbcode sees them.
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
DEFINED = set(re.findall(r"^(\w+) =", PRELUDE, re.M))


def _git(git_dir: str, *args: str) -> str:
    command = ["git", "--git-dir", git_dir, *args]
    return subprocess.check_output(command, stderr=subprocess.PIPE, encoding="utf-8")


# A Python rule as Buck sees it, with srcs as repo paths and ExecuTorch deps as //executorch/... labels.
class Target(NamedTuple):
    label: str
    srcs: list[str]
    deps: list[str]


def _label(folder: str, name: str) -> str:
    return f"//executorch/{folder}:{name}" if folder else f"//executorch:{name}"


def _split(label: str, package: str) -> tuple[str, str] | None:
    """(folder, name) of a label inside ExecuTorch, relative ones to `package`; None outside it (//caffe2:torch)."""
    if "//" not in label:
        return package, label.lstrip("@").lstrip(":")
    found = CELL.match(label)
    return (found[1], found[2] or found[1].rpartition("/")[2]) if found else None


def _stand_in(name: str, text: str) -> str:
    """Starlark for a name only Meta defines: a struct of the attributes `text` uses, [] for a CONSTANT, else a rule."""
    # The lookahead leaves out "x.bzl".
    used = sorted(set(re.findall(rf"\b{re.escape(name)}\.(\w+)\b(?![\"'])", text)))
    if not used:
        return "[]" if name.isupper() else f'_rule("{name}")'
    # Each a rule, but Buck's own functions stay themselves and `is_*` are False: `runtime.is_oss` is fbcode's view.
    values = {
        a: "False" if a.startswith("is_") else f'_rule("{name}.{a}")' for a in used
    }
    values.update({a: a for a in used if a in ("glob", "package_name", "read_config")})
    return f"struct({', '.join(f'{a} = {v}' for a, v in values.items())})"


def _glob_regex(pattern: str) -> str:
    """Buck's glob: `*` stays inside one folder, `**` spans any number of them."""
    rx = ""
    for part in pattern.split("/"):
        escaped = re.escape(part).replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        rx += "(?:[^/]+/)*" if part == "**" else escaped + "/"
    return rx[:-1] if rx.endswith("/") else rx + "[^/]+"


def _describe(error: starlark.StarlarkError) -> str:
    """The innermost error, 'path:line:column: message': upstream's own mistake, not a load of it."""
    text = str(error)
    message = re.search(r"^error: (?:(?:StarlarkError|error): )*(.*)$", text, re.M)
    place = re.search(r"^ *--> (\S+)$", text, re.M)
    return f"{place[1] if place else '?'}: {message[1] if message else text}"


class Package:
    """A folder with a build file, evaluated; its error is what stopped upstream's Starlark, a finding, not a crash."""

    def __init__(self, path: str) -> None:
        self.path = path
        # Every target declared, of any rule, so that deps on C++ rules resolve.
        self.names: set[str] = set()
        self.targets: list[Target] = []  # the Python ones
        self.error: str | None = None

    def declare(self, kind: str, name: Any, srcs: Any, deps: Any) -> None:
        if not isinstance(name, str):
            return
        self.names.add(name)
        if not PYTHON_KIND.fullmatch(kind):
            return
        # A dict of srcs maps module names to files.
        srcs = srcs.values() if isinstance(srcs, dict) else srcs or []
        srcs = [s for s in srcs if isinstance(s, str) and ":" not in s]
        files = [posixpath.join(self.path, s) for s in srcs]
        deps = [d for d in deps or [] if isinstance(d, str)]
        deps = [_label(*where) if (where := _split(d, self.path)) else d for d in deps]
        self.targets.append(Target(_label(self.path, name), files, deps))


class Tree:
    """A source tree: repo-relative paths, texts read on demand, once, and Buck packages evaluated on first use."""

    def __init__(self, files: set[str], read: Callable[[str], str]) -> None:
        self.files = frozenset(files)
        parts = [f.split("/") for f in files]
        self.dirs = {"/".join(p[:i]) for p in parts for i in range(len(p))}
        self.read: Callable[[str], str] = functools.cache(read)
        found = sorted(p for p in files if p.rpartition("/")[2] in BUILD_FILES)
        # Reversed, x/TARGETS comes before x/BUCK, so BUCK wins where a folder has both.
        self.build_files = {p.rpartition("/")[0]: p for p in reversed(found)}
        self.packages: dict[str, Package] = {}
        # Names that upstream's files use but neither they nor starlark define.
        self.unknown: set[str] = set()

    @classmethod
    def from_git(cls, git_dir: str, ref: str, overlay: Path | None = None) -> "Tree":
        """Upstream at `ref`, with the files under `overlay` (the series' patched files) replacing or adding."""
        patched: dict[str, Path] = {}
        if overlay:
            files = [p for p in overlay.rglob("*") if p.is_file()]
            patched = {p.relative_to(overlay).as_posix(): p for p in files}

        def read(path: str) -> str:
            if path in patched:
                return patched[path].read_text("utf-8")
            return _git(git_dir, "show", f"{ref}:{path}")

        listed = _git(git_dir, "ls-tree", "-r", "-z", "--name-only", ref).split("\0")
        return cls(set(listed) - {""} | set(patched), read)

    def module_file(self, module: str) -> str | None:
        """File defining an executorch module ('' for a folder without __init__.py); None if nothing does."""
        rel = "/".join(module.split(".")[1:])
        files = [p for p in (f"{rel}.py", f"{rel}/__init__.py") if p in self.files]
        return files[0] if files else "" if rel in self.dirs else None

    def imports(self, path: str) -> dict[str, str | None]:
        """executorch modules a file imports anywhere (lazy and guarded ones need deps too), each with its file."""
        found: set[str] = set()
        for node in ast.walk(ast.parse(self.read(path), path)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = ("executorch/" + path).split("/")[: -node.level]
                    base = ".".join([*package, base]).strip(".")
                for alias in node.names:
                    module = f"{base}.{alias.name}"
                    found.add(module if self.module_file(module) is not None else base)
        return {m: self.module_file(m) for m in found if m.startswith("executorch.")}

    def package(self, folder: str) -> Package:
        """The folder's package, evaluated once; an empty one, not kept, where it has no build file."""
        path = self.build_files.get(folder)
        while path and folder not in self.packages:
            package = Package(folder)
            try:
                self.evaluate(package, path, self.read(path))
            except starlark.StarlarkError as error:
                unknown = re.search(r"Variable `(\w+)` not found", str(error))
                # A name nobody defines: a rule, and run it again.
                if unknown and unknown[1] not in self.unknown:
                    self.unknown.add(unknown[1])
                    continue
                package.error = _describe(error)
            self.packages[folder] = package
        return self.packages.get(folder) or Package(folder)

    def evaluate(self, package: Package, path: str, text: str) -> starlark.FrozenModule:
        code, module = starlark.parse(path, text, DIALECT), starlark.Module()
        symbols = [s for load in code.loads() for s in load.symbols.items()]
        loaded = {alias: name for alias, name in symbols if name not in DEFINED}.items()

        def load(label: str) -> starlark.FrozenModule:
            where = _split(label, path.rpartition("/")[0])
            file = posixpath.join(*where) if where else ""
            if file.endswith(".bzl") and file in self.files:
                return self.evaluate(package, file, self.read(file))
            stubs = [f"{name} = {_stand_in(alias, text)}\n" for alias, name in loaded]
            return self.evaluate(package, label, "".join(stubs))

        module.add_callable("_record", package.declare)
        module.add_callable("glob", functools.partial(self.glob, package.path))
        module.add_callable("package_name", lambda: package.path)
        module.add_callable("print", lambda *args, **kwargs: None)
        module.add_callable("read_config", lambda section, key, default=None: default)
        unknown = "".join(f'{n} = _rule("{n}")\n' for n in sorted(self.unknown))
        prelude = f"{PRELUDE}native = {_stand_in('native', text)}\n{unknown}"
        starlark.eval(module, starlark.parse("prelude", prelude), GLOBALS)
        starlark.eval(module, code, GLOBALS, starlark.FileLoader(load))
        return module.freeze()

    def glob(
        self, folder: str, include: Sequence[str], exclude: Sequence[str] = (), **_: Any
    ) -> list[str]:
        """Buck's glob, where files of subpackages never match."""
        keep = re.compile("|".join(map(_glob_regex, include)))
        drop = re.compile("|".join(map(_glob_regex, exclude)))
        files = [p for p in self.files if self.package_of(p) == folder]
        rels = [p.removeprefix(f"{folder}/") for p in files]
        return sorted(r for r in rels if keep.fullmatch(r) and not drop.fullmatch(r))

    def package_of(self, path: str) -> str:
        """Nearest folder above a file with a build file, whose targets alone may list it; '' if none."""
        while path and path not in self.build_files:
            path = path.rpartition("/")[0]
        return path

    def owners(self, src: str) -> list[Target]:
        return [t for t in self.package(self.package_of(src)).targets if src in t.srcs]

    def violations(self, target: Target) -> dict[tuple[str, str], str]:
        """A target's breaks, keyed so that the same break in main and in the patched tree compares equal."""
        found: dict[tuple[str, str], str] = {}
        for src in target.srcs:
            if src not in self.files:
                found[("src", src)] = f"srcs lists {src}, which does not exist"
                continue
            try:
                modules = self.imports(src) if src.endswith(".py") else {}
            except SyntaxError as error:
                found[("syntax", src)] = f"{src} does not parse: {error}"
                continue
            for module, file in sorted(modules.items()):
                owners = [t.label for t in self.owners(file)] if file else []
                why = ", which no file in the tree defines" if file is None else ""
                if file and not {target.label, *target.deps} & set(owners):
                    why = f" ({file}, owned by {', '.join(owners) or 'no target'}), which is not in its deps"
                if why:
                    found.setdefault(("import", module), f"{src} imports {module}{why}")
        for dep in target.deps:
            where = _split(dep, "")
            if where and where[1] not in self.package(where[0]).names:
                found[("dep", dep)] = f"dep {dep} names no existing target"
        return {key: f"{target.label}: {message}" for key, message in found.items()}


# Problems break Meta's Buck import; info says which targets were checked and what main already breaks.
class Report(NamedTuple):
    problems: list[str]
    info: list[str]


def check(new: Tree, old: Tree, added: Sequence[str], changed: Sequence[str]) -> Report:
    """Checks the Buck entries for files the series adds or changes in `new` (patched `old`)."""
    problems: list[str] = []
    info: list[str] = []
    for path in added:
        owners = [t.label for t in new.owners(path)]
        if path.endswith(".py") and len(owners) != 1:
            listed = ", ".join(owners) or "none"
            problem = f"{path}: in the srcs of {len(owners)} targets ({listed}), must be in exactly one"
            problems.append(problem)
    targets: dict[str, Target] = {}
    for path in sorted({*added, *changed}):
        folder, _, name = path.rpartition("/")
        # An edited build file: check all its targets.
        if name in BUILD_FILES or name.endswith(".bzl"):
            targets.update((t.label, t) for t in new.package(folder).targets)
        elif name.endswith(".py"):
            owning = new.owners(path)
            targets.update((t.label, t) for t in owning)
            labels = ", ".join(t.label for t in owning) or "no target"
            info.append(f"{path}: owned by {labels}")
    for label, target in sorted(targets.items()):
        # Main's target of the same label, if any, and what it already breaks.
        folder = (_split(label, "") or ("", ""))[0]
        before = [t for t in old.package(folder).targets if t.label == label]
        known = old.violations(before[0]) if before else {}
        found = new.violations(target)
        problems.extend(m for k, m in found.items() if k not in known)
        info.extend(f"already in main: {m}" for k, m in found.items() if k in known)
    errors = [(f, p.error) for f, p in sorted(new.packages.items()) if p.error]
    problems.extend(e for f, e in errors if not old.package(f).error)
    info.extend(f"already in main: {e}" for f, e in errors if old.package(f).error)
    return Report(problems, info)
