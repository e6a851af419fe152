"""Attribute parsers follow the C++ number syntax (strtod, from_chars), not Python's: what
the writer accepts, the reader accepts too."""

from __future__ import annotations

import unittest
from typing import Optional

from ncert_dump import DumpWriter
from ncert_dump.parse import (k_walk_chunk, k_walk_parts, parse_accumulator, parse_k_walk,
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
ACCEPTED_WALKS = ["seq", "seq-fma", "split:1", "split:4:fma", "split:008",
                  "lanes:8:halving", "lanes:6:seq:fma", "lanes:16:pairs", "lanes:02:pairs",
                  "promote:128:14:rz", "promote:4:24:rne:fma", "promote:1:8:rne",
                  "splitk:4:halving/lanes:8:pairs:fma", "splitk:3:seq/seq-fma",
                  "splitk:08:pairs/promote:32:8:rne", "splitk:1:halving/seq",
                  "codes:4:scale-product/lanes:8:halving:fma", "codes:16:x-scale-first/seq",
                  "codes:2:w-scale-first/splitk:2:seq/seq-fma", "lanes:16:groups(4,seq,halving):fma",
                  "lanes:8:groups(4,seq,seq)", "lanes:12:groups(3,seq,pairs)", "codes:16:scale-product/once"]
REFUSED_WALKS = ["split:0", "split:-2", "split:+4", "split:4:x", "split:", "split:4:fma:x",
                 "split: 4", "split:99999999999999999999", "SEQ",
                 "lanes:1:seq", "lanes:0:seq", "lanes:6:halving", "lanes:12:pairs", "lanes:8",
                 "lanes:8:tree", "lanes:8:seq:", "lanes:8:seq:fma:x", "lanes:+8:seq", "lanes:-8:seq",
                 "lanes: 8:seq", "promote:0:14:rz", "promote:128:7:rz", "promote:128:25:rne",
                 "promote:128:14", "promote:128:14:rd", "promote:128:14:rz:fma:x", "promote:128:14:rz:",
                 "splitk:0:seq/seq", "splitk:3:halving/seq", "splitk:6:pairs/seq", "splitk:4:seq",
                 "splitk:4/seq", "splitk:4:seq/split:2", "splitk:4:seq/splitk:2:seq/seq", "splitk:4:seq/",
                 "splitk:4:seq/lanes:3:pairs", "splitk:4:halving:fma/seq", "lanes", "promote",
                 "lanes:16:groups(3,seq,seq)", "lanes:12:groups(4,seq,halving)", "lanes:16:groups(4,seq)",
                 "splitk:4:groups(2,seq,seq)/seq", "lanes:131072:groups(4,seq,seq)",
                 "splitk:", "", "codes:", "codes:4:scale-product", "codes:0:scale-product/seq",
                 "codes:4:scales/seq", "codes:4:scale-product/", "codes:4:scale-product/lanes:3:pairs",
                 "codes:4:scale-product/codes:4:scale-product/seq", "codes:+4:w-scale-first/seq",
                 "codes:4:scale-product/once:fma", "once", "splitk:2:seq/once"]


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
        # The S guard-walk-split holds K to: splitk's parts; lanes and promote do not cut K.
        self.assertEqual(k_walk_parts("splitk:08:pairs/promote:32:8:rne"), 8)
        self.assertEqual(k_walk_parts("splitk:3:seq/lanes:4:halving"), 3)
        self.assertEqual(k_walk_parts("lanes:8:halving"), 1)
        self.assertEqual(k_walk_parts("promote:128:14:rz"), 1)
        self.assertIsNone(k_walk_parts("splitk:3:pairs/seq"))
        # An integer kernel's walk: its chunk C, and the parts of its K / C sums.
        self.assertEqual(k_walk_chunk("codes:4:scale-product/splitk:2:seq/seq"), 4)
        self.assertEqual(k_walk_parts("codes:4:scale-product/splitk:2:seq/seq"), 2)
        self.assertEqual(k_walk_chunk("seq"), 1)
        self.assertIsNone(k_walk_chunk("codes:4:scales/seq"))

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

    def test_every_accepted_walk_loads_and_checks(self):
        # K = 16 in the base projection: the walks whose parts divide it (the others are
        # guard-walk-split, refusal_cases.py).
        walks = [w for w in ACCEPTED_WALKS if 16 % (k_walk_parts(w) or 0) == 0]
        self.assertGreater(len(walks), 12)
        for i, walk in enumerate(walks):
            with self.subTest(k_walk=walk):
                path = self.tmp(f"w{i}.h5")
                kw = base_projection()
                kw.update(k_walk=walk)
                with DumpWriter(path, engine="e", build="b") as w:
                    w.add_projection("q", **kw)
                code, out, err = run_ncert("inspect", "--no-hashes", path)
                self.assertEqual(code, 0, out + err)


if __name__ == "__main__":
    unittest.main()
