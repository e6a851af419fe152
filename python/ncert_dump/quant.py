"""Activation quantization (dump-format v2, projection members x_quant...): a numpy reference
of what an engine that quantizes x before the product writes, to produce legitimate dumps.

q = sat(round(x / s) + zp) for int8 / uint8 (round: "rne" ties to even, "rna" ties away from
zero), q = sat_fp8(rne(x / s)) for e4m3 / e5m2, one scale (and zero point) per row and group of
`group` columns of the K valid columns. The quotient is computed exactly (in f64: x and s are at
most f32, so x / s rounds once, far inside the check's 2^-22 tolerance, and a tie stays a tie).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .codecs import decode, round_narrow
from .encode import encode_float

__all__ = ["X_QUANTS", "quantize_activations", "dequantize_activations"]

#: x_quant values and (stored type of x_quantized, largest magnitude, smallest value).
X_QUANTS = {"int8": ("i8", 127, -128), "uint8": ("u8", 255, 0), "e4m3": ("e4m3", 448.0, -448.0),
            "e5m2": ("e5m2", 57344.0, -57344.0)}


def _round_int(v: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "rne":
        return np.rint(v)
    if rounding == "rna":
        return np.sign(v) * np.floor(np.abs(v) + 0.5)
    raise ValueError(f"x_quant_rounding {rounding!r} is not one of rne, rna")


def quantize_activations(x, k: int, x_quant: str, group: Optional[int] = None,
                         rounding: str = "rne", scale_dtype: str = "f32",
                         asymmetric: bool = False, x_dtype: Optional[str] = None):
    """(x_quantized, x_scales, x_zero_points or None) for the first `k` columns of `x`.

    `x`: [M, >= k] values (or patterns with `x_dtype`, as add_projection takes them). Scales
    are absmax / qmax per group (min..max / 255 with a zero point for `asymmetric` uint8),
    rounded into `scale_dtype` (f32, f16, bf16), 1 for an all-zero group. x_quantized is int8 /
    uint8 integers or e4m3 / e5m2 uint8 patterns; x_scales float32 values exact in
    `scale_dtype` (pass it as x_scales_dtype).
    """
    if x_quant not in X_QUANTS:
        raise ValueError(f"x_quant {x_quant!r} is not one of {', '.join(X_QUANTS)}")
    stored = encode_float(x, x_dtype, "/x", arg="x_dtype")
    xv = decode(stored.array.view(np.uint16) if stored.dtype == "bf16" else stored.array,
                stored.dtype).astype(np.float64)[:, :k]
    m = xv.shape[0]
    group = k if group is None else group
    if group < 1 or k % group:
        raise ValueError(f"x_quant_group {group} does not divide K = {k}")
    g = xv.reshape(m, k // group, group)
    _kind, qmax, qmin = X_QUANTS[x_quant]
    zp = None
    if asymmetric:
        if x_quant != "uint8":
            raise ValueError("asymmetric quantization (zero points) is uint8 only")
        lo, hi = np.minimum(g.min(axis=2), 0.0), np.maximum(g.max(axis=2), 0.0)
        span = (hi - lo) / 255.0
    else:
        span = np.abs(g).max(axis=2) / float(qmax)
    span = np.where(span > 0, span, 1.0)
    if scale_dtype == "f32":
        s = span.astype(np.float32).astype(np.float64)
    else:
        s = decode(round_narrow(span, scale_dtype), scale_dtype).astype(np.float64)
    s = np.where((s > 0) & np.isfinite(s), s, 1.0)
    quotient = g / s[:, :, None]
    if x_quant in ("e4m3", "e5m2"):
        q = round_narrow(quotient, x_quant, "rne", "saturate").reshape(m, k)
        return q, s.astype(np.float32), None
    if asymmetric:
        zp = np.clip(_round_int(-lo / s, rounding), 0, 255)
        q = np.clip(_round_int(quotient, rounding) + zp[:, :, None], qmin, qmax)
        return q.reshape(m, k).astype(np.uint8), s.astype(np.float32), zp.astype(np.uint8)
    q = np.clip(_round_int(quotient, rounding), qmin, qmax)
    dtype = np.int8 if x_quant == "int8" else np.uint8
    return q.reshape(m, k).astype(dtype), s.astype(np.float32), None


def dequantize_activations(q, scales, x_quant: str, zero_points=None) -> np.ndarray:
    """The exact f64 activations (q - zp) * s the projection then uses in place of x."""
    qa = np.asarray(q)
    qv = decode(qa, x_quant).astype(np.float64) if x_quant in ("e4m3", "e5m2") \
        else qa.astype(np.float64)
    s = np.asarray(scales, dtype=np.float64)
    m, k = qv.shape
    group = k // s.shape[1]
    zp = np.zeros_like(s) if zero_points is None else np.asarray(zero_points, dtype=np.float64)
    return ((qv.reshape(m, -1, group) - zp[:, :, None]) * s[:, :, None]).reshape(m, k)
