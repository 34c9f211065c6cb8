"""Builds executorch-device-guard.

Maps the top-level exir/ folder to the import package executorch_device_guard, as ExecuTorch's own
setup.py maps exir/ to executorch.exir, and installs the one-line startup file that activates the
guard in every Python process: into the wheel's root (build_py) and into editable wheels, whose
PEP 660 strategies keep only the package mapping and drop every other file that build_py writes.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_NAME = "executorch_device_guard.pth"
# site.py executes a .pth line that starts with "import"; this one imports nothing but the stdlib.
PTH_LINE = "import executorch_device_guard._hook; executorch_device_guard._hook.startup()\n"


class BuildPy(build_py):
    """Writes the startup file next to the package, where site.py reads .pth files."""

    def run(self) -> None:
        super().run()
        Path(self.build_lib, PTH_NAME).write_text(PTH_LINE)

    def get_outputs(self, include_bytecode: bool = True) -> list:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib, PTH_NAME))]


class _WithStartupFile:
    """Wraps an editable strategy so that the editable wheel carries the startup file too."""

    def __init__(self, strategy) -> None:
        self.strategy = strategy

    def __call__(self, wheel, files, mapping) -> None:
        self.strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, PTH_LINE)

    def __enter__(self) -> "_WithStartupFile":
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.strategy.__exit__(*exc)


class EditableWheel(editable_wheel):
    """pip install -e: setuptools chooses how to map the package; the startup file rides along."""

    def _select_strategy(self, name, tag, build_lib):
        return _WithStartupFile(super()._select_strategy(name, tag, build_lib))


setup(
    package_dir={"executorch_device_guard": "exir"},
    packages=["executorch_device_guard"],
    cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel},
)
