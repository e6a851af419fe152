"""The JSON report schema (docs/report.schema.json) held against real reports.

Runs the built ncert binary (NCERT_BINARY, else the first argument) on the demo's dumps, on a few
dumps written here with python/ncert_dump (no logits run, an undetermined fork, an output rounding
that leaves the walk without a single value, AF4 weights with two allowed values) and on inputs
ncert refuses (not HDF5, missing, a hard link), for every command, and validates each --json
report. Each run's exit code must agree with its report (PASS 0, FAIL 1, a refused input the exit
code of its error) and with what the case expects. Negative tests prove the schema is not
vacuous: a report with a bad verdict, kind or error pairing, or a skip where none can be, is
rejected. Scratch files go to NCERT_TEST_TMP (CTest sets it) or a temporary directory.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
from jsonschema import Draft202012Validator

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
from ncert_dump import DumpWriter, Segment, bf16_from_f32, dequantize, f32_from_bf16, quantize_affine  # noqa: E402

SCHEMA_PATH = os.path.join(REPO, "docs", "report.schema.json")
ERROR_CODES_PATH = os.path.join(REPO, "docs", "error-codes.md")
NCERT = os.environ.get("NCERT_BINARY") or (sys.argv.pop(1) if len(sys.argv) > 1 else "")


def expected_exit(report):
    """The exit code a report implies (docs/cli.md): 0 PASS, 1 FAIL, else its error's band."""
    if "error" not in report:
        return 0 if report["verdict"] == "PASS" else 1
    code = report["error"]["code"]
    if code == 103:
        return 3
    if 100 <= code < 200:
        return 2
    if code >= 900:
        return 4
    return 3


def write_extra_dumps(d):
    """Dumps the demo does not write, each reaching a verdict the demo's dumps do not."""
    rng = np.random.default_rng(7)
    paths = {}
    # AF4 with f32 scales and dequant_op = either: weights with two allowed values (the walk is a
    # SKIP that says how many); no logits run (witness fails its vacuity check).
    m, k, n = 4, 128, 16
    x = bf16_from_f32(rng.standard_normal((m, k)))
    codes, scales, biases = quantize_affine(rng.standard_normal((n, k)) / 8, 64, scale_dtype="f32")
    w = dequantize(codes, scales, biases, group_size=64, dequant="f32", dequant_op="fma").astype(np.float64)
    y = (f32_from_bf16(x).astype(np.float64) @ w.T).astype(np.float32)
    paths["ambiguous"] = os.path.join(d, "ambiguous.h5")
    with DumpWriter(paths["ambiguous"], engine="schema-test", build="af4-either", overwrite=True) as dw:
        segment = Segment("af4", 0, n, codes=codes, scales=scales, biases=biases, group_size=64,
                          variant="affine", packing="u32-lsb", dequant="f32", dequant_op="either",
                          scale_dtype="f32")
        dw.add_projection("p", x=x, x_dtype="bf16", weights=[segment],
                          accumulator="f32-rn", output_dtype="f32", selector=np.arange(m, dtype=np.int32),
                          y_unpacked=y, k_walk="seq-fma")
    # Activations quantized per token to int8 (dump format v2, written member by member): the
    # quantize check passes, and fails once one row's declared scale is not the one used.
    xf = f32_from_bf16(x).astype(np.float64)
    scales = (np.abs(xf).max(axis=1, keepdims=True) / 127).astype(np.float32)
    q = np.clip(np.rint(xf / scales), -127, 127).astype(np.int8)
    xq = q.astype(np.float64) * scales.astype(np.float64)
    wf = rng.standard_normal((n, k)).astype(np.float32) / 8
    for name, edit in (("quantized", None), ("quantized-bad", 1.5)):
        paths[name] = os.path.join(d, name + ".h5")
        with h5py.File(paths[name], "w") as f:
            f.attrs.update({"ncert_schema": "ncert-dump", "ncert_schema_version": 2, "engine": "schema-test",
                            "build": name})
            g = f.create_group("projections/p")
            g.attrs.update({"op": "linear", "k": k, "n": n, "accumulator": "f32-rn", "output_dtype": "f32",
                            "epilogue": "none", "x_quant": "int8"})
            g["x"] = xf.astype(np.float32)
            g["x_quantized"] = q
            g["x_scales"] = scales * np.float32(edit) if edit else scales
            g["selector"] = np.arange(m, dtype=np.int32)
            g["y_unpacked"] = (xq @ wf.astype(np.float64).T).astype(np.float32)
            seg = g.create_group("weight/w")
            seg.attrs.update({"format": "f32", "row_begin": 0, "row_end": n})
            seg["values"] = wf
    # Two rows' activations scaled by 1.01 and 1.02 in the kernel (f32 weights and outputs, 16
    # rows): signature fails and its fit names both rows (kind "rows").
    m2, k2, n2 = 16, 256, 64
    x2 = rng.standard_normal((m2, k2)).astype(np.float32)
    w2 = (rng.standard_normal((n2, k2)) / 16).astype(np.float32)
    used = x2.astype(np.float64)
    used[3] *= 1.01
    used[10] *= 1.02
    paths["two-rows"] = os.path.join(d, "two-rows.h5")
    with DumpWriter(paths["two-rows"], engine="schema-test", build="two-rows", overwrite=True) as dw:
        dw.add_projection("p", x=x2, x_dtype="f32", weights=[Segment("f32", 0, n2, values=w2)],
                          accumulator="f32-rn", output_dtype="f32", selector=np.arange(m2, dtype=np.int32),
                          y_unpacked=(used @ w2.astype(np.float64).T).astype(np.float32))
    # Two runs that fork at their first row: no envelope, so the fork is undetermined.
    logits = rng.standard_normal((4, 64)).astype(np.float32)
    logits[0, 3], logits[0, 7] = 5.0, 4.999
    other = logits.copy()
    other[0, 7] = 5.001
    for name, rows in (("fork0-a", logits), ("fork0-b", other)):
        paths[name] = os.path.join(d, name + ".h5")
        with DumpWriter(paths[name], engine="schema-test", build=name, overwrite=True) as dw:
            dw.add_logits_run("greedy", tokens=rows.argmax(axis=1).astype(np.int32), logits=rows, prompt="p")
    # fork0-a's run under another prompt: no row is matched (the agreement means are null).
    paths["other-prompt"] = os.path.join(d, "other-prompt.h5")
    with DumpWriter(paths["other-prompt"], engine="schema-test", build="other-prompt", overwrite=True) as dw:
        dw.add_logits_run("greedy", tokens=logits.argmax(axis=1).astype(np.int32), logits=logits, prompt="q")
    # Two runs whose row 1 holds a NaN on both sides: its KL is NaN, which the kl_ab percentiles
    # must render as text, not as null.
    clean = rng.standard_normal((4, 64)).astype(np.float32)
    tokens = clean.argmax(axis=1).astype(np.int32)
    shifted = clean.copy()
    shifted[:, 0] += 0.01
    for name, rows in (("nan-a", clean.copy()), ("nan-b", shifted)):
        rows[1, 9] = np.nan
        paths[name] = os.path.join(d, name + ".h5")
        with DumpWriter(paths[name], engine="schema-test", build=name, overwrite=True) as dw:
            dw.add_logits_run("greedy", tokens=tokens, logits=rows, prompt="p")
    return paths


def copy_with(src, dst, edit):
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        edit(f)
    return dst


class ReportSchema(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not NCERT or not os.access(NCERT, os.X_OK):
            raise RuntimeError("NCERT_BINARY (or the first argument) must name the built ncert binary, got "
                               + repr(NCERT))
        with open(SCHEMA_PATH) as f:
            cls.schema = json.load(f)
        Draft202012Validator.check_schema(cls.schema)
        cls.validator = Draft202012Validator(cls.schema)
        base = os.environ.get("NCERT_TEST_TMP") or tempfile.mkdtemp(prefix="ncert-report-schema-")
        cls.dir = os.path.join(base, "report-schema")
        shutil.rmtree(cls.dir, ignore_errors=True)
        os.makedirs(cls.dir)
        cls.reports = {}  # case name -> report
        cls.demo = os.path.join(cls.dir, "demo")
        cls.run_case("demo", ["demo", "--dir", cls.demo], 0)
        cls.extra = write_extra_dumps(cls.dir)

    @classmethod
    def run_case(cls, name, args, want_exit):
        """Runs ncert with --json, checks the exit code against `want_exit` and the report, keeps
        the report for validation. `want_exit` 2 with no report written is accepted for usage
        errors the CLI reports on stderr."""
        out = os.path.join(cls.dir, name + ".json")
        if os.path.exists(out):
            os.remove(out)
        env = dict(os.environ, OMP_NUM_THREADS="2")
        p = subprocess.run([NCERT] + args + ["--json", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, timeout=600)
        detail = f"{name}: ncert {' '.join(args)}\nstdout:\n{p.stdout.decode()[-2000:]}\nstderr:\n{p.stderr.decode()}"
        if p.returncode != want_exit:
            raise AssertionError(f"exit {p.returncode}, expected {want_exit}\n{detail}")
        if not os.path.exists(out):
            if want_exit == 2:
                return None
            raise AssertionError("no JSON report written\n" + detail)
        with open(out) as f:
            report = json.load(f)
        if expected_exit(report) != p.returncode:
            raise AssertionError(f"exit {p.returncode} disagrees with the report (verdict {report['verdict']}, "
                                 f"error {report.get('error')})\n{detail}")
        cls.reports[name] = report
        return report

    def validate(self, name, report):
        errors = sorted(self.validator.iter_errors(report), key=lambda e: list(e.absolute_path))
        msg = "\n".join(f"  at {list(e.absolute_path)}: {e.message[:400]}" for e in errors[:10])
        self.assertFalse(errors, f"{name}: the report does not match docs/report.schema.json:\n{msg}")

    # ---- positive: every command, every outcome ------------------------------------------------

    def test_a_fit_of_two_rows_names_both(self):
        report = self.run_case("check-two-rows", ["check", self.extra["two-rows"]], 1)
        self.validate("check-two-rows", report)
        checks = report["checks"]
        signature = next(c for c in checks if c["id"] == "projections/p/signature")
        self.assertEqual(signature["verdict"], "FAIL")
        fit = signature["stats"]["fit"]
        self.assertEqual(fit["kind"], "rows", signature["reason"])
        self.assertEqual([r["row"] for r in fit["rows"]], [10, 3])
        self.assertEqual([r["slot"] for r in fit["rows"]], [-1, -1])
        self.assertAlmostEqual(fit["rows"][0]["value"], 1.02, places=4)
        self.assertAlmostEqual(fit["rows"][1]["value"], 1.01, places=4)
        self.assertIn("y_unpacked rows 10 and 3: the residuals lie in those 2 rows alone", signature["reason"])

    def test_every_command_writes_reports_the_schema_accepts(self):
        d, x = self.demo, self.extra
        demo = lambda f: os.path.join(d, f)  # noqa: E731
        garbage = os.path.join(self.dir, "garbage.h5")
        with open(garbage, "w") as f:
            f.write("not hdf5")
        missing = os.path.join(self.dir, "missing.h5")
        aliased = copy_with(demo("good.h5"), os.path.join(self.dir, "aliased.h5"), self.hard_link_outputs)
        rounding_any = copy_with(demo("good.h5"), os.path.join(self.dir, "rounding-any.h5"), self.rounding_any)
        witness_file = os.path.join(self.dir, "witness.h5")
        # Skip policies (docs/cli.md "Skip policy"): one expecting every skip of the good dump
        # (expected SKIPs carry policy_rule), one declaring walk not applicable, one expecting none.
        policy_all = os.path.join(self.dir, "policy-all.json")
        with open(policy_all, "w") as f:
            json.dump({"ncert_skip_policy": 1, "expected_skips": [{"reason": " "}]}, f)
        policy_na = os.path.join(self.dir, "policy-na.json")
        with open(policy_na, "w") as f:
            json.dump({"ncert_skip_policy": 1, "not_applicable": [{"kind": "walk", "why": "no K walk"}],
                       "expected_skips": [{"reason": " "}]}, f)
        policy_none = os.path.join(self.dir, "policy-none.json")
        with open(policy_none, "w") as f:
            json.dump({"ncert_skip_policy": 1, "expected_skips": [{"kind": "guard"}]}, f)
        cases = [
            ("check-good-policy", ["check", demo("good.h5"), "--policy", policy_all], 0),
            ("check-good-policy-na", ["check", demo("good.h5"), "--policy", policy_na], 0),
            ("check-good-policy-none", ["check", demo("good.h5"), "--policy", policy_none], 1),
            # check: a pass with skips, every planted fault, --require, refusals.
            ("check-good", ["check", demo("good.h5")], 0),
            ("check-good-require-all", ["check", demo("good.h5"), "--require", "all"], 1),
            ("check-good-strict-only", ["check", demo("good.h5"), "--strict", "--only", "attn"], 0),
            ("check-rounding-any", ["check", rounding_any], 0),
            ("check-ambiguous", ["check", x["ambiguous"]], 0),
            ("check-quantized", ["check", x["quantized"]], 0),
            ("check-quantized-bad", ["check", x["quantized-bad"]], 1),
            ("check-logits-only", ["check", demo("logits-a.h5")], 0),
            ("check-garbage", ["check", garbage], 3),
            ("check-missing", ["check", missing], 3),
            ("check-aliased", ["check", aliased], 3),
            ("check-only-nothing", ["check", demo("good.h5"), "--only", "no-such-name"], 2),
            # compare: pass, fail with counts, tensors, refusals.
            ("compare-bitwise", ["compare", demo("logits-a.h5"), demo("logits-b.h5")], 1),
            ("compare-kl", ["compare", demo("logits-a.h5"), demo("logits-b.h5"), "--policy", "kl:1e-5"], 0),
            ("compare-ulp", ["compare", demo("logits-a.h5"), demo("logits-b.h5"), "--policy", "ulp:2"], 1),
            ("compare-top1", ["compare", demo("logits-a.h5"), demo("logits-b.h5"), "--policy", "top1"], 0),
            ("compare-tensors", ["compare", demo("good.h5"), demo("nan-output.h5")], 0),
            ("compare-vocab", ["compare", demo("good.h5"), demo("logits-a.h5")], 3),
            ("compare-nan-rows", ["compare", x["nan-a"], x["nan-b"], "--policy", "top1"], 0),
            ("compare-no-matched-row", ["compare", x["fork0-a"], x["other-prompt"]], 1),
            ("compare-garbage", ["compare", garbage, demo("good.h5")], 3),
            # witness and witness --verify.
            ("witness-good", ["witness", demo("good.h5"), "--out", witness_file, "--force"], 0),
            ("witness-unbounded", ["witness", demo("fork-near-tie-a.h5")], 0),
            ("witness-require", ["witness", demo("fork-near-tie-a.h5"), "--require", "witness"], 1),
            ("witness-logit-error", ["witness", demo("fork-near-tie-a.h5"), "--logit-error", "1e-6"], 0),
            ("witness-no-runs", ["witness", x["ambiguous"]], 1),
            ("witness-garbage", ["witness", garbage], 3),
            ("verify", ["witness", "--verify", witness_file, demo("good.h5")], 0),
            ("verify-not-a-witness-file", ["witness", "--verify", demo("good.h5"), demo("good.h5")], 3),
            # forks: every class, no fork, --require, refusals.
            ("forks-near-tie", ["forks", demo("fork-near-tie-a.h5"), demo("fork-near-tie-b.h5")], 0),
            ("forks-unexplained", ["forks", demo("fork-unexplained-a.h5"), demo("fork-unexplained-b.h5")], 1),
            ("forks-invalid", ["forks", demo("fork-invalid-a.h5"), demo("fork-invalid-b.h5")], 1),
            ("forks-identical", ["forks", demo("fork-near-tie-a.h5"), demo("fork-near-tie-b.h5"),
                                 "--require-identical"], 1),
            ("forks-none", ["forks", demo("fork-near-tie-a.h5"), demo("fork-near-tie-a.h5")], 0),
            ("forks-undetermined", ["forks", x["fork0-a"], x["fork0-b"]], 0),
            ("forks-undetermined-required", ["forks", x["fork0-a"], x["fork0-b"], "--require", "fork"], 1),
            ("forks-logit-error", ["forks", x["fork0-a"], x["fork0-b"], "--logit-error", "0.01"], 0),
            ("forks-garbage", ["forks", demo("fork-near-tie-a.h5"), garbage], 3),
            # sweep, inspect.
            ("sweep", ["sweep"], 0),
            ("sweep-case", ["sweep", "--filter", "fmt=af4c,K=32"], 0),
            ("sweep-filter-nothing", ["sweep", "--filter", "no-such-case"], 2),
            ("compare-pair-nothing", ["compare", demo("logits-a.h5"), demo("logits-b.h5"), "--pair", "nope:nope"], 2),
            ("demo-exists", ["demo", "--dir", d], 2),
            ("inspect-good", ["inspect", demo("good.h5")], 0),
            ("inspect-no-hashes", ["inspect", demo("logits-a.h5"), "--no-hashes"], 0),
            ("inspect-garbage", ["inspect", garbage], 3),
            # campaign: entries of every command, one refused; a manifest that cannot be read.
            ("campaign", ["campaign", self.write_manifest(), "--journal", os.path.join(self.dir, "c.journal")], 1),
            ("campaign-missing", ["campaign", os.path.join(self.dir, "no-manifest.json")], 3),
        ]
        for name, args, want in cases:
            with self.subTest(case=name):
                self.run_case(name, args, want)
        # The witness file's JSON summary is a report too.
        with open(witness_file + ".json") as f:
            self.reports["witness-summary"] = json.load(f)
        for name, report in sorted(self.reports.items()):
            with self.subTest(report=name):
                self.validate(name, report)
        self.assert_reports_exercise_the_schema()

    def assert_reports_exercise_the_schema(self):
        """The reports above reach every command, check kind and verdict (else a broken schema
        rule could go unexercised)."""
        commands, kinds, verdicts, classes, errors = set(), set(), set(), set(), set()
        for r in self.reports.values():
            commands.add(r["command"])
            errors.update([r["error"]["name"]] if "error" in r else [])
            for c in r["checks"]:
                kinds.add(c["kind"])
                verdicts.add(c["verdict"])
                if c["kind"] == "fork" and "class" in c["stats"]:
                    classes.add(c["stats"]["class"])
        self.assertEqual(commands, {"check", "compare", "witness", "forks", "sweep", "inspect", "demo", "campaign"})
        self.assertEqual(kinds, set(self.schema["$defs"]["kind"]["enum"]))
        self.assertEqual(verdicts, {"PASS", "FAIL", "SKIP", "N/A"})
        expected = [c for c in self.reports["check-good-policy"]["checks"] if c["verdict"] == "SKIP"]
        self.assertTrue(expected and all(c["policy_rule"]["rule"].startswith("expected_skips[0]") for c in expected))
        na = [c for c in self.reports["check-good-policy-na"]["checks"] if "policy_rule" in c and c["verdict"] == "N/A"]
        self.assertTrue(na and all(c["kind"] == "walk" for c in na))
        self.assertTrue(any(c["reason"].startswith("skipped, and no rule of policy")
                            for c in self.reports["check-good-policy-none"]["checks"]))
        self.assertEqual(classes, {"near-tie", "unexplained", "invalid", "undetermined", "none"})
        self.assertTrue({"not-hdf5", "file-not-found", "object-aliased", "vocab-mismatch",
                         "witness-file-invalid"} <= errors, errors)
        check = self.reports["check-good"]
        self.assertTrue(any(c["verdict"] == "SKIP" for c in check["checks"]))
        self.assertEqual(self.reports["check-aliased"]["error"]["code"], 216)
        walk = [c for c in self.reports["check-rounding-any"]["checks"] if c["id"] == "projections/attn_qkv/walk"]
        self.assertEqual(walk[0]["verdict"], "SKIP")

    def write_manifest(self):
        d = self.demo
        path = os.path.join(self.dir, "manifest-schema.json")
        journal = os.path.join(self.dir, "c.journal")
        if os.path.exists(journal):
            os.remove(journal)
        entries = [{"id": "good", "check": os.path.join(d, "good.h5")},
                   {"id": "nan", "check": os.path.join(d, "nan-output.h5")},
                   {"id": "garbage", "check": os.path.join(self.dir, "garbage.h5")},
                   {"id": "logits", "compare": [os.path.join(d, "logits-a.h5"), os.path.join(d, "logits-b.h5")],
                    "policy": "kl:1e-5"},
                   {"id": "forks",
                    "forks": [os.path.join(d, "fork-near-tie-a.h5"), os.path.join(d, "fork-near-tie-b.h5")]},
                   {"id": "witness", "witness": os.path.join(d, "good.h5")}]
        with open(path, "w") as f:
            json.dump({"ncert_campaign": 1, "name": "schema", "entries": entries}, f)
        return path

    @staticmethod
    def hard_link_outputs(f):
        g = f["/projections/attn_qkv"]
        del g["y_packed"]
        g["y_packed"] = g["y_unpacked"]  # a second name for the same object

    @staticmethod
    def rounding_any(f):
        f["/projections/attn_qkv"].attrs["output_rounding"] = "any"

    # ---- negative: the schema rejects what ncert never writes ----------------------------------

    def test_schema_rejects_reports_ncert_never_writes(self):
        if "check-good" not in self.reports:
            self.run_case("check-good", ["check", os.path.join(self.demo, "good.h5")], 0)
        good = self.reports["check-good"]
        self.validate("check-good", good)

        def mutated(edit):
            r = copy.deepcopy(good)
            edit(r)
            return r

        def first(r, kind):
            return next(c for c in r["checks"] if c["kind"] == kind)

        bad = {
            "a top-level verdict that is not PASS or FAIL": lambda r: r.update(verdict="MAYBE"),
            "a top-level SKIP": lambda r: r.update(verdict="SKIP"),
            "a check verdict outside PASS/FAIL/SKIP": lambda r: r["checks"][0].update(verdict="SKIPPED"),
            "an unknown check kind": lambda r: r["checks"][0].update(kind="nonsense"),
            "a PASS report with a failing check": lambda r: first(r, "bound").update(verdict="FAIL"),
            "a SKIP in check that carries stats": lambda r: first(r, "bound").update(verdict="SKIP"),
            "an id that disagrees with its kind": lambda r: first(r, "walk").update(id="projections/attn_qkv/bound"),
            "a missing stats member": lambda r: r.pop("stats"),
            "an unknown top-level member": lambda r: r.update(surprise=1),
            "a coverage cell that is not a verdict": lambda r: r["coverage"][0]["checks"].update(schema="OK"),
            "a bias output with a negative limit": lambda r: next(iter(first(r, "bias")["stats"]["outputs"].values()))
            .update(limit_ulps=-1.0),
            "an error code paired with another code's name": lambda r: r.update(
                verdict="FAIL", error={"code": 201, "name": "hdf5", "message": "x"}),
            "an error code that does not exist": lambda r: r.update(
                verdict="FAIL", error={"code": 299, "name": "not-hdf5", "message": "x"}),
            "an input hash that is not 32 hex digits": lambda r: r["inputs"][0].update(xxh3_128="xyz"),
        }
        for what, edit in bad.items():
            with self.subTest(mutation=what):
                self.assertTrue(list(self.validator.iter_errors(mutated(edit))), f"accepted: {what}")

        forks = self.reports.get("forks-near-tie") or self.run_case(
            "forks-near-tie", ["forks", os.path.join(self.demo, "fork-near-tie-a.h5"),
                               os.path.join(self.demo, "fork-near-tie-b.h5")], 0)
        self.validate("forks-near-tie", forks)
        skipped = copy.deepcopy(forks)
        skipped["checks"][0]["verdict"] = "SKIP"  # a near-tie is never a skip; only undetermined is
        self.assertTrue(list(self.validator.iter_errors(skipped)))
        passed = copy.deepcopy(forks)
        passed["checks"][0]["stats"]["class"] = "unexplained"  # an unexplained fork never passes
        self.assertTrue(list(self.validator.iter_errors(passed)))

    def test_error_pairs_are_the_documented_error_codes(self):
        documented = set()
        with open(ERROR_CODES_PATH) as f:
            for line in f:
                m = re.match(r"^\| (\d{3}) \| `([a-z0-9-]+)` \|", line)
                if m:
                    documented.add((int(m.group(1)), m.group(2)))
        pinned = {(p["properties"]["code"]["const"], p["properties"]["name"]["const"])
                  for p in self.schema["$defs"]["error"]["oneOf"]}
        self.assertGreater(len(documented), 50)
        self.assertEqual(pinned, documented, "docs/report.schema.json and docs/error-codes.md disagree")


if __name__ == "__main__":
    unittest.main()
