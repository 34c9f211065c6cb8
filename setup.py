# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Builds executorch-device-guard: maps the top-level exir/ folder to the import package
executorch_device_guard, as ExecuTorch's setup.py maps exir/ to executorch.exir, and puts the
one-line startup file that activates the guard in every Python process next to the package."""

from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_NAME = "executorch_device_guard.pth"
# site.py executes a .pth line that starts with "import"; this one imports only the stdlib.
PTH_LINE = (
    "import executorch_device_guard._hook; executorch_device_guard._hook.startup()\n"
)


class BuildPy(build_py):
    """Writes the startup file into the wheel's root, where site.py reads .pth files."""

    def run(self) -> None:
        super().run()
        Path(self.build_lib, PTH_NAME).write_text(PTH_LINE)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        pth = str(Path(self.build_lib, PTH_NAME))
        return [*super().get_outputs(include_bytecode), pth]


class WithStartupFile:
    """An editable strategy of setuptools whose wheel carries the startup file as well."""

    def __init__(self, strategy: Any) -> None:
        self.strategy = strategy

    def __call__(self, wheel: Any, files: Any, mapping: Any) -> None:
        self.strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, PTH_LINE)

    def __enter__(self) -> "WithStartupFile":
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.strategy.__exit__(*exc)


class EditableWheel(editable_wheel):
    # setuptools' editable strategies write only the package mapping, dropping build_py's other
    # files, and offer no public hook to add one (hatchling ships a .pth, but cannot map exir/ to
    # another name in editable mode): hence its private _select_strategy, as labscript-utils
    # overrides the private _create_wheel_file for its .pth.
    def _select_strategy(self, name: str, tag: str, build_lib: Any) -> WithStartupFile:
        return WithStartupFile(super()._select_strategy(name, tag, build_lib))


setup(
    package_dir={"executorch_device_guard": "exir"},
    packages=["executorch_device_guard"],
    cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel},
)
