#!/usr/bin/env python3
"""Replays libFuzzer artifacts and says whose bug each one is: ncert's or libhdf5's.

Every crash-*, leak-*, timeout-*, oom-* and slow-unit-* file given (or found in a directory)
is run once through the fuzzer binary; its sanitizer report is read and the first frame that
is neither the sanitizer runtime, libFuzzer, the C/C++ runtime nor an interceptor (memcpy...)
decides the owner:

  ncert    the frame is ncert's code (a source file inside the repository), or a UBSan
           "runtime error" names one: a bug to fix in ncert
  libhdf5  the frame is inside libhdf5: the library's own bug on a corrupt file, which the
           CLI survives by isolation (hdf5-crashed / hdf5-hung, docs/cli.md)
  other    anything else (zlib, libgomp, no stack): read the report

Artifacts with the same owner, error kind and top frames form one group; one line per group,
with every artifact in it. --show prints the whole report of each group's first artifact.

Python 3 standard library only. Exit status: 0 no artifact is ncert's, 1 at least one is,
2 usage error. See tools/fuzz/README.md.
"""

import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIXES = ("crash-", "leak-", "timeout-", "oom-", "slow-unit-")

# Frames that say nothing about whose bug it is.
SKIP_FUNCTION = re.compile(
    r"^(__interceptor_|__asan|__lsan|__ubsan|__sanitizer|"
    r"fuzzer::|LLVMFuzzer|__libc_|_start$|__GI_|__memcpy|__memmove|__memset|"
    r"operator new|operator delete|malloc$|calloc$|realloc$|free$|memcpy$|memmove$|"
    r"memset$|strlen$|strcmp$|strncmp$|abort$|raise$|__restore_rt|__pthread_kill|"
    r"std::__throw|__cxa_|__gnu_cxx::|std::allocator|std::vector<.*>::_M_|std::__new_allocator|"
    r"__gnu_cxx::new_allocator|main$)")
SKIP_MODULE = re.compile(r"/(libc\.so|libc-|libstdc\+\+|libgcc_s|ld-linux|libpthread)")

FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+\s+(?:in (?P<fn>.+?) )?(?P<loc>\S+?)"
                   r"(?: \(BuildId: [0-9a-f]+\))?$")
SANITIZER = r"(?:AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)"
KIND = (re.compile(r"SUMMARY: " + SANITIZER + r": ([\w-]+)"),  # e.g. allocation-size-too-big
        re.compile(r"ERROR: " + SANITIZER + r": ([\w-]+)"))
UB = re.compile(r"^(?P<file>[^ :]+):(?P<line>\d+):\d+: runtime error: (?P<what>.*)$")


def frames(report):
    """(function, location) of the first stack in the report, in order."""
    out = []
    started = False
    for line in report.splitlines():
        m = FRAME.match(line)
        if m:
            started = True
            out.append(((m.group("fn") or "").strip(), m.group("loc").strip("()")))
        elif started and out:
            break
    return out


def owner_of(report, repo):
    """(owner, kind, signature frames) for one sanitizer report."""
    ub = None
    for line in report.splitlines():
        m = UB.match(line.strip())
        if m:
            ub = m
            break
    if ub:
        path = os.path.realpath(ub.group("file"))
        owner = "ncert" if path.startswith(repo + os.sep) else "other"
        return owner, "undefined-behavior: " + ub.group("what")[:80], [
            "%s:%s" % (os.path.relpath(path, repo) if owner == "ncert" else path, ub.group("line"))]
    m = KIND[0].search(report) or KIND[1].search(report)
    kind = m.group(1) if m else ("no-report" if "ERROR:" not in report else "unknown")
    sig = []
    owner = None
    for fn, loc in frames(report):
        if SKIP_FUNCTION.match(fn) or SKIP_MODULE.search(loc):
            continue
        src = loc.split(":")[0]
        if src.startswith(repo + os.sep):
            where = "ncert"
            label = "%s %s" % (fn, os.path.relpath(loc, repo))
        elif "libhdf5" in loc:
            where = "libhdf5"
            label = "%s (libhdf5)" % (fn or "??")
        else:
            where = "other"
            label = "%s %s" % (fn or "??", os.path.basename(loc))
        if owner is None:
            owner = where
        sig.append(label)
        if len(sig) == 3:
            break
    return owner or "other", kind, sig


def collect(items):
    found = []
    for item in items:
        if os.path.isdir(item):
            found += sorted(os.path.join(item, n) for n in os.listdir(item)
                            if n.startswith(PREFIXES))
        elif os.path.isfile(item):
            found.append(item)
        else:
            sys.stderr.write("triage.py: %s: no such file or directory\n" % item)
            sys.exit(2)
    return found


def main():
    p = argparse.ArgumentParser(description="Replay libFuzzer artifacts and say whose bug each is.")
    p.add_argument("--fuzzer", required=True, help="the fuzzer binary that found them")
    p.add_argument("artifacts", nargs="+", help="artifact files or directories holding them")
    p.add_argument("--timeout", type=int, default=10,
                   help="seconds a replayed timeout-* artifact may run before libFuzzer prints "
                        "where it is (default 10)")
    p.add_argument("--show", action="store_true", help="print each group's first report")
    a = p.parse_args()
    if not (os.path.isfile(a.fuzzer) and os.access(a.fuzzer, os.X_OK)):
        p.error("--fuzzer %s: not an executable file" % a.fuzzer)
    env = os.environ.copy()
    env.setdefault("LSAN_OPTIONS", "suppressions=" + os.path.join(REPO, "tools", "sanitizers", "lsan.supp"))
    env.setdefault("ASAN_OPTIONS", "symbolize=1")
    groups = {}
    for art in collect(a.artifacts):
        argv = [a.fuzzer, "-runs=1", "-timeout=%d" % a.timeout, "-rss_limit_mb=3072", art]
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=env, timeout=a.timeout * 6 + 60)
            report = proc.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            report = ""
        owner, kind, sig = owner_of(report, REPO)
        if kind == "no-report":
            kind = "no-report (the replay did not fail: flaky or load-dependent)"
        key = (owner, kind, tuple(sig))
        groups.setdefault(key, []).append((art, report))

    order = {"ncert": 0, "other": 1, "libhdf5": 2}
    for (owner, kind, sig), arts in sorted(groups.items(), key=lambda kv: (order[kv[0][0]], kv[0])):
        print("%-8s %-28s %s" % (owner, kind, "  <-  ".join(sig) or "(no frame)"))
        for art, _ in arts:
            print("           " + art)
        if a.show:
            print("\n".join("    | " + ln for ln in arts[0][1].splitlines()[-60:]))
    n_ncert = sum(len(v) for k, v in groups.items() if k[0] == "ncert")
    total = sum(len(v) for v in groups.values())
    print("\n%d artifact(s) in %d group(s); %d in ncert's code" % (total, len(groups), n_ncert))
    return 1 if n_ncert else 0


if __name__ == "__main__":
    sys.exit(main())
