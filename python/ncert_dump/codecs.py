"""Bit-exact codecs of the narrow float types (bf16, f16, e4m3, e5m2), vectorised with numpy.

ncert compares and hashes raw bit patterns, so a writer must produce exactly the patterns the
C++ reference (reference/float_bits.h) would: round to nearest, ties to even; overflow to
infinity; subnormals kept; a NaN stays a NaN with its sign and top payload bits and the quiet
bit forced. Every function here is an integer transcription of its C++ counterpart, so the
result never depends on the CPU's conversion instructions or numpy's casting rules.

bf16 and f16 values travel as ``numpy.uint16`` arrays of bit patterns (numpy has no bfloat16),
e4m3 and e5m2 (OCP E4M3FN and E5M2) as ``numpy.uint8`` patterns.

`round_narrow` is the general rounding into f16, bf16, e4m3 or e5m2 of float32 or float64
values, each rounded once (no detour through f32), in the modes and overflow rules of
reference/narrow_float.h (`narrow_round`): to nearest even, to nearest away, toward zero; IEEE
overflow (infinity, or NaN for e4m3, which has none) or OCP ``satfinite`` saturation; a NaN
becomes the format's quiet NaN with its sign. It works on the integer bits of the f64 values, so
no FP8 library and no CPU conversion instruction is involved.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

__all__ = [
    "bf16_from_f32",
    "bf16_truncate",
    "f32_from_bf16",
    "f16_from_f32",
    "f32_from_f16",
    "f16_truncate",
    "e4m3_from_f32",
    "e5m2_from_f32",
    "f32_from_e4m3",
    "f32_from_e5m2",
    "round_narrow",
    "nan_patterns",
    "decode_narrow",
    "NARROW_FORMATS",
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


class NarrowFormat(NamedTuple):
    """One narrow binary float format (reference/narrow_float.h)."""

    exponent_bits: int
    mantissa_bits: int  # stored fraction bits
    bias: int
    has_infinity: bool  # False for E4M3FN: its top exponent holds finite values and one NaN
    max_finite: float

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def max_pattern(self) -> int:
        """The pattern of the largest finite magnitude."""
        top = (1 << (self.exponent_bits + self.mantissa_bits)) - 1
        return top - (1 << self.mantissa_bits) if self.has_infinity else top - 1

    @property
    def nan_pattern(self) -> int:
        """The quiet NaN (positive): quiet bit set for IEEE formats, all ones for E4M3FN."""
        e_all = ((1 << self.exponent_bits) - 1) << self.mantissa_bits
        m = 1 << (self.mantissa_bits - 1) if self.has_infinity else (1 << self.mantissa_bits) - 1
        return e_all | m

    @property
    def inf_pattern(self) -> int:
        """+inf (the NaN for a format without infinities)."""
        if not self.has_infinity:
            return self.nan_pattern
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits


#: The narrow formats by ncert type name.
NARROW_FORMATS: dict[str, NarrowFormat] = {
    "f16": NarrowFormat(5, 10, 15, True, 65504.0),
    "bf16": NarrowFormat(8, 7, 127, True, float.fromhex("0x1.FEp127")),
    "e4m3": NarrowFormat(4, 3, 7, False, 448.0),
    "e5m2": NarrowFormat(5, 2, 15, True, 57344.0),
}

_PATTERN_DTYPES = {8: np.uint8, 16: np.uint16}
ROUNDINGS = ("rne", "rna", "rz")
OVERFLOWS = ("ieee", "saturate")


def _format(dtype: str) -> NarrowFormat:
    try:
        return NARROW_FORMATS[dtype]
    except KeyError:
        raise ValueError(f"{dtype!r} is not one of {', '.join(NARROW_FORMATS)}") from None


def nan_patterns(f32_bits, dtype: str) -> np.ndarray:
    """The `dtype` patterns closest to f32 NaNs given as their uint32 bits: the sign, and the top
    payload bits as they are (no quiet bit forced); E4M3FN's one NaN for e4m3. Where the payload
    does not fit (or truncates to 0: an infinity), decoding the result does not give the bits
    back: the writer uses this to convert a NaN only when it survives exactly."""
    u = np.asarray(f32_bits, dtype=np.uint32)
    f = _format(dtype)
    sign = (u >> np.uint32(31)).astype(np.int64) << (f.width - 1)
    if not f.has_infinity:
        out = np.int64(f.nan_pattern) | sign
    else:
        e_all = ((1 << f.exponent_bits) - 1) << f.mantissa_bits
        m = ((u & np.uint32(0x7FFFFF)) >> np.uint32(23 - f.mantissa_bits)).astype(np.int64)
        out = np.int64(e_all) | m | sign
    return np.asarray(out).astype(_PATTERN_DTYPES[f.width])


def round_narrow(a, dtype: str, rounding: str = "rne", overflow: Optional[str] = None) -> np.ndarray:
    """Patterns (uint16 for f16/bf16, uint8 for e4m3/e5m2) of `a` rounded once into `dtype`.

    `a`: float32 or float64 values (float32 widens to f64 exactly, so both round once).
    `rounding`: "rne" (to nearest, ties to even), "rna" (ties away from zero), "rz" (toward
    zero). `overflow`: "ieee" (a result beyond the largest finite value is +-inf where the mode
    rounds away from zero, else the largest finite value; e4m3 has no infinity and gives NaN) or
    "saturate" (OCP satfinite: the largest finite value, infinite inputs included); the default
    is "saturate" for e4m3, as dump-format v2 converts into it, and "ieee" otherwise. NaN becomes
    the quiet NaN with the input's sign; -0 stays -0, and so does a negative value rounding to 0.
    """
    f = _format(dtype)
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding {rounding!r} is not one of {', '.join(ROUNDINGS)}")
    if overflow is None:
        overflow = "saturate" if dtype == "e4m3" else "ieee"
    if overflow not in OVERFLOWS:
        raise ValueError(f"overflow {overflow!r} is not one of {', '.join(OVERFLOWS)}")
    arr = np.asarray(a)
    if arr.dtype.kind != "f" or arr.dtype.itemsize > 8:
        raise TypeError(f"round_narrow takes float32 or float64 values, got {arr.dtype}")
    shape = arr.shape
    with np.errstate(invalid="ignore"):  # a signalling NaN widens to a quiet one
        bits = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1).view(np.uint64)
    negative = (bits >> np.uint64(63)).astype(bool)
    mag = bits & np.uint64(0x7FFFFFFFFFFFFFFF)
    nan = mag > np.uint64(0x7FF0000000000000)
    inf = mag == np.uint64(0x7FF0000000000000)
    exp64 = (mag >> np.uint64(52)).astype(np.int64)
    frac = (mag & np.uint64((1 << 52) - 1)).astype(np.int64)
    # Significand and unbiased exponent of an f64 (subnormals: no implicit bit, exponent -1022).
    sig = np.where(exp64 > 0, frac | np.int64(1 << 52), frac)
    e = np.where(exp64 > 0, exp64 - 1023, -1022)
    emin = 1 - f.bias
    m_bits = f.mantissa_bits
    # The quantum of the value's binade, never below the subnormal spacing 2^(emin - M); the
    # binade above the largest finite value continues unbounded (IEEE's unbounded exponent).
    eq = np.maximum(e, emin)
    shift = 52 - m_bits + (eq - e)
    # A shift beyond 54 leaves a quotient below 1/2 (sig < 2^53): clamp to keep it in int64.
    shift = np.minimum(shift, 60)
    q = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    if rounding == "rne":
        up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    elif rounding == "rna":
        up = rem >= half
    else:
        up = np.zeros_like(rem, dtype=bool)
    q = q + up.astype(np.int64)
    # q is in units of 2^(eq - M): q < 2^(M+1). The pattern of a normal is (eq - emin) << M plus
    # q (the implicit bit adds the 1 to the exponent field; a carry to 2^(M+1) moves to the next
    # binade); a subnormal's is q itself (q = 2^M is the smallest normal). Large exponents are
    # clamped first: anything above the largest finite pattern overflows alike.
    e_field = np.minimum(eq - emin, (1 << f.exponent_bits) + 1)
    pattern = (e_field << m_bits) + q
    max_pat = f.max_pattern
    over = pattern > max_pat
    if overflow == "saturate" or rounding == "rz":
        over_pat = max_pat
    else:
        over_pat = f.inf_pattern
    inf_pat = max_pat if overflow == "saturate" else f.inf_pattern
    out = np.where(over, over_pat, pattern)
    out = np.where(inf, inf_pat, out)
    out = np.where(nan, f.nan_pattern, out)
    out = out | (negative.astype(np.int64) << (f.width - 1))
    return out.astype(_PATTERN_DTYPES[f.width]).reshape(shape)


def decode_narrow(patterns, dtype: str) -> np.ndarray:
    """The exact float32 values of f16, bf16, e4m3 or e5m2 patterns (NaN payloads of IEEE
    formats kept; E4M3FN's S.1111.111 is its NaN; subnormals kept)."""
    f = _format(dtype)
    p = np.asarray(patterns)
    want = _PATTERN_DTYPES[f.width]
    if dtype == "f16" and p.dtype == np.float16:
        p = np.ascontiguousarray(p).view(np.uint16)
    if p.dtype != want:
        raise TypeError(f"{dtype} patterns must be {np.dtype(want).name}, got {p.dtype}")
    shape = p.shape
    u = p.astype(np.uint32).reshape(-1)
    m_bits, e_bits = f.mantissa_bits, f.exponent_bits
    sign = ((u >> np.uint32(f.width - 1)) & np.uint32(1)) << np.uint32(31)
    e = (u >> np.uint32(m_bits)) & np.uint32((1 << e_bits) - 1)
    m = u & np.uint32((1 << m_bits) - 1)
    e_all = (1 << e_bits) - 1
    normal = sign | ((e + np.uint32(127 - f.bias)) << np.uint32(23)) | (m << np.uint32(23 - m_bits))
    # Subnormals: m units of 2^(1 - bias - M), exact in f32 (at least 2^-24 for these formats).
    unit = np.float32(2.0 ** (1 - f.bias - m_bits))
    sub = (m.astype(np.float32) * unit).view(np.uint32) | sign
    special = sign | np.uint32(0x7F800000) | (m << np.uint32(23 - m_bits))
    if f.has_infinity:
        top = e == e_all
    else:
        top = (e == e_all) & (m == np.uint32((1 << m_bits) - 1))
        special = sign | np.uint32(0x7FC00000)
    bits = np.where(top, special, np.where(e != 0, normal, sub))
    return bits.astype(np.uint32).view(np.float32).reshape(shape)


def _floats(a) -> np.ndarray:
    """`a` as a float32 or float64 array (other inputs as float64), NaNs as they are."""
    arr = np.asarray(a)
    if arr.dtype in (np.float32, np.float64):
        return arr
    with np.errstate(invalid="ignore"):
        return arr.astype(np.float64)


def f16_truncate(a) -> np.ndarray:
    """f16 patterns of `a` rounded toward zero (float64 values rounded once), NaN to the quiet
    NaN: what a truncating kernel writes; tests use it to build outputs ncert must reject."""
    return round_narrow(_floats(a), "f16", "rz")


def e4m3_from_f32(a) -> np.ndarray:
    """E4M3FN patterns (uint8) of float32 or float64 values, round to nearest even, saturating
    to +-448 (infinities included), NaN to 0x7F / 0xFF."""
    return round_narrow(_floats(a), "e4m3", "rne", "saturate")


def e5m2_from_f32(a, saturate: bool = False) -> np.ndarray:
    """E5M2 patterns (uint8) of float32 or float64 values, round to nearest even; overflow to
    +-inf (from 61440 on), or with `saturate` to +-57344; NaN to 0x7E / 0xFE."""
    return round_narrow(_floats(a), "e5m2", "rne",
                        "saturate" if saturate else "ieee")


def f32_from_e4m3(u8) -> np.ndarray:
    """Exact float32 values of E4M3FN patterns (uint8)."""
    return decode_narrow(u8, "e4m3")


def f32_from_e5m2(u8) -> np.ndarray:
    """Exact float32 values of E5M2 patterns (uint8)."""
    return decode_narrow(u8, "e5m2")


def decode(stored, dtype: str) -> np.ndarray:
    """The exact float32 values of stored elements of ncert dtype `dtype` (f32, f16, bf16, e4m3,
    e5m2)."""
    if dtype == "f32":
        return np.asarray(stored, dtype=np.float32)
    if dtype == "bf16":
        return f32_from_bf16(stored)
    if dtype == "f16":
        return f32_from_f16(stored)
    if dtype in ("e4m3", "e5m2"):
        return decode_narrow(stored, dtype)
    raise ValueError(f"decode: {dtype!r} is not one of f32, f16, bf16, e4m3, e5m2")
