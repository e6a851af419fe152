"""AF4 4-bit weights (dump-format.md §4): codebooks, nibble packings, quantizers, dequantizers.

Codes are handled unpacked as ``uint8 [rows, k]`` arrays of 0..15 and packed only for storage:

- ``"u32-lsb"`` (MLX): ``uint32 [rows, k/8]``, element i of each word in bits 4i..4i+3;
- ``"u8-msb"`` (bitsandbytes): ``uint8 [rows, k/2]``, the first element in the high nibble;
- ``"u8-lsb"``: ``uint8 [rows, k/2]``, the first element in the low nibble.

The dequantizers reproduce the C++ reference (reference/af4.cc) bit for bit, so an engine team
can compute the weights its kernel should have used, per declared ``dequant`` mode.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .codecs import bf16_from_f32, decode, f16_from_f32, f32_from_bf16

__all__ = [
    "CODEBOOKS",
    "PACKINGS",
    "VARIANTS",
    "DEQUANTS",
    "DEQUANT_OPS",
    "ZERO_POINT_PACKINGS",
    "codes_per_word",
    "codebook_table",
    "pack_codes",
    "unpack_codes",
    "zero_point_columns",
    "pack_zero_points",
    "unpack_zero_points",
    "quantize_affine",
    "quantize_codebook",
    "dequantize",
    "round_to_dtype",
]

# The built-in tables of dump-format.md §4 as f32 bit patterns (each is the nearest f32 to the
# decimal in the comment; patterns, not decimals, so no double rounding can creep in).
_NF4_BITS = [
    0xBF800000,  # -1.0
    0xBF3239B1,  # -0.6961928009986877
    0xBF066B30,  # -0.5250730514526367
    0xBECA32A0,  # -0.39491748809814453
    0xBE91A24D,  # -0.28444138169288635
    0xBE3D353F,  # -0.18477343022823334
    0xBDBA7871,  # -0.09105003625154495
    0x00000000,  # 0.0
    0x3DA2FAFF,  # 0.07958029955625534
    0x3E24CAE3,  # 0.16093020141124725
    0x3E7C04DD,  # 0.24611230194568634
    0x3EAD033A,  # 0.33791524171829224
    0x3EE1A4B8,  # 0.44070982933044434
    0x3F1007AB,  # 0.5626170039176941
    0x3F3913B3,  # 0.7229568362236023
    0x3F800000,  # 1.0
]
_AF4_64_BITS = [
    0xBF800000,  # -1.0
    0xBF31C4DC,  # -0.69441008
    0xBF032F19,  # -0.51243739
    0xBEBF54F7,  # -0.3736951
    0xBE831C55,  # -0.25607552
    0xBE196BAB,  # -0.14982478
    0xBD4A2141,  # -0.04934812
    0x00000000,  # 0.0
    0x3D2F075F,  # 0.04273164
    0x3E0472F9,  # 0.12934483
    0x3E60E22A,  # 0.21961274
    0x3EA22DEE,  # 0.31675666
    0x3ED9ED55,  # 0.42563882
    0x3F0E1203,  # 0.55496234
    0x3F39685C,  # 0.72424863
    0x3F800000,  # 1.0
]


def _table(bits) -> np.ndarray:
    t = np.array(bits, dtype=np.uint32).view(np.float32)
    t.setflags(write=False)
    return t


#: Built-in codebooks (ascending, index = code) as read-only float32 arrays.
CODEBOOKS = {"nf4": _table(_NF4_BITS), "af4-64": _table(_AF4_64_BITS)}
#: Allowed attribute values, in the order the C++ parsers list them.
VARIANTS = ("affine", "codebook", "zero-point")
PACKINGS = ("u32-lsb", "u8-msb", "u8-lsb")
DEQUANTS = ("exact", "f32", "output", "folded")
DEQUANT_OPS = ("fma", "mul-add", "either", "sub-mul", "fused")
# The operation orders a zero-point segment accepts (the others belong to affine / codebook).
ZERO_POINT_OPS = ("sub-mul", "fused")
# How zero points are stored: one per byte, or 4-bit packed along the groups like codes.
ZERO_POINT_PACKINGS = ("u8", "u32-lsb", "u8-msb", "u8-lsb")


def codes_per_word(packing: str) -> int:
    """Codes per stored element: 8 for u32-lsb, 2 for the u8 packings."""
    if packing == "u32-lsb":
        return 8
    if packing in ("u8-msb", "u8-lsb"):
        return 2
    raise ValueError(f"AF4 packing {packing!r} is not one of {', '.join(PACKINGS)}")


def codebook_table(codebook) -> np.ndarray:
    """The 16 float32 values of a codebook given by name ("nf4", "af4-64") or as 16 values."""
    if isinstance(codebook, str):
        if codebook not in CODEBOOKS:
            raise ValueError(f"AF4 codebook {codebook!r} is not one of nf4, af4-64, custom")
        return CODEBOOKS[codebook]
    table = np.asarray(codebook, dtype=np.float32).reshape(-1)
    if table.shape != (16,):
        raise ValueError(f"a custom codebook has 16 values, got {table.size}")
    return table


def _check_codes(codes: np.ndarray) -> np.ndarray:
    c = np.asarray(codes)
    if c.ndim != 2:
        raise ValueError(f"codes must be 2-D [rows, k], got shape {list(c.shape)}")
    if c.dtype.kind not in "iu":
        raise TypeError(f"codes must be integers 0..15, got {c.dtype}")
    if c.size and (c.min() < 0 or c.max() > 15):
        raise ValueError("codes must lie in 0..15")
    return c.astype(np.uint8)


def pack_codes(codes, packing: str) -> np.ndarray:
    """Packs unpacked codes ``[rows, k]`` (0..15) into the stored layout of `packing`.

    Returns ``uint32 [rows, k/8]`` for u32-lsb and ``uint8 [rows, k/2]`` for the u8 packings;
    k must be a multiple of the codes per element.
    """
    per = codes_per_word(packing)
    c = _check_codes(codes)
    rows, k = c.shape
    if k % per:
        raise ValueError(f"{packing} needs k a multiple of {per}, got k = {k}")
    groups = c.reshape(rows, k // per, per)
    if packing == "u32-lsb":
        shifts = (np.arange(8, dtype=np.uint32) * np.uint32(4))
        return np.bitwise_or.reduce(groups.astype(np.uint32) << shifts, axis=2).astype(np.uint32)
    first, second = groups[:, :, 0], groups[:, :, 1]
    if packing == "u8-msb":
        return ((first << 4) | second).astype(np.uint8)
    return (first | (second << 4)).astype(np.uint8)


def unpack_codes(packed, packing: str) -> np.ndarray:
    """The inverse of `pack_codes`: ``uint8 [rows, k]`` codes from the stored layout."""
    per = codes_per_word(packing)
    p = np.asarray(packed)
    want = np.uint32 if packing == "u32-lsb" else np.uint8
    if p.dtype != want:
        raise TypeError(f"{packing} codes are {np.dtype(want).name}, got {p.dtype}")
    if p.ndim != 2:
        raise ValueError(f"packed codes must be 2-D, got shape {list(p.shape)}")
    rows, words = p.shape
    if packing == "u32-lsb":
        shifts = np.arange(8, dtype=np.uint32) * np.uint32(4)
        out = (p[:, :, None] >> shifts) & np.uint32(0xF)
    else:
        high, low = (p >> 4) & 0xF, p & 0xF
        pair = (high, low) if packing == "u8-msb" else (low, high)
        out = np.stack(pair, axis=2)
    return out.reshape(rows, words * per).astype(np.uint8)


def zero_point_columns(groups: int, packing: str) -> int:
    """Stored columns of a zero_points dataset of `groups` zero points a row (§4.2): `groups`
    for u8, ceil(groups / c) packed (c = 8 per u32, 2 per u8)."""
    if packing == "u8":
        return groups
    per = codes_per_word(packing)
    return -(-groups // per)


def pack_zero_points(zero_points, packing: str) -> np.ndarray:
    """Stores zero points ``[rows, groups]`` (0..15) as `packing` says: ``uint8 [rows, groups]``
    for u8; packed along the groups exactly as codes are along K for the other packings, the
    unused trailing nibbles of a row 0 (``uint32 [rows, ceil(groups/8)]`` or ``uint8 [rows,
    ceil(groups/2)]``)."""
    z = _check_codes(zero_points)
    if packing == "u8":
        return z
    per = codes_per_word(packing)
    rows, groups = z.shape
    padded = np.zeros((rows, zero_point_columns(groups, packing) * per), np.uint8)
    padded[:, :groups] = z
    return pack_codes(padded, packing)


def unpack_zero_points(stored, packing: str, groups: int) -> np.ndarray:
    """The inverse of `pack_zero_points`: ``uint8 [rows, groups]``. Raises ValueError naming
    the first row, group and value that the format refuses (a u8 value above 15, a nonzero
    unused trailing nibble)."""
    p = np.asarray(stored)
    if packing == "u8":
        bad = np.argwhere(p > 15)
        if bad.size:
            r, g = (int(v) for v in bad[0])
            raise ValueError(f"row {r}, group {g}: zero point {int(p[r, g])} is above 15 "
                             "(a zero point is a 4-bit code, 0..15)")
        return p.astype(np.uint8)
    nibbles = unpack_codes(p, packing)
    bad = np.argwhere(nibbles[:, groups:] != 0)
    if bad.size:
        r, i = (int(v) for v in bad[0])
        raise ValueError(f"row {r}, group {groups + i}: zero point {int(nibbles[r, groups + i])} "
                         f"in an unused trailing nibble (past the row's {groups} groups; "
                         "it must be 0)")
    return nibbles[:, :groups]


def round_to_dtype(values, dtype: str) -> np.ndarray:
    """The float32 values `values` take when stored as `dtype` (f32, f16 or bf16, RNE)."""
    if dtype == "f32":
        return np.asarray(values, dtype=np.float32)
    if dtype == "bf16":
        return f32_from_bf16(bf16_from_f32(values))
    if dtype == "f16":
        return decode(f16_from_f32(values), "f16")
    raise ValueError(f"scale dtype {dtype!r} is not one of bf16, f16, f32")


def _groups(w, group_size: int) -> np.ndarray:
    a = np.asarray(w, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"weights must be 2-D [rows, k], got shape {list(a.shape)}")
    if group_size < 1 or a.shape[1] % group_size:
        raise ValueError(f"group_size {group_size} does not divide k = {a.shape[1]}")
    if not np.all(np.isfinite(a)):
        raise ValueError("weights to quantize must be finite")
    return a.reshape(a.shape[0], a.shape[1] // group_size, group_size)


def quantize_affine(w, group_size: int, scale_dtype: str = "bf16"):
    """MLX-style affine 4-bit quantization: ``w ~ scale*q + bias`` with q in 0..15 per group.

    Per group of `group_size` consecutive elements along k: the bias sits at the group's
    extreme of larger magnitude (``edge``) and the scale, negative when that extreme is the
    maximum, is ``edge / q0`` with ``q0 = round(edge / (range/15))``, so that code ``-q0`` decodes
    to exactly 0 and q = 0 to exactly ``edge`` (before the scale is stored in `scale_dtype`).
    Scale and bias are then rounded to `scale_dtype` and the codes chosen against the stored
    values, so ``dequantize`` reproduces what an engine holding these arrays computes.

    Returns ``(codes uint8 [rows, k], scales float32 [rows, k/g], biases float32 [rows, k/g])``;
    scales and biases hold values exactly representable in `scale_dtype`.
    """
    g = _groups(w, group_size)
    w_max = g.max(axis=2)
    w_min = g.min(axis=2)
    eps = 1e-7
    min_dominates = np.abs(w_min) > np.abs(w_max)
    scale = np.maximum((w_max - w_min) / 15.0, eps)
    scale = np.where(min_dominates, scale, -scale)
    edge = np.where(min_dominates, w_min, w_max)
    q0 = np.rint(edge / scale)
    scale = np.where(q0 != 0, edge / np.where(q0 != 0, q0, 1.0), scale)
    bias = np.where(q0 == 0, 0.0, edge)
    s = round_to_dtype(scale, scale_dtype).astype(np.float64)
    b = round_to_dtype(bias, scale_dtype).astype(np.float64)
    safe = np.where(s != 0, s, 1.0)
    q = np.rint((g - b[:, :, None]) / safe[:, :, None])
    q = np.where(s[:, :, None] != 0, q, 0.0)
    codes = np.clip(q, 0, 15).astype(np.uint8).reshape(g.shape[0], -1)
    return codes, s.astype(np.float32), b.astype(np.float32)


def quantize_codebook(w, group_size: int, codebook="nf4", scale_dtype: str = "bf16"):
    """Absmax codebook quantization: ``w ~ table[q] * scale`` (bitsandbytes NF4 style).

    The scale of each group is its largest magnitude, rounded to `scale_dtype`; each element
    takes the code of the table entry nearest to ``w / scale`` (a zero group takes the code of
    0.0). `codebook` is "nf4", "af4-64" or 16 custom values (ascending).

    Returns ``(codes uint8 [rows, k], scales float32 [rows, k/g])``.
    """
    table = codebook_table(codebook).astype(np.float64)
    if np.any(np.diff(table) < 0):
        raise ValueError("a codebook to quantize against must be ascending")
    g = _groups(w, group_size)
    s = round_to_dtype(np.abs(g).max(axis=2), scale_dtype).astype(np.float64)
    safe = np.where(s != 0, s, 1.0)
    v = np.where(s[:, :, None] != 0, g / safe[:, :, None], 0.0)
    mids = (table[1:] + table[:-1]) / 2.0
    codes = np.searchsorted(mids, v.reshape(-1), side="left").astype(np.uint8)
    return codes.reshape(g.shape[0], -1), s.astype(np.float32)


def _round_to_odd_f64(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """`s + e` (s the f64 sum, e its exact error) rounded to odd in f64.

    Rounding to odd at 53 bits and then to nearest at 24 bits equals one rounding to nearest at
    24 bits: this is how a fused multiply-add into f32 is emulated exactly.
    """
    toward = np.nextafter(s, np.where(e > 0, np.inf, -np.inf))
    odd = (s.view(np.int64) & 1) == 1
    return np.where((e == 0) | odd, s, toward)


def _fma_f32(s32: np.ndarray, q: np.ndarray, b32: np.ndarray) -> np.ndarray:
    """fmaf(s, q, b): s*q + b rounded once to f32 (s*q is exact in f64: 24 + 4 bits)."""
    prod = s32.astype(np.float64) * q
    bd = b32.astype(np.float64)
    total = prod + bd
    z = total - prod
    err = (prod - (total - z)) + (bd - z)  # TwoSum: total + err == prod + bd exactly
    return _round_to_odd_f64(total, err).astype(np.float32)


def dequantize(codes, scales, biases=None, *, group_size: int, variant: str = "affine",
               codebook=None, dequant: str = "exact", activation: str = "bf16",
               dequant_op: Optional[str] = None, zero_points=None) -> np.ndarray:
    """The weights an AF4 segment decodes to, ``[rows, k]``, exactly as the C++ reference.

    `codes` are unpacked ``[rows, k]``; `scales` / `biases` are the stored values
    ``[rows, k/group_size]`` as floats (decode bf16 patterns first with ``f32_from_bf16``).

    - ``dequant="exact"`` or ``"folded"``: float64 ``scale*q + bias`` (``table[q]*scale``), the
      value ncert certifies against (the folded kernel changes the order of the sums, not the
      weights);
    - ``"f32"``: float32, ``fmaf(scale, q, bias)`` (one rounding) for ``dequant_op="fma"`` or
      ``f32(f32(scale*q) + bias)`` for ``"mul-add"``; ``table[q]*scale`` in f32 for codebooks;
    - ``"output"``: the f32 weight then rounded to nearest even in the `activation` type (bf16),
      as tile loaders do; with f32 activations it equals ``"f32"``.

    ``variant="zero-point"`` takes `zero_points` ``[rows, k/group_size]`` (0..15) and decodes
    ``(q - zp)*scale``: exactly in float64 for exact / folded; for f32 / output
    ``f32((q - zp)*scale)`` with ``dequant_op="sub-mul"`` (the default) or, ``"fused"``,
    ``fmaf(q, scale, m)`` with ``m = f32(-zp*scale)``. Affine's `dequant_op` defaults to fma.
    """
    if variant not in VARIANTS:
        raise ValueError(f"AF4 variant {variant!r} is not one of {', '.join(VARIANTS)}")
    if dequant not in DEQUANTS:
        raise ValueError(f"AF4 dequant {dequant!r} is not one of {', '.join(DEQUANTS)}")
    ops = ZERO_POINT_OPS if variant == "zero-point" else ("fma", "mul-add")
    op = dequant_op if dequant_op is not None else ops[0]
    if op not in ops:
        raise ValueError(f"dequant_op {op!r}: pick {' or '.join(ops)} to compute {variant} weights")
    if activation not in ("bf16", "f32"):
        raise ValueError(f"activation {activation!r} is not one of bf16, f32")
    c = _check_codes(codes)
    rows, k = c.shape
    for name, arr in (("scales", scales), ("biases", biases)):
        if arr is not None and np.asarray(arr).dtype == np.uint16:
            # Patterns read as integers would be silently wrong weights.
            raise TypeError(f"{name} are uint16 bit patterns: decode them first "
                            "(f32_from_bf16 or f32_from_f16)")
    s = np.asarray(scales, dtype=np.float32)
    if group_size < 1 or k % group_size or s.shape != (rows, k // group_size):
        raise ValueError(f"scales must be [{rows}, k/group_size] with group_size dividing k = {k}")
    s_full = np.repeat(s, group_size, axis=1)
    q = c.astype(np.float64)
    if variant == "affine":
        if biases is None:
            raise ValueError("the affine variant needs biases")
        b = np.asarray(biases, dtype=np.float32)
        if b.shape != s.shape:
            raise ValueError(f"biases must have the shape of scales {list(s.shape)}")
        b_full = np.repeat(b, group_size, axis=1)
        if dequant in ("exact", "folded"):
            return s_full.astype(np.float64) * q + b_full.astype(np.float64)
        if op == "fma":
            w32 = _fma_f32(s_full, q, b_full)
        else:
            w32 = (s_full * q.astype(np.float32)) + b_full
    elif variant == "zero-point":
        if zero_points is None:
            raise ValueError("the zero-point variant needs zero_points")
        z = _check_codes(zero_points)
        if z.shape != s.shape:
            raise ValueError(f"zero_points must have the shape of scales {list(s.shape)}")
        z_full = np.repeat(z, group_size, axis=1).astype(np.float64)
        if dequant in ("exact", "folded"):
            return s_full.astype(np.float64) * (q - z_full)  # 24 + 4 bits: exact
        if op == "sub-mul":
            w32 = (q - z_full).astype(np.float32) * s_full  # the integer difference is exact
        else:
            m = -(z_full.astype(np.float32) * s_full)  # f32(-zp*s): one rounding, sign exact
            w32 = _fma_f32(s_full, q, m)
    else:
        if codebook is None:
            raise ValueError("the codebook variant needs a codebook")
        table = codebook_table(codebook)
        if dequant in ("exact", "folded"):
            return table.astype(np.float64)[c] * s_full.astype(np.float64)
        w32 = table[c] * s_full
    w32 = np.asarray(w32, dtype=np.float32)
    if dequant == "output" and activation == "bf16":
        return f32_from_bf16(bf16_from_f32(w32))
    return w32
