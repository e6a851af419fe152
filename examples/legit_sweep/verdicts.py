"""What each dump's `ncert check --json` report must say, and the margins read from it.

A legitimate dump: exit 0, verdict PASS, and its projection's `geometry`, `identity`, `bound`,
`signature`, `variance`, `untouched` and `vacuity` each PASS (not SKIP); `bias` PASS where the
output is bf16 or f16 (an f32 output has no rounding to test, and the report has no `bias`);
`quantize` PASS where the activations are int8-quantized; `walk` PASS where a `k_walk` is
declared, else SKIP; no check FAILs.

A planted fault: exit 1, at least one of its meant checks FAILs, `identity` PASSes (both paths
carry the fault), and every failing check is a meant or an allowed one.

A declaration mistake: exit 1, a failing check whose reason names the mistake (one of the
mistake's (check, phrase) pairs), and where the bound's diagnosis names it no residual test
failing with a cause of its own; the phrase ncert said is kept for the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from cases import Case, Fault, Mistake, kFits

kProjection = "linear"
kAlways = ("geometry", "identity", "bound", "signature", "variance", "untouched", "vacuity")


def _check(report: dict, kind: str) -> Optional[dict]:
    return next((c for c in report.get("checks", [])
                 if c["id"] == f"projections/{kProjection}/{kind}"), None)


def _number(v) -> Optional[float]:
    """A report number (real_or_text: "inf" and "nan" are text), or None."""
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def required(case: Case, k_walk: Optional[str]) -> Dict[str, str]:
    want = {kind: "PASS" for kind in kAlways}
    if case.out != "f32":
        want["bias"] = "PASS"
    if case.family == "ort-w4a8":
        want["quantize"] = "PASS"
    want["walk"] = "PASS" if k_walk else "SKIP"
    return want


def legit_problems(case: Case, k_walk: Optional[str], rc: int, report: Optional[dict]) -> List[str]:
    if report is None:
        return [f"no report (exit {rc})"]
    problems = []
    if rc != 0 or report.get("verdict") != "PASS":
        problems.append(f"exit {rc}, verdict {report.get('verdict')}")
    want = required(case, k_walk)
    for kind, verdict in want.items():
        c = _check(report, kind)
        got = c["verdict"] if c else "absent"
        if got != verdict:
            problems.append(f"{kind} {got} (expected {verdict})" + (f": {c['reason']}" if c else ""))
    named = {f"projections/{kProjection}/{kind}" for kind in want}
    for other in report.get("checks", []):
        if other["verdict"] == "FAIL" and other["id"] not in named:
            problems.append(f"{other['id']} FAIL: {other['reason']}")
    return problems


def unexpected(case: Case, k_walk: Optional[str], report: Optional[dict]) -> List[dict]:
    """The checks of a legitimate dump's report that are not as required (FAIL, or a SKIP
    where a PASS is due): their JSON, for the evidence a false alarm is reported with."""
    want = {f"projections/{kProjection}/{kind}": v for kind, v in required(case, k_walk).items()}
    return [c for c in (report or {}).get("checks", [])
            if c["verdict"] == "FAIL" or c["id"] in want and c["verdict"] != want[c["id"]]]


def failing(report: Optional[dict]) -> Set[str]:
    """The kinds of the projection's failing checks."""
    prefix = f"projections/{kProjection}/"
    return {c["id"][len(prefix):] for c in (report or {}).get("checks", [])
            if c["verdict"] == "FAIL" and c["id"].startswith(prefix)}


def fault_problems(fault: Fault, rc: int, report: Optional[dict],
                   where: Optional[Tuple[int, int, int]] = None) -> List[str]:
    """`where`: the (column, k_begin, k_end) a failing signature check must name first."""
    if report is None:
        return [f"no report (exit {rc})"]
    fails = failing(report)
    problems = []
    if rc != 1:
        problems.append(f"exit {rc}, expected 1")
    if not fails & set(fault.meant):
        problems.append(f"none of {', '.join(fault.meant)} FAILs")
    stray = fails - set(fault.meant) - set(fault.allowed)
    if stray:
        problems.append(f"unexpected FAIL of {', '.join(sorted(stray))}")
    identity = _check(report, "identity")
    if identity is None or identity["verdict"] != "PASS":
        problems.append("identity does not PASS: the fault was meant in both paths")
    signature = _check(report, "signature")
    if where is not None and signature is not None and signature["verdict"] == "FAIL":
        top = ((signature.get("stats") or {}).get("strongest") or [{}])[0]
        named = (top.get("col"), top.get("k_begin"), top.get("k_end"))
        if named != where:
            problems.append(f"signature names column {named[0]}, k {named[1]}-{named[2]}, "
                            f"not the planted column {where[0]}, k {where[1]}-{where[2]}")
    return problems


# The order a mistake's checks are quoted in: the refusals of the plan, then the bound (with its
# declaration diagnosis), then the tests that see what stays inside the bound.
kQuoted = ("geometry", "bound", "walk", "bias", "signature", "variance", "identity", "quantize", "untouched")
kFitsFrom = kFits


def diagnosis(report: Optional[dict]) -> List[dict]:
    """The bound check's declaration trials (docs/cli.md), empty where none ran."""
    b = _check(report or {}, "bound")
    return list(((b or {}).get("stats") or {}).get("diagnosis") or [])


def _clause(reason: str, phrase: str) -> str:
    """The part of a reason that holds `phrase`: the bound's "the data fits ..." list up to its
    counts, else the "; "-separated clause holding it."""
    at = reason.find(kFitsFrom)
    if at >= 0 and (phrase.startswith(kFitsFrom) or phrase in reason[at:]):
        end = reason.find(" (all ", at)
        return reason[at:end if end >= 0 else None]
    return next((c for c in reason.split("; ") if phrase in c), reason)


def _gist(kind: str, reason: str) -> str:
    """What one failing check says, shortly: the bound's diagnosis (or its likely location), or
    the first clause of another check's reason."""
    if kind == "bound":
        for start in (kFitsFrom, "no single other declaration fits", "none of the", "likely location"):
            at = reason.find(start)
            if at >= 0:  # the diagnosis, then the likely location, end the reason
                return (_clause(reason, start) if start == kFitsFrom else reason[at:])[:300]
    if kind == "geometry" and "): " in reason:
        reason = reason.split("): ", 1)[1]
    return reason.split("; ")[0][:200]


def _leading_fit(reason: str) -> str:
    """The first declaration the bound's diagnosis says the data fit ("the data fits X; or Y
    (all ...": X), empty where it names none: what the reason leads with, and what the residual
    tests' SKIP names."""
    at = reason.find(kFitsFrom)
    if at < 0:
        return ""
    rest = reason[at + len(kFitsFrom):]
    for end in ("; or ", " (all "):
        rest = rest.split(end, 1)[0]
    return rest


def _says(reason: str, phrase: str) -> bool:
    """A phrase "the data fits X" holds where the diagnosis leads with a fit naming X; any
    other where the reason holds it."""
    if phrase.startswith(kFitsFrom):
        return phrase[len(kFitsFrom):] in _leading_fit(reason)
    return phrase in reason


def _stray(m: Mistake, failing_checks: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """Residual tests that FAIL naming a cause of their own (truncation, a scale, a narrower
    accumulator) where the bound's diagnosis found the declaration the data fit: they read the
    residuals against declarations the data do not fit (signature and variance SKIP there,
    saying so), so their cause misleads. A test the mistake itself names is not stray."""
    if not any(kind == "bound" and kFitsFrom in reason for kind, reason in failing_checks):
        return []
    named = {kind for kind, _ in m.names}
    return [(k, r) for k, r in failing_checks if k in ("bias", "signature", "variance") and k not in named]


def mistake_named(m: Mistake, rc: int, report: Optional[dict]) -> Tuple[bool, str]:
    """Whether ncert names the mistake (exit 1, one of its (check, phrase) pairs met), and what
    it said: the clause naming it, or the gist of each failing check."""
    if report is None:
        return False, f"no report (exit {rc})"
    failing_checks = [(c["id"].rsplit("/", 1)[1], c["reason"]) for c in report.get("checks", [])
                      if c["verdict"] == "FAIL" and c["id"].startswith(f"projections/{kProjection}/")]
    if rc == 1:
        for kind, phrase in m.names:
            for got, reason in failing_checks:
                if kind in ("*", got) and _says(reason, phrase):
                    said = f"{got}: {_clause(reason, phrase)}"
                    stray = _stray(m, failing_checks)
                    if stray:
                        return False, said + " / but also " + " / ".join(f"{k}: {_gist(k, r)}" for k, r in stray)
                    return True, said
    if not failing_checks:
        return False, f"exit {rc}, verdict {report.get('verdict')}: no check FAILs"
    ordered = sorted(failing_checks, key=lambda c: kQuoted.index(c[0]) if c[0] in kQuoted else len(kQuoted))
    return False, " / ".join(f"{kind}: {_gist(kind, reason)}" for kind, reason in ordered)


def reasons(report: Optional[dict], kinds) -> List[str]:
    out = []
    for kind in kinds:
        c = _check(report or {}, kind)
        if c is not None:
            out.append(f"{kind} {c['verdict']}: {c['reason']}")
    return out


@dataclass
class Margins:
    """How far inside its limit each residual test stayed on one dump (None: not run there,
    or absent from the report)."""

    variance: Optional[float] = None  # max over outputs of ratio / limit
    centre: Optional[float] = None  # f32 outputs: max over outputs of variance's centre |z| / limit
    signature_z: Optional[float] = None  # the largest z computed, or the screened columns' bound
    signature_threshold: Optional[float] = None
    bias_peak_z: Optional[float] = None  # max over outputs of the per-value peak_z
    bias_threshold: Optional[float] = None  # value_threshold
    bias_mean: Optional[float] = None  # max over outputs of (|mean| - shift) / limit
    bound: Optional[float] = None  # f32 outputs: max over outputs of max |y - y*| / B

    @property
    def signature(self) -> Optional[float]:
        if self.signature_z is None or not self.signature_threshold:
            return None
        return self.signature_z / self.signature_threshold

    @property
    def bias_value(self) -> Optional[float]:
        if self.bias_peak_z is None or not self.bias_threshold:
            return None
        return self.bias_peak_z / self.bias_threshold


def _max(values) -> Optional[float]:
    kept = [v for v in values if v is not None]
    return max(kept) if kept else None


def margins(report: Optional[dict]) -> Margins:
    m = Margins()
    if report is None:
        return m
    v = _check(report, "variance")
    if v and v["verdict"] == "PASS":
        outs = v.get("stats", {}).get("outputs", {}).values()
        m.variance = _max(_ratio(_number(o.get("ratio")), _number(o.get("limit"))) for o in outs)
        m.centre = _max(_ratio(abs(o["centre"]["z"]), o["centre"]["limit"]) for o in outs if "centre" in o)
    s = _check(report, "signature")
    if s and s["verdict"] == "PASS":
        st = s.get("stats", {})
        m.signature_threshold = _number(st.get("threshold"))
        m.signature_z = _max([_number(c.get("z")) for c in st.get("strongest", [])]
                             + [_number(st.get("screened_max"))])
    b = _check(report, "bias")
    if b and b["verdict"] == "PASS":
        st = b.get("stats", {})
        outs = list(st.get("outputs", {}).values())
        m.bias_threshold = _number(st.get("value_threshold"))
        m.bias_peak_z = _max(_number(o.get("peak_z")) for o in outs)
        m.bias_mean = _max(_ratio(max(abs(o["mean_residual_ulps"]) - o["shift_ulps"], 0.0), o["limit_ulps"])
                           for o in outs)
    bd = _check(report, "bound")
    # With a bf16 or f16 output |y - y*| includes the output's rounding, which B leaves to the
    # interval's own rounding step: the ratio says something only for f32 outputs.
    if bd and bd["verdict"] == "PASS" and _check(report, "bias") is None:
        outs = bd.get("stats", {}).get("outputs", {}).values()
        m.bound = _max(_number(o.get("max_error_over_bound")) for o in outs)
    return m


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or not b:
        return None
    return a / b


@dataclass
class Worst:
    """The largest of one margin over a family, and the dump it came from."""

    value: Optional[float] = None
    dump: str = ""
    detail: str = ""

    def offer(self, value: Optional[float], dump: str, detail: str) -> None:
        if value is not None and (self.value is None or value > self.value):
            self.value, self.dump, self.detail = value, dump, detail


@dataclass
class FamilyTally:
    dumps: int = 0
    passed: int = 0
    variance: Worst = field(default_factory=Worst)  # f32 outputs
    variance_narrow: Worst = field(default_factory=Worst)  # bf16 / f16 outputs: their rounding dominates
    centre: Worst = field(default_factory=Worst)  # f32 outputs
    signature: Worst = field(default_factory=Worst)
    bias_value: Worst = field(default_factory=Worst)
    bias_mean: Worst = field(default_factory=Worst)
    bound: Worst = field(default_factory=Worst)

    def add(self, name: str, ok: bool, m: Margins, narrow_output: bool) -> None:
        self.dumps += 1
        self.passed += ok
        (self.variance_narrow if narrow_output else self.variance).offer(
            m.variance, name, f"{m.variance:.3g}" if m.variance is not None else "")
        self.centre.offer(m.centre, name, f"{m.centre:.3g}" if m.centre is not None else "")
        self.signature.offer(m.signature, name, f"z {m.signature_z:.3g} / {m.signature_threshold:.3g}"
                             if m.signature is not None else "")
        self.bias_value.offer(m.bias_value, name, f"peak_z {m.bias_peak_z:.3g} / {m.bias_threshold:.3g}"
                              if m.bias_value is not None else "")
        self.bias_mean.offer(m.bias_mean, name, f"{m.bias_mean:.3g}" if m.bias_mean is not None else "")
        self.bound.offer(m.bound, name, f"{m.bound:.3g}" if m.bound is not None else "")


def cell(w: Worst) -> str:
    """The margin, or n/a: no dump of the family has that test (f32 outputs have no bias), or
    the binary predates the field (peak_z)."""
    return "n/a" if w.value is None else f"{w.value:.3g}"


def table(tallies: Dict[str, FamilyTally]) -> Tuple[List[str], List[List[str]]]:
    """The summary table: one row per family and a total row."""
    head = ["family", "dumps", "PASS", "variance ratio/limit, f32 out", "the same, bf16/f16 out",
            "variance centre |z|/limit, f32 out", "signature z/threshold", "bias peak_z/threshold",
            "bias |mean|/limit", "max |y-y*|/B, f32 out"]
    attrs = ("variance", "variance_narrow", "centre", "signature", "bias_value", "bias_mean", "bound")
    rows = []
    total = FamilyTally()
    for family, t in list(tallies.items()) + [("all", total)]:
        rows.append([family, str(t.dumps), str(t.passed)] + [cell(getattr(t, a)) for a in attrs])
        if t is total:
            break
        total.dumps += t.dumps
        total.passed += t.passed
        for attr in attrs:
            w: Worst = getattr(t, attr)
            getattr(total, attr).offer(w.value, w.dump, w.detail)
    return head, rows


def worst_lines(tallies: Dict[str, FamilyTally]) -> List[str]:
    """Which dump set each family's worst margin."""
    out = []
    for family, t in tallies.items():
        for what, w in (("variance (f32 out)", t.variance), ("variance (bf16/f16 out)", t.variance_narrow),
                        ("variance centre (f32 out)", t.centre),
                        ("signature", t.signature),
                        ("bias per value", t.bias_value), ("bias mean", t.bias_mean)):
            if w.value is not None:
                out.append(f"{family}: worst {what} {w.detail} ({w.dump})")
    return out
