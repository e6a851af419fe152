#!/usr/bin/env python3
"""ONNX Runtime's MatMulNBits CPU kernel (MLAS, 4-bit blocks with zero points) certified by
ncert: export dumps from the real kernel, check them, and hold every verdict against README.md.

    python3 examples/ort_matmulnbits/run.py --ncert build/release/certify/ncert --out /tmp/ort

Exit status: 0 every verdict as expected, 1 one is not, 2 usage error, 77 a prerequisite is
missing (python3-onnx, node, or the onnxruntime-node package, which it installs with
tools/install-npm-deps when absent; the reason is printed and the test suite reports a skip).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

kHere = Path(__file__).resolve().parent
kRepo = kHere.parent.parent
kOutputs = ("kernel", "reports", "prefill.h5", "decode.h5", "fault_zero_point.h5",
            "fault_identity.h5", "w4a8.h5", "fault_activation_scale.h5")

sys.dont_write_bytecode = True  # the example runs from the source tree
try:
    import ncert_dump  # noqa: F401  (PYTHONPATH set by the caller)
except ImportError:
    sys.path.insert(0, str(kRepo / "python"))
sys.path.insert(0, str(kHere))
sys.path.insert(0, str(kHere.parent / "common"))

from harness import (Expectation, check, example_parser, failing, judge, prepare_ort_example, reason,  # noqa: E402
                     verdicts)


def parse_args(argv):
    return example_parser(__doc__, "directory for models, dumps and reports", ort=True).parse_args(argv)


def expect_pass(label: str, rc: int, report: Optional[dict], names: List[str], walk: str,
                extra: Tuple[str, ...] = ()) -> Expectation:
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    v = verdicts(report)
    want = {f"projections/{n}/{kind}": "PASS" for n in names
            for kind in ("geometry", "identity", "bound", "signature", "variance", "untouched", "vacuity") + extra}
    want.update({f"projections/{n}/walk": walk for n in names})
    wrong = {i: v.get(i, "absent") for i, verdict in want.items() if v.get(i) != verdict}
    failed = failing(report)
    met = rc == 0 and not wrong and not failed
    detail = f"exit {rc}; " + (f"{len(want)} checks as expected (walk {walk})" if met else
                               f"unexpected: {wrong or ''} {failed or ''}")
    return Expectation(label, met, detail)


def expect_fail(label: str, rc: int, report: Optional[dict], meant: str,
                consequent: Tuple[str, ...] = ()) -> Expectation:
    """Exit 1, `meant` FAILs, and every other failing check is one of `consequent` (checks the
    planted fault necessarily moves too); the rest pass or skip."""
    if report is None:
        return Expectation(label, False, f"no report (exit {rc})")
    failed = failing(report)
    met = rc == 1 and meant in failed and set(failed) <= {meant, *consequent}
    evidence = reason(report, meant)
    return Expectation(label, met, f"exit {rc}; failing: {', '.join(failed) or 'none'}"
                       + (f"\n      {evidence}" if evidence else ""))


def main(argv) -> int:
    args = parse_args(argv)
    ready = prepare_ort_example(args, kOutputs, modules=("onnx",))
    if isinstance(ready, int):
        return ready
    ncert, ort_package = ready
    out: Path = args.out

    from export import Exporter, decode_walk, kDecode, kPrefill, kPrefillWalk, kW4A8

    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    ex = Exporter(out, ort_package)
    for c in kPrefill:
        ex.plan("prefill", c)
    for c in kDecode:
        ex.plan("decode", c)
    for c in kW4A8:
        ex.plan("w4a8", c, level=4)
    version = ex.run()
    kernel_s = time.monotonic() - start
    names = [c.name for c in kPrefill]
    decode_names = [c.name for c in kDecode]
    ex.write(out / "prefill.h5", "prefill", names, k_walk=kPrefillWalk, version=version)
    one_row_walk = decode_walk()
    ex.write(out / "decode.h5", "decode", decode_names, k_walk=one_row_walk, version=version)
    target = ex.zero_point_target("decode", "b128")
    ex.write(out / "fault_zero_point.h5", "decode", ["b128"], k_walk=None, zero_point_fault=target,
             version=version)
    ex.write(out / "fault_identity.h5", "decode", ["b32"], k_walk=None, packed_from="batched",
             version=version)
    ex.write_w4a8(out / "w4a8.h5", [c.name for c in kW4A8], version=version)
    ex.write_w4a8(out / "fault_activation_scale.h5", ["b32"], version=version, scale_fault=("b32", 2, 5))
    print(f"onnxruntime-node {version}: {len(ex.runner.calls)} MatMulNBits calls in {kernel_s:.1f} s; "
          f"dumps in {out}")

    reports = out / "reports"
    reports.mkdir(exist_ok=True)
    results: List[Expectation] = []
    rc, rep = check(ncert, out / "prefill.h5", reports)
    results.append(expect_pass("prefill.h5 (M > 1): every check PASS, walk seq-fma reproduced",
                               rc, rep, names, "PASS"))
    rc, rep = check(ncert, out / "decode.h5", reports)
    results.append(expect_pass(f"decode.h5 (M = 1 kernel): every check PASS, walk {one_row_walk} reproduced"
                               if one_row_walk else "decode.h5 (M = 1 kernel): every check PASS, walk SKIP"
                               " (no k_walk: not an AVX-512 CPU)", rc, rep, decode_names,
                               "PASS" if one_row_walk else "SKIP"))
    rc, rep = check(ncert, out / "fault_zero_point.h5", reports)
    results.append(expect_fail(f"fault_zero_point.h5 (row {target[1]} group {target[2]}: zero point off by one)"
                               ": FAIL bound (and the residual tests)", rc, rep, "projections/b128/bound",
                               consequent=("projections/b128/signature", "projections/b128/variance")))
    rc, rep = check(ncert, out / "fault_identity.h5", reports)
    results.append(expect_fail("fault_identity.h5 (packed rows batched: the SGEMM path, unpacked the"
                               " one-row kernel): FAIL identity", rc, rep, "projections/b32/identity"))
    rc, rep = check(ncert, out / "w4a8.h5", reports)
    results.append(expect_pass("w4a8.h5 (accuracy_level 4, int8 activations): quantize and every check PASS,"
                               " walk SKIP", rc, rep, [c.name for c in kW4A8], "SKIP", extra=("quantize",)))
    rc, rep = check(ncert, out / "fault_activation_scale.h5", reports)
    results.append(expect_fail("fault_activation_scale.h5 (row 2 group 5: scale max|x|/128, not /127): FAIL"
                               " quantize (and bound: the products use the declared scale)", rc, rep,
                               "projections/b32/quantize",
                               consequent=("projections/b32/bound", "projections/b32/signature",
                                           "projections/b32/variance")))
    return judge(results, start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
