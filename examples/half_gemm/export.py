"""Writes ncert dumps (docs/dump-format.md, version 2) of one projection with plain h5py.

f16 arrays are stored as numpy float16 (the 16-bit IEEE float type, §1 form a); bf16 arrays as
uint16 bit patterns tagged ``dtype = "bf16"`` (form b). Nothing is converted on the way: the
arrays hold exactly what the kernel produced.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import h5py
import numpy as np


@dataclass
class Projection:
    """One call of a linear layer on both paths (dump-format.md §3); arrays in `dtype`."""

    name: str
    dtype: str  # "f16" or "bf16": x and the weights have this type, and every y_* unless y_dtype
    x: np.ndarray  # [M, K]
    w: np.ndarray  # [N, K]
    selector: np.ndarray  # int32 [P]
    commit_counts: np.ndarray  # int32 [R]
    requests: int
    block_rows: int
    cap: int
    y_unpacked: np.ndarray  # [M, N], the kernel on every row
    y_compact: np.ndarray  # [P, N], the kernel on the gathered rows S·X
    y_before: np.ndarray  # [M, N], the packed output buffer before the call
    y_packed: np.ndarray  # [M, N], y_before with the used slots' rows scattered in
    accumulator: str = "f32-rn"
    output_rounding: str = "rne"
    y_dtype: Optional[str] = None  # "f32": the accumulator's own values (measure.py's walk test)
    k_walk: Optional[str] = None


def _dataset(group: h5py.Group, name: str, values: np.ndarray, dtype: str) -> None:
    if dtype == "f16":
        assert values.dtype == np.float16, (name, values.dtype)
        group.create_dataset(name, data=values.astype("<f2"), track_times=False)
    elif dtype == "bf16":
        assert values.dtype == np.uint16, (name, values.dtype)
        d = group.create_dataset(name, data=values.astype("<u2"), track_times=False)
        d.attrs["dtype"] = "bf16"
    elif dtype == "f32":
        assert values.dtype == np.float32, (name, values.dtype)
        group.create_dataset(name, data=values.astype("<f4"), track_times=False)
    elif dtype == "i32":
        assert values.dtype == np.int32, (name, values.dtype)
        group.create_dataset(name, data=values.astype("<i4"), track_times=False)
    else:
        raise ValueError(f"{name}: element type {dtype!r}")


def write_dump(path: Path, p: Projection, *, engine: str, build: str, device: str,
               model: Optional[str] = None) -> None:
    m, k = p.x.shape
    n = p.w.shape[0]
    assert p.y_unpacked.shape == (m, n) and p.y_compact.shape == (p.selector.size, n)
    y_dtype = p.y_dtype or p.dtype
    tmp = path.with_name(path.name + ".tmp.h5")
    with h5py.File(tmp, "w", track_order=True) as f:
        f.attrs["ncert_schema"] = "ncert-dump"
        f.attrs["ncert_schema_version"] = np.int64(2)  # f16 members are version 2 (§1)
        f.attrs["engine"] = engine
        f.attrs["build"] = build
        f.attrs["device"] = device
        if model:
            f.attrs["model"] = model
        g = f.create_group("projections").create_group(p.name)
        for key, value in (("op", "linear"), ("accumulator", p.accumulator),
                           ("output_dtype", y_dtype), ("epilogue", "none")):
            g.attrs[key] = value
        if y_dtype != "f32":
            g.attrs["output_rounding"] = p.output_rounding
        if p.k_walk is not None:
            g.attrs["k_walk"] = p.k_walk
        for key, value in (("k", k), ("n", n), ("requests", p.requests),
                           ("block_rows", p.block_rows), ("cap", p.cap)):
            g.attrs[key] = np.int64(value)
        _dataset(g, "x", p.x, p.dtype)
        seg = g.create_group("weight").create_group("w")
        seg.attrs["format"] = p.dtype
        seg.attrs["row_begin"] = np.int64(0)
        seg.attrs["row_end"] = np.int64(n)
        _dataset(seg, "values", p.w, p.dtype)
        _dataset(g, "selector", p.selector, "i32")
        _dataset(g, "commit_counts", p.commit_counts, "i32")
        for name in ("y_unpacked", "y_packed", "y_compact", "y_before"):
            _dataset(g, name, getattr(p, name), y_dtype)
    tmp.replace(path)
