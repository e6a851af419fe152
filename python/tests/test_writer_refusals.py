"""The writer refuses, one test per rule, with the reader's error name, path and wording; a
refused call writes nothing and leaves the dump usable."""

from __future__ import annotations

import os
import unittest

import h5py
import numpy as np

from ncert_dump import DumpFormatError, DumpWriter, Segment, rules

from .refusal_cases import CASES, case_kwargs
from .support import HAVE_NCERT, TempDirCase, base_projection, run_ncert


class RefusalAssertions(TempDirCase):
    def assertRefused(self, call, name, fragment, path=None):
        with self.assertRaises(DumpFormatError) as cm:
            call()
        e = cm.exception
        self.assertEqual(e.name, name, str(e))
        self.assertIn(fragment, e.message)
        if path is not None:
            self.assertEqual(e.path, path)
        self.assertEqual(str(e), f"{e.path}: {e.message}")
        self.assertIsInstance(e, ValueError)
        return e

    def writer(self, name="dump.h5"):
        w = DumpWriter(self.tmp(name), engine="test", build="unit")
        self.addCleanup(w.abort)
        return w


class ProjectionRefusals(RefusalAssertions):
    """One generated test per entry of refusal_cases.CASES."""

    def test_the_base_projection_is_valid(self):
        with DumpWriter(self.tmp(), engine="test", build="unit") as w:
            w.add_projection("q", **base_projection())
        self.assertTrue(os.path.isfile(self.tmp()))

    def test_a_refused_call_writes_nothing(self):
        with DumpWriter(self.tmp(), engine="test", build="unit") as w:
            kw = base_projection()
            kw["k"] = 0
            with self.assertRaises(DumpFormatError):
                w.add_projection("q", **kw)
            w.add_projection("q", **base_projection())  # the name is still free
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/projections/q"].attrs["k"], 16)


def _refusal_test(case):
    def test(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_projection("q", **case_kwargs(case)), case.name,
                           case.fragment, case.path)
        self.assertNotIn("projections", w._file)  # nothing of the refused call was written
    test.__doc__ = f"{case.name}: {case.fragment}"
    return test


for _case in CASES:
    setattr(ProjectionRefusals, f"test_{_case.id}", _refusal_test(_case))


class RootRefusals(RefusalAssertions):
    def test_existing_output_is_not_overwritten(self):
        open(self.tmp(), "wb").close()
        self.assertRefused(lambda: DumpWriter(self.tmp(), engine="e", build="b"),
                           "output-exists", "exists; refusing to overwrite it", self.tmp())
        self.assertEqual(os.path.getsize(self.tmp()), 0)

    def test_overwrite_replaces_an_existing_file(self):
        open(self.tmp(), "wb").close()
        with DumpWriter(self.tmp(), engine="e", build="b", overwrite=True):
            pass
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f.attrs["ncert_schema"], "ncert-dump")

    def test_engine_is_required(self):
        self.assertRefused(lambda: DumpWriter(self.tmp(), engine=None, build="b"),  # type: ignore[arg-type]
                           "missing-attribute", 'missing attribute "engine"', "/")

    def test_build_must_be_a_string(self):
        self.assertRefused(lambda: DumpWriter(self.tmp(), engine="e", build=3),  # type: ignore[arg-type]
                           "attribute-invalid", 'attribute "build" = 3 is not a string', "/")

    def test_strings_never_hold_nul(self):
        self.assertRefused(lambda: DumpWriter(self.tmp(), engine="e", build="b", model="m\0x"),
                           "attribute-invalid", 'attribute "model" = "m\\x00x" holds an embedded NUL')
        self.assertFalse(os.path.exists(self.tmp()))


class NameRefusals(RefusalAssertions):
    def test_names_cannot_nest(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_projection("a/b", **base_projection()),
                           "invalid-argument", "must be a non-empty string without '/'")

    def test_a_name_is_written_once(self):
        w = self.writer()
        w.add_projection("q", **base_projection())
        self.assertRefused(lambda: w.add_projection("q", **base_projection()),
                           "invalid-argument", "already written", "/projections/q")

    def test_segment_names_are_unique(self):
        w = self.writer()
        kw = base_projection()
        for s in kw["weights"]:
            s.name = "same"
        self.assertRefused(lambda: w.add_projection("q", **kw), "invalid-argument",
                           "two segments have this name")

    def test_unknown_segment_keys(self):
        w = self.writer()
        kw = base_projection()
        kw["weights"] = [{"format": "bf16", "row_begin": 0, "row_end": 8, "value": 1}]
        self.assertRefused(lambda: w.add_projection("q", **kw), "invalid-argument",
                           "unknown segment key(s) value")


class LogitsRefusals(RefusalAssertions):
    def run_kwargs(self, t=3, v=5):
        logits = np.random.default_rng(1).standard_normal((t, v)).astype(np.float32)
        return dict(tokens=logits.argmax(axis=1).astype(np.int32), logits=logits)

    def test_vocab_and_tokens_decide_the_logits_shape(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_logits_run("r", vocab=7, **self.run_kwargs()),
                           "shape-mismatch", "shape [3, 5] but tokens and vocab require [3, 7]",
                           "/logits/r/logits")

    def test_one_token_per_row(self):
        w = self.writer()
        kw = self.run_kwargs()
        kw["tokens"] = kw["tokens"][:2]
        self.assertRefused(lambda: w.add_logits_run("r", **kw), "shape-mismatch",
                           "tokens and vocab require [2, 5]")

    def test_tokens_are_integers(self):
        w = self.writer()
        kw = self.run_kwargs()
        kw["tokens"] = kw["tokens"].astype(np.float32)
        self.assertRefused(lambda: w.add_logits_run("r", **kw), "datatype-refused",
                           "dtype f32 where i32 is required", "/logits/r/tokens")

    def test_logits_are_exact_f32(self):
        w = self.writer()
        kw = self.run_kwargs()
        kw["logits"] = kw["logits"].astype(np.float64) + 1e-12
        self.assertRefused(lambda: w.add_logits_run("r", **kw), "datatype-refused",
                           "not exactly representable in f32", "/logits/r/logits")

    def test_only_lowest_tie_break(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_logits_run("r", tie_break="highest", **self.run_kwargs()),
                           "attribute-invalid", 'tie_break = "highest"; only "lowest" is defined',
                           "/logits/r")

    def test_positions_one_per_token(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_logits_run("r", positions=np.arange(4), **self.run_kwargs()),
                           "shape-mismatch", "shape [4] but the attributes require [3]",
                           "/logits/r/positions")

    def test_positions_are_i64(self):
        w = self.writer()
        self.assertRefused(
            lambda: w.add_logits_run("r", positions=np.arange(3.0), **self.run_kwargs()),
            "datatype-refused", "dtype f64 where i64 is required")

    def test_compression_is_deflate(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_logits_run("r", compression="lzf", **self.run_kwargs()),
                           "invalid-argument", "compression 'lzf'")


class LmHeadRefusals(RefusalAssertions):
    def lm_head(self, t, v, run="r"):
        rng = np.random.default_rng(2)
        x = rng.standard_normal((t, 8)).astype(np.float32)
        w = rng.standard_normal((v, 8)).astype(np.float32)
        y = (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.float32)
        return dict(x=x, x_dtype="f32", weights=[Segment("f32", 0, v, values=w)],
                    accumulator="f32-rn", output_dtype="f32",
                    selector=np.arange(t, dtype=np.int32), y_unpacked=y, logits_run=run), y

    def test_lm_head_after_its_run_must_match_it(self):
        w = self.writer()
        kw, y = self.lm_head(3, 5)
        w.add_logits_run("r", tokens=y.argmax(1).astype(np.int32), logits=y)
        kw2, _ = self.lm_head(4, 5)
        self.assertRefused(lambda: w.add_projection("head", **kw2), "shape-mismatch",
                           'lm_head of run "r" has 4 x 5 outputs but the run has 3 tokens x vocab 5',
                           "/projections/head")

    def test_run_after_its_lm_head_must_match_it(self):
        w = self.writer()
        kw, y = self.lm_head(3, 5)
        w.add_projection("head", **kw)
        self.assertRefused(
            lambda: w.add_logits_run("r", tokens=np.zeros(3, np.int32), logits=y[:, :4]),
            "shape-mismatch", "has 3 x 5 outputs but the run has 3 tokens x vocab 4",
            "/projections/head")

    def test_a_run_named_by_an_lm_head_must_exist_at_close(self):
        w = DumpWriter(self.tmp(), engine="e", build="b")
        kw, _ = self.lm_head(3, 5, run="missing")
        w.add_projection("head", **kw)
        self.assertRefused(w.close, "missing-member",
                           'logits_run = "missing" names no /logits run', "/projections/head")
        self.assertFalse(os.path.exists(self.tmp()))
        self.assertEqual(os.listdir(self.dir), [])  # the partial file is gone too


_ALLOWED = rules.dataset("tensor", "")["dtypes"]
#: The tensor types as the reader lists them: "f32, f16, bf16, e4m3 or e5m2".
TENSOR_TYPES = ", ".join(_ALLOWED[:-1]) + " or " + _ALLOWED[-1]


class TensorRefusals(RefusalAssertions):
    def test_state_tensors_are_floats(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_tensor("kv", np.zeros(4, np.int32), dtype="i32"),
                           "datatype-refused", f"dtype i32; state tensors are {TENSOR_TYPES}",
                           "/tensors/kv")

    def test_compare_policy_of_logits_only(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_tensor("kv", np.zeros(4), compare="kl:0.1"),
                           "policy-invalid", "applies to logits only")

    def test_compare_policy_must_parse(self):
        w = self.writer()
        self.assertRefused(lambda: w.add_tensor("kv", np.zeros(4), compare="ulp:x"),
                           "policy-invalid",
                           'policy "ulp:x" is not one of bitwise, ulp:N, abs:A[,rel:R], kl:X, top1')

    def test_tensor_paths_do_not_clash(self):
        w = self.writer()
        w.add_tensor("layer0/k", np.zeros(4))
        self.assertRefused(lambda: w.add_tensor("layer0", np.zeros(4)), "invalid-argument",
                           "clashes with /tensors/layer0/k")
        self.assertRefused(lambda: w.add_tensor("layer0/k/v", np.zeros(4)), "invalid-argument",
                           "clashes with /tensors/layer0/k")
        self.assertRefused(lambda: w.add_tensor("layer0/k", np.zeros(4)), "invalid-argument",
                           "clashes with /tensors/layer0/k")
        w.add_tensor("layer0/v", np.zeros(4))  # a sibling under the same group


class Atomicity(TempDirCase):
    def test_an_exception_inside_the_block_leaves_no_file(self):
        with self.assertRaises(RuntimeError):
            with DumpWriter(self.tmp(), engine="e", build="b") as w:
                w.add_projection("q", **base_projection())
                raise RuntimeError("engine crashed")
        self.assertEqual(os.listdir(self.dir), [])

    @unittest.skipUnless(HAVE_NCERT, "needs the ncert binary")
    def test_refusals_leave_a_dump_that_checks(self):
        with DumpWriter(self.tmp(), engine="e", build="b") as w:
            for case in CASES[:10]:
                with self.assertRaises(DumpFormatError):
                    w.add_projection("q", **case_kwargs(case))
            w.add_projection("q", **base_projection())
        code, out, err = run_ncert("check", "--threads", "1", self.tmp())
        self.assertEqual(code, 0, out + err)


if __name__ == "__main__":
    unittest.main()


class TransposedWeights(RefusalAssertions):
    """Weights given as [K, rows] (a transposed W) are named as such, not as a stride error."""

    def test_a_transposed_segment_is_named(self):
        kw = base_projection()
        w = kw["weights"][0].values  # [4, 16]
        kw["weights"] = [Segment("bf16", 0, 4, values=np.ascontiguousarray(w.T)), kw["weights"][1]]
        e = self.assertRefused(lambda: self.writer().add_projection("q", **kw), "shape-mismatch",
                               "[K, rows]", "/projections/q/weight/s0_bf16/values")
        self.assertIn("pass its transpose", e.message)

    def test_a_square_segment_is_not_second_guessed(self):
        kw = base_projection()
        # 16 rows of K = 16: [rows, K] and [K, rows] are the same shape; nothing to say.
        kw["weights"] = [Segment("f32", 0, 16, values=np.zeros((16, 16), np.float32))]
        kw["y_unpacked"] = np.zeros((4, 16), np.float32)
        self.writer().add_projection("q", **kw)
