"""Runs each case's real kernel on both paths and writes its dump.

The kernels come from the other examples, imported (reuse.py): ONNX Runtime's MatMul models
from examples/half_gemm/kernels.py, MatMulNBits models, their runner, their AF4 segment and
MLAS' activation quantization from examples/ort_matmulnbits, OpenBLAS from
examples/openblas_gemv/openblas.py, torch's bf16 linear from examples/half_gemm/kernels.py,
the gather and scatter of the packed path from examples/half_gemm/data.py; dumps are written
with python/ncert_dump.

Both paths as an engine that packs rows runs them: `y_unpacked` is the kernel on all M rows,
`y_compact` the same kernel on the compact buffer S·X (a slot's row, zeros in an empty slot),
scattered over `y_before` (what an earlier step left in the output buffer) into `y_packed`.
Kernels that are called one row at a time (MatMulNBits decode, OpenBLAS) run each used slot's
row on its own call.

A declaration mistake (cases.Mistake) runs the kernel otherwise than its dump declares: fed other
inputs (`fed_inputs`), OpenBLAS under another rounding mode (`OpenBlasRows.run`), ATen's own bf16
GEMM (`torch_run`), its outputs truncated (`epilogue`); or it writes attributes the kernel does
not match (`write_dump`'s `declare`).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import h5py
import numpy as np
from ncert_dump import (DumpWriter, Segment, bf16_from_f32, bf16_truncate, f16_from_f32,
                        f32_from_bf16)
from ncert_dump.codecs import f16_truncate

from cases import Case
from reuse import example_module

hg_data = example_module("half_gemm", "data")
hg_kernels = example_module("half_gemm", "kernels")
mnb_export = example_module("ort_matmulnbits", "export")
mnb_model = mnb_export.model  # the module export.py itself uses (its `import model`)
ob_mod = example_module("openblas_gemv", "openblas")

kDevice = f"cpu ({platform.machine()})"
# The truncated columns of a truncate-columns fault: column 5, then every column_step-th.
kFirstTruncated = 5
# A segment's attributes (docs/dump-format.md §4); `declare` writes any other on the projection.
kSegmentAttributes = ("format", "group_size", "variant", "packing", "zero_point_packing", "dequant",
                      "dequant_op")
# <fenv.h> on x86-64 glibc: fesetround sets the x87 and the SSE (MXCSR) rounding of the thread.
kFeToNearest, kFeTowardZero = 0x000, 0xC00


@dataclass
class Inputs:
    """One case's x and weights: as the dump declares them, and as the kernel takes them."""

    x: np.ndarray  # [M, K] declared: float32, bf16 patterns (uint16) or float16
    x32: np.ndarray  # the same values in f32 (what an f32 kernel is fed)
    w: Any  # [N, K] declared values (as x), or the MatMulNBits QuantWeights
    w32: Optional[np.ndarray]  # the weights' f32 values (None for 4-bit weights)


def _declared(values: np.ndarray, dtype: str) -> np.ndarray:
    """f64 values rounded to nearest even into `dtype`, stored as the dump stores that type."""
    if dtype == "f32":
        return values.astype(np.float32)
    if dtype == "bf16":
        return bf16_from_f32(values.astype(np.float32))  # via f32: the draw is not certified
    if dtype == "f16":
        return values.astype(np.float16)
    raise ValueError(f"type {dtype!r}")


def _as_f32(declared: np.ndarray, dtype: str) -> np.ndarray:
    return f32_from_bf16(declared) if dtype == "bf16" else declared.astype(np.float32)


def inputs(case: Case) -> Inputs:
    """x ~ N(0, 1) with each row scaled by 2^-2 .. 2^2 (and in some cases a few 16x outlier
    channels); W ~ N(0, 1/K) with each row scaled by 2^-1 .. 2^1, or MatMulNBits' 4-bit weights
    (ort_matmulnbits/model.py: random_weights, its min/max block quantizer)."""
    rng = np.random.default_rng(case.seed)
    m, k, n = case.m, case.k, case.n
    x = rng.standard_normal((m, k)) * np.exp2(rng.integers(-2, 3, size=(m, 1)))
    if case.outlier_channels:
        x[:, rng.choice(k, size=max(1, k // 256), replace=False)] *= 16
    xd = _declared(x, case.x_dtype)
    if case.w_format == "af4-zp":
        q = mnb_model.random_weights(n, k, case.block, seed=case.seed)
        return Inputs(xd, _as_f32(xd, case.x_dtype), q, None)
    w = rng.standard_normal((n, k)) / np.sqrt(k) * np.exp2(rng.integers(-1, 2, size=(n, 1)))
    wd = _declared(w, case.w_format)
    return Inputs(xd, _as_f32(xd, case.x_dtype), wd, _as_f32(wd, case.w_format))


@dataclass
class KernelRun:
    """The kernel's values on both paths: f32, or the output type itself (`native`: ORT's f16
    Cast, oneDNN's bf16) when the kernel writes it."""

    y_unpacked: np.ndarray  # [M, N]
    y_compact: np.ndarray  # [P, N]
    native: bool = False


def epilogue(y32: np.ndarray, out: str, truncated: Optional[slice] = None) -> np.ndarray:
    """An engine's output conversion of f32 kernel values: round to nearest even into bf16 or
    f16 (bf16 as uint16 patterns, f16 as float16). `truncated`: the columns truncated toward
    zero instead (a planted fault's few, or a mistake's every one)."""
    if out == "f32":
        return y32.astype(np.float32)
    if out == "bf16":
        y = bf16_from_f32(y32)
        if truncated is not None:
            y[:, truncated] = bf16_truncate(y32[:, truncated])
        return y
    if out == "f16":
        y = f16_from_f32(y32)
        if truncated is not None:
            y[:, truncated] = f16_truncate(y32[:, truncated])
        return y.view(np.float16)
    raise ValueError(f"output type {out!r}")


def fault_columns(step: int) -> slice:
    """A truncate-columns fault's columns: 5, 5 + step, ..."""
    return slice(kFirstTruncated, None, step)


def fed_inputs(data: Inputs, fed: str) -> Inputs:
    """What a mistake's kernel is fed in place of the dump's inputs: x rounded to nearest even
    into bf16 or f16 (the dump keeps the f32 values), or the transpose of a square W."""
    if not fed:
        return data
    if fed == "x-bf16":
        return dataclasses.replace(data, x32=f32_from_bf16(bf16_from_f32(data.x32)))
    if fed == "x-f16":
        return dataclasses.replace(data, x32=data.x32.astype(np.float16).astype(np.float32))
    if fed == "w-transposed":
        assert data.w32 is not None and data.w32.shape[0] == data.w32.shape[1], "a square W"
        return dataclasses.replace(data, w=np.ascontiguousarray(data.w.T), w32=np.ascontiguousarray(data.w32.T))
    raise ValueError(f"fed {fed!r}")


@contextlib.contextmanager
def rounding_mode(mode: int) -> Iterator[None]:
    """The calling thread's floating-point rounding (MXCSR and x87) set to `mode` for the block:
    OpenBLAS called in it (one thread: the caller's) rounds every operation so."""
    libm = ctypes.CDLL("libm.so.6")
    if libm.fesetround(mode) != 0:
        raise OSError(f"fesetround({mode:#x}) failed")
    try:
        yield
    finally:
        libm.fesetround(kFeToNearest)


def fault_group(n: int, groups: int) -> Tuple[int, int]:
    """(column, group) whose scale a group-scale fault changes, of N columns of `groups` groups
    each: a column a third of the way in, the middle group of K."""
    return n // 3, groups // 2


def scaled(q, factor: float):
    """The QuantWeights with one group's scale times `factor` (the engine's model, not the
    dump's: the planted fault)."""
    col, group = fault_group(q.n, q.groups)
    scales = q.scales.copy()
    scales[col * q.groups + group] = np.float32(scales[col * q.groups + group] * np.float32(factor))
    return dataclasses.replace(q, scales=scales)


class OrtBatch:
    """ONNX Runtime cases run together: their models are built, every call is queued, then one
    node process per runner runs them all (examples/half_gemm/run_ort.js for f16 inputs,
    examples/ort_matmulnbits/run_ort.js for f32 inputs)."""

    def __init__(self, work: Path, ort_package: Path):
        self.work = work
        (work / "f32").mkdir(parents=True, exist_ok=True)
        (work / "f16").mkdir(parents=True, exist_ok=True)
        self.f32 = mnb_export.OrtRunner(work / "f32", ort_package)
        self.f16 = hg_kernels.OrtRunner(work / "f16", ort_package)
        self.version = ""

    def _rows(self, model: Path, x: np.ndarray, used: np.ndarray, one_row: bool) -> Callable[[int], np.ndarray]:
        """Queues model(x): one call, or one call per used row (zeros for the others)."""
        if not one_row:
            i = self.f32.add(model, x)
            return lambda n: self.f32.y(i, n)
        calls = {r: self.f32.add(model, x[r:r + 1]) for r in np.flatnonzero(used)}

        def rows(n: int) -> np.ndarray:
            y = np.zeros((x.shape[0], n), np.float32)
            for r, i in calls.items():
                y[r] = self.f32.y(i, n)[0]
            return y
        return rows

    def plan(self, case: Case, data: Inputs, tag: str) -> Callable[[], KernelRun]:
        """Queues the case's calls on both paths, the kernel fed `data` (the dump's inputs, or
        what a planted fault's or a mistake's engine holds instead); returns what reads them
        after run()."""
        sel = case.packing.selector_array
        everything = np.ones(case.m, bool)
        n = case.n
        model = self.work / f"{case.name}-{tag}.onnx"
        if case.family == "ort-sgemm":
            hg_kernels.build_matmul_model(model, data.w32, "f32", input_dtype="f32")
        elif case.family == "ort-f16":
            hg_kernels.build_matmul_model(model, data.w, "f16" if case.out == "f16" else "f32")
            out_type = np.float16 if case.out == "f16" else np.float32
            u = self.f16.plan(model, data.x, out_type)
            c = self.f16.plan(model, hg_data.gather(data.x, sel), out_type)
            return lambda: KernelRun(self.f16.result(u, n), self.f16.result(c, n), native=case.out == "f16")
        else:  # MatMulNBits: level 4 for int8 activations
            model.write_bytes(mnb_model.build_model(data.w, accuracy_level=4 if case.family == "ort-w4a8" else 0))
        one_row = case.kernel == "decode"
        unpacked = self._rows(model, data.x32, everything, one_row)
        compact = self._rows(model, hg_data.gather(data.x32, sel), sel >= 0, one_row)
        return lambda: KernelRun(unpacked(n), compact(n))

    def run(self) -> str:
        if self.f32.calls:
            self.f32.run()
            self.version = self.f32.version or ""
        if self.f16.calls:
            self.version = self.f16.run()
        return self.version

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


class OpenBlasRows:
    """OpenBLAS (single-threaded), one row a call: cblas_sgemv over weights stored K-major
    (sgemv_n) or N-major (sgemv_t), and cblas_sgemm with M = 1.

    sgemm runs one row a call because OpenBLAS's sgemm rounds a row differently with the number
    of rows in the call: `batch_variance` measures it; an engine batching its packed rows
    through it would FAIL identity, which is that check's job, not this sweep's."""

    def __init__(self, ob):
        self.ob = ob
        f = ctypes.POINTER(ctypes.c_float)
        ob.lib.cblas_sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, f, ctypes.c_int, f, ctypes.c_int,
                                                            ctypes.c_float, f, ctypes.c_int]
        ob.lib.cblas_sgemm.restype = None

    def sgemm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Y = X·Wᵀ for row-major f32 X [M, K] and W [N, K]: cblas_sgemm(RowMajor, NoTrans, Trans)."""
        m, k = x.shape
        n = w.shape[0]
        xs, ws = np.ascontiguousarray(x, np.float32), np.ascontiguousarray(w, np.float32)
        y = np.zeros((m, n), np.float32)
        f = ctypes.POINTER(ctypes.c_float)
        self.ob.lib.cblas_sgemm(ob_mod.kRowMajor, ob_mod.kNoTrans, ob_mod.kTrans, m, n, k, ctypes.c_float(1.0),
                                xs.ctypes.data_as(f), k, ws.ctypes.data_as(f), k, ctypes.c_float(0.0),
                                y.ctypes.data_as(f), n)
        return y

    def batch_variance(self, seed: int) -> str:
        """How many of 8 rows' outputs change when sgemm runs them among 16 rows rather than
        as an 8-row call (K = 1024, N = 512)."""
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((16, 1024)).astype(np.float32)
        w = (rng.standard_normal((512, 1024)) / 32).astype(np.float32)
        rows = rng.permutation(16)[:8]
        whole, part = self.sgemm(x, w)[rows], self.sgemm(x[rows], w)
        differ = int(np.count_nonzero(whole.view(np.uint32) != part.view(np.uint32)))
        return (f"OpenBLAS sgemm: 8 rows run among 16 and on their own differ in {differ} of "
                f"{part.size} outputs (K = 1024, N = 512): the sweep calls it one row at a time")

    def run(self, case: Case, data: Inputs, rounding: int = kFeToNearest) -> KernelRun:
        """Both paths, one row a call, every operation rounded as `rounding` says (a mistake's
        kFeTowardZero: the accumulator the dump does not declare)."""
        assert data.w32 is not None
        w = data.w32
        if case.kernel == "sgemv_n":
            w_kn = np.ascontiguousarray(w.T)  # the engine stores Wᵀ [K, N]

            def row(v: np.ndarray) -> np.ndarray:
                return self.ob.gemv_kn(w_kn, v)
        elif case.kernel == "sgemv_t":
            def row(v: np.ndarray) -> np.ndarray:
                return self.ob.gemv_nk(w, v)
        else:
            def row(v: np.ndarray) -> np.ndarray:
                return self.sgemm(v[None, :], w)[0]
        sel = case.packing.selector_array
        compact_x = hg_data.gather(data.x32, sel)
        y_compact = np.zeros((sel.size, case.n), np.float32)
        x_rows = [np.ascontiguousarray(v) for v in data.x32]
        compact = {int(p): np.ascontiguousarray(compact_x[p]) for p in np.flatnonzero(sel >= 0)}
        with rounding_mode(rounding):  # only OpenBLAS computes in here
            y_rows = [row(v) for v in x_rows]
            for p, v in compact.items():
                y_compact[p] = row(v)
        return KernelRun(np.stack(y_rows), y_compact)

    def k_walk(self, case: Case) -> Optional[str]:
        """sgemv_n's order where examples/openblas_gemv read and confirmed it (that library
        version and core, K % 8 == 0, 48 < K <= 4096, N % 16 == 0); none otherwise."""
        if case.kernel != "sgemv_n":
            return None
        walk, _ = ob_mod.gemv_kn_walk(self.ob, case.k, case.n)
        return walk


def aten_bf16_mm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """torch.mm(X, Wᵀ) on bf16 CPU tensors with oneDNN off, Wᵀ stored [K, N] as a GEMM's B:
    ATen's own GEMM, whose loop for an untransposed B adds every product into the bf16 output
    (torch 1.13: a bf16 accumulator). Patterns in and out as torch_bf16_linear's."""
    import torch

    xt = torch.from_numpy(x.astype(np.int16)).view(torch.bfloat16)
    wt = torch.from_numpy(np.ascontiguousarray(w.T).astype(np.int16)).view(torch.bfloat16)
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=False):
        y = torch.mm(xt, wt)
    return y.contiguous().view(torch.int16).numpy().astype(np.uint16)


def torch_run(case: Case, data: Inputs, onednn: bool = True) -> KernelRun:
    """torch.nn.functional.linear on bf16 (oneDNN), on all M rows and on the compact buffer;
    `onednn` False: ATen's own bf16 GEMM (aten_bf16_mm), a mistake's kernel."""
    sel = case.packing.selector_array
    kernel = hg_kernels.torch_bf16_linear if onednn else aten_bf16_mm
    return KernelRun(kernel(data.x, data.w), kernel(hg_data.gather(data.x, sel), data.w), native=True)


def _same_type(values: np.ndarray, out: str) -> np.ndarray:
    """Values for y_before: what an earlier step wrote, in the output type."""
    return epilogue(values.astype(np.float32), out)


def write_dump(path: Path, case: Case, data: Inputs, run: KernelRun, *, engine: str, build: str,
               k_walk: Optional[str] = None, truncated: Optional[slice] = None,
               declare: Sequence[Tuple[str, Union[str, int]]] = ()) -> None:
    """One projection "linear": x, the weights as the model holds them, the packing geometry
    and both paths' outputs in the case's output type. `declare`: attributes then written
    over the exporter's (a mistake's), with h5py: ncert_dump refuses some of them (a
    group_size the scales do not fit), as an exporter of its own would not."""
    p = case.packing
    used = p.used
    if run.native:
        y_unpacked, y_compact = run.y_unpacked, run.y_compact.copy()
    else:
        y_unpacked = epilogue(run.y_unpacked, case.out, truncated)
        y_compact = epilogue(run.y_compact, case.out, truncated)
    y_compact[~used] = 0  # an empty slot's row is never compared; zeros, as its input
    rng = np.random.default_rng([case.seed, 1])
    y_before = _same_type(rng.standard_normal((case.m, case.n)), case.out)
    y_packed = hg_data.scatter(y_before, y_compact, p.selector_array)
    extra: Dict[str, Any] = {}
    if case.w_format == "af4-zp":
        seg = mnb_export.segment(data.w)
        if case.family == "ort-w4a8":
            # Level 4 multiplies integer codes and applies the scales to whole blocks: the
            # weights are exact (docs/dump-format.md §3.6), the activations its int8 codes.
            seg.dequant, seg.dequant_op = "exact", None
            codes, scales = mnb_export.quantize_activations(data.x32, case.block)
            extra = dict(x_quant="int8", x_quant_group=case.block, x_quant_rounding="rne",
                         x_quantized=codes, x_scales=scales)
    else:
        seg = Segment(case.w_format, 0, case.n, values=data.w)
    rounding = None if case.out == "f32" else "rne"
    with DumpWriter(str(path), engine=engine, build=build, device=kDevice, overwrite=True,
                    model=f"linear {case.m}x{case.k} by {case.n}x{case.k}") as dw:
        dw.add_projection("linear", x=data.x, x_dtype=case.x_dtype, weights=[seg],
                          accumulator="f32-rn", output_dtype=case.out, output_rounding=rounding,
                          epilogue="none", k_walk=k_walk, selector=p.selector_array,
                          commit_counts=np.asarray(p.commit_counts, np.int32), requests=p.requests,
                          block_rows=p.block_rows, cap=p.cap, y_unpacked=y_unpacked,
                          y_packed=y_packed, y_compact=y_compact, y_before=y_before, **extra)
    if declare:
        with h5py.File(path, "r+") as f:
            projection = f["projections/linear"]
            for attr, value in declare:
                where = [projection["weight"][s] for s in projection["weight"]] \
                    if attr in kSegmentAttributes else [projection]
                for node in where:
                    node.attrs.modify(attr, value)  # keeps the attribute's stored type


def engine_name(case: Case) -> str:
    return {"ort-sgemm": "onnxruntime-node", "ort-f16": "onnxruntime-node",
            "ort-nbits": "onnxruntime-node", "ort-w4a8": "onnxruntime-node",
            "openblas": "OpenBLAS (ctypes)", "torch-bf16": "pytorch"}[case.family]


def kernel_text(case: Case, run: str = "") -> str:
    """The kernel, shortly, as the mistakes' table names it; `run` as build_name's."""
    if run == "no-onednn":
        return "torch.mm bf16, oneDNN off (ATen's GEMM)"
    if run == "rz":
        return f"OpenBLAS {case.kernel}, MXCSR toward zero"
    w = f"{case.w_format} W" if case.w_format != "af4-zp" else f"4-bit W, blocks of {case.block}"
    what = {"ort-sgemm": "ORT MatMul f32 (MLAS SGEMM)", "ort-f16": "ORT float16 MatMul",
            "ort-nbits": f"ORT MatMulNBits {case.kernel}", "ort-w4a8": "ORT MatMulNBits level 4",
            "openblas": f"OpenBLAS {case.kernel}", "torch-bf16": "torch linear bf16 (oneDNN)"}[case.family]
    return f"{what}, {case.x_dtype} x, {w}, {case.out} out"


def build_name(case: Case, versions: Dict[str, str], run: str = "") -> str:
    """The build the dump names; `run`: a mistake's other kernel ("rz", "no-onednn")."""
    ort = f"onnxruntime {versions.get('ort', '?')} CPU EP, one intra-op thread"
    if run == "no-onednn":
        return f"torch {versions.get('torch', '?')}, torch.mm bf16 with oneDNN off (ATen's own GEMM)"
    if run == "rz":
        return (f"OpenBLAS {versions.get('openblas', '?')}, cblas_sgemv ({case.kernel}), one thread, "
                f"MXCSR rounding toward zero")
    return {"ort-sgemm": f"{ort}, MatMul f32 (MLAS SGEMM)",
            "ort-f16": f"{ort}, float16 MatMul (Cast, MLAS SGEMM{', Cast' if case.out == 'f16' else ''})",
            "ort-nbits": f"{ort}, MatMulNBits bits=4 block_size={case.block} accuracy_level=0 ({case.kernel})",
            "ort-w4a8": f"{ort}, MatMulNBits bits=4 block_size={case.block} accuracy_level=4",
            "openblas": f"OpenBLAS {versions.get('openblas', '?')}, "
                        f"cblas_{'sgemm' if case.kernel == 'sgemm' else 'sgemv'} ({case.kernel}), one thread",
            "torch-bf16": f"torch {versions.get('torch', '?')}, torch.nn.functional.linear bf16 (oneDNN)",
            }[case.family]
