"""The sweep's table: which real kernel runs on which shape, seed, packing, weight format and
output type. Every case is drawn from one seed (kSeed), so a run is reproducible and a case
is named by its family and index ("ort-sgemm-017").

Families, their kernels and their variants (x type / weight format / output type):

- ort-sgemm: ONNX Runtime's MatMul on f32 (MLAS SGEMM): f32/f32/f32, f32/f32/bf16,
  bf16/bf16/bf16, bf16/bf16/f32, f32/f16/f16, f32/bf16/bf16.
- ort-f16: ONNX Runtime's float16 MatMul (Cast, MLAS SGEMM, Cast): f16/f16/f16 (ORT's own
  Cast), f16/f16/f32 (the graph without its last Cast), f16/f16/bf16.
- ort-nbits: MatMulNBits, 4-bit blocks of 16 to 256 with zero points, f32 activations:
  prefill (M > 1: dequantize + SGEMM, k_walk seq-fma) and decode (M = 1 calls, the one-row
  kernel), f32 or bf16 x, f32 or bf16 out.
- ort-w4a8: MatMulNBits accuracy_level 4 (int8 activations, blocks of 32 to 128): f32 x with
  its int8 codes (x_quant), f32 or bf16 out.
- openblas: cblas_sgemv over weights stored K-major (sgemv_n, k_walk where read) or N-major
  (sgemv_t), and cblas_sgemm, one row a call: f32/f32/f32, f32/f32/bf16, bf16/bf16/bf16,
  f32/f16/f16.
- torch-bf16: torch.nn.functional.linear on bf16 (oneDNN): bf16/bf16/bf16, oneDNN's own
  rounding.

A bf16 or f16 output of an f32 kernel is what an engine's epilogue writes: the kernel's f32
value rounded to nearest even (the dump declares output_rounding = rne).

Then faults planted in the engine runs of a few cases (kFaults), and declaration mistakes made on
the runs of others (kMistakes): the dump says one thing the kernel did not do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

import numpy as np

kSeed = 20261203

# K and N as LLM projections have them, from a small head (N = 64) to an MLP's width; K·N is
# capped at 8 Mi weights (5120 x 1536, 2048 x 4096): the whole sweep then writes 0.6 GiB of dumps
# and checks them in about a minute on 2 cores (README.md).
kKs = (256, 384, 512, 768, 1024, 1536, 2048, 2560, 3072, 4096, 5120)
kNs = (64, 96, 160, 256, 320, 512, 640, 1024, 1536, 2048, 3072, 4096)
kMaxWeights = 8 * 1024 * 1024
kMs = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32)
# ncert's packing model: at most 8 requests, cap <= min(4, block_rows) (geometry guard 315).
kMaxRequests = 8
kMaxCap = 4


@dataclass(frozen=True)
class Packing:
    """The packed path's geometry (docs/dump-format.md §3.2): M = requests x block_rows rows;
    request r gathers its first commit_counts[r] rows; slot p holds row selector[p] (-1 empty)."""

    requests: int
    block_rows: int
    cap: int
    commit_counts: Tuple[int, ...]
    selector: Tuple[int, ...]

    @property
    def rows(self) -> int:
        return self.requests * self.block_rows

    @property
    def slots(self) -> int:
        return len(self.selector)

    @property
    def selector_array(self) -> np.ndarray:
        return np.asarray(self.selector, dtype=np.int32)

    @property
    def used(self) -> np.ndarray:
        return self.selector_array >= 0


@dataclass(frozen=True)
class Case:
    family: str
    kernel: str  # which entry point of the family: "matmul", "prefill", "decode", "sgemv_n", ...
    index: int
    seed: int
    k: int
    n: int
    x_dtype: str  # f32 | bf16 | f16
    w_format: str  # f32 | bf16 | f16 | af4-zp
    out: str  # f32 | bf16 | f16
    packing: Packing
    block: int = 0  # MatMulNBits block size (4-bit groups along K)
    outlier_channels: bool = False  # a few x columns 16x larger, as LLM activations have

    @property
    def name(self) -> str:
        return f"{self.family}-{self.index:03d}"

    @property
    def m(self) -> int:
        return self.packing.rows

    def describe(self) -> str:
        w = f"af4-zp/{self.block}" if self.w_format == "af4-zp" else self.w_format
        p = self.packing
        return (f"{self.kernel} K={self.k} N={self.n} M={self.m} ({p.requests}x{p.block_rows}, "
                f"{int(p.used.sum())} rows in {p.slots} slots) x {self.x_dtype} w {w} out "
                f"{self.out} seed {self.seed}")


def draw_packing(rng: np.random.Generator, m: int, *, min_slots: int = 1,
                 even_slots: bool = False) -> Packing:
    """A scheduler's step: M rows as R requests of B rows (R <= 8), each gathering a prefix of
    at most cap rows, the requests in a random order, an empty slot after about one in four."""
    splits = [(r, m // r) for r in range(1, kMaxRequests + 1) if m % r == 0]
    requests, block_rows = splits[int(rng.integers(len(splits)))]
    cap = int(rng.integers(1, min(kMaxCap, block_rows) + 1))
    # Most requests feed rows this step, about one in five none (finished, or waiting).
    counts = rng.integers(1, cap + 1, size=requests) * (rng.random(requests) >= 0.2)
    if counts.sum() == 0:
        counts[int(rng.integers(requests))] = 1
    slots: List[int] = []
    for r in rng.permutation(requests):
        slots += [int(r) * block_rows + i for i in range(int(counts[r]))]
        if rng.random() < 0.25:
            slots.append(-1)
    while len(slots) < min_slots or (even_slots and len(slots) % 2):
        slots.append(-1)
    return Packing(requests, block_rows, cap, tuple(int(c) for c in counts), tuple(slots))


def _shape(rng: np.random.Generator, multiple_of: int = 1) -> Tuple[int, int]:
    while True:
        k = int(rng.choice([k for k in kKs if k % multiple_of == 0]))
        n = int(rng.choice(kNs))
        if k * n <= kMaxWeights:
            return k, n


@dataclass(frozen=True)
class Variant:
    kernel: str
    x_dtype: str
    w_format: str
    out: str


# Each family's variants, cycled over its cases so every one is run about equally often.
kVariants: Dict[str, Tuple[Variant, ...]] = {
    "ort-sgemm": (Variant("matmul", "f32", "f32", "f32"), Variant("matmul", "f32", "f32", "bf16"),
                  Variant("matmul", "bf16", "bf16", "bf16"), Variant("matmul", "bf16", "bf16", "f32"),
                  Variant("matmul", "f32", "f16", "f16"), Variant("matmul", "f32", "bf16", "bf16")),
    "ort-f16": (Variant("matmul", "f16", "f16", "f16"), Variant("matmul", "f16", "f16", "f32"),
                Variant("matmul", "f16", "f16", "bf16")),
    "ort-nbits": (Variant("prefill", "f32", "af4-zp", "f32"), Variant("decode", "f32", "af4-zp", "f32"),
                  Variant("prefill", "f32", "af4-zp", "bf16"), Variant("decode", "bf16", "af4-zp", "bf16"),
                  Variant("prefill", "bf16", "af4-zp", "f32"), Variant("decode", "f32", "af4-zp", "bf16"),
                  Variant("prefill", "f32", "af4-zp", "f32")),
    "ort-w4a8": (Variant("prefill", "f32", "af4-zp", "f32"), Variant("prefill", "f32", "af4-zp", "bf16")),
    "openblas": (Variant("sgemv_n", "f32", "f32", "f32"), Variant("sgemv_t", "f32", "f32", "bf16"),
                 Variant("sgemm", "bf16", "bf16", "bf16"), Variant("sgemv_n", "f32", "f16", "f16"),
                 Variant("sgemv_t", "f32", "f32", "f32"), Variant("sgemm", "f32", "f32", "bf16"),
                 Variant("sgemv_n", "bf16", "bf16", "bf16"), Variant("sgemv_t", "f32", "f16", "f16"),
                 Variant("sgemm", "f32", "f32", "f32")),
    "torch-bf16": (Variant("linear", "bf16", "bf16", "bf16"),),
}
# Cases per family: 208 without torch (which is optional), 232 with it.
kCounts = {"ort-sgemm": 48, "ort-f16": 32, "ort-nbits": 56, "ort-w4a8": 24, "openblas": 48,
           "torch-bf16": 24}
kFamilies = tuple(kCounts)
# MatMulNBits block sizes: every one MLAS' 4-bit kernels take at level 0; level 4's measured
# ones (examples/ort_matmulnbits measured 32 and 128; 64 lies between).
kBlocks = (16, 32, 64, 128, 256)
kBlocksW4A8 = (32, 64, 128)


def family_cases(family: str, first_seed: int) -> List[Case]:
    rng = np.random.default_rng([kSeed, kFamilies.index(family)])
    variants = kVariants[family]
    cases = []
    for i in range(kCounts[family]):
        v = variants[i % len(variants)]
        block = 0
        if family == "ort-nbits":
            block = int(rng.choice(kBlocks))
        elif family == "ort-w4a8":
            block = int(rng.choice(kBlocksW4A8))
        k, n = _shape(rng, multiple_of=max(block, 1))
        if family == "ort-w4a8":
            # Level 4 computes rows in pairs and the last row of an odd count by another path
            # (examples/ort_matmulnbits/README.md): both calls take an even count of rows.
            m = int(rng.choice([m for m in kMs if m % 2 == 0]))
            packing = draw_packing(rng, m, min_slots=2, even_slots=True)
        elif v.kernel == "prefill":
            # M > 1 on both paths: one row alone runs the decode kernel, another order.
            m = int(rng.choice([m for m in kMs if m > 1]))
            packing = draw_packing(rng, m, min_slots=2)
        else:
            packing = draw_packing(rng, int(rng.choice(kMs)))
        cases.append(Case(family=family, kernel=v.kernel, index=i, seed=first_seed + i, k=k, n=n,
                          x_dtype=v.x_dtype, w_format=v.w_format, out=v.out, packing=packing,
                          block=block, outlier_channels=bool(rng.random() < 0.3)))
    return cases


def sweep(families: Optional[List[str]] = None) -> List[Case]:
    """Every case of the given families (default: all), seeds distinct across the sweep."""
    out: List[Case] = []
    for i, family in enumerate(kFamilies):
        cases = family_cases(family, first_seed=kSeed + 1000 * i)
        if families is None or family in families:
            out += cases
    return out


@dataclass(frozen=True)
class Fault:
    """A fault planted in the engine run of one legitimate case (its twin in the sweep)."""

    name: str
    what: str
    family: str
    kernel: str
    out: str
    kind: str  # "truncate-columns" | "group-scale"
    meant: Tuple[str, ...]  # at least one of these checks must FAIL
    allowed: Tuple[str, ...]  # every other failing check must be one of these
    column_step: int = 0  # truncate-columns: every column_step-th column (from column 5)
    scale: float = 1.0  # group-scale: the factor the kernel's model holds for one group
    min_outputs: int = 0  # the twin has at least this many M x N outputs


# Truncation instead of rounding on a few columns leaves every value inside its interval when
# B is an ulp or more, so the per-value part of bias is what must see it; a group scale off by
# 3 % moves that column's outputs by 3 % of the group's part of the dot product, far beyond the
# f32 rounding the signature test allows (it finds 0.13 % at K = 4096, docs/detection.md).
kFaults = (
    Fault("fault-sgemm-bf16-truncated", "ORT SGEMM's f32 values truncated to bf16 (not rounded) in "
          "every 32nd column, both paths", "ort-sgemm", "matmul", "bf16", "truncate-columns",
          meant=("bias",), allowed=("bound", "variance", "signature"), column_step=32, min_outputs=8192),
    Fault("fault-sgemv-f16-truncated", "OpenBLAS sgemv's f32 values truncated to f16 in every 64th "
          "column, both paths", "openblas", "sgemv_n", "f16", "truncate-columns",
          meant=("bias",), allowed=("bound", "variance", "signature", "walk"), column_step=64,
          min_outputs=8192),
    Fault("fault-nbits-prefill-scale", "MatMulNBits prefill run with one 4-bit group's scale x 1.03 "
          "(the dump declares the model's scale)", "ort-nbits", "prefill", "f32", "group-scale",
          meant=("signature", "bound"), allowed=("variance", "walk"), scale=1.03),
    Fault("fault-nbits-decode-scale", "MatMulNBits one-row decode run with one 4-bit group's scale "
          "x 0.97", "ort-nbits", "decode", "f32", "group-scale",
          meant=("signature", "bound"), allowed=("variance",), scale=0.97),
    Fault("fault-w4a8-scale", "MatMulNBits accuracy_level 4 (int8 activations) run with one 4-bit "
          "group's scale x 1.03", "ort-w4a8", "prefill", "f32", "group-scale",
          meant=("signature", "bound"), allowed=("variance",), scale=1.03),
)


def fault_twins(cases: List[Case]) -> Dict[str, Fault]:
    """case name -> the fault planted in its engine run: the first case of the fault's family,
    kernel and output type with enough outputs."""
    out: Dict[str, Fault] = {}
    for f in kFaults:
        for c in cases:
            if (c.family, c.kernel, c.out) == (f.family, f.kernel, f.out) and \
                    c.m * c.n >= f.min_outputs and c.name not in out:
                out[c.name] = f
                break
    return out


@dataclass(frozen=True)
class Mistake:
    """A declaration mistake made on the run of one legitimate case (its twin): the kernel run
    otherwise than the dump declares (`fed`, `run`, `truncated`), or the legitimate run exported
    with attributes the kernel does not match (`declare`). The dump is the twin's in all else."""

    name: str
    what: str  # the mistake, as the table states it
    family: str
    kernel: str
    x_dtype: Optional[str] = None  # the twin's variant (None: any)
    w_format: Optional[str] = None
    out: Optional[str] = None
    k_range: Tuple[int, int] = (0, max(kKs))  # the twin's K, both ends included
    block: int = 0  # the twin's MatMulNBits block (0: any)
    square: bool = False  # the twin's W is square (K == N)
    fed: str = ""  # what the kernel is fed instead: "x-bf16", "x-f16" (x rounded), "w-transposed"
    run: str = ""  # how the kernel runs instead: "rz" (MXCSR toward zero), "no-onednn" (ATen's GEMM)
    truncated: bool = False  # the engine's epilogue truncates every output (the dump says rne)
    # Attributes the exporter writes wrong: a segment's (packing, dequant, ...) or the projection's.
    declare: Tuple[Tuple[str, Union[str, int]], ...] = ()
    # What ncert must say: (check, phrase) pairs, one enough: that check FAILs with the phrase in
    # its reason ("*": any check). "the data fits X" is the bound's diagnosis leading with X.
    names: Tuple[Tuple[str, str], ...] = ()
    gap: str = ""  # a known gap: what ncert says instead, reported and not failed on

    @property
    def own_run(self) -> bool:
        """The kernel runs again for this mistake (else the twin's run is exported again)."""
        return bool(self.fed or self.run)

    def fits(self, c: Case) -> bool:
        return ((c.family, c.kernel) == (self.family, self.kernel)
                and all(want in (None, got) for want, got in ((self.x_dtype, c.x_dtype),
                                                              (self.w_format, c.w_format), (self.out, c.out)))
                and self.k_range[0] <= c.k <= self.k_range[1] and (self.block in (0, c.block))
                and (not self.square or c.k == c.n))


# The bound's diagnosis: "the data fits X; or Y (all ... sampled values inside ...)". A phrase
# starting so is met where the diagnosis leads with a fit naming X (verdicts.py).
kFits = "the data fits "

# The mistakes of issue 20, each made on a real kernel. A rounding mistake moves the outputs
# outside the bound only where it moves them by more than the f32 accumulator's worst case
# B = gamma_K * S ~ K * 2^-24 * 0.64 K sigma_x sigma_w: a value rounded to nearest with half-spacing
# u_x (2^-8 for bf16, 2^-11 for f16) errs by about 0.42 u_x of itself (rms), which moves a dot
# product by 0.42 u_x sqrt(K) sigma_x sigma_w, a ratio to B of 0.65 u_x 2^24 / K^1.5: for bf16
# 10 at K = 256, 1.3 at K = 1024, 0.16 at K = 4096; for f16 8 times less. The bound's diagnosis
# runs where 1 % of the values are outside (a ratio above about 0.4), so it sees such a mistake at
# small K only; at the usual K the residual tests (signature, variance) are what see it. A `gap`
# is what ncert says instead where it does not name the mistake yet, measured on 2026-12-03
# (README.md, "Declaration mistakes").
kMistakes = (
    Mistake("mistake-w-transposed", "weights transposed: the kernel multiplied by Wᵀ (a square W)",
            "ort-sgemm", "matmul", x_dtype="f32", square=True, fed="w-transposed",
            names=(("bound", kFits + "weights transposed"),)),
    Mistake("mistake-x-bf16", "x rounded to bf16 before the kernel, stored unrounded (f32)",
            "openblas", "sgemv_n", x_dtype="f32", w_format="f32", out="f32", k_range=(0, 384), fed="x-bf16",
            names=(("bound", kFits + "x rounded to bf16 before the kernel"),)),
    Mistake("mistake-x-f16", "x rounded to f16 before the kernel, stored unrounded (f32)",
            "ort-sgemm", "matmul", x_dtype="f32", w_format="f32", out="f32", k_range=(0, 256), fed="x-f16",
            names=(("bound", kFits + "x rounded to f16 before the kernel"),)),
    Mistake("mistake-x-f16-large-k", "x rounded to f16 before the kernel, stored unrounded (f32); K >= 2048",
            "ort-sgemm", "matmul", x_dtype="f32", w_format="f32", out="f32", k_range=(2048, 4096), fed="x-f16",
            names=(("variance", kFits + "x rounded to f16 before the kernel"),)),
    Mistake("mistake-bf16-truncated", "output_rounding = rne declared, the engine's epilogue truncates "
            "the bf16 outputs", "ort-sgemm", "matmul", x_dtype="f32", w_format="f32", out="bf16", truncated=True,
            names=(("bound", kFits + "output_rounding = rz"), ("bias", "truncation"))),
    Mistake("mistake-f16-truncated", "output_rounding = rne declared, the engine's epilogue truncates "
            "the f16 outputs", "openblas", "sgemv_n", x_dtype="f32", w_format="f16", out="f16", truncated=True,
            names=(("bound", kFits + "output_rounding = rz"), ("bias", "truncation"))),
    Mistake("mistake-accumulator-rz", "accumulator f32-rn declared, the kernel rounds toward zero "
            "(OpenBLAS run with MXCSR round-toward-zero: f32-rz)", "openblas", "sgemv_t", x_dtype="f32",
            w_format="f32", out="f32", run="rz", k_range=(0, 1024), names=(("variance", "accumulator = f32-rz"),),
            gap="every check PASSes: the truncated sums stay at 1.5 % of B; variance's centre part sees 79 % "
                "of the 800 values toward zero from y*, z = -4.5 where the worst summation order's sigma "
                "allows 6.8: too few values (the wide twin below, 32,768 values, is named)"),
    Mistake("mistake-accumulator-rz-wide", "the same, on a dump of 32,768 values (K = 2048, N = 4096, 8 rows)",
            "openblas", "sgemv_t", x_dtype="f32", w_format="f32", out="f32", run="rz", k_range=(2048, 2048),
            names=(("variance", "accumulator = f32-rz"),)),
    Mistake("mistake-accumulator-bf16", "accumulator f32-rn declared, the kernel accumulates in bf16 "
            "(torch.mm with oneDNN off: ATen's own GEMM, every product and partial sum rounded to bf16)",
            "torch-bf16", "linear", run="no-onednn", names=(("bound", kFits + "accumulator = bf16"),)),
    Mistake("mistake-dequant", "dequant = output declared (weights rounded to bf16), the kernel dequantizes "
            "to f32", "ort-nbits", "decode", x_dtype="bf16", k_range=(0, 1024), declare=(("dequant", "output"),),
            # A zero-point weight dequantized exactly and rounded once to f32 is the f32 one: the
            # bound and the walk cannot tell exact from f32, and either names the kernel's.
            names=(("bound", kFits + "dequant = exact"), ("bound", kFits + "dequant = f32"))),
    Mistake("mistake-dequant-k2048", "dequant = output declared, the kernel dequantizes to f32; K = 2048",
            "ort-nbits", "prefill", x_dtype="bf16", out="f32", k_range=(1025, 2048),
            declare=(("dequant", "output"),),
            names=(("bound", kFits + "dequant = exact"), ("bound", kFits + "dequant = f32"))),
    Mistake("mistake-dequant-k4096", "dequant = output declared, the kernel dequantizes to f32; K = 4096",
            "ort-nbits", "decode", x_dtype="bf16", k_range=(4096, 4096), declare=(("dequant", "output"),),
            names=(("variance", kFits + "dequant = exact"), ("variance", kFits + "dequant = f32"))),
    Mistake("mistake-dequant-op", "dequant_op = fused declared, the kernel subtracts the zero point, then "
            "multiplies (sub-mul)", "ort-nbits", "prefill", out="f32", block=64, declare=(("dequant_op", "fused"),),
            names=(("walk", kFits + "dequant_op = sub-mul"),)),
    Mistake("mistake-nibble-order", "the codes' other nibble order declared (u8-msb; MatMulNBits packs "
            "u8-lsb)", "ort-nbits", "prefill", out="f32", block=64, declare=(("packing", "u8-msb"),),
            names=(("bound", kFits + "packing = u8-lsb"),)),
    Mistake("mistake-nibble-order-zp", "the other nibble order declared for the codes and the zero points "
            "alike (u8-msb)", "ort-nbits", "prefill", out="f32", block=64,
            declare=(("packing", "u8-msb"), ("zero_point_packing", "u8-msb")),
            names=(("bound", kFits + "packing = u8-lsb and zero_point_packing = u8-lsb"),)),
    Mistake("mistake-group-size", "group_size = 128 declared for blocks of 64", "ort-nbits", "prefill",
            out="f32", block=64, declare=(("group_size", 128),),
            names=(("geometry", "not the declared 128"),)),
)


def mistake_twins(cases: List[Case]) -> Dict[str, List[Mistake]]:
    """case name -> the mistakes made on its run: each mistake's first fitting case."""
    out: Dict[str, List[Mistake]] = {}
    for m in kMistakes:
        twin = next((c for c in cases if m.fits(c)), None)
        if twin is not None:
            out.setdefault(twin.name, []).append(m)
    return out
