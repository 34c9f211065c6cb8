# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The self-check, `python -m executorch_device_guard`, ends each finding in one line that
says what is wrong and what to do: torch or executorch missing, a release older than those
supported (a warning: the guard stays on), flatc not found, a site that the release has left
unguarded. Its children are real processes: the self-check's own where the outcome depends on
ExecuTorch, and otherwise small programs that print what such a child prints (the sites' state
of this process, or flatc's FileNotFoundError as a subprocess raises it), so that each finding
is tested without installing another release. test_activation runs the whole self-check on
a wheel."""

import contextlib
import io
import json
import re
import subprocess
import sys
import types
import unittest
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from unittest import mock

import executorch_device_guard as guard
from executorch_device_guard import __main__ as selfcheck_main
from executorch_device_guard import _release, _selfcheck, _site_table, _wrapping

REAL_VERSION = metadata.version


@contextlib.contextmanager
def versions(**found: str | None) -> Iterator[None]:
    """importlib.metadata.version with the given packages' versions, None: not installed; the
    release rule reads them afresh inside and after the block."""

    def version(name: str) -> str:
        if name not in found:
            return REAL_VERSION(name)
        if found[name] is None:
            raise metadata.PackageNotFoundError(name)
        return found[name]  # type: ignore[return-value]

    _release.installed.cache_clear()
    try:
        with mock.patch("importlib.metadata.version", side_effect=version):
            yield
    finally:
        _release.installed.cache_clear()


def printing(stdout: str, stderr: str = "", status: int = 0) -> "subprocess.Popen[str]":
    """A child process that prints what a self-check child prints, and exits with `status`."""
    code = "import sys; sys.stdout.write(sys.argv[1]); sys.stderr.write(sys.argv[2]); sys.exit(int(sys.argv[3]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, stdout, stderr, str(status)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def flatc_not_found() -> "subprocess.Popen[str]":
    """A child that fails as ExecuTorch's serializer does where no flatc is found: it runs
    `flatc` with subprocess and gets FileNotFoundError."""
    code = "import subprocess; subprocess.run(['flatc', '--version'])"
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env={"PATH": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class TestFindings(unittest.TestCase):
    def setUp(self) -> None:
        self.addCleanup(guard.install if guard.status().installed else guard.uninstall)

    def run_main(self, children: dict[str, "subprocess.Popen[str]"]) -> tuple[int, str]:
        """main() with each child ("status", "cpu", or a case's model) replaced."""

        def start(arg: str, guard: bool | None = None) -> "subprocess.Popen[str]":
            return (
                children.pop(arg)
                if arg in children
                else _selfcheck.start_child(arg, guard)
            )

        def start_cases(
            cases: tuple[_selfcheck.Case, ...],
        ) -> "list[subprocess.Popen[str]]":
            # The meta cases pass as their children print.
            return [
                printing("", f"NULL pointer access {' '.join(case.stderr_has)}", 1)
                for case in cases
            ]

        out = io.StringIO()
        with (
            mock.patch.object(selfcheck_main, "start_child", start),
            mock.patch.object(selfcheck_main, "start_cases", start_cases),
            contextlib.redirect_stdout(out),
        ):
            status = selfcheck_main.main()
        return status, out.getvalue()

    def state(self, skipped: dict[str, str] | None = None) -> "subprocess.Popen[str]":
        """The status child, printing this process's sites' state, without CUDA: the CUDA
        cases' children, which die of SIGSEGV, are .ci/gpu's, in the whole self-check."""
        state = {**_selfcheck.site_state(), "cuda": False}
        if skipped is not None:
            state["skipped"] = skipped
        return printing(json.dumps(state) + "\n", "INFO:root:dependency noise\n")

    def host_program(self) -> "subprocess.Popen[str]":
        return printing("same\nsame\n")

    def test_without_torch_or_executorch_it_says_what_to_install(self) -> None:
        for name, install in (
            ("torch", "torch executorch"),
            ("executorch", "executorch"),
        ):
            with self.subTest(missing=name), versions(**{name: None}):
                status, out = self.run_main({})
                self.assertEqual(status, 1)
                self.assertEqual(
                    out.splitlines()[1:],
                    [
                        f"FAIL: {name} is not installed in this Python ({sys.executable}): "
                        f"install it (pip install {install}), or run this with the Python "
                        "that has it."
                    ],
                )

    def test_a_release_older_than_the_supported_ones_warns_once_and_stays_on(
        self,
    ) -> None:
        with versions(executorch="0.7.0"):
            status, out = self.run_main(
                {"status": self.state(), "cpu": self.host_program()}
            )
        self.assertEqual(status, 0, out)
        warnings = [line for line in out.splitlines() if "older" in line]
        self.assertEqual(
            warnings,
            [
                "WARNING: executorch 0.7.0 is older than the releases that the guard "
                "supports (executorch 1.0.0 and later 1.x releases): it stays on, untested "
                "here; pip install -U executorch for a supported release."
            ],
        )
        self.assertTrue(guard.status().installed)
        with versions(executorch="1.0.0"):
            self.assertIsNone(_selfcheck.too_old())

    def test_flatc_not_found_names_the_variable_and_the_wheels_binary(self) -> None:
        status, out = self.run_main({"status": self.state(), "cpu": flatc_not_found()})
        self.assertEqual(status, 1)
        spec = _selfcheck.util.find_spec("executorch")
        assert spec is not None and spec.submodule_search_locations is not None
        shipped = Path(spec.submodule_search_locations[0], "data", "bin", "flatc")
        self.assertTrue(shipped.is_file())
        self.assertEqual(
            out.splitlines()[-1],
            "FAIL: ExecuTorch does not find the flatc binary that it writes programs "
            f"with: set FLATC_EXECUTABLE={shipped}, the one that the executorch wheel "
            "ships, then run this again.",
        )

    def test_a_site_that_the_release_has_left_alone_fails_it(self) -> None:
        """The guard's own skips: a site that the emitter of this release lacks fails the
        self-check; one that came later, or an operator left to ExecuTorch's own refusal,
        does not."""
        guard.uninstall()
        emitter = types.ModuleType("executorch.exir.emit._emitter")
        emitter._Emitter = type("_Emitter", (), {})  # type: ignore[attr-defined]
        later = _site_table.Site(
            emitter.__name__, "_Emitter.later", "_export_sites.gone", "99.0.0"
        )
        with mock.patch("warnings.warn"):
            _wrapping.patch_module(emitter, (*_site_table.SITES[:2], later))
        skipped = dict(_wrapping.SKIPPED)
        guard.uninstall()
        self.assertEqual(len(skipped), 3)
        cpu_only = f"{_site_table.CUSTOM_OPS}.llama::custom_sdpa"
        skipped[cpu_only] = _wrapping.HOST_ONLY
        with mock.patch.object(_selfcheck, "SITES", (*_site_table.SITES, later)):
            unexpected = _selfcheck.unexpected_skips(skipped)
            status, out = self.run_main(
                {"status": self.state(skipped), "cpu": self.host_program()}
            )
        self.assertEqual(
            unexpected,
            [f"{site.module}.{site.qualname}" for site in _site_table.SITES[:2]],
        )
        self.assertEqual(status, 1)
        self.assertEqual(len(re.findall(r"^  SKIPPED  ", out, re.M)), 4)
        self.assertEqual(
            out.splitlines()[-1],
            f"FAIL: the guard left 2 site(s) of executorch {metadata.version('executorch')} "
            "alone (SKIPPED above): this release differs where the guard looks, so they "
            "keep ExecuTorch's own behaviour; lower on the CPU, or call "
            "torch.export.passes.move_to_device_pass(exported_program, 'cpu') first.",
        )

    def test_the_childrens_noise_shows_only_where_a_child_fails(self) -> None:
        status, out = self.run_main(
            {"status": self.state(), "cpu": self.host_program()}
        )
        self.assertEqual(status, 0, out)
        self.assertNotIn("dependency noise", out)
        self.assertTrue(out.splitlines()[-1].startswith("OK: the self-check passed"))
        broken = printing(
            "", "INFO:root:dependency noise\nImportError: no torch here\n", 1
        )
        status, out = self.run_main({"status": broken, "cpu": self.host_program()})
        self.assertEqual(status, 1)
        self.assertIn("dependency noise", out)
        self.assertEqual(
            out.splitlines()[-1],
            "FAIL: importing torch and ExecuTorch's guarded modules fails in a fresh "
            "interpreter (exit status 1): ImportError: no torch here",
        )
