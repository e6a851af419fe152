"""Writes the FP8 dumps with plain h5py, as docs/dump-format.md (version 2) describes them: x in
f32 with its FP8 codes (`x_quant`, `x_quantized` as u8 tagged `dtype`, `x_scales` [M, 1] per
token or [M, K/g] per block of g) and one scaled FP8 weight segment (`format` e4m3 / e5m2,
`values` [N, K] tagged the same way, one f32 scale per output channel, `dequant = "f32"`: ORT's
DequantizeLinear is fl32(q · s), measured by run.py)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np


class Projection(NamedTuple):
    name: str
    fmt: str                 # "e4m3" or "e5m2": the activations' and the weights' FP8 type
    x: np.ndarray            # f32 [M, K], before quantization
    x_quantized: np.ndarray  # u8 [M, K], the FP8 codes ORT computed
    x_scales: np.ndarray     # f32 [M, K/x_quant_group]
    w_values: np.ndarray     # u8 [N, K], FP8 codes
    w_scales: np.ndarray     # f32 [N, 1]
    selector: np.ndarray     # i32 [P]
    y_unpacked: np.ndarray   # f32 [M, N]
    y_packed: np.ndarray
    y_compact: np.ndarray    # f32 [P, N]
    y_before: np.ndarray


def write_dump(path: Path, p: Projection, ort_version: str) -> None:
    m, k = p.x.shape
    n = p.w_values.shape[0]
    with h5py.File(path, "w") as f:
        f.attrs["ncert_schema"] = "ncert-dump"
        f.attrs["ncert_schema_version"] = np.int64(2)
        f.attrs["engine"] = "onnxruntime-node"
        f.attrs["build"] = (f"onnxruntime {ort_version} CPU EP: QuantizeLinear (opset 21, "
                            f"{'per-axis' if p.x_scales.shape[1] == 1 else 'blocked'}, "
                            f"saturate) to {p.fmt}, DequantizeLinear, MLAS SGEMM")
        f.attrs["model"] = f"{p.fmt} activations x {p.fmt} weights, {m}x{k} by {n}x{k}"
        f.attrs["device"] = "cpu (x86_64)"
        g = f.create_group(f"projections/{p.name}")
        for key, value in (("op", "linear"), ("accumulator", "f32-rn"), ("output_dtype", "f32"),
                           ("epilogue", "none"), ("x_quant", p.fmt)):
            g.attrs[key] = value
        g.attrs["k"] = np.int64(k)
        g.attrs["n"] = np.int64(n)
        g.attrs["x_quant_group"] = np.int64(k // p.x_scales.shape[1])  # k: one scale per token
        g["x"] = p.x.astype(np.float32)
        g["x_quantized"] = p.x_quantized.astype(np.uint8)
        g["x_quantized"].attrs["dtype"] = p.fmt
        g["x_scales"] = p.x_scales.astype(np.float32)
        g["selector"] = p.selector.astype(np.int32)
        for key in ("y_unpacked", "y_packed", "y_compact", "y_before"):
            g[key] = getattr(p, key).astype(np.float32)
        w = g.create_group("weight/w")
        w.attrs["format"] = p.fmt
        w.attrs["row_begin"] = np.int64(0)
        w.attrs["row_end"] = np.int64(n)
        w.attrs["group_size"] = np.int64(k)  # one scale per output channel
        w.attrs["dequant"] = "f32"
        w["values"] = p.w_values.astype(np.uint8)
        w["values"].attrs["dtype"] = p.fmt
        w["scales"] = p.w_scales.astype(np.float32)
