"""The mutation runner's (mutate.py) tally: outcomes counted per command and mutation kind,
printed as tables and written as JSON.

Results are counted in (seed, mutant index) order, whatever order the jobs finished in, so the
tally, the list of bad runs and the JSON do not depend on --jobs. The JSON holds no timing.

Python 3 standard library only. See tools/fuzz/README.md, "Reading the tally" and "JSON".
"""

import json
import sys

from mutants import describe
from runner import BAD_FLAGS

BAD_LIST_PRINTED = 40  # bad runs listed on stdout; the JSON has them all
SLOWEST_LISTED = 10  # the slowest runs, on stdout and in the JSON


def new_tally(commands):
    return {c: {"runs": 0, "bad": 0, "outcomes": {}, "flags": {}, "error_names": {},
                "by_kind": {}} for c in commands}


def add_to_tally(t, kind, outcome, flags, bad, error_name):
    t["runs"] += 1
    t["bad"] += 1 if bad else 0
    t["outcomes"][outcome] = t["outcomes"].get(outcome, 0) + 1
    for f in flags:
        t["flags"][f] = t["flags"].get(f, 0) + 1
    if outcome == "exit3" and error_name:
        t["error_names"][error_name] = t["error_names"].get(error_name, 0) + 1
    k = t["by_kind"].setdefault(kind, {"runs": 0, "bad": 0, "outcomes": {}})
    k["runs"] += 1
    k["bad"] += 1 if bad else 0
    k["outcomes"][outcome] = k["outcomes"].get(outcome, 0) + 1


def sort_dict(d):
    return {k: d[k] for k in sorted(d)}


def outcome_order(label):
    fixed = ["exit0", "exit1", "exit3", "exit2", "exit4"]
    if label in fixed:
        return (0, fixed.index(label), "")
    if label.startswith("exit_other"):
        return (1, 0, label)
    if label.startswith("signal:"):
        return (2, 0, label)
    return (3, 0, label)


def print_table(tally, commands, out=sys.stdout):
    labels = {"exit0": "exit 0 (pass)", "exit1": "exit 1 (check failed)",
              "exit3": "exit 3 (refused)", "exit2": "exit 2 (usage)  BAD",
              "exit4": "exit 4 (internal)  BAD", "hang": "hang (timeout)  BAD"}
    rows = ["exit0", "exit1", "exit3", "exit2", "exit4"]
    extra = set()
    for c in commands:
        extra.update(k for k in tally[c]["outcomes"] if k not in rows and k != "hang")
    rows += sorted(extra, key=outcome_order) + ["hang"]
    w0 = max([24] + [len(labels.get(r, r)) + 6 for r in rows])
    wc = max([9] + [len(c) + 2 for c in commands])
    print("%-*s" % (w0, "outcome") + "".join("%*s" % (wc, c) for c in commands), file=out)
    print("%-*s" % (w0, "runs") + "".join("%*d" % (wc, tally[c]["runs"]) for c in commands),
          file=out)
    for r in rows:
        name = labels.get(r)
        if name is None:
            name = (r.replace("signal:", "signal ") + "  BAD") if r.startswith("signal:") \
                else r.replace("exit_other:", "exit ") + "  BAD"
        print("%-*s" % (w0, name) + "".join(
            "%*d" % (wc, tally[c]["outcomes"].get(r, 0)) for c in commands), file=out)
    for f in BAD_FLAGS:
        if f in ("exit3_without_json", "escape_in_output") or any(
                tally[c]["flags"].get(f) for c in commands):
            print("%-*s" % (w0, f + "  BAD") + "".join(
                "%*d" % (wc, tally[c]["flags"].get(f, 0)) for c in commands), file=out)
    print("%-*s" % (w0, "bad runs") + "".join("%*d" % (wc, tally[c]["bad"]) for c in commands),
          file=out)


def print_kind_table(tally, commands, kinds, out=sys.stdout):
    print("\nbad runs by mutation kind (bad/runs):", file=out)
    wc = max([14] + [len(c) + 2 for c in commands])
    print("%-16s" % "kind" + "".join("%*s" % (wc, c) for c in commands), file=out)
    for k in kinds:
        cells = []
        for c in commands:
            e = tally[c]["by_kind"].get(k, {"runs": 0, "bad": 0})
            cells.append("%*s" % (wc, "%d/%d" % (e["bad"], e["runs"])))
        print("%-16s" % k + "".join(cells), file=out)


class Summary:
    """Every run counted: the tally per command, the bad mutant runs, the baselines."""

    def __init__(self, results, baselines, commands, kinds):
        """results: {(seed index, mutant index): record}; kinds: the kinds in --kinds order."""
        self.tally = new_tally(commands)
        self.bad = []
        timed = []
        self.kinds_seen = []
        self.mutants = len(results)
        for task in sorted(results):
            rec = results[task]
            kind = rec["mutation"]["kind"]
            if kind not in self.kinds_seen:
                self.kinds_seen.append(kind)
            for r in rec["runs"]:
                add_to_tally(self.tally[r["command"]], kind, r["outcome"], r["flags"], r["bad"],
                             r["error_name"])
                timed.append({"mutant": rec["id"], "command": r["command"],
                              "outcome": r["outcome"], "error_name": r["error_name"],
                              "seconds": r.get("seconds", 0.0)})
                if r["bad"]:
                    self.bad.append({
                        "mutant": rec["id"], "seed": rec["seed"], "index": rec["index"],
                        "mutation": rec["mutation"], "description": describe(rec["mutation"]),
                        "command": r["command"], "outcome": r["outcome"], "flags": r["flags"],
                        "returncode": r["returncode"], "stderr_tail": r.get("stderr_tail", ""),
                    })
        for c in commands:
            t = self.tally[c]
            t["outcomes"] = {k: t["outcomes"][k] for k in sorted(t["outcomes"], key=outcome_order)}
            t["flags"] = sort_dict(t["flags"])
            t["error_names"] = sort_dict(t["error_names"])
            t["by_kind"] = {k: t["by_kind"][k] for k in kinds if k in t["by_kind"]}
            for e in t["by_kind"].values():
                e["outcomes"] = {k: e["outcomes"][k] for k in sorted(e["outcomes"],
                                                                     key=outcome_order)}
        # The slowest runs, longest first (ties by mutant and command, so the list is the same
        # at any --jobs): what to look at when runs near --timeout.
        self.slowest = sorted(timed, key=lambda t: (-t["seconds"], t["mutant"], t["command"]))[
            :SLOWEST_LISTED]
        self.baselines = baselines
        self.n_bad = len(self.bad) + len([b for b in baselines if b["bad"]])


def print_report(summary, args, seeds, elapsed, out=None):
    """The human report (stdout): the run, the baselines, both tables, the bad runs, PASS/FAIL."""
    out = sys.stdout if out is None else out
    baselines = summary.baselines
    print("ncert mutation run: %d seed(s) x %s mutant(s), --seed %d, commands: %s" % (
        len(seeds), args.mutants if not args.only else "selected", args.seed,
        " ".join(args.commands)), file=out)
    print("seeds: " + " ".join(s.name for s in seeds), file=out)
    if baselines:
        odd = [b for b in baselines if b["outcome"] not in ("exit0", "exit1")]
        print("baseline (unmodified seeds): %d run(s), %d not exit 0/1%s" % (
            len(baselines), len(odd),
            "".join("\n  %s %s -> %s %s" % (b["command"], b["seed"], b["outcome"], " ".join(b["flags"]))
                    for b in odd)), file=out)
    print(file=out)
    print_table(summary.tally, args.commands, out)
    print_kind_table(summary.tally, args.commands,
                     [k for k in args.kinds if k in summary.kinds_seen], out)
    bad_list = summary.bad
    if bad_list:
        print("\nbad outcomes (%d):" % len(bad_list), file=out)
        for b in bad_list[:BAD_LIST_PRINTED]:
            print("  %-28s %-8s %-16s %s%s" % (
                b["mutant"], b["command"], b["outcome"],
                ("[" + ",".join(b["flags"]) + "] ") if b["flags"] else "",
                b["description"]), file=out)
        if len(bad_list) > BAD_LIST_PRINTED:
            print("  ... %d more (see --json)" % (len(bad_list) - BAD_LIST_PRINTED), file=out)
    if summary.slowest:
        print("\nslowest runs (--timeout %g s, --hdf5-timeout %g s):" % (
            args.timeout, args.hdf5_timeout), file=out)
        for t in summary.slowest:
            print("  %-28s %-8s %7.2f s  %s%s" % (
                t["mutant"], t["command"], t["seconds"], t["outcome"],
                (" " + t["error_name"]) if t["error_name"] else ""), file=out)
    print("\n%s: %d bad run(s) of %d; %.1f s" % (
        "FAIL" if summary.n_bad else "PASS", summary.n_bad,
        sum(summary.tally[c]["runs"] for c in args.commands) + len(baselines), elapsed),
        file=out)
    if args.keep_failures and summary.n_bad:
        print("bad mutants copied to %s" % args.keep_failures, file=out)


def write_json(path, summary, args, seeds):
    """--json: the arguments, the seeds, the baselines, the tally and every bad run."""
    doc = {
        "tool": "ncert-mutate",
        "version": 1,
        "arguments": {
            "seed": args.seed, "mutants": args.mutants, "commands": args.commands,
            "kinds": args.kinds, "timeout": args.timeout,
            "hdf5_timeout": args.hdf5_timeout, "smoke": args.smoke,
            "normalize": not args.no_normalize, "only": args.only,
        },
        "seeds": [{"name": s.name, "bytes": len(s.data), "sha256": s.sha256,
                   "mtimes_normalized": s.mtimes_fixed,
                   "object_headers_v1": s.map.ohdr_count,
                   "metadata_regions": len(s.map.regions)} for s in seeds],
        "baseline": summary.baselines,
        "mutants": summary.mutants,
        "bad_runs": summary.n_bad,
        "tally": summary.tally,
        "bad": summary.bad,
        "slowest": summary.slowest,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
