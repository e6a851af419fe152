"""ggml's block-quantized weights (q4_0, q4_1, q8_0) as dump segments with a ``preset``.

ggml stores a row of K weights as K/32 blocks, each with its f16 scale(s) interleaved:

- block_q4_0 (18 bytes): f16 d, 16 bytes qs (4-bit codes, u8-ggml layout); w = (q - 8) * d;
- block_q4_1 (20 bytes): f16 d, f16 m, 16 bytes qs; w = q * d + m;
- block_q8_0 (34 bytes): f16 d, 32 int8 qs; w = q * d.

The dump keeps the codes and the scales apart (codes / values, scales, biases); this module
splits the raw blocks, byte for byte, and builds the Segment that says so.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .segments import Segment

__all__ = ["BLOCK_BYTES", "split_blocks", "segment_from_blocks", "join_blocks"]

#: Bytes of one block of 32 weights per preset.
BLOCK_BYTES = {"q4_0": 18, "q4_1": 20, "q8_0": 34}
_BLOCK = 32


def _blocks(raw, preset: str, rows: int, k: int) -> np.ndarray:
    if preset not in BLOCK_BYTES:
        raise ValueError(f"preset {preset!r} is not one of {', '.join(BLOCK_BYTES)}")
    if k % _BLOCK:
        raise ValueError(f"ggml blocks hold {_BLOCK} weights; K = {k} is not a multiple")
    b = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, (bytes, bytearray, memoryview)) \
        else np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    want = rows * (k // _BLOCK) * BLOCK_BYTES[preset]
    if b.size != want:
        raise ValueError(f"{rows} rows of K = {k} in {preset} are {want} bytes, got {b.size}")
    return b.reshape(rows, k // _BLOCK, BLOCK_BYTES[preset])


def _f16(two: np.ndarray) -> np.ndarray:
    """Little-endian f16 fields ([..., 2] bytes) as float16."""
    return np.ascontiguousarray(two).view("<f2")[..., 0]


def split_blocks(raw, preset: str, rows: int, k: int) -> dict:
    """The members of a preset segment from ggml's raw blocks of `rows` x `k` weights:
    {"packed_codes": u8 [rows, k/2] (q4) or "values": i8 [rows, k] (q8_0), "scales": f16
    [rows, k/32], "biases": f16 [rows, k/32] (q4_1)}."""
    b = _blocks(raw, preset, rows, k)
    out = {"scales": _f16(b[:, :, 0:2])}
    if preset == "q8_0":
        out["values"] = np.ascontiguousarray(b[:, :, 2:]).view(np.int8).reshape(rows, k)
        return out
    first = 4 if preset == "q4_1" else 2
    if preset == "q4_1":
        out["biases"] = _f16(b[:, :, 2:4])
    out["packed_codes"] = np.ascontiguousarray(b[:, :, first:]).reshape(rows, k // 2)
    return out


def join_blocks(preset: str, scales, packed_codes=None, values=None, biases=None) -> bytes:
    """The inverse of split_blocks: ggml's raw block bytes (tests round-trip through it)."""
    s = np.ascontiguousarray(scales, dtype="<f2")
    rows, nb = s.shape
    parts = [s.view(np.uint8).reshape(rows, nb, 2)]
    if preset == "q4_1":
        parts.append(np.ascontiguousarray(biases, dtype="<f2").view(np.uint8).reshape(rows, nb, 2))
    if preset == "q8_0":
        parts.append(np.ascontiguousarray(values, dtype=np.int8).view(np.uint8).reshape(rows, nb, 32))
    else:
        parts.append(np.ascontiguousarray(packed_codes, dtype=np.uint8).reshape(rows, nb, 16))
    return np.concatenate(parts, axis=2).tobytes()


def segment_from_blocks(raw, preset: str, row_begin: int, rows: int, k: int,
                        name: Optional[str] = None) -> Segment:
    """A Segment of rows [row_begin, row_begin + rows) with ``preset`` set, its members split
    from ggml's raw blocks (bytes or a uint8 array, rows after rows as ggml lays them out)."""
    return Segment(None, row_begin, row_begin + rows, preset=preset, name=name,
                   **split_blocks(raw, preset, rows, k))
