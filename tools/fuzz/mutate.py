#!/usr/bin/env python3
"""Deterministic mutation runner for ncert.

Corrupts valid dumps (bit flips, zeroed and duplicated blocks, truncation, appended garbage,
targeted damage to HDF5 metadata) and runs ncert on every mutant, tallying how each run ends.
The contract under test (docs/cli.md): a corrupt dump ends in exit 3 with a JSON report, or
in 0/1 when the damage happens to leave it valid; never a signal, a hang, exit 4 or exit 2.

This file is the command line and the run: the seeds, the baselines, the mutants through a
pool of jobs, the failures kept. The modules beside it do the rest: h5map.py (where a file's
HDF5 metadata lives), mutants.py (the mutants), runner.py (one ncert run and how it ended),
tally.py (the counts, the tables and the JSON).

Python 3 standard library only. See tools/fuzz/README.md.

Exit status: 0 no bad outcome, 1 at least one bad outcome, 2 usage error.
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import sys
import tempfile
import threading
import time

if __name__ == "__main__":
    # Run as a script (CTest's fuzz_smoke does), it imports the modules beside it: leave no
    # __pycache__ in the source tree.
    sys.dont_write_bytecode = True

import tally  # noqa: E402
from h5map import H5Map  # noqa: E402
from mutants import KINDS, Seed, describe, make_mutant  # noqa: E402
from runner import (TWO_INPUT_COMMANDS, build_argv, classify, collect_seed_paths,  # noqa: E402
                    disable_core_files, discard, fail_usage, run_one, stop_all, stopping, tail_text)

SMOKE_MUTANTS = 75
SMOKE_SEEDS = ("good.h5", "logits-a.h5", "fork-near-tie-a.h5", "stale-compact-slot.h5")
SMOKE_SEED_COUNT = 4


def make_demo_seeds(ncert, workdir, timeout):
    d = os.path.join(workdir, "seeds")
    argv = [ncert, "demo", "--dir", d, "--force", "--quiet"]
    try:
        rc, out, err = run_one(argv, max(timeout, 120), os.environ.copy())
    except OSError as e:
        fail_usage("cannot run %s: %s" % (ncert, e))
    paths = sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".h5")) \
        if os.path.isdir(d) else []
    if not paths:
        fail_usage("`ncert demo` wrote no dump (exit %s): %s" % (rc, tail_text(err, None, 400)))
    if rc not in (0, 1):
        print("mutate.py: warning: `ncert demo` ended with %s; using the %d dump(s) it wrote"
              % (rc, len(paths)), file=sys.stderr)
    return paths


def pick_smoke(seeds):
    chosen = [s for name in SMOKE_SEEDS for s in seeds if s.name == name]
    for s in sorted(seeds, key=lambda s: s.name):
        if len(chosen) >= SMOKE_SEED_COUNT:
            break
        if s not in chosen:
            chosen.append(s)
    return chosen[:SMOKE_SEED_COUNT]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="mutate.py",
        description="Corrupt valid ncert dumps deterministically and run ncert on every "
                    "mutant; exit 0 when no run crashed, hung, exited 2 or 4, or broke the "
                    "report contract, 1 otherwise, 2 on usage errors.")
    p.add_argument("--ncert", required=True, help="the ncert binary")
    p.add_argument("--seeds", nargs="+", metavar="DIR_OR_FILE",
                   help="valid .h5 dumps (directories: every *.h5 in them); default: the "
                        "dumps `ncert demo` writes")
    p.add_argument("--mutants", type=int, default=None,
                   help="mutants per seed file (default 100; %d with --smoke)" % SMOKE_MUTANTS)
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--commands", nargs="+", default=None, metavar="CMD",
                   help="ncert commands run on every mutant (default: inspect check); "
                        "compare/forks get the unmodified seed as second input")
    p.add_argument("--kinds", nargs="+", default=None, metavar="KIND", choices=KINDS,
                   help="mutation kinds, applied round-robin (default: all): " + " ".join(KINDS))
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per ncert run before it counts as a hang (default 20)")
    p.add_argument("--hdf5-timeout", type=float, default=None, metavar="SEC",
                   help="passed to ncert as --hdf5-timeout (default: a quarter of --timeout, so "
                        "that a mutant hanging libhdf5 ends in ncert's own refusal, hdf5-hung, "
                        "before the runner calls it a hang; 0: not passed, ncert's default)")
    p.add_argument("--jobs", type=int, default=None,
                   help="mutants run in parallel (default: number of CPUs)")
    p.add_argument("--workdir", default=None,
                   help="where mutants and reports go (default: a temporary directory)")
    p.add_argument("--keep", action="store_true",
                   help="keep the work directory and every mutant in it")
    p.add_argument("--keep-failures", metavar="DIR", default=None,
                   help="copy every mutant with a bad outcome here, with a .txt on how to "
                        "reproduce it")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="write the tally and every bad outcome as JSON")
    p.add_argument("--only", nargs="+", metavar="MUTANT_ID", default=None,
                   help="regenerate and run only these mutants (ids as in the report, "
                        "e.g. good.0007); no baseline runs")
    p.add_argument("--no-normalize", action="store_true",
                   help="use the seeds byte for byte (by default modification times in v1 "
                        "object headers are set to a fixed value, so seeds written at "
                        "different times give the same mutants)")
    p.add_argument("--memory-limit", type=int, default=0, metavar="MIB",
                   help="address-space limit per ncert run (ulimit -v; 0 = none, the default; "
                        "do not use with sanitizer builds)")
    p.add_argument("--smoke", action="store_true",
                   help="CI preset: %d mutants on each of %d seeds (%s, chosen from the seed "
                        "set), timeout 20 s" % (SMOKE_MUTANTS, SMOKE_SEED_COUNT,
                                                ", ".join(SMOKE_SEEDS)))
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    if a.mutants is None:
        a.mutants = SMOKE_MUTANTS if a.smoke else 100
    if a.timeout is None:
        a.timeout = 20.0
    if a.hdf5_timeout is None:
        a.hdf5_timeout = a.timeout / 4
    if a.jobs is None:
        a.jobs = os.cpu_count() or 1
    if a.commands is None:
        a.commands = ["inspect", "check"]
    if a.kinds is None:
        a.kinds = list(KINDS)
    if a.mutants < 0:
        p.error("--mutants must be >= 0")
    if a.jobs < 1:
        p.error("--jobs must be >= 1")
    if not a.timeout > 0:
        p.error("--timeout must be > 0")
    if a.hdf5_timeout < 0:
        p.error("--hdf5-timeout must be >= 0")
    if a.memory_limit < 0:
        p.error("--memory-limit must be >= 0")
    for c in a.commands:
        if not re.fullmatch(r"[a-z][a-z0-9-]*", c):
            p.error("--commands: %r is not a command name" % c)
    if not (os.path.isfile(a.ncert) and os.access(a.ncert, os.X_OK)):
        p.error("--ncert %s: not an executable file" % a.ncert)
    a.ncert = os.path.abspath(a.ncert)
    a.from_demo = not a.seeds
    return a


def write_repro(path_txt, mutant_file, rec, runs, args, seed):
    lines = [
        "mutant %s: seed %s (sha256 %s%s), index %d, --seed %d" % (
            rec["id"], seed.name, seed.sha256,
            ", modification times normalized" if seed.normalized else "", rec["index"],
            args.seed),
        "mutation: " + describe(rec["mutation"]),
        "",
        "outcomes:",
    ]
    for r in runs:
        lines.append("  ncert %s -> %s%s" % (r["command"], r["outcome"],
                                             (" [" + ", ".join(r["flags"]) + "]")
                                             if r["flags"] else ""))
    if any(r["outcome"] == "hang" for r in runs):
        lines.append("  (hang: still running after --timeout %g s; run it alone with a longer "
                     "timeout to tell a loop from a slow run)" % args.timeout)
    lines += ["", "reproduce (from this directory):"]
    for r in runs:
        if r["bad"]:
            other = " SEED.h5" if r["command"] in TWO_INPUT_COMMANDS else ""
            lines.append("  ncert %s %s%s --json out.json --threads 1" % (
                r["command"], mutant_file, other))
    first = next(r for r in runs if r["bad"])
    lines += ["", "debug:",
              "  gdb -batch -ex run -ex bt --args ncert %s %s --threads 1" % (
                  first["command"], mutant_file),
              "", "regenerate (from the repository root):",
              "  python3 tools/fuzz/mutate.py --ncert NCERT%s --seed %d --only %s "
              "--keep-failures DIR%s%s" % (
                  "" if args.from_demo else " --seeds " + os.path.abspath(seed.path),
                  args.seed, rec["id"],
                  "" if args.kinds == list(KINDS) else " --kinds " + " ".join(args.kinds),
                  "" if seed.normalized else " --no-normalize")]
    if args.from_demo:
        lines.append("  (no --seeds: the seed is the `ncert demo` dump %s, modification times "
                     "normalized)" % seed.name)
    if first.get("stderr_tail"):
        lines += ["", "stderr (tail) of `ncert %s`:" % first["command"], first["stderr_tail"]]
    with open(path_txt, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


class Workdir:
    """The work directory: mutants/, reports/, baseline/ and, without --seeds, seeds/."""

    def __init__(self, args):
        self.own = args.workdir is None
        self.path = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="ncert-mutate-"))
        os.makedirs(self.path, exist_ok=True)
        self.mutants = os.path.join(self.path, "mutants")
        self.reports = os.path.join(self.path, "reports")
        self.baseline = os.path.join(self.path, "baseline")
        self.created = []  # only what this run created is removed at the end
        for d in (self.mutants, self.reports, self.baseline, os.path.join(self.path, "seeds")):
            if not os.path.exists(d):
                self.created.append(d)
        for d in (self.mutants, self.reports, self.baseline):
            os.makedirs(d, exist_ok=True)

    def clean_up(self, keep):
        if self.own and not keep:
            shutil.rmtree(self.path, ignore_errors=True)
        elif not keep:
            for d in self.created:
                shutil.rmtree(d, ignore_errors=True)
        else:
            print("work directory kept: %s" % self.path, file=sys.stderr)


def load_seeds(args, workdir):
    """The seeds, normalized unless --no-normalize, stems made unique, the --smoke subset; each
    written to baseline/ (the file baselines and two-input commands read)."""
    if args.seeds:
        paths = collect_seed_paths(args.seeds)
    else:
        paths = make_demo_seeds(args.ncert, workdir.path, args.timeout)
    seeds = []
    used = {}
    for pth in paths:
        with open(pth, "rb") as f:
            raw = bytearray(f.read())
        name = os.path.basename(pth)
        fixed = 0
        if not args.no_normalize:
            fixed = H5Map(bytes(raw)).normalize(raw)
        s = Seed(pth, name, raw, not args.no_normalize, fixed)
        n = used.get(s.stem, 0)
        used[s.stem] = n + 1
        if n:
            s.stem = "%s~%d" % (s.stem, n + 1)
        seeds.append(s)
    if args.smoke:
        seeds = pick_smoke(seeds)
    if not seeds:
        fail_usage("no seed")
    for s in seeds:
        s.run_path = os.path.join(workdir.baseline, s.stem + ".h5")
        with open(s.run_path, "wb") as f:
            f.write(s.data)
    return seeds


def plan_tasks(args, seeds):
    """The work list, sorted: (seed index, mutant index), every mutant or the --only ones."""
    if not args.only:
        return [(si, k) for si in range(len(seeds)) for k in range(args.mutants)]
    tasks = []
    by_stem = {s.stem: i for i, s in enumerate(seeds)}
    for mid in args.only:
        m = re.fullmatch(r"(.+)\.(\d+)", mid)
        if not m or m.group(1) not in by_stem:
            fail_usage("--only %s: no such mutant (ids are SEEDSTEM.NNNN; seeds: %s)"
                       % (mid, ", ".join(sorted(by_stem))))
        tasks.append((by_stem[m.group(1)], int(m.group(2))))
    return sorted(set(tasks))


def child_env():
    env = os.environ.copy()
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_baselines(args, seeds, workdir, env):
    """Every command on every unmodified (normalized) seed."""
    baselines = []
    for s in seeds:
        for c in args.commands:
            out_json = os.path.join(workdir.baseline, "%s.%s.json" % (s.stem, c))
            argv_ = build_argv(args.ncert, c, s.run_path, s.run_path, out_json,
                               args.memory_limit, args.hdf5_timeout)
            rc, out, err = run_one(argv_, args.timeout, env)
            outcome, flags, bad, ename = classify(rc, out, err, out_json)
            baselines.append({"seed": s.name, "command": c, "outcome": outcome,
                              "flags": flags, "bad": bad})
    return baselines


class MutantRun:
    """One task of the pool: the mutant written, run through every command, classified, copied
    to --keep-failures when bad, then removed (unless --keep); progress every tenth."""

    def __init__(self, args, seeds, workdir, env, t0, total):
        self.args = args
        self.seeds = seeds
        self.workdir = workdir
        self.env = env
        self.t0 = t0
        self.total = total
        self.step = max(1, total // 10)
        self.lock = threading.Lock()
        self.done = 0

    def __call__(self, task):
        args = self.args
        si, k = task
        if stopping():
            return task, None
        s = self.seeds[si]
        kind = args.kinds[k % len(args.kinds)]
        data, mutation = make_mutant(s, args.seed, k, kind)
        mid = "%s.%04d" % (s.stem, k)
        mfile = os.path.join(self.workdir.mutants, "%s.%s.h5" % (mid, kind))
        with open(mfile, "wb") as f:
            f.write(data)
        runs = [self.run_command(c, mid, mfile, s) for c in args.commands]
        rec = {"id": mid, "seed": s.name, "index": k, "mutation": mutation, "runs": runs}
        if any(r["bad"] for r in runs) and args.keep_failures:
            dst = os.path.join(args.keep_failures, "%s.%s.h5" % (mid, kind))
            shutil.copyfile(mfile, dst)
            write_repro(dst[:-3] + ".txt", os.path.basename(dst), rec, runs, args, s)
        if not args.keep:
            os.remove(mfile)
        self.count_done()
        return task, rec

    def run_command(self, c, mid, mfile, s):
        args = self.args
        out_json = os.path.join(self.workdir.reports, "%s.%s.json" % (mid, c))
        argv_ = build_argv(args.ncert, c, mfile, s.run_path, out_json,
                           args.memory_limit, args.hdf5_timeout)
        start = time.monotonic()
        rc, out, err = run_one(argv_, args.timeout, self.env)
        seconds = time.monotonic() - start
        outcome, flags, bad, ename = classify(rc, out, err, out_json)
        run = {"command": c, "outcome": outcome, "flags": flags, "bad": bad,
               "error_name": ename, "returncode": rc, "seconds": round(seconds, 3)}
        if bad:
            run["stderr_tail"] = tail_text(err, self.workdir.path)
        if not args.keep:
            discard(out_json)
        return run

    def count_done(self):
        with self.lock:
            self.done += 1
            d = self.done
            if not self.args.quiet and (d % self.step == 0 or d == self.total):
                print("  %d/%d mutants (%.0f s)" % (d, self.total, time.monotonic() - self.t0),
                      file=sys.stderr, flush=True)


def run_mutants(args, seeds, tasks, workdir, env, t0):
    """Every task through --jobs threads: {task: record}, or None when interrupted."""
    work = MutantRun(args, seeds, workdir, env, t0, len(tasks))
    results = {}
    if not args.quiet:
        print("mutate.py: %d seed(s), %d mutant(s), commands %s, %d job(s), workdir %s"
              % (len(seeds), len(tasks), " ".join(args.commands), args.jobs, workdir.path),
              file=sys.stderr, flush=True)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        for task, rec in pool.map(work, tasks):
            results[task] = rec
    except KeyboardInterrupt:
        stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        print("mutate.py: interrupted", file=sys.stderr)
        return None
    pool.shutdown(wait=True)
    return results


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()
    disable_core_files()
    workdir = Workdir(args)
    if args.keep_failures:
        os.makedirs(args.keep_failures, exist_ok=True)
    try:
        seeds = load_seeds(args, workdir)
        tasks = plan_tasks(args, seeds)
        env = child_env()
        baselines = [] if args.only else run_baselines(args, seeds, workdir, env)
        results = run_mutants(args, seeds, tasks, workdir, env, t0)
        if results is None:
            return 130
        elapsed = time.monotonic() - t0
        summary = tally.Summary(results, baselines, args.commands, args.kinds)
        tally.print_report(summary, args, seeds, elapsed)
        if args.json:
            tally.write_json(args.json, summary, args, seeds)
        return 1 if summary.n_bad else 0
    finally:
        workdir.clean_up(args.keep)


if __name__ == "__main__":
    sys.exit(main())
