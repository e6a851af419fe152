"""bf16 / f16 codecs: hand-checked special cases, and bit-exactness against the C++ reference
(reference/float_bits.cc compiled into a small harness) on a large, boundary-dense sample."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from ncert_dump.codecs import (bf16_from_f32, bf16_truncate, decode, f16_from_f32, f32_from_bf16,
                               f32_from_f16)

from .support import REPO

CXX = shutil.which(os.environ.get("CXX", "c++"))
FLOAT_BITS = os.path.join(REPO, "reference", "float_bits.cc")
# float_bits.cc decodes the narrow formats through narrow_float.cc (and DType's names).
FLOAT_BITS_DEPS = [os.path.join(REPO, "reference", f) for f in ("narrow_float.cc", "dtype.cc")]

HARNESS = r"""
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#include "reference/float_bits.h"
using namespace ncert::reference;
// mode in out: bf16 / bf16t / f16 read u32 patterns and write u16; f16d reads u16, writes u32.
int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string mode = argv[1];
  FILE* in = std::fopen(argv[2], "rb");
  FILE* out = std::fopen(argv[3], "wb");
  if (!in || !out) return 3;
  if (mode == "f16d") {
    std::vector<std::uint16_t> h(1 << 16);
    const size_t n = std::fread(h.data(), 2, h.size(), in);
    for (size_t i = 0; i < n; ++i) {
      const std::uint32_t b = f32_bits(f16_to_f32(h[i]));
      std::fwrite(&b, 4, 1, out);
    }
    return 0;
  }
  std::vector<std::uint32_t> buf(1 << 20);
  std::vector<std::uint16_t> res(buf.size());
  size_t n;
  while ((n = std::fread(buf.data(), 4, buf.size(), in)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      const float f = f32_from_bits(buf[i]);
      res[i] = mode == "bf16" ? f32_to_bf16(f) : mode == "bf16t" ? f32_to_bf16_truncate(f)
                                                                 : f32_to_f16(f);
    }
    std::fwrite(res.data(), 2, n, out);
  }
  return 0;
}
"""

SPECIAL_F32 = np.array([
    0x00000000, 0x80000000,              # +-0
    0x7F800000, 0xFF800000,              # +-inf
    0x7FC00000, 0xFFC00000,              # quiet NaNs
    0x7F800001, 0xFF800001,              # signalling NaNs, smallest payload
    0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF,  # NaN payload extremes
    0x7FA5A5A5,                          # the project's marker NaN
    0x7F7FFFFF, 0xFF7FFFFF,              # +-FLT_MAX (rounds to inf in bf16)
    0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001,  # just below / at / above the tie to inf
    0x00000001, 0x80000001,              # smallest subnormals
    0x007FFFFF, 0x00800000,              # largest subnormal, FLT_MIN
    0x00008000, 0x00018000,              # subnormal ties (even down, odd up)
    0x3F808000, 0x3F818000,              # normal ties: even rounds down, odd rounds up
    0x3F807FFF, 0x3F808001,              # just off the tie
    0x3F800000, 0xBF800000,              # +-1
    0x477FEFFF, 0x477FF000, 0x477FE000,  # f16: below / at the overflow tie, 65504
    0x38800000, 0x387FFFFF, 0x33800000,  # f16: smallest normal, below it, 2^-24
    0x33000000, 0x33000001, 0x33C00000,  # f16: half of 2^-24 (tie to 0), above, 1.5 units
], dtype=np.uint32)


def _boundary_sample(rng) -> np.ndarray:
    """Every bf16 high half with each rounding-relevant low half, specials, random patterns,
    and every f16 value with its rounding midpoints: all the decisions the codecs make."""
    highs = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    lows = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    stratified = (highs[:, None] | lows[None, :]).reshape(-1)
    random = rng.integers(0, 2**32, size=1 << 21, dtype=np.uint64).astype(np.uint32)
    f16_vals = f32_from_f16(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16))
    finite = f16_vals[np.isfinite(f16_vals)].astype(np.float64)
    up = np.sort(np.unique(finite))
    mids = ((up[1:] + up[:-1]) / 2).astype(np.float32).view(np.uint32)  # exact in f32
    around = np.concatenate([mids, mids - np.uint32(1), mids + np.uint32(1)])
    # Random patterns inside the f16 range (2^-26 .. 2^17), both signs.
    mags = rng.integers(0x32800000, 0x48000000, size=1 << 19, dtype=np.uint64).astype(np.uint32)
    signs = (rng.integers(0, 2, size=mags.size, dtype=np.uint64).astype(np.uint32) << np.uint32(31))
    return np.concatenate([SPECIAL_F32, stratified, random, around, mags | signs])


class HandCheckedCases(unittest.TestCase):
    def bits(self, values):
        return np.array(values, dtype=np.uint32).view(np.float32)

    def test_bf16_round_to_nearest_even(self):
        got = bf16_from_f32(self.bits([0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001,
                                       0x7F7F8000, 0x7F7F7FFF, 0x00000001, 0x80008000]))
        self.assertEqual(got.tolist(), [0x3F80, 0x3F82, 0x3F80, 0x3F81, 0x7F80, 0x7F7F,
                                        0x0000, 0x8000])

    def test_bf16_nan_stays_quiet_nan_and_inf_stays_inf(self):
        got = bf16_from_f32(self.bits([0x7F800001, 0xFF800001, 0x7FC00000, 0x7FFFFFFF,
                                       0x7F800000, 0xFF800000]))
        self.assertEqual(got.tolist(), [0x7FC0, 0xFFC0, 0x7FC0, 0x7FFF, 0x7F80, 0xFF80])

    def test_bf16_truncate_rounds_toward_zero(self):
        got = bf16_truncate(self.bits([0x3F80FFFF, 0xBF80FFFF, 0x7F800001]))
        self.assertEqual(got.tolist(), [0x3F80, 0xBF80, 0x7FC0])

    def test_float64_input_goes_through_f32(self):
        self.assertEqual(int(bf16_from_f32(1.0 + 2.0 ** -9)), 0x3F80)  # tie, even: down
        self.assertEqual(bf16_from_f32([[1.0, -2.0]]).shape, (1, 2))

    def test_every_bf16_pattern_round_trips(self):
        pats = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        back = bf16_from_f32(f32_from_bf16(pats))
        nan = (pats & 0x7FFF) > 0x7F80
        self.assertTrue(np.array_equal(back[~nan], pats[~nan]))
        self.assertTrue(np.array_equal(back[nan], pats[nan] | 0x0040))
        self.assertTrue(np.array_equal(f32_from_bf16(pats).view(np.uint32),
                                       pats.astype(np.uint32) << 16))

    def test_every_f16_pattern_round_trips(self):
        pats = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        back = f16_from_f32(f32_from_f16(pats))
        nan = (pats & 0x7FFF) > 0x7C00
        self.assertTrue(np.array_equal(back[~nan], pats[~nan]))
        self.assertTrue(np.array_equal(back[nan], pats[nan] | 0x0200))

    def test_f16_overflow_subnormals_and_nan(self):
        got = f16_from_f32(self.bits([0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001,
                                      0x33C00000, 0xFF800001, 0x7FFFFFFF]))
        self.assertEqual(got.tolist(), [0x7C00, 0x7BFF, 0x0000, 0x0001, 0x0002, 0xFE00, 0x7FFF])
        self.assertEqual(f32_from_f16(np.array([0x0001], np.uint16))[0], np.float32(2.0 ** -24))

    def test_f16_agrees_with_numpy_on_ordinary_values(self):
        v = np.random.default_rng(3).standard_normal(10000).astype(np.float32) * 100
        self.assertTrue(np.array_equal(f16_from_f32(v), v.astype(np.float16).view(np.uint16)))

    def test_decode_dispatch(self):
        self.assertEqual(decode(np.array([0x3C00], np.uint16), "f16")[0], 1.0)
        self.assertEqual(decode(np.array([0x4000], np.uint16), "bf16")[0], 2.0)
        with self.assertRaises(ValueError):
            decode([1], "i32")


@unittest.skipUnless(CXX and os.path.isfile(FLOAT_BITS),
                     "needs a C++ compiler and reference/float_bits.cc")
class BitExactAgainstCpp(unittest.TestCase):
    """The vectorised codecs against the C++ functions themselves, pattern for pattern."""

    dir: str
    exe: str
    sample: np.ndarray

    @classmethod
    def setUpClass(cls):
        assert CXX is not None  # the skipUnless above
        cls.dir = tempfile.mkdtemp(prefix="ncert_codecs_")
        src = os.path.join(cls.dir, "harness.cc")
        with open(src, "w") as f:
            f.write(HARNESS)
        cls.exe = os.path.join(cls.dir, "harness")
        deps = [d for d in FLOAT_BITS_DEPS if os.path.isfile(d)]
        subprocess.run([CXX, "-std=c++20", "-O2", "-I", REPO, src, FLOAT_BITS, *deps, "-o", cls.exe],
                       check=True, capture_output=True, timeout=300)
        cls.sample = _boundary_sample(np.random.default_rng(2024))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_harness(self, mode, data: np.ndarray, out_dtype) -> np.ndarray:
        src = os.path.join(self.dir, f"{mode}.in")
        dst = os.path.join(self.dir, f"{mode}.out")
        data.tofile(src)
        subprocess.run([self.exe, mode, src, dst], check=True, timeout=300)
        return np.fromfile(dst, dtype=out_dtype)

    def assert_same(self, ours, theirs, inputs):
        bad = np.flatnonzero(ours != theirs)
        if bad.size:
            i = bad[0]
            self.fail(f"{bad.size} mismatches; first input 0x{int(inputs[i]):08X}: "
                      f"python 0x{int(ours[i]):X}, C++ 0x{int(theirs[i]):X}")

    def test_bf16_rne_bit_exact(self):
        theirs = self.run_harness("bf16", self.sample, np.uint16)
        self.assert_same(bf16_from_f32(self.sample.view(np.float32)), theirs, self.sample)

    def test_bf16_truncate_bit_exact(self):
        theirs = self.run_harness("bf16t", self.sample, np.uint16)
        self.assert_same(bf16_truncate(self.sample.view(np.float32)), theirs, self.sample)

    def test_f16_rne_bit_exact(self):
        theirs = self.run_harness("f16", self.sample, np.uint16)
        self.assert_same(f16_from_f32(self.sample.view(np.float32)), theirs, self.sample)

    def test_f16_decode_every_pattern(self):
        pats = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        theirs = self.run_harness("f16d", pats, np.uint32)
        self.assert_same(f32_from_f16(pats).view(np.uint32), theirs, pats)


if __name__ == "__main__":
    unittest.main()
