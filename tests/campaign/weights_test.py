"""Shared weights (docs/dump-format.md §4.5, docs/campaigns.md "Shared weights"): step dumps that
omit their weights and declare weights_xxh3, checked against a weights dump, give the checks of
the same steps written in full, alone (`ncert check --weights`) and in a campaign (a manifest's
"weights"); and every way it can go wrong is refused with its code: a declared hash the carried
weights do not have (222), a hash the weights dump does not hold (223), omitted weights without
a weights dump (223), a weight group that is a link to the weights dump (210 / 215); a weights
dump replaced between a campaign and its --resume is read again."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ncert_dump import DumpWriter, Segment, bf16_from_f32, f32_from_bf16, weights_xxh3  # noqa: E402
from ncert_dump.af4 import dequantize, quantize_affine  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from ncert_testing import needs, strip_timing  # noqa: E402

NCERT = os.environ["NCERT_BINARY"]
K, N_BF16, N_AF4, M = 128, 24, 40, 8


def ncert(*args, cwd):
    r = subprocess.run([NCERT, *args, "--json", "-", "--quiet"], cwd=cwd, capture_output=True, text=True)
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        report = {"unparsed": r.stdout + r.stderr}
    return r.returncode, report


def model_weights():
    """One projection's weights, shared by every step: a bf16 segment and an AF4 affine one."""
    rng = np.random.default_rng(7)
    wq = bf16_from_f32(rng.standard_normal((N_BF16, K)) / 8)
    codes, scales, biases = quantize_affine(rng.standard_normal((N_AF4, K)) / 8, 32)
    segments = [Segment("bf16", 0, N_BF16, values=wq, name="q"),
                Segment("af4", N_BF16, N_BF16 + N_AF4, codes=codes, scales=bf16_from_f32(scales),
                        biases=bf16_from_f32(biases), scale_dtype="bf16", group_size=32, variant="affine",
                        packing="u32-lsb",
                        name="kv")]
    w_af4 = dequantize(codes, scales, biases, group_size=32)
    w = np.concatenate([f32_from_bf16(wq).astype(np.float64), np.asarray(w_af4, np.float64)])
    return segments, w


def write_step(path, step, segments, w, weights_hash=False, omit_weights=False):
    x = bf16_from_f32(np.random.default_rng(100 + step).standard_normal((M, K)))
    y = f32_from_bf16(x).astype(np.float64) @ w.T  # exact products; bf16 rounding is in the bound
    with DumpWriter(path, engine="shared-weights", build=f"step {step}") as dw:
        for name in ("layer0_in", "layer1_in"):  # two projections with the same weights
            dw.add_projection(name, x=x, x_dtype="bf16", weights=segments, accumulator="f32-rn", output_dtype="bf16",
                              selector=np.arange(M, dtype=np.int32), y_unpacked=bf16_from_f32(y),
                              k_walk=None, weights_hash=weights_hash, omit_weights=omit_weights)


class SharedWeights(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ncert-weights-")
        d = cls.dir
        cls.segments, cls.w = model_weights()
        write_step(os.path.join(d, "weights.h5"), 0, cls.segments, cls.w, weights_hash=True)
        for step in range(3):
            write_step(os.path.join(d, f"full-{step}.h5"), step, cls.segments, cls.w)
            write_step(os.path.join(d, f"omit-{step}.h5"), step, cls.segments, cls.w, omit_weights=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_declared_hash_is_the_python_helper_s(self):
        with h5py.File(self.path("omit-1.h5"), "r") as f:
            self.assertNotIn("weight", f["/projections/layer0_in"])
            declared = f["/projections/layer0_in"].attrs["weights_xxh3"]
        self.assertEqual(declared, weights_xxh3(self.segments))
        self.assertRegex(declared, r"^[0-9a-f]{32}$")

    def test_weights_dump_declares_and_passes(self):
        code, report = ncert("check", "weights.h5", cwd=self.dir)
        self.assertEqual((code, report["verdict"]), (0, "PASS"), report)

    def test_omitted_weights_give_the_full_dump_s_checks(self):
        for step in range(3):
            code_full, full = ncert("check", f"full-{step}.h5", cwd=self.dir)
            code_omit, omit = ncert("check", "--weights", "weights.h5", f"omit-{step}.h5", cwd=self.dir)
            self.assertEqual((code_full, code_omit), (0, 0), omit)
            self.assertEqual(strip_timing(full["checks"]), strip_timing(omit["checks"]))
            self.assertEqual(full["verdict"], "PASS")

    def test_campaign_with_weights_dump_equals_full_campaign(self):
        reports = {}
        for kind in ("full", "omit"):
            manifest = {"ncert_campaign": 1, "name": kind,
                        "entries": [{"id": f"step-{s}", "check": f"{kind}-{s}.h5"} for s in range(3)]}
            if kind == "omit":
                manifest["weights"] = "weights.h5"
            path = self.path(f"{kind}.json")
            with open(path, "w") as f:
                json.dump(manifest, f)
            code, report = ncert("campaign", path, "--workers", "2", "--journal", self.path(f"{kind}.journal"),
                                 cwd=self.dir)
            self.assertEqual(code, 0, report)
            reports[kind] = report
        self.assertEqual(strip_timing(reports["full"]["checks"]), strip_timing(reports["omit"]["checks"]))
        # The omitted-weights units (3 steps x 2 projections, one hash) ran in batches, each
        # unit still journaled under its own key; how many per batch depends on when each
        # step's plan finished (at most the pending share over 2 workers). Full dumps carry
        # their own weights and are never batched.
        batches = {}
        for kind in ("full", "omit"):
            with open(self.path(f"{kind}.journal")) as f:
                records = [json.loads(line)["line"] for line in f][1:]
            units = [r for r in records if "#unit:" in r["key"]]
            self.assertEqual(len(units), 6)
            batches[kind] = {}
            for r in units:
                if "batch" in r:
                    batches[kind].setdefault(r["batch"], []).append(r["key"])
        self.assertEqual(batches["full"], {})
        sizes = [len(v) for v in batches["omit"].values()]
        self.assertTrue(sizes and max(sizes) >= 2 and sum(sizes) <= 6, batches["omit"])
        for a, b in zip(reports["full"]["entries"], reports["omit"]["entries"]):
            self.assertEqual(strip_timing(a["report"]["checks"]), strip_timing(b["report"]["checks"]))
            self.assertEqual((a["verdict"], a["exit_code"]), (b["verdict"], b["exit_code"]))

    @needs(shutil.which("mpirun"), "mpirun not installed (openmpi-bin): no MPI campaign to run")
    def test_batches_over_mpi_ranks_give_the_same_checks(self):
        manifest = {"ncert_campaign": 1, "name": "mpi", "weights": "weights.h5",
                    "entries": [{"id": f"step-{s}", "check": f"omit-{s}.h5"} for s in range(3)]}
        full = {"ncert_campaign": 1, "name": "mpi",
                "entries": [{"id": f"step-{s}", "check": f"full-{s}.h5"} for s in range(3)]}
        reports = {}
        for tag, m, launcher in (("mpi-omit", manifest, ["mpirun", "-n", "3", "--oversubscribe"]),
                                 ("mpi-full", full, [])):
            path = self.path(tag + ".json")
            with open(path, "w") as f:
                json.dump(m, f)
            journal = self.path(tag + ".journal")
            if os.path.exists(journal):
                os.remove(journal)
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_rmaps_base_oversubscribe="1")
            r = subprocess.run([*launcher, NCERT, "campaign", path, "--journal", journal, "--threads", "1",
                                "--json", "-", "--quiet"], cwd=self.dir, capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            reports[tag] = json.loads(r.stdout)
        self.assertEqual(strip_timing(reports["mpi-omit"]["checks"]), strip_timing(reports["mpi-full"]["checks"]))
        with open(self.path("mpi-omit.journal")) as f:
            batched = [json.loads(line)["line"] for line in f][1:]
        self.assertTrue(any("batch" in r for r in batched), "no unit ran in a batch over MPI")

    def test_declared_hash_that_the_weights_do_not_have_is_refused(self):
        path = self.path("lying.h5")
        write_step(path, 5, self.segments, self.w, weights_hash=True)
        wrong = "0123456789abcdef0123456789abcdef"
        with h5py.File(path, "r+") as f:
            right = f["/projections/layer1_in"].attrs["weights_xxh3"]
            f["/projections/layer1_in"].attrs["weights_xxh3"] = wrong
        code, report = ncert("check", "lying.h5", cwd=self.dir)
        self.assertEqual((code, report["error"]["code"]), (3, 222), report)
        message = report["error"]["message"]
        for part in ("lying.h5", "/projections/layer1_in", wrong, right):
            self.assertIn(part, message)

    def test_weights_dump_whose_declaration_lies_is_refused(self):
        path = self.path("lying-weights.h5")
        write_step(path, 0, self.segments, self.w, weights_hash=True)
        with h5py.File(path, "r+") as f:  # the weights change, the declaration does not
            values = f["/projections/layer0_in/weight/q/values"]
            values[0, 0] = values[0, 0] ^ 1
            del f["/projections/layer1_in"]
        code, report = ncert("check", "--weights", "lying-weights.h5", "omit-0.h5", cwd=self.dir)
        self.assertEqual((code, report["error"]["code"]), (3, 222), report)
        self.assertIn("lying-weights.h5", report["error"]["message"])

    def test_a_batch_never_lends_one_projection_s_weights_to_another(self):
        """Two projections of a weights dump declare one hash; one carries other weights. Each
        unit must get what it reads alone (refused), whether or not it runs in a batch that
        already read the good one: the same report at 1 and 3 workers."""
        path = self.path("half-lying.h5")
        write_step(path, 0, self.segments, self.w, weights_hash=True)
        with h5py.File(path, "r+") as f:
            values = f["/projections/layer1_in/weight/q/values"]
            values[0, 0] = values[0, 0] ^ 1
        code, alone = ncert("check", "--weights", "half-lying.h5", "omit-0.h5", cwd=self.dir)
        self.assertEqual((code, alone["error"]["code"]), (3, 222), alone)
        self.assertIn("half-lying.h5: /projections/layer1_in", alone["error"]["message"])
        manifest = {"ncert_campaign": 1, "name": "half", "weights": "half-lying.h5",
                    "entries": [{"id": f"step-{s}", "check": f"omit-{s}.h5"} for s in range(3)]}
        with open(self.path("half.json"), "w") as f:
            json.dump(manifest, f)
        reports = []
        for workers in ("1", "3"):
            journal = self.path(f"half-{workers}.journal")
            if os.path.exists(journal):
                os.remove(journal)
            code, report = ncert("campaign", "half.json", "--workers", workers, "--journal", journal, cwd=self.dir)
            self.assertEqual(code, 1, report)
            self.assertEqual([e["exit_code"] for e in report["entries"]], [3, 3, 3])
            reports.append(strip_timing(report))
        self.assertEqual(reports[0], reports[1])

    def test_a_weights_dump_replaced_before_resume_is_read_again(self):
        """Every journal record of a check entry carries its weights dump's hash: a weights dump
        replaced by one with other weights after a finished campaign makes --resume rerun the
        entries that take it (now refused, 222), as a fresh run does; put back, nothing reruns."""
        shutil.copyfile(self.path("weights.h5"), self.path("wd.h5"))
        manifest = {"ncert_campaign": 1, "name": "replaced", "weights": "wd.h5",
                    "entries": [{"id": f"step-{s}", "check": f"omit-{s}.h5"} for s in range(3)]}
        with open(self.path("wd.json"), "w") as f:
            json.dump(manifest, f)
        journal, fresh = self.path("wd.journal"), self.path("wd-fresh.journal")
        for path in (journal, fresh):
            if os.path.exists(path):
                os.remove(path)
        code, first = ncert("campaign", "wd.json", "--workers", "2", "--journal", journal, cwd=self.dir)
        self.assertEqual(code, 0, first)
        with open(journal) as f:
            records = [json.loads(line)["line"] for line in f][1:]
        self.assertTrue(all("wd.h5" in r["inputs"] for r in records), records[0]["inputs"])
        with h5py.File(self.path("wd.h5"), "r+") as f:  # other weights under the same declaration
            values = f["/projections/layer1_in/weight/q/values"]
            values[0, 0] = values[0, 0] ^ 1
        code, resumed = ncert("campaign", "wd.json", "--workers", "2", "--journal", journal, "--resume", cwd=self.dir)
        self.assertEqual(code, 1, resumed)
        self.assertEqual([e["exit_code"] for e in resumed["entries"]], [3, 3, 3])
        self.assertEqual(resumed["entries"][0]["report"]["error"]["code"], 222)
        code, again = ncert("campaign", "wd.json", "--workers", "2", "--journal", fresh, cwd=self.dir)
        self.assertEqual(strip_timing(resumed), strip_timing(again))
        shutil.copyfile(self.path("weights.h5"), self.path("wd.h5"))
        with open(journal) as f:
            lines = len(f.readlines())
        code, back = ncert("campaign", "wd.json", "--workers", "2", "--journal", journal, "--resume", cwd=self.dir)
        self.assertEqual(code, 0, back)
        self.assertEqual(strip_timing(back), strip_timing(first))
        with open(journal) as f:
            self.assertEqual(len(f.readlines()), lines)

    def test_a_step_whose_shape_differs_from_its_weights_is_refused(self):
        path = self.path("wide-step.h5")
        x = bf16_from_f32(np.random.default_rng(5).standard_normal((M, K // 2)))
        w = self.w[:, : K // 2]
        y = f32_from_bf16(x).astype(np.float64) @ w.T
        with DumpWriter(path, engine="shared-weights", build="narrow") as dw:
            dw.add_projection("layer0_in", x=x, x_dtype="bf16",
                              weights=[Segment("bf16", 0, N_BF16 + N_AF4, values=bf16_from_f32(w), name="q")],
                              accumulator="f32-rn", output_dtype="bf16", selector=np.arange(M, dtype=np.int32),
                              y_unpacked=bf16_from_f32(y), k_walk=None, omit_weights=True)
        with h5py.File(path, "r+") as f:  # declare the full-width weights' hash
            f["/projections/layer0_in"].attrs["weights_xxh3"] = weights_xxh3(self.segments)
        code, report = ncert("check", "--weights", "weights.h5", "wide-step.h5", cwd=self.dir)
        self.assertEqual((code, report["error"]["code"]), (3, 222), report)
        self.assertIn("k = 64", report["error"]["message"])
        self.assertIn("k = 128", report["error"]["message"])

    def test_hash_not_in_weights_dump_is_refused(self):
        path = self.path("unknown.h5")
        write_step(path, 1, self.segments, self.w, omit_weights=True)
        other = "fedcba9876543210fedcba9876543210"
        with h5py.File(path, "r+") as f:
            f["/projections/layer0_in"].attrs["weights_xxh3"] = other
        code, report = ncert("check", "--weights", "weights.h5", "unknown.h5", cwd=self.dir)
        self.assertEqual((code, report["error"]["code"]), (3, 223), report)
        self.assertIn(other, report["error"]["message"])
        self.assertIn("weights.h5", report["error"]["message"])

    def test_omitted_weights_without_weights_dump_are_refused(self):
        code, report = ncert("check", "omit-0.h5", cwd=self.dir)
        self.assertEqual((code, report["error"]["code"]), (3, 223), report)
        self.assertIn("--weights", report["error"]["message"])
        # A campaign entry without "weights": one failed entry, the same refusal.
        path = self.path("noweights.json")
        with open(path, "w") as f:
            json.dump({"ncert_campaign": 1, "entries": [{"id": "a", "check": "omit-0.h5"},
                                                        {"id": "b", "check": "full-0.h5"}]}, f)
        code, report = ncert("campaign", path, "--journal", self.path("noweights.journal"), cwd=self.dir)
        self.assertEqual(code, 1, report)
        entries = {e["id"]: e for e in report["entries"]}
        self.assertEqual((entries["a"]["exit_code"], entries["b"]["exit_code"]), (3, 0))
        self.assertEqual(entries["a"]["report"]["error"]["code"], 223)

    def test_inspect_lists_a_step_dump_and_names_its_omitted_weights(self):
        # inspect takes no --weights: a step dump is valid as written (§4.5), and each projection
        # that omits its weights is a note naming the hash and how check supplies them.
        code, report = ncert("inspect", "omit-0.h5", "--no-hashes", cwd=self.dir)
        self.assertEqual(code, 0, report)
        self.assertEqual(report["stats"]["projections"], 2)
        notes = [f for f in report["findings"] if "weights omitted" in f["message"]]
        self.assertEqual(sorted(f["path"] for f in notes), ["/projections/layer0_in", "/projections/layer1_in"])
        self.assertTrue(all(f["severity"] == "note" and "--weights" in f["message"] for f in notes), notes)

    def test_a_step_dump_given_as_its_own_weights_dump_is_named_as_such(self):
        # The weights dump must carry the weights; the refusal says that, not "no weights dump
        # was given" (one was).
        code, report = ncert("check", "omit-0.h5", "--weights", "omit-1.h5", cwd=self.dir)
        self.assertEqual((code, report["error"]["code"]), (3, 223), report)
        message = report["error"]["message"]
        self.assertIn("given as the weights dump", message)
        self.assertNotIn("no weights dump was given", message)

    def test_weight_group_linked_to_weights_dump_is_refused(self):
        for kind, want in (("external", 210), ("soft", 215)):
            path = self.path(f"link-{kind}.h5")
            write_step(path, 2, self.segments, self.w, omit_weights=True)
            with h5py.File(path, "r+") as f:
                if kind == "external":
                    f["/projections/layer0_in/weight"] = h5py.ExternalLink("weights.h5",
                                                                           "/projections/layer0_in/weight")
                else:
                    f.create_group("/elsewhere")
                    f["/projections/layer0_in/weight"] = h5py.SoftLink("/elsewhere")
            code, report = ncert("check", "--weights", "weights.h5", f"link-{kind}.h5", cwd=self.dir)
            self.assertEqual((code, report.get("error", {}).get("code")), (3, want), report)


if __name__ == "__main__":
    unittest.main()
