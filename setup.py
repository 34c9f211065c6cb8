# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Builds executorch-device-guard: exir/ is the import package executorch_device_guard, and
the one-line startup file that activates the guard in every Python process lies beside it."""

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
    # setuptools offers no public hook for a file in an editable wheel's root: its private
    # _install_namespaces writes there. Without it, test_activation's editable install fails.
    def _install_namespaces(self, installation_dir: str, pth_prefix: str) -> None:
        super()._install_namespaces(installation_dir, pth_prefix)
        Path(installation_dir, PTH_NAME).write_text(PTH_LINE)


setup(
    package_dir={"executorch_device_guard": "exir"},
    packages=["executorch_device_guard"],
    cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel},
)
