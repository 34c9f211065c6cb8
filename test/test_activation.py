# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Activation: installing the package is all it takes, and nothing else changes.

The wheel and the editable install each go into a fresh virtual environment: the wheel guards
every site and passes its self-check, whose children are guarded by the startup file alone; the
editable install hooks interpreter start; pip uninstall takes the startup file away; interpreter
start imports neither torch nor executorch, and reads the switch, naming a value it does not
know. In this process: startup() and the status line read each of the switch's values as
_hook's rule says; install() and uninstall() restore what they change; a changed ExecuTorch is
left alone with one warning.
"""

import importlib
import importlib.machinery
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

import torch
from executorch.exir.emit import _emitter

import executorch_device_guard as guard
from executorch_device_guard import (
    ENV_VAR,
    _hook,
    _signatures,
    _site_table,
    _wrapping,
)
from test.support import children
from test.support.parts import not_here

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

    def test_guarded_modules_keep_executorchs_loaders(self) -> None:
        """The guard's loader runs one import and is gone: each module's __loader__ and
        __spec__.loader are ExecuTorch's, as without the guard, and uninstall() changes
        neither."""
        on, off = (
            children.result(children.run("loaders", state)[1])
            for state in (True, False)
        )
        self.assertEqual(on, off)
        self.assertIn("executorch.exir.emit._emitter", on)
        for module, (loader, _, same, kept) in on.items():
            with self.subTest(module=module):
                self.assertIn(loader, ("SourceFileLoader", "ExtensionFileLoader"))
                self.assertEqual((same, kept), ("True", "True"))

    def test_interpreter_start_names_an_unknown_value_once_and_stays_on(self) -> None:
        for value in ("disable", " Yes ", "TRUE", ""):
            with self.subTest(value=value):
                status, stdout, stderr = children.run("startup", value)
                self.assertEqual(status, 0, stderr)
                self.assertEqual(children.result(stdout)["finders"], 1)
                told = [line for line in stderr.splitlines() if ENV_VAR in line]
                if value != "disable":
                    self.assertEqual(told, [])
                    continue
                self.assertEqual(len(told), 1, stderr)
                for said in ("'disable'", "stays on", *_hook.OFF, *_hook.ON):
                    self.assertIn(said, told[0])

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
    # None: unset; "disable" is a typo, which leaves the guard on.
    ON = ("1", "", "yes", " True ", "on", "disable", None)

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
        self,
        module: types.ModuleType,
        sites: tuple[_site_table.Site | _site_table.Operator, ...] = _site_table.SITES,
    ) -> list[str]:
        """Patches `module` twice; the guard's warnings."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _wrapping.patch_module(module, sites)
            _wrapping.patch_module(module, sites)
        return [
            str(w.message)
            for w in caught
            if "executorch-device-guard" in str(w.message)
        ]

    def test_install_is_idempotent_and_uninstall_restores(self) -> None:
        for (
            module
        ) in _site_table.MODULES:  # every site's module loaded, as in a user's program
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
        self.assertEqual(len(installed.patched), len(_site_table.SITES))
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
        for module in _site_table.MODULES:
            importlib.import_module(module)
        functions = [
            row
            for row in _site_table.SITES
            if isinstance(row, _site_table.Site) and "." not in row.qualname
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
        self.assertEqual(len(guard.status().patched), len(_site_table.SITES))
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
            sorted(_wrapping.SKIPPED),
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
        self.assertEqual(_signatures.positional_names(step), ["self", "arg0"])
        self.assertEqual(
            _signatures.positional_names(_training_lib.get_sgd_optimizer),
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
            _wrapping.SKIPPED[site],
        )

    def test_a_moved_class_is_named_as_moved(self) -> None:
        """Patching runs while the module is still initializing, where getattr would blame a
        circular import."""
        module = types.ModuleType("executorch.exir.emit._emitter")
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
        module.__spec__._initializing = True  # type: ignore[attr-defined]
        found = self.patch_warnings(module)
        release = guard.status().executorch_version
        self.assertIn(f"left {EMITTER} unpatched on executorch {release}", found[0])
        self.assertIn("moved: _Emitter._tensor_spec_to_evalue is not defined", found[0])
        self.assertNotIn("circular import", found[0])

    def test_a_loader_without_exec_module_is_reported(self) -> None:
        """The import hook cannot lend its loader to a legacy loader: its module's sites are
        listed as left alone, saying why."""

        class LegacyLoader:
            def load_module(self, name: str) -> types.ModuleType:
                raise ImportError(name)

        class LegacyFinder:
            def find_spec(self, name: str, *args: object) -> object:
                return importlib.machinery.ModuleSpec(name, LegacyLoader())

        with mock.patch.object(sys, "meta_path", [LegacyFinder(), *sys.meta_path]):
            spec = _hook._Finder().find_spec("executorch.runtime", None)
        self.assertIsInstance(spec.loader, LegacyLoader)  # type: ignore[union-attr]
        why = "its loader, LegacyLoader, has no exec_module to wrap"
        runtime = [s for s in _site_table.SITES if s.module == "executorch.runtime"]
        self.assertEqual(
            guard.status().skipped,
            {_wrapping.site_name(site): why for site in runtime},
        )
        self.assertEqual(len(runtime), 2)

    def test_uninstall_forgets_the_warning(self) -> None:
        self.assertEqual(len(self.patch_warnings(fake_emitter())), 1)
        guard.uninstall()
        self.assertEqual(len(self.patch_warnings(fake_emitter())), 1)

    def test_sites_newer_than_the_release_are_skipped_without_warning(self) -> None:
        site = _site_table.Site(
            "executorch.exir.emit._emitter",
            "_Emitter.emit_later",
            "_export_sites.emitter_constant",
            "99.0.0",
        )
        found = self.patch_warnings(fake_emitter(), (site,))
        self.assertEqual(found, [])
        self.assertEqual(
            _wrapping.SKIPPED,
            {
                f"{site.module}.{site.qualname}": "not in executorch "
                f"{guard.status().executorch_version} (added in 99.0.0)"
            },
        )

    def test_a_wrapper_that_fails_leaves_its_module_alone(self) -> None:
        site = _site_table.Site(
            "executorch.exir.emit._emitter",
            "_Emitter._tensor_spec_to_evalue",
            "_export_sites.gone",
            "1.0.0",
        )
        module = fake_emitter()
        original = vars(module._Emitter)["_tensor_spec_to_evalue"]
        found = self.patch_warnings(module, (site,))
        self.assertIs(vars(module._Emitter)["_tensor_spec_to_evalue"], original)
        self.assertEqual((len(found), _wrapping.PATCHED), (1, {}))

    def test_operator_sites_follow_the_rules_of_the_other_sites(self) -> None:
        """An operator this release lacks: skipped quietly where it came later, else with the
        one warning; and nothing is registered."""
        module = types.ModuleType(_site_table.CUSTOM_OPS)
        later = _site_table.Operator(_site_table.CUSTOM_OPS, "llama::not_yet", "99.0.0")
        gone = _site_table.Operator(_site_table.CUSTOM_OPS, "llama::gone", "1.0.0")
        self.assertEqual(self.patch_warnings(module, (later,)), [])
        found = self.patch_warnings(module, (gone,))
        self.assertEqual(len(found), 1)
        self.assertIn("left executorch.extension.llm.custom_ops.custom_ops.", found[0])
        self.assertIn("llama::gone is not registered", found[0])
        version = guard.status().executorch_version
        self.assertEqual(
            _wrapping.SKIPPED,
            {
                f"{_site_table.CUSTOM_OPS}.llama::not_yet": f"not in executorch {version} "
                "(added in 99.0.0)",
                f"{_site_table.CUSTOM_OPS}.llama::gone": "llama::gone is not registered",
            },
        )
        self.assertEqual(_wrapping.PATCHED, {})

    def test_an_operator_registered_for_the_cpu_alone_is_skipped_without_a_warning(
        self,
    ) -> None:
        """As torch refuses other devices for an operator registered for the host alone."""
        library = torch.library.Library("device_guard_test", "FRAGMENT")  # type: ignore[no-untyped-call]
        self.addCleanup(library._destroy)
        library.define("host_only(Tensor x) -> Tensor")
        library.define("host_only.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
        library.impl("host_only", torch.clone, "CPU")
        library.impl("host_only.out", lambda x, out: out.copy_(x), "CPU")
        module = types.ModuleType(_site_table.CUSTOM_OPS)
        fixed = _site_table.Operator(
            _site_table.CUSTOM_OPS, "device_guard_test::host_only", "1.0.0"
        )
        self.assertEqual(self.patch_warnings(module, (fixed,)), [])
        self.assertEqual(
            _wrapping.SKIPPED,
            {
                f"{_site_table.CUSTOM_OPS}.device_guard_test::host_only": "registered for "
                "CPU only: ExecuTorch refuses other devices itself"
            },
        )
        self.assertEqual(_wrapping.PATCHED, {})

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
        self.assertIn(
            f"{_site_table.CUSTOM_OPS}.llama::custom_sdpa", guard.status().patched
        )
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
            len(re.findall(r"^  guarded  ", check.stdout, re.M)), len(_site_table.SITES)
        )
        self.assertEqual(
            re.findall(r"^  (ok  |FAIL) ", check.stdout, re.M), ["ok  "] * 3
        )
        # One line to end with, and the children's dependency noise (torchao's libraries,
        # INFO lines) kept out.
        self.assertEqual(
            check.stdout.splitlines()[-1],
            f"OK: the self-check passed on executorch {guard.status().executorch_version}, "
            f"{len(_site_table.SITES)} sites guarded.",
        )
        self.assertEqual(check.stderr, "")
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
