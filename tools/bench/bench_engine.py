#!/usr/bin/python3
"""`ncert check` of one projection against the engine kernel's own two calls, side by side.

The engine runs torch's f32 linear twice: on all M rows (the unpacked path) and on the compact
buffer of the packed path (8 requests of M/8 rows, each committing a prefix of at most 4 rows,
gathered into M slots by python/ncert_dump's pack_rows and scattered back over y_before). x, W,
the packing and the outputs are written with python/ncert_dump as one projection (f32 x and W,
accumulator f32-rn, f32 outputs: what examples/torch_engine declares for torch's f32 linear),
and `ncert check` must PASS it.

Kernels (--kernel):
  onednn  torch's oneDNN linear (torch.utils.mkldnn.to_mkldnn of an nn.Linear; x and y dense).
          torch 1.13 keeps W in the plain layout and oneDNN reorders it into its blocked layout
          on every call: at M = 32 that reorder is most of the call's time.
  linear  torch.nn.functional.linear, the BLAS torch was built with (Debian's torch: the system
          BLAS). OpenBLAS 0.3.21 computes a row with different bits depending on where it sits
          in a 32-row call, so the packed path FAILs identity at the default shape (exit 1).
With onednn the F.linear calls are timed as well (a context row): the fastest f32 kernel torch
has here, though its dump would not PASS.

Each repetition times, in this order: the engine's two calls (time.perf_counter around both,
after one warm-up call of each), the F.linear calls (onednn only), `ncert check` as a subprocess
(wall time: process start, reading, reference, checks and the JSON report, written to the out
directory), and a read of the dump in 1 MiB blocks (what `cat DUMP > /dev/null` does). The dump
is in the page cache for both readers. Medians and bests over the repetitions; the issue's target
is check / engine <= 1.5.

Usage: /usr/bin/python3 tools/bench/bench_engine.py --ncert build/release/certify/ncert [--out DIR]
       [--m 32] [--k 5120] [--n 16480] [--reps 5] [--threads 2] [--seed 1] [--kernel onednn]

Exit: 0 the check PASSed (whatever the ratio), 1 it did not, 2 usage, 77 torch or h5py missing.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

kRepo = Path(__file__).resolve().parents[2]
kRequests = 8  # R <= 8 and cap <= min(4, B): the packing helper's guards
kMaxCap = 4
kCommit = (3, 4, 2, 4, 1, 3, 4, 2)  # rows committed per request (a prefix of its block), as half_gemm's
kBlock = 1 << 20  # cat's read size

Calls = Callable[[], Tuple[Any, Any]]  # an engine's two calls: (y_unpacked, y_compact) tensors


@dataclass
class Packing:
    requests: int
    block_rows: int
    cap: int
    commit_counts: np.ndarray  # int32 [R]


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ncert", required=True, type=Path, help="the ncert binary")
    p.add_argument("--out", type=Path, help="directory for the dump and check's reports (default: a temporary "
                                            "directory, removed at the end)")
    p.add_argument("--m", type=int, default=32, help="rows (a multiple of 8, or at most 8)")
    p.add_argument("--k", type=int, default=5120)
    p.add_argument("--n", type=int, default=16480)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="torch's threads and check's --threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kernel", choices=("onednn", "linear"), default="onednn",
                   help="onednn: torch's oneDNN linear; linear: torch.nn.functional.linear (torch's BLAS)")
    args = p.parse_args(argv)
    if min(args.m, args.k, args.n, args.reps, args.threads) < 1:
        p.error("--m, --k, --n, --reps and --threads must be positive")
    if args.m > kRequests and args.m % kRequests:
        p.error(f"--m {args.m}: more than {kRequests} rows must be a multiple of {kRequests} (requests)")
    if not os.access(args.ncert, os.X_OK):
        p.error(f"--ncert {args.ncert}: not an executable file")
    return args


def packing(m: int) -> Packing:
    """R = min(8, M) requests of B = M / R rows; request r commits min(kCommit[r], cap) rows."""
    requests = min(kRequests, m)
    block_rows = m // requests
    cap = min(kMaxCap, block_rows)
    counts = np.array([min(c, cap) for c in kCommit[:requests]], dtype=np.int32)
    return Packing(requests, block_rows, cap, counts)


def inputs(m: int, k: int, n: int, seed: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x ~ N(0, 1) [M, K], W ~ N(0, 1/K) [N, K], y_before ~ N(0, 1) [M, N]; all f32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    w *= np.float32(1.0 / np.sqrt(k))
    y_before = rng.standard_normal((m, n), dtype=np.float32)
    return x, w, y_before


def timed(calls: Calls) -> Tuple[float, Any, Any]:
    t0 = time.perf_counter()
    yu, yc = calls()
    return time.perf_counter() - t0, yu, yc


def read_like_cat(path: Path) -> float:
    """Seconds to read `path` in 1 MiB blocks into one buffer (cat's loop)."""
    view = memoryview(bytearray(kBlock))
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(view):
            pass
    return time.perf_counter() - t0


def first_failure(report: Any) -> str:
    """The reason a report is not PASS: its error, else its first failing check."""
    if not isinstance(report, dict):
        return "no report"
    error = report.get("error")
    if error:
        return f"error {error.get('name')} ({error.get('code')}): {error.get('message')}"
    for c in report.get("checks", []):
        if c.get("verdict") == "FAIL":
            return f"{c.get('id')}: {c.get('reason')}"
    return f"verdict {report.get('verdict')}"


def run_check(ncert: Path, dump: Path, report: Path, threads: int) -> Tuple[float, int, Any, str]:
    """One `ncert check`: (wall seconds, exit code, the JSON report or None, stdout + stderr)."""
    report.unlink(missing_ok=True)  # never read an earlier run's report
    cmd = [str(ncert), "check", str(dump), "--threads", str(threads), "--quiet", "--json", str(report)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - t0
    parsed = None
    if report.exists():
        with open(report, encoding="utf-8") as f:
            parsed = json.load(f)
    return seconds, proc.returncode, parsed, proc.stdout


def check_timing(report: Any) -> Tuple[float, float, float]:
    """check's own timing fields (seconds): total, HDF5 reads, reference."""
    stats = report.get("stats", {})

    def get(key: str) -> float:
        return float(stats.get(f"timing_{key}_seconds", float("nan")))
    return get("total"), get("read"), get("reference")


def row(label: str, values: List[float], note: str = "") -> str:
    return f"{label:34} {statistics.median(values):8.4f}s {min(values):8.4f}s   {note}".rstrip()


@dataclass
class CheckRuns:
    """`ncert check` runs of one dump, with a cat-like read after each."""
    seconds: List[float] = field(default_factory=list)
    cat: List[float] = field(default_factory=list)
    inside: List[Tuple[float, float, float]] = field(default_factory=list)  # check's own: total, reading, reference
    verdict_line: str = ""

    def run(self, ncert: Path, dump: Path, report: Path, threads: int) -> bool:
        """One check and one read; False (with the failure printed) if the check did not PASS."""
        seconds, code, parsed, text = run_check(ncert, dump, report, threads)
        self.seconds.append(seconds)
        verdict = parsed.get("verdict") if isinstance(parsed, dict) else None
        if code != 0 or verdict != "PASS":
            print(f"ncert check: exit {code}, verdict {verdict}: {first_failure(parsed)}")
            print(text.rstrip())
            return False
        self.verdict_line = text.strip().splitlines()[-1] if text.strip() else ""
        self.inside.append(check_timing(parsed))
        self.cat.append(read_like_cat(dump))
        return True

    def print_rows(self, size: int, engine_s: List[float]) -> float:
        """The check, read and own-timing rows and the ratio to the engine; returns check's median."""
        cm, rm = statistics.median(self.seconds), statistics.median(self.cat)
        print(row("ncert check", self.seconds, self.verdict_line))
        print(row("read in 1 MiB blocks (cat)", self.cat, f"{size / rm / 1e9:.2f} GB/s"))
        total, read, reference = (statistics.median(t[i] for t in self.inside) for i in range(3))
        print(f"check's own timing (medians): {total:.4f} s = reading {read:.4f} + reference {reference:.4f} "
              f"+ rest {total - read - reference:.4f}")
        ratios = [c / e for c, e in zip(self.seconds, engine_s)]
        print(f"check / engine: {cm / statistics.median(engine_s):.2f} (medians), {statistics.median(ratios):.2f} "
              f"(median of per-repetition ratios); target <= 1.5")
        return cm


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    missing = [name for name in ("torch", "h5py") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"bench_engine: skipped: {' and '.join(missing)} not installed for {sys.executable} "
              f"(Debian: apt-get install python3-torch python3-h5py)")
        return 77
    # F.linear calls the BLAS torch was built with; OpenBLAS reads its thread count when it is
    # loaded, and torch.set_num_threads sets only torch's own (OpenMP) threads, oneDNN's included.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    import torch
    import torch.nn.functional as F
    import torch.utils.mkldnn

    sys.path.insert(0, str(kRepo / "python"))
    from ncert_dump import DumpWriter, Segment, pack_rows, scatter_rows

    torch.set_num_threads(args.threads)
    m, k, n = args.m, args.k, args.n
    geo = packing(m)
    x, w, y_before = inputs(m, k, n, args.seed)
    compact, selector = pack_rows(x, geo.requests, geo.block_rows, geo.cap, m, geo.commit_counts)
    xt, ct, wt = torch.from_numpy(x), torch.from_numpy(compact), torch.from_numpy(w)
    blas_name = f"torch.nn.functional.linear f32 ({'MKL' if torch.backends.mkl.is_available() else 'system BLAS'})"

    def blas() -> Tuple[Any, Any]:
        with torch.no_grad():
            return F.linear(xt, wt), F.linear(ct, wt)

    engine: Calls = blas
    kernel = blas_name
    context: Optional[Calls] = None
    if args.kernel == "onednn":
        with torch.no_grad():
            dense = torch.nn.Linear(k, n, bias=False, device="meta")
            dense.weight = torch.nn.Parameter(wt, requires_grad=False)
            onednn = torch.utils.mkldnn.to_mkldnn(dense)

        def onednn_calls() -> Tuple[Any, Any]:
            with torch.no_grad():
                return onednn(xt), onednn(ct)
        engine, kernel, context = onednn_calls, "torch oneDNN linear f32 (torch.utils.mkldnn)", blas
        context()  # its warm-up call

    y_unpacked_t, y_compact_t = engine()  # the warm-up calls: the outputs the dump holds
    y_unpacked, y_compact = y_unpacked_t.numpy(), y_compact_t.numpy()
    y_packed = scatter_rows(y_compact, selector, y_before.copy())

    temporary = args.out is None
    out = Path(tempfile.mkdtemp(prefix="bench_engine.")) if args.out is None else args.out
    out.mkdir(parents=True, exist_ok=True)
    dump = out / f"engine-{m}x{k}x{n}.h5"
    try:
        t0 = time.perf_counter()
        with DumpWriter(dump, engine="pytorch", build=f"torch {torch.__version__}, {kernel}, {args.threads} threads",
                        device=f"cpu ({platform.machine()})", model=f"linear {m}x{k} by {n}x{k}",
                        overwrite=True) as dw:
            dw.add_projection("linear", x=x, weights=[Segment("f32", 0, n, values=w)], accumulator="f32-rn",
                              output_dtype="f32", epilogue="none", selector=selector,
                              commit_counts=geo.commit_counts, requests=geo.requests, block_rows=geo.block_rows,
                              cap=geo.cap, y_unpacked=y_unpacked, y_packed=y_packed, y_compact=y_compact,
                              y_before=y_before)
        write_seconds = time.perf_counter() - t0
        size = dump.stat().st_size
        print(f"M {m} x K {k} x N {n}, {int(geo.commit_counts.sum())} of {m} rows packed into {m} slots "
              f"(R {geo.requests}, B {geo.block_rows}, cap {geo.cap}); {args.threads} threads; torch "
              f"{torch.__version__}, {kernel}")
        print(f"dump {dump}: {size / 1e9:.3f} GB, written in {write_seconds:.1f} s")

        read_like_cat(dump)  # the page cache holds the dump for both readers
        engine_s: List[float] = []
        context_s: List[float] = []
        checks = CheckRuns()
        differ = 0
        for rep in range(args.reps):
            seconds, yu, yc = timed(engine)
            engine_s.append(seconds)
            differ += int(not (torch.equal(yu, y_unpacked_t) and torch.equal(yc, y_compact_t)))
            if context is not None:
                context_s.append(timed(context)[0])
            if not checks.run(args.ncert, dump, out / f"check-{rep}.json", args.threads):
                return 1

        print(f"{'':34} {'median':>9} {'best':>9}   ({args.reps} repetitions, interleaved)")
        print(row("engine, two calls", engine_s))
        if context is not None:
            print(row("F.linear, two calls (context)", context_s, f"{blas_name}; not the kernel the dump holds"))
        cm = checks.print_rows(size, engine_s)
        if context is not None:
            print(f"check / F.linear: {cm / statistics.median(context_s):.2f} (medians)")
        if differ:
            print(f"note: the engine's outputs differed from the dumped ones in {differ} of {args.reps} repetitions")
        return 0
    finally:
        if temporary:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
