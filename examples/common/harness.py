"""What the examples' scripts share around their kernels, in one copy: the options every script
takes, finding the ncert binary and the onnxruntime-node package, running a job of ONNX Runtime
calls in one node process, running ncert (`check` and any other verb) for its JSON report, the
expectation each script prints and judges, the skip (exit 77) a missing prerequisite gives, and an
output folder cleared only on --force.

An example imports it with its own folder's parent on sys.path:

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "common"))
    from harness import Expectation, check, find_ncert, skip
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

kRepo = Path(__file__).resolve().parent.parent.parent
kSkip = 77  # CTest's SKIP_RETURN_CODE for the examples


def example_parser(doc: str, out_help: str, ort: bool = False) -> argparse.ArgumentParser:
    """The options every example takes (--ncert, --out, --force; --ort-package where it runs ONNX
    Runtime), described by the first paragraph of the script's docstring `doc`; a script adds its
    own."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--ncert", type=Path, help="the ncert binary (default: $NCERT_BINARY, else "
                   "build/release/certify/ncert of this checkout, else ncert on PATH)")
    p.add_argument("--out", type=Path, required=True, help=out_help)
    if ort:
        p.add_argument("--ort-package", type=Path, help="the onnxruntime-node package directory "
                       "(default: the one tools/install-npm-deps installs, installing it if absent)")
    p.add_argument("--force", action="store_true", help="replace the files of an earlier run in --out")
    return p


def find_ncert(given) -> Optional[Path]:
    """The ncert binary: `given`, else $NCERT_BINARY, else this checkout's release build, else
    ncert on PATH; None when none of them is an executable file."""
    candidates = [given] if given else [os.environ.get("NCERT_BINARY"),
                                        kRepo / "build/release/certify/ncert", shutil.which("ncert")]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c).resolve()
    return None


def skip(reason: str) -> int:
    print(f"SKIP: {reason}")
    return kSkip


def find_ort_package(given: Optional[Path]) -> Tuple[Optional[Path], str]:
    """The onnxruntime-node package directory, or None and why it is unavailable."""
    if given is not None:
        if (given / "package.json").is_file():
            return given.resolve(), ""
        return None, f"--ort-package {given}: no package.json there"
    if shutil.which("node") is None:
        return None, "node is not installed (Debian: nodejs; tools/install-deps)"
    script = kRepo / "tools/install-npm-deps"
    where = subprocess.run([str(script), "--print-dir"], capture_output=True, text=True)
    pkg = Path(where.stdout.strip())
    if where.returncode == 0:
        return pkg, ""
    print(f"onnxruntime-node is not in {pkg}: installing it (tools/install-npm-deps)")
    got = subprocess.run([str(script)], capture_output=True, text=True)
    if got.returncode != 0:
        lines = [ln for ln in got.stderr.strip().splitlines() if ": installing " not in ln]
        detail = " ".join(lines[-4:])
        return None, f"onnxruntime-node could not be installed: {detail}"
    return pkg, ""


def run_ort_job(script: Path, ort_package: Path, work: Path, calls: List[dict]) -> str:
    """Runs `calls` in one node process (`node SCRIPT ORT_PACKAGE work/job.json`, a script built on
    ort_job.js), which writes every call's outputs; returns onnxruntime-node's version. Raises
    RuntimeError with the script's own error when it fails."""
    job = work / "job.json"
    job.write_text(json.dumps({"calls": calls}))
    proc = subprocess.run(["node", str(script), str(ort_package), str(job)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{script.name} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["onnxruntime"]


def save_opset13_model(path: Path, graph, example: str) -> None:
    """Saves an ONNX graph (opset 13, as half_gemm and ort_gemm_bias build theirs) as a model
    onnxruntime-node reads, checked first; `example` names the producer."""
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name=f"ncert-examples-{example}")
    model.ir_version = 8  # onnxruntime-node 1.30 reads IR 3..11; 8 is what opset 13 shipped with
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


class OrtCalls:
    """Calls of ONNX models queued (`queue`), then run all in one node process (`run`: `script`,
    an example's run_ort.js built on ort_job.js); each example's runner says what a call feeds
    and how its output reads."""

    def __init__(self, work: Path, ort_package: Path, script: Path):
        self.work = work
        self.ort_package = ort_package
        self.script = script
        self.calls: List[dict] = []
        self.version: Optional[str] = None

    def queue(self, call: dict) -> int:
        """Adds one call; returns its index."""
        self.calls.append(call)
        return len(self.calls) - 1

    def run(self) -> str:
        """Runs every queued call; returns (and keeps) onnxruntime-node's version."""
        self.version = run_ort_job(self.script, self.ort_package, self.work, self.calls)
        return self.version


@dataclass
class Expectation:
    what: str
    met: bool
    detail: str


def judge(results: Sequence[Expectation], start: float) -> int:
    """Prints every expectation, met or not, and how many were met since `start` (time.monotonic);
    the example's exit code: 1 when one is not met, else 0."""
    for r in results:
        print(f"{'ok      ' if r.met else 'NOT MET '} {r.what}\n      {r.detail}")
    unmet = sum(not r.met for r in results)
    print(f"{len(results) - unmet} of {len(results)} expectations met ({time.monotonic() - start:.1f} s)")
    return 1 if unmet else 0


def run_ncert(ncert: Path, verb: str, args: Sequence[str], report: Path, cwd: Path,
              timeout: Optional[float] = None) -> Tuple[subprocess.CompletedProcess, Optional[dict]]:
    """`ncert VERB ARGS... --json REPORT` run in `cwd`: the finished process (output captured)
    and the parsed report, None when none was written. A report left from an earlier run is
    removed first, so it cannot stand in for a failed one, and REPORT's path is made absolute:
    ncert runs in `cwd`, and a relative --out once sent every report astray (exit 2, no
    report)."""
    report = Path(report).resolve()
    report.unlink(missing_ok=True)
    proc = subprocess.run([str(Path(ncert).resolve()), verb, *args, "--json", str(report)],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout)
    parsed = json.loads(report.read_text()) if report.exists() else None
    return proc, parsed


def check(ncert: Path, dump: Path, reports: Path,
          timeout: Optional[float] = None) -> Tuple[int, Optional[dict]]:
    """`ncert check DUMP --json reports/<stem>.json`, run in the dump's folder (the report names
    the dump as it is there): its exit code and the parsed report (None when none was written);
    a refusal or a broken run is printed with ncert's own words."""
    proc, parsed = run_ncert(ncert, "check", [dump.name], reports / (dump.stem + ".json"), dump.parent,
                             timeout)
    if proc.returncode not in (0, 1):  # refused or broken: show why beside the expectation
        print(f"ncert check {dump.name}: exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()}")
    return proc.returncode, parsed


def verdicts(report: dict) -> Dict[str, str]:
    """check id -> verdict, for the projections' checks."""
    return {c["id"]: c["verdict"] for c in report["checks"] if c["id"].startswith("projections/")}


def failing(report: dict) -> List[str]:
    """The ids of the projections' checks that FAIL, sorted."""
    return sorted(i for i, verdict in verdicts(report).items() if verdict == "FAIL")


def reason(report: dict, check_id: str) -> str:
    """The reason the report gives for check `check_id` ('' when it has none)."""
    return next((c.get("reason", "") for c in report["checks"] if c["id"] == check_id), "")


def clean(out: Path, force: bool, outputs: Sequence[str]) -> bool:
    """Whether `out` may be written: it holds none of `outputs`, or --force removed them."""
    if out.exists() and any((out / o).exists() for o in outputs):
        if not force:
            print(f"run.py: {out} holds an earlier run's files; give --force to replace them",
                  file=sys.stderr)
            return False
        for o in outputs:
            old = out / o
            if old.is_dir():
                shutil.rmtree(old)
            elif old.exists():
                old.unlink()
    return True


def prepare_example(args, outputs: Sequence[str]) -> Union[int, Path]:
    """The start every example makes, from its arguments (--ncert, --out, --force): the ncert
    binary and an output folder clear of an earlier run's `outputs`. Returns the binary, or exit
    code 2 with the reason printed."""
    ncert = find_ncert(args.ncert)
    if ncert is None:
        print("run.py: no ncert binary (give --ncert, or set NCERT_BINARY)", file=sys.stderr)
        return 2
    if not clean(args.out, args.force, outputs):
        return 2
    return ncert


def prepare_ort_example(args, outputs: Sequence[str],
                        modules: Sequence[str] = ("h5py", "onnx")) -> Union[int, Tuple[Path, Path]]:
    """prepare_example, then what an ONNX Runtime example needs (--ort-package too): x86-64
    (where the kernels' orders were measured), the Python `modules`, node and the
    onnxruntime-node package, each missing one a skip (77). Returns that exit code, or
    (ncert, ort_package)."""
    ncert = prepare_example(args, outputs)
    if isinstance(ncert, int):
        return ncert
    if platform.machine() not in ("x86_64", "AMD64"):
        # Elsewhere ONNX Runtime runs other kernels (NEON, native f16 GEMMs on arm64): the
        # examples' READMEs measure x86-64's.
        return skip(f"these kernels are measured on x86-64, not {platform.machine()}")
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return skip(f"the {name} Python package is not installed (Debian: python3-{name}; tools/install-deps)")
    ort_package, why = find_ort_package(args.ort_package)
    if ort_package is None:
        return skip(why)
    return ncert, ort_package
