# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Builds executorch-device-guard: maps the top-level exir/ folder to the import package
executorch_device_guard, as ExecuTorch's setup.py maps exir/ to executorch.exir, and puts the
one-line startup file that activates the guard in every Python process next to the package."""

from pathlib import Path

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


class EditableWheel(editable_wheel):
    # setuptools' editable wheel keeps only the package mapping of build_py's files and offers
    # no public hook to add one (hatchling ships a .pth, but cannot map exir/ to another name
    # in editable mode): hence its private _install_namespaces, which writes into the wheel's
    # root, as labscript-utils overrides the private _create_wheel_file for its .pth. A
    # setuptools without it fails test_activation's editable install, which CI runs.
    def _install_namespaces(self, installation_dir: str, pth_prefix: str) -> None:
        super()._install_namespaces(installation_dir, pth_prefix)
        Path(installation_dir, PTH_NAME).write_text(PTH_LINE)


setup(
    package_dir={"executorch_device_guard": "exir"},
    packages=["executorch_device_guard"],
    cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel},
)
