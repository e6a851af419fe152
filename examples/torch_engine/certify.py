"""Runs ncert on the example's dumps and holds each result against what the README says.

Every command writes its JSON report beside the dumps (`reports/`); the expectations read the
verdicts from those reports, the way an engine team's CI would consume ncert, and the human
output ncert prints is shown as it is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from harness import Expectation, run_ncert  # examples/common, on sys.path as run.py puts it

# Checks every mixer projection must pass. `bias` (are the bf16 rounding residuals centred?)
# runs on bf16 outputs only. `walk` is skipped: the export declares no K reduction order
# (torch promises none; see engine._declared_arithmetic).
kProjectionPass = ("geometry", "identity", "bound", "signature", "variance", "untouched", "vacuity")
kProjectionPassBf16 = kProjectionPass + ("bias",)
kProjectionSkip = ("walk",)
# Fork classes that mean "numerics explain the divergence" (ncert forks PASSes on them).
kExplainedForks = ("none", "tie", "near-tie")


@dataclass
class NcertRun:
    shown: str  # the command as a person would type it from the output directory
    returncode: int
    stdout: str
    stderr: str
    report: Optional[dict]
    target: str  # the first input, relative to the output directory
    report_name: str  # reports/<report_name>.json


class Ncert:
    def __init__(self, binary: Path, root: Path):
        self.binary = binary
        self.root = root
        self.reports = root / "reports"
        self.reports.mkdir(parents=True, exist_ok=True)

    def run(self, verb: str, *paths: Path, report_name: str, extra=()) -> NcertRun:
        # Run from the output directory with relative paths, so ncert's output reads as it
        # would for a person typing the command there.
        relative = [str(p.relative_to(self.root)) for p in paths]
        proc, parsed = run_ncert(self.binary, verb, [*relative, *extra],
                                 self.reports / f"{report_name}.json", self.root)
        return NcertRun(" ".join(["ncert", verb, *relative, *extra]), proc.returncode,
                        proc.stdout, proc.stderr, parsed, relative[0], report_name)


def _kinds(report: dict) -> Counter:
    return Counter((c["kind"], c["verdict"]) for c in report["checks"])


def step_dump_expectation(label: str, runs: List[NcertRun]) -> Expectation:
    """Every step dump exits 0, each mixer projection passing its checks with walk skipped.
    An identity FAIL beside a bound PASS is named: it would mean the CPU kernel is not
    batch-invariant on this machine (the packed call sees 32 rows, the unpacked one 64)."""
    must_pass = kProjectionPassBf16 if label == "bf16" else kProjectionPass
    problems = []
    totals: Counter = Counter()
    projections = 0
    for run in runs:
        if run.report is None:
            problems.append(f"{run.target}: no report (exit {run.returncode}): {run.stderr.strip()}")
            continue
        verdicts: dict = {}  # projection -> {kind: verdict}
        for c in run.report["checks"]:
            parts = c["id"].split("/")
            if parts[0] == "projections":
                verdicts.setdefault(parts[1], {})[c["kind"]] = c["verdict"]
        projections += len(verdicts)
        for name, kinds in verdicts.items():
            totals.update((k, v) for k, v in kinds.items())
            if kinds.get("identity") == "FAIL" and kinds.get("bound") == "PASS":
                problems.append(f"{run.target} {name}: identity FAIL with bound PASS: this machine's "
                                "kernel is not batch-invariant (packed and unpacked rows round "
                                "differently, each within the bound)")
                continue
            wrong = [f"{k} {kinds.get(k, 'absent')}" for k in must_pass if kinds.get(k) != "PASS"]
            wrong += [f"{k} {kinds.get(k, 'absent')}" for k in kProjectionSkip if kinds.get(k) != "SKIP"]
            if wrong:
                problems.append(f"{run.target} {name}: {', '.join(wrong)}")
        if run.returncode != 0:
            problems.append(f"{run.target}: exit {run.returncode}")
    summary = ", ".join(f"{k} {totals[(k, 'PASS')]}" for k in must_pass)
    return Expectation(
        f"{label} step dumps: exit 0; every mixer projection {', '.join(must_pass)} PASS, walk SKIP",
        not problems,
        f"{len(runs)} dumps, {projections} projections; PASS: {summary}; SKIP: walk "
        f"{totals[('walk', 'SKIP')]}" if not problems else
        "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else ""))


def logits_dump_expectation(label: str, run: NcertRun) -> Expectation:
    """The lm_head projections bound every logit and every emission is its row's maximum."""
    if run.report is None:
        return Expectation(f"{label} logits dump", False, f"no report: {run.stderr.strip()}")
    kinds = _kinds(run.report)
    failed = [c["id"] for c in run.report["checks"] if c["verdict"] == "FAIL"]
    classes: Counter = Counter()
    for c in run.report["checks"]:
        if c["kind"] == "witness":
            for name in ("certified", "near_tie", "tie", "unbounded"):
                classes[name] += c["stats"][name]
    met = run.returncode == 0 and not failed and kinds[("witness", "PASS")] > 0 \
        and classes["unbounded"] == 0
    return Expectation(
        f"{label} logits dump: exit 0; lm_head bound PASS; every emission witnessed and bounded",
        met,
        f"{kinds[('witness', 'PASS')]} runs: {classes['certified']} certified, "
        f"{classes['near_tie']} near-tie, {classes['tie']} tie emissions"
        if met else f"exit {run.returncode}; failing: {', '.join(failed[:4]) or 'none'}")


def compare_expectation(run: NcertRun) -> Expectation:
    """bf16 against f32 under the default bitwise policy: every run differs (exit 1). A bf16
    build rounds every weight, activation and output to 8 significant bits; matching f32
    logits bit for bit would mean the two dumps came from the same build."""
    what = "compare f32 vs bf16 (bitwise): exit 1, every run FAIL"
    if run.report is None or "error" in run.report:
        return Expectation(what, False, f"exit {run.returncode}: {run.stderr.strip() or run.stdout}")
    runs = [c for c in run.report["checks"] if c["kind"] == "logits"]
    failing = [c for c in runs if c["verdict"] == "FAIL"]
    met = run.returncode == 1 and runs and len(failing) == len(runs)
    top1 = sum(c["stats"]["top1_agreement"] * c["stats"]["matched"] for c in runs)
    matched = sum(c["stats"]["matched"] for c in runs)
    worst = max((c["stats"]["max_abs_diff"]["max"] for c in runs), default=0.0)
    return Expectation(what, bool(met),
                       f"{len(failing)} of {len(runs)} runs differ; matched rows {matched}, "
                       f"top-1 agreement {top1 / max(matched, 1):.1%}, largest |d| {worst:.4g}")


def forks_expectation(run: NcertRun) -> Expectation:
    """Every fork between the builds is a tie or a near-tie: numerics explain it."""
    what = "forks f32 vs bf16: exit 0, every fork a tie or near-tie"
    if run.report is None or "error" in run.report:
        return Expectation(what, False, f"exit {run.returncode}: {run.stderr.strip() or run.stdout}")
    classes = Counter(c["stats"]["class"] for c in run.report["checks"] if c["kind"] == "fork")
    unexplained = {k: v for k, v in classes.items() if k not in kExplainedForks}
    met = run.returncode == 0 and not unexplained
    forks = sum(v for k, v in classes.items() if k != "none")
    shown = ", ".join(f"{k} {v}" for k, v in sorted(classes.items()) if k != "none")
    return Expectation(what, met, f"{forks} fork(s) over {sum(classes.values())} runs"
                       + (f": {shown}" if shown else "")
                       + (f"; not explained: {unexplained}" if unexplained else ""))
