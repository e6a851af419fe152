#!/usr/bin/env python3
"""OpenBLAS's one-row decode GEMV certified by ncert, its reduction order held bit for bit.

    python3 examples/openblas_gemv/run.py --ncert build/release/certify/ncert --out /tmp/ob [--force]

Confirms the orders read from OpenBLAS's source (README.md) against the library on many random
inputs, exports the dumps (f32 x, f32 weights, f32 outputs; M rows one at a time on the
unpacked path, the gathered rows through the same kernel on the packed path), runs `ncert check`
on the legitimate dump and on each planted fault, and holds every exit code and failing check id
against the expected one. Exit status: 0 all as expected, 1 one differs, 2 usage (no ncert
binary, --out holding an earlier run without --force), 77 OpenBLAS not installed or not
loadable (the test suite reports the example as skipped).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional, Set, Tuple

import numpy as np

kHere = Path(__file__).resolve().parent
kRepo = kHere.parent.parent
sys.dont_write_bytecode = True  # the example runs from the source tree: no __pycache__ there
sys.path.insert(0, str(kHere))
sys.path.insert(0, str(kHere.parent / "common"))
try:
    import ncert_dump  # noqa: F401  (PYTHONPATH set by the caller)
except ImportError:  # run from a checkout: the package lives in python/
    sys.path.insert(0, str(kRepo / "python"))

import openblas as ob_mod  # noqa: E402
from harness import check, example_parser, prepare_example, skip  # noqa: E402
from ncert_dump import DumpWriter, Segment, pack_rows, scatter_rows  # noqa: E402

kSeed = 20261201
# A decode step's shape: K = 256 (32 parts of 8 for sgemv_n; 16 | K for sgemv_t), N = 64 (a
# multiple of 16 and of 4: every output column takes the one kernel), R = 2 requests of B = 4 rows,
# at most cap = 3 gathered per request, P = 6 compact slots (one left empty).
kK = 256
kN = 64
kRequests = 2
kBlockRows = 4
kCap = 3
kCounts = np.array([3, 2], dtype=np.int32)
kSlots = 6
kTrials = 48  # random cases of the bit-for-bit confirmation (each M = 8 rows x N = 64 columns)
kDroppedPart = 13  # the planted fault: part 13 (terms 104..111) left out ...
kDroppedCols = np.array([5, 22, 47])  # ... of these output columns
kDroppedLane = 2  # the planted fault of the two-column head: lane 2 left out of ...
kDroppedHeadCols = np.array([1])  # ... column 1
kHeadN = 2
kOutputs = ("dumps", "reports")


def parse_args(argv):
    p = example_parser(__doc__, "directory for dumps and reports")
    p.add_argument("--library", help="libopenblas.so.0 to load (default: Debian's openblas-pthread, "
                   "-serial or -openmp one, by its own path)")
    return p.parse_args(argv)


def random_case(rng: np.random.Generator, m: int):
    """x [M, K] and W [N, K] in f32, with magnitudes spread over 2^-6 .. 2^6 per row so that
    the partial sums of one output differ in exponent (where the order of the adds shows)."""
    x = rng.standard_normal((m, kK)) * np.exp2(rng.integers(-6, 7, size=(m, 1)))
    w = rng.standard_normal((kN, kK)) * np.exp2(rng.integers(-6, 7, size=(kN, 1)))
    return x.astype(np.float32), w.astype(np.float32)


def bits_differ(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))


def confirm(ob: ob_mod.OpenBlas, walk_known: bool, rng: np.random.Generator) -> List[str]:
    """The library against the emulated orders; returns the problems (none expected)."""
    problems = []
    head = {"lanes:4:pairs": 0, "lanes:4:pairs:fma": 0, "lanes:4:halving": 0}
    other = {"halving": 0, "pairs": 0}
    other_dot = {"halving": 0, "pairs": 0}
    kn = nk = dot = 0
    for _ in range(kTrials):
        x, w = random_case(rng, kRequests * kBlockRows)
        w_kn = np.ascontiguousarray(w.T)
        got_kn = np.stack([ob.gemv_kn(w_kn, row) for row in x])
        got_nk = np.stack([ob.gemv_nk(w, row) for row in x])
        kn += bits_differ(got_kn, ob_mod.emulate_gemv_kn(x, w))
        nk += bits_differ(got_nk, ob_mod.emulate_gemv_nk(x, w))
        for tree in other:
            other[tree] += bits_differ(got_nk, ob_mod.emulate_gemv_nk(x, w, tree))
        w2 = w[:kHeadN]
        got_head = np.stack([ob.gemv_nk(np.ascontiguousarray(w2), row) for row in x])
        head["lanes:4:pairs"] += bits_differ(got_head, ob_mod.emulate_head2(x, w2))
        head["lanes:4:pairs:fma"] += bits_differ(got_head, ob_mod.emulate_head2(x, w2, fma=True))
        head["lanes:4:halving"] += bits_differ(got_head, ob_mod.emulate_head2(x, w2, "halving"))
        got_dot = np.array([[ob.sdot(row, col) for col in w] for row in x], np.float32)
        dot += bits_differ(got_dot, ob_mod.emulate_sdot(x, w))
        for tree in other_dot:
            other_dot[tree] += bits_differ(got_dot, ob_mod.emulate_sdot(x, w, tree))
    total = kTrials * kRequests * kBlockRows * kN
    print(f"sgemv_n (weights [K, N]) vs splitk:{kK // ob_mod.kPart}:seq/seq-fma: {kn} of {total} outputs differ")
    print(f"sgemv_t (weights [N, K]) vs lanes of 8, fold + hadd: {nk} of {total} differ; "
          f"vs lanes:8:halving:fma {other['halving']}, vs lanes:8:pairs:fma {other['pairs']}")
    head_total = kTrials * kRequests * kBlockRows * kHeadN
    print(f"sgemv_t, N = 2 (weights [2, K]): of {head_total} outputs " +
          ", ".join(f"{count} differ from {walk}" for walk, count in head.items()))
    print(f"sdot vs 32 lanes, fold + vector pairs + hadd: {dot} of {total} differ; "
          f"vs lanes:32:halving:fma {other_dot['halving']}, vs lanes:32:pairs:fma {other_dot['pairs']}")
    if walk_known:
        if head["lanes:4:pairs"]:
            problems.append(f"sgemv_t N = 2: {head['lanes:4:pairs']} outputs differ from lanes:4:pairs")
        if not head["lanes:4:pairs:fma"] or not head["lanes:4:halving"]:
            problems.append("sgemv_t N = 2: lanes:4:pairs:fma or lanes:4:halving matched every output: "
                            "the inputs no longer tell the orders apart")
    if walk_known and ob.core in ob_mod.kSdotCores:
        if dot:
            problems.append(f"sdot: {dot} outputs differ from the order read in its source")
        for tree, count in other_dot.items():
            if count == 0:
                problems.append(f"sdot: lanes:32:{tree}:fma matched every output: the finding that "
                                "no §3.4 tree describes it no longer holds")
    if not walk_known:
        print("(core or version not read: the counts are shown, not held)")
        return problems
    if kn:
        problems.append(f"sgemv_n: {kn} outputs differ from the order read in its source")
    if nk:
        problems.append(f"sgemv_t: {nk} outputs differ from the order read in its source")
    for tree, count in other.items():
        if count == 0:
            problems.append(f"sgemv_t: lanes:8:{tree}:fma matched every output: the finding that "
                            "no §3.4 tree describes it no longer holds")
    return problems


class Engine:
    """The decode step's GEMV: unpacked (every row of x, one cblas_sgemv call per row) and
    packed (gathered rows in compact slots, each through the same call, scattered back)."""

    def __init__(self, gemv):
        self.gemv = gemv

    def outputs(self, x: np.ndarray, y_before: np.ndarray) -> dict:
        y_unpacked = np.stack([self.gemv(row) for row in x])
        compact, selector = pack_rows(x, kRequests, kBlockRows, kCap, kSlots, kCounts)
        y_compact = np.stack([self.gemv(np.ascontiguousarray(row)) for row in compact])
        y_packed = scatter_rows(y_compact, selector, y_before.copy())
        return {"selector": selector, "commit_counts": kCounts, "y_unpacked": y_unpacked,
                "y_packed": y_packed, "y_compact": y_compact, "y_before": y_before}


def write_dump(path: Path, build: str, projections: dict) -> None:
    with DumpWriter(str(path), engine="OpenBLAS cblas_sgemv (ncert openblas_gemv example)",
                    build=build) as dw:
        for name, p in projections.items():
            dw.add_projection(name, x=p["x"], x_dtype="f32",
                              weights=[Segment("f32", 0, p["w"].shape[0], values=p["w"])],
                              accumulator="f32-rn", output_dtype="f32", epilogue="none",
                              k_walk=p.get("k_walk"), requests=kRequests, block_rows=kBlockRows,
                              cap=kCap, **p["outputs"])


def run_check(ncert: Path, dump: Path, reports: Path):
    """harness.check, then every check's (verdict, reason) by id."""
    rc, parsed = check(ncert, dump, reports, timeout=120)
    return rc, {c["id"]: (c["verdict"], c.get("reason", "")) for c in (parsed or {"checks": []})["checks"]}


def expect(what: str, rc: int, verdicts: dict, want_rc: int, want_failing: set, want: dict) -> List[str]:
    failing = {i for i, (v, _) in verdicts.items() if v == "FAIL"}
    problems = []
    if rc != want_rc:
        problems.append(f"{what}: exit {rc}, expected {want_rc}")
    if failing != want_failing:
        problems.append(f"{what}: failing {sorted(failing)}, expected {sorted(want_failing)}")
    for cid, v in want.items():
        got = verdicts.get(cid, ("absent", ""))[0]
        if got != v:
            problems.append(f"{what}: {cid} {got}, expected {v}")
    status = "as expected" if not problems else "NOT as expected"
    print(f"{what}: exit {rc}, failing {sorted(failing) or 'none'} -- {status}")
    for cid in sorted(want):
        v, reason = verdicts.get(cid, ("absent", ""))
        print(f"    {cid}: {v}  {reason[:150]}")
    return problems


def main(argv) -> int:
    args = parse_args(argv)
    ob = ob_mod.load(args.library)
    if isinstance(ob, str):
        return skip(ob)
    ncert = prepare_example(args, kOutputs)
    if isinstance(ncert, int):
        return ncert
    dumps, reports = args.out / "dumps", args.out / "reports"
    dumps.mkdir(parents=True)
    reports.mkdir(parents=True)

    walk, why = ob_mod.gemv_kn_walk(ob, kK, kN)
    head_walk, head_why = ob_mod.head2_walk(ob, kK)
    print(f"OpenBLAS {ob.version}, core {ob.core}, loaded from {ob.path}")
    for what, declared, reason in (("sgemv_n", walk, why), ("sgemv_t N = 2", head_walk, head_why)):
        print(f"{what} k_walk: {declared} ({reason})" if declared else f"{what} k_walk: none declared: {reason}")
    known = walk is not None and head_walk is not None
    # sgemv_kernel_4x4 (N % 4 == 0): 8 FMA lanes, the upper 128 bits folded onto the lower, then
    # haddps twice: dump format v2's butterfly(4,1,2). Declared where the core's kernels were read.
    nk_walk = "lanes:8:butterfly(4,1,2):fma" if known and kK % 8 == 0 else None
    print(f"sgemv_t N % 4 == 0 k_walk: {nk_walk}" if nk_walk else
          "sgemv_t N % 4 == 0 k_walk: none declared (core or version not read)")
    rng = np.random.default_rng(kSeed)
    problems = confirm(ob, known, rng)

    x, w = random_case(rng, kRequests * kBlockRows)
    w_kn = np.ascontiguousarray(w.T)  # the engine stores W^T, [K, N]
    w2 = np.ascontiguousarray(w[:kHeadN])  # a two-column head, [2, K]
    y_before = rng.standard_normal((kRequests * kBlockRows, kN)).astype(np.float32)
    y_before2 = np.ascontiguousarray(y_before[:, :kHeadN])
    kn = Engine(lambda row: ob.gemv_kn(w_kn, row)).outputs(x, y_before)
    nk = Engine(lambda row: ob.gemv_nk(w, row)).outputs(x, y_before)
    head = Engine(lambda row: ob.gemv_nk(w2, row)).outputs(x, y_before2)
    build = f"OpenBLAS {ob.version} {ob.core}"
    names = ("gemv_kn", "gemv_nk", "head2")
    good = dumps / "openblas.h5"
    write_dump(good, build, {"gemv_kn": {"x": x, "w": w, "outputs": kn, "k_walk": walk},
                             "gemv_nk": {"x": x, "w": w, "outputs": nk, "k_walk": nk_walk},
                             "head2": {"x": x, "w": w2, "outputs": head, "k_walk": head_walk}})
    rc, verdicts = run_check(ncert, good, reports)
    want = {f"projections/{p}/{c}": "PASS" for p in names
            for c in ("geometry", "identity", "untouched", "bound", "signature", "variance", "vacuity")}
    want["projections/gemv_kn/walk"] = "PASS" if walk else "SKIP"
    want["projections/gemv_nk/walk"] = "PASS" if nk_walk else "SKIP"
    want["projections/head2/walk"] = "PASS" if head_walk else "SKIP"
    problems += expect("legitimate dump", rc, verdicts, 0, set(), want)

    if not known:
        print(f"planted faults not run: no k_walk is known for this library ({why}; {head_why})")
    else:
        s = kK // ob_mod.kPart
        # A faulty kernel is the one kernel of both paths: the faults below change the unpacked
        # and the packed outputs alike, so identity holds and only the checks named fail.
        part_dropped = Engine(lambda row: ob_mod.emulate_gemv_kn(row[None, :], w, kDroppedPart,
                                                                 kDroppedCols)[0]).outputs(x, y_before)
        lane_dropped = Engine(lambda row: ob_mod.emulate_head2(row[None, :], w2, drop_lane=kDroppedLane,
                                                               drop_cols=kDroppedHeadCols)[0]).outputs(x, y_before2)
        faults: List[Tuple[str, str, str, np.ndarray, dict, Optional[str], Set[str]]] = [
            # (dump, what, projection, weights, outputs, k_walk, failing checks beside walk)
            ("fault-lane-dropped", f"head2: lane {kDroppedLane} left out of the pairs tree in column "
             f"{kDroppedHeadCols.tolist()}", "head2", w2, lane_dropped, head_walk, {"bound", "signature", "variance"}),
            ("fault-head-halving", "head2: true outputs, lanes:4:halving declared", "head2", w2, head,
             "lanes:4:halving", set()),
            ("fault-part-dropped", f"gemv_kn: part {kDroppedPart} left out of columns {kDroppedCols.tolist()}",
             "gemv_kn", w, part_dropped, walk, {"bound", "signature", "variance"}),
            ("fault-wrong-tree", f"gemv_kn: true outputs, splitk:{s}:pairs/seq-fma declared", "gemv_kn", w, kn,
             f"splitk:{s}:pairs/seq-fma", set()),
            # A plain halving tree for the AVX2 GEMV: the kernel folds the upper 128 bits and then
            # uses hadd (butterfly(4,1,2)), which is neither halving nor pairs.
            ("fault-halving-declared", "gemv_nk: true outputs, lanes:8:halving:fma declared", "gemv_nk", w, nk,
             "lanes:8:halving:fma", set()),
        ]
        for stem, what, name, weights, outputs, declared, also in faults:
            dump = dumps / f"{stem}.h5"
            write_dump(dump, build, {name: {"x": x, "w": weights, "outputs": outputs, "k_walk": declared}})
            rc, verdicts = run_check(ncert, dump, reports)
            failing = {f"projections/{name}/{c}" for c in {"walk"} | also}
            shown = {f"projections/{name}/{c}": v for c, v in
                     (("walk", "FAIL"), ("identity", "PASS"), ("bound", "FAIL" if "bound" in also else "PASS"))}
            problems += expect(f"fault {stem} ({what})", rc, verdicts, 1, failing, shown)

    if problems:
        print("\nNOT as expected:\n  " + "\n  ".join(problems))
        return 1
    print("\nevery result as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
