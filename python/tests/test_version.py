"""One version: python/pyproject.toml carries it, CMake reads it, the package reports it."""

from __future__ import annotations

import os
import re
import tomllib
import unittest

import ncert_dump

from .support import REPO


class OneVersion(unittest.TestCase):
    def test_package_version_is_the_pyproject_version(self):
        with open(os.path.join(REPO, "python", "pyproject.toml"), "rb") as f:
            version = tomllib.load(f)["project"]["version"]
        self.assertRegex(version, r"^\d+\.\d+\.\d+$")
        self.assertEqual(ncert_dump.__version__, version,
                         "ncert_dump.__version__ drifted from python/pyproject.toml")

    def test_cmake_takes_its_version_from_pyproject(self):
        with open(os.path.join(REPO, "CMakeLists.txt")) as f:
            cmake = f.read()
        self.assertIn("python/pyproject.toml", cmake)
        self.assertIsNone(re.search(r"project\(ncert VERSION \d", cmake),
                          "CMakeLists.txt spells out its own version literal")


if __name__ == "__main__":
    unittest.main()
