"""AF4 zero-point segments (dump-format.md §4.2, w = (q - zp)*s) from the Python writer: packing
and unpacking of zero points, the dequantizer's orders, a round trip through `ncert check` for
every dequant, dequant_op and zero_point_packing (with the §4.5 weights hash declared, so that
ncert also recomputes the writer's hash), and refusals the reader makes when it reads weights."""

from __future__ import annotations

import unittest

import numpy as np

from ncert_dump import DumpWriter, Segment, af4, bf16_from_f32, f32_from_bf16, weights_xxh3

from .support import HAVE_NCERT, TempDirCase, ncert_json, write_raw, zero_point_segment
from .test_reader_parity import projection_node


class ZeroPointPacking(unittest.TestCase):
    def test_every_packing_round_trips_with_zero_trailing_nibbles(self):
        zp = np.random.default_rng(1).integers(0, 16, (5, 3))
        for packing, dtype, cols in (("u8", np.uint8, 3), ("u32-lsb", np.uint32, 1),
                                     ("u8-msb", np.uint8, 2), ("u8-lsb", np.uint8, 2)):
            stored = af4.pack_zero_points(zp, packing)
            self.assertEqual((stored.dtype, stored.shape), (np.dtype(dtype), (5, cols)), packing)
            self.assertTrue(np.array_equal(af4.unpack_zero_points(stored, packing, 3), zp), packing)

    def test_packed_zero_points_sit_where_codes_would(self):
        # Group g sits where element g of a code row sits (§4.2): u8-msb puts group 0 high.
        zp = np.array([[1, 2, 3]])
        self.assertEqual(af4.pack_zero_points(zp, "u8-msb").tolist(), [[0x12, 0x30]])
        self.assertEqual(af4.pack_zero_points(zp, "u8-lsb").tolist(), [[0x21, 0x03]])
        self.assertEqual(af4.pack_zero_points(zp, "u32-lsb").tolist(), [[0x321]])

    def test_refused_values_name_row_group_and_value(self):
        with self.assertRaisesRegex(ValueError, "row 1, group 0: zero point 16 is above 15"):
            af4.unpack_zero_points(np.array([[1], [16]], np.uint8), "u8", 1)
        with self.assertRaisesRegex(ValueError, "row 0, group 3: zero point 1 in an unused trailing"):
            af4.unpack_zero_points(np.array([[0x23, 0x41]], np.uint8), "u8-msb", 3)


class ZeroPointDequantize(unittest.TestCase):
    def test_orders_hand_worked(self):
        # s = 0.1f, zp = 3, q = 5: sub-mul is fl32(2 * 0.1f), exact (a doubling); fused adds
        # m = fl32(-3 * 0.1f), which rounds, to the exact 5 * 0.1f and rounds once: 0x3E4CCCCC,
        # one ulp below sub-mul's 0x3E4CCCCD (reference/af4_test.cc has the same pair).
        s = np.array([[np.float32(0.1)]], np.float32)
        q, zp = np.array([[5]]), np.array([[3]])
        sub_mul = af4.dequantize(q, s, group_size=1, variant="zero-point", dequant="f32",
                                 zero_points=zp, dequant_op="sub-mul")
        fused = af4.dequantize(q, s, group_size=1, variant="zero-point", dequant="f32",
                               zero_points=zp, dequant_op="fused")
        self.assertEqual(sub_mul[0, 0], np.float32(2) * np.float32(0.1))
        m = -(np.float32(3) * np.float32(0.1))
        exact = 5 * np.float64(np.float32(0.1)) + np.float64(m)
        self.assertEqual(fused[0, 0], np.float32(exact))
        self.assertNotEqual(sub_mul[0, 0], fused[0, 0])
        self.assertEqual(af4.dequantize(q, s, group_size=1, variant="zero-point", zero_points=zp)[0, 0],
                         2 * np.float64(np.float32(0.1)))

    def test_affine_orders_are_refused_for_zero_point(self):
        with self.assertRaisesRegex(ValueError, "pick sub-mul or fused"):
            af4.dequantize(np.zeros((1, 2), int), np.ones((1, 1), np.float32), group_size=2,
                           variant="zero-point", dequant="f32", dequant_op="fma",
                           zero_points=np.zeros((1, 1), int))


def _projection(dequant, dequant_op, zero_point_packing, scales_dtype="f32"):
    """A projection (K = 24 in 3 groups of 8, N = 8: 6 zero-point rows and 2 bf16 rows) whose
    outputs are the f64 products with the weights the declared kernel uses, rounded to f32."""
    rng = np.random.default_rng(23)
    m, k = 4, 24
    x = bf16_from_f32(rng.standard_normal((m, k)))
    seg = zero_point_segment(rows=6, k=k, group_size=8, rng=rng, dequant=dequant,
                             dequant_op=dequant_op, zero_point_packing=zero_point_packing)
    scales = seg.scales
    if scales_dtype == "bf16":
        seg.scales = bf16_from_f32(scales)
        seg.scale_dtype = "bf16"
        scales = f32_from_bf16(seg.scales)
    w_zp = af4.dequantize(seg.codes, scales, group_size=8, variant="zero-point", dequant=dequant,
                          dequant_op=dequant_op, zero_points=seg.zero_points, activation="bf16")
    w_bf16 = bf16_from_f32(rng.standard_normal((2, k)) / 4)
    w = np.concatenate([np.asarray(w_zp, np.float64), f32_from_bf16(w_bf16).astype(np.float64)])
    y = (f32_from_bf16(x).astype(np.float64) @ w.T).astype(np.float32)
    weights = [seg, Segment("bf16", 6, 8, values=w_bf16)]
    return dict(x=x, x_dtype="bf16", weights=weights, accumulator="f32-rn", output_dtype="f32",
                selector=np.array([0, 1, 2], np.int32), requests=2, block_rows=2, cap=2,
                commit_counts=np.array([2, 1], np.int32), y_unpacked=y, weights_hash=True)


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
class ZeroPointRoundTrip(TempDirCase):
    def check(self, kwargs, name):
        path = self.tmp(name)
        with DumpWriter(path, engine="test", build="zero-point") as w:
            w.add_projection("q", **kwargs)
        return ncert_json("check", path)

    def test_every_dequant_order_and_packing_passes(self):
        packings = ("u8", "u32-lsb", "u8-msb", "u8-lsb")
        i = 0
        for dequant in ("exact", "f32", "output", "folded"):
            for op in ("sub-mul", "fused", None):
                for scales in ("f32", "bf16"):
                    packing = packings[i % 4]
                    i += 1
                    with self.subTest(dequant=dequant, op=op, packing=packing, scales=scales):
                        kw = _projection(dequant, op, packing, scales)
                        code, report = self.check(kw, f"zp-{i}.h5")
                        self.assertEqual((code, report.get("verdict")), (0, "PASS"), report)

    def test_the_writer_s_hash_is_the_reader_s(self):
        kw = _projection("f32", "fused", "u8-msb")
        declared = weights_xxh3(kw["weights"], k=24, n=8)
        code, report = self.check(kw, "zp-hash.h5")
        self.assertEqual(code, 0, report)  # ncert refuses a declared hash that differs (222)
        kw["weights"][0].zero_points = np.asarray(kw["weights"][0].zero_points).copy()
        kw["weights"][0].zero_points[0, 0] ^= 1
        self.assertNotEqual(weights_xxh3(kw["weights"], k=24, n=8), declared)

    def test_a_zero_point_above_15_written_anyway_is_refused_by_ncert(self):
        kw = _projection("f32", None, "u8")
        kw.pop("weights_hash")
        node = projection_node("/projections/q", kw)
        node.members["weight"].members["s0_af4"].members["zero_points"].array[2, 1] = 16
        path = self.tmp("zp-16.h5")
        write_raw(path, {"/projections/q": node})
        code, report = ncert_json("check", path)
        self.assertEqual((code, report["error"]["code"]), (3, 222), report)
        self.assertIn("zero_points: row 2, group 1: zero point 16 is above 15", report["error"]["message"])


if __name__ == "__main__":
    unittest.main()
