#!/usr/bin/env python3
"""ONNX Runtime's real FP8 quantization (QuantizeLinear to float8e4m3fn / float8e5m2, per token)
certified by ncert: the codes are measured against an exact rounding, exported with their
scales and an FP8-weight MatMul's outputs as dumps, and every verdict is held against README.md.

    python3 examples/ort_fp8_quantize/run.py --ncert build/release/certify/ncert --out /tmp/fp8

Exit status: 0 every result as expected, 1 one is not, 2 usage error, 77 a prerequisite is
missing (x86-64, python3-onnx, h5py, node, or the onnxruntime-node package, which it installs
with tools/install-npm-deps when absent; the reason is printed and the test suite reports a skip).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional

kHere = Path(__file__).resolve().parent
kRepo = kHere.parent.parent
kOutputs = ("kernel", "reports", "e4m3.h5", "e5m2.h5", "e4m3_b128.h5", "fault_scale.h5", "fault_code.h5")

# The projection: M tokens of K activations, N outputs. The packed path gathers rows 5, 1, 3
# and 6 into slots 0, 1, 3, 4 (slot 2 empty).
kM, kK, kN = 8, 512, 96
kSelector = [5, 1, -1, 3, 6]
# name -> (FP8 type, block of K sharing an activation scale; None: per token)
kVariants = {"e4m3": ("e4m3", None), "e5m2": ("e5m2", None), "e4m3_b128": ("e4m3", 128)}
kFaultRow = 3        # fault_scale.h5: this row's declared scale × 1.25
kScaleFactor = 1.25

sys.dont_write_bytecode = True  # the example runs from the source tree
sys.path.insert(0, str(kHere))
sys.path.insert(0, str(kHere.parent / "common"))

from harness import (Expectation, check, example_parser, failing, judge, prepare_ort_example, reason,  # noqa: E402
                     run_ort_job, verdicts)


def parse_args(argv):
    return example_parser(__doc__, "directory for models, dumps and reports", ort=True).parse_args(argv)


class OrtRunner:
    """Plans calls of the models, runs them all in one node process, reads the outputs back."""

    def __init__(self, work: Path, package: Path):
        self.work, self.package, self.calls = work, package, []  # type: ignore[var-annotated]

    def plan(self, model: Path, x, s) -> int:
        import numpy as np

        i = len(self.calls)
        np.ascontiguousarray(x, np.float32).tofile(self.work / f"x{i}.bin")
        np.ascontiguousarray(s, np.float32).tofile(self.work / f"s{i}.bin")
        self.calls.append({"model": str(model), "x": str(self.work / f"x{i}.bin"),
                           "s": str(self.work / f"s{i}.bin"), "rows": int(x.shape[0]),
                           "s_shape": [int(e) for e in s.shape],
                           "k": int(x.shape[1]),
                           "outputs": {o: str(self.work / f"{o}{i}.bin") for o in ("Q", "Xd", "Wd", "Y")}})
        return i

    def run(self) -> str:
        return run_ort_job(kHere / "run_ort.js", self.package, self.work, self.calls)

    def out(self, i: int, name: str, cols: int):
        import numpy as np

        return np.fromfile(self.calls[i]["outputs"][name], np.float32).reshape(-1, cols)


kPassing = ("geometry", "identity", "untouched", "bound", "signature", "variance", "quantize", "vacuity")


def expect_pass(label: str, rc: int, report: Optional[dict], name: str) -> Expectation:
    """Exit 0; every check of kPassing PASS, walk SKIP (no walk over codes), none FAIL."""
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    v = verdicts(report)
    want = {f"projections/{name}/{kind}": "PASS" for kind in kPassing}
    want[f"projections/{name}/walk"] = "SKIP"
    wrong = {i: v.get(i, "absent") for i, verdict in want.items() if v.get(i, "absent") != verdict}
    failed = failing(report)
    met = rc == 0 and not wrong and not failed
    return Expectation(label, met, f"exit {rc}; " + (f"{', '.join(kPassing)} PASS, walk SKIP" if met
                                                     else f"unexpected: {wrong or ''} {failed or ''}"))


def expect_fail(label: str, rc: int, report: Optional[dict], meant: List[str]) -> Expectation:
    """Exit 1, and the failing checks are exactly `meant`."""
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    failed = failing(report)
    met = rc == 1 and failed == sorted(meant)
    evidence = "\n      ".join(f"{m}: {reason(report, m)[:300]}" for m in meant)
    return Expectation(label, met, f"exit {rc}; failing: {', '.join(failed) or 'none'}\n      {evidence}")


def main(argv) -> int:
    args = parse_args(argv)
    ready = prepare_ort_example(args, kOutputs)
    if isinstance(ready, int):
        return ready
    ncert, ort_package = ready
    out: Path = args.out

    import numpy as np

    import fp8
    import measure
    import model
    from export import Projection, write_dump

    start = time.monotonic()
    kernel_dir = out / "kernel"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2026)
    sel = np.array(kSelector, np.int32)
    used = sel >= 0

    def activations():
        # Per-token magnitudes from 0.05 to 20, and two outlier channels, as LLM activations have.
        x = rng.standard_normal((kM, kK)) * np.exp(rng.uniform(np.log(0.05), np.log(20), (kM, 1)))
        x[:, [17, 300]] *= 12
        return x.astype(np.float32)

    def scales(x, fmt: str, block: Optional[int]):
        # As a dynamic quantizer computes them: amax / max finite in f32, per token ([M]) or per
        # block of K ([M, K/block]).
        amax = np.abs(x).max(axis=1) if block is None else np.abs(x).reshape(kM, -1, block).max(axis=2)
        return (amax / np.float32(fp8.kMaxFinite[fmt])).astype(np.float32)

    ort = OrtRunner(kernel_dir, ort_package)
    plans = {}
    data = {}
    for name, (fmt, block) in kVariants.items():
        w = (rng.standard_normal((kK, kN)) / np.sqrt(kK)).astype(np.float32)
        ws = (np.abs(w).max(axis=0) / np.float32(fp8.kMaxFinite[fmt])).astype(np.float32)
        wq = fp8.encode_rne_sat(w.astype(np.float64) / ws.astype(np.float64), fmt)  # [K, N]
        path = kernel_dir / f"fp8_{name}.onnx"
        model.build(path, fmt, wq, ws, block)
        x, x_prev = activations(), activations()
        s, s_prev = scales(x, fmt, block), scales(x_prev, fmt, block)
        data[name] = dict(x=x, s=s, wq=wq, ws=ws)
        plans[name] = {"unpacked": ort.plan(path, x, s),
                       "compact": ort.plan(path, x[sel[used]], s[sel[used]]),
                       "before": ort.plan(path, x_prev, s_prev)}
        if block is None:
            plans[name + "/probe"] = measure.plan_probes(ort, path, fmt)
    version = ort.run()
    print(f"onnxruntime-node {version}: {len(ort.calls)} calls in {time.monotonic() - start:.1f} s")

    results: List[Expectation] = []
    dumps = {}
    for name, (fmt, block) in kVariants.items():
        d, p = data[name], plans[name]
        s2 = d["s"].reshape(kM, -1)  # [M, groups]
        s_full = np.repeat(s2, kK // s2.shape[1], axis=1).astype(np.float64)  # each value's scale
        table = fp8.decode_table(fmt)
        q = fp8.codes_of_values(ort.out(p["unpacked"], "Q", kK), fmt)
        q_compact = fp8.codes_of_values(ort.out(p["compact"], "Q", kK), fmt)
        exact = fp8.encode_rne_sat(d["x"].astype(np.float64) / s_full, fmt)
        mism = int((q != exact).sum())
        results.append(Expectation(f"{name}: ORT's codes equal the exact RNE of x / s, saturated",
                                   mism == 0 and np.array_equal(q_compact, q[sel[used]]),
                                   f"{mism} of {q.size} codes differ; the packed path's codes equal"
                                   " the unpacked rows'" if np.array_equal(q_compact, q[sel[used]])
                                   else "the packed path's codes differ"))
        xd = ort.out(p["unpacked"], "Xd", kK)
        wd = ort.out(p["unpacked"], "Wd", kN)
        # code · s is exact in f64 (4 significant bits times 24), so astype rounds it once.
        xd_ok = np.array_equal(xd.view(np.uint32),
                               (table[q] * s_full).astype(np.float32).view(np.uint32))
        wd_ok = np.array_equal(wd.view(np.uint32),
                               (table[d["wq"]] * d["ws"][None, :]).astype(np.float32).view(np.uint32))
        results.append(Expectation(f"{name}: DequantizeLinear is fl32(code · s) (x and W)", xd_ok and wd_ok,
                                   f"{xd.size} activations {'equal' if xd_ok else 'DIFFER'}, "
                                   f"{wd.size} weights {'equal' if wd_ok else 'DIFFER'}"))
        if block is None:
            results.extend(measure.judge_probes(ort, plans[name + "/probe"], fmt))
        y = ort.out(p["unpacked"], "Y", kN)
        y_before = ort.out(p["before"], "Y", kN)
        y_compact = np.zeros((len(sel), kN), np.float32)
        y_compact[used] = ort.out(p["compact"], "Y", kN)
        y_packed = y_before.copy()
        y_packed[sel[used]] = y_compact[used]
        proj = Projection(name=f"fp8_{name}", fmt=fmt, x=d["x"], x_quantized=q, x_scales=s2,
                          w_values=d["wq"].T.copy(), w_scales=d["ws"][:, None], selector=sel,
                          y_unpacked=y, y_packed=y_packed, y_compact=y_compact, y_before=y_before)
        dumps[name] = proj
        write_dump(out / f"{name}.h5", proj, version)

    # Fault (a): row kFaultRow's declared scale × 1.25, the codes and outputs unchanged.
    e4 = dumps["e4m3"]
    bad_scales = e4.x_scales.copy()
    bad_scales[kFaultRow, 0] = np.float32(bad_scales[kFaultRow, 0] * np.float32(kScaleFactor))
    write_dump(out / "fault_scale.h5", e4._replace(x_scales=bad_scales), version)
    # Fault (b): one code one FP8 step up in magnitude: the smallest nonzero code of row 0, where
    # the change in the product is far below the bound, so only the codes can show it.
    bad_q = e4.x_quantized.copy()
    mags = np.where((bad_q[0] & 0x7F) == 0, 255, bad_q[0] & 0x7F)
    col = int(np.argmin(mags))
    bad_q[0, col] = bad_q[0, col] + 1  # the next code away from zero (same sign bit)
    write_dump(out / "fault_code.h5", e4._replace(x_quantized=bad_q), version)
    print(f"dumps in {out} ({time.monotonic() - start:.1f} s); fault_code.h5 changes row 0, column {col}: "
          f"code {e4.x_quantized[0, col]:#04x} -> {bad_q[0, col]:#04x}")

    reports = out / "reports"
    reports.mkdir(exist_ok=True)
    for name in kVariants:
        rc, rep = check(ncert, out / f"{name}.h5", reports)
        results.append(expect_pass(f"{name}.h5: quantize, bound, identity and the rest PASS", rc, rep, f"fp8_{name}"))
    rc, rep = check(ncert, out / "fault_scale.h5", reports)
    results.append(expect_fail(f"fault_scale.h5 (row {kFaultRow}'s scale × {kScaleFactor}): FAIL quantize and bound",
                               rc, rep, ["projections/fp8_e4m3/quantize", "projections/fp8_e4m3/bound"]))
    rc, rep = check(ncert, out / "fault_code.h5", reports)
    results.append(expect_fail("fault_code.h5 (one code one FP8 step off): FAIL quantize alone",
                               rc, rep, ["projections/fp8_e4m3/quantize"]))
    return judge(results, start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
