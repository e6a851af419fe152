#!/usr/bin/env python3
"""Measures what the example's kernels compute: README.md's "What was measured", by one command.

    python3 examples/half_gemm/measure.py [--ort-package DIR] [--ncert NCERT]

ONNX Runtime f16 MatMul: the graph ORT really runs; whether the f16 output is the
round-to-nearest-even of the f32 SGEMM value (the same graph without the final Cast) or its
truncation; the f32 accumulator's error against the exact product; whether a row's output
depends on the batch it was computed in (the packed path's identity); which K walk ncert's
emulation reproduces the f32 values with, bit for bit. PyTorch bf16 linear: the
oneDNN implementation, the output's rounding against the exact product, the same batch
independence, and the native fallback (oneDNN disabled) for comparison. Exit 0, or 77 when a
prerequisite is missing (the reason printed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "common"))  # harness, packed_path

import data  # noqa: E402
import kernels  # noqa: E402
from data import kK, kM, kN  # noqa: E402


def residual_stats(z: np.ndarray, c: np.ndarray, ulp: np.ndarray) -> str:
    """Signed residuals (z - c)/ulp toward +|c|: mean, and the share above/below."""
    s = np.sign(c) * (z - c) / ulp
    return (f"mean residual {s.mean():+.4f} ulp, |residual| max {np.abs(s).max():.3f} ulp, "
            f"{(s > 0).mean() * 100:.1f}% outward / {(s < 0).mean() * 100:.1f}% toward zero")


kWalks = ("seq-fma", "lanes:16:halving:fma", "splitk:3:seq/seq-fma", "splitk:6:seq/seq-fma",
          "splitk:12:seq/seq-fma")


def walk_verdicts(ncert: Path, work: Path, x, w, y32, yc32, y32_before) -> None:
    """The f32 SGEMM values held to each candidate K walk by `ncert check` (the walk check)."""
    from export import Projection, write_dump

    pk = data.packing()
    yc32 = yc32.copy()
    yc32[pk.selector < 0] = 0
    for walk in kWalks:
        p = Projection(name="sgemm", dtype="f16", x=x, w=w, selector=pk.selector,
                       commit_counts=pk.commit_counts, requests=data.kRequests,
                       block_rows=data.kBlockRows, cap=data.kCap, y_unpacked=y32, y_compact=yc32,
                       y_before=y32_before, y_packed=data.scatter(y32_before, yc32, pk.selector),
                       y_dtype="f32", k_walk=walk)
        dump = work / "walk.h5"
        write_dump(dump, p, engine="onnxruntime-node", build="measure.py", device="cpu")
        report = work / "walk.json"
        subprocess.run([str(ncert), "check", str(dump), "--json", str(report)], capture_output=True)
        check = next(c for c in json.loads(report.read_text())["checks"]
                     if c["id"] == "projections/sgemm/walk")
        print(f"f32 SGEMM values vs k_walk {walk}: {check['verdict']}: {check['reason']}")


def measure_ort(ort_package: Path, work: Path, ncert: Optional[Path]) -> None:
    x, w, _, _ = data.inputs(seed=7)
    pk = data.packing()
    m16, m32 = work / "f16.onnx", work / "probe.onnx"
    kernels.build_matmul_model(m16, w, "f16")
    kernels.build_matmul_model(m32, w, "f32")
    run = kernels.OrtRunner(work, ort_package)
    i16 = run.plan(m16, x, np.float16, optimized=work / "f16.optimized.onnx")
    i32 = run.plan(m32, x, np.float32)
    ipk = run.plan(m16, data.gather(x, pk.selector), np.float16)
    ipk32 = run.plan(m32, data.gather(x, pk.selector), np.float32)
    ibefore32 = run.plan(m32, data.inputs(seed=8)[0], np.float32)
    ione = [run.plan(m16, x[r:r + 1], np.float16) for r in (0, 13, 31)]
    version = run.run()
    print(f"## ONNX Runtime {version} (onnxruntime-node, CPU), float16 MatMul, M={kM} K={kK} N={kN}")
    print("graph run:", " ; ".join(kernels.optimized_graph(work / "f16.optimized.onnx")))
    y16, y32 = run.result(i16, kN), run.result(i32, kN)
    c = x.astype(np.float64) @ w.astype(np.float64).T
    rne = y32.astype(np.float16)
    rz = data.f16_rz(y32)
    n = y16.size
    print(f"f16 output == RNE(f32 SGEMM value): {np.sum(y16.view(np.uint16) == rne.view(np.uint16))}/{n}; "
          f"== truncation: {np.sum(y16.view(np.uint16) == rz.view(np.uint16))}/{n}; "
          f"RNE and truncation differ at {np.sum(rne != rz)}")
    err = np.abs(y32.astype(np.float64) - c)
    # In units of 2^-24 * sum|x_k w_k| (one f32 rounding of the terms' magnitude): an f32
    # accumulator stays far below K (the worst case, docs/error-bounds.md §2); an f16 one would
    # reach 2^13 times more.
    scale = 2.0 ** -24 * (np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T)
    print(f"f32 SGEMM value vs exact: max |error| = {np.max(err / scale):.2f} x 2^-24 sum|x w| "
          f"(K = {kK}); max {np.max(err / data.ulp_f16(c)):.4f} f16 ulps of the result")
    print("f16 output vs exact:", residual_stats(y16.astype(np.float64), c, data.ulp_f16(c)))
    yc = run.result(ipk, kN)
    used = pk.selector >= 0
    same = np.array_equal(yc[used].view(np.uint16), y16[pk.selector[used]].view(np.uint16))
    ones = all(np.array_equal(run.result(i, kN).view(np.uint16), y16[r:r + 1].view(np.uint16))
               for i, r in zip(ione, (0, 13, 31)))
    print(f"rows computed in a batch of {pk.selector.size} gathered rows equal the M={kM} rows bit "
          f"for bit: {same}; rows 0, 13, 31 alone (M=1): {ones}")
    if ncert is None:
        print("(no ncert binary: the K walk candidates are not tested; give --ncert)")
    else:
        walk_verdicts(ncert, work, x, w, y32, run.result(ipk32, kN), run.result(ibefore32, kN))


def measure_torch() -> None:
    import torch

    _, _, xb, wb = data.inputs(seed=7)
    pk = data.packing()
    c = data.f32_of_bf16(xb).astype(np.float64) @ data.f32_of_bf16(wb).astype(np.float64).T
    print(f"## PyTorch {torch.__version__}, torch.nn.functional.linear on bfloat16 CPU tensors, "
          f"M={kM} K={kK} N={kN}")
    for m in (kM, pk.selector.size, 1):
        print(f"oneDNN implementation at M={m}: {kernels.torch_kernel_name(m, kK, kN)}")
    for label, enabled in (("oneDNN", True), ("native (oneDNN disabled)", False)):
        with torch.backends.mkldnn.flags(enabled=enabled):
            y = kernels.torch_bf16_linear(xb, wb)
            yc = kernels.torch_bf16_linear(data.gather(xb, pk.selector), wb)
            y1 = kernels.torch_bf16_linear(xb[13:14], wb)
        z = data.f32_of_bf16(y).astype(np.float64)
        rne = data.bf16_rne(c)
        rz = data.bf16_rz(c.astype(np.float32))
        used = pk.selector >= 0
        print(f"{label}: output == RNE(exact): {np.sum(y == rne)}/{y.size}; == truncation: "
              f"{np.sum(y == rz)}/{y.size}; {residual_stats(z, c, data.ulp_bf16(c))}")
        print(f"{label}: gathered rows equal bit for bit: "
              f"{np.array_equal(yc[used], y[pk.selector[used]])}; row 13 alone (M=1): "
              f"{np.array_equal(y1, y[13:14])}")
        if enabled:
            one = y
        else:
            print(f"native vs oneDNN: {np.sum(y != one)} of {y.size} values differ")


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ort-package", type=Path, help="the onnxruntime-node package directory "
                   "(default: the one tools/install-npm-deps installed)")
    p.add_argument("--ncert", type=Path, help="the ncert binary, to test the K walk candidates "
                   "(default: as run.py finds it)")
    args = p.parse_args(argv)
    import run  # noqa: F401  (first: it puts python/ncert_dump and examples/common on sys.path)
    from harness import find_ncert, find_ort_package

    ort_package, why = find_ort_package(args.ort_package)
    if ort_package is None:
        print(f"SKIP ONNX Runtime: {why}")
    else:
        with tempfile.TemporaryDirectory() as d:
            measure_ort(ort_package, Path(d), find_ncert(args.ncert))
    why = kernels.torch_available()
    if why:
        print(f"SKIP PyTorch: {why}")
    else:
        measure_torch()
    return 77 if ort_package is None and why else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
