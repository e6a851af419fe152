"""The README's export snippets are real: the Python one runs and writes a dump that
`ncert check` passes; the C++ one is the code the packaging test compiles against an installed
ncert (tests/packaging/consumer/readme_example.cc, between its markers). docs/ci.md's CI recipe
is real too: its command block runs as written over a campaign of the demo's dumps (exit 0, then
1 with a planted fault, all three reports written, reruns without cleanup), and both CI files run
that same command with flags `ncert campaign` has."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

import yaml  # Debian's python3-yaml (python3-torch and clang-tidy-14 of tools/install-deps need it)

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


def ci_doc():
    with open(os.path.join(ROOT, "docs", "ci.md"), encoding="utf-8") as f:
        return f.read()


def one_line(command):
    """A shell command as one line: backslash-newlines joined, runs of blanks as one space."""
    return " ".join(command.replace("\\\n", " ").split())


class CiRecipe(unittest.TestCase):
    """docs/ci.md: the command block, and the GitHub Actions and GitLab CI files around it."""

    @classmethod
    def setUpClass(cls):
        m = re.search(r"<!-- BEGIN ci-command[^>]*-->\n```sh\n(.*?)```\n<!-- END ci-command -->", ci_doc(), re.S)
        cls.block = m.group(1) if m else None
        cls.campaign_line = None
        if cls.block:
            lines = [one_line(c) for c in re.split(r"(?<!\\)\n", cls.block) if c.strip()]
            cls.campaign_line = next((c for c in lines if c.startswith("ncert campaign ")), None)

    def setUp(self):
        self.assertIsNotNone(self.block, "docs/ci.md: the ci-command block is missing")
        self.assertIsNotNone(self.campaign_line, "docs/ci.md: the ci-command block runs no ncert campaign")

    def run_block(self, cwd):
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(NCERT)) + os.pathsep + os.environ["PATH"])
        return subprocess.run(["bash", "-e", "-c", self.block], cwd=cwd, env=env, capture_output=True, text=True)

    def reports(self, cwd):
        out = os.path.join(cwd, "ncert-report")
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
            page = f.read()
        junit = ET.parse(os.path.join(out, "junit.xml")).getroot()
        return report, page, junit

    def test_the_command_block_runs_as_written(self):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([NCERT, "demo", "--dir", "dumps", "--quiet"], cwd=d, check=True)
            os.mkdir(os.path.join(d, "ci"))
            good = json.loads(subprocess.run([NCERT, "check", "dumps/good.h5", "--json", "-"], cwd=d,
                                             capture_output=True, text=True).stdout)
            skipped_kinds = sorted({c["kind"] for c in good["checks"] if c["verdict"] == "SKIP"})
            self.assertTrue(skipped_kinds, "the good dump has no skip for the policy to expect")
            with open(os.path.join(d, "ci", "skip-policy.json"), "w") as f:
                json.dump({"ncert_skip_policy": 1,
                           "expected_skips": [{"kind": k, "why": "the demo engine"} for k in skipped_kinds]}, f)
            entries = [{"id": "good", "check": "../dumps/good.h5"},
                       {"id": "witness", "witness": "../dumps/good.h5"},
                       {"id": "fork", "forks": ["../dumps/fork-near-tie-a.h5", "../dumps/fork-near-tie-b.h5"]}]

            def manifest(extra):
                with open(os.path.join(d, "ci", "campaign.json"), "w") as f:
                    json.dump({"ncert_campaign": 1, "name": "ci", "entries": entries + extra}, f)

            manifest([])
            for attempt in (1, 2):  # the second run in the same folder needs no cleanup
                r = self.run_block(d)
                self.assertEqual(r.returncode, 0, f"run {attempt}: {r.stdout}{r.stderr}")
                report, page, junit = self.reports(d)
                self.assertEqual(report["verdict"], "PASS")
                self.assertEqual([e["id"] for e in report["entries"]], ["good", "witness", "fork"])
                self.assertIn('data-verdict="PASS"', page)
                skips = {s.get("type") for s in junit.iter("skipped")}
                self.assertIn("expected", skips)  # the policy's, marked for the CI server
                self.assertNotIn("unexpected", skips)
                self.assertTrue(os.path.isdir(os.path.join(d, "ncert-state")))
                self.assertFalse([n for n in os.listdir(os.path.join(d, "ncert-report")) if "journal" in n])

            manifest([{"id": "af4", "check": "../dumps/af4-scale-x2.h5"}])
            r = self.run_block(d)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            report, page, junit = self.reports(d)
            self.assertEqual(report["verdict"], "FAIL")
            self.assertEqual([e["verdict"] for e in report["entries"]], ["PASS", "PASS", "PASS", "FAIL"])
            self.assertGreater(len(list(junit.iter("failure"))), 0)

    def test_both_ci_files_run_the_same_command_with_flags_that_exist(self):
        files = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", ci_doc(), re.S)]
        self.assertEqual(len(files), 2)
        github, gitlab = files
        github_runs = [one_line(step.get("run", "")) for step in github["jobs"]["certify"]["steps"]]
        gitlab_runs = [one_line(line) for line in gitlab["ncert"]["script"]]
        for name, runs in (("GitHub Actions", github_runs), ("GitLab CI", gitlab_runs)):
            with self.subTest(ci=name):
                self.assertTrue(any(self.campaign_line in r for r in runs), runs)
                self.assertTrue(any("mkdir -p ncert-report" in r for r in runs), runs)
        self.assertTrue(any("if" in step and "upload-artifact" in step.get("uses", "")
                            for step in github["jobs"]["certify"]["steps"]))
        self.assertEqual(gitlab["ncert"]["artifacts"]["when"], "always")
        self.assertEqual(gitlab["ncert"]["artifacts"]["reports"]["junit"], "ncert-report/junit.xml")
        usage = subprocess.run([NCERT, "campaign", "--help"], capture_output=True, text=True).stdout
        for flag in re.findall(r"(?<!\S)(--[a-z-]+)", self.campaign_line):
            self.assertRegex(usage, r"(?<![a-z-])" + re.escape(flag) + r"(?![a-z-])", flag)


if __name__ == "__main__":
    unittest.main()
