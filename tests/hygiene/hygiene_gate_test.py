"""tools/hygiene, each check in both directions: a small clean tree passes, and a planted
violation (a misformatted line, an upward include, a 130-line function, a flake8 error, a type
error in a call) is reported as file:line and fails the check. Each case copies only what its
check reads into a temporary tree, so clang-tidy and mypy see one small file each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HYGIENE = os.path.join(REPO, "tools", "hygiene")

CLEAN_CC = """// A small, well-formed source.
#include <vector>

namespace demo {

int total(const std::vector<int>& values) {
  int sum = 0;
  for (int v : values) sum += v;
  return sum;
}

}  // namespace demo
"""


class HygieneGate(unittest.TestCase):
    def setUp(self):
        self.tree = tempfile.mkdtemp(prefix="ncert_hygiene_")
        self.build = os.path.join(self.tree, "build")
        os.makedirs(self.build)

    def tearDown(self):
        shutil.rmtree(self.tree, ignore_errors=True)

    def copy(self, *paths: str) -> None:
        for p in paths:
            src, dst = os.path.join(REPO, p), os.path.join(self.tree, p)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            else:
                shutil.copy(src, dst)

    def write(self, path: str, text: str) -> None:
        full = os.path.join(self.tree, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def gate(self, check: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", HYGIENE, self.build, "--root", self.tree, "--only", check, *extra],
                              capture_output=True, text=True, timeout=300)

    def assert_passes(self, check: str, *extra: str) -> None:
        r = self.gate(check, *extra)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"hygiene: {check} ok", r.stdout)

    def assert_fails(self, check: str, where: str, *extra: str) -> str:
        r = self.gate(check, *extra)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"hygiene: {check} FAILED", r.stdout)
        self.assertIn(where, r.stdout, "the finding must name the file and line")
        return r.stdout

    # ---- clang-format ----------------------------------------------------------------------------

    def test_format(self):
        self.copy(".clang-format")
        self.write("reference/clean.cc", CLEAN_CC)
        self.assert_passes("format")
        self.write("reference/clean.cc", CLEAN_CC.replace("  int sum = 0;", "  int   sum=0;"))
        out = self.assert_fails("format", "reference/clean.cc:7:")
        self.assertIn("clang-format", out)

    # ---- include layering ------------------------------------------------------------------------

    def test_layering(self):
        self.copy("certify", "reference", "packing", "fixtures")
        self.assert_passes("layering")
        # reference/ is the bottom room: an include of certify/ points up.
        with open(os.path.join(self.tree, "reference", "dtype.cc")) as f:
            text = f.read()
        self.write("reference/dtype.cc", '#include "certify/report/report.h"\n' + text)
        out = self.assert_fails("layering", "reference/dtype.cc:1:")
        self.assertIn('reference includes "certify/report/report.h"', out)
        self.assertIn("reference/README.md", out)  # the rule it breaks

    def test_layering_refuses_a_rule_that_points_up(self):
        self.copy("certify", "reference", "packing", "fixtures")
        readme = os.path.join(self.tree, "certify", "README.md")
        with open(readme) as f:
            text = f.read()
        self.write("certify/README.md", text.replace("| `reference/` (status.h) |", "| commands |", 1))
        r = self.gate("layering")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("not above it in the table", r.stdout)

    # ---- clang-tidy ------------------------------------------------------------------------------

    def tidy(self, source: str) -> subprocess.CompletedProcess:
        self.copy(".clang-tidy")
        path = os.path.join(self.tree, "reference", "planted.cc")
        self.write("reference/planted.cc", source)
        with open(os.path.join(self.build, "compile_commands.json"), "w") as f:
            json.dump([{"directory": self.build, "file": path,
                        "command": f"c++ -std=c++20 -I{self.tree} -c {path} -o planted.o"}], f)
        return self.gate("tidy")

    def test_tidy(self):
        r = self.tidy(CLEAN_CC)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # A 130-line function: above the guideline's 120 lines (readability-function-size).
        body = "".join(f"  x = x * 3 + {i};\n" for i in range(128))
        r = self.tidy(f"int long_function(int x) {{\n{body}  return x;\n}}\n")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("reference/planted.cc:1:", r.stdout)
        self.assertIn("readability-function-size", r.stdout)

    # ---- flake8 and mypy -------------------------------------------------------------------------

    def python_tree(self, module: str) -> None:
        self.copy(".flake8", "python/pyproject.toml")
        self.write("python/ncert_dump/__init__.py", '"""A stand-in package."""\n')
        self.write("python/ncert_dump/planted.py", module)
        self.write("python/tests/__init__.py", "")

    CLEAN_PY = '"""A module."""\n\n\ndef twice(n: int) -> int:\n    return 2 * n\n\n\nFOUR = twice(2)\n'

    def test_python_clean(self):
        self.python_tree(self.CLEAN_PY)
        self.assert_passes("python")

    def test_flake8_error(self):
        self.python_tree("import os\n" + self.CLEAN_PY)  # an unused import
        out = self.assert_fails("python", "python/ncert_dump/planted.py:1:")
        self.assertIn("F401", out)

    def test_type_error_in_a_call(self):
        self.python_tree(self.CLEAN_PY.replace("twice(2)", 'twice("2")'))
        out = self.assert_fails("python", "ncert_dump/planted.py:8:")
        self.assertIn('incompatible type "str"; expected "int"', out)


if __name__ == "__main__":
    sys.exit(unittest.main())
