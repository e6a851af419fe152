"""The writer's refusals say what the C++ reader says: each broken projection of
refusal_cases.CASES is also written *without* validation, then `ncert inspect` (schema rules)
or `ncert check` (host guards) must report the same error name, path and sentence."""

from __future__ import annotations

import inspect
import unittest

import numpy as np

from ncert_dump import DumpFormatError, DumpWriter, Segment
from ncert_dump.build import build_logits, build_projection, build_tensor

from .refusal_cases import CASES, case_kwargs
from .support import HAVE_NCERT, TempDirCase, ncert_json, write_raw

# weights_hash / omit_weights act after validation (the hash of validated weights, §4.5).
_WRITER_ONLY = ("weights_hash", "omit_weights")
_DEFAULTS = {name: p.default for name, p in
             inspect.signature(DumpWriter.add_projection).parameters.items()
             if p.default is not inspect.Parameter.empty and name not in _WRITER_ONLY}
_OUTPUTS = ("y_unpacked", "y_packed", "y_compact", "y_before")


def projection_node(path, kwargs):
    """build_projection with add_projection's defaults: the objects the writer would write."""
    kw = dict(_DEFAULTS)
    kw.update(kwargs)
    outputs = {o: kw.pop(o) for o in _OUTPUTS}
    return build_projection(path, outputs=outputs, **kw)


class ParityBase(TempDirCase):
    """Helpers: the writer's refusal, then the reader's verdict on the unchecked objects."""

    def writer_error(self, case) -> DumpFormatError:
        w = DumpWriter(self.tmp("writer.h5"), engine="test", build="unit")
        self.addCleanup(w.abort)
        with self.assertRaises(DumpFormatError) as cm:
            w.add_projection("q", **case_kwargs(case))
        return cm.exception

    def assert_reader_agrees(self, e: DumpFormatError, command: str, raw_members: dict):
        path = self.tmp("raw.h5")
        write_raw(path, raw_members)
        code, report = ncert_json(command, path)
        if command == "inspect":
            found = [(f["code"], f["path"], f["message"]) for f in report.get("findings", [])
                     if f["severity"] == "error"]
            self.assertIn((e.name, e.path, e.message), found)
            self.assertEqual(code, 3)
        else:
            reasons = [c["reason"] for c in report["checks"] if c["kind"] == "geometry"]
            self.assertEqual(reasons, [f"{e.name} ({e.code}): {e.message}"])
            self.assertEqual(code, 1)


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
class ReaderParity(ParityBase):
    """One generated test per case of refusal_cases.CASES that the reader also refuses."""


def _parity_test(case):
    def test(self):
        e = self.writer_error(case)
        node = projection_node("/projections/q", case_kwargs(case))
        self.assert_reader_agrees(e, case.reader, {"/projections/q": node})
    test.__doc__ = f"reader agrees: {case.name}: {case.fragment}"
    return test


for _case in CASES:
    if _case.reader is not None:
        setattr(ReaderParity, f"test_{_case.id}", _parity_test(_case))


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
class ReaderParityBeyondProjections(ParityBase):
    def logits(self, **changes):
        logits = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
        kw = dict(tokens=logits.argmax(axis=1).astype(np.int32), logits=logits, positions=None,
                  prompt_tokens=None, prompt=None, tie_break=None, chunk_rows=None,
                  compression=None, vocab=None)
        kw.update(changes)
        return kw

    def run_case(self, changes):
        kw = self.logits(**changes)
        w = DumpWriter(self.tmp("writer.h5"), engine="test", build="unit")
        self.addCleanup(w.abort)
        with self.assertRaises(DumpFormatError) as cm:
            w.add_logits_run("r", **kw)
        self.assert_reader_agrees(cm.exception, "inspect",
                                  {"/logits/r": build_logits("/logits/r", **kw)})

    def test_logits_vocab(self):
        self.run_case({"vocab": 7})

    def test_logits_tie_break(self):
        self.run_case({"tie_break": "highest"})

    def test_logits_positions_shape(self):
        self.run_case({"positions": np.arange(4)})

    def test_logits_tokens_missing(self):
        self.run_case({"tokens": None})

    def test_tensor_dtype(self):
        w = DumpWriter(self.tmp("writer.h5"), engine="test", build="unit")
        self.addCleanup(w.abort)
        with self.assertRaises(DumpFormatError) as cm:
            w.add_tensor("kv", np.zeros(3, np.int64), dtype="i64")
        node = build_tensor("/tensors/kv", np.zeros(3, np.int64), "i64", None)
        self.assert_reader_agrees(cm.exception, "inspect", {"/tensors/kv": node})

    def test_lm_head_shape(self):
        rng = np.random.default_rng(4)
        x = rng.standard_normal((4, 8)).astype(np.float32)
        wt = rng.standard_normal((5, 8)).astype(np.float32)
        y = (x.astype(np.float64) @ wt.astype(np.float64).T).astype(np.float32)
        head = dict(x=x, x_dtype="f32", weights=[Segment("f32", 0, 5, values=wt)],
                    accumulator="f32-rn", output_dtype="f32",
                    selector=np.arange(4, dtype=np.int32), y_unpacked=y, logits_run="r")
        run = self.logits()
        w = DumpWriter(self.tmp("writer.h5"), engine="test", build="unit")
        self.addCleanup(w.abort)
        w.add_logits_run("r", **run)
        with self.assertRaises(DumpFormatError) as cm:
            w.add_projection("head", **head)
        self.assert_reader_agrees(cm.exception, "inspect", {
            "/logits/r": build_logits("/logits/r", **run),
            "/projections/head": projection_node("/projections/head", head)})


if __name__ == "__main__":
    unittest.main()
