#!/usr/bin/python3
"""`ncert check` of one 4-bit projection against the engine's own 4-bit kernel's two calls, side by side.

The engine is ONNX Runtime's `com.microsoft.MatMulNBits` CPU kernel (MLAS; 4-bit weights in
blocks of --block along K with an f32 scale and a 4-bit zero point per block, f32 activations,
accuracy_level 0), run with the onnxruntime-node package. x, W and y_before are bench_engine.py's
(the same seed gives the same f32 projection); W is block-quantized by
examples/ort_matmulnbits/model.py, which also builds the model (B, scales and zero_points as
initializers, so the kernel prepacks them as it does a real model's weights). The kernel runs
twice: on all M rows (the unpacked path) and on the compact buffer of the packed path (8 requests
of M/8 rows, each committing a prefix of at most 4 rows, gathered into M slots by
python/ncert_dump's pack_rows and scattered back over y_before). Both calls have M > 1 rows: the
dequantize-then-SGEMM path, whose walk is `seq-fma` (examples/ort_matmulnbits/README.md). The
dump declares the weights as that example does (af4 zero-point, codes and zero points u8-lsb,
f32 scales, dequant f32 sub-mul; accumulator f32-rn, f32 outputs), and `ncert check` must PASS it.

tools/bench/run_ort_timed.js times the calls inside one node process, around `session.run`
only, with intraOpNumThreads = --threads (process start, session creation and file IO are not
counted): one warm-up run of each call (its outputs are the ones the dump holds), then --reps
repetitions of both calls, each output compared bit for bit with the warm-up's. The kernel's
repetitions run first, in that process; then each repetition times, in this order, `ncert check`
as a subprocess (wall time: process start, reading, reference, checks and the JSON report,
written to the out directory) and a read of the dump in 1 MiB blocks (what `cat DUMP > /dev/null`
does). The dump is in the page cache for both readers. Medians and bests over the repetitions;
the issue's target is check / engine <= 1.5.

Usage: /usr/bin/python3 tools/bench/bench_engine_nbits.py --ncert build/release/certify/ncert [--out DIR]
       [--m 32] [--k 5120] [--n 16480] [--block 32] [--reps 5] [--threads 2] [--seed 1]
       [--ort-package DIR]

Exit: 0 the check PASSed (whatever the ratio), 1 it did not (or the kernel failed), 2 usage, 77 a
prerequisite missing (numpy, h5py or onnx for this interpreter, node, onnxruntime-node, an x86-64
CPU): the reason is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

kRepo = Path(__file__).resolve().parents[2]
kHere = Path(__file__).resolve().parent
kExample = kRepo / "examples" / "ort_matmulnbits"
kStrideM = 128  # MLAS gives a thread at most 128 rows: a one-row tile runs the one-row kernel


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ncert", required=True, type=Path, help="the ncert binary")
    p.add_argument("--out", type=Path, help="directory for the model, the dump and check's reports (default: a "
                                            "temporary directory, removed at the end)")
    p.add_argument("--m", type=int, default=32, help="rows (a multiple of 8, or 2 to 8)")
    p.add_argument("--k", type=int, default=5120, help="a multiple of --block")
    p.add_argument("--n", type=int, default=16480)
    p.add_argument("--block", type=int, choices=(32, 128), default=32, help="MatMulNBits' block_size")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="the session's intraOpNumThreads and check's --threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ort-package", type=Path, help="the onnxruntime-node package directory (default: the one "
                                                    "tools/install-npm-deps installs, installing it if absent)")
    args = p.parse_args(argv)
    if min(args.m, args.k, args.n, args.reps, args.threads) < 1:
        p.error("--m, --k, --n, --reps and --threads must be positive")
    if args.m > 8 and args.m % 8:
        p.error(f"--m {args.m}: more than 8 rows must be a multiple of 8 (requests)")
    if args.m < 2 or args.m % kStrideM == 1:
        p.error(f"--m {args.m}: a call of one row (or M mod {kStrideM} = 1: a thread's one-row tile) runs MLAS' "
                f"one-row kernel, whose walk is not the declared seq-fma")
    if args.k % args.block:
        p.error(f"--k {args.k}: not a multiple of --block {args.block}")
    if not os.access(args.ncert, os.X_OK):
        p.error(f"--ncert {args.ncert}: not an executable file")
    return args


def prerequisites(ort_package: Optional[Path]) -> Tuple[Optional[Path], str]:
    """The onnxruntime-node package directory, or None and why the bench cannot run."""
    missing = [name for name in ("numpy", "h5py", "onnx") if importlib.util.find_spec(name) is None]
    if missing:
        return None, (f"{' and '.join(missing)} not installed for {sys.executable} "
                      f"(Debian: apt-get install {' '.join('python3-' + m for m in missing)})")
    if platform.machine() not in ("x86_64", "AMD64"):
        return None, f"the declarations are measured on x86-64 MLAS, not {platform.machine()}"
    if shutil.which("node") is None:
        return None, "node is not installed (Debian: nodejs; tools/install-deps)"
    from harness import find_ort_package  # examples/common/harness.py: installs the package if absent
    return find_ort_package(ort_package)


def run_kernel(ort_package: Path, job: dict, work: Path) -> dict:
    """run_ort_timed.js on `job`: its JSON line (timings, differing repetitions)."""
    path = work / "job.json"
    path.write_text(json.dumps(job))
    proc = subprocess.run(["node", str(kHere / "run_ort_timed.js"), str(ort_package), str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"run_ort_timed.js: exit {proc.returncode}: {proc.stderr.strip()}")
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    sys.dont_write_bytecode = True  # the example's modules run from the source tree
    # ncert_dump, the examples' harness, the example's modules, bench_engine
    for d in (kRepo / "python", kRepo / "examples" / "common", kExample, kHere):
        sys.path.insert(0, str(d))
    ort_package, why = prerequisites(args.ort_package)
    if ort_package is None:
        print(f"bench_engine_nbits: skipped: {why}")
        return 77

    import numpy as np

    import model  # examples/ort_matmulnbits: the quantizer and the ONNX model
    from bench_engine import CheckRuns, inputs, packing, read_like_cat, row
    from export import kPrefillWalk, segment
    from ncert_dump import DumpWriter, pack_rows, scatter_rows

    m, k, n, block = args.m, args.k, args.n, args.block
    geo = packing(m)
    x, w, y_before = inputs(m, k, n, args.seed)
    q = model.quantize(w, block)
    del w
    compact, selector = pack_rows(x, geo.requests, geo.block_rows, geo.cap, m, geo.commit_counts)

    temporary = args.out is None
    out = Path(tempfile.mkdtemp(prefix="bench_engine_nbits.")) if args.out is None else args.out
    out.mkdir(parents=True, exist_ok=True)
    dump = out / f"engine-nbits{block}-{m}x{k}x{n}.h5"
    try:
        model_path = out / f"matmulnbits-block{block}-{k}x{n}.onnx"
        model_path.write_bytes(model.build_model(q, accuracy_level=0))
        calls: List[Dict[str, Any]] = []
        for name, a in (("unpacked", x), ("compact", compact)):
            xp = out / f"{name}_x.bin"
            np.ascontiguousarray(a, dtype="<f4").tofile(xp)
            calls.append({"x": str(xp), "rows": int(a.shape[0]), "y": str(out / f"{name}_y.bin")})
        try:
            ran = run_kernel(ort_package, {"model": str(model_path), "k": k, "threads": args.threads,
                                           "reps": args.reps, "calls": calls}, out)
        except RuntimeError as e:
            print(f"bench_engine_nbits: {e}")
            return 1
        version = ran["onnxruntime"]
        y_unpacked, y_compact = (np.fromfile(c["y"], dtype="<f4").reshape(c["rows"], n) for c in calls)
        y_packed = scatter_rows(y_compact, selector, y_before.copy())
        kernel = f"onnxruntime-node {version} MatMulNBits (bits 4, block_size {block}, accuracy_level 0)"

        t0 = time.perf_counter()
        with DumpWriter(dump, engine="onnxruntime-node", build=f"onnxruntime {version} cpu, {args.threads} threads",
                        device=f"cpu ({platform.machine()})",
                        model=f"MatMulNBits bits=4 block_size={block} accuracy_level=0, {m}x{k} by {n}x{k}",
                        overwrite=True) as dw:
            dw.add_projection("matmulnbits", x=x, x_dtype="f32", weights=[segment(q)], accumulator="f32-rn",
                              output_dtype="f32", epilogue="none", k_walk=kPrefillWalk, selector=selector,
                              commit_counts=geo.commit_counts, requests=geo.requests, block_rows=geo.block_rows,
                              cap=geo.cap, y_unpacked=y_unpacked, y_packed=y_packed, y_compact=y_compact,
                              y_before=y_before)
        write_seconds = time.perf_counter() - t0
        size = dump.stat().st_size
        print(f"M {m} x K {k} x N {n}, {int(geo.commit_counts.sum())} of {m} rows packed into {m} slots "
              f"(R {geo.requests}, B {geo.block_rows}, cap {geo.cap}); {args.threads} threads; {kernel}")
        print(f"dump {dump}: {size / 1e9:.3f} GB, written in {write_seconds:.1f} s "
              f"(session created in {ran['session_seconds']:.2f} s)")

        read_like_cat(dump)  # the page cache holds the dump for both readers
        engine_s = [sum(times) for times in ran["seconds"]]
        checks = CheckRuns()
        for rep in range(args.reps):
            if not checks.run(args.ncert, dump, out / f"check-{rep}.json", args.threads):
                return 1

        print(f"{'':34} {'median':>9} {'best':>9}   ({args.reps} repetitions; the kernel's first, in one process)")
        print(row("engine, two calls", engine_s, f"(unpacked {statistics.median(t[0] for t in ran['seconds']):.4f}"
                                                 f" + packed {statistics.median(t[1] for t in ran['seconds']):.4f})"))
        checks.print_rows(size, engine_s)
        differ = ran["differ"]
        if any(differ):
            print(f"note: the kernel's outputs differed from the dumped ones in {differ[0]} (unpacked) and "
                  f"{differ[1]} (packed) of {args.reps} repetitions")
        else:
            print(f"the kernel's outputs: bit-identical to the dumped ones in all {args.reps} repetitions, both calls")
        return 0
    finally:
        if temporary:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
