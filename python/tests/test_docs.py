"""The examples in the package docstring and in python/README.md run, and their dumps pass."""

from __future__ import annotations

import os
import re
import textwrap
import unittest

import numpy as np

import ncert_dump

from .support import HAVE_NCERT, REPO, TempDirCase, base_projection, run_ncert


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


class SegmentDocstring(TempDirCase):
    def test_scaled_segments_group_size_is_required_as_documented(self):
        # dump-format.md §4.1: group_size is required for int8 / e4m3 / e5m2 (221 when absent);
        # the docstring says so rather than promising a default the writer does not apply.
        doc = " ".join((ncert_dump.Segment.__doc__ or "").split())
        self.assertNotIn("group_size`` defaults", doc)
        self.assertIn("``group_size`` is required", doc)
        seg = ncert_dump.Segment("int8", 0, 8, values=np.ones((8, 16), np.int8),
                                 scales=np.ones((8, 1), np.float32))
        kw = base_projection()
        kw["weights"] = [seg]
        with ncert_dump.DumpWriter(self.tmp(), engine="t", build="b") as w:
            with self.assertRaises(ncert_dump.DumpFormatError) as cm:
                w.add_projection("q", **kw)
        self.assertEqual((cm.exception.name, cm.exception.message),
                         ("missing-attribute", 'missing attribute "group_size"'))


if __name__ == "__main__":
    unittest.main()
