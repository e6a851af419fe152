#!/usr/bin/env python3
"""ONNX Runtime's real Gemm with a bias certified by ncert: the bias enters the output before
MLAS adds each K block's sum into it (`bias_at = start`), held bit for bit by the `walk` check,
and every verdict is held against README.md.

    python3 examples/ort_gemm_bias/run.py --ncert build/release/certify/ncert --out /tmp/ogb

Exit status: 0 every verdict as expected, 1 one is not, 2 usage error, 77 a prerequisite is
missing (x86-64, python3-onnx, python3-h5py, node, or the onnxruntime-node package, which it
installs with tools/install-npm-deps when absent; the reason is printed and the test suite
reports a skip).
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

kHere = Path(__file__).resolve().parent
kRepo = kHere.parent.parent
kOutputs = ("kernel", "reports", "ort_gemm_bias.h5", "declared_end.h5", "small_x_end.h5",
            "small_x_start.h5", "fault_walk.h5")
kName = "ort_gemm"  # the projection's name in every dump
kFaultRow, kFaultCol = 9, 100  # the planted fault: y_unpacked[9, 100] one f32 ulp outward (row 9: slot 4)

sys.dont_write_bytecode = True  # the example runs from the source tree
sys.path.insert(0, str(kHere))
sys.path.insert(0, str(kHere.parent / "common"))
try:
    import ncert_dump  # noqa: F401  (PYTHONPATH set by the caller)
except ImportError:  # run from a checkout: the package lives in python/
    sys.path.insert(0, str(kRepo / "python"))

from harness import (Expectation, check, example_parser, failing, judge, prepare_ort_example, reason,  # noqa: E402
                     verdicts)


def parse_args(argv):
    return example_parser(__doc__, "directory for models, dumps and reports", ort=True).parse_args(argv)


# request-guards is reported only when it is skipped (docs/cli.md): with requests, block_rows, cap
# and commit_counts dumped the per-request guards run inside `geometry`.
kPassing = ("geometry", "identity", "untouched", "bound", "signature", "variance", "vacuity")


def check_id(kind: str) -> str:
    return f"projections/{kName}/{kind}"


def expect_pass(label: str, rc: int, report: Optional[dict], walk: str) -> Expectation:
    """Exit 0; every check of kPassing PASS, walk `walk` (PASS or SKIP), the request guards run
    (not reported as SKIP), none FAIL."""
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    v = verdicts(report)
    want = {check_id(kind): "PASS" for kind in kPassing}
    want[check_id("walk")] = walk
    want[check_id("request-guards")] = "absent"
    wrong = {i: v.get(i, "absent") for i, verdict in want.items() if v.get(i, "absent") != verdict}
    failed = failing(report)
    met = rc == 0 and not wrong and not failed
    detail = f"exit {rc}; " + (f"{len(kPassing)} checks PASS, walk {walk}, request guards run" if met else
                               f"unexpected: {wrong or ''} {failed or ''}")
    if walk == "PASS":
        detail += f"\n      walk: {reason(report, check_id('walk'))}"
    return Expectation(label, met, detail + f"\n      bound: {reason(report, check_id('bound'))}")


def expect_fail(label: str, rc: int, report: Optional[dict], meant: Sequence[str],
                says: Dict[str, Sequence[str]], skipped: Sequence[str] = ()) -> Expectation:
    """Exit 1, the failing checks exactly `meant` (every other check passes or skips), each check
    of `says` giving a reason that holds each of its texts, and each check of `skipped` a SKIP."""
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    failed = failing(report)
    v = verdicts(report)
    not_skipped = [s for s in skipped if v.get(check_id(s)) != "SKIP"]
    met = rc == 1 and failed == sorted(check_id(m) for m in meant) and not not_skipped
    detail = f"exit {rc}; failing: {', '.join(failed) or 'none'}"
    for kind in skipped:
        detail += f"\n      {kind}: {v.get(check_id(kind), 'absent')}: {reason(report, check_id(kind))}"
    for kind, texts in says.items():
        why = reason(report, check_id(kind))
        missing = [t for t in texts if t not in why]
        met = met and not missing
        detail += f"\n      {kind}: {why}" + (f"\n      (missing: {missing})" if missing else "")
    return Expectation(label, met, detail)


def bits_equal(a, b) -> int:
    """How many f32 values of a and b are bit-identical."""
    import numpy as np

    return int(np.count_nonzero(np.asarray(a, np.float32).view(np.uint32) == np.asarray(b, np.float32).view(np.uint32)))


def main(argv) -> int:
    args = parse_args(argv)
    ready = prepare_ort_example(args, kOutputs)
    if isinstance(ready, int):
        return ready
    ncert, ort_package = ready
    out: Path = args.out

    import numpy as np

    import data
    import kernels
    from export import projection, write_dump

    start = time.monotonic()
    kernel_dir = out / "kernel"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    pk = data.packing()

    # The main shape (K = 1536) and the small-activations one (K = 4096), each one model, run on
    # all M rows (the unpacked path), on the gathered rows (the packed path) and on the previous
    # step's rows (the packed output buffer before the call).
    w, bias = data.weights(data.kK, seed=1)
    x, x_prev = data.activations(data.kK, seed=2), data.activations(data.kK, seed=4)
    ws, bias_s = data.weights(data.kKSmall, seed=3)
    xs, xs_prev = (data.activations(data.kKSmall, seed=5, small=True),
                   data.activations(data.kKSmall, seed=6, small=True))
    model, model_s = kernel_dir / "gemm_k1536.onnx", kernel_dir / "gemm_k4096.onnx"
    kernels.build_gemm_model(model, w, bias)
    kernels.build_gemm_model(model_s, ws, bias_s)
    ort = kernels.OrtRunner(kernel_dir, ort_package)
    calls = {"unpacked": ort.plan(model, x, data.kN, optimized=kernel_dir / "gemm_k1536.run.onnx"),
             "compact": ort.plan(model, data.gather(x, pk.selector), data.kN),
             "before": ort.plan(model, x_prev, data.kN),
             "small_unpacked": ort.plan(model_s, xs, data.kN),
             "small_compact": ort.plan(model_s, data.gather(xs, pk.selector), data.kN),
             "small_before": ort.plan(model_s, xs_prev, data.kN)}
    version = ort.run()
    y = {key: ort.result(i) for key, i in calls.items()}
    graph = kernels.optimized_graph(kernel_dir / "gemm_k1536.run.onnx")
    print(f"onnxruntime-node {version}: {len(calls)} Gemm calls; the graph ORT ran: {' ; '.join(graph)}")

    results: List[Expectation] = []
    # The order, reproduced here independently of ncert: MLAS' walk emulated exactly in numpy,
    # with the bias added first (as ORT runs it) and last (the epilogue of bias_at = end).
    walk = data.walk(data.kK)
    parts = data.kK // data.kStrideK
    first = bits_equal(data.emulate(x, w, bias, parts, bias_first=True), y["unpacked"])
    last = bits_equal(data.emulate(x, w, bias, parts, bias_first=False), y["unpacked"])
    total = y["unpacked"].size
    results.append(Expectation(f"numpy's exact {walk} with the bias first reproduces every unpacked value, "
                               "with the bias last not even 60 %", first == total and last < 0.6 * total,
                               f"bias first {first} of {total} bit for bit, bias last {last} "
                               f"({100 * last / total:.1f} %)"))

    meta = dict(engine="onnxruntime-node", device=f"cpu ({platform.machine()})",
                build=f"onnxruntime {version} CPU EP, Gemm (transB = 1, bias C [N]): MLAS SGEMM, beta = 1")
    main_p = projection(x, w, bias, pk, y["unpacked"], y["compact"], y["before"])
    model_name = f"Gemm {data.kM}x{data.kK} by {data.kN}x{data.kK} + bias[{data.kN}]"
    write_dump(out / "ort_gemm_bias.h5", kName, main_p, bias_at="start", k_walk=walk, model=model_name, **meta)
    # The same outputs declared bias_at = end (the attribute left out, its default).
    write_dump(out / "declared_end.h5", kName, main_p, bias_at=None, k_walk=walk, model=model_name, **meta)
    # The small activations: no k_walk, the bias declared where it is added last, then first.
    small_p = projection(xs, ws, bias_s, pk, y["small_unpacked"], y["small_compact"], y["small_before"])
    model_s_name = f"Gemm {data.kM}x{data.kKSmall} by {data.kN}x{data.kKSmall} + bias[{data.kN}]"
    write_dump(out / "small_x_end.h5", kName, small_p, bias_at=None, k_walk=None, model=model_s_name, **meta)
    write_dump(out / "small_x_start.h5", kName, small_p, bias_at="start", k_walk=None, model=model_s_name, **meta)
    # The fault: one value of the unpacked path one f32 ulp outward (row 9 is gathered, slot 4:
    # the packed path keeps the kernel's value).
    bad = y["unpacked"].copy()
    v = bad[kFaultRow, kFaultCol]
    bad[kFaultRow, kFaultCol] = np.nextafter(v, np.float32(np.inf) * np.sign(v))
    fault_p = projection(x, w, bias, pk, bad, y["compact"], y["before"])
    write_dump(out / "fault_walk.h5", kName, fault_p, bias_at="start", k_walk=walk, model=model_name, **meta)
    print(f"kernels, emulation and dumps in {time.monotonic() - start:.1f} s; dumps in {out}")

    reports = out / "reports"
    reports.mkdir(exist_ok=True)
    rc, rep = check(ncert, out / "ort_gemm_bias.h5", reports)
    results.append(expect_pass(f"ort_gemm_bias.h5 (bias_at = start, k_walk = {walk}): walk bit for bit, "
                               "identity, bound and the rest PASS", rc, rep, "PASS"))
    rc, rep = check(ncert, out / "declared_end.h5", reports)
    results.append(expect_fail(f"declared_end.h5 (the same outputs, bias_at = end, k_walk = {walk}): FAIL walk, "
                               "which names bias_at = start", rc, rep, ["walk"], {"walk": ["bias_at = start"]}))
    rc, rep = check(ncert, out / "small_x_end.h5", reports)
    results.append(expect_fail("small_x_end.h5 (K = 4096, half the rows' activations x 1e-5, bias_at = end, "
                               "no k_walk): FAIL bound, which says the data fits bias_at = start; variance SKIP",
                               rc, rep, ["bound"], {"bound": ["the data fits bias_at = start"]}, skipped=["variance"]))
    rc, rep = check(ncert, out / "small_x_start.h5", reports)
    results.append(expect_pass("small_x_start.h5 (the same dump, bias_at = start): every check PASS, walk SKIP",
                               rc, rep, "SKIP"))
    rc, rep = check(ncert, out / "fault_walk.h5", reports)
    results.append(expect_fail(f"fault_walk.h5 (y_unpacked row {kFaultRow} col {kFaultCol} one ulp off, "
                               "bias_at = start): FAIL walk and identity, naming the value", rc, rep,
                               ["identity", "walk"],
                               {"walk": [f"row {kFaultRow} col {kFaultCol}"],
                                "identity": [f"row {kFaultRow} col {kFaultCol}"]}))
    return judge(results, start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
