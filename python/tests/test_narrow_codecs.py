"""f16, e4m3 and e5m2 codecs against an independent oracle: every pattern decoded by the
textbook formula in exact rationals, re-encoded to itself, and every rounding decision between
adjacent values (midpoints, just above and below them, overflow, saturation, underflow) checked
in f32 and f64 inputs; then bit-exactness against reference/narrow_float.cc itself."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
import unittest
from fractions import Fraction
from typing import Callable, Union

import numpy as np

from ncert_dump.codecs import (NARROW_FORMATS, decode, decode_narrow, e4m3_from_f32,
                               e5m2_from_f32, f16_from_f32, f16_truncate, f32_from_e4m3,
                               f32_from_e5m2, f32_from_f16, round_narrow)

from .support import REPO

CXX = shutil.which(os.environ.get("CXX", "c++"))
NARROW_FLOAT = os.path.join(REPO, "reference", "narrow_float.cc")

# (exponent bits, mantissa bits, bias, E4M3FN-style top binade) of each format, spelled out
# here again so the oracle shares nothing with the code under test.
SPECS = {"f16": (5, 10, 15, False), "e4m3": (4, 3, 7, True), "e5m2": (5, 2, 15, False)}
WIDTH = {"f16": 16, "e4m3": 8, "e5m2": 8}
PATTERN_TYPE = {"f16": np.uint16, "e4m3": np.uint8, "e5m2": np.uint8}

Oracle = Union[Fraction, str]  # a value, or "nan" / "+inf" / "-inf"


def oracle(pattern: int, dtype: str) -> Oracle:
    """sign * 2^(e - bias) * (1 + m / 2^M) for normals, sign * 2^(1 - bias) * m / 2^M for
    subnormals; the top exponent is inf/NaN (IEEE) or, for E4M3FN, finite except S.1111.111."""
    e_bits, m_bits, bias, fn = SPECS[dtype]
    sign = -1 if pattern >> (e_bits + m_bits) else 1
    e = (pattern >> m_bits) & ((1 << e_bits) - 1)
    m = pattern & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if e == top and not fn:
        return ("+inf" if sign > 0 else "-inf") if m == 0 else "nan"
    if e == top and fn and m == (1 << m_bits) - 1:
        return "nan"
    if e == 0:
        return sign * Fraction(2) ** (1 - bias) * Fraction(m, 1 << m_bits)
    return sign * Fraction(2) ** (e - bias) * (1 + Fraction(m, 1 << m_bits))


def all_patterns(dtype: str) -> np.ndarray:
    return np.arange(1 << WIDTH[dtype], dtype=np.uint32).astype(PATTERN_TYPE[dtype])


def finite_ladder(dtype: str) -> list[tuple[Fraction, int]]:
    """(value, pattern) of every finite non-negative value but -0, ascending."""
    out = []
    for p in range(1 << (WIDTH[dtype] - 1)):
        v = oracle(p, dtype)
        if isinstance(v, Fraction):
            out.append((v, p))
    out.sort()
    return out


def is_nan_pattern(p: int, dtype: str) -> bool:
    return oracle(p, dtype) == "nan"


class DecodeEveryPattern(unittest.TestCase):
    def test_every_pattern_is_the_oracle_value(self):
        for dtype in SPECS:
            with self.subTest(dtype=dtype):
                pats = all_patterns(dtype)
                got = decode_narrow(pats, dtype)
                self.assertEqual(got.dtype, np.float32)
                for p, g in zip(pats.tolist(), got.tolist()):
                    want = oracle(p, dtype)
                    if want == "nan":
                        self.assertTrue(math.isnan(g), f"{dtype} 0x{p:X}")
                    elif isinstance(want, str):
                        self.assertEqual(g, math.inf if want == "+inf" else -math.inf)
                    else:
                        self.assertEqual(Fraction(g), want, f"{dtype} 0x{p:X}")
                        # the sign of zero is the pattern's
                        self.assertEqual(math.copysign(1, g), -1 if p >> (WIDTH[dtype] - 1) else 1)

    def test_f16_agrees_with_numpy_float16_and_the_c_decoder(self):
        pats = all_patterns("f16")
        ours = decode_narrow(pats, "f16")
        np16 = pats.view(np.float16).astype(np.float32)
        nan = np.isnan(np16)
        self.assertTrue(np.array_equal(np.isnan(ours), nan))
        self.assertTrue(np.array_equal(ours[~nan].view(np.uint32), np16[~nan].view(np.uint32)))
        self.assertTrue(np.array_equal(ours.view(np.uint32), f32_from_f16(pats).view(np.uint32)))

    def test_named_decoders(self):
        self.assertTrue(np.array_equal(f32_from_e4m3(np.array([0x7E, 0x01, 0xB8], np.uint8)),
                                       [448.0, 2.0 ** -9, -1.0]))
        self.assertTrue(np.array_equal(f32_from_e5m2(np.array([0x7B, 0x7C, 0x01], np.uint8)),
                                       [57344.0, np.inf, 2.0 ** -16]))
        self.assertTrue(np.isnan(f32_from_e4m3(np.array([0x7F, 0xFF], np.uint8))).all())
        self.assertEqual(decode(np.array([0x38], np.uint8), "e4m3")[0], 1.0)
        self.assertEqual(decode(np.array([0x3C], np.uint8), "e5m2")[0], 1.0)
        with self.assertRaises(TypeError):
            decode_narrow(np.array([1], np.uint16), "e4m3")  # patterns of the wrong width


class EncodeEveryPattern(unittest.TestCase):
    def test_every_pattern_round_trips_from_f32_and_f64(self):
        for dtype in SPECS:
            pats = all_patterns(dtype)
            values = decode_narrow(pats, dtype)
            nan = np.array([is_nan_pattern(p, dtype) for p in pats.tolist()])
            for source in (values, values.astype(np.float64)):
                with self.subTest(dtype=dtype, source=source.dtype):
                    back = round_narrow(source, dtype)
                    self.assertEqual(back.dtype, PATTERN_TYPE[dtype])
                    self.assertTrue(np.array_equal(back[~nan], pats[~nan]))
                    # a NaN stays a NaN (the format's quiet NaN, with its sign)
                    self.assertTrue(all(is_nan_pattern(p, dtype) for p in back[nan].tolist()))
                    self.assertTrue(np.array_equal(back[nan] >> (WIDTH[dtype] - 1),
                                                   pats[nan] >> (WIDTH[dtype] - 1)))

    def test_named_encoders_round_trip(self):
        encoders: dict[str, Callable[[np.ndarray], np.ndarray]] = {"e4m3": e4m3_from_f32,
                                                                   "e5m2": e5m2_from_f32}
        for dtype, enc in encoders.items():
            pats = all_patterns(dtype)
            nan = np.array([is_nan_pattern(p, dtype) for p in pats.tolist()])
            back = enc(decode_narrow(pats, dtype))
            self.assertTrue(np.array_equal(back[~nan], pats[~nan]), dtype)
        pats = all_patterns("f16")
        nan = (pats & 0x7FFF) > 0x7C00
        self.assertTrue(np.array_equal(f16_truncate(f32_from_f16(pats))[~nan], pats[~nan]))


def _f32_neighbours(v: float) -> tuple[float, float]:
    f = np.float32(v)
    return (float(np.nextafter(f, np.float32(-np.inf))), float(np.nextafter(f, np.float32(np.inf))))


class RoundingDecisions(unittest.TestCase):
    """Each adjacent pair a < b of finite values (both signs): the midpoint goes to the even
    pattern (rne), away from zero (rna), toward zero (rz); anything off the midpoint in f64 or
    f32 goes to the nearer value in the nearest modes."""

    def check_pairs(self, dtype: str):
        ladder = finite_ladder(dtype)
        lo_v = np.array([float(a) for (a, _), _b in zip(ladder, ladder[1:])])
        hi_v = np.array([float(b) for _a, (b, _) in zip(ladder, ladder[1:])])
        lo_p = np.array([p for (_, p), _b in zip(ladder, ladder[1:])])
        hi_p = np.array([p for _a, (_, p) in zip(ladder, ladder[1:])])
        mid = (lo_v + hi_v) / 2  # exact in f64, and in f32 (one bit more than the format)
        self.assertTrue(np.array_equal(mid.astype(np.float32).astype(np.float64), mid))
        even = np.where(lo_p % 2 == 0, lo_p, hi_p)
        below64 = np.nextafter(mid, -np.inf)
        above64 = np.nextafter(mid, np.inf)
        mid32 = mid.astype(np.float32)
        below32 = np.nextafter(mid32, np.float32(-np.inf))
        above32 = np.nextafter(mid32, np.float32(np.inf))
        sign = 1 << (WIDTH[dtype] - 1)
        for s, flip in ((1.0, 0), (-1.0, sign)):
            def rn(x, mode="rne"):
                return round_narrow(s * x, dtype, mode, "ieee").astype(np.int64)
            self.assertTrue(np.array_equal(rn(mid), even | flip))
            self.assertTrue(np.array_equal(rn(mid32), even | flip))
            self.assertTrue(np.array_equal(rn(mid, "rna"), hi_p | flip))
            self.assertTrue(np.array_equal(rn(mid, "rz"), lo_p | flip))
            for below, above in ((below64, above64), (below32, above32)):
                self.assertTrue(np.array_equal(rn(below), lo_p | flip))
                self.assertTrue(np.array_equal(rn(above), hi_p | flip))
                self.assertTrue(np.array_equal(rn(below, "rna"), lo_p | flip))
                self.assertTrue(np.array_equal(rn(above, "rz"), lo_p | flip))
                self.assertTrue(np.array_equal(rn(np.nextafter(hi_v, -np.inf), "rz"), lo_p | flip))

    def test_f16_pairs(self):
        self.check_pairs("f16")

    def test_e4m3_pairs(self):
        self.check_pairs("e4m3")

    def test_e5m2_pairs(self):
        self.check_pairs("e5m2")

    def test_f16_from_f32_and_numpy_agree_on_every_midpoint(self):
        ladder = finite_ladder("f16")
        v = np.array([float(a) for a, _ in ladder])
        mids = (v[1:] + v[:-1]) / 2
        probes = np.concatenate([mids, np.nextafter(mids, -np.inf), np.nextafter(mids, np.inf)])
        probes = np.concatenate([probes, -probes])
        self.assertTrue(np.array_equal(round_narrow(probes, "f16"),
                                       probes.astype(np.float16).view(np.uint16)))
        p32 = mids.astype(np.float32)
        self.assertTrue(np.array_equal(round_narrow(p32, "f16"), f16_from_f32(p32)))


class Boundaries(unittest.TestCase):
    def rn(self, values, dtype, mode="rne", overflow=None):
        return round_narrow(np.array(values, dtype=np.float64), dtype, mode, overflow).tolist()

    def test_f16_overflow(self):
        below = float(np.nextafter(65520.0, 0))
        self.assertEqual(self.rn([65504, below, 65520, 1e300, np.inf, -65520], "f16"),
                         [0x7BFF, 0x7BFF, 0x7C00, 0x7C00, 0x7C00, 0xFC00])
        _below32, above32 = _f32_neighbours(65520.0)
        self.assertEqual(int(round_narrow(np.float32(_below32), "f16")), 0x7BFF)
        self.assertEqual(int(round_narrow(np.float32(above32), "f16")), 0x7C00)
        # toward zero never reaches infinity from a finite value; an infinity stays one
        self.assertEqual(self.rn([65520, 1e300, np.inf], "f16", "rz"), [0x7BFF, 0x7BFF, 0x7C00])
        self.assertEqual(self.rn([1e300, np.inf], "f16", "rne", "saturate"), [0x7BFF, 0x7BFF])

    def test_e4m3_saturates_at_448(self):
        above = float(np.nextafter(464.0, 1000))
        # 464 is the midpoint between 448 (0x7E, even) and 480, the value E4M3FN gives up for
        # its NaN (0x7F)
        self.assertEqual(self.rn([448, 464, above, 480, 1e30, np.inf, -np.inf, -1e9], "e4m3"),
                         [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE])
        # IEEE overflow has no infinity to go to: NaN, just above the tie (which goes to even)
        self.assertEqual(self.rn([464, above, np.inf], "e4m3", "rne", "ieee"), [0x7E, 0x7F, 0x7F])
        self.assertEqual(self.rn([np.nan, -np.nan], "e4m3"), [0x7F, 0xFF])

    def test_e5m2_overflow_and_saturation(self):
        below = float(np.nextafter(61440.0, 0))
        self.assertEqual(self.rn([57344, below, 61440, np.inf, -61440], "e5m2"),
                         [0x7B, 0x7B, 0x7C, 0x7C, 0xFC])
        self.assertEqual(self.rn([61440, np.inf, -1e9], "e5m2", "rne", "saturate"),
                         [0x7B, 0x7B, 0xFB])
        self.assertEqual(e5m2_from_f32(np.array([61440.0], np.float32), saturate=True).tolist(),
                         [0x7B])
        self.assertEqual(self.rn([np.nan, -np.inf], "e5m2"), [0x7E, 0xFC])

    def test_underflow(self):
        for dtype, smallest in (("f16", 2.0 ** -24), ("e4m3", 2.0 ** -9), ("e5m2", 2.0 ** -16)):
            with self.subTest(dtype=dtype):
                half = smallest / 2
                sign = 1 << (WIDTH[dtype] - 1)
                got = self.rn([half, float(np.nextafter(half, 1)), -half, smallest * 1.5,
                               5e-324, -0.0], dtype)
                # half the smallest subnormal ties to +-0 (even); above it, the smallest; 1.5
                # units tie to 2 (even); an f64 subnormal to 0; -0 stays -0
                self.assertEqual(got, [0, 1, sign, 2, 0, sign])
                self.assertEqual(self.rn([half], dtype, "rna"), [1])


HARNESS = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "reference/narrow_float.h"
using namespace ncert::reference;
// format mode overflow in out: reads f64 values, writes u32 patterns (narrow_round).
int main(int argc, char** argv) {
  if (argc != 6) return 2;
  const NarrowFormat& f = std::strcmp(argv[1], "f16") == 0    ? kF16Format
                          : std::strcmp(argv[1], "e4m3") == 0 ? kE4m3Format
                                                              : kE5m2Format;
  const NarrowRounding mode = std::strcmp(argv[2], "rne") == 0   ? NarrowRounding::kNearestEven
                              : std::strcmp(argv[2], "rna") == 0 ? NarrowRounding::kNearestAway
                                                                 : NarrowRounding::kTowardZero;
  const NarrowOverflow ov = std::strcmp(argv[3], "saturate") == 0 ? NarrowOverflow::kSaturate
                                                                  : NarrowOverflow::kIeee;
  FILE* in = std::fopen(argv[4], "rb");
  FILE* out = std::fopen(argv[5], "wb");
  if (!in || !out) return 3;
  double x;
  while (std::fread(&x, 8, 1, in) == 1) {
    const std::uint32_t b = narrow_round(f, x, mode, ov);
    std::fwrite(&b, 4, 1, out);
  }
  return 0;
}
"""


@unittest.skipUnless(CXX and os.path.isfile(NARROW_FLOAT),
                     "needs a C++ compiler and reference/narrow_float.cc")
class BitExactAgainstCpp(unittest.TestCase):
    """round_narrow against reference::narrow_round on every pattern, every midpoint, their
    f64 neighbours and random values spanning each format's range, in every mode."""

    dir: str
    exe: str

    @classmethod
    def setUpClass(cls):
        assert CXX is not None
        cls.dir = tempfile.mkdtemp(prefix="ncert_narrow_")
        src = os.path.join(cls.dir, "harness.cc")
        with open(src, "w") as f:
            f.write(HARNESS)
        cls.exe = os.path.join(cls.dir, "harness")
        subprocess.run([CXX, "-std=c++20", "-O2", "-I", REPO, src, NARROW_FLOAT, "-o", cls.exe],
                       check=True, capture_output=True, timeout=300)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def sample(self, dtype: str) -> np.ndarray:
        v = decode_narrow(all_patterns(dtype), dtype).astype(np.float64)
        finite = np.sort(v[np.isfinite(v)])
        mids = (finite[1:] + finite[:-1]) / 2
        rng = np.random.default_rng(5)
        fmt = NARROW_FORMATS[dtype]
        rand = rng.uniform(-2 * fmt.max_finite, 2 * fmt.max_finite, 1 << 14)
        tiny = rng.uniform(-1, 1, 1 << 12) * 2.0 ** (2 - fmt.bias)
        return np.concatenate([v, mids, np.nextafter(mids, -np.inf), np.nextafter(mids, np.inf),
                               rand, tiny, [np.inf, -np.inf, 1e300, -1e300, 5e-324, -0.0]])

    def test_every_mode_bit_exact(self):
        for dtype in SPECS:
            x = self.sample(dtype)
            src = os.path.join(self.dir, f"{dtype}.in")
            x.astype("<f8").tofile(src)
            for mode in ("rne", "rna", "rz"):
                for overflow in ("ieee", "saturate"):
                    with self.subTest(dtype=dtype, mode=mode, overflow=overflow):
                        dst = os.path.join(self.dir, f"{dtype}.{mode}.{overflow}.out")
                        subprocess.run([self.exe, dtype, mode, overflow, src, dst], check=True,
                                       timeout=300)
                        theirs = np.fromfile(dst, dtype="<u4")
                        ours = round_narrow(x, dtype, mode, overflow).astype(np.uint32)
                        # An infinite input is exact: IEEE 754 keeps it infinite toward zero
                        # too (Boundaries.test_f16_overflow); only finite inputs are compared
                        # there, as narrow_round saturates infinities under rz.
                        compared = np.isfinite(x) | (mode != "rz") | (overflow == "saturate")
                        bad = np.flatnonzero((ours != theirs) & compared)
                        if bad.size:
                            i = bad[0]
                            self.fail(f"{bad.size} mismatches; first {x[i]!r}: python "
                                      f"0x{int(ours[i]):X}, C++ 0x{int(theirs[i]):X}")


if __name__ == "__main__":
    unittest.main()
