#!/usr/bin/env python3
"""The torch_engine example end to end: decode, export, certify, and hold every verdict
against the expected outcome stated in README.md.

    python3 examples/torch_engine/run.py --ncert build/release/certify/ncert --out /tmp/te [--small]

Exit status: 0 when every ncert result is the expected one, 1 when one is not, 2 for a usage
error (no ncert binary, an output directory that would be overwritten without --force), 77 when
torch is not installed (the test suite reports the example as skipped).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

kHere = Path(__file__).resolve().parent
kRepo = kHere.parent.parent
kSeed = 3
kRequests = 8
kNewTokens = {"full": 16, "small": 8}
kOutputs = ("f32", "bf16", "reports")  # what the example writes inside --out
kNoTorch = 77  # CTest's SKIP_RETURN_CODE for this example

# The example runs from the source tree (the test suite runs it there too): write no
# __pycache__ beside its modules or the package's.
sys.dont_write_bytecode = True

try:
    import ncert_dump  # noqa: F401  (PYTHONPATH set by the caller)
except ImportError:  # run from a checkout: the package lives in python/
    sys.path.insert(0, str(kRepo / "python"))
sys.path.insert(0, str(kHere.parent / "common"))

from harness import example_parser, find_ncert  # noqa: E402


def parse_args(argv):
    p = example_parser(__doc__, "directory for dumps and reports")
    p.add_argument("--small", action="store_true",
                   help="the test-suite size: vocab 512, hidden 128, 2 layers, 8 new tokens")
    p.add_argument("--seed", type=int, default=kSeed, help=f"model and prompt seed (default {kSeed})")
    return p.parse_args(argv)


def prepare_out(out: Path, force: bool) -> str:
    """'' when `out` is ready, else why it is refused."""
    existing = [name for name in kOutputs if (out / name).exists()]
    if existing and not force:
        return f"{out} already holds {', '.join(existing)} from an earlier run: pass --force"
    for name in existing:
        shutil.rmtree(out / name)
    out.mkdir(parents=True, exist_ok=True)
    return ""


def banner(title: str) -> None:
    print(f"\n== {title}", flush=True)


def show(run, only_prefix: str = "") -> None:
    """ncert's output; with `only_prefix`, the header, the checks whose id starts with it,
    every FAIL, and the verdict (the rest is in the JSON report)."""
    print(f"$ {run.shown}")
    lines = run.stdout.rstrip().splitlines()
    if only_prefix and lines:
        kept, keeping = [lines[0]], False
        for line in lines[1:-1]:
            if not line.startswith(" "):  # a check's line; its detail lines are indented
                keeping = line[6:].startswith(only_prefix) or line.startswith("FAIL")
            if keeping:
                kept.append(line)
        print("\n".join(kept))
        print(f"      ({len(lines) - len(kept) - 1} lines of other checks and the coverage table "
              f"not shown: reports/{run.report_name}.json)")
        print(lines[-1])
    else:
        print("\n".join(lines))
    if run.stderr.strip():
        print(run.stderr.rstrip())


def main(argv=None) -> int:
    args = parse_args(argv)
    ncert_binary = find_ncert(args.ncert)
    if ncert_binary is None:
        print("run.py: no ncert binary: pass --ncert PATH (build it with "
              "`cmake --preset release && cmake --build build/release --target ncert`)",
              file=sys.stderr)
        return 2
    refused = prepare_out(args.out.resolve(), args.force)
    if refused:
        print(f"run.py: {refused}", file=sys.stderr)
        return 2
    out = args.out.resolve()

    try:
        import torch  # after the usage checks: importing torch takes a second or two
    except ImportError as e:
        print(f"run.py: torch is not installed ({e}): apt-get install python3-torch",
              file=sys.stderr)
        return kNoTorch

    from certify import (Ncert, compare_expectation, forks_expectation, logits_dump_expectation,
                         step_dump_expectation)
    from engine import Engine, Geometry, make_prompts
    from model import FULL, SMALL, TinyTransformer

    # One intra-op thread: the kernels' results then cannot depend on the machine's core
    # count, and two runs of the example write byte-identical dumps.
    torch.set_num_threads(1)
    started = time.perf_counter()
    size = "small" if args.small else "full"
    cfg = SMALL if args.small else FULL
    geometry = Geometry()
    base = TinyTransformer(cfg, seed=args.seed)
    prompts = make_prompts(cfg.vocab, kRequests, args.seed)
    new_tokens = kNewTokens[size]
    print(f"torch_engine: {size} model (vocab {cfg.vocab}, hidden {cfg.hidden}, {cfg.layers} "
          f"layers, {cfg.heads} heads, FFN {cfg.ffn}), seed {args.seed}; torch {torch.__version__}, "
          f"CPU, 1 thread")
    print(f"{kRequests} requests, prompts of {min(map(len, prompts))}-{max(map(len, prompts))} "
          f"tokens, {new_tokens} new tokens each, greedy; mixer projections packed: "
          f"{geometry.requests} requests x {geometry.block_rows} rows, cap {geometry.cap}, "
          f"{geometry.slots} slots")

    engines = {}
    for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        engine = Engine(base.build(dtype), geometry, out / name,
                        build=f"{name} torch {torch.__version__} cpu",
                        model_name=f"torch_engine tiny transformer {size} seed {args.seed}")
        engine.decode(prompts, new_tokens)
        engines[name] = engine
        print(f"build {name:<4}: {len(engine.step_files)} steps, engine {engine.engine_seconds:.1f} s, "
              f"export {engine.export_seconds:.1f} s -> {name}/step_*.h5, {name}/logits.h5")
    print("rows fed per request and step (slots used of 32):")
    for step, counts in enumerate(engines["bf16"].step_counts):
        print(f"  step {step:2d}: {' '.join(map(str, counts))}  ({sum(counts)})")

    ncert = Ncert(ncert_binary, out)
    checked = time.perf_counter()
    step_runs = {name: [ncert.run("check", f, report_name=f"check_{name}_{f.stem}")
                        for f in engine.step_files] for name, engine in engines.items()}
    banner("ncert check: one step dump in full (the bf16 build's first step: prefill chunks)")
    show(step_runs["bf16"][0])
    banner("ncert check: every step dump (ncert's verdict line)")
    for name, runs in step_runs.items():
        for run in runs:
            print(f"{run.target:<16} {run.stdout.rstrip().splitlines()[-1]}")

    logits_runs = {}
    for name, engine in engines.items():
        banner(f"ncert check: the {name} build's logits runs and lm_head rows")
        logits_runs[name] = ncert.run("check", engine.logits_file, report_name=f"check_{name}_logits")
        show(logits_runs[name], only_prefix="logits/")
    banner("ncert compare: f32 build (A) vs bf16 build (B), bitwise policy")
    compare = ncert.run("compare", engines["f32"].logits_file, engines["bf16"].logits_file,
                        report_name="compare")
    show(compare)
    banner("ncert forks: where the bf16 build's tokens leave the f32 build's")
    forks = ncert.run("forks", engines["f32"].logits_file, engines["bf16"].logits_file,
                      report_name="forks")
    show(forks)
    ncert_seconds = time.perf_counter() - checked

    expectations = [step_dump_expectation(name, runs) for name, runs in step_runs.items()]
    expectations += [logits_dump_expectation(name, run) for name, run in logits_runs.items()]
    expectations += [compare_expectation(compare), forks_expectation(forks)]
    banner("expected outcomes (examples/torch_engine/README.md)")
    for e in expectations:
        print(f"{'ok' if e.met else 'NOT MET':<8}{e.what}\n        {e.detail}")
    unmet = sum(not e.met for e in expectations)
    total = time.perf_counter() - started
    print(f"\n{len(expectations) - unmet} of {len(expectations)} expectations met "
          f"(ncert {ncert_seconds:.1f} s, total {total:.1f} s); reports in {out.name}/reports/")
    return 1 if unmet else 0


if __name__ == "__main__":
    sys.exit(main())
