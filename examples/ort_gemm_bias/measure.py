#!/usr/bin/env python3
"""Measures what ONNX Runtime's Gemm with a bias computes: README.md's "What was measured", by
one command.

    python3 examples/ort_gemm_bias/measure.py [--ort-package DIR]

The graph ORT really runs; which K walk, with the bias added first or last, reproduces its f32
outputs bit for bit (an exact numpy emulation of fmaf and f32 adds, at K = 1536 and 4096, on the
example's inputs and on its small-activations inputs); whether a row's output depends on the batch
it was computed in (the gathered rows, and a row alone, M = 1). Exit 0, or 77 when a
prerequisite is missing (the reason printed). About 13 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "common"))

import data  # noqa: E402
import kernels  # noqa: E402
from harness import find_ort_package, skip  # noqa: E402


def same(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.count_nonzero(a.view(np.uint32) == b.view(np.uint32)))


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ort-package", type=Path, help="the onnxruntime-node package directory")
    args = p.parse_args(argv)
    try:
        import onnx  # noqa: F401
    except ImportError:
        return skip("the onnx Python package is not installed (Debian: python3-onnx; tools/install-deps)")
    ort_package, why = find_ort_package(args.ort_package)
    if ort_package is None:
        return skip(why)

    pk = data.packing()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runner = kernels.OrtRunner(work, ort_package)
        cases = {}
        for label, k, wseed, xseed, small in (("K = 1536", data.kK, 1, 2, False),
                                              ("K = 4096", data.kKSmall, 3, 2, False),
                                              ("K = 4096, small rows", data.kKSmall, 3, 5, True)):
            w, bias = data.weights(k, wseed)
            x = data.activations(k, xseed, small)
            model = work / f"gemm_{k}.onnx"
            if not model.exists():
                kernels.build_gemm_model(model, w, bias)
            calls = {"all": runner.plan(model, x, data.kN, optimized=work / f"gemm_{k}.run.onnx"),
                     "gathered": runner.plan(model, data.gather(x, pk.selector), data.kN)}
            for r in (0, 13, 31):
                calls[f"row {r}"] = runner.plan(model, x[r:r + 1], data.kN)
            cases[label] = (k, w, bias, x, model, calls)
        version = runner.run()
        print(f"onnxruntime-node {version}, one intra-op thread; M = {data.kM}, N = {data.kN}, "
              f"x ~ N(0, 1), w ~ N(0, 0.02^2), bias ~ N(0, 1)")
        for label, (k, w, bias, x, model, calls) in cases.items():
            y = runner.result(calls["all"])
            graph = kernels.optimized_graph(work / f"gemm_{k}.run.onnx")
            print(f"\n{label}: the graph ORT ran: {' ; '.join(graph)}")
            used = pk.selector >= 0
            yc = runner.result(calls["gathered"])
            print(f"  the {int(used.sum())} gathered rows (M = {pk.selector.size}) against the same rows of the "
                  f"M = {data.kM} call: {same(yc[used], y[pk.selector[used]])} of {yc[used].size} bit-identical")
            for r in (0, 13, 31):
                alone = runner.result(calls[f"row {r}"])
                print(f"  row {r} alone (M = 1): {same(alone[0], y[r])} of {data.kN} bit-identical")
            blocks = k // data.kStrideK
            for parts in (1, blocks // 2, blocks, blocks * 2):
                walk = "seq-fma" if parts == 1 else f"splitk:{parts}:seq/seq-fma"
                first = same(data.emulate(x, w, bias, parts, True), y)
                last = same(data.emulate(x, w, bias, parts, False), y)
                print(f"  {walk:22s} bias first {first:5d} of {y.size} ({100 * first / y.size:5.1f} %), "
                      f"bias last {last:5d} ({100 * last / y.size:5.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
