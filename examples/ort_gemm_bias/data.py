"""Shapes, the seeded inputs, the packing geometry and the exact emulation of MLAS' order, shared
by run.py and measure.py.

Two shapes. The main one: K = 1536 (6 blocks of MLAS_SGEMM_PACKED_STRIDEK = 256 terms, the
walk `splitk:6:seq/seq-fma`), N = 256, x ~ N(0, 1), w ~ N(0, 0.02²), bias ~ N(0, 1): the bias
is as large as the products' sum (about 0.8), so adding it first or last changes the bits of
about half the outputs. The small-activations one: K = 4096, N = 256, the rows of four of the
eight requests scaled by 1e-5, the bias ~ N(0, 1): there |bias| dwarfs the products' magnitudes
S, and the 16 block additions, each rounding at the bias's magnitude, err by more than the
bound of a sum added once to the bias allows.
"""

from __future__ import annotations

import numpy as np

# The packed path's geometry and its gather and scatter, shared with the other ONNX Runtime
# examples (examples/common, on sys.path beside this folder).
from packed_path import Packing, gather, kBlockRows, kCap, kCommit, kRequests, packing, scatter  # noqa: F401

kM, kN = 32, 256
kK = 1536  # the main dumps: 6 blocks of 256
kKSmall = 4096  # the small-activations dumps: 16 blocks of 256
kStrideK = 256  # MLAS_SGEMM_PACKED_STRIDEK: MLAS adds each block of 256 terms into the output
kSmallScale = 1e-5
kSmallRequests = (1, 3, 5, 7)  # the requests whose rows are scaled by kSmallScale


def walk(k: int) -> str:
    """The k_walk of MLAS' prepacked SGEMM at depth k (a multiple of 256)."""
    return f"splitk:{k // kStrideK}:seq/seq-fma"


def weights(k: int, seed: int):
    """w float32 [N, k] ~ N(0, 0.02²) and bias float32 [N] ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((kN, k)) * 0.02).astype(np.float32)
    bias = rng.standard_normal(kN).astype(np.float32)
    return w, bias


def activations(k: int, seed: int, small: bool = False) -> np.ndarray:
    """x float32 [M, k] ~ N(0, 1); with `small` the rows of kSmallRequests scaled by 1e-5."""
    x = np.random.default_rng(seed).standard_normal((kM, k))
    if small:
        for r in kSmallRequests:
            x[r * kBlockRows:(r + 1) * kBlockRows] *= kSmallScale
    return x.astype(np.float32)


def small_rows() -> np.ndarray:
    """The row indices of kSmallRequests."""
    return np.array([r * kBlockRows + i for r in kSmallRequests for i in range(kBlockRows)])


# The exact emulation (measure.py, and run.py's own cross-check): f32 arithmetic done in f64
# with one correct rounding per operation.

def _round_to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """s = fl64(a + b) and e its exact error (a + b = s + e): the sum rounded to odd in f64
    (truncated, the last bit set when inexact). Rounding that to f32 rounds a + b correctly
    (53 >= 24 + 2 bits: no double rounding)."""
    bits = s.view(np.uint64)
    even = (bits & np.uint64(1)) == 0
    fix = (e != 0) & even
    out = s.copy()
    out[fix] = np.nextafter(s[fix], np.where(e[fix] > 0, np.inf, -np.inf))
    return out


def fl32_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fl32(a + b) for f32 values held in f64 arrays, correctly rounded."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)  # TwoSum: a + b = s + e exactly
    return _round_to_odd(s, e).astype(np.float32).astype(np.float64)


def fma32(x: np.ndarray, w: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """fmaf(x, w, acc) elementwise (x·w is exact in f64: 24 + 24 bits)."""
    return fl32_add(x * w, acc)


def emulate(x: np.ndarray, w: np.ndarray, bias: np.ndarray, parts: int, bias_first: bool) -> np.ndarray:
    """`splitk:<parts>:seq/seq-fma` with the bias added first (bias_at = start: total =
    fl32(p_0 + bias), then fl32(total + p_i)) or last (bias_at = end: the parts summed, then
    fl32(total + bias)). Returns float32 [M, N]."""
    m, k = x.shape
    xe = x.astype(np.float64)
    we = w.astype(np.float64)
    size = k // parts
    b = np.broadcast_to(bias.astype(np.float64), (m, w.shape[0]))
    total = None
    for s in range(parts):
        acc = np.zeros((m, w.shape[0]))
        for i in range(s * size, (s + 1) * size):
            acc = fma32(xe[:, i:i + 1], we[None, :, i], acc)
        if total is None:
            total = fl32_add(acc, b) if bias_first else acc
        else:
            total = fl32_add(total, acc)
    assert total is not None
    if not bias_first:
        total = fl32_add(total, b)
    return total.astype(np.float32)
