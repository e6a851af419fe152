"""Runs ONNX Runtime's MatMulNBits CPU kernel on the example's inputs and writes ncert dumps.

Every output in a dump is a value the real kernel returned: the unpacked path is the kernel run
on all M rows of X, the packed path the same kernel run again on the gathered rows S·X (the
rows the selector names, in slot order), scattered into the output buffer. Weights are declared
as the AF4 zero-point segment the model holds, code for code (model.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import h5py
import numpy as np
from ncert_dump import DumpWriter, Segment
from ncert_dump.af4 import pack_zero_points, unpack_codes
from ncert_dump.packing import scatter_rows

from harness import OrtCalls  # examples/common, on sys.path beside this folder

import model

kPrefillWalk = "seq-fma"  # README.md "What MLAS computes": M > 1 runs an SGEMM over f32 weights
# The one-row kernel on AVX-512 CPUs: 16 FMA lanes, then FoldAccumulators (each 128-bit quarter's 4
# lanes in order, the quarters halved). AVX2 CPUs run 8 lanes with a fold not measured here.
kDecodeWalkAvx512 = "lanes:16:groups(4,seq,halving):fma"


def decode_walk(cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """The one-row kernel's walk where this CPU runs MLAS's AVX-512 VNNI kernels (AVX512F, BW,
    DQ, VL and VNNI: the dispatch it was measured on), else None (README.md "Why decode declares its walk on AVX-512
    only")."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    # avx512_vnni too: the measured CPU took MLAS's Avx512vnni dispatch, whose one-row wrapper is
    # its own; an AVX-512 CPU without VNNI takes another, never run here.
    core = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni"}
    return kDecodeWalkAvx512 if core <= set(flags) else None


@dataclass(frozen=True)
class Case:
    """One projection: a MatMulNBits call of `rows` rows, and its packed twin."""

    name: str
    block_size: int
    rows: int
    selector: tuple  # slot p holds row selector[p]; -1 an empty slot
    one_row_calls: bool  # decode: every row is its own M = 1 call (the one-row kernel)
    seed: int

    @property
    def gathered(self) -> List[int]:
        return [r for r in self.selector if r >= 0]


@dataclass(frozen=True)
class Shape:
    k: int
    n: int


# Two weight matrices, one per block size. K = 1152 with blocks of 128 gives G = 9 groups a
# row: an odd count, so the packed zero points end in an unused nibble (docs/dump-format.md §4.2).
kShapes = {32: Shape(k=768, n=320), 128: Shape(k=1152, n=256)}
kPrefill = (Case("b32", 32, 6, (4, 0, 2, -1, 5), False, 11),
            Case("b128", 128, 5, (1, 3, -1, 0), False, 12))
kDecode = (Case("b32", 32, 3, (2, 0), True, 13),
           Case("b128", 128, 3, (-1, 1, 2), True, 14))
# accuracy_level 4 (W4A8: int8 activations), the multi-row path only. Its kernel is not batch
# invariant everywhere: with blocks of 128 it computes rows in pairs, and the last row of an odd
# M alone gives other bits (README.md, measure.py). So the packed path gathers a prefix of an even
# count, in order, from an even M: every row keeps its position and its partner.
kW4A8 = (Case("b32", 32, 8, (0, 1, 2, 3, -1), False, 21),
         Case("b128", 128, 8, (0, 1, 2, 3, -1), False, 22))


def quantize_activations(x: np.ndarray, block: int) -> tuple:
    """MLAS' int8 activation quantization at accuracy_level 4 (QuantizeARow_CompInt8_avx2, the
    AVX-512 copy alike): per block of `block` values of a row, scale = fl32(max|x| / 127),
    multiplier = fl32(127 / max|x|) (0 for an all-zero block), code = round-half-even of
    fl32(x * multiplier). Returns (codes int8 [M, K], scales float32 [M, K/block])."""
    m, k = x.shape
    xb = x.astype(np.float32).reshape(m, k // block, block)
    amax = np.abs(xb).max(axis=2)
    scales = (amax / np.float32(127)).astype(np.float32)
    safe = np.where(amax != 0, amax, np.float32(1)).astype(np.float32)
    mul = np.where(amax != 0, (np.float32(127) / safe).astype(np.float32), np.float32(0))
    codes = np.rint((xb * mul[:, :, None].astype(np.float32)).astype(np.float32))
    return codes.astype(np.int8).reshape(m, k), scales


class OrtRunner(OrtCalls):
    """Collects MatMulNBits calls, runs them in one node process (run_ort.js), returns Y."""

    def __init__(self, work: Path, ort_package: Path):
        super().__init__(work, ort_package, Path(__file__).with_name("run_ort.js"))

    def add(self, model_path: Path, x: np.ndarray) -> int:
        i = len(self.calls)
        xp = self.work / f"call{i:03d}_x.bin"
        np.ascontiguousarray(x, dtype="<f4").tofile(xp)
        return self.queue({"model": str(model_path), "x": str(xp), "rows": int(x.shape[0]),
                           "k": int(x.shape[1]), "y": str(self.work / f"call{i:03d}_y.bin")})

    def y(self, i: int, n: int) -> np.ndarray:
        call = self.calls[i]
        return np.fromfile(call["y"], dtype="<f4").reshape(call["rows"], n)


def segment(q: model.QuantWeights, zp: Optional[np.ndarray] = None) -> Segment:
    """The AF4 zero-point segment holding exactly what the model's initializers hold: B's bytes
    as u8-lsb codes (element 2j in the low nibble), the f32 scales, and the zero points, packed
    two groups a byte with the even group in the low nibble (u8-lsb), as MatMulNBits stores
    them. `zp` replaces the zero points (a planted fault)."""
    packed = q.b.reshape(q.n, q.k // 2)
    if not np.array_equal(unpack_codes(packed, "u8-lsb"), q.codes):
        raise AssertionError("B's nibble order is not u8-lsb")
    if not np.array_equal(pack_zero_points(q.zp, "u8-lsb").reshape(-1), q.zero_points):
        raise AssertionError("MatMulNBits' zero_points are not u8-lsb packed")
    return Segment("af4", 0, q.n, packed_codes=packed, scales=q.scales.reshape(q.n, q.groups),
                   group_size=q.block_size, variant="zero-point", packing="u8-lsb",
                   zero_points=q.zp if zp is None else zp, zero_point_packing="u8-lsb",
                   dequant="f32", dequant_op="sub-mul", scale_dtype="f32",
                   name=f"w4_block{q.block_size}")


@dataclass
class Outputs:
    x: np.ndarray
    y_unpacked: np.ndarray
    y_compact: np.ndarray
    y_before: np.ndarray
    y_packed: np.ndarray


def assemble(case: Case, x: np.ndarray, y_unpacked: np.ndarray, packed_rows: np.ndarray,
             seed: int) -> Outputs:
    """y_compact / y_packed from the packed call's rows (one per gathered row, slot order)."""
    n = y_unpacked.shape[1]
    compact = np.zeros((len(case.selector), n), np.float32)  # empty slots: never compared
    used = [p for p, r in enumerate(case.selector) if r >= 0]
    compact[used] = packed_rows
    # The output buffer before the packed call: what an earlier step left there.
    before = np.random.default_rng(seed).standard_normal((case.rows, n)).astype(np.float32)
    packed = scatter_rows(compact, np.asarray(case.selector, np.int32), before.copy())
    return Outputs(x, y_unpacked, compact, before, packed)


class Exporter:
    """Builds the models, plans every kernel call, runs them, and writes the dumps."""

    def __init__(self, out: Path, ort_package: Path):
        self.out = out
        self.work = out / "kernel"
        self.work.mkdir(parents=True, exist_ok=True)
        self.runner = OrtRunner(self.work, ort_package)
        self.weights: Dict[int, model.QuantWeights] = {}
        self.models: Dict[int, Path] = {}
        self.level4_models: Dict[int, Path] = {}
        for block, shape in kShapes.items():
            q = model.random_weights(shape.n, shape.k, block, seed=block)
            path = self.work / f"matmulnbits_block{block}.onnx"
            path.write_bytes(model.build_model(q, accuracy_level=0))
            self.weights[block], self.models[block] = q, path
            path4 = self.work / f"matmulnbits_block{block}_level4.onnx"
            path4.write_bytes(model.build_model(q, accuracy_level=4))
            self.level4_models[block] = path4
        self.plans: Dict[tuple, dict] = {}

    def _calls(self, block: int, x: np.ndarray, one_row: bool, level: int = 0) -> List[int]:
        model_path = self.models[block] if level == 0 else self.level4_models[block]
        if one_row:
            return [self.runner.add(model_path, x[m:m + 1]) for m in range(x.shape[0])]
        return [self.runner.add(model_path, x)]

    def plan(self, family: str, case: Case, level: int = 0) -> None:
        shape = kShapes[case.block_size]
        x = np.random.default_rng(case.seed).standard_normal((case.rows, shape.k)).astype(np.float32)
        gathered = x[case.gathered]
        if not case.one_row_calls and gathered.shape[0] < 2:
            raise AssertionError(f"{case.name}: the packed call must keep M > 1 (the SGEMM path)")
        self.plans[(family, case.name)] = {
            "case": case, "x": x, "level": level,
            "unpacked": self._calls(case.block_size, x, case.one_row_calls, level),
            "packed": self._calls(case.block_size, gathered, case.one_row_calls, level),
            # The planted identity fault: the packed rows run as one batched call (M = 2, the
            # SGEMM path) where the unpacked path ran the one-row kernel.
            "batched": self._calls(case.block_size, gathered, False) if case.one_row_calls else None,
        }

    def run(self) -> str:
        self.runner.run()
        assert self.runner.version is not None
        return self.runner.version

    def _stack(self, calls: List[int], n: int) -> np.ndarray:
        return np.concatenate([self.runner.y(i, n) for i in calls], axis=0)

    def outputs(self, family: str, name: str, packed_from: str = "packed") -> Outputs:
        p = self.plans[(family, name)]
        case: Case = p["case"]
        n = kShapes[case.block_size].n
        return assemble(case, p["x"], self._stack(p["unpacked"], n), self._stack(p[packed_from], n),
                        seed=case.seed + 100)

    def write(self, path: Path, family: str, names: List[str], *, k_walk: Optional[str],
              packed_from: str = "packed", zero_point_fault: Optional[tuple] = None,
              version: str = "") -> None:
        with DumpWriter(str(path), engine="onnxruntime-node", build=f"onnxruntime {version} cpu",
                        model="MatMulNBits bits=4 accuracy_level=0", device="cpu") as dw:
            for name in names:
                case: Case = self.plans[(family, name)]["case"]
                q = self.weights[case.block_size]
                zp = None
                if zero_point_fault is not None and zero_point_fault[0] == name:
                    zp = q.zp.copy()
                    row, group = zero_point_fault[1], zero_point_fault[2]
                    zp[row, group] = zp[row, group] + 1 if zp[row, group] < 15 else zp[row, group] - 1
                o = self.outputs(family, name, packed_from)
                dw.add_projection(name, x=o.x, x_dtype="f32", weights=[segment(q, zp)],
                                  accumulator="f32-rn", output_dtype="f32", epilogue="none",
                                  k_walk=k_walk, selector=np.asarray(case.selector, np.int32),
                                  y_unpacked=o.y_unpacked, y_packed=o.y_packed,
                                  y_compact=o.y_compact, y_before=o.y_before)

    def zero_point_target(self, family: str, name: str) -> tuple:
        """(name, row, group): the group whose zero point, off by one, moves an output the most
        (by s·|Σ x| over the group): the planted fault is then far outside any rounding."""
        p = self.plans[(family, name)]
        case: Case = p["case"]
        q = self.weights[case.block_size]
        sums = np.abs(p["x"].reshape(case.rows, q.groups, q.block_size).sum(axis=2)).max(axis=0)
        effect = q.scales.reshape(q.n, q.groups) * sums[None, :]
        row, group = np.unravel_index(int(np.argmax(effect)), effect.shape)
        return (name, int(row), int(group))

    def write_w4a8(self, path: Path, names: List[str], *, version: str,
                   scale_fault: Optional[tuple] = None) -> None:
        """The accuracy_level 4 dumps: x as the engine received it, its int8 codes and scales
        (x_quant, §3.6 of docs/dump-format.md) as MLAS computes them, the weights `exact` (the
        kernel multiplies codes). `scale_fault` = (name, row, group): that scale declared as
        fl32(max|x| / 128), the divide-by-128 slip, while the codes stay the kernel's."""
        with DumpWriter(str(path), engine="onnxruntime-node", build=f"onnxruntime {version} cpu",
                        model="MatMulNBits bits=4 accuracy_level=4", device="cpu") as dw:
            for name in names:
                case: Case = self.plans[("w4a8", name)]["case"]
                q = self.weights[case.block_size]
                seg = segment(q)
                seg.dequant, seg.dequant_op = "exact", None
                o = self.outputs("w4a8", name)
                dw.add_projection(name, x=o.x, x_dtype="f32", weights=[seg], accumulator="f32-rn",
                                  output_dtype="f32", epilogue="none",
                                  selector=np.asarray(case.selector, np.int32),
                                  y_unpacked=o.y_unpacked, y_packed=o.y_packed,
                                  y_compact=o.y_compact, y_before=o.y_before)
        # The x_quant members added with h5py, as any HDF5 binding may (the writer's
        # add_projection(..., x_quant=...) would write the same members).
        with h5py.File(path, "r+") as f:
            for name in names:
                case = self.plans[("w4a8", name)]["case"]
                x = self.plans[("w4a8", name)]["x"]
                codes, scales = quantize_activations(x, case.block_size)
                if scale_fault is not None and scale_fault[0] == name:
                    row, group = scale_fault[1], scale_fault[2]
                    b = case.block_size
                    amax = np.abs(x[row, group * b:(group + 1) * b]).max()
                    scales[row, group] = np.float32(amax) / np.float32(128)
                g = f["projections"][name]
                g.attrs["x_quant"] = "int8"
                g.attrs["x_quant_group"] = np.int64(case.block_size)
                g.attrs["x_quant_rounding"] = "rne"
                g.create_dataset("x_quantized", data=codes.astype("<i1"))
                g.create_dataset("x_scales", data=scales.astype("<f4"))
            f.attrs["ncert_schema_version"] = np.int64(2)
