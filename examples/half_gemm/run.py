#!/usr/bin/env python3
"""Real f16 and bf16 CPU GEMMs certified by ncert: ONNX Runtime's float16 MatMul and PyTorch's
bfloat16 linear (oneDNN) export dumps, ncert checks them, and every verdict is held against
README.md.

    python3 examples/half_gemm/run.py --ncert build/release/certify/ncert --out /tmp/half

Exit status: 0 every verdict as expected, 1 one is not, 2 usage error, 77 a prerequisite is
missing (x86-64, python3-onnx, node, or the onnxruntime-node package, which it installs with
tools/install-npm-deps when absent; the reason is printed and the test suite reports a skip).
Without torch the bf16 dump is left out (said so), and the f16 checks still run.
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path
from typing import List, Optional

kHere = Path(__file__).resolve().parent
kRepo = kHere.parent.parent
kOutputs = ("kernel", "reports", "ort_f16.h5", "torch_bf16.h5", "fault_f16_truncation.h5",
            "fault_identity.h5")

sys.dont_write_bytecode = True  # the example runs from the source tree
sys.path.insert(0, str(kHere))
sys.path.insert(0, str(kHere.parent / "common"))

from harness import (Expectation, check, example_parser, failing, judge, prepare_ort_example, reason,  # noqa: E402
                     verdicts)


def parse_args(argv):
    return example_parser(__doc__, "directory for models, dumps and reports", ort=True).parse_args(argv)


def bias_evidence(report: dict, name: str) -> str:
    """The bias check's statistic per output, as the JSON report gives it."""
    c = next((c for c in report["checks"] if c["id"] == f"projections/{name}/bias"), None)
    outputs = (c or {}).get("stats", {}).get("outputs", {})
    return "; ".join(f"{o}: mean {s['mean_residual_ulps']:+.3f} ulp, limit {s['limit_ulps']:.3f}"
                     f" over {s['values']} values" for o, s in outputs.items())


# request-guards is reported only when it is skipped (docs/cli.md): with requests, block_rows, cap
# and commit_counts dumped the per-request guards run inside `geometry`.
kPassing = ("geometry", "identity", "untouched", "bound", "bias", "signature", "variance", "vacuity")


def expect_pass(label: str, rc: int, report: Optional[dict], name: str) -> Expectation:
    """Exit 0; every check of kPassing PASS, walk SKIP (no k_walk declared), the request
    guards run (not reported as SKIP), none FAIL."""
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    v = verdicts(report)
    want = {f"projections/{name}/{kind}": "PASS" for kind in kPassing}
    want[f"projections/{name}/walk"] = "SKIP"
    want[f"projections/{name}/request-guards"] = "absent"
    wrong = {i: v.get(i, "absent") for i, verdict in want.items() if v.get(i, "absent") != verdict}
    failed = failing(report)
    met = rc == 0 and not wrong and not failed
    detail = (f"exit {rc}; " + (f"{len(kPassing)} checks PASS, walk SKIP, request guards run" if met else
                                f"unexpected: {wrong or ''} {failed or ''}")
              + f"\n      bias: {bias_evidence(report, name)}")
    return Expectation(label, met, detail)


def expect_fail(label: str, rc: int, report: Optional[dict], *meant: str) -> Expectation:
    """Exit 1, and the failing checks are exactly `meant` (every other check passes or skips)."""
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    failed = failing(report)
    met = rc == 1 and failed == sorted(meant)
    evidence = reason(report, meant[0])
    if meant[0].endswith("/bias"):
        evidence = bias_evidence(report, meant[0].split("/")[1])
    return Expectation(label, met, f"exit {rc}; failing: {', '.join(failed) or 'none'}"
                       + (f"\n      {evidence}" if evidence else ""))


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
    from export import Projection, write_dump

    start = time.monotonic()
    kernel_dir = out / "kernel"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    pk = data.packing()
    used = pk.selector >= 0
    x16, w16, xb, wb = data.inputs(seed=7)
    x16_prev, _, xb_prev, _ = data.inputs(seed=8)  # the previous step's rows: y_before's source
    xc16 = data.gather(x16, pk.selector)

    # ONNX Runtime: the f16 model on both paths and the previous step, and the same graph without
    # its final Cast (its f32 SGEMM values) on both paths, for the truncation fault.
    m16, m32 = kernel_dir / "matmul_f16.onnx", kernel_dir / "matmul_f16_to_f32.onnx"
    kernels.build_matmul_model(m16, w16, "f16")
    kernels.build_matmul_model(m32, w16, "f32")
    ort = kernels.OrtRunner(kernel_dir, ort_package)
    calls = {"unpacked": ort.plan(m16, x16, np.float16, optimized=kernel_dir / "matmul_f16.run.onnx"),
             "compact": ort.plan(m16, xc16, np.float16),
             "before": ort.plan(m16, x16_prev, np.float16),
             "unpacked32": ort.plan(m32, x16, np.float32),
             "compact32": ort.plan(m32, xc16, np.float32)}
    version = ort.run()
    y = {key: ort.result(i, data.kN) for key, i in calls.items()}
    graph = kernels.optimized_graph(kernel_dir / "matmul_f16.run.onnx")
    print(f"onnxruntime-node {version}: {len(calls)} MatMul calls; the graph ORT ran for the f16 "
          f"model: {' ; '.join(graph)}")

    results: List[Expectation] = []
    # The fact the truncation fault stands on: the kernel's f16 output is the round-to-nearest-
    # even of its f32 SGEMM value, at every output of both paths.
    rne_ok = all(np.array_equal(y[key].view(np.uint16), y[key + "32"].astype(np.float16).view(np.uint16))
                 for key in ("unpacked", "compact"))
    results.append(Expectation("ORT's f16 output is RNE(f32 SGEMM value) at every output", rne_ok,
                               f"{y['unpacked'].size + y['compact'].size} values compared"))

    def ort_projection(y_unpacked, y_compact) -> Projection:
        y_compact = y_compact.copy()
        y_compact[~used] = 0  # an empty slot's row is never compared; zeros as the input's
        return Projection(name="ort_matmul", dtype="f16", x=x16, w=w16, selector=pk.selector,
                          commit_counts=pk.commit_counts, requests=data.kRequests,
                          block_rows=data.kBlockRows, cap=data.kCap, y_unpacked=y_unpacked,
                          y_compact=y_compact, y_before=y["before"],
                          y_packed=data.scatter(y["before"], y_compact, pk.selector))

    meta = dict(engine="onnxruntime-node", device=f"cpu ({platform.machine()})",
                build=f"onnxruntime {version} CPU EP, float16 MatMul (Cast, MLAS SGEMM, Cast)",
                model=f"MatMul {data.kM}x{data.kK} by {data.kK}x{data.kN}")
    write_dump(out / "ort_f16.h5", ort_projection(y["unpacked"], y["compact"]), **meta)
    # Fault (a): the f16 output truncated instead of rounded, in both paths alike.
    write_dump(out / "fault_f16_truncation.h5",
               ort_projection(data.f16_rz(y["unpacked32"]), data.f16_rz(y["compact32"])), **meta)
    # Fault (b): one packed row differs from its unpacked row: slot 2 (row 22) one f16 ulp
    # outward at column 100, in the compact buffer and so in the scattered output.
    bad = y["compact"].copy()
    bad[2, 100] = np.nextafter(bad[2, 100], np.float16(np.inf) * np.sign(bad[2, 100]))
    write_dump(out / "fault_identity.h5", ort_projection(y["unpacked"], bad), **meta)

    why_no_torch = kernels.torch_available()
    if why_no_torch is None:
        import torch

        yb = kernels.torch_bf16_linear(xb, wb)
        ybc = kernels.torch_bf16_linear(data.gather(xb, pk.selector), wb)
        ybc[~used] = 0
        yb_before = kernels.torch_bf16_linear(xb_prev, wb)
        impl = kernels.torch_kernel_name(data.kM, data.kK, data.kN)
        p = Projection(name="torch_linear", dtype="bf16", x=xb, w=wb, selector=pk.selector,
                       commit_counts=pk.commit_counts, requests=data.kRequests,
                       block_rows=data.kBlockRows, cap=data.kCap, y_unpacked=yb, y_compact=ybc,
                       y_before=yb_before, y_packed=data.scatter(yb_before, ybc, pk.selector))
        write_dump(out / "torch_bf16.h5", p, engine="pytorch", device=f"cpu ({platform.machine()})",
                   build=f"torch {torch.__version__}, torch.nn.functional.linear bf16, oneDNN {impl}",
                   model=f"linear {data.kM}x{data.kK} by {data.kN}x{data.kK}")
        print(f"torch {torch.__version__}: bf16 linear on both paths, oneDNN implementation {impl}")
    print(f"kernels and dumps in {time.monotonic() - start:.1f} s; dumps in {out}")

    reports = out / "reports"
    reports.mkdir(exist_ok=True)
    rc, rep = check(ncert, out / "ort_f16.h5", reports)
    results.append(expect_pass("ort_f16.h5: identity, bound, bias (f16 RNE) and the rest PASS",
                               rc, rep, "ort_matmul"))
    rc, rep = check(ncert, out / "fault_f16_truncation.h5", reports)
    # Truncation errs by up to a whole f16 spacing where rne allows half: one-sided residuals
    # (bias) with 4/3 of the energy the model allows (variance).
    results.append(expect_fail("fault_f16_truncation.h5 (f16 output truncated in both paths): FAIL bias, variance",
                               rc, rep, "projections/ort_matmul/bias", "projections/ort_matmul/variance"))
    rc, rep = check(ncert, out / "fault_identity.h5", reports)
    results.append(expect_fail("fault_identity.h5 (one packed row one ulp off): FAIL identity",
                               rc, rep, "projections/ort_matmul/identity"))
    if why_no_torch is None:
        rc, rep = check(ncert, out / "torch_bf16.h5", reports)
        results.append(expect_pass("torch_bf16.h5: identity, bound, bias (bf16 RNE) and the rest PASS",
                                   rc, rep, "torch_linear"))
    else:
        print(f"torch_bf16.h5 not written: {why_no_torch}")
    return judge(results, start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
