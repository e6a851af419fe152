#!/usr/bin/env python3
"""Real kernels, no false alarms: at least 200 legitimate dumps from ONNX Runtime's MLAS
kernels, OpenBLAS and (when installed) PyTorch's oneDNN, over many shapes, seeds, packings,
weight formats and output types, each certified by ncert and required to PASS every check that
applies; then faults planted in the engine runs of a few of them, each required to FAIL; then
declaration mistakes made on the runs of others, each required to FAIL with a message naming the
mistake (those where ncert does not yet are its known gaps: printed, not failed on).

    /usr/bin/python3 examples/legit_sweep/run.py --ncert build/release/certify/ncert --out /tmp/legit-sweep

Exit status: 0 every verdict as expected, 1 one is not (a legitimate dump that does not PASS is
a false alarm: its case, check, reason and report are printed; a mistake outside the known gaps
that ncert does not name is printed with its reasons), 2 usage error, 77 a
prerequisite is missing (x86-64, python3-onnx, h5py, node, the onnxruntime-node package, which
it installs with tools/install-npm-deps when absent, or OpenBLAS; the reason is printed and the
test suite reports a skip). Without torch its family is left out, with a printed note.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

kHere = Path(__file__).resolve().parent
kRepo = kHere.parent.parent
kMinDumps = 200  # issue 20: zero false alarms on at least 200 legitimate real-kernel dumps
kOutputs = ("dumps", "reports", "kernel", "sweep.json")
# ONNX Runtime cases per node process: their sessions (every weight matrix prepacked) stay in
# memory until the process ends; 12 cases hold at most 12 x 8 Mi weights.
kOrtChunk = 12

sys.dont_write_bytecode = True  # the example runs from the source tree
try:
    import ncert_dump  # noqa: F401  (PYTHONPATH set by the caller)
except ImportError:
    sys.path.insert(0, str(kRepo / "python"))
sys.path.insert(0, str(kHere))
sys.path.insert(0, str(kHere.parent / "common"))

import cases as cases_mod  # noqa: E402
import verdicts  # noqa: E402
from cases import Case, Fault, Mistake  # noqa: E402
from reuse import example_module  # noqa: E402

import harness  # noqa: E402


def parse_args(argv):
    p = harness.example_parser(__doc__, "directory for dumps and reports", ort=True)
    p.add_argument("--jobs", type=int, default=2, help="ncert checks run at once, one thread each "
                   "(default 2)")
    p.add_argument("--keep", action="store_true", help="keep every dump (default: a legitimate "
                   "dump is removed once it has passed; its report stays)")
    p.add_argument("--families", help="comma-separated families to run (default: all; fewer "
                   "than 200 dumps are then not a failure)")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    return args


@dataclass
class Job:
    """One dump and its check."""

    name: str
    case: Case
    k_walk: Optional[str]
    path: Path
    reports: Path
    fault: Optional[Fault] = None  # a planted fault, in the engine run of `case`
    mistake: Optional[Mistake] = None  # a declaration mistake, made on the run of `case`
    size: int = 0
    future: Optional[Future] = None
    rc: int = -1
    report: Optional[dict] = None
    problems: List[str] = field(default_factory=list)
    said: str = ""  # a mistake's: what ncert said, its key phrase


def markdown(head: List[str], rows: List[List[str]]) -> str:
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


def main(argv) -> int:
    args = parse_args(argv)
    families = args.families.split(",") if args.families else None
    unknown = sorted(set(families or []) - set(cases_mod.kFamilies))
    if unknown:
        print(f"run.py: --families {', '.join(unknown)}: not one of {', '.join(cases_mod.kFamilies)}",
              file=sys.stderr)
        return 2
    ready = harness.prepare_ort_example(args, kOutputs)
    if isinstance(ready, int):
        return ready
    ncert, ort_package = ready
    out: Path = args.out
    ob_mod = example_module("openblas_gemv", "openblas")
    ob = ob_mod.load()
    if isinstance(ob, str):
        return harness.skip(ob)
    # Every kernel runs on one thread (ONNX Runtime's sessions say so, OpenBLAS was loaded so);
    # torch reads this when it is imported, and each ncert check gets --jobs' share.
    os.environ["OMP_NUM_THREADS"] = "1"

    hg_kernels = example_module("half_gemm", "kernels")
    why_no_torch = hg_kernels.torch_available()
    versions = {"openblas": f"{ob.version} ({ob.core})"}
    if why_no_torch is None:
        import torch
        versions["torch"] = torch.__version__
    else:
        print(f"NOTE: the torch-bf16 family is left out: {why_no_torch}")
        families = [f for f in (families or cases_mod.kFamilies) if f != "torch-bf16"]
    sweep = Sweep(cases_mod.sweep(families), out, versions, lambda job: harness.check(ncert, job.path, job.reports),
                  args.jobs, args.keep)
    sweep.run_ort(ort_package)
    sweep.run_openblas(sweep.engines.OpenBlasRows(ob))
    sweep.run_torch()
    return sweep.summary(partial=args.families is not None)


class Sweep:
    """Writes every case's dump (and its planted fault's) and checks each in a pool, beside the
    kernels: a dump is checked while the next ones are computed."""

    def __init__(self, cases: List[Case], out: Path, versions: Dict[str, str],
                 check: Callable[[Job], Tuple[int, Optional[dict]]], jobs: int, keep: bool):
        import engines  # the other examples' modules: they import h5py and onnx, now known present
        self.engines = engines
        self.cases = cases
        self.twins = cases_mod.fault_twins(cases)
        self.mistakes = cases_mod.mistake_twins(cases)
        self.out, self.versions, self.check, self.keep = out, versions, check, keep
        self.dumps, self.reports, self.work = out / "dumps", out / "reports", out / "kernel"
        for d in (self.dumps, self.reports, self.work):
            d.mkdir(parents=True, exist_ok=True)
        self.pool = ThreadPoolExecutor(max_workers=jobs)
        self.jobs: List[Job] = []
        self.start = time.monotonic()

    def _certify(self, job: Job) -> None:
        """In a pool thread: check the dump, hold the report to its expectation, and drop a
        legitimate dump that passed (unless --keep): the sweep writes 0.57 GiB."""
        job.rc, job.report = self.check(job)
        if job.mistake is not None:
            named, job.said = verdicts.mistake_named(job.mistake, job.rc, job.report)
            job.problems = [] if named else [f"ncert does not name it: {job.said}"]
        elif job.fault is None:
            job.problems = verdicts.legit_problems(job.case, job.k_walk, job.rc, job.report)
            if not job.problems and not self.keep:
                job.path.unlink()
        else:
            where = None
            if job.fault.kind == "group-scale":
                col, group = self.engines.fault_group(job.case.n, job.case.k // job.case.block)
                where = (col, group * job.case.block, (group + 1) * job.case.block)
            job.problems = verdicts.fault_problems(job.fault, job.rc, job.report, where)

    def write(self, case: Case, data, run, k_walk: Optional[str], fault: Optional[Fault] = None,
              mistake: Optional[Mistake] = None) -> None:
        """The case's dump (or, with `fault` or `mistake`, theirs), written and handed to the
        checks; a truncate-columns fault of this case, and its mistakes that need no kernel run
        of their own, are written from the same kernel run."""
        name = fault.name if fault else mistake.name if mistake else case.name
        job = Job(name, case, k_walk, self.dumps / f"{name}.h5", self.reports, fault=fault, mistake=mistake)
        e = self.engines
        truncated = e.fault_columns(fault.column_step) if fault and fault.column_step else \
            slice(None) if mistake and mistake.truncated else None
        e.write_dump(job.path, case, data, run, k_walk=k_walk, engine=e.engine_name(case),
                     build=e.build_name(case, self.versions, mistake.run if mistake else ""),
                     truncated=truncated, declare=mistake.declare if mistake else ())
        job.size = job.path.stat().st_size
        job.future = self.pool.submit(self._certify, job)
        self.jobs.append(job)
        if fault is not None or mistake is not None:
            return
        twin = self.twins.get(case.name)
        if twin is not None and twin.kind == "truncate-columns":
            self.write(case, data, run, k_walk, twin)
        for m in self.mistakes.get(case.name, []):
            if not m.own_run:
                self.write(case, data, run, k_walk, mistake=m)

    def own_runs(self, case: Case) -> List[Mistake]:
        """The case's mistakes that run the kernel again, otherwise than the dump declares."""
        return [m for m in self.mistakes.get(case.name, []) if m.own_run]

    def run_ort(self, ort_package: Path) -> None:
        """The ONNX Runtime families, kOrtChunk cases per node process; a group-scale fault's
        kernel run (its own model) and a mistake's (fed other inputs) beside their twin's."""
        e = self.engines
        ort_cases = [c for c in self.cases if c.family.startswith("ort-")]
        for i in range(0, len(ort_cases), kOrtChunk):
            batch = e.OrtBatch(self.work / f"ort{i // kOrtChunk:02d}", ort_package)
            planned = []
            for case in ort_cases[i:i + kOrtChunk]:
                data = e.inputs(case)
                fault = self.twins.get(case.name)
                read_fault = None
                if fault is not None and fault.kind == "group-scale":
                    read_fault = batch.plan(case, dataclasses.replace(data, w=e.scaled(data.w, fault.scale)), "fault")
                mistakes = [(m, batch.plan(case, e.fed_inputs(data, m.fed), m.name)) for m in self.own_runs(case)]
                planned.append((case, data, batch.plan(case, data, "legit"), fault, read_fault, mistakes))
            self.versions["ort"] = batch.run()
            for case, data, read, fault, read_fault, mistakes in planned:
                k_walk = e.mnb_export.kPrefillWalk if (case.family, case.kernel) == ("ort-nbits", "prefill") else None
                self.write(case, data, read(), k_walk)
                if read_fault is not None:
                    self.write(case, data, read_fault(), k_walk, fault)
                for m, read_mistake in mistakes:
                    self.write(case, data, read_mistake(), k_walk, mistake=m)
            batch.close()
        shutil.rmtree(self.work, ignore_errors=True)

    def run_openblas(self, rows) -> None:
        openblas = [c for c in self.cases if c.family == "openblas"]
        if openblas:
            print(rows.batch_variance(cases_mod.kSeed))
        e = self.engines
        for case in openblas:
            data = e.inputs(case)
            self.write(case, data, rows.run(case, data), rows.k_walk(case))
            for m in self.own_runs(case):
                rounding = e.kFeTowardZero if m.run == "rz" else e.kFeToNearest
                self.write(case, data, rows.run(case, e.fed_inputs(data, m.fed), rounding), rows.k_walk(case),
                           mistake=m)

    def run_torch(self) -> None:
        e = self.engines
        for case in (c for c in self.cases if c.family == "torch-bf16"):
            data = e.inputs(case)
            self.write(case, data, e.torch_run(case, data), None)
            for m in self.own_runs(case):
                self.write(case, data, e.torch_run(case, e.fed_inputs(data, m.fed), onednn=m.run != "no-onednn"),
                           None, mistake=m)

    def summary(self, partial: bool) -> int:
        """Waits for every check, prints each dump, the planted faults and the summary table,
        writes sweep.json; the exit status."""
        produced = time.monotonic() - self.start
        legit = [j for j in self.jobs if j.fault is None and j.mistake is None]
        planted = [j for j in self.jobs if j.fault is not None]
        order = {m.name: i for i, m in enumerate(cases_mod.kMistakes)}
        mistaken = sorted((j for j in self.jobs if j.mistake is not None), key=lambda j: order[j.name])
        print(f"\n{len(legit)} legitimate dumps ({sum(j.size for j in legit) / 2**30:.2f} GiB), "
              f"{len(planted)} planted faults and {len(mistaken)} declaration mistakes written in {produced:.0f} s "
              "(checks running alongside)")
        tallies: Dict[str, verdicts.FamilyTally] = {}
        for job in legit:
            assert job.future is not None
            job.future.result()
            case = job.case
            tallies.setdefault(case.family, verdicts.FamilyTally()).add(
                job.name, not job.problems, verdicts.margins(job.report), case.out != "f32")
            print(f"{'PASS    ' if not job.problems else 'FALSE ALARM'} {job.name}: {case.describe()}"
                  + (f" k_walk {job.k_walk}" if job.k_walk else ""))
            for p in job.problems:
                print(f"      {p}")
            for c in verdicts.unexpected(case, job.k_walk, job.report):
                print(f"      evidence ({self.reports / (job.path.stem + '.json')}): {json.dumps(c)[:3000]}")
        print("\nplanted faults (each in the engine run of the legitimate dump named):")
        for job in planted:
            assert job.future is not None and job.fault is not None
            job.future.result()
            fails = sorted(verdicts.failing(job.report))
            print(f"{'ok      ' if not job.problems else 'NOT MET '} {job.name} ({job.case.name}: "
                  f"{job.case.describe()})\n      {job.fault.what}; must FAIL "
                  f"{' or '.join(job.fault.meant)}: exit {job.rc}, failing {', '.join(fails) or 'none'}")
            for line in verdicts.reasons(job.report, fails or job.fault.meant):
                print(f"      {line[:400]}")
            for p in job.problems:
                print(f"      NOT MET: {p}")
        failed_mistakes = self.print_mistakes(mistaken)
        self.pool.shutdown()
        total = time.monotonic() - self.start
        written = {j.name for j in self.jobs}
        made: List[Union[Fault, Mistake]] = [*cases_mod.kFaults, *cases_mod.kMistakes]
        missing = [] if partial else [x.name for x in made if x.name not in written and self.runnable(x)]
        if missing:
            print(f"NOT MET: no twin for {', '.join(missing)}")

        head, table = verdicts.table(tallies)
        print("\n" + markdown(head, table))
        for line in verdicts.worst_lines(tallies):
            print(f"  {line}")
        false_alarms = [j for j in legit if j.problems]
        failed_faults = [j for j in planted if j.problems]
        short = not partial and len(legit) < kMinDumps  # a subset asked for: the count is not held
        (self.out / "sweep.json").write_text(json.dumps({
            "seconds": round(total, 1), "versions": self.versions,
            "dumps": [{"name": j.name, "case": asdict(j.case), "k_walk": j.k_walk, "exit": j.rc,
                       "problems": j.problems, "margins": asdict(verdicts.margins(j.report))} for j in legit],
            "faults": [{"name": j.name, "twin": j.case.name, "exit": j.rc,
                        "failing": sorted(verdicts.failing(j.report)), "problems": j.problems} for j in planted],
            "mistakes": [{"name": j.name, "twin": j.case.name, "what": j.mistake.what, "exit": j.rc,
                          "failing": sorted(verdicts.failing(j.report)), "said": j.said,
                          "known_gap": bool(j.mistake.gap), "problems": j.problems}
                         for j in mistaken if j.mistake is not None],
            "summary": [dict(zip(head, r)) for r in table]}, indent=1))
        named = sum(not j.problems for j in mistaken)
        gaps = len(mistaken) - named - len(failed_mistakes)
        print(f"\n{len(legit) - len(false_alarms)} of {len(legit)} legitimate dumps PASS"
              f"{' (fewer than ' + str(kMinDumps) + ')' if short else ''}; "
              f"{len(planted) - len(failed_faults)} of {len(planted)} planted faults caught as expected; "
              f"{named} of {len(mistaken)} declaration mistakes named ({gaps} known gap{'' if gaps == 1 else 's'}); "
              f"{total:.0f} s in all; reports in {self.reports}")
        return 1 if false_alarms or failed_faults or failed_mistakes or short or missing else 0

    def runnable(self, x: Union[Fault, Mistake]) -> bool:
        """A fault or mistake this run can make: torch's only with torch (its family is left out
        without it, with a printed note)."""
        return x.family in {c.family for c in self.cases}

    def print_mistakes(self, mistaken: List[Job]) -> List[Job]:
        """The declaration mistakes' table, the known gaps, and the mistakes ncert does not name
        outside them (returned: each fails the run)."""
        print("\ndeclaration mistakes (each made on the run of the legitimate dump named):")
        rows: List[List[str]] = []
        gaps: List[Job] = []
        failed: List[Job] = []
        for job in mistaken:
            assert job.future is not None and job.mistake is not None
            job.future.result()
            m = job.mistake
            state = "named" if not job.problems else "KNOWN GAP" if m.gap else "NOT NAMED"
            rows.append([m.name, m.what, f"{job.case.name}: {self.engines.kernel_text(job.case, m.run)}",
                         f"K={job.case.k} N={job.case.n} M={job.case.m}", f"exit {job.rc}", state, job.said])
            if not job.problems:
                if m.gap:
                    print(f"NOTE: {m.name} is named now ({job.said}): remove it from the known gaps")
                continue
            (gaps if m.gap else failed).append(job)
        print(markdown(["mistake", "what the dump declares wrong", "kernel (twin)", "shape", "exit", "ncert",
                        "what ncert said"], rows))
        if gaps:
            print("\nknown gaps (ncert does not name the mistake yet; not failed on):")
        for job in gaps + failed:
            assert job.mistake is not None
            m = job.mistake
            print(f"{'KNOWN GAP' if m.gap else 'NOT NAMED'} {job.name} ({job.case.name}: {job.case.describe()})\n"
                  f"      {m.what}; must name it: "
                  + " or ".join(f"{c} '{p}'" for c, p in m.names) + (f"\n      known: {m.gap}" if m.gap else ""))
            for line in verdicts.reasons(job.report, sorted(verdicts.failing(job.report)) or ["bound"]):
                print(f"      {line[:700]}")
            diagnosis = verdicts.diagnosis(job.report)
            if diagnosis:
                print(f"      bound diagnosis: {json.dumps(diagnosis)[:1500]}")
        return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
