"""A complete dump written from numpy — a packed projection over bf16 and AF4 weights with
its selector, y_before and outputs computed as a correct engine would, an lm_head with its
greedy logits run, a state tensor — read back with h5py and certified by the real ncert."""

from __future__ import annotations

import time
import unittest

import h5py
import numpy as np

from ncert_dump import (DumpWriter, Segment, bf16_from_f32, bf16_truncate, canonical_selector,
                        dequantize, f16_from_f32, f32_from_bf16, f32_from_f16, pack_codes,
                        pack_rows, quantize_affine, quantize_codebook, scatter_rows)
from ncert_dump.torch_helpers import greedy_token

from .support import HAVE_NCERT, TempDirCase, ncert_json, run_ncert

R, B, CAP, P = 2, 4, 2, 4
M = R * B
K, IN_STRIDE = 64, 72
N, OUT_STRIDE = 24, 32
COMMITS = np.array([2, 1], np.int32)


def engine_outputs(x_bf16, w_f64, bias_f32):
    """y = x·Wᵀ + bias in f64 from the exact stored values, rounded to f32 then to bf16 (RNE):
    within a correct f32-accumulating kernel's rounding, as ncert's bound allows."""
    xv = f32_from_bf16(x_bf16[:, :K]).astype(np.float64)
    y = xv @ w_f64.T + bias_f32.astype(np.float64)
    return bf16_from_f32(y.astype(np.float32))


def build_dump(path, rng, *, truncate=False):
    """Writes the dump; returns what was written for the read-back checks."""
    x = bf16_from_f32(rng.standard_normal((M, IN_STRIDE)))  # padding columns hold junk too
    w_bf16 = bf16_from_f32(rng.standard_normal((12, K)) / 8)
    codes_a, scales_a, biases_a = quantize_affine(rng.standard_normal((8, K)) / 8, 32, "bf16")
    codes_c, scales_c = quantize_codebook(rng.standard_normal((4, K)) / 8, 16, "nf4", "f16")
    bias = rng.standard_normal(N).astype(np.float32)
    w = np.concatenate([
        f32_from_bf16(w_bf16).astype(np.float64),
        dequantize(codes_a, scales_a, biases_a, group_size=32, variant="affine"),
        dequantize(codes_c, f32_from_f16(f16_from_f32(scales_c)), group_size=16,
                   variant="codebook", codebook="nf4"),
    ])
    y_rows = engine_outputs(x, w, bias)  # [M, N] bf16 patterns

    # Packed path: gather with the helper, run "the kernel" on compact rows, scatter back.
    compact_x, selector = pack_rows(x, R, B, CAP, P, COMMITS)
    assert np.array_equal(selector, canonical_selector(B, COMMITS, P))
    used = selector >= 0
    assert np.array_equal(compact_x[used], x[selector[used]])
    y_compact = np.zeros((P, OUT_STRIDE), np.uint16)
    y_compact[used, :N] = engine_outputs(compact_x[used], w, bias)
    if truncate:  # a careless packed kernel: keeps the top 16 bits of its f32 result
        xv = f32_from_bf16(compact_x[used, :K]).astype(np.float64)
        y_compact[used, :N] = bf16_truncate((xv @ w.T + bias).astype(np.float32))
    y_before = bf16_from_f32(rng.standard_normal((M, OUT_STRIDE)))
    y_packed = scatter_rows(y_compact[:, :N], selector, y_before.copy())
    y_unpacked = y_before.copy()
    y_unpacked[:, :N] = y_rows

    # lm_head and its greedy run: logits are the lm_head's f32 outputs, bit for bit.
    t, hidden, vocab = 5, 32, 48
    hx = bf16_from_f32(rng.standard_normal((t, hidden)))
    hw = bf16_from_f32(rng.standard_normal((vocab, hidden)) / 4)
    logits = (f32_from_bf16(hx).astype(np.float64) @
              f32_from_bf16(hw).astype(np.float64).T).astype(np.float32)
    tokens = np.array([greedy_token(row) for row in logits], np.int32)

    with DumpWriter(path, engine="numpy-test", build="roundtrip", model="tiny",
                    device="cpu") as dw:
        dw.add_projection(
            "mlp_up", x=x, x_dtype="bf16", in_stride=IN_STRIDE, out_stride=OUT_STRIDE,
            weights=[
                Segment("bf16", 0, 12, values=w_bf16),
                Segment("af4", 12, 20, codes=codes_a, scales=bf16_from_f32(scales_a),
                        biases=bf16_from_f32(biases_a), scale_dtype="bf16", group_size=32, variant="affine",
                        packing="u32-lsb", dequant="exact"),
                Segment("af4", 20, 24, packed_codes=pack_codes(codes_c, "u8-msb"),
                        scales=f16_from_f32(scales_c).view(np.float16), group_size=16,
                        variant="codebook", codebook="nf4", packing="u8-msb"),
            ],
            accumulator="f32-rn", output_dtype="bf16", epilogue="bias", bias=bias,
            bias_dtype="f32",
            selector=selector, commit_counts=COMMITS, requests=R, block_rows=B, cap=CAP,
            y_unpacked=y_unpacked, y_packed=y_packed, y_compact=y_compact, y_before=y_before,
            layer=3, role="mlp_up")
        dw.add_projection("lm_head", x=hx, x_dtype="bf16", weights=[Segment("bf16", 0, vocab, values=hw)],
                          accumulator="f32-rn", output_dtype="f32",
                          selector=np.arange(t, dtype=np.int32), y_unpacked=logits,
                          logits_run="greedy")
        dw.add_logits_run("greedy", tokens=tokens, logits=logits,
                          positions=np.arange(7, 7 + t, dtype=np.int64),
                          prompt_tokens=np.array([1, 2, 3, 4, 5, 6, 7], np.int32),
                          prompt="p0", tie_break="lowest", chunk_rows=2, compression="deflate")
        dw.add_tensor("layer0/k_cache", bf16_from_f32(rng.standard_normal((2, 3, 4))), dtype="bf16",
                      compare="ulp:1")
    return {"x": x, "y_packed": y_packed, "selector": selector, "codes_a": codes_a,
            "logits": logits}


class RoundTrip(TempDirCase):
    def setUp(self):
        super().setUp()
        self.written = build_dump(self.tmp(), np.random.default_rng(20240))

    def test_read_back_with_h5py(self):
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f.attrs["ncert_schema"], "ncert-dump")
            self.assertEqual(int(f.attrs["ncert_schema_version"]), 1)
            self.assertEqual(f.attrs["device"], "cpu")
            q = f["/projections/mlp_up"]
            self.assertEqual({a: q.attrs[a] for a in ("k", "n", "in_stride", "out_stride")},
                             {"k": K, "n": N, "in_stride": IN_STRIDE, "out_stride": OUT_STRIDE})
            self.assertEqual(q["x"].dtype, np.dtype("<u2"))
            self.assertEqual(q["x"].attrs["dtype"], "bf16")
            self.assertTrue(np.array_equal(q["x"][()], self.written["x"]))
            self.assertEqual(q["selector"].dtype, np.dtype("<i4"))
            self.assertEqual(q["commit_counts"].dtype, np.dtype("<i4"))
            self.assertEqual(q["bias"].dtype, np.dtype("<f4"))
            self.assertTrue(np.array_equal(q["y_packed"][()], self.written["y_packed"]))
            seg = q["weight/s1_af4"]
            self.assertEqual(seg["codes"].dtype, np.dtype("<u4"))
            self.assertEqual(seg["codes"].shape, (8, K // 8))
            self.assertTrue(np.array_equal(
                pack_codes(self.written["codes_a"], "u32-lsb"), seg["codes"][()]))
            self.assertEqual(q["weight/s2_af4/codes"].dtype, np.dtype("u1"))
            self.assertEqual(q["weight/s2_af4/scales"].dtype, np.dtype("<f2"))
            run = f["/logits/greedy"]
            self.assertEqual(run["positions"].dtype, np.dtype("<i8"))
            self.assertEqual(run["logits"].chunks, (2, 48))
            self.assertEqual(run["logits"].compression, "gzip")
            self.assertTrue(run["logits"].shuffle)
            self.assertEqual(f["/tensors/layer0/k_cache"].attrs["compare"], "ulp:1")
            # Every object is reached by exactly one link (no hard or soft links).
            seen: dict[int, list[str]] = {}
            f.visititems(lambda name, obj: seen.setdefault(
                h5py.h5o.get_info(obj.id).addr, []).append(name))
            self.assertTrue(all(len(v) == 1 for v in seen.values()), seen)
            kinds = []
            f.id.links.visit(lambda name, info: kinds.append(info.type), info=True)
            self.assertEqual(len(kinds), len(seen))
            self.assertTrue(all(t == h5py.h5l.TYPE_HARD for t in kinds))

    def test_same_inputs_give_byte_identical_files(self):
        # HDF5 timestamps have a one-second resolution: a second later, any stored time differs.
        time.sleep(1.1)
        other = self.tmp("again.h5")
        build_dump(other, np.random.default_rng(20240))
        with open(self.tmp(), "rb") as a, open(other, "rb") as b:
            self.assertEqual(a.read(), b.read())

    @unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
    def test_ncert_check_passes(self):
        code, report = ncert_json("check", self.tmp())
        self.assertEqual(code, 0, [(c["id"], c["verdict"], c["reason"]) for c in report["checks"]])
        verdicts = {c["id"]: c["verdict"] for c in report["checks"]}
        for check in ("geometry", "identity", "bound", "untouched", "vacuity"):
            self.assertEqual(verdicts.get(f"projections/mlp_up/{check}"), "PASS", check)
        self.assertTrue(any(i.startswith("logits/greedy/") for i in verdicts))

    @unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
    def test_ncert_inspect_passes(self):
        code, out, err = run_ncert("inspect", self.tmp())
        self.assertEqual(code, 0, out + err)
        self.assertIn("/projections/mlp_up/weight/s1_af4/codes  u32[8, 8]", out)

    @unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
    def test_a_packed_path_that_truncates_fails_identity(self):
        # The writer stores what the engine computed, never "fixing" it: ncert must see it.
        bad = self.tmp("truncating.h5")
        build_dump(bad, np.random.default_rng(20240), truncate=True)
        code, report = ncert_json("check", bad)
        self.assertEqual(code, 1)
        failed = {c["id"] for c in report["checks"] if c["verdict"] == "FAIL"}
        self.assertIn("projections/mlp_up/identity", failed)


if __name__ == "__main__":
    unittest.main()
