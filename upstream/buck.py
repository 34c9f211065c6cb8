# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Checks the series' Buck entries: Meta imports every ExecuTorch PR into Buck, where a Python file that no
target lists, or an import whose target is missing from `deps`, breaks the build though pip and CMake pass.
Upstream's BUCK files (Starlark, a Python subset) run with its macros stubbed, on the patched tree and on main;
only breaks that main does not already have are problems."""

import argparse
import ast
import builtins
import functools
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

BUILD_FILES = ("BUCK", "TARGETS")
PYTHON_KINDS = {"runtime.python_library", "runtime.python_test", "runtime.python_binary",
                "python_unittest", "python_library", "python_binary", "python_pytest"}
EXECUTORCH_CELLS = ("fbsource//xplat/executorch", "fbcode//executorch", "//executorch")


class Tree:
    """A source tree as a set of repo-relative paths; texts are read on demand, once, as few are needed."""

    def __init__(self, files: Set[str], read: Callable[[str], str]) -> None:
        self.files = frozenset(files)
        self.dirs = {"/".join(parts[:i]) for parts in (f.split("/") for f in files) for i in range(len(parts))}
        self.read: Callable[[str], str] = functools.lru_cache(maxsize=None)(read)

    @classmethod
    def from_git(cls, git_dir: str, ref: str, overlay: Optional[Path] = None) -> "Tree":
        """Upstream at `ref`, with the files under `overlay` (the series' patched files) replacing or adding."""
        def git(*args: str) -> str:
            command = ["git", "--git-dir", git_dir, *args]
            return subprocess.run(command, capture_output=True, encoding="utf-8", check=True).stdout

        patched = {p.relative_to(overlay).as_posix() for p in overlay.rglob("*") if p.is_file()} if overlay else set()

        def read(path: str) -> str:
            return (overlay / path).read_text("utf-8") if overlay and path in patched else git("show", f"{ref}:{path}")

        return cls(set(git("ls-tree", "-r", "-z", "--name-only", ref).split("\0")) - {""} | patched, read)


@dataclass
class Target:
    """A Python rule as Buck sees it, with srcs as repo paths and ExecuTorch deps as //executorch/... labels."""

    label: str
    kind: str
    srcs: List[str]
    deps: List[str]


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _split(label: str, package: str) -> Optional[Tuple[str, str]]:
    """(folder, name) of a label inside ExecuTorch, relative ones to `package`; None outside it (//caffe2:torch)."""
    label = label.lstrip("@")
    if "//" not in label:
        return package, label.lstrip(":")
    for cell in EXECUTORCH_CELLS:
        rest = label[len(cell):]
        if label.startswith(cell) and rest[:1] in ("", "/", ":"):
            folder, _, name = rest.lstrip("/").partition(":")
            return folder, name or folder.rpartition("/")[2]
    return None


def _label(folder: str, name: str) -> str:
    return f"//executorch/{folder}:{name}" if folder else f"//executorch:{name}"


def _glob_regex(pattern: str) -> "re.Pattern[str]":
    """Buck glob semantics: `*` stays inside one folder, `**` spans any number of them."""
    rx = ""
    for part in pattern.split("/"):
        rx += "(?:[^/]+/)*" if part == "**" else re.escape(part).replace(r"\*", "[^/]*").replace(r"\?", "[^/]") + "/"
    return re.compile(rx[:-1] if rx.endswith("/") else rx + "[^/]+")


class Stub:
    """Any macro or value not modelled: absorbs every use so upstream's Starlark keeps running; a call with
    `name=` declares a target, so that deps on C++ and other rules still name existing targets."""

    def __init__(self, package: "Package", name: str) -> None:
        self._package, self._name = package, name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._package.value(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> "Stub":
        self._package.declare(self._name, kwargs)
        return Stub(self._package, self._name + "()")

    def __add__(self, other: Any) -> Any:
        return other

    __radd__ = __or__ = __ror__ = __add__

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:  # falsy: `if runtime.is_oss` takes the fbcode branch
        return 0

    def __getitem__(self, key: Any) -> "Stub":
        return self


class Package:
    """A folder with a build file, evaluated: its BUCK and the in-repo .bzl files it loads run as Python with
    its own glob. Keeps every target name declared (any rule, so deps on C++ rules resolve) and Python targets."""

    def __init__(self, buck: "Buck", path: str) -> None:
        self.buck, self.path = buck, path
        self.names: Set[str] = set()
        self.targets: List[Target] = []
        self.error: Optional[str] = None
        self.modules: Dict[str, Dict[str, Any]] = {}
        self.specials: Dict[str, Any] = {  # fbcode's view: fbcode_target runs its rule, non_fbcode_target none
            "fbcode_target": lambda _kind, **kwargs: _kind(**kwargs), "non_fbcode_target": lambda *a, **k: None,
            "is_fbcode": lambda: True, "glob": self.glob, "package_name": lambda: path, "struct": SimpleNamespace,
            "read_config": lambda section, key, default=None: default, "print": lambda *a, **k: None}
        try:
            self.run(buck.build_files[path])
        except Exception as error:  # a failure of upstream's Starlark is a finding, not a crash
            frames = [(f.filename, f.lineno) for f in traceback.extract_tb(error.__traceback__)]
            frames += [(error.filename, error.lineno)] if isinstance(error, SyntaxError) else []
            where = next((f"{f}:{n}" for f, n in reversed(frames) if f in buck.tree.files), buck.build_files[path])
            self.error = f"{where}: {type(error).__name__}: {error}"

    def value(self, name: str) -> Any:
        """What a name means in Buck: native.glob is glob; what is not modelled is a stub."""
        key = name.removeprefix("native.")
        return self.specials[key] if key in self.specials else Stub(self, name)

    def declare(self, kind: str, kwargs: Dict[str, Any]) -> None:
        name, folder = kwargs.get("name"), self.path
        if not isinstance(name, str):
            return
        self.names.add(name)
        if kind in PYTHON_KINDS:
            srcs = kwargs.get("srcs") or []
            srcs = srcs.values() if isinstance(srcs, dict) else srcs  # a dict maps module names to files
            deps = [d for d in kwargs.get("deps") or [] if isinstance(d, str)]
            self.targets.append(Target(
                _label(folder, name), kind, [_join(folder, s) for s in srcs if isinstance(s, str) and ":" not in s],
                [_label(*where) if (where := _split(d, folder)) else d for d in deps]))

    def glob(self, include: Sequence[str], exclude: Sequence[str] = (), **_: Any) -> List[str]:
        """Files of the package matching `include`, as Buck globs them: not into subpackages."""
        keep, drop = [_glob_regex(p) for p in include], [_glob_regex(p) for p in exclude]
        start = len(self.path) + 1 if self.path else 0
        rels = [p[start:] for p in self.buck.tree.files if self.buck.package_of(p) == self.path]
        return sorted(r for r in rels if any(x.fullmatch(r) for x in keep) and not any(x.fullmatch(r) for x in drop))

    def run(self, path: str) -> Dict[str, Any]:
        """Executes a BUCK or .bzl file (once per package), names it does not bind bound to stubs."""
        if path not in self.modules:
            code, folder = ast.parse(self.buck.tree.read(path), path), path.rpartition("/")[0]
            names = {node.id for node in ast.walk(code) if isinstance(node, ast.Name)}
            ns = self.modules[path] = {n: self.value(n) for n in names
                                       if n in self.specials or not hasattr(builtins, n)}
            ns["load"] = lambda label, *names, **aliases: self.load(ns, folder, label, names, aliases)
            exec(compile(code, path, "exec"), ns)
        return self.modules[path]

    def load(self, ns: Dict[str, Any], folder: str, label: str, names: Sequence[str], aliases: Dict[str, str]) -> None:
        """Starlark load: in-repo .bzl files really run (their macros declare targets), the rest are stubs."""
        where = _split(label, folder)
        path = _join(*where) if where else ""
        module = self.run(path) if path.endswith(".bzl") and path in self.buck.tree.files else None
        for alias, name in [*zip(names, names), *aliases.items()]:
            ns[alias] = module[name] if module is not None else self.value(name)


class Buck:
    """The Buck packages of a tree, each evaluated on first use."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        # Reverse order puts x/TARGETS before x/BUCK, so BUCK wins where a folder has both.
        self.build_files = {p.rpartition("/")[0]: p for p in sorted(tree.files, reverse=True)
                            if p.rpartition("/")[2] in BUILD_FILES}
        self.packages: Dict[str, Package] = {}

    def package(self, folder: str) -> Package:
        if folder not in self.packages:
            self.packages[folder] = Package(self, folder)
        return self.packages[folder]

    def package_of(self, path: str) -> Optional[str]:
        """Nearest folder above a file with a build file: only its targets may list the file."""
        folder = path
        while folder:
            folder = folder.rpartition("/")[0]
            if folder in self.build_files:
                return folder
        return None

    def owners(self, path: str) -> List[Target]:
        folder = self.package_of(path)
        return [] if folder is None else [t for t in self.package(folder).targets if path in t.srcs]

    def target(self, label: str) -> Optional[Target]:
        folder = (_split(label, "") or ("", ""))[0]
        targets = self.package(folder).targets if folder in self.build_files else []
        return next((t for t in targets if t.label == label), None)


def _module_file(tree: Tree, module: str) -> Optional[str]:
    """File defining an executorch module ('' for a folder without __init__.py); None if nothing does."""
    rel = "/".join(module.split(".")[1:])
    for path in (f"{rel}.py", f"{rel}/__init__.py"):
        if path in tree.files:
            return path
    return "" if rel in tree.dirs else None


def _imports(tree: Tree, path: str) -> Set[str]:
    """executorch modules a file imports anywhere: lazy and guarded imports need deps in Buck as well."""
    found = set()
    for node in ast.walk(ast.parse(tree.read(path), path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(("executorch/" + path).split("/")[:-node.level] + [base]).strip(".")
            for alias in node.names:
                module = f"{base}.{alias.name}"
                found.add(module if _module_file(tree, module) is not None else base)
    return {m for m in found if m.startswith("executorch.")}


def _violations(buck: Buck, target: Target) -> Dict[Tuple[str, str, str], str]:
    """Rules b and c for one target, keyed so that the same break in main and in the patched tree compares equal."""
    found: Dict[Tuple[str, str, str], str] = {}
    for src in target.srcs:
        if src not in buck.tree.files:
            found[(target.label, "src", src)] = f"{target.label}: srcs lists {src}, which does not exist"
        elif src.endswith(".py"):
            try:
                modules = _imports(buck.tree, src)
            except SyntaxError as error:
                found[(target.label, "syntax", src)] = f"{target.label}: {src} does not parse: {error}"
                continue
            for module in sorted(modules):
                file = _module_file(buck.tree, module)
                owners = [t.label for t in buck.owners(file)] if file else []
                if file is None:
                    why = ", which no file in the tree defines"
                elif file and not {target.label, *target.deps} & set(owners):
                    why = f" ({file}, owned by {', '.join(owners) or 'no target'}), which is not in its deps"
                else:
                    continue
                found.setdefault((target.label, "import", module), f"{target.label}: {src} imports {module}{why}")
    for dep in target.deps:
        where = _split(dep, "") if dep.startswith("//executorch") else None
        if where and (where[0] not in buck.build_files or where[1] not in buck.package(where[0]).names):
            found[(target.label, "dep", dep)] = f"{target.label}: dep {dep} names no existing target"
    return found


@dataclass
class Report:
    """Problems break Meta's Buck import; info says which targets were checked and what main already breaks."""

    problems: List[str] = field(default_factory=list)
    info: List[str] = field(default_factory=list)


def check(tree: Tree, base: Tree, added: Sequence[str], changed: Sequence[str]) -> Report:
    """Checks the Buck entries for files the series adds or changes in `tree` (patched `base`)."""
    report, new, old = Report(), Buck(tree), Buck(base)
    for path in added:
        owners = [t.label for t in new.owners(path)]
        if path.endswith(".py") and len(owners) != 1:
            report.problems.append(f"{path}: in the srcs of {len(owners)} targets ({', '.join(owners) or 'none'}), "
                                   "must be in exactly one")
    targets: Dict[str, Target] = {}
    for path in sorted({*added, *changed}):
        folder, _, name = path.rpartition("/")
        if name in BUILD_FILES or name.endswith(".bzl"):  # an edited build file: check all its targets
            listed = new.package(folder).targets if folder in new.build_files else []
        elif name.endswith(".py"):
            listed = new.owners(path)
            report.info.append(f"{path}: owned by {', '.join(t.label for t in listed) or 'no target'}")
        else:
            listed = []
        targets.update((t.label, t) for t in listed)
    for label, target in sorted(targets.items()):
        before = old.target(label)
        known = _violations(old, before) if before else {}
        for key, message in _violations(new, target).items():
            if key in known:
                report.info.append(f"already in main: {message}")
            else:
                report.problems.append(message)
    for folder, package in sorted(new.packages.items()):
        if package.error and folder in old.build_files and old.package(folder).error:
            report.info.append(f"already in main: {package.error}")
        elif package.error:
            report.problems.append(package.error)
    return report


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Checks Buck entries for files added or changed on upstream.")
    parser.add_argument("--git-dir", required=True, help="git directory of upstream ExecuTorch")
    parser.add_argument("--ref", default="refs/heads/main")
    parser.add_argument("--overlay", type=Path, help="folder with the patched and added files, repo layout")
    parser.add_argument("--added", nargs="*", default=[])
    parser.add_argument("--changed", nargs="*", default=[])
    args = parser.parse_args(argv)
    report = check(Tree.from_git(args.git_dir, args.ref, args.overlay), Tree.from_git(args.git_dir, args.ref),
                   args.added, args.changed)
    print("".join(f"{kind}: {line}\n" for kind, lines in (("info", report.info), ("problem", report.problems))
                  for line in lines), end="")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
