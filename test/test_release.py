# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The release rule: which sites and behaviours a release has is decided by PEP 440's order."""

import unittest
from unittest import mock

from packaging.version import Version

from executorch_device_guard import _release


class TestRelease(unittest.TestCase):
    def before(self, installed: str | None, release: str) -> bool:
        found = None if installed is None else Version(installed)
        with mock.patch.object(_release, "installed", return_value=found):
            return _release.before(release)

    def test_pre_releases_and_dev_builds_come_before_their_release(self) -> None:
        for installed in ("1.5.0rc1", "1.5.0.dev20260801", "1.5.0a0+cff6f4d", "1.4.1"):
            with self.subTest(installed=installed):
                self.assertTrue(self.before(installed, "1.5.0"))

    def test_the_release_and_later_ones_do_not(self) -> None:
        for installed in ("1.5.0", "1.5.0+cpu", "1.5.0.post1", "1.5.1", "1.10.0"):
            with self.subTest(installed=installed):
                self.assertFalse(self.before(installed, "1.5.0"))

    def test_an_unknown_release_is_not_older(self) -> None:
        self.assertFalse(self.before(None, "1.5.0"))

    def test_the_installed_release_is_read_from_its_metadata(self) -> None:
        with mock.patch.object(_release.metadata, "version", return_value="1.5.0rc2"):
            _release.installed.cache_clear()
            self.addCleanup(_release.installed.cache_clear)
            self.assertEqual(_release.installed(), Version("1.5.0rc2"))
