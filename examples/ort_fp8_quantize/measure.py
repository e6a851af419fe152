"""What ONNX Runtime's FP8 QuantizeLinear computes, measured on chosen inputs (one call of each
model with 8 probe rows, each row its own scale):

- row 0, s = 1/8 (a power of two, so x / s is exact): x = every midpoint between two adjacent
  finite FP8 values, both signs. Round to nearest even and "ties away from zero" pick different
  codes at half of them.
- row 1, s = 1: finite values beyond the largest finite FP8 value (up to 3.4e38): `saturate = 1`
  should give ±max.
- rows 2-7, six irregular scales: x = fl32(T · s) and its two f32 neighbours for every midpoint
  T, so the exact quotient x / s lies within a few 2⁻²⁴ of a tie and an f32 quotient may round
  onto the tie or across it. ORT's codes are compared with the exact rounding of x / s, with
  the rounding of fl32(x / s) and with that of fl32(x · fl32(1 / s)); any code that differs
  from the exact one must be one that ncert's quotient slack (2⁻²², docs/dump-format.md §3.6)
  accepts."""

from __future__ import annotations

from typing import Dict, List

import numpy as np

import fp8
from harness import Expectation  # examples/common, on sys.path as run.py puts it


kTau = 2.0 ** -22  # ncert's relative slack on the quotient (f32 scales)
kNearScales = (3.7 / 448, 0.0131, 1.0 / 3.0, 5.123e-4, 0.77, 19.9 / 448)


def midpoints(fmt: str) -> np.ndarray:
    table = fp8.decode_table(fmt)
    vals = np.sort(table[[c for c in range(128) if np.isfinite(table[c])]])
    return (vals[:-1] + vals[1:]) / 2


def probe_inputs(fmt: str, k: int):
    t = midpoints(fmt)
    x = np.zeros((2 + len(kNearScales), k), np.float32)
    s = np.zeros(x.shape[0], np.float32)
    s[0] = 0.125
    ties = np.concatenate([t, -t]) * 0.125
    x[0, :len(ties)] = ties  # exact in f32: a midpoint has at most 5 significant bits
    s[1] = 1.0
    big = np.array([fp8.kMaxFinite[fmt] * f for f in (1.03, 1.2, 2.0, 1e3)] + [1e30, 3.4e38])
    x[1, :2 * len(big)] = np.concatenate([big, -big])
    for r, sc in enumerate(kNearScales, start=2):
        s[r] = np.float32(sc)
        centre = (t * np.float64(s[r])).astype(np.float32)
        near = np.stack([np.nextafter(centre, np.float32(-np.inf)), centre,
                         np.nextafter(centre, np.float32(np.inf))], axis=1).reshape(-1)
        near = near[:k]
        x[r, :len(near)] = near
    return x, s


def plan_probes(ort, model_path, fmt: str) -> Dict:
    x, s = probe_inputs(fmt, int(ort_k(model_path)))
    return {"call": ort.plan(model_path, x, s), "x": x, "s": s}


def ort_k(model_path) -> int:
    import onnx

    m = onnx.load(str(model_path), load_external_data=False)
    return m.graph.input[0].type.tensor_type.shape.dim[1].dim_value


def allowed_range(t: np.ndarray, fmt: str):
    """The codes' values of the quotients within kTau of t (monotone rounding: the two ends)."""
    table = fp8.decode_table(fmt)
    a = table[fp8.encode_rne_sat(t * (1 - kTau), fmt)]
    b = table[fp8.encode_rne_sat(t * (1 + kTau), fmt)]
    return np.minimum(a, b), np.maximum(a, b)


def judge_probes(ort, probe: Dict, fmt: str):
    x, s = probe["x"], probe["s"]
    k = x.shape[1]
    table = fp8.decode_table(fmt)
    q = fp8.codes_of_values(ort.out(probe["call"], "Q", k), fmt)
    out: List = []
    t = x.astype(np.float64) / s.astype(np.float64)[:, None]

    # Row 0: exact ties.
    n_ties = 2 * len(midpoints(fmt))
    rne = fp8.encode_rne_sat(t[0, :n_ties], fmt)
    away = fp8.encode_rne_sat(t[0, :n_ties] * (1 + 2.0 ** -40), fmt)  # the tie pushed outward
    even = int((q[0, :n_ties] == rne).sum())
    out.append(Expectation(f"{fmt}: exact ties round to the even code", even == n_ties,
                           f"{even} of {n_ties} ties to even; ties away from zero would give "
                           f"{int((q[0, :n_ties] == away).sum())} of them"))
    # Row 1: beyond the largest finite value.
    n_big = int((x[1] != 0).sum())
    sat = np.abs(table[q[1, :n_big]]) == fp8.kMaxFinite[fmt]
    out.append(Expectation(f"{fmt}: finite values beyond ±{fp8.kMaxFinite[fmt]:g} saturate to it",
                           bool(sat.all()) and np.array_equal(np.signbit(table[q[1, :n_big]]),
                                                              np.signbit(x[1, :n_big])),
                           f"{int(sat.sum())} of {n_big} values (1.03 × max to 3.4e38, both signs)"))
    # Rows 2-7: quotients within a few 2^-24 of a tie.
    rows = slice(2, x.shape[0])
    xs, ss = x[rows], s[rows][:, None]
    got = q[rows]
    exact = fp8.encode_rne_sat(t[rows], fmt)
    div32 = fp8.encode_rne_sat((xs / ss).astype(np.float32).astype(np.float64), fmt)
    recip = (np.float32(1) / ss).astype(np.float32)
    mul32 = fp8.encode_rne_sat((xs * recip).astype(np.float32).astype(np.float64), fmt)
    lo, hi = allowed_range(t[rows], fmt)
    inside = (table[got] >= lo) & (table[got] <= hi)
    n = int((xs != 0).sum())
    detail = (f"{n} near-tie quotients: ORT differs from the exact rounding at {int((got != exact).sum())}, "
              f"from fl32(x / s) rounded at {int((got != div32).sum())}, from fl32(x · fl32(1/s)) "
              f"rounded at {int((got != mul32).sum())}; the exact and fl32(x / s) roundings differ at "
              f"{int((exact != div32).sum())}; codes outside ncert's 2^-22 slack: {int((~inside).sum())}")
    out.append(Expectation(f"{fmt}: near ties, every ORT code inside ncert's quotient slack",
                           bool(inside.all()), detail))
    return out
