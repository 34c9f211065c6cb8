# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Activation: installing the package is all it takes, and nothing else changes.

The wheel and the editable install each go into a fresh virtual environment, where a script that
never imports executorch_device_guard gets the InternalError; pip uninstall takes the startup file
away; interpreter start imports neither torch nor executorch; a changed ExecuTorch is left alone.
"""

import json
import re
import shutil
import site
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from executorch_device_guard._hook import SITES
from executorch_device_guard._selfcheck import CASES, run_cases, run_child

REPO = Path(__file__).resolve().parents[1]
PTH = "executorch_device_guard.pth"


def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


class TestInstalls(unittest.TestCase):
    """A fresh virtual environment per install, seeing this interpreter's torch and executorch.

    `venv --system-site-packages` would expose the base interpreter's packages, not those of the
    environment running the tests; a path-only .pth line exposes them instead, and site.py reads
    startup files only in site directories, so the test environment's own hook stays out.
    """

    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.tmp)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.tmp / "venv")], check=True)
        self.python = self.tmp / "venv" / "bin" / "python"
        self.site_packages = Path(
            subprocess.run(
                [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        (self.site_packages / "_test_parent_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        # Build from a copy: parallel tests must not share build/ and *.egg-info in the checkout.
        self.source = self.tmp / "source"
        shutil.copytree(REPO, self.source, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", ".venv*", ".nox"))

    def assert_guard_works_then_uninstalls(self) -> None:
        self.assertEqual((self.site_packages / PTH).read_text().strip(), "import executorch_device_guard._hook; executorch_device_guard._hook.startup()")
        for case, failure in run_cases(CASES, python=str(self.python)):
            self.assertIsNone(failure, case.name)

        _pip(self.python, "uninstall", "-y", "executorch-device-guard")
        leftovers = [p.name for p in self.site_packages.iterdir() if "executorch_device_guard" in p.name]
        self.assertEqual(leftovers, [])
        # The package is gone: with the guard asked for, the meta model fails as without it.
        unguarded = CASES[0]._replace(name="after uninstall", guard=True)
        for case, failure in run_cases((unguarded,), python=str(self.python)):
            self.assertIsNone(failure, case.name)

    def test_wheel(self) -> None:
        dist = self.tmp / "dist"
        _pip(self.python, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(self.source))
        (wheel,) = dist.glob("executorch_device_guard-*.whl")
        _pip(self.python, "install", "--no-deps", "--no-index", "--ignore-installed", str(wheel))
        self.assertTrue((self.site_packages / "executorch_device_guard" / "_hook.py").is_file())
        self.assert_guard_works_then_uninstalls()

    def test_editable(self) -> None:
        _pip(self.python, "install", "--no-deps", "--no-build-isolation", "--ignore-installed", "-e", str(self.source))
        self.assertFalse((self.site_packages / "executorch_device_guard").exists())
        self.assert_guard_works_then_uninstalls()


_STARTUP = """
import json, sys
from executorch_device_guard import _hook
print(json.dumps({
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "executorch", "executorch_device_guard")),
    "finders": sum(isinstance(f, _hook._Finder) for f in sys.meta_path),
}))
"""

_IDEMPOTENT = """
import json, site, sys
from pathlib import Path
import executorch_device_guard as guard
from executorch_device_guard import _hook

# A second scan of the site directory runs the startup line again.
site.addsitedir(next(p for p in site.getsitepackages() if (Path(p) / "executorch_device_guard.pth").exists()))
guard.install()
import executorch.exir.emit._emitter as emitter
guard.install()
wrapped = emitter._Emitter._tensor_spec_to_evalue
original = wrapped.__wrapped__
installed = guard.status()
guard.uninstall()
restored = emitter._Emitter._tensor_spec_to_evalue is original
uninstalled = guard.status()
guard.install()
print(json.dumps({
    "finders": sum(isinstance(f, _hook._Finder) for f in sys.meta_path),
    "wrapped_once": not hasattr(original, "__wrapped__"),
    "installed": installed._asdict(),
    "restored": restored,
    "uninstalled": uninstalled._asdict(),
    "reinstalled_wraps_loaded_module": emitter._Emitter._tensor_spec_to_evalue.__wrapped__ is original,
}))
"""

_CHANGED_INTERNALS = """
import json, sys, types, warnings
from executorch_device_guard import _patch
from executorch_device_guard._hook import SITES

# An ExecuTorch whose emitter renamed a parameter and dropped a method.
fake = types.ModuleType("executorch.exir.emit._emitter")
class _Emitter:
    def _tensor_spec_to_evalue(self, tensor_spec, constant_tag=None):
        return "original"
fake._Emitter = _Emitter
original = _Emitter.__dict__["_tensor_spec_to_evalue"]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    _patch.patch_module(fake, SITES)
    _patch.patch_module(fake, SITES)
print(json.dumps({
    "untouched": _Emitter.__dict__["_tensor_spec_to_evalue"] is original,
    "warnings": [str(w.message) for w in caught if "executorch-device-guard" in str(w.message)],
    "skipped": sorted(_patch.SKIPPED),
}))
"""

_OLDER_RELEASE = """
import json, types, warnings
from executorch_device_guard import _patch
from executorch_device_guard._hook import SITES

# executorch 1.1.0's named data store: add_named_data, but no _tensor_to_bytes yet (from 1.2.0).
_patch._executorch_version = lambda: "1.1.0"
fake = types.ModuleType("executorch.exir._serialize._named_data_store")
class NamedDataStore:
    def add_named_data(self, key, data, alignment=1, external_tag=None, tensor_layout=None):
        return "original"
fake.NamedDataStore = NamedDataStore
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    _patch.patch_module(fake, SITES)
print(json.dumps({
    "patched": sorted(_patch.PATCHED),
    "skipped": _patch.SKIPPED,
    "warnings": [str(w.message) for w in caught if "executorch-device-guard" in str(w.message)],
}))
"""

_UNIMPORTABLE_WRAPPERS = """
import json, sys, warnings
sys.modules["executorch_device_guard._sites"] = None  # as if ExecuTorch's internals had moved
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import executorch.exir
    from executorch.exir.emit._emitter import _Emitter
import executorch_device_guard as guard
print(json.dumps({
    "patched": guard.status().patched,
    "wrapped": hasattr(_Emitter._tensor_spec_to_evalue, "__wrapped__"),
    "warnings": [str(w.message) for w in caught if "executorch-device-guard" in str(w.message)],
}))
"""


def _json(script: str, guard: bool) -> dict:
    returncode, stdout, stderr = run_child(script, guard)
    assert returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


class TestStartupHook(unittest.TestCase):
    def test_startup_imports_neither_torch_nor_executorch(self) -> None:
        on = _json(_STARTUP, guard=True)
        self.assertEqual(on["modules"], ["executorch_device_guard", "executorch_device_guard._hook"])
        self.assertEqual(on["finders"], 1)
        self.assertEqual(_json(_STARTUP, guard=False)["finders"], 0)

    def test_install_is_idempotent_and_uninstall_restores(self) -> None:
        result = _json(_IDEMPOTENT, guard=True)
        self.assertEqual(result["finders"], 1)
        self.assertTrue(result["wrapped_once"])
        self.assertTrue(result["restored"])
        self.assertTrue(result["reinstalled_wraps_loaded_module"])
        installed, uninstalled = result["installed"], result["uninstalled"]
        self.assertTrue(installed["installed"])
        self.assertRegex(installed["executorch_version"], r"^1\.\d+\.\d+")
        self.assertIn("executorch.exir.emit._emitter._Emitter._tensor_spec_to_evalue", installed["patched"])
        self.assertEqual((uninstalled["installed"], uninstalled["patched"]), (False, []))

    def test_changed_internals_are_left_alone_with_one_warning(self) -> None:
        result = _json(_CHANGED_INTERNALS, guard=False)
        self.assertTrue(result["untouched"])
        self.assertEqual(
            result["skipped"],
            [
                "executorch.exir.emit._emitter._Emitter._emit_prim_getters",
                "executorch.exir.emit._emitter._Emitter._tensor_spec_to_evalue",
            ],
        )
        self.assertEqual(len(result["warnings"]), 1)
        self.assertIn("unpatched", result["warnings"][0])

    def test_sites_newer_than_the_release_are_skipped_without_warning(self) -> None:
        result = _json(_OLDER_RELEASE, guard=False)
        store = "executorch.exir._serialize._named_data_store."
        self.assertEqual(result["patched"], [store + "NamedDataStore.add_named_data"])
        self.assertEqual(
            result["skipped"], {store + "_tensor_to_bytes": "not in executorch 1.1.0 (added in 1.2.0)"}
        )
        self.assertEqual(result["warnings"], [])

    def test_import_executorch_survives_broken_wrappers(self) -> None:
        result = _json(_UNIMPORTABLE_WRAPPERS, guard=True)
        self.assertEqual(result["patched"], [])
        self.assertFalse(result["wrapped"])
        self.assertEqual(len(result["warnings"]), 1)


class TestReadme(unittest.TestCase):
    def test_site_table_matches_code(self) -> None:
        readme = (REPO / "README.md").read_text()
        rows = re.findall(r"^\| `(executorch\.[\w.]+)` \| `([\w.]+)` \|", readme, re.MULTILINE)
        self.assertEqual(rows, [(module, qualname) for module, qualname, _, _ in SITES])


if __name__ == "__main__":
    unittest.main()
