"""OpenBLAS through ctypes, the reduction orders read from its source, and a numpy emulation of
them (README.md says which file and function each order comes from).

OpenBLAS is always loaded by its own path, never through libblas.so.3: Debian's libblas.so.3 is
an alternative that may point to the reference BLAS or to OpenBLAS, and this example must not
depend on which. The emulation uses elementwise numpy only (no matmul, no dot): numpy's own BLAS
calls go through that alternative.
"""

from __future__ import annotations

import ctypes
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np

kMultiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
# Debian's libopenblas0-pthread (libopenblas0-openmp and -serial install the same soname beside).
kCandidates = tuple(f"/usr/lib/{kMultiarch}/openblas-{variant}/libopenblas.so.0"
                    for variant in ("pthread", "serial", "openmp"))

# CBLAS enums (cblas.h).
kRowMajor = 101
kNoTrans = 111
kTrans = 112

# The version whose kernels were read (OpenBLAS v0.3.21, Debian 12's 0.3.21+ds-4).
kReadVersion = "0.3.21"
# Cores of that version whose sgemv_n and sgemv_t kernels were read, and confirmed on an AVX-512
# Zen 5 machine (each core forced with OPENBLAS_CORETYPE): KERNEL.HASWELL and KERNEL.ZEN build
# sgemv_n_4.c / sgemv_t_4.c with the Haswell microkernels; KERNEL.SKYLAKEX (and KERNEL.COOPERLAKE,
# which includes it) build the same files, which add AVX-512 kernels only for K <= 48 (sgemv_n)
# and K <= 8 (sgemv_t), sizes this example does not use.
kReadCores = ("Haswell", "Zen", "SkylakeX", "Cooperlake")
# sdot.c includes sdot_microk_haswell-2.c for HASWELL and ZEN only (SKYLAKEX and COOPERLAKE take
# sdot_microk_skylakex-2.c, C intrinsics whose FMA contraction is the compiler's choice: not
# emulated here).
kSdotCores = ("Haswell", "Zen")
# sdot.c runs the microkernel over n & -32 terms and sums the rest in a double: K % 32 == 0.
kSdotBlock = 32
# sgemv_n_microk_haswell-4.c sgemv_kernel_4x8: 8 columns of A (8 terms of K) per call, the rows
# of y in blocks of 16 in its main loop; its prologue takes blocks of 4 and 8 rows with a
# different order (two accumulators, even and odd terms), and K % 8 columns go through the 4x4,
# 4x2 and 4x1 kernels. So the one order below holds when N % 16 == 0 and K % 8 == 0, and K > 48
# keeps SkylakeX off its small-K kernel (sgemv_kernel_n_128).
kPart = 8
kRowBlock = 16
kSkylakeSmallK = 48
kSkylakeSmallKT = 8  # sgemv_t_4.c: SkylakeX's sgemv_kernel_t for m (= K) <= 8
# sgemv_t_4.c and sgemv_n_4.c cut K into NBMAX = 4096 blocks; stay inside one.
kNbMax = 4096


@dataclass
class OpenBlas:
    path: str
    lib: ctypes.CDLL
    core: str
    config: str
    version: str

    def sgemv_rowmajor(self, trans: int, rows: int, cols: int, a: np.ndarray, x: np.ndarray) -> np.ndarray:
        """y = op(A)·x for a row-major f32 A [rows, cols], alpha 1, beta 0."""
        assert a.dtype == np.float32 and x.dtype == np.float32 and a.flags.c_contiguous
        out_len = rows if trans == kNoTrans else cols
        y = np.zeros(out_len, np.float32)
        xs = np.ascontiguousarray(x)
        f = ctypes.POINTER(ctypes.c_float)
        self.lib.cblas_sgemv(kRowMajor, trans, rows, cols, ctypes.c_float(1.0),
                             a.ctypes.data_as(f), cols, xs.ctypes.data_as(f), 1, ctypes.c_float(0.0),
                             y.ctypes.data_as(f), 1)
        return y

    def gemv_kn(self, w_kn: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The decode GEMV over weights stored K-major, W^T [K, N] (row-major, transposed):
        cblas_sgemv(RowMajor, Trans) is column-major NoTrans on an N x K matrix: sgemv_n."""
        k, n = w_kn.shape
        return self.sgemv_rowmajor(kTrans, k, n, w_kn, x)

    def gemv_nk(self, w_nk: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The decode GEMV over weights stored N-major, W [N, K]: cblas_sgemv(RowMajor, NoTrans)
        is column-major Trans on a K x N matrix: sgemv_t."""
        n, k = w_nk.shape
        return self.sgemv_rowmajor(kNoTrans, n, k, w_nk, x)

    def sdot(self, a: np.ndarray, b: np.ndarray) -> np.float32:
        assert a.dtype == np.float32 and b.dtype == np.float32 and a.shape == b.shape
        f = ctypes.POINTER(ctypes.c_float)
        aa, bb = np.ascontiguousarray(a), np.ascontiguousarray(b)
        return np.float32(self.lib.cblas_sdot(a.shape[0], aa.ctypes.data_as(f), 1, bb.ctypes.data_as(f), 1))


def load(explicit: Optional[str] = None) -> "OpenBlas | str":
    """OpenBLAS single-threaded, or the reason it could not be loaded."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when the library loads
    paths = [explicit] if explicit else list(kCandidates)
    tried = []
    for path in paths:
        if not Path(path).is_file():
            tried.append(f"{path} (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
            f = ctypes.POINTER(ctypes.c_float)
            lib.cblas_sgemv.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_float, f, ctypes.c_int, f, ctypes.c_int,
                                        ctypes.c_float, f, ctypes.c_int]
            lib.cblas_sgemv.restype = None
            lib.cblas_sdot.argtypes = [ctypes.c_int, f, ctypes.c_int, f, ctypes.c_int]
            lib.cblas_sdot.restype = ctypes.c_float
        except (OSError, AttributeError) as e:
            tried.append(f"{path} ({e})")
            continue
        lib.openblas_set_num_threads(1)
        core = lib.openblas_get_corename().decode()
        config = lib.openblas_get_config().decode()
        words = config.split()
        version = words[1] if len(words) > 1 and words[0] == "OpenBLAS" else "unknown"
        return OpenBlas(path, lib, core, config, version)
    return "OpenBLAS not loadable: tried " + "; ".join(tried) + \
        " (Debian: apt-get install libopenblas0-pthread)"


def gemv_kn_walk(ob: OpenBlas, k: int, n: int) -> "tuple[Optional[str], str]":
    """(k_walk, why): the declaration for gemv_kn on this library and core, or None and why not."""
    if ob.version != kReadVersion:
        return None, (f"OpenBLAS {ob.version}: only {kReadVersion}'s kernels were read; "
                      "its sgemv_n order is not known here")
    if ob.core not in kReadCores:
        return None, (f"core {ob.core}: only {', '.join(kReadCores)} were read; "
                      "its sgemv_n kernel is not known here")
    if k % kPart or n % kRowBlock or k <= kSkylakeSmallK or k > kNbMax:
        return None, (f"K = {k}, N = {n}: the one order holds for K % {kPart} == 0, "
                      f"{kSkylakeSmallK} < K <= {kNbMax}, N % {kRowBlock} == 0")
    return f"splitk:{k // kPart}:seq/seq-fma", "sgemv_n_microk_haswell-4.c sgemv_kernel_4x8"


def head2_walk(ob: OpenBlas, k: int) -> "tuple[Optional[str], str]":
    """(k_walk, why) for gemv_nk with N = 2: every column through sgemv_t_4.c's SSE
    sgemv_kernel_4x2 (it takes the n & 2 columns; N = 2 has no others)."""
    if ob.version != kReadVersion or ob.core not in kReadCores:
        return None, f"OpenBLAS {ob.version} core {ob.core}: not among the versions and cores read"
    if k % 4 or k <= kSkylakeSmallKT or k > kNbMax:
        return None, f"K = {k}: the one order holds for K % 4 == 0, {kSkylakeSmallKT} < K <= {kNbMax}"
    return "lanes:4:pairs", "sgemv_t_4.c sgemv_kernel_4x2"


# --- numpy emulation (f32 values in, f32 out, every rounding explicit) ---------------------------


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fl32(a·b + c) with one rounding, elementwise. a·b is exact in f64 (24 + 24 bits); the sum
    is rounded to odd in f64 (53 >= 24 + 2 bits), so rounding that to f32 rounds once."""
    p = a.astype(np.float64) * b.astype(np.float64)
    cc = c.astype(np.float64)
    s = p + cc
    bp = s - cc
    err = (p - bp) + (cc - (s - bp))  # TwoSum: p + c == s + err exactly
    odd = (s.view(np.int64) & 1) == 1
    bump = (err != 0) & ~odd
    s = np.where(bump, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def add32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.add(a, b, dtype=np.float32)


def emulate_gemv_kn(x: np.ndarray, w_nk: np.ndarray, drop_part: Optional[int] = None,
                    drop_cols: Optional[np.ndarray] = None) -> np.ndarray:
    """sgemv_kernel_4x8's order for every row of x [M, K] against W [N, K]: per block of 8 terms
    t = 0; t = fma(x_k, w_k, t) in k order; then y = fma(alpha = 1, t, y) = fl32(y + t), blocks in
    order (k_walk splitk:<K/8>:seq/seq-fma). With `drop_part` j, block j's t is left out of the
    sum for the columns `drop_cols` (a planted fault)."""
    m, k = x.shape
    n = w_nk.shape[0]
    xb = x[:, None, :]  # [M, 1, K]
    wb = w_nk[None, :, :]  # [1, N, K]
    y: Optional[np.ndarray] = None
    for j in range(k // kPart):
        t = np.zeros((m, n), np.float32)
        for kk in range(j * kPart, (j + 1) * kPart):
            t = fma32(np.broadcast_to(xb[:, :, kk], (m, n)), np.broadcast_to(wb[:, :, kk], (m, n)), t)
        if j == drop_part and drop_cols is not None:
            t[:, drop_cols] = 0  # adding +0 to the running sum is exact: the part is left out
        y = t if y is None else add32(y, t)
    assert y is not None
    return y


def _tree(v: List[np.ndarray], tree: str) -> np.ndarray:
    """The L lane sums v reduced to one f32 by `tree`: "seq", "halving" and "pairs" as in
    dump-format §3.4; "fold-hadd" (8 lanes: vextractf128 + vaddps, then vhaddps twice) and
    "sdot-haswell" (32 lanes: fold each ymm, add the four vectors as (a0 + a1) + (a2 + a3), then
    vhaddps twice), the two OpenBLAS trees that fit no §3.4 form."""
    if tree == "seq":
        t = v[0]
        for lane in v[1:]:
            t = add32(t, lane)
        return t
    if tree == "halving":
        width = len(v)
        while width > 1:
            width //= 2
            v = [add32(v[i], v[i + width]) for i in range(width)]
        return v[0]
    if tree == "pairs":
        while len(v) > 1:
            v = [add32(v[2 * i], v[2 * i + 1]) for i in range(len(v) // 2)]
        return v[0]
    if tree == "fold-hadd" and len(v) == 8:
        u = [add32(v[i], v[i + 4]) for i in range(4)]
        return add32(add32(u[0], u[1]), add32(u[2], u[3]))
    if tree == "sdot-haswell" and len(v) == kSdotBlock:
        f = [[add32(v[8 * j + i], v[8 * j + i + 4]) for i in range(4)] for j in range(4)]
        s = [add32(add32(f[0][i], f[1][i]), add32(f[2][i], f[3][i])) for i in range(4)]
        return add32(add32(s[0], s[1]), add32(s[2], s[3]))
    raise ValueError(f"tree {tree} over {len(v)} lanes")


def emulate_lanes(x: np.ndarray, w_nk: np.ndarray, lanes: int, tree: str, fma: bool,
                  drop_lane: Optional[int] = None, drop_cols: Optional[np.ndarray] = None) -> np.ndarray:
    """Every row of x [M, K] against every row of W [N, K]: term k into lane k mod `lanes`, each
    lane from 0 in k order (`fma`: fma(x_k, w_k, lane); else fl32(lane + fl32(x_k·w_k))), then
    the lanes reduced by `tree`. With `drop_lane` l, lane l's sum is left out of the reduction
    (replaced by +0, which every tree adds exactly) for the columns `drop_cols` (a planted
    fault)."""
    m, k = x.shape
    n = w_nk.shape[0]
    v = [np.zeros((m, n), np.float32) for _ in range(lanes)]
    for kk in range(k):
        a = np.broadcast_to(x[:, None, kk], (m, n))
        b = np.broadcast_to(w_nk[None, :, kk], (m, n))
        lane = kk % lanes
        v[lane] = fma32(a, b, v[lane]) if fma else add32(v[lane], np.multiply(a, b, dtype=np.float32))
    if drop_lane is not None and drop_cols is not None:
        v[drop_lane] = v[drop_lane].copy()
        v[drop_lane][:, drop_cols] = 0
    return _tree(v, tree)


def emulate_gemv_nk(x: np.ndarray, w_nk: np.ndarray, tree: str = "fold-hadd") -> np.ndarray:
    """sgemv_t_microk_haswell-4.c sgemv_kernel_4x4 (K % 8 == 0, N % 4 == 0): each output column
    one ymm of 8 f32 lanes, term k into lane k mod 8 by vfmadd231ps in k order; then
    vextractf128 + vaddps folds lane i + 4 onto lane i (u_i = v_i + v_{i+4}) and two vhaddps add
    adjacent pairs: (u_0 + u_1) + (u_2 + u_3). `tree` "halving" and "pairs" give the orders of
    dump-format §3.4 for comparison."""
    return emulate_lanes(x, w_nk, 8, tree, fma=True)


def emulate_sdot(x: np.ndarray, w_nk: np.ndarray, tree: str = "sdot-haswell") -> np.ndarray:
    """sdot_microk_haswell-2.c sdot_kernel_16 for every row of x [M, K] against every row of W
    (K % 32 == 0): four ymm accumulators of 8 lanes, term k into lane k mod 32 by vfmadd231ps in
    k order, reduced by the "sdot-haswell" tree."""
    return emulate_lanes(x, w_nk, kSdotBlock, tree, fma=True)


def emulate_head2(x: np.ndarray, w_nk: np.ndarray, tree: str = "pairs", fma: bool = False,
                  drop_lane: Optional[int] = None, drop_cols: Optional[np.ndarray] = None) -> np.ndarray:
    """sgemv_t_4.c sgemv_kernel_4x2 (N = 2, K % 4 == 0): per column one xmm of 4 lanes, term k
    into lane k mod 4 by mulps then addps (no FMA), then vhaddps twice: (v_0 + v_1) + (v_2 + v_3),
    k_walk lanes:4:pairs."""
    return emulate_lanes(x, w_nk, 4, tree, fma, drop_lane, drop_cols)
