"""Bit-exact bf16 / f16 codecs, vectorised with numpy.

ncert compares and hashes raw bit patterns, so a writer must produce exactly the patterns the
C++ reference (reference/float_bits.h) would: round to nearest, ties to even; overflow to
infinity; subnormals kept; a NaN stays a NaN with its sign and top payload bits and the quiet
bit forced. Every function here is an integer transcription of its C++ counterpart, so the
result never depends on the CPU's conversion instructions or numpy's casting rules.

bf16 and f16 values travel as ``numpy.uint16`` arrays of bit patterns (numpy has no bfloat16).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "bf16_from_f32",
    "bf16_truncate",
    "f32_from_bf16",
    "f16_from_f32",
    "f32_from_f16",
    "decode",
]


def _f32_bits(a) -> np.ndarray:
    """The uint32 patterns of `a` as f32, flattened (float64 input is rounded to nearest f32).

    Flat 1-D arrays keep numpy in array arithmetic, where uint32 sums wrap silently as in C++
    (0-d inputs would become numpy scalars, which warn on wrap-around).
    """
    f = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).reshape(-1)
    return f.view(np.uint32)


def _shape_of(a) -> tuple:
    return np.shape(a)


def bf16_from_f32(a) -> np.ndarray:
    """Round to nearest even bf16 patterns (uint16), like reference::f32_to_bf16.

    NaN keeps its sign and top 6 payload bits with the quiet bit forced (0x0040), so a NaN never
    becomes an infinity; overflow rounds to +-inf; subnormals are kept.
    """
    u = _f32_bits(a)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    # The C++ adds in uint32; only NaN patterns can wrap, and those are replaced below.
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (u >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16).reshape(_shape_of(a))


def bf16_truncate(a) -> np.ndarray:
    """Round toward zero (keep the top 16 bits), NaN as in `bf16_from_f32`.

    This is what a careless kernel does; tests use it to build outputs ncert must reject.
    """
    u = _f32_bits(a)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    top = u >> np.uint32(16)
    return np.where(nan, top | np.uint32(0x0040), top).astype(np.uint16).reshape(_shape_of(a))


def f32_from_bf16(u16) -> np.ndarray:
    """Exact: a bf16 is the top half of an f32 (NaN payloads kept as they are)."""
    u = np.asarray(u16)
    if u.dtype != np.uint16:
        raise TypeError(f"bf16 patterns must be uint16, got {u.dtype}")
    wide = u.astype(np.uint32).reshape(-1) << np.uint32(16)
    return wide.view(np.float32).reshape(u.shape)


def f16_from_f32(a) -> np.ndarray:
    """Round to nearest even IEEE binary16 patterns (uint16), like reference::f32_to_f16.

    Overflow (>= 65520) goes to +-inf; NaN keeps its sign and top 10 payload bits with the quiet
    bit forced (0x0200); subnormals are rounded to nearest even units of 2^-24.
    """
    u = _f32_bits(a)
    sign = ((u >> np.uint32(16)) & np.uint32(0x8000)).astype(np.uint32)
    mag = u & np.uint32(0x7FFFFFFF)
    nan = mag > np.uint32(0x7F800000)
    overflow = mag >= np.uint32(0x477FF000)
    normal = mag >= np.uint32(0x38800000)
    # Normal range: rebias the exponent by 127 - 15 = 112, then round the 13 dropped bits.
    r = mag - np.uint32(0x38000000)
    r = (r + np.uint32(0xFFF) + ((r >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
    # Subnormal or zero: units of 2^-24; the scaling is exact and rint rounds to nearest even.
    # (Normal, infinite and NaN lanes are zeroed first so no lane overflows the cast.)
    small = np.where(normal, np.float32(0.0), mag.view(np.float32)) * np.float32(16777216.0)
    units = np.rint(small).astype(np.uint32)
    out = np.where(normal, r, units)
    out = np.where(overflow, np.uint32(0x7C00), out)
    out = np.where(nan, np.uint32(0x7E00) | ((mag >> np.uint32(13)) & np.uint32(0x3FF)), out)
    return (sign | out).astype(np.uint16).reshape(_shape_of(a))


def f32_from_f16(u16) -> np.ndarray:
    """Exact decode of binary16 patterns (subnormals and NaN payloads kept), like the C++."""
    h = np.asarray(u16)
    if h.dtype == np.float16:
        h = np.ascontiguousarray(h).view(np.uint16)
    if h.dtype != np.uint16:
        raise TypeError(f"f16 patterns must be uint16 or float16, got {h.dtype}")
    shape = h.shape
    h = h.astype(np.uint32).reshape(-1)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    exp = (h >> np.uint32(10)) & np.uint32(0x1F)
    man = h & np.uint32(0x3FF)
    special = sign | np.uint32(0x7F800000) | (man << np.uint32(13))
    normal = sign | ((exp + np.uint32(112)) << np.uint32(23)) | (man << np.uint32(13))
    sub = (man.astype(np.float32) * np.float32(2.0 ** -24)).view(np.uint32) | sign
    bits = np.where(exp == 0x1F, special, np.where(exp != 0, normal, sub))
    return bits.astype(np.uint32).view(np.float32).reshape(shape)


def decode(stored, dtype: str) -> np.ndarray:
    """The exact float32 values of stored elements of ncert dtype `dtype` (f32, f16 or bf16)."""
    if dtype == "f32":
        return np.asarray(stored, dtype=np.float32)
    if dtype == "bf16":
        return f32_from_bf16(stored)
    if dtype == "f16":
        return f32_from_f16(stored)
    raise ValueError(f"decode: {dtype!r} is not one of f32, f16, bf16")
