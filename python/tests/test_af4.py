"""AF4: codebooks as the spec prints them, exact nibble layouts, quantizers, dequantizers."""

from __future__ import annotations

import unittest
from fractions import Fraction

import numpy as np

from ncert_dump.af4 import (CODEBOOKS, codebook_table, dequantize, pack_codes, quantize_affine,
                            quantize_codebook, unpack_codes)
from ncert_dump.codecs import f32_from_bf16, bf16_from_f32

# dump-format.md §4, verbatim.
SPEC_NF4 = ("-1.0 -0.6961928009986877 -0.5250730514526367 -0.39491748809814453 "
            "-0.28444138169288635 -0.18477343022823334 -0.09105003625154495 0.0 "
            "0.07958029955625534 0.16093020141124725 0.24611230194568634 0.33791524171829224 "
            "0.44070982933044434 0.5626170039176941 0.7229568362236023 1.0").split()
SPEC_AF4_64 = ("-1.0 -0.69441008 -0.51243739 -0.3736951 -0.25607552 -0.14982478 -0.04934812 "
               "0.0 0.04273164 0.12934483 0.21961274 0.31675666 0.42563882 0.55496234 "
               "0.72424863 1.0").split()


def nearest_f32(decimal: str) -> np.float32:
    """The f32 nearest to a decimal, decided with exact rational arithmetic."""
    x = Fraction(decimal)
    guess = np.float32(float(x))
    cands = [guess, np.nextafter(guess, np.float32(-np.inf)), np.nextafter(guess, np.float32(np.inf))]
    return min(cands, key=lambda c: abs(Fraction(float(c)) - x))


class Codebooks(unittest.TestCase):
    def test_builtin_tables_are_the_nearest_f32_of_the_spec(self):
        for name, spec in (("nf4", SPEC_NF4), ("af4-64", SPEC_AF4_64)):
            table = CODEBOOKS[name]
            self.assertEqual(table.dtype, np.float32)
            self.assertEqual(len(spec), 16)
            for code, dec in enumerate(spec):
                self.assertEqual(table[code].view(np.uint32), nearest_f32(dec).view(np.uint32),
                                 f"{name}[{code}] = {dec}")
            self.assertTrue(np.all(np.diff(table) > 0))

    def test_tables_are_read_only_and_custom_tables_are_checked(self):
        with self.assertRaises(ValueError):
            CODEBOOKS["nf4"][0] = 0
        self.assertEqual(codebook_table(np.arange(16)).dtype, np.float32)
        with self.assertRaises(ValueError):
            codebook_table(np.arange(15))
        with self.assertRaises(ValueError):
            codebook_table("nf5")


class Packing(unittest.TestCase):
    ROW = np.array([[1, 2, 3, 4, 5, 6, 7, 8, 0xF, 0, 0xA, 0xB, 0xC, 0xD, 0xE, 0x9]], np.uint8)

    def test_u32_lsb_layout(self):
        p = pack_codes(self.ROW, "u32-lsb")
        self.assertEqual(p.dtype, np.uint32)
        self.assertEqual([hex(v) for v in p[0]], ["0x87654321", "0x9edcba0f"])
        # Little-endian storage: byte 0 holds elements 0 (low nibble) and 1 (high nibble).
        self.assertEqual(p.astype("<u4").tobytes()[:4], bytes([0x21, 0x43, 0x65, 0x87]))

    def test_u8_msb_layout(self):
        p = pack_codes(self.ROW, "u8-msb")
        self.assertEqual(p.dtype, np.uint8)
        self.assertEqual(p[0].tobytes(), bytes([0x12, 0x34, 0x56, 0x78, 0xF0, 0xAB, 0xCD, 0xE9]))

    def test_u8_lsb_layout_matches_u32_lsb_bytes(self):
        p = pack_codes(self.ROW, "u8-lsb")
        self.assertEqual(p[0].tobytes(), bytes([0x21, 0x43, 0x65, 0x87, 0x0F, 0xBA, 0xDC, 0x9E]))
        self.assertEqual(p.tobytes(), pack_codes(self.ROW, "u32-lsb").astype("<u4").tobytes())

    def test_round_trip_every_packing(self):
        codes = np.random.default_rng(5).integers(0, 16, size=(7, 64), dtype=np.uint8)
        for packing, shape in (("u32-lsb", (7, 8)), ("u8-msb", (7, 32)), ("u8-lsb", (7, 32))):
            p = pack_codes(codes, packing)
            self.assertEqual(p.shape, shape)
            self.assertTrue(np.array_equal(unpack_codes(p, packing), codes), packing)

    def test_refusals(self):
        with self.assertRaises(ValueError):
            pack_codes(np.full((1, 8), 16), "u32-lsb")
        with self.assertRaises(ValueError):
            pack_codes(np.zeros((1, 6), np.uint8), "u32-lsb")
        with self.assertRaises(ValueError):
            pack_codes(np.zeros((1, 8), np.uint8), "u4")
        with self.assertRaises(TypeError):
            unpack_codes(np.zeros((1, 4), np.uint8), "u32-lsb")


class Quantizers(unittest.TestCase):
    def setUp(self):
        self.w = np.random.default_rng(9).standard_normal((6, 64))

    def test_affine_reconstructs_within_half_a_step(self):
        for dt in ("bf16", "f16", "f32"):
            codes, s, b = quantize_affine(self.w, 32, dt)
            self.assertEqual(codes.shape, (6, 64))
            self.assertEqual(s.shape, (6, 2))
            self.assertLessEqual(int(codes.max()), 15)
            deq = dequantize(codes, s, b, group_size=32, variant="affine")
            step = np.repeat(np.abs(s.astype(np.float64)), 32, axis=1)
            self.assertTrue(np.all(np.abs(deq - self.w) <= 0.6 * step + 1e-6), dt)

    def test_affine_scales_are_exact_in_their_type(self):
        _, s, b = quantize_affine(self.w, 16, "bf16")
        self.assertTrue(np.array_equal(f32_from_bf16(bf16_from_f32(s)), s))
        self.assertTrue(np.array_equal(f32_from_bf16(bf16_from_f32(b)), b))

    def test_affine_constant_group(self):
        codes, s, b = quantize_affine(np.full((1, 8), 0.25), 8, "f32")
        deq = dequantize(codes, s, b, group_size=8, variant="affine")
        self.assertTrue(np.allclose(deq, 0.25))

    def test_codebook_picks_the_nearest_entry(self):
        for cb in ("nf4", "af4-64"):
            codes, s = quantize_codebook(self.w, 16, cb, "f32")
            table = CODEBOOKS[cb].astype(np.float64)
            v = self.w / np.repeat(s.astype(np.float64), 16, axis=1)
            best = np.abs(v[..., None] - table).min(axis=-1)
            chosen = np.abs(v - table[codes])
            self.assertTrue(np.allclose(chosen, best), cb)
        codes, s = quantize_codebook(np.zeros((1, 16)), 16, "nf4")
        self.assertTrue(np.all(codes == 7) and np.all(s == 0))


class Dequantize(unittest.TestCase):
    def test_fma_is_one_rounding_even_where_f64_would_round_twice(self):
        # s*q = 3*(1 + 2^-23) is an f32 midpoint; b = -2^-100 makes the exact value just
        # below it. One rounding gives 3 + 2^-22; rounding through f64 first would tie to
        # 3 + 2^-21.
        s = np.array([[np.uint32(0x3F800001)]], dtype=np.uint32).view(np.float32)
        b = np.array([[-(2.0 ** -100)]], dtype=np.float32)
        w = dequantize(np.full((1, 1), 3, np.uint8), s, b, group_size=1, dequant="f32")
        self.assertEqual(w[0, 0], np.float32(3 + 2.0 ** -22))
        w_ma = dequantize(np.full((1, 1), 3, np.uint8), s, b, group_size=1, dequant="f32",
                          dequant_op="mul-add")
        self.assertEqual(w_ma[0, 0], np.float32(3 + 2.0 ** -21))  # f32(s*q) ties up first

    def test_fma_matches_exact_rounding_on_random_values(self):
        rng = np.random.default_rng(1)
        s = (rng.standard_normal((50, 4)) * 2.0 ** rng.integers(-30, 30, (50, 4))).astype(np.float32)
        b = (rng.standard_normal((50, 4)) * 2.0 ** rng.integers(-60, 30, (50, 4))).astype(np.float32)
        codes = rng.integers(0, 16, (50, 32), dtype=np.uint8)
        w = dequantize(codes, s, b, group_size=8, dequant="f32")
        for i in range(50):
            for j in range(32):
                exact = Fraction(float(s[i, j // 8])) * int(codes[i, j]) + Fraction(float(b[i, j // 8]))
                got = w[i, j]
                err = abs(Fraction(float(got)) - exact)
                for nb in (np.nextafter(got, np.float32(np.inf)), np.nextafter(got, np.float32(-np.inf))):
                    self.assertLessEqual(err, abs(Fraction(float(nb)) - exact))

    def test_output_mode_rounds_to_bf16_and_exact_mode_is_float64(self):
        s = np.array([[0.1]], np.float32)
        b = np.array([[0.013]], np.float32)
        codes = np.array([[5]], np.uint8)
        exact = dequantize(codes, s, b, group_size=1)
        self.assertEqual(exact.dtype, np.float64)
        self.assertEqual(exact[0, 0], float(np.float32(0.1)) * 5 + float(np.float32(0.013)))
        out = dequantize(codes, s, b, group_size=1, dequant="output")
        f32 = dequantize(codes, s, b, group_size=1, dequant="f32")
        self.assertEqual(out[0, 0], f32_from_bf16(bf16_from_f32(f32))[0, 0])
        same = dequantize(codes, s, b, group_size=1, dequant="output", activation="f32")
        self.assertEqual(same[0, 0], f32[0, 0])

    def test_codebook_variants(self):
        codes = np.arange(16, dtype=np.uint8).reshape(1, 16)
        s = np.array([[0.5]], np.float32)
        exact = dequantize(codes, s, group_size=16, variant="codebook", codebook="nf4")
        self.assertTrue(np.array_equal(exact[0], CODEBOOKS["nf4"].astype(np.float64) * 0.5))
        f32 = dequantize(codes, s, group_size=16, variant="codebook", codebook="af4-64",
                         dequant="f32")
        self.assertTrue(np.array_equal(f32[0], CODEBOOKS["af4-64"] * np.float32(0.5)))

    def test_argument_checks(self):
        codes = np.zeros((1, 8), np.uint8)
        s = np.ones((1, 1), np.float32)
        with self.assertRaises(ValueError):
            dequantize(codes, s, group_size=8)  # affine without biases
        with self.assertRaises(ValueError):
            dequantize(codes, s, s, group_size=8, dequant="bf16")
        with self.assertRaises(ValueError):
            dequantize(codes, s, s, group_size=3)
        with self.assertRaises(TypeError):
            dequantize(codes, np.ones((1, 1), np.uint16), s, group_size=8)


if __name__ == "__main__":
    unittest.main()
