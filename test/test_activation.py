# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Activation: installing the package is all it takes, and nothing else changes.

The wheel and the editable install each go into a fresh virtual environment: the wheel guards
every site and passes its self-check, whose children are guarded by the startup file alone; the
editable install hooks interpreter start; pip uninstall takes the startup file away; interpreter
start imports neither torch nor executorch, and reads the switch. In this process: startup()
and the status line read each of the switch's values as _hook's rule says; install() and
uninstall() restore what they change; a changed ExecuTorch is left alone with one warning.
"""

import importlib
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
import types
import unittest
import warnings
from pathlib import Path
from unittest import mock

import children
import executorch_device_guard as guard
import torch
from executorch.exir.emit import _emitter
from executorch_device_guard import ENV_VAR, _hook, _patch
from parts import not_here

REPO = Path(__file__).resolve().parents[1]
PTH = "executorch_device_guard.pth"
EMITTER = "executorch.exir.emit._emitter._Emitter._tensor_spec_to_evalue"


class TestStartup(unittest.TestCase):
    def test_startup_imports_neither_torch_nor_executorch(self) -> None:
        on, off = (
            children.result(children.run("startup", state)[1])
            for state in (True, False)
        )
        self.assertEqual(
            on["modules"], ["executorch_device_guard", "executorch_device_guard._hook"]
        )
        self.assertEqual((on["finders"], off["finders"]), (1, 0))

    def test_interpreter_start_reads_the_switch(self) -> None:
        for value, finders in ((" Off ", 0), ("", 1)):
            with self.subTest(value=value):
                status, stdout, stderr = children.run("startup", value)
                self.assertEqual(status, 0, stderr)
                self.assertEqual(children.result(stdout)["finders"], finders)

    @unittest.skipIf(not_here("llm runner"), str(not_here("llm runner")))
    def test_the_llm_runner_loads_no_exporter_with_the_guard(self) -> None:
        for on in (False, True):
            with self.subTest(guard=on):
                status, stdout, stderr = children.run("runner_import", on)
                self.assertEqual(status, 0, stderr)
                found = children.result(stdout)
                self.assertEqual(found, {"exir": False, "guarded": on})


class TestSwitch(unittest.TestCase):
    """ENV_VAR's rule, in _hook's docstring, as startup() and the status line read it."""

    OFF = ("0", "false", "FALSE", " Off ", "no\n")
    ON = ("1", "", "yes", None)  # None: unset

    def setUp(self) -> None:
        self.addCleanup(guard.install if guard.status().installed else guard.uninstall)
        # The switch as a test sets it, then as it was.
        environ = mock.patch.dict(os.environ)
        environ.start()
        self.addCleanup(environ.stop)

    def set_switch(self, value: str | None) -> None:
        os.environ.pop(ENV_VAR, None)
        if value is not None:
            os.environ[ENV_VAR] = value

    def test_startup_installs_unless_a_value_turns_it_off(self) -> None:
        for value in self.OFF + self.ON:
            with self.subTest(value=value):
                self.set_switch(value)
                guard.uninstall()
                _hook.startup()
                self.assertEqual(guard.status().installed, value in self.ON)

    def test_status_line_says_how_it_was_turned_off(self) -> None:
        from executorch_device_guard.__main__ import headline

        start = f"executorch-device-guard {guard.__version__}: installed="
        self.set_switch(" Off ")
        self.assertEqual(headline(False), f"{start}False ({ENV_VAR}=Off)")
        self.set_switch(None)
        self.assertEqual(
            headline(True), f"{start}True ({ENV_VAR}=0/false/off/no turns it off)"
        )


def fake_emitter(name: str = "executorch.exir.emit._emitter") -> types.ModuleType:
    """An ExecuTorch whose emitter renamed a parameter of _tensor_spec_to_evalue and dropped
    _emit_prim_getters."""

    class _Emitter:
        def _tensor_spec_to_evalue(
            self, tensor_spec: object, constant_tag: object = None
        ) -> str:
            return "original"

    module = types.ModuleType(name)
    module._Emitter = _Emitter  # type: ignore[attr-defined]
    return module


class TestState(unittest.TestCase):
    """install() and uninstall() in this process, on the loaded ExecuTorch and on stand-ins."""

    def setUp(self) -> None:
        self.addCleanup(guard.install if guard.status().installed else guard.uninstall)
        self.addCleanup(guard.uninstall)  # first: puts back what a test patched
        guard.uninstall()

    def patch_warnings(
        self, module: types.ModuleType, sites: tuple[_patch.Site, ...] = _patch.SITES
    ) -> list[str]:
        """Patches `module` twice; the guard's warnings."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _patch.patch_module(module, sites)
            _patch.patch_module(module, sites)
        return [
            str(w.message)
            for w in caught
            if "executorch-device-guard" in str(w.message)
        ]

    def test_install_is_idempotent_and_uninstall_restores(self) -> None:
        for (
            module
        ) in _patch.MODULES:  # every site's module loaded, as in a user's program
            importlib.import_module(module)
        original = vars(_emitter._Emitter)["_tensor_spec_to_evalue"]
        self.assertFalse(hasattr(original, "__wrapped__"))
        guard.install()
        guard.install()
        wrapped = vars(_emitter._Emitter)["_tensor_spec_to_evalue"]
        self.assertIs(wrapped.__wrapped__, original)
        self.assertEqual(
            sum(isinstance(f, type(guard._hook.finder())) for f in sys.meta_path), 1
        )
        installed = guard.status()
        self.assertTrue(installed.installed)
        self.assertEqual(len(installed.patched), len(_patch.SITES))
        guard.uninstall()
        self.assertIs(vars(_emitter._Emitter)["_tensor_spec_to_evalue"], original)
        uninstalled = guard.status()
        self.assertEqual(
            (uninstalled.installed, uninstalled.patched, uninstalled.skipped),
            (False, [], {}),
        )

    def test_only_the_site_modules_name_of_a_function_is_guarded(self) -> None:
        """A module-level site is its module's name for the function: XNNPACK's
        get_param_tensor, which node_visitor only imports, stays itself everywhere else; so
        do the bindings that the LLM runner's and training's packages re-export."""
        for module in _patch.MODULES:
            importlib.import_module(module)
        functions = [
            row
            for row in _patch.SITES
            if isinstance(row, _patch.Site) and "." not in row.qualname
        ]

        def names() -> dict[str, list[str]]:
            """Every executorch.* name of each site's function as its module binds it now."""
            found = {}
            for row in functions:
                function = vars(sys.modules[row.module])[row.qualname]
                found[row.qualname] = sorted(
                    f"{name}.{attr}"
                    for name, module in list(sys.modules.items())
                    if name.startswith("executorch.")
                    and isinstance(module, types.ModuleType)
                    for attr, value in vars(module).items()
                    if value is function
                )
            return found

        before = names()
        self.assertGreater(len(before["get_param_tensor"]), 1)
        guard.install()
        self.assertEqual(len(guard.status().patched), len(_patch.SITES))
        own = {row.qualname: [f"{row.module}.{row.qualname}"] for row in functions}
        self.assertEqual(names(), own)
        guard.uninstall()
        self.assertEqual(names(), before)

    def test_changed_internals_are_left_alone_with_one_warning(self) -> None:
        module = fake_emitter()
        original = vars(module._Emitter)["_tensor_spec_to_evalue"]
        found = self.patch_warnings(module)
        self.assertIs(vars(module._Emitter)["_tensor_spec_to_evalue"], original)
        self.assertEqual(len(found), 1)
        self.assertIn(f"left {EMITTER} unpatched", found[0])
        self.assertEqual(
            sorted(_patch.SKIPPED),
            [EMITTER.replace("_tensor_spec_to_evalue", "_emit_prim_getters"), EMITTER],
        )

    @unittest.skipIf(not_here("llm runner"), str(not_here("llm runner")))
    def test_pybind11_sites_are_checked_by_their_docstring_signature(self) -> None:
        """pybind11's functions and methods have no signature that inspect reads: their
        parameter names come from the line that pybind11 writes first in their docstring."""
        from executorch.extension.llm.runner import _llm_runner
        from executorch.extension.training.pybindings import _training_lib

        sgd = _training_lib.ExecuTorchSGD
        step = vars(sgd)["step"]
        self.assertEqual(_patch._positional_names(step), ["self", "arg0"])
        self.assertEqual(
            _patch._positional_names(_training_lib.get_sgd_optimizer),
            ["named_params", "lr", "momentum", "dampening", "weight_decay", "nesterov"],
        )
        guard.install()
        self.assertIs(vars(sgd)["step"].__wrapped__, step)
        guard.uninstall()
        self.assertIs(vars(sgd)["step"], step)
        # A binding whose parameter was renamed keeps its own behaviour, with the warning.
        renamed = types.ModuleType("executorch.extension.llm.runner")
        renamed.make_image_input = _llm_runner.make_text_input  # type: ignore[attr-defined]
        site = "executorch.extension.llm.runner.make_image_input"
        found = self.patch_warnings(renamed)
        self.assertIs(renamed.make_image_input, _llm_runner.make_text_input)  # type: ignore[attr-defined]
        self.assertIn(f"left {site} unpatched", found[0])
        self.assertIn(
            "expected leading parameters ['image_tensor'], found ['text']",
            _patch.SKIPPED[site],
        )

    def test_uninstall_forgets_the_warning(self) -> None:
        self.assertEqual(len(self.patch_warnings(fake_emitter())), 1)
        guard.uninstall()
        self.assertEqual(len(self.patch_warnings(fake_emitter())), 1)

    def test_sites_newer_than_the_release_are_skipped_without_warning(self) -> None:
        site = _patch.Site(
            "executorch.exir.emit._emitter",
            "_Emitter.emit_later",
            "emitter_constant",
            "99.0.0",
        )
        found = self.patch_warnings(fake_emitter(), (site,))
        self.assertEqual(found, [])
        self.assertEqual(
            _patch.SKIPPED,
            {
                f"{site.module}.{site.qualname}": "not in executorch "
                f"{guard.status().executorch_version} (added in 99.0.0)"
            },
        )

    def test_a_wrapper_that_fails_leaves_its_module_alone(self) -> None:
        site = _patch.Site(
            "executorch.exir.emit._emitter",
            "_Emitter._tensor_spec_to_evalue",
            "gone",
            "1.0.0",
        )
        module = fake_emitter()
        original = vars(module._Emitter)["_tensor_spec_to_evalue"]
        found = self.patch_warnings(module, (site,))
        self.assertIs(vars(module._Emitter)["_tensor_spec_to_evalue"], original)
        self.assertEqual((len(found), _patch.PATCHED), (1, {}))

    def test_operator_sites_follow_the_rules_of_the_other_sites(self) -> None:
        """An operator this release lacks: skipped quietly where it came later, else with the
        one warning; and nothing is registered."""
        module = types.ModuleType(_patch.CUSTOM_OPS)
        later = _patch.Operator(_patch.CUSTOM_OPS, "llama::not_yet", "99.0.0")
        gone = _patch.Operator(_patch.CUSTOM_OPS, "llama::gone", "1.0.0")
        self.assertEqual(self.patch_warnings(module, (later,)), [])
        found = self.patch_warnings(module, (gone,))
        self.assertEqual(len(found), 1)
        self.assertIn("left executorch.extension.llm.custom_ops.custom_ops.", found[0])
        self.assertIn("llama::gone is not registered", found[0])
        version = guard.status().executorch_version
        self.assertEqual(
            _patch.SKIPPED,
            {
                f"{_patch.CUSTOM_OPS}.llama::not_yet": f"not in executorch {version} "
                "(added in 99.0.0)",
                f"{_patch.CUSTOM_OPS}.llama::gone": "llama::gone is not registered",
            },
        )
        self.assertEqual(_patch.PATCHED, {})

    def test_an_operator_registered_for_the_cpu_alone_is_skipped_without_a_warning(
        self,
    ) -> None:
        """As the follow-up registers ExecuTorch's: torch refuses other devices itself."""
        library = torch.library.Library("device_guard_test", "FRAGMENT")  # type: ignore[no-untyped-call]
        self.addCleanup(library._destroy)
        library.define("host_only(Tensor x) -> Tensor")
        library.define("host_only.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
        library.impl("host_only", torch.clone, "CPU")
        library.impl("host_only.out", lambda x, out: out.copy_(x), "CPU")
        module = types.ModuleType(_patch.CUSTOM_OPS)
        fixed = _patch.Operator(
            _patch.CUSTOM_OPS, "device_guard_test::host_only", "1.0.0"
        )
        self.assertEqual(self.patch_warnings(module, (fixed,)), [])
        self.assertEqual(
            _patch.SKIPPED,
            {
                f"{_patch.CUSTOM_OPS}.device_guard_test::host_only": "registered for "
                "CPU only: ExecuTorch refuses other devices itself"
            },
        )
        self.assertEqual(_patch.PATCHED, {})

    @unittest.skipIf(not_here("custom ops"), not_here("custom ops"))
    def test_uninstall_removes_the_operator_kernels(self) -> None:
        def kernels() -> list[bool]:
            """Each device's, and meta's of the `.out` variant, which has none of its own."""
            return [
                torch._C._dispatch_has_kernel_for_dispatch_key(overload, key)
                for overload, keys in (
                    ("llama::custom_sdpa", ("CUDA", "PrivateUse1", "SparseCUDA")),
                    ("llama::update_cache.out", ("CUDA", "HPU", "Meta")),
                )
                for key in keys
            ]

        self.assertEqual(kernels(), [False] * 6)
        guard.install()
        guard.install()
        self.assertEqual(kernels(), [True] * 6)
        self.assertIn(f"{_patch.CUSTOM_OPS}.llama::custom_sdpa", guard.status().patched)
        guard.uninstall()
        self.assertEqual(kernels(), [False] * 6)


class TestInstalls(unittest.TestCase):
    """A fresh virtual environment per install, seeing this interpreter's torch and executorch.

    `venv --system-site-packages` would expose the base interpreter's packages, not those of the
    environment running the tests; a path-only .pth line exposes them instead, and site.py reads
    startup files only in site directories, so the test environment's own hook stays out.
    """

    def setUp(self) -> None:
        tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp)
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")],
            check=True,
        )
        self.python = str(tmp / "venv" / "bin" / "python")
        paths = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        self.site = Path(
            subprocess.run(
                [self.python, "-c", paths], check=True, capture_output=True, text=True
            ).stdout.strip()
        )
        (self.site / "_test_parent_env.pth").write_text(
            "\n".join(site.getsitepackages()) + "\n"
        )
        # Build from a copy: parallel tests must not share build/ and *.egg-info in the checkout.
        self.source = tmp / "source"
        shutil.copytree(
            REPO,
            self.source,
            ignore=shutil.ignore_patterns(
                ".git", "build", "*.egg-info", ".venv*", ".nox"
            ),
        )

    def pip(self, *args: str) -> None:
        subprocess.run(
            [self.python, "-m", "pip", "--disable-pip-version-check", "-q", *args],
            check=True,
        )

    def assert_uninstall_removes_it(self) -> None:
        self.pip("uninstall", "-y", "executorch-device-guard")
        left = [
            p.name for p in self.site.iterdir() if "executorch_device_guard" in p.name
        ]
        self.assertEqual(left, [])

    def test_wheel_guards_every_site_and_passes_its_self_check(self) -> None:
        dist = self.source / "dist"
        self.pip(
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(self.source),
        )
        (wheel,) = dist.glob("executorch_device_guard-*.whl")
        self.pip("install", "--no-deps", "--no-index", "--ignore-installed", str(wheel))
        self.assertTrue((self.site / "executorch_device_guard" / "_hook.py").is_file())
        self.assertEqual(
            (self.site / PTH).read_text(),
            "import executorch_device_guard._hook; executorch_device_guard._hook.startup()\n",
        )
        check = subprocess.run(
            [self.python, "-m", "executorch_device_guard"],
            capture_output=True,
            text=True,
        )
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr[-3000:])
        self.assertEqual(
            len(re.findall(r"^  guarded  ", check.stdout, re.M)), len(_patch.SITES)
        )
        self.assertEqual(
            re.findall(r"^  (ok  |FAIL) ", check.stdout, re.M), ["ok  "] * 3
        )
        self.assert_uninstall_removes_it()

    def test_editable_install_hooks_the_interpreter_start(self) -> None:
        self.pip(
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--ignore-installed",
            "-e",
            str(self.source),
        )
        self.assertFalse((self.site / "executorch_device_guard").exists())
        status, stdout, stderr = children.run("startup", guard=True, python=self.python)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(children.result(stdout)["finders"], 1)
        self.assert_uninstall_removes_it()


class TestReadme(unittest.TestCase):
    def test_site_table_matches_code(self) -> None:
        readme = (REPO / "README.md").read_text()
        rows = re.findall(
            r"^\| `(executorch\.[\w.]+)` \| `([\w.:]+)` \|", readme, re.MULTILINE
        )
        self.assertEqual(rows, [(site.module, site.qualname) for site in _patch.SITES])
