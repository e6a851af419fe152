"""FP8 codes in numpy: the OCP E4M3FN and E5M2 value tables, exact round-to-nearest-even with
saturation (the OCP `satfinite` conversion of docs/dump-format.md §1), and the ONNX element
types. python3-onnx 1.12 (Debian 12) predates the FP8 element types, so they are named here by
their numbers in onnx.proto (FLOAT8E4M3FN = 17, FLOAT8E5M2 = 19)."""

from __future__ import annotations

import numpy as np

kOnnxType = {"e4m3": 17, "e5m2": 19}
kMaxFinite = {"e4m3": 448.0, "e5m2": 57344.0}


def decode_table(fmt: str) -> np.ndarray:
    """The value of each of the 256 codes, as f64 (NaN for the NaN codes, ±inf for e5m2's)."""
    exp_bits, man_bits, bias = (4, 3, 7) if fmt == "e4m3" else (5, 2, 15)
    out = np.empty(256)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        if fmt == "e4m3" and e == 15 and m == 7:
            out[code] = np.nan
        elif fmt == "e5m2" and e == 31:
            out[code] = sign * np.inf if m == 0 else np.nan
        elif e == 0:
            out[code] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[code] = sign * (1 + m / 2 ** man_bits) * 2.0 ** (e - bias)
    return out


def encode_rne_sat(t: np.ndarray, fmt: str) -> np.ndarray:
    """Codes (u8) of the f64 values t: nearest FP8 value, ties to the even code, saturated to
    ±max finite; NaN to the positive NaN code 0x7f. The sign of zero is kept. Exact for t the
    f64 quotient of two f32 values: a quotient that is not itself a tie lies at least ~2⁻²⁹
    relative away from one, far above f64's 2⁻⁵³, so rounding it first to f64 changes nothing."""
    table = decode_table(fmt)
    pos_codes = np.array([c for c in range(128) if np.isfinite(table[c])])
    pos_vals = table[pos_codes]  # ascending
    mag = np.minimum(np.abs(t), kMaxFinite[fmt])
    hi = np.clip(np.searchsorted(pos_vals, mag, side="left"), 1, len(pos_vals) - 1)
    lo = hi - 1
    d_lo, d_hi = mag - pos_vals[lo], pos_vals[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (pos_codes[hi] % 2 == 0))
    code = np.where(pick_hi, pos_codes[hi], pos_codes[lo]).astype(np.uint8)
    code = np.where(np.signbit(t), code | 0x80, code).astype(np.uint8)
    return np.where(np.isnan(t), np.uint8(0x7F), code).astype(np.uint8)


def codes_of_values(v: np.ndarray, fmt: str) -> np.ndarray:
    """The code of each FP8 value v (f32 holding an FP8 value exactly), sign of zero kept."""
    table = decode_table(fmt)
    code = encode_rne_sat(v.astype(np.float64), fmt)
    if not np.array_equal(table[code], v.astype(np.float64)) and not np.isnan(v).any():
        raise ValueError("a value is not an FP8 value of " + fmt)
    return code
