"""The examples in the package docstring and in python/README.md run, and their dumps pass."""

from __future__ import annotations

import os
import re
import textwrap
import unittest

import ncert_dump

from .support import HAVE_NCERT, REPO, TempDirCase, run_ncert


def docstring_example() -> str:
    doc = ncert_dump.__doc__
    block = doc.split("::\n", 1)[1].split("\nSee ", 1)[0]
    return textwrap.dedent(block)


def readme_example() -> str:
    with open(os.path.join(REPO, "python", "README.md")) as f:
        found = re.search(r"```python\n(.*?)```", f.read(), re.S)
    assert found is not None, "python/README.md has no python example"
    return found.group(1)


class Examples(TempDirCase):
    def run_example(self, code: str):
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            exec(compile(code, "<example>", "exec"), {})
        finally:
            os.chdir(cwd)
        path = os.path.join(self.dir, "dump.h5")
        self.assertTrue(os.path.isfile(path))
        if HAVE_NCERT:
            code_, out, err = run_ncert("check", "--threads", "1", path)
            self.assertEqual(code_, 0, out + err)

    def test_package_docstring_example(self):
        self.run_example(docstring_example())

    def test_readme_example(self):
        self.run_example(readme_example())


if __name__ == "__main__":
    unittest.main()
