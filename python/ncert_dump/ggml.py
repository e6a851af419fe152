"""ggml's block-quantized weights (Q4_0, Q4_1, Q8_0) as the dump segments that declare them.

ggml stores a row of K weights as K/32 blocks, each with its f16 scale(s) interleaved:

- block_q4_0 (18 bytes): f16 d, 16 bytes qs; w = (q - 8) * d;
- block_q4_1 (20 bytes): f16 d, f16 m, 16 bytes qs; w = q * d + m;
- block_q8_0 (34 bytes): f16 d, 32 int8 qs; w = q * d.

In qs, element j of a block is the low nibble of byte j for j < 16 and the high nibble of byte
j - 16 for j >= 16. The dump has no ggml format: these blocks are the forms of
docs/dump-format.md §4.6 (Q8_0: format int8; Q4_0: AF4 zero-point with zero points 8; Q4_1:
AF4 affine), with the codes rewritten into u8-lsb order and the scales apart. This module
splits the raw blocks byte for byte and builds those segments.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .segments import Segment

__all__ = ["BLOCK", "BLOCK_BYTES", "codes_from_qs", "qs_from_codes", "split_blocks",
           "join_blocks", "segment_from_blocks"]

#: Weights per block, and bytes of one block per ggml type.
BLOCK = 32
BLOCK_BYTES = {"q4_0": 18, "q4_1": 20, "q8_0": 34}


def codes_from_qs(qs) -> np.ndarray:
    """Codes ``uint8 [rows, k]`` (0..15) from ggml's nibbles ``uint8 [rows, k/2]``."""
    q = np.asarray(qs, dtype=np.uint8)
    rows, half = q.shape
    if half % (BLOCK // 2):
        raise ValueError(f"ggml nibbles come in blocks of {BLOCK // 2} bytes, got {half} a row")
    b = q.reshape(rows, half // (BLOCK // 2), 1, BLOCK // 2)
    return np.concatenate([b & 0xF, b >> 4], axis=2).reshape(rows, 2 * half)


def qs_from_codes(codes) -> np.ndarray:
    """The inverse of `codes_from_qs`: ggml's nibble bytes of codes ``[rows, k]``."""
    c = np.asarray(codes, dtype=np.uint8)
    rows, k = c.shape
    if k % BLOCK:
        raise ValueError(f"ggml blocks hold {BLOCK} weights; K = {k} is not a multiple")
    b = c.reshape(rows, k // BLOCK, 2, BLOCK // 2)
    return (b[:, :, 0, :] | (b[:, :, 1, :] << 4)).reshape(rows, k // 2)


def _blocks(raw, kind: str, rows: int, k: int) -> np.ndarray:
    if kind not in BLOCK_BYTES:
        raise ValueError(f"ggml type {kind!r} is not one of {', '.join(BLOCK_BYTES)}")
    if k % BLOCK:
        raise ValueError(f"ggml blocks hold {BLOCK} weights; K = {k} is not a multiple")
    b = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, (bytes, bytearray, memoryview)) \
        else np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    want = rows * (k // BLOCK) * BLOCK_BYTES[kind]
    if b.size != want:
        raise ValueError(f"{rows} rows of K = {k} in {kind} are {want} bytes, got {b.size}")
    return b.reshape(rows, k // BLOCK, BLOCK_BYTES[kind])


def _f16(two: np.ndarray) -> np.ndarray:
    """Little-endian f16 fields ([..., 2] bytes) as float16."""
    return np.ascontiguousarray(two).view("<f2")[..., 0]


def split_blocks(raw, kind: str, rows: int, k: int) -> dict:
    """The parts of ggml's raw blocks of `rows` x `k` weights: {"scales": f16 [rows, k/32] (d),
    "qs": u8 [rows, k/2] (q4) or "values": i8 [rows, k] (q8_0), "biases": f16 (q4_1: m)}."""
    b = _blocks(raw, kind, rows, k)
    out = {"scales": _f16(b[:, :, 0:2])}
    if kind == "q8_0":
        out["values"] = np.ascontiguousarray(b[:, :, 2:]).view(np.int8).reshape(rows, k)
        return out
    first = 4 if kind == "q4_1" else 2
    if kind == "q4_1":
        out["biases"] = _f16(b[:, :, 2:4])
    out["qs"] = np.ascontiguousarray(b[:, :, first:]).reshape(rows, k // 2)
    return out


def join_blocks(kind: str, scales, qs=None, values=None, biases=None) -> bytes:
    """The inverse of split_blocks: ggml's raw block bytes."""
    s = np.ascontiguousarray(scales, dtype="<f2")
    rows, nb = s.shape
    parts = [s.view(np.uint8).reshape(rows, nb, 2)]
    if kind == "q4_1":
        parts.append(np.ascontiguousarray(biases, dtype="<f2").view(np.uint8).reshape(rows, nb, 2))
    if kind == "q8_0":
        parts.append(np.ascontiguousarray(values, dtype=np.int8).view(np.uint8).reshape(rows, nb, 32))
    else:
        parts.append(np.ascontiguousarray(qs, dtype=np.uint8).reshape(rows, nb, 16))
    return np.concatenate(parts, axis=2).tobytes()


def segment_from_blocks(raw, kind: str, row_begin: int, rows: int, k: int,
                        name: Optional[str] = None) -> Segment:
    """The Segment of rows [row_begin, row_begin + rows) that declares ggml's `kind` blocks
    (bytes or a uint8 array, rows after rows as ggml lays them out), as §4.6 tabulates:

    - q8_0: format int8, group_size 32, scales f16 = d, dequant f32;
    - q4_0: AF4 zero-point, group_size 32, zero points 8, scales f16 = d, dequant f32,
      dequant_op sub-mul, codes in u8-lsb order;
    - q4_1: AF4 affine, group_size 32, scales = d, biases = m (f16), dequant f32, dequant_op
      either, codes in u8-lsb order.
    """
    parts = split_blocks(raw, kind, rows, k)
    end = row_begin + rows
    if kind == "q8_0":
        return Segment("int8", row_begin, end, values=parts["values"], scales=parts["scales"],
                       group_size=BLOCK, dequant="f32", name=name)
    codes = codes_from_qs(parts["qs"])
    if kind == "q4_0":
        return Segment("af4", row_begin, end, codes=codes, scales=parts["scales"],
                       zero_points=np.full((rows, k // BLOCK), 8, np.uint8), group_size=BLOCK,
                       variant="zero-point", packing="u8-lsb", dequant="f32",
                       dequant_op="sub-mul", name=name)
    return Segment("af4", row_begin, end, codes=codes, scales=parts["scales"],
                   biases=parts["biases"], group_size=BLOCK, variant="affine", packing="u8-lsb",
                   dequant="f32", dequant_op="either", name=name)
