"""Dump format v2 from the writer: the explicit element-type rule, f16 / FP8 / i8 members,
scaled weight segments, ggml's blocks, activation quantization, and the version the writer
declares; written, read back with h5py and, when the ncert binary reads v2, certified."""

from __future__ import annotations

import unittest
from typing import Any
from unittest import mock

import h5py
import numpy as np

from ncert_dump import (DumpFormatError, DumpWriter, Segment, bf16_from_f32, f32_from_bf16, pack_codes,
                        rules)
from ncert_dump.codecs import decode_narrow, e4m3_from_f32, f16_truncate
from ncert_dump.ggml import (BLOCK_BYTES, codes_from_qs, join_blocks, qs_from_codes,
                             segment_from_blocks, split_blocks)
from ncert_dump.quant import dequantize_activations, quantize_activations

from .support import HAVE_NCERT, TempDirCase, af4_segment, base_projection, ncert_json

HAVE_V2_TABLE = 2 in rules.VERSIONS

M, K, N = 4, 64, 8


def f16_values(a) -> np.ndarray:
    return np.asarray(a, np.float64).astype(np.float16)


class WriterCase(TempDirCase):
    def refused(self, name, fn, *fragments):
        with self.assertRaises(DumpFormatError) as cm:
            fn()
        self.assertEqual(cm.exception.name, name, str(cm.exception))
        for f in fragments:
            self.assertIn(f, str(cm.exception))
        return cm.exception


class ExplicitElementTypes(WriterCase):
    """An array is stored as its own type, or as the type named when that changes no value."""

    def kwargs(self, **changes):
        kw = base_projection()
        kw.update(changes)
        return kw

    def test_f32_x_is_stored_as_f32_not_rounded_to_bf16(self):
        x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
        kw = self.kwargs(x=x)
        del kw["x_dtype"]
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            w.add_projection("q", **kw)
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/projections/q/x"].dtype, np.float32)
            self.assertTrue(np.array_equal(f["/projections/q/x"][()], x))
            self.assertEqual(int(f.attrs["ncert_schema_version"]), 1)

    def test_bias_at_start_is_version_2_and_needs_a_bias(self):
        # bias_at = "start" (dump-format.md §3.3) makes the dump version 2; "end" is version 1's
        # meaning; without a bias the reader would ignore it, so the writer refuses it.
        kw = self.kwargs(epilogue="bias", bias=np.zeros(8, np.float32), bias_dtype="f32")
        kw["y_unpacked"] = kw["y_unpacked"].copy()
        for value, version in (("end", 1), ("start", 2)):
            with DumpWriter(self.tmp(), engine="t", build="b", overwrite=True) as w:
                w.add_projection("q", bias_at=value, **kw)
            with h5py.File(self.tmp(), "r") as f:
                self.assertEqual(f["/projections/q"].attrs["bias_at"], value)
                self.assertEqual(int(f.attrs["ncert_schema_version"]), version)
        with DumpWriter(self.tmp(), engine="t", build="b", overwrite=True) as w:
            self.refused("invalid-argument", lambda: w.add_projection("q", bias_at="start", **self.kwargs()),
                         'bias_at = "start" but the epilogue has no bias')
            self.refused("epilogue-unknown", lambda: w.add_projection("q", bias_at="begin", **kw),
                         'bias_at "begin" is not one of end, start')

    def test_uint16_x_needs_its_type_named(self):
        kw = self.kwargs()
        del kw["x_dtype"]
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            self.refused("invalid-argument", lambda: w.add_projection("q", **kw),
                         "/projections/q/x", 'x_dtype="bf16" or x_dtype="f16"')

    def test_conversion_only_when_exact(self):
        exact = f32_from_bf16(base_projection()["x"])  # f32 values that are bf16 values
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            w.add_projection("q", **self.kwargs(x=exact, x_dtype="bf16"))
            inexact = exact.copy()
            inexact[1, 2] = np.float32(0.1)
            e = self.refused("datatype-refused",
                             lambda: w.add_projection("p", **self.kwargs(x=inexact, x_dtype="bf16")),
                             "/projections/p/x", "x:", "f32 to bf16", "[1, 2]", "0.10000000149011612",
                             'x_dtype="f32"')
            self.assertEqual(e.path, "/projections/p/x")
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/projections/q/x"].attrs["dtype"], "bf16")

    def test_bias_residual_values_scales_follow_the_rule(self):
        kw = self.kwargs(epilogue="bias", bias=np.full(8, 0.1))  # float64 0.1 is no f32
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            self.refused("datatype-refused", lambda: w.add_projection("q", **kw),
                         "/projections/q/bias", "float64", "f32")
            kw["bias"] = np.full(8, 0.5)  # exact: stored as f32
            w.add_projection("q", **kw)
            seg = Segment("bf16", 0, 8, values=np.full((8, 16), 0.1, np.float32))
            self.refused("datatype-refused",
                         lambda: w.add_projection("p", **self.kwargs(weights=[seg])),
                         "/projections/p/weight/s0_bf16/values", "f32 to bf16")
            scales = np.full((8, 2), 0.3, np.float32)
            seg = Segment("af4", 0, 8, codes=np.zeros((8, 16), np.uint8), scales=scales,
                          biases=scales, scale_dtype="f16", group_size=8, variant="affine",
                          packing="u32-lsb")
            self.refused("datatype-refused",
                         lambda: w.add_projection("r", **self.kwargs(weights=[seg])),
                         "/scales", "f32 to f16")
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/projections/q/bias"].dtype, np.float32)

    def test_outputs_are_never_rounded(self):
        y = base_projection()["y_unpacked"]
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            self.refused("datatype-refused",
                         lambda: w.add_projection("q", **self.kwargs(output_dtype="bf16")),
                         "not exactly representable in bf16")
            w.add_projection("q", **self.kwargs(output_dtype="bf16", y_unpacked=bf16_from_f32(y)))

    def test_big_endian_arrays_keep_their_values(self):
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            w.add_tensor("a", np.array([1.5, -2.0], ">f4"))
            w.add_tensor("b", np.array([1.5, -2.0], ">f8"), dtype="f16")
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/tensors/a"][()].tolist(), [1.5, -2.0])
            self.assertEqual(f["/tensors/b"][()].tolist(), [1.5, -2.0])

    def test_big_endian_packed_codes_are_words_like_any_other(self):
        # Packed words are numbers (element i of a u32-lsb word in its bits 4i..4i+3), so a
        # big-endian array holds the same codes, stored little-endian; only the width is fixed.
        seg = af4_segment(rows=8, k=16)
        native = pack_codes(np.asarray(seg.codes), "u32-lsb")
        seg.codes, seg.packed_codes = None, native.astype(">u4")
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            w.add_projection("q", **self.kwargs(weights=[seg]))
            seg.packed_codes = native.astype(np.int32)
            self.refused("datatype-refused", lambda: w.add_projection("p", **self.kwargs(weights=[seg])),
                         "/projections/p/weight/s0_af4/codes", "dtype i32 where u32 is required")
            seg.packed_codes = native.astype(">u8")
            self.refused("datatype-refused", lambda: w.add_projection("p", **self.kwargs(weights=[seg])),
                         "dtype u64 where u32 is required")
        with h5py.File(self.tmp(), "r") as f:
            stored = f["/projections/q/weight/s0_af4/codes"]
            self.assertEqual(stored.dtype, np.dtype("<u4"))
            self.assertTrue(np.array_equal(stored[()], native))

    def test_integer_arrays_of_every_width_are_values(self):
        # int8 included: i8 is a storage type of its own (scaled weights, x_quantized), but an
        # int8 array given where a float is expected holds values, as int16 or uint8 arrays do.
        for itype in (np.int8, np.uint8, np.int16, np.int32, np.int64):
            with self.subTest(itype.__name__):
                x = np.random.default_rng(2).integers(-3, 4, (4, 16)).astype(np.float32)
                w = DumpWriter(self.tmp(), engine="t", build="b", overwrite=True)
                with w:
                    w.add_projection("q", **self.kwargs(x=np.abs(x).astype(itype), x_dtype=None))
                    w.add_tensor("t", np.arange(3).astype(itype))
                    w.add_logits_run("r", tokens=np.zeros(2, np.int32),
                                     logits=np.ones((2, 5), itype))
                with h5py.File(self.tmp(), "r") as f:
                    for member in ("/projections/q/x", "/tensors/t", "/logits/r/logits"):
                        self.assertEqual(f[member].dtype, np.float32, member)
                    self.assertTrue(np.array_equal(f["/projections/q/x"][()], np.abs(x)))
                    self.assertEqual(f["/tensors/t"][()].tolist(), [0.0, 1.0, 2.0])

    def test_nans_convert_only_when_their_bits_survive(self):
        # A NaN is a value like any other: converted only when the round trip gives back its
        # bits (sign, signalling bit, payload), never silently made the target's quiet NaN.
        def f32(*bits):
            return np.array(bits, np.uint32).view(np.float32)

        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            for bits, shown in ((0x7F800001, "0x7f800001"), (0xFFC12345, "0xffc12345")):
                x = f32_from_bf16(base_projection()["x"])
                x[0, 1] = f32(bits)[0]
                self.refused("datatype-refused",
                             lambda: w.add_projection("q", **self.kwargs(x=x, x_dtype="bf16")),
                             "/projections/q/x", "[0, 1]", f"NaN {shown}", "f32 to bf16",
                             'x_dtype="f32"')
            w.add_tensor("kept", f32(0x7FC10000, 0xFFA00000, 0x7FC00000), dtype="bf16")
            w.add_tensor("f16", f32(0x7FC02000, 0xFF802000), dtype="f16")
            self.refused("datatype-refused",
                         lambda: w.add_tensor("lost", f32(0x7FC00001), dtype="f16"), "NaN 0x7fc00001")
            w.add_tensor("fp8", f32(0x7FC00000, 0xFFC00000), dtype="e4m3")  # E4M3FN's one NaN
            # It has no payload to lose: any NaN is it, with its sign, as PyTorch's widened e4m3
            # NaN (0x7ff00000) is.
            w.add_tensor("fp8b", f32(0x7FD00000, 0x7FF00000, 0xFFF00000), dtype="e4m3")
            w.add_tensor("f64", np.array([np.nan, -np.nan]))
            payload = np.array([0x7FF8000000000001], np.uint64).view(np.float64)
            self.refused("datatype-refused", lambda: w.add_tensor("f64b", payload),
                         "NaN 0x7ff8000000000001", "float64 values")
            try:  # a bf16 tensor widened to f32 keeps its signalling NaN's bits
                import torch
                bf16 = torch.tensor([0x7F81, -0x7F], dtype=torch.int16).view(torch.bfloat16)
            except ImportError:
                bf16 = f32(0x7F810000, 0xFF810000)
            w.add_tensor("widened32", bf16, dtype="f32")
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/tensors/kept"][()].tolist(), [0x7FC1, 0xFFA0, 0x7FC0])
            self.assertEqual(f["/tensors/f16"][()].view(np.uint16).tolist(), [0x7E01, 0xFC01])
            self.assertEqual(f["/tensors/fp8"][()].tolist(), [0x7F, 0xFF])
            self.assertEqual(f["/tensors/fp8b"][()].tolist(), [0x7F, 0x7F, 0xFF])
            self.assertEqual(f["/tensors/f64"][()].view(np.uint32).tolist(), [0x7FC00000, 0xFFC00000])
            self.assertEqual(f["/tensors/widened32"][()].view(np.uint32).tolist(),
                             [0x7F810000, 0xFF810000])

    def test_tensor_type_from_the_array(self):
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            w.add_tensor("a", np.ones(3, np.float16))
            w.add_tensor("b", np.ones(3, np.float32))
            self.refused("invalid-argument", lambda: w.add_tensor("c", np.ones(3, np.uint16)),
                         'dtype="bf16"')
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/tensors/a"].dtype, np.float16)
            self.assertEqual(f["/tensors/b"].dtype, np.float32)

    def test_torch_tensors_carry_their_type(self):
        try:
            import torch
        except ImportError:
            self.skipTest("needs torch")
        kw = self.kwargs()
        x = torch.from_numpy(f32_from_bf16(kw.pop("x"))).to(torch.bfloat16)
        del kw["x_dtype"]
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            w.add_projection("q", x=x, **kw)  # bf16 without x_dtype: the tensor says so
            w.add_tensor("h", torch.ones(3, dtype=torch.float16))
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/projections/q/x"].attrs["dtype"], "bf16")
            self.assertTrue(np.array_equal(f["/projections/q/x"][()], base_projection()["x"]))
            self.assertEqual(f["/tensors/h"].dtype, np.float16)


class Ggml(unittest.TestCase):
    def test_blocks_split_and_join_byte_for_byte(self):
        rng = np.random.default_rng(3)
        for kind, size in BLOCK_BYTES.items():
            raw = rng.integers(0, 256, 3 * (K // 32) * size, dtype=np.uint8).tobytes()
            parts = split_blocks(raw, kind, 3, K)
            self.assertEqual(join_blocks(kind, **parts), raw, kind)

    def test_nibbles_are_ggml_order(self):
        qs = np.random.default_rng(4).integers(0, 256, (2, K // 2), dtype=np.uint8)
        codes = codes_from_qs(qs)
        # ggml's dequantize_row_q4_0: y[j] = qs[j] & 15, y[j + 16] = qs[j] >> 4, per block
        self.assertTrue(np.array_equal(codes[:, :16], qs[:, :16] & 15))
        self.assertTrue(np.array_equal(codes[:, 16:32], qs[:, :16] >> 4))
        self.assertTrue(np.array_equal(codes[:, 32:48], qs[:, 16:32] & 15))
        self.assertTrue(np.array_equal(qs_from_codes(codes), qs))

    def test_segments_declare_the_documented_forms(self):
        rng = np.random.default_rng(5)
        raw = {kind: rng.integers(0, 256, 2 * (K // 32) * size, dtype=np.uint8).tobytes()
               for kind, size in BLOCK_BYTES.items()}
        q40 = segment_from_blocks(raw["q4_0"], "q4_0", 0, 2, K)
        self.assertEqual((q40.format, q40.variant, q40.group_size, q40.packing, q40.dequant,
                          q40.dequant_op), ("af4", "zero-point", 32, "u8-lsb", "f32", "sub-mul"))
        self.assertTrue(np.all(q40.zero_points == 8))
        self.assertEqual(q40.scales.dtype, np.float16)
        q41 = segment_from_blocks(raw["q4_1"], "q4_1", 0, 2, K)
        self.assertEqual((q41.variant, q41.dequant_op), ("affine", "either"))
        self.assertEqual(q41.biases.dtype, np.float16)
        q80 = segment_from_blocks(raw["q8_0"], "q8_0", 0, 2, K)
        self.assertEqual((q80.format, q80.group_size, q80.dequant), ("int8", 32, "f32"))
        self.assertEqual(q80.values.dtype, np.int8)


class ActivationQuantization(unittest.TestCase):
    def test_int8_rows_round_trip_within_half_a_step(self):
        x = np.random.default_rng(5).standard_normal((M, K)).astype(np.float32)
        q, s, zp = quantize_activations(x, K, "int8", group=16)
        self.assertEqual((q.dtype, q.shape, s.shape, zp), (np.int8, (M, K), (M, 4), None))
        back = dequantize_activations(q, s, "int8")
        step = np.repeat(s.astype(np.float64), 16, axis=1)
        self.assertTrue(np.all(np.abs(back - x) <= step / 2 + 1e-12))
        self.assertEqual(int(np.abs(q).max()), 127)

    def test_ties_follow_the_rounding(self):
        x = np.array([[2.5, -2.5, 0.5, 127.0]], np.float32)  # scale 1: quotients are ties
        self.assertEqual(quantize_activations(x, 4, "int8")[0].tolist(), [[2, -2, 0, 127]])
        self.assertEqual(quantize_activations(x, 4, "int8", rounding="rna")[0].tolist(),
                         [[3, -3, 1, 127]])

    def test_uint8_asymmetric_and_fp8(self):
        x = np.random.default_rng(6).uniform(-1, 3, (M, K)).astype(np.float32)
        q, s, zp = quantize_activations(x, K, "uint8", asymmetric=True)
        self.assertEqual((q.dtype, zp.dtype, zp.shape), (np.uint8, np.uint8, (M, 1)))
        back = dequantize_activations(q, s, "uint8", zp)
        self.assertTrue(np.all(np.abs(back - x) <= s.astype(np.float64) * (0.5 + 1e-9)))
        q8, s8, _ = quantize_activations(x, K, "e4m3")
        self.assertEqual(q8.dtype, np.uint8)
        want = e4m3_from_f32(x.astype(np.float64) / s8.astype(np.float64))
        self.assertTrue(np.array_equal(q8, want))
        self.assertEqual(float(np.abs(decode_narrow(q8, "e4m3")).max()), 448.0)


def v2_projection(rng, ggml=True, **changes):
    """A valid projection over f16 x: an f16, an int8 and an e4m3 segment, and with `ggml`
    q4_0 and q8_0 segments from raw blocks; f16 outputs, each the f16 rounding of the exact
    product (within a correct f32-accumulating kernel's rounding)."""
    x = f16_values(rng.standard_normal((M, K)))
    w16 = f16_values(rng.standard_normal((4, K)) / 8)
    w8 = rng.integers(-127, 128, (4, K)).astype(np.int8)
    s8 = np.full((4, 2), 1 / 256, np.float32)
    wfp = e4m3_from_f32(rng.standard_normal((4, K)))
    sfp = np.full((1, 1), 1 / 64, np.float32)
    segs = [Segment("f16", 0, 4, values=w16),
            Segment("int8", 4, 8, values=w8, scales=s8, group_size=32),
            Segment("e4m3", 8, 12, values=wfp, scales=sfp, group_size=K, scale_rows=4)]
    w = [w16.astype(np.float64),
         w8.astype(np.float64) * np.repeat(s8, 32, axis=1),
         decode_narrow(wfp, "e4m3").astype(np.float64) * float(sfp[0, 0])]
    if ggml:
        q40 = rng.integers(0, 256, 4 * (K // 32) * 18, dtype=np.uint8).reshape(4, K // 32, 18)
        q40[:, :, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
        q80 = rng.integers(0, 256, 4 * (K // 32) * 34, dtype=np.uint8).reshape(4, K // 32, 34)
        q80[:, :, 0:2] = np.frombuffer(np.float16(0.002).tobytes(), np.uint8)
        q41 = rng.integers(0, 256, 4 * (K // 32) * 20, dtype=np.uint8).reshape(4, K // 32, 20)
        q41[:, :, 0:2] = np.frombuffer(np.float16(0.02).tobytes(), np.uint8)
        q41[:, :, 2:4] = np.frombuffer(np.float16(-0.15).tobytes(), np.uint8)
        segs += [segment_from_blocks(q40.tobytes(), "q4_0", 12, 4, K),
                 segment_from_blocks(q80.tobytes(), "q8_0", 16, 4, K),
                 segment_from_blocks(q41.tobytes(), "q4_1", 20, 4, K)]
        d, m = float(np.float16(0.02)), float(np.float16(-0.15))
        w += [(segs[3].codes.astype(np.float64) - 8) * float(np.float16(0.01)),
              segs[4].values.astype(np.float64) * float(np.float16(0.002)),
              # dequant f32, either order: fl32(q*d + m) is one of the weights ncert allows
              (segs[5].codes.astype(np.float32) * np.float32(d) + np.float32(m)).astype(np.float64)]
    weights = np.concatenate(w)
    kw: dict[str, Any] = dict(x=x, weights=segs, accumulator="f32-rn", output_dtype="f16",
                              selector=np.arange(M, dtype=np.int32))
    kw.update(changes)
    xv = x.astype(np.float64)
    if kw.get("x_quant") is not None:
        xv = dequantize_activations(kw["x_quantized"], kw["x_scales"], kw["x_quant"],
                                    kw.get("x_zero_points"))
    kw.setdefault("y_unpacked", f16_values(xv @ weights.T))
    return kw


@unittest.skipUnless(HAVE_V2_TABLE, "needs a rule table that reads dump format v2")
class V2Members(WriterCase):
    def write(self, name="v2.h5", **changes):
        path = self.tmp(name)
        with DumpWriter(path, engine="t", build="v2") as w:
            w.add_projection("q", **v2_projection(np.random.default_rng(8), **changes))
            self.assertEqual(w.schema_version, 2)
        return path

    def test_v2_projection_written_and_read_back(self):  # N = 24 with the ggml segments
        path = self.write()
        with h5py.File(path, "r") as f:
            self.assertEqual(int(f.attrs["ncert_schema_version"]), 2)
            p = f["/projections/q"]
            self.assertEqual(p["x"].dtype, np.float16)
            self.assertEqual(p["y_unpacked"].dtype, np.float16)
            self.assertEqual(p["weight/s1_int8/values"].dtype, np.int8)
            self.assertEqual(p["weight/s2_e4m3/values"].dtype, np.uint8)
            self.assertEqual(p["weight/s2_e4m3/values"].attrs["dtype"], "e4m3")
            self.assertEqual(int(p["weight/s2_e4m3"].attrs["scale_rows"]), 4)
            q40 = p["weight/s3_af4"]
            self.assertEqual(q40.attrs["variant"], "zero-point")
            self.assertEqual(q40.attrs["packing"], "u8-lsb")
            self.assertEqual(q40["codes"].shape, (4, K // 2))
            self.assertEqual(q40["scales"].dtype, np.float16)
            self.assertEqual(p["weight/s4_int8/values"].dtype, np.int8)

    def test_v1_dump_stays_version_1(self):
        with DumpWriter(self.tmp(), engine="t", build="v1") as w:
            w.add_projection("q", **base_projection())
            self.assertEqual(w.schema_version, 1)
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(int(f.attrs["ncert_schema_version"]), 1)

    def test_fp8_tensor_and_f16_logits_need_version_2(self):
        with DumpWriter(self.tmp(), engine="t", build="v2") as w:
            w.add_tensor("kv", e4m3_from_f32(np.arange(6.0)), dtype="e4m3")
            self.assertEqual(w.schema_version, 2)
            logits = f16_values(np.random.default_rng(9).standard_normal((2, 5)))
            w.add_logits_run("r", tokens=logits.argmax(axis=1).astype(np.int32), logits=logits)
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f["/tensors/kv"].attrs["dtype"], "e4m3")
            self.assertEqual(f["/logits/r/logits"].dtype, np.float16)

    def test_activation_quantization_members(self):
        rng = np.random.default_rng(10)
        kw = v2_projection(rng)
        q, s, _ = quantize_activations(kw["x"], K, "int8", group=32)
        path = self.write(x=kw["x"], x_quant="int8", x_quant_group=32, x_quantized=q, x_scales=s)
        with h5py.File(path, "r") as f:
            p = f["/projections/q"]
            self.assertEqual(p.attrs["x_quant"], "int8")
            self.assertEqual(p["x_quantized"].dtype, np.int8)
            self.assertEqual(p["x_scales"].shape, (M, 2))

    def test_codes_given_as_x_are_refused_with_the_member_they_belong_to(self):
        # An int8 array is stored as values (an integer array is values), so x = the codes with
        # x_quant = "int8" would be seen only by check's quantize: refused here, naming both.
        rng = np.random.default_rng(12)
        kw = v2_projection(rng)
        q, s, _ = quantize_activations(kw["x"], K, "int8", group=32)
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            with self.assertRaises(DumpFormatError) as cm:
                w.add_projection("q", **dict(kw, x=q, x_quant="int8", x_quant_group=32,
                                             x_quantized=q, x_scales=s))
            self.assertEqual((cm.exception.name, cm.exception.path),
                             ("invalid-argument", "/projections/q/x"))
            self.assertIn('x is an int8 array while x_quant = "int8"', cm.exception.message)
            self.assertIn("pass the codes as x_quantized", cm.exception.message)
            # Without x_quant an int8 x is values, as before.
            w.add_projection("p", **dict(kw, x=q))

    def test_planted_faults_are_refused(self):
        rng = np.random.default_rng(11)
        kw = v2_projection(rng)
        q, s, _ = quantize_activations(kw["x"], K, "int8", group=32)
        y8 = np.zeros((M, N), np.float16)
        cases = [
            ("guard-af4-geometry", "scales are [8, 3], [ceil(rows/scale_rows), K/group_size] = [8, 2]",
             dict(y_unpacked=y8, weights=[Segment("int8", 0, N, values=np.zeros((N, K), np.int8),
                                                  group_size=32, scales=np.ones((N, 3), np.float32))])),
            ("shape-mismatch", "shape [8, 2] but the attributes require [2, *]", dict(
                y_unpacked=y8, weights=[Segment("int8", 0, N, values=np.zeros((N, K), np.int8),
                                                group_size=32, scale_rows=4,
                                                scales=np.ones((N, 2), np.float32))])),
            ("missing-attribute", 'missing attribute "group_size"', dict(
                y_unpacked=y8, weights=[Segment("int8", 0, N, values=np.zeros((N, K), np.int8),
                                                scales=np.ones((N, 1), np.float32))])),
            ("guard-af4-geometry", "group_size 24 does not divide K = 64", dict(
                y_unpacked=y8, weights=[Segment("int8", 0, N, values=np.zeros((N, K), np.int8),
                                                scales=np.ones((N, 2), np.float32), group_size=24)])),
            ("guard-af4-geometry", "x_quant_group", dict(x_quant="int8", x_quant_group=24,
                                                         x_quantized=q, x_scales=s)),
            ("invalid-argument", "x_quant_group without x_quant", dict(x_quant_group=32)),
            ("invalid-argument", "x_quant = e4m3 has no zero points", dict(
                x_quant="e4m3", x_quantized=np.zeros((M, K), np.uint8),
                x_scales=np.ones((M, 1), np.float32), x_zero_points=np.zeros((M, 1), np.uint8))),
            ("datatype-refused", "value 255 does not fit i8", dict(
                x_quant="int8", x_quantized=q.view(np.uint8), x_scales=s)),
            ("x-quant-unknown", 'x_quant "int4" is not one of', dict(
                x_quant="int4", x_quantized=q, x_scales=s)),
            ("attribute-invalid", "FP8", dict(x_quant="e4m3", x_quant_rounding="rna",
                                              x_quantized=np.zeros((M, K), np.uint8),
                                              x_scales=np.ones((M, 1), np.float32))),
        ]
        for i, (name, fragment, change) in enumerate(cases):
            with self.subTest(fragment=fragment), \
                    DumpWriter(self.tmp(f"fault{i}.h5"), engine="t", build="b") as w:
                self.refused(name, lambda: w.add_projection("q", **dict(kw, **change)), fragment)

    def test_members_the_table_lacks_are_refused(self):
        """A member the reader's table has no row for is not written: a reader built from that
        table would not read it (here a table without x_quant's rows)."""
        kw = base_projection()
        rows = {key: r for key, r in rules._RULES.items()
                if not (key[0] == "projection" and key[2].startswith("x_quant"))}
        with DumpWriter(self.tmp(), engine="t", build="gaps") as w:
            with mock.patch.object(rules, "_RULES", rows):
                q, s, _ = quantize_activations(kw["x"], 16, "int8", x_dtype="bf16")
                self.refused("invalid-argument", lambda: w.add_projection(
                    "d", x_quant="int8", x_quantized=q, x_scales=s, **kw),
                    "schema_rules.json) has no such member")
            w.add_projection("q", **kw)
            self.assertEqual(w.schema_version, 1)


@unittest.skipUnless(HAVE_NCERT and HAVE_V2_TABLE, "needs an ncert binary that reads dump format v2")
class CertifiedByNcert(TempDirCase):
    """v2 dumps written here, certified by ncert check: a correct engine passes, each planted
    fault fails the check meant for it."""

    def check(self, name, build):
        path = self.tmp(name)
        with DumpWriter(path, engine="t", build="v2") as w:
            build(w)
            self.assertEqual(w.schema_version, 2)
        code, report = ncert_json("check", path)
        verdicts = {c["id"]: c["verdict"] for c in report["checks"]}
        return code, verdicts, report

    def quantized(self, rng, x_quant, **options):
        x = f16_values(rng.standard_normal((M, K)))
        q, s, zp = quantize_activations(x, K, x_quant, **options)
        return dict(x=x, x_quant=x_quant, x_quantized=q, x_scales=s,
                    x_zero_points=zp, x_quant_group=options.get("group"),
                    x_quant_rounding=options.get("rounding"))

    def test_f16_scaled_and_ggml_weights_pass_with_their_hash(self):
        # weights_hash: ncert hashes the weights it reads and refuses a declaration that differs
        code, verdicts, report = self.check("v2.h5", lambda w: w.add_projection(
            "q", weights_hash=True, **v2_projection(np.random.default_rng(8))))
        self.assertEqual(code, 0, [(c["id"], c["verdict"], c["reason"])
                                   for c in report["checks"] if c["verdict"] != "PASS"])
        for check in ("geometry", "bound"):
            self.assertEqual(verdicts.get(f"projections/q/{check}"), "PASS", check)

    def test_a_wrong_ggml_scale_fails(self):
        kw = v2_projection(np.random.default_rng(8))
        kw["weights"][4].scales = (kw["weights"][4].scales * 2).astype(np.float16)  # q8_0 d
        code, verdicts, _ = self.check("scale.h5", lambda w: w.add_projection("q", **kw))
        self.assertEqual(code, 1)
        self.assertIn("FAIL", verdicts.values())

    def test_truncated_f16_outputs_fail(self):
        kw = v2_projection(np.random.default_rng(8), ggml=False)
        xv = kw["x"].astype(np.float64)
        w16 = kw["weights"][0].values.astype(np.float64)
        y = kw["y_unpacked"].copy()
        # rows of the f16 segment, rounded toward zero: off by an ulp wherever the result is
        # inexact, which ncert must see
        y[:, :4] = f16_truncate(xv @ w16.T).view(np.float16)
        kw["y_unpacked"] = y
        code, verdicts, _ = self.check("trunc.h5", lambda w: w.add_projection("q", **kw))
        self.assertEqual(code, 1)
        self.assertIn("FAIL", verdicts.values())

    def test_quantized_activations_pass_and_a_wrong_code_fails(self):
        cases: list[tuple[str, dict[str, Any]]] = [
            ("int8", {"group": 32}), ("int8", {"rounding": "rna"}),
            ("uint8", {"asymmetric": True, "group": 16}), ("e4m3", {"group": 32}), ("e5m2", {})]
        for i, (x_quant, options) in enumerate(cases):
            with self.subTest(x_quant=x_quant, **options):
                members = self.quantized(np.random.default_rng(9), x_quant, **options)
                kw = v2_projection(np.random.default_rng(8), ggml=False, **members)
                code, verdicts, report = self.check(f"{i}.h5",
                                                    lambda w: w.add_projection("q", **kw))
                self.assertEqual(code, 0, [(c["id"], c["verdict"], c["reason"])
                                           for c in report["checks"] if c["verdict"] != "PASS"])
                self.assertEqual(verdicts.get("projections/q/quantize"), "PASS")
                bad = dict(members)
                q = bad["x_quantized"].copy()
                q[1, 5] = q[1, 5] + 1 if x_quant in ("int8", "uint8") else q[1, 5] ^ 1
                bad["x_quantized"] = q
                kw = v2_projection(np.random.default_rng(8), ggml=False, **bad)
                code, verdicts, _ = self.check(f"{i}-bad.h5",
                                               lambda w: w.add_projection("q", **kw))
                self.assertEqual(code, 1)
                self.assertEqual(verdicts.get("projections/q/quantize"), "FAIL")

    def test_a_negative_scale_is_written_and_fails_quantize(self):
        members = self.quantized(np.random.default_rng(9), "int8", group=32)
        members["x_scales"] = members["x_scales"].copy()
        members["x_scales"][2, 1] = -members["x_scales"][2, 1]  # an engine's bug, not the dump's
        kw = v2_projection(np.random.default_rng(8), ggml=False, **members)
        code, verdicts, _ = self.check("negative.h5", lambda w: w.add_projection("q", **kw))
        self.assertEqual(code, 1)
        self.assertEqual(verdicts.get("projections/q/quantize"), "FAIL")

    def test_f16_logits_and_fp8_tensor(self):
        logits = f16_values(np.random.default_rng(10).standard_normal((3, 7)))

        def build(w):
            w.add_logits_run("r", tokens=logits.astype(np.float32).argmax(axis=1).astype(np.int32),
                             logits=logits)
            w.add_tensor("kv", e4m3_from_f32(np.linspace(-3, 3, 8)), dtype="e4m3")

        code, verdicts, report = self.check("logits.h5", build)
        self.assertEqual(code, 0, report)


if __name__ == "__main__":
    unittest.main()
