"""Inputs, packing geometry and narrow-float helpers shared by export.py and measure.py.

Shapes: K = 1536, the least K at which the f16 bound is an f16 ulp or more at every output
(docs/error-bounds.md §6a), so truncation of the output is invisible to `bound` and only the
`bias` check can see it; N = 512 and M = 32 rows give the bias test about 10,000 counted values
(a limit near 0.2 ulp against truncation's -0.5). x ~ N(0, 1), w ~ N(0, 0.02²), as the
fixtures' scales.
"""

from __future__ import annotations

import numpy as np

# The packed path's geometry and its gather and scatter, shared with the other ONNX Runtime
# examples (examples/common, on sys.path beside this folder).
from packed_path import Packing, gather, kBlockRows, kCap, kCommit, kRequests, packing, scatter  # noqa: F401

kM, kK, kN = 32, 1536, 512


def inputs(seed: int):
    """x float16 [M, K], w float16 [N, K], and the same values as bf16 patterns (uint16)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((kM, kK))
    w = rng.standard_normal((kN, kK)) * 0.02
    return x.astype(np.float16), w.astype(np.float16), bf16_rne(x), bf16_rne(w)


def bf16_rne(v) -> np.ndarray:
    """bf16 patterns (uint16) of v rounded to nearest even (v finite; via f32, whose rounding
    from f64 is the only other one: inputs are drawn, not certified, so that is harmless)."""
    u = np.asarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_rz(v32: np.ndarray) -> np.ndarray:
    """bf16 patterns of f32 values v32 truncated toward zero."""
    return (np.asarray(v32, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def f32_of_bf16(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def f16_rz(v32: np.ndarray) -> np.ndarray:
    """f32 values rounded to f16 toward zero (numpy's cast rounds to nearest even; step back
    toward zero where that went outward)."""
    v = np.asarray(v32, dtype=np.float32)
    h = v.astype(np.float16)
    out = np.abs(h.astype(np.float64)) > np.abs(v.astype(np.float64))
    h[out] = np.nextafter(h[out], np.float16(0))
    return h


def ulp_f16(c: np.ndarray) -> np.ndarray:
    """f16 spacing at |c| (2^(e-10) in [2^e, 2^(e+1)), 2^-24 below 2^-14)."""
    e = np.floor(np.log2(np.maximum(np.abs(c), 2.0 ** -14)))
    return 2.0 ** (e - 10)


def ulp_bf16(c: np.ndarray) -> np.ndarray:
    e = np.floor(np.log2(np.maximum(np.abs(c), 2.0 ** -126)))
    return 2.0 ** (e - 7)
