"""Writes the example's ncert dumps (docs/dump-format.md, version 2 where `bias_at = "start"` is
declared) of one projection with python/ncert_dump, which validates every call as the reader
would.

Every array is exactly what the kernel took or returned: f32 activations, the f32 weights and
bias of the model's initializers, the f32 outputs of its calls. Nothing is rounded on the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from ncert_dump import DumpWriter, Segment

import data


@dataclass
class Projection:
    """One Gemm call on both paths (dump-format.md §3), every array f32."""

    x: np.ndarray  # [M, K]
    w: np.ndarray  # [N, K]
    bias: np.ndarray  # [N]
    selector: np.ndarray  # int32 [P]
    commit_counts: np.ndarray  # int32 [R]
    y_unpacked: np.ndarray  # [M, N], the kernel on every row
    y_compact: np.ndarray  # [P, N], the kernel on the gathered rows S·X
    y_before: np.ndarray  # [M, N], the packed output buffer before the call
    y_packed: np.ndarray  # [M, N], y_before with the used slots' rows scattered in


def projection(x: np.ndarray, w: np.ndarray, bias: np.ndarray, pk: data.Packing, y_unpacked: np.ndarray,
               y_compact: np.ndarray, y_before: np.ndarray) -> Projection:
    """The packed path assembled from the kernel's two calls: an empty slot's row (never
    compared) as zeros, the used slots scattered over what the previous step left."""
    y_compact = y_compact.copy()
    y_compact[pk.selector < 0] = 0
    return Projection(x=x, w=w, bias=bias, selector=pk.selector, commit_counts=pk.commit_counts,
                      y_unpacked=y_unpacked, y_compact=y_compact, y_before=y_before,
                      y_packed=data.scatter(y_before, y_compact, pk.selector))


def write_dump(path: Path, name: str, p: Projection, *, bias_at: Optional[str], k_walk: Optional[str],
               engine: str, build: str, device: str, model: str) -> None:
    """`bias_at` None leaves the attribute out (its default, `end`); `k_walk` None declares no
    walk (the `walk` check is then a SKIP)."""
    n = p.w.shape[0]
    with DumpWriter(str(path), engine=engine, build=build, device=device, model=model, overwrite=True) as dw:
        dw.add_projection(name, x=p.x, x_dtype="f32", weights=[Segment("f32", 0, n, values=p.w, name="w")],
                          accumulator="f32-rn", output_dtype="f32", epilogue="bias", bias=p.bias,
                          bias_dtype="f32", bias_at=bias_at, k_walk=k_walk, selector=p.selector,
                          commit_counts=p.commit_counts, requests=data.kRequests,
                          block_rows=data.kBlockRows, cap=data.kCap, y_unpacked=p.y_unpacked,
                          y_packed=p.y_packed, y_compact=p.y_compact, y_before=p.y_before)
