"""The README's export snippets are real: the Python one runs and writes a dump that
`ncert check` passes; the C++ one is the code the packaging test compiles against an installed
ncert (tests/packaging/consumer/readme_example.cc, between its markers)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NCERT = os.environ.get("NCERT_BINARY", "")


def blocks(lang):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```" + lang + r"\n(.*?)```", text, re.S)


class ReadmeSnippets(unittest.TestCase):
    def test_python_export_writes_a_dump_that_passes(self):
        (code,) = [b for b in blocks("python") if "DumpWriter" in b]
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
            subprocess.run([sys.executable, "-c", "import numpy as np; np.random.seed(1)\n" + code],
                           cwd=d, env=env, check=True)
            r = subprocess.run([NCERT, "check", "dump.h5", "--quiet"], cwd=d, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("verdict: PASS", r.stdout)

    def test_cpp_export_is_the_code_the_packaging_test_builds(self):
        (code,) = [b for b in blocks("cpp") if "DumpBuilder" in b]
        path = os.path.join(ROOT, "tests", "packaging", "consumer", "readme_example.cc")
        with open(path, encoding="utf-8") as f:
            src = f.read()
        m = re.search(r"// ---- README example begins ----\n(.*?)// ---- README example ends ----\n", src, re.S)
        self.assertIsNotNone(m, "markers missing in " + path)
        self.assertEqual(m.group(1), code)


if __name__ == "__main__":
    unittest.main()
