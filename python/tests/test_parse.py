"""Attribute parsers follow the C++ number syntax (strtod, from_chars), not Python's: what
the writer accepts, the reader accepts too."""

from __future__ import annotations

import unittest
from typing import Optional

from ncert_dump import DumpWriter
from ncert_dump.parse import (k_walk_parts, parse_accumulator, parse_k_walk,
                              parse_tensor_policy, strtod_full)

from .support import HAVE_NCERT, TempDirCase, base_projection, run_ncert


def _name(problem: Optional[tuple[str, str]]) -> str:
    """The error name of a refusal (None, an acceptance, fails the test)."""
    assert problem is not None, "accepted where a refusal was expected"
    return problem[0]


ACCEPTED_ACCUMULATORS = ["f32-rn", "f32-rz", "matrix-unit", "u=1e-7", "u=0x1p-24", "u= 1e-7",
                         "u=.25", "u=+1E-3", "u=1.e-6"]
REFUSED_ACCUMULATORS = ["u=", "u=0", "u=0.5", "u=1e-7 ", "u=inf", "u=nan", "u=1e", "U=1e-7",
                        "u=1_0e-3", "f32"]
ACCEPTED_WALKS = ["seq", "seq-fma", "split:1", "split:4:fma", "split:008"]
REFUSED_WALKS = ["split:0", "split:-2", "split:+4", "split:4:x", "split:", "split:4:fma:x",
                 "split: 4", "split:99999999999999999999", "SEQ"]


class Parsers(unittest.TestCase):
    def test_strtod_full(self):
        self.assertEqual(strtod_full(" 0x1.8p1"), 3.0)
        self.assertEqual(strtod_full("-0x.8"), -0.5)
        self.assertEqual(strtod_full("1e3"), 1000.0)
        self.assertEqual(strtod_full("-inf"), float("-inf"))
        for bad in ("", "1e", "1 ", "0x", "1,5", "١"):
            self.assertIsNone(strtod_full(bad), bad)

    def test_accumulators(self):
        for s in ACCEPTED_ACCUMULATORS:
            self.assertIsNone(parse_accumulator(s), s)
        for s in REFUSED_ACCUMULATORS:
            self.assertEqual(_name(parse_accumulator(s)), "accumulator-unknown", s)

    def test_k_walks(self):
        for s in ACCEPTED_WALKS:
            self.assertIsNone(parse_k_walk(s), s)
        for s in REFUSED_WALKS:
            self.assertEqual(_name(parse_k_walk(s)), "k-walk-invalid", s)
        self.assertEqual(k_walk_parts("split:008"), 8)

    def test_tensor_policies(self):
        for s in ("bitwise", "ulp:0", "ulp:18446744073709551615", "abs:1e-3", "abs:0,rel:0.5"):
            self.assertIsNone(parse_tensor_policy(s), s)
        for s in ("ulp:-1", "ulp:18446744073709551616", "abs:-1", "abs:1,rel:", "abs:1,x:2",
                  "top1", "kl:0.1", "exact"):
            self.assertEqual(_name(parse_tensor_policy(s)), "policy-invalid", s)


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
class ReaderAcceptsWhatTheWriterAccepts(TempDirCase):
    def test_exotic_but_valid_values_load(self):
        for i, (acc, walk) in enumerate(zip(ACCEPTED_ACCUMULATORS, ACCEPTED_WALKS * 2)):
            with self.subTest(accumulator=acc, k_walk=walk):
                path = self.tmp(f"d{i}.h5")
                kw = base_projection()
                kw.update(accumulator=acc, k_walk=walk)
                with DumpWriter(path, engine="e", build="b") as w:
                    w.add_projection("q", **kw)
                code, out, err = run_ncert("inspect", "--no-hashes", path)
                self.assertEqual(code, 0, out + err)


if __name__ == "__main__":
    unittest.main()
