#!/usr/bin/python3
"""Baseline for tools/bench/bench_logits: the same core statistics as `ncert compare` (max |d|,
argmax agreement, the top-1 margin, KL(A||B) through log-softmax) with numpy + h5py, reading
16 rows at a time. Prints the throughput (both files counted) in GB/s on the last line.

Usage: /usr/bin/python3 logits_baseline.py A.h5 B.h5 [run]
"""
import sys
import time

import h5py
import numpy as np


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def main():
    path_a, path_b = sys.argv[1], sys.argv[2]
    run = sys.argv[3] if len(sys.argv) > 3 else "greedy"
    t0 = time.perf_counter()
    with h5py.File(path_a, "r") as fa, h5py.File(path_b, "r") as fb:
        la, lb = fa[f"logits/{run}/logits"], fb[f"logits/{run}/logits"]
        rows, vocab = la.shape
        max_abs = 0.0
        agree = 0
        kl_max = 0.0
        margin_min = np.inf
        for r0 in range(0, rows, 16):
            a = la[r0:r0 + 16].astype(np.float64)
            b = lb[r0:r0 + 16].astype(np.float64)
            max_abs = max(max_abs, float(np.abs(b - a).max()))
            agree += int((a.argmax(axis=1) == b.argmax(axis=1)).sum())
            top2 = np.partition(a, -2, axis=1)[:, -2:]
            margin_min = min(margin_min, float((top2[:, 1] - top2[:, 0]).min()))
            lpa, lpb = log_softmax(a), log_softmax(b)
            kl = (np.exp(lpa) * (lpa - lpb)).sum(axis=1)
            kl_max = max(kl_max, float(kl.max()))
    seconds = time.perf_counter() - t0
    gb = 2 * rows * vocab * 4 / 1e9
    print(f"rows {rows} vocab {vocab} max|d| {max_abs:.3g} top1 {agree}/{rows} min margin {margin_min:.3g} "
          f"KL max {kl_max:.3g}")
    print(f"{seconds:.3f} s {gb / seconds:.3f} GB/s")


if __name__ == "__main__":
    main()
