#!/usr/bin/env python3
"""Reproduces the measurements README.md states about MLAS, from the real kernels' outputs.

    python3 examples/ort_matmulnbits/measure.py --work /tmp/ort-measure [--ort-package DIR]

1. The one-row (M = 1) kernel's order: a numpy emulation of 16 FMA lanes folded as
   `FoldAccumulators` does (each 128-bit quarter's 4 lanes in order, then (Q0 + Q2) + (Q1 + Q3)),
   against the kernel's outputs, beside the single-tree lane forms ncert can declare.
2. accuracy_level 1 against 0 (the same compute type, SQNBIT_CompFp32): the same bits?
3. accuracy_level 4: the int8 activation quantization of `QuantizeARow_CompInt8_avx2`
   reproduced in numpy, the integer dot products scaled per block, against the kernel's outputs;
   and whether a row's bits depend on the call's M (rows of an M = 3 call against an M = 4 one).

Prints what it finds; exit 0 when it ran (the findings are data, not verdicts), 77 when
onnxruntime-node is unavailable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

kHere = Path(__file__).resolve().parent
sys.dont_write_bytecode = True
sys.path.insert(0, str(kHere))

import run  # noqa: E402, F401  (first: it puts python/ncert_dump and examples/common on sys.path)
from harness import find_ort_package, kSkip  # noqa: E402

import model  # noqa: E402
from export import OrtRunner, kShapes  # noqa: E402


def fma_lanes(x: np.ndarray, w: np.ndarray, lanes: int) -> np.ndarray:
    """[lanes, N]: lane l holds fma-accumulated terms k ≡ l (mod lanes), k ascending. The
    product of two f32 is exact in f64 (48 bits); the f64 sum then rounds twice (to f64, to
    f32), which differs from one fma rounding only when the first rounding lands exactly on an
    f32 halfway point: rare, and the comparison with the kernel shows whether it happened."""
    acc = np.zeros((lanes, w.shape[0]), np.float32)
    w64 = w.astype(np.float64)
    for k in range(x.shape[0]):
        lane = k % lanes
        acc[lane] = (acc[lane].astype(np.float64) + np.float64(x[k]) * w64[:, k]).astype(np.float32)
    return acc


def tree(v: list, kind: str) -> np.ndarray:
    v = list(v)
    if kind == "seq":
        t = v[0]
        for u in v[1:]:
            t = (t + u).astype(np.float32)
        return t
    while len(v) > 1:
        h = len(v) // 2
        v = [(v[i] + v[i + h] if kind == "halving" else v[2 * i] + v[2 * i + 1]).astype(np.float32)
             for i in range(h)]
    return v[0]


def fold_quarters(acc16: np.ndarray) -> np.ndarray:
    q = [tree(list(acc16[4 * j:4 * j + 4]), "seq") for j in range(4)]
    return ((q[0] + q[2]).astype(np.float32) + (q[1] + q[3]).astype(np.float32)).astype(np.float32)


def int8_reference(x: np.ndarray, q: model.QuantWeights) -> np.ndarray:
    """Y of accuracy_level 4 from MLAS' activation quantization, exact dot products in f64."""
    m, g, b = x.shape[0], q.groups, q.block_size
    xb = x.reshape(m, g, b)
    amax = np.abs(xb).max(axis=2)
    scale = (amax / np.float32(127)).astype(np.float32)
    mul = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0).astype(np.float32)
    qa = np.rint((xb * mul[:, :, None]).astype(np.float32)).astype(np.int64)
    qb = q.codes.reshape(q.n, g, b).astype(np.int64) - q.zp.astype(np.int64)[:, :, None]
    sb = q.scales.reshape(q.n, g).astype(np.float64)
    out = np.zeros((m, q.n))
    for j in range(g):
        out += scale[:, j, None].astype(np.float64) * sb[None, :, j] * (qa[:, j, :] @ qb[:, j, :].T)
    return out


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True, help="directory for models and kernel I/O")
    p.add_argument("--ort-package", type=Path, help="the onnxruntime-node package directory")
    args = p.parse_args(argv)
    pkg, why = find_ort_package(args.ort_package)
    if pkg is None:
        print(f"SKIP: {why}")
        return kSkip
    args.work.mkdir(parents=True, exist_ok=True)
    runner = OrtRunner(args.work, pkg)
    rng = np.random.default_rng(5)
    jobs = []
    for block, shape in kShapes.items():
        q = model.random_weights(shape.n, shape.k, block, seed=block)
        x = rng.standard_normal((4, shape.k)).astype(np.float32)
        paths = []
        for level in (0, 1, 4):
            path = args.work / f"level{level}_block{block}.onnx"
            path.write_bytes(model.build_model(q, accuracy_level=level))
            paths.append(path)
        levels01 = [(runner.add(paths[0], x[:m]), runner.add(paths[1], x[:m])) for m in (1, 4)]
        # accuracy_level 4's batch (in)variance: the first 3 rows alone against the same rows
        # inside a call of 4.
        batch = (runner.add(paths[2], x[:3]), runner.add(paths[2], x))
        jobs.append((block, q, x, levels01, batch))
    runner.run()
    print(f"onnxruntime-node {runner.version}")
    for block, q, x, levels01, (three, level4) in jobs:
        w = model.dequantize_f32(q)
        for (a, b), m in zip(levels01, (1, 4)):
            same = np.array_equal(runner.y(a, q.n).view(np.uint32), runner.y(b, q.n).view(np.uint32))
            print(f"block {block}, M = {m}: accuracy_level 1 {'equals' if same else 'DIFFERS FROM'} "
                  "accuracy_level 0 bit for bit")
        y1 = runner.y(levels01[0][0], q.n)[0]
        forms = {"fold of FoldAccumulators (16 lanes)": fold_quarters(fma_lanes(x[0], w, 16))}
        for lanes in (8, 16, 32):
            acc = fma_lanes(x[0], w, lanes)
            for kind in ("seq", "halving", "pairs"):
                forms[f"lanes:{lanes}:{kind}:fma"] = tree(list(acc), kind)
        print(f"block {block}, K = {q.k}, N = {q.n}, M = 1, accuracy_level 0: outputs equal bit for bit")
        for name, y in forms.items():
            print(f"  {name:38s} {int(np.sum(y == y1)):4d} of {q.n}")
        y4 = runner.y(level4, q.n)
        print(f"block {block}, M = 4, accuracy_level 4: max |kernel - int8 reference| "
              f"{np.abs(y4 - int8_reference(x, q)).max():.2e}, max |kernel - f32 product| "
              f"{np.abs(y4 - x.astype(np.float64) @ w.T.astype(np.float64)).max():.2e}")
        y3 = runner.y(three, q.n)
        moved = [r for r in range(3) if not np.array_equal(y3[r].view(np.uint32), y4[r].view(np.uint32))]
        print(f"block {block}, accuracy_level 4: rows of an M = 3 call whose bits differ from the same "
              f"rows in an M = 4 call: {moved or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
