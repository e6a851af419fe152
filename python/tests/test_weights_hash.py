"""The weights hash (dump-format.md §4.5): the XXH3-128 the writer uses against known vectors,
the byte string built by hand from the page, what the hash covers, and a step dump written
without its weights that ncert certifies against a weights dump (round trip through the real
ncert when it is built)."""

from __future__ import annotations

import os
import unittest

import h5py
import numpy as np

from ncert_dump import DumpWriter, Segment, bf16_from_f32, f32_from_bf16, weights_xxh3
from ncert_dump.weights_hash import Xxh3_128

from .support import HAVE_NCERT, TempDirCase, ncert_json

K, N = 64, 16


def segments(flip=False, name="w"):
    w = bf16_from_f32(np.random.default_rng(3).standard_normal((N, K)) / 8)
    if flip:
        w = w.copy()
        w[3, 5] ^= 1
    return [Segment("bf16", 0, N, values=w, name=name)], w


class Hash(unittest.TestCase):
    def test_known_vectors(self):
        # xxHash's own test vector for the empty input (tests/unit/certify/hash_test.cc has it too).
        h = Xxh3_128()
        self.assertEqual(h.hexdigest(), "99aa06d3014798d86001c324468d497f")
        a, b = Xxh3_128(), Xxh3_128()
        a.update(b"ncert-weights-v1\n")
        b.update(b"ncert-")
        b.update(b"weights-v1\n")
        self.assertEqual(a.hexdigest(), b.hexdigest())  # streaming is one string

    def test_byte_string_of_the_page(self):
        segs, w = segments()
        text = (b"ncert-weights-v1\nk=64\nn=16\nsegment 1 w\nformat=bf16\nrow_begin=0\nrow_end=16\n"
                b"values bf16 16 64\n" + np.ascontiguousarray(w, "<u2").tobytes())
        h = Xxh3_128()
        h.update(text)
        self.assertEqual(weights_xxh3(segs), h.hexdigest())

    def test_what_the_hash_covers(self):
        base = weights_xxh3(segments()[0])
        self.assertNotEqual(base, weights_xxh3(segments(flip=True)[0]))      # one bit of one weight
        self.assertNotEqual(base, weights_xxh3(segments(name="v")[0]))       # a segment's name
        w = segments()[1]
        f32 = [Segment("f32", 0, N, values=f32_from_bf16(w), name="w")]      # the same values, f32
        self.assertNotEqual(base, weights_xxh3(f32))
        two = [Segment("bf16", 8, N, values=w[8:], name="b"), Segment("bf16", 0, 8, values=w[:8], name="a")]
        self.assertEqual(weights_xxh3(two), weights_xxh3(list(reversed(two))))  # row_begin order


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary")
class StepWithoutWeights(TempDirCase):
    def write(self, path, **kw):
        segs, w = segments()
        x = bf16_from_f32(np.random.default_rng(9).standard_normal((4, K)))
        y = f32_from_bf16(x).astype(np.float64) @ f32_from_bf16(w).astype(np.float64).T
        with DumpWriter(path, engine="e", build="b") as dw:
            dw.add_projection("q", x=x, x_dtype="bf16", weights=segs, accumulator="f32-rn", output_dtype="bf16",
                              selector=np.arange(4, dtype=np.int32), y_unpacked=bf16_from_f32(y), **kw)

    def test_round_trip(self):
        weights, step = os.path.join(self.dir, "weights.h5"), os.path.join(self.dir, "step.h5")
        self.write(weights, weights_hash=True)
        self.write(step, omit_weights=True)
        with h5py.File(step, "r") as f:
            self.assertNotIn("weight", f["/projections/q"])
            self.assertEqual(f["/projections/q"].attrs["weights_xxh3"], weights_xxh3(segments()[0]))
        code, report = ncert_json("check", weights)
        self.assertEqual((code, report["verdict"]), (0, "PASS"), report)
        code, report = ncert_json("check", step, "--weights", weights)
        self.assertEqual((code, report["verdict"]), (0, "PASS"), report)
        code, report = ncert_json("check", step)
        self.assertEqual((code, report["error"]["code"]), (3, 223), report)


if __name__ == "__main__":
    unittest.main()
