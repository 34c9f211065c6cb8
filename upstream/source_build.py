# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A source build of ExecuTorch at the series' base (series.REF), with chosen patches applied:
upstream builds, links and tests C++ before it is offered (CONTRIBUTING.md, The upstream
series). From the repository's root:

    python -m upstream.source_build --repos TEMPLATE --work DIR [--config runtime|llm] \
        [--patch FILE ...] [--site SITE] TARGET ...

TEMPLATE locates each repository's git directory, e.g. `<mirror>/{owner}+{name}/repo` for
`git clone --bare https://github.com/{owner}/{name}`. DIR keeps between runs the source tree
(`executorch/`, a git repository whose commit is the base and its submodules) and one CMake
build folder per configuration (`build-CONFIG/`): each run resets the tree to the base, applies
the patches with `git apply`, configures once, builds the targets with Ninja (ccache, where
installed, keeps the files a patch toggles) and prints its time. Submodules are extracted at
their pinned commits, or at the newest commit there where the pinned one is missing, which it
says; blobs missing from the executorch repository are left out. With --site, SITE/executorch
is the installed package with the built extensions and the tree's test files in place."""

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch.utils

from upstream import series

BASE = "cff6f4dd32e630945b7188512c1f2b4f102b05ad"
# (path, repository): the submodules the configured build reads.
SUBMODULES = (
    ("third-party/flatbuffers", "google/flatbuffers"),
    ("third-party/flatcc", "dvidelabs/flatcc"),
    ("third-party/pybind11", "pybind/pybind11"),
    ("third-party/googletest", "google/googletest"),
    ("third-party/gflags", "gflags/gflags"),
    ("third-party/json", "nlohmann/json"),
    ("third-party/ao", "pytorch/ao"),
    ("backends/xnnpack/third-party/cpuinfo", "pytorch/cpuinfo"),
    ("backends/xnnpack/third-party/pthreadpool", "google/pthreadpool"),
    ("backends/xnnpack/third-party/FXdiv", "Maratyszcza/FXdiv"),
    ("kernels/optimized/third-party/eigen", "live-clones/eigen"),  # gitlab's, mirrored
)
# The Python extensions that the follow-ups change, as built, and the test files they change.
EXTENSIONS = {
    "_C.*.so": "extension/pybindings",
    "_training_lib.*.so": "extension/training/pybindings",
    "libcustom_ops_aot_lib.so": "extension/llm/custom_ops",
}
TEST_FILES = (
    "runtime/test/test_runtime.py",
    "extension/pybindings/test/make_test.py",
    "extension/training/pybindings/test/test.py",
    "extension/llm/custom_ops/test_update_cache.py",
)
# What the base's CMake lacks for these targets, appended to its files (path, text).
# method_meta_test is Buck's only: CMake leaves it commented out (T191569140). portable_lib
# calls extension_threadpool (`_unsafe_reset_threadpool`) but links it only through the
# optimized kernels or XNNPACK: with both off, _C.so has an undefined symbol at import.
OVERLAYS = (
    (
        "runtime/executor/test/CMakeLists.txt",
        "et_cxx_test(method_meta_test SOURCES method_meta_test.cpp EXTRA_LIBS extension_data_loader)\n",
    ),
    (
        "CMakeLists.txt",
        "if(TARGET portable_lib)\n  target_link_libraries(portable_lib PRIVATE extension_threadpool)\nendif()\n",
    ),
)
# ExecuTorch's options, by build folder. runtime: the runtime, its tests, portable_lib and the
# training bindings; llm: the LLM custom ops' AOT library, which needs the optimized kernels'
# BLAS and which portable_lib would otherwise link. What neither needs (XNNPACK, the
# quantized kernels, the wheel's shared runtime) stays off.
COMMON = {
    "CMAKE_BUILD_TYPE": "Release",
    "EXECUTORCH_BUILD_SHARED": "OFF",
    "EXECUTORCH_BUILD_XNNPACK": "OFF",
    "EXECUTORCH_BUILD_KERNELS_QUANTIZED": "OFF",
    "EXECUTORCH_BUILD_EXTENSION_DATA_LOADER": "ON",
    "EXECUTORCH_BUILD_EXTENSION_FLAT_TENSOR": "ON",
    "EXECUTORCH_BUILD_EXTENSION_MODULE": "ON",
    "EXECUTORCH_BUILD_EXTENSION_NAMED_DATA_MAP": "ON",
    "EXECUTORCH_BUILD_EXTENSION_TENSOR": "ON",
    "EXECUTORCH_ENABLE_LOGGING": "ON",
}
CONFIGS = {
    "runtime": {
        **COMMON,
        "EXECUTORCH_BUILD_TESTS": "ON",
        "EXECUTORCH_BUILD_PYBIND": "ON",
        "EXECUTORCH_BUILD_KERNELS_OPTIMIZED": "OFF",
        "EXECUTORCH_BUILD_KERNELS_LLM": "OFF",
        "EXECUTORCH_BUILD_KERNELS_LLM_AOT": "OFF",
        "EXECUTORCH_BUILD_EXTENSION_RUNNER_UTIL": "ON",
        "EXECUTORCH_BUILD_EXTENSION_TRAINING": "ON",
        "EXECUTORCH_BUILD_DEVTOOLS": "ON",
        "EXECUTORCH_ENABLE_EVENT_TRACER": "ON",
    },
    "llm": {
        **COMMON,
        "EXECUTORCH_BUILD_PYBIND": "OFF",
        "EXECUTORCH_BUILD_KERNELS_OPTIMIZED": "ON",
        "EXECUTORCH_BUILD_KERNELS_LLM": "ON",
        "EXECUTORCH_BUILD_KERNELS_LLM_AOT": "ON",
    },
}


def run(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, check=True, text=True, capture_output=True)
    return done.stdout


def extract(git_dir: str, commit: str, into: Path, exclude: list[str]) -> None:
    into.mkdir(parents=True, exist_ok=True)
    pathspec = [f":(exclude){path}" for path in exclude]
    archive = subprocess.run(
        ["git", "--git-dir", git_dir, "archive", commit, "--", ".", *pathspec],
        check=True,
        capture_output=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)


def missing_blobs(git_dir: str, commit: str) -> list[str]:
    tree = run("git", "--git-dir", git_dir, "ls-tree", "-r", commit)
    paths: dict[str, list[str]] = {}
    for line in tree.splitlines():
        meta, path = line.split("\t", 1)
        kind, sha = meta.split()[1:]
        if kind == "blob":
            paths.setdefault(sha, []).append(path)
    check = subprocess.run(
        ["git", "--git-dir", git_dir, "cat-file", "--batch-check"],
        input="\n".join(paths),
        check=True,
        text=True,
        capture_output=True,
    )
    missing = [
        line.split()[0] for line in check.stdout.splitlines() if "missing" in line
    ]
    return sorted(path for sha in missing for path in paths[sha])


def source(repos: str, src: Path) -> None:
    """The base, extracted once and committed; then each submodule not yet there."""
    git_dir = repos.format(owner="pytorch", name="executorch")
    if not (src / ".git").exists():
        left_out = missing_blobs(git_dir, BASE)
        extract(git_dir, BASE, src, left_out)
        print(
            f"executorch {BASE[:10]}; left out (blobs missing): {', '.join(left_out)}"
        )
        run("git", "init", "-q", cwd=src)
    pins = run(
        "git", "--git-dir", git_dir, "ls-tree", BASE, *(p for p, _ in SUBMODULES)
    )
    pinned = {line.split("\t")[1]: line.split()[2] for line in pins.splitlines()}
    added = []
    for path, text in OVERLAYS:
        if text not in (src / path).read_text():
            with open(src / path, "a") as cmake:
                cmake.write(text)
            added.append(path)
            print(f"{path}: appended {text!r}")
    for path, repo in SUBMODULES:
        if (src / path).exists() and any((src / path).iterdir()):
            continue
        added.append(path)
        owner, name = repo.split("/")
        sub = repos.format(owner=owner, name=name)
        commit = pinned[path]
        found = subprocess.run(["git", "--git-dir", sub, "cat-file", "-e", commit])
        if found.returncode:
            commit = run("git", "--git-dir", sub, "rev-list", "-1", "--all").strip()
            print(
                f"{path}: pinned {pinned[path][:10]} missing, took newest {commit[:10]}"
            )
        else:
            print(f"{path}: {commit[:10]} (pinned)")
        extract(sub, commit, src / path, [])
    if added:
        run("git", "add", "-A", "-f", *added, cwd=src)
        identity = ("-c", "user.name=build", "-c", "user.email=build@localhost")
        run(
            "git",
            *identity,
            "commit",
            "-q",
            "-m",
            "base, submodules, overlays",
            cwd=src,
        )


def configure(src: Path, build: Path, options: dict[str, str]) -> None:
    flags = [f"-D{key}={value}" for key, value in options.items()]
    flags.append(f"-DPYTHON_EXECUTABLE={sys.executable}")
    flags.append(f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}")
    if shutil.which("ccache"):
        flags += [
            "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
            "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
        ]
    print("cmake", " ".join(flags))
    subprocess.run(["cmake", "-G", "Ninja", "-S", src, "-B", build, *flags], check=True)


def site(src: Path, build: Path, into: Path) -> None:
    """into/executorch: a copy of the installed package (hard links, series.copy_package)
    with the built Python extensions and the source tree's test files in place of its own,
    to run upstream's Python tests against the build. Its other compiled parts stay the
    release's."""
    package = into / "executorch"
    if not package.exists():
        series.copy_package(series.executorch_root(), into)
    replaced = [
        (path, folder)
        for glob, folder in EXTENSIONS.items()
        for path in build.glob(f"**/{glob}")
    ]
    replaced += [(src / test, str(Path(test).parent)) for test in TEST_FILES]
    for path, folder in replaced:
        target = package / folder / path.name
        target.unlink(missing_ok=True)  # a hard link to the installed file
        shutil.copy2(path, target)
        print(f"{path} -> executorch/{folder}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repos", required=True, help="git dir template, {owner} {name}"
    )
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--patch", action="append", default=[], type=Path)
    parser.add_argument("--config", choices=CONFIGS, default="runtime")
    parser.add_argument("--jobs", default="2")
    parser.add_argument("--site", type=Path, help="make SITE/executorch (site())")
    parser.add_argument("targets", nargs="+")
    args = parser.parse_args()
    # CMake refuses a source folder not named executorch.
    src, build = args.work / "executorch", args.work / f"build-{args.config}"
    started = time.monotonic()
    if (src / ".git").exists():  # the base again, without the last run's patches
        run("git", "checkout", "-q", "--", ".", cwd=src)
    source(args.repos, src)
    for patch in args.patch:
        run("git", "apply", str(patch.resolve()), cwd=src)
        print(f"applied {patch.name}")
    if not (build / "CMakeCache.txt").exists():
        configure(src, build, CONFIGS[args.config])
    subprocess.run(["ninja", "-C", build, "-j", args.jobs, *args.targets], check=True)
    if args.site:
        site(src, build, args.site)
    minutes = (time.monotonic() - started) / 60
    print(
        f"built {' '.join(args.targets)} in {minutes:.1f} min on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
