#!/usr/bin/env python3
"""Value-level mutation runner for ncert: valid dumps, one hostile value each.

mutate.py breaks the bytes of an HDF5 file; this runner leaves the file structurally valid and
changes one *value* in it: one attribute of a projection, segment, logits run, tensor or the
root, or one element (or every element) of one dataset. Every mutant is a copy of a valid seed
dump with exactly one change, written through h5py with the memory type equal to the file
type (raw bit patterns, never converted), so a bf16 NaN is the pattern 0x7FC0 whatever form
(tagged uint16 or 16-bit float type) the seed stores bf16 in.

What it writes (see tools/fuzz/README.md, "Value mutations"):

- float data (f32, f16, bf16, e4m3, e5m2): NaN (quiet, signalling, negative), +inf, -inf, -0.0,
  the smallest subnormal, the largest finite value, 1e30, in the first element, the last one,
  every element, and around the K / N boundary of strided arrays (the last valid column and the
  first padding column);
- integer data: 0, -1, 1, the type's extremes and the values just outside the documented ranges
  (a selector row M, a token V, a zero point 16, a nonzero unused nibble...);
- integer attributes: 0, -1, +-1 around the value, twice it, 2^31, 2^32 - 1, 2^32, 2^63 - 1,
  -2^63, values beyond 64 signed bits (uint64), and the same value stored as another integer
  type, a float, a string, a one- or two-element array; per attribute the edges of its range
  (a group size of 0, 3 or above K, lanes that do not divide K...);
- string attributes: empty, blank, unknown words, almost-right words (case, trailing space,
  "f32-RN", a Unicode hyphen), every other valid word, an embedded NUL, invalid UTF-8, an escape
  sequence, 64 KiB and 2 MiB strings, space-padded fixed-length storage; for `accumulator`,
  `k_walk` and `compare` the grammar's edges (u=0, u=nan, lanes:0, split:3, promote:16:25:rne...).

Every mutant goes through `ncert inspect` and `ncert check` (`--json OUT --threads 1
--hdf5-timeout 5`), each in its own process group, killed after --timeout. Bad outcomes, as for
mutate.py: a signal, a hang, exit 4, exit 2, any other exit status, and a report that is not
JSON (or a refusal without its error object), output that is not UTF-8 or holds a raw ESC.
Beside them the runner reports two kinds of *findings* a value can cause without crashing:

- suspicious PASS: `check` exits 0 (or `inspect` 0 on a mutation docs/dump-format.md refuses at
  sight) although the mutated value makes the dump invalid by the format's own words (an
  unknown word, an integer below its least value, a NaN in data a check reads...);
- unclear refusal: exit 3 whose message does not name the object changed (nor its projection or
  run), or, for an attribute, the value written; `check`'s message must also name the file.

Python 3 (3.9 or later) with numpy and h5py; the runner.py module beside it; python/ncert_dump
for the built-in version 2 seeds.

Exit status: 0 no bad outcome (and, with --strict, no finding), 1 otherwise, 2 usage error,
130 interrupted.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time

if __name__ == "__main__":
    # Run as a script (CTest's fuzz_values_smoke does), it imports the modules beside it: leave
    # no __pycache__ in the source tree.
    sys.dont_write_bytecode = True

from runner import (build_argv, classify, collect_seed_paths, disable_core_files, discard,  # noqa: E402
                    fail_usage, run_one, stop_all, stopping, tail_text)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover - environment
    print("values.py: error: needs numpy and h5py (%s); use the interpreter they belong to "
          "(/usr/bin/python3 on Debian)" % e, file=sys.stderr)
    sys.exit(2)

SMOKE_SEEDS = ("good.h5", "v2-walks.h5", "v2-quant.h5", "v2-large.h5")
SMOKE_PER_SEED = 60
SMOKE_SHARE = {"v2-large.h5": 10}  # a 3.4 MB seed: fewer of its mutations
# Always in --smoke (besides the spread): mutations that once crashed or fooled ncert, as
# (seed, object path, attribute or None for data, value or element label).
SMOKE_PINNED = (
    ("v2-large.h5", "/projections/big/weight/zp", "group_size", 1),   # over-read: SIGSEGV
    ("v2-large.h5", "/projections/big/weight/zp", "group_size", 3),
    ("v2-quant.h5", "/projections/u8zp/x", None, "NaN"),              # quantize skipped NaN
    ("good.h5", "/projections/lm_head_greedy", "logits_run", ""),      # "" read as absent
)
BUILTIN_SEEDS = ("v2-walks.h5", "v2-quant.h5", "v2-large.h5")
DEFAULT_DEMO_SEEDS = ("good.h5", "fork-near-tie-a.h5", "logits-a.h5")
COMMANDS = ("inspect", "check")
TWO_INPUT = ("compare", "forks")  # run with the unmodified seed as second input
BIG_STRING = 2 << 20      # above the 1 MiB attribute limit of dump-format §1
LONG_STRING = 64 << 10    # long, but under it
U32_MAX = 2**32 - 1
I64_MAX = 2**63 - 1

# ---- element types ----------------------------------------------------------------------------

# Raw containers: every element is read and written as an unsigned pattern of its width.
CONTAINERS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# Hostile patterns of each float type: (label, pattern). The first seven go everywhere; the rest
# (other NaNs) only into the first element.
FLOAT_PATTERNS = {
    "f32": [("NaN", 0x7FC00000), ("+inf", 0x7F800000), ("-inf", 0xFF800000),
            ("-0.0", 0x80000000), ("min-subnormal", 0x00000001), ("max-finite", 0x7F7FFFFF),
            ("1e30", 0x7149F2CA), ("sNaN", 0x7F800001), ("-NaN", 0xFFC00000)],
    "bf16": [("NaN", 0x7FC0), ("+inf", 0x7F80), ("-inf", 0xFF80), ("-0.0", 0x8000),
             ("min-subnormal", 0x0001), ("max-finite", 0x7F7F), ("1e30", 0x7149),
             ("sNaN", 0x7F81), ("-NaN", 0xFFC0)],
    "f16": [("NaN", 0x7E00), ("+inf", 0x7C00), ("-inf", 0xFC00), ("-0.0", 0x8000),
            ("min-subnormal", 0x0001), ("max-finite", 0x7BFF), ("-max-finite", 0xFBFF),
            ("sNaN", 0x7C01), ("-NaN", 0xFE00)],
    "e4m3": [("NaN", 0x7F), ("-NaN", 0xFF), ("-0.0", 0x80), ("min-subnormal", 0x01),
             ("max-finite", 0x7E), ("-max-finite", 0xFE), ("2^-6", 0x08)],
    "e5m2": [("NaN", 0x7E), ("+inf", 0x7C), ("-inf", 0xFC), ("-0.0", 0x80),
             ("min-subnormal", 0x01), ("max-finite", 0x7B), ("-max-finite", 0xFB),
             ("sNaN", 0x7D), ("-NaN", 0xFE)],
}
FLOAT_TYPES = tuple(FLOAT_PATTERNS)
FIRST_ONLY = ("sNaN", "-NaN")
# Labels that cannot hide: a check that reads the element sees a non-finite or absurd value.
LOUD = ("NaN", "+inf", "-inf", "max-finite", "-max-finite", "1e30", "sNaN", "-NaN")

INT_RANGES = {"i8": (-128, 127), "u8": (0, 255), "i32": (-2**31, 2**31 - 1),
              "u32": (0, U32_MAX), "i64": (-2**63, I64_MAX)}


def element_type(dset):
    """The dump-format element type of a dataset (f32, bf16, f16, e4m3, e5m2, i8, u8, u32, i32,
    i64) from its HDF5 type and `dtype` tag, or None for anything else."""
    t = dset.id.get_type()
    size = t.get_size()
    if isinstance(t, h5py.h5t.TypeFloatID):
        fields = t.get_fields()[1:]  # (exponent position, size, mantissa position, size)
        if size == 4:
            return "f32"
        if size == 2 and fields == (10, 5, 0, 10):
            return "f16"
        if size == 2 and fields == (7, 8, 0, 7):
            return "bf16"
        return None
    if isinstance(t, h5py.h5t.TypeIntegerID):
        signed = t.get_sign() == h5py.h5t.SGN_2
        tag = dset.attrs.get("dtype")
        if isinstance(tag, bytes):
            tag = tag.decode("utf-8", "replace")
        if size == 2 and not signed and tag in ("bf16", "f16"):
            return tag
        if size == 1 and not signed and tag in ("e4m3", "e5m2"):
            return tag
        return {(1, True): "i8", (1, False): "u8", (4, False): "u32", (4, True): "i32",
                (8, True): "i64"}.get((size, signed))
    return None


def read_raw(dset):
    t = dset.id.get_type()
    arr = np.empty(dset.shape, CONTAINERS[t.get_size()])
    if arr.size:
        dset.id.read(h5py.h5s.ALL, h5py.h5s.ALL, arr, mtype=t)
    return arr


def write_raw(dset, arr):
    dset.id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(arr), mtype=dset.id.get_type())


def to_pattern(value, etype):
    """An integer value of an integer element type as its unsigned pattern."""
    width = {"i8": 8, "u8": 8, "i32": 32, "u32": 32, "i64": 64}[etype]
    return value & ((1 << width) - 1)


# ---- the seed's model -------------------------------------------------------------------------

class Attr:
    """One attribute as stored: kind (str, int, float, other), value, storage."""

    def __init__(self, obj, name):
        aid = obj.attrs.get_id(name)
        t = aid.get_type()
        self.name = name
        self.shape = aid.shape
        self.kind = "other"
        self.storage = None
        self.value = None
        try:
            raw = obj.attrs[name]
        except (OSError, TypeError, ValueError):
            return
        if isinstance(raw, np.ndarray) and raw.size == 1:
            raw = raw.reshape(-1)[0]
        if isinstance(t, h5py.h5t.TypeStringID):
            self.kind = "str"
            self.storage = "vlen" if t.is_variable_str() else "fixed"
            self.value = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) \
                else str(raw)
        elif isinstance(t, h5py.h5t.TypeIntegerID):
            self.kind = "int"
            self.storage = np.dtype(raw.dtype) if hasattr(raw, "dtype") else np.dtype(np.int64)
            self.value = int(raw)
        elif isinstance(t, h5py.h5t.TypeFloatID):
            self.kind = "float"
            self.value = float(raw)


class Obj:
    """A group or dataset of the seed: its path, role in the format, attributes and data."""

    def __init__(self, path, h5obj):
        self.path = path
        self.is_dataset = isinstance(h5obj, h5py.Dataset)
        self.attrs = {n: Attr(h5obj, n) for n in sorted(h5obj.attrs.keys())}
        self.role, self.owner, self.member = classify_path(path, self.is_dataset)
        self.etype = element_type(h5obj) if self.is_dataset else None
        self.shape = tuple(h5obj.shape) if self.is_dataset and h5obj.shape is not None else ()
        self.data = read_raw(h5obj) if self.is_dataset and self.etype else None

    def av(self, name, default=None):
        a = self.attrs.get(name)
        return a.value if a is not None and a.value is not None else default


def classify_path(path, is_dataset):
    """(role, owner, member): root, projection, segment, run, tensor, or a member of one."""
    parts = path.strip("/").split("/") if path != "/" else []
    if not parts:
        return "root", "/", None
    top = parts[0]
    if top == "projections" and len(parts) >= 2:
        proj = "/projections/" + parts[1]
        if len(parts) == 2:
            return "projection", proj, None
        if parts[2] == "weight" and len(parts) >= 4:
            seg = "/".join([proj, "weight", parts[3]])
            if len(parts) == 4:
                return "segment", seg, None
            return "segment-member", seg, "/".join(parts[4:])
        return "projection-member", proj, "/".join(parts[2:])
    if top == "logits" and len(parts) >= 2:
        run = "/logits/" + parts[1]
        if len(parts) == 2:
            return "run", run, None
        return "run-member", run, "/".join(parts[2:])
    if top == "tensors":
        return ("tensor" if is_dataset else "tensor-group"), path, None
    return "other", path, None


class Seed:
    """A seed dump and what the mutation rules need to know about it."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.name = os.path.basename(path)
        self.stem = self.name[:-3] if self.name.endswith(".h5") else self.name
        with open(path, "rb") as f:
            data = f.read()
        self.bytes = len(data)
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.objects = {}
        with h5py.File(path, "r") as f:
            self.objects["/"] = Obj("/", f)

            def visit(name, obj):
                if isinstance(obj, (h5py.Group, h5py.Dataset)):
                    self.objects["/" + name] = Obj("/" + name, obj)
            f.visititems(visit)
        self.version = self.objects["/"].av("ncert_schema_version", 1)
        self.run_path = None  # the copy the runs read (written by load_seeds)
        self.baseline = {}
        self.planned = 0
        self._geometry = {}

    def get(self, path):
        return self.objects.get(path)

    def member(self, owner, name):
        return self.objects.get(owner + "/" + name)

    def projections(self):
        return [o for o in self.objects.values() if o.role == "projection"]

    def runs(self):
        return [o for o in self.objects.values() if o.role == "run"]

    def segments_of(self, proj):
        return [o for o in self.objects.values() if o.role == "segment" and
                o.owner.startswith(proj + "/weight/")]

    # -- facts about a projection --

    def geometry(self, proj):
        if proj not in self._geometry:
            self._geometry[proj] = self._compute_geometry(proj)
        return self._geometry[proj]

    def _compute_geometry(self, proj):
        p = self.get(proj)
        k = p.av("k", 0)
        n = p.av("n", 0)
        x = self.member(proj, "x")
        m = x.shape[0] if x is not None and x.shape else 0
        sel = self.member(proj, "selector")
        selector = sel.data.astype(np.uint32).view(np.int32) if sel is not None and \
            sel.data is not None and sel.etype == "i32" else np.zeros(0, np.int32)
        return {"k": k, "n": n, "m": m, "in_stride": p.av("in_stride", k),
                "out_stride": p.av("out_stride", n), "selector": selector,
                "selected": sorted({int(r) for r in selector if 0 <= r < m}),
                "has": {o.member for o in self.objects.values()
                        if o.role == "projection-member" and o.owner == proj}}

    def lm_head_of(self, run):
        name = run.rsplit("/", 1)[1]
        for p in self.projections():
            if p.av("role") == "lm_head" and p.av("logits_run") == name:
                return p.path
        return None


# ---- the mutations ----------------------------------------------------------------------------

ACCUMULATORS = ("f32-rn", "f32-rz", "matrix-unit")
WORDS = {
    "op": ("linear",),
    "accumulator": ACCUMULATORS,
    "output_dtype": ("f32", "bf16", "f16"),
    "epilogue": ("none", "bias", "residual", "bias+residual"),
    "residual_at": ("f32", "output"),
    "bias_at": ("end", "start"),
    "output_rounding": ("rne", "rz", "any"),
    "x_quant": ("int8", "uint8", "e4m3", "e5m2"),
    "x_quant_rounding": ("rne", "rna"),
    "format": ("af4", "bf16", "f32", "f16", "int8", "e4m3", "e5m2"),
    "variant": ("affine", "codebook", "zero-point"),
    "codebook": ("nf4", "af4-64", "custom"),
    "packing": ("u32-lsb", "u8-msb", "u8-lsb"),
    "zero_point_packing": ("u8", "u32-lsb", "u8-msb", "u8-lsb"),
    "dequant": ("exact", "f32", "output", "folded"),
    "dequant_op": ("fma", "mul-add", "either", "sub-mul", "fused"),
    "tie_break": ("lowest",),
    "ncert_schema": ("ncert-dump",),
    "dtype": ("bf16", "f16", "e4m3", "e5m2"),
}
NEAR_MISSES = {
    "op": ("Linear", "matmul", "linear\t"),
    "accumulator": ("f32-RN", "f32_rn", "f32", "fp32-rn", "f32-rn-", "u=", "u=0", "u=0.5",
                    "u=0.49999", "u=1", "u=-0.001", "u=nan", "u=inf", "u=-inf", "u=1e-300",
                    "u=4.9e-324", "u=1e-45", "u=0x1p-24", "u=1e400", "u=+0.001", "u= 0.001",
                    "u=.001", "u=0.001x", "u=1/3", "u=0.001 ", "u=5.960464477539063e-08"),
    "output_dtype": ("F32", "f64", "bfloat16", "fp16", "e4m3", "i8"),
    "epilogue": ("bias+bias", "residual+bias", "bias+", "+residual", "Bias"),
    "residual_at": ("bf16", "Output", "f16"),
    "bias_at": ("begin", "Start", "first", "end "),
    "output_rounding": ("rn", "RNE", "rna", "nearest"),
    "x_quant": ("int4", "fp8", "u8", "INT8"),
    "x_quant_rounding": ("rz", "RNA", "rtz"),
    "format": ("AF4", "fp8", "int4", "i8", "e4m3fn", "bfloat16"),
    "variant": ("zero_point", "zeropoint", "Affine", "asymmetric"),
    "codebook": ("NF4", "af4_64", "fp4", "af4-32"),
    "packing": ("u32-msb", "u16-lsb", "u8", "U8-MSB"),
    "zero_point_packing": ("u4", "u32-msb", "U8", "u16-lsb"),
    "dequant": ("fp32", "bf16", "Exact", "none"),
    "dequant_op": ("mul_add", "fused-mul", "FMA", "mad"),
    "tie_break": ("highest", "Lowest", "random"),
    "ncert_schema": ("ncert-witness", "NCERT-DUMP", "ncert-dump-v2"),
    "dtype": ("BF16", "bfloat16", "f32", "u16", "e4m3fn", "e5m2fnuz", "float16"),
    "weights_xxh3": (),
    "compare": ("bitwise ", "ulp:0", "ulp:-1", "ulp:", "ulp:1e3", "ulp:18446744073709551616",
                "ulp:4294967296", "abs:nan", "abs:inf", "abs:-1", "abs:0", "abs:1e-3,rel:nan",
                "abs:1e-3,rel:", "abs:1e-3,rel:-1", "rel:1e-3", "abs:1e400", "abs:1e-3,,rel:1"),
}
FREE_TEXT = ("engine", "build", "model", "device", "prompt", "role", "logits_run")


def k_walk_words(k):
    """Grammar edges of k_walk (dump-format §3.4) around a contraction length K."""
    words = [
        "seq", "seq-fma", "split:1", "split:2:fma", "lanes:2:seq", "lanes:8:pairs",
        "lanes:8:halving:fma", "lanes:8:butterfly(4,1,2)", "promote:16:12:rz:fma",
        "promote:1:24:rne", "promote:%d:8:rne" % max(k, 1), "splitk:1:seq/seq",
        "splitk:2:pairs/lanes:4:halving:fma", "splitk:2:seq/promote:8:14:rz",
        # refused forms
        "SEQ", "seq ", "seq-fma:fma", "seq:fma", "split:0", "split:-1", "split:", "split:2:fmaa",
        "split:+2", "split: 2", "lanes:0:seq", "lanes:1:seq", "lanes:3:pairs", "lanes:6:halving",
        "lanes:8:tree", "lanes:8:", "lanes:8:pairs:fma:fma", "lanes:8:butterfly(1,2)",
        "lanes:8:butterfly(1,2,2)", "lanes:8:butterfly(1,2,4,8)", "lanes:8:butterfly()",
        "lanes:8:butterfly(4, 1, 2)", "lanes:8:butterfly(4,1,2", "lanes:8:butterfly(0,1,2)",
        "promote:0:24:rne", "promote:16:7:rne", "promote:16:25:rz", "promote:16:24:rn",
        "promote:16:12", "promote:16:12:rz:fma:x", "splitk:0:seq/seq", "splitk:2:seq/split:2",
        "splitk:2:seq", "splitk:2:seq/", "splitk:3:pairs/seq", "splitk:2:pairs/splitk:2:seq/seq",
        "splitk:2:seq/lanes:1:seq",
        # numbers at the edges of their type
        "split:18446744073709551616", "split:4294967296", "split:2147483648",
        "lanes:18446744073709551616:seq", "lanes:4294967296:seq", "lanes:2147483648:pairs",
        "lanes:65536:seq", "lanes:1048576:pairs", "promote:18446744073709551616:24:rne",
        "promote:4294967296:24:rz", "promote:16:4294967320:rne", "splitk:4294967296:seq/seq",
        "splitk:18446744073709551616:seq/seq", "lanes:0008:pairs", "split:00",
        # lengths against K
        "split:%d" % (k + 1), "split:%d" % max(k, 1), "split:3", "split:7",
        "lanes:%d:seq" % max(k, 2), "lanes:%d:seq" % (k + 1), "lanes:%d:seq" % (2 * k + 2),
        "splitk:%d:seq/seq" % max(k, 1), "splitk:%d:seq/seq" % (k + 1), "splitk:3:seq/seq",
        "splitk:%d:seq/seq-fma" % (2 * k),
    ]
    out = []
    for w in words:
        if w not in out:
            out.append(w)
    return out


def k_walk_expect(word, k):
    """refuse (406), reject (a guard: the split does not divide K) or any (a valid form)."""
    def num(t):
        return re.fullmatch(r"[0-9]+", t) is not None

    def tree_ok(tree, count):
        pow2 = count >= 1 and count & (count - 1) == 0
        if tree == "seq":
            return True
        if tree in ("halving", "pairs"):
            return pow2
        m = re.fullmatch(r"butterfly\(([0-9,]*)\)", tree)
        if not m or not pow2 or not m.group(1):
            return False
        parts = m.group(1).split(",")
        if not all(num(p) for p in parts):
            return False
        d = sorted(int(p) for p in parts)
        want = []
        v = 1
        while v < count:
            want.append(v)
            v *= 2
        return d == want

    def inner_ok(w):
        if w in ("seq", "seq-fma"):
            return True
        body = w[:-4] if w.endswith(":fma") else w
        p = body.split(":")
        if p[0] == "lanes" and len(p) == 3 and num(p[1]):
            return int(p[1]) >= 2 and tree_ok(p[2], int(p[1]))
        if p[0] == "promote" and len(p) == 4 and num(p[1]) and num(p[2]):
            return int(p[1]) >= 1 and 8 <= int(p[2]) <= 24 and p[3] in ("rne", "rz")
        return False

    if word in ("seq", "seq-fma"):
        return "any"
    m = re.fullmatch(r"split:([0-9]+)(:fma)?", word)
    if m:
        s = int(m.group(1))
        if s < 1:
            return "refuse"
        return "any" if k % s == 0 else "reject"
    if word.startswith("lanes:") or word.startswith("promote:"):
        return "any" if inner_ok(word) else "refuse"
    m = re.fullmatch(r"splitk:([0-9]+):([^/]*)/(.*)", word)
    if m:
        s = int(m.group(1))
        if s < 1 or not tree_ok(m.group(2), s) or not inner_ok(m.group(3)):
            return "refuse"
        return "any" if k % s == 0 else "reject"
    return "refuse"


def accumulator_expect(word):
    if word in ACCUMULATORS:
        return "any"
    m = re.fullmatch(r"u=(.*)", word)
    if not m:
        return "refuse"
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F.]+([pP][-+]?[0-9]+)?", m.group(1)):
        return "unclear"  # a hexadecimal float: C's strtod reads it, the doc does not say
    try:
        v = float(m.group(1))
    except ValueError:
        return "refuse"
    if not (0 < v < 0.5):  # NaN fails too
        return "refuse"
    # A plain decimal number the doc's `u=<x>` admits; other spellings may go either way.
    return "any" if re.fullmatch(r"[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?", m.group(1)) else "unclear"


def compare_expect(word):
    if word == "bitwise":
        return "any"
    m = re.fullmatch(r"ulp:([0-9]+)", word)
    if m:
        return "any" if int(m.group(1)) < 2**63 else "refuse"
    m = re.fullmatch(r"abs:([^,]+)(,rel:(.+))?", word)
    if m:
        try:
            vals = [float(m.group(1))] + ([float(m.group(3))] if m.group(3) else [])
        except ValueError:
            return "refuse"
        if all(v >= 0 and v == v and v != float("inf") for v in vals):
            return "any"
    return "refuse"


class Mutation:
    """One change to one seed: the object, the attribute or element, the new value, and what
    the format says the dump then is (expect: refuse, refuse-check, reject, any, unclear)."""

    def __init__(self, obj, **kw):
        self.object = obj
        self.attribute = kw.get("attribute")   # None: a dataset's elements
        self.store = kw.get("store")            # attribute storage: vlen, fixed, int, uint64...
        self.value = kw.get("value")            # attribute value (str, int, float, list)
        self.where = kw.get("where")            # elements: first, last, all, last-valid...
        self.elem = kw.get("elem")              # elements: the index changed, None for all
        self.akind = kw.get("akind")            # attributes: the kind stored before (str, int)
        self.label = kw.get("label")            # elements: the value's name (NaN, -1...)
        self.pattern = kw.get("pattern")        # elements: the raw pattern written
        self.expect = kw.get("expect", "any")
        self.why = kw.get("why", "")
        self.id = None
        self.index = None

    @property
    def kind(self):
        if self.attribute is None:
            return "data"
        return "attr-" + (self.akind or "other")

    def short_value(self):
        if self.attribute is None:
            return "%s (0x%x)" % (self.label, self.pattern)
        v = self.value
        if isinstance(v, str):
            if len(v) > 48:
                return '"%s..." (%d chars)' % (v[:24].encode("unicode_escape").decode(), len(v))
            return '"%s"' % v.encode("unicode_escape").decode("ascii")
        if isinstance(v, bytes):
            return "%r" % v if len(v) <= 48 else "%r... (%d bytes)" % (v[:24], len(v))
        return repr(v)

    def describe(self):
        if self.attribute is None:
            if self.elem is None:
                return "%s [all] = %s" % (self.object, self.short_value())
            return "%s [%s] (%s) = %s" % (self.object, ",".join(str(i) for i in self.elem),
                                          self.where, self.short_value())
        store = "" if self.store in ("vlen", "int", None) else " (stored as %s)" % self.store
        return "%s @%s = %s%s" % (self.object, self.attribute, self.short_value(), store)

    def record(self):
        r = {"id": self.id, "object": self.object, "kind": self.kind,
             "description": self.describe(), "expect": self.expect}
        if self.why:
            r["why"] = self.why
        if self.attribute is None:
            r.update(where=self.where, label=self.label, pattern=self.pattern,
                     index=None if self.elem is None else [int(i) for i in self.elem])
        else:
            r.update(attribute=self.attribute, store=self.store)
            v = self.value
            if isinstance(v, str) and len(v) > 200:
                v = {"prefix": v[:40], "length": len(v)}
            elif isinstance(v, bytes):
                v = {"bytes_hex": v[:200].hex(), "length": len(v)}
            r["value"] = v
        return r


def int_attr_values(orig):
    vals = [0, -1, 1, orig - 1, orig + 1, 2 * orig, 2**31 - 1, 2**31, U32_MAX, 2**32,
            2**53 + 1, I64_MAX, -2**63]
    out = []
    for v in vals:
        if v != orig and v not in out:
            out.append(v)
    return out


class Planner:
    """Every mutation of one seed, in a fixed order (objects by path, attributes by name)."""

    def __init__(self, seed):
        self.seed = seed
        self.out = []

    def add(self, m):
        if m.attribute is not None:
            m.akind = self.akind
        self.out.append(m)

    def plan(self):
        for path in sorted(self.seed.objects):
            o = self.seed.objects[path]
            for name in sorted(o.attrs):
                self.attribute(o, o.attrs[name])
            if o.is_dataset and o.data is not None:
                self.dataset(o)
        for i, m in enumerate(self.out):
            m.index = i
            m.id = "%s.%04d" % (self.seed.stem, i)
        return self.out

    # -- attributes --

    def attribute(self, o, a):
        if a.kind == "int":
            self.int_attribute(o, a)
        elif a.kind == "str":
            self.str_attribute(o, a)

    def int_context(self, o, name):
        """(extent: an extent attribute of §7's shape-limit list, least value, extra values)."""
        extents = ("k", "n", "in_stride", "out_stride", "requests", "block_rows", "cap",
                   "x_quant_group", "row_begin", "row_end", "group_size", "scale_rows", "vocab")
        least = {"k": 1, "n": 1, "in_stride": 1, "out_stride": 1, "requests": 1, "block_rows": 1,
                 "cap": 0, "x_quant_group": 1, "row_begin": 0, "row_end": 0, "group_size": 1,
                 "scale_rows": 1, "vocab": 1}.get(name)
        extra = []
        if o.role == "projection":
            g = self.seed.geometry(o.path)
            k = g["k"]
            if name in ("group_size", "x_quant_group"):
                extra = [3, k // 2, k + 1, 2 * k]
            if name == "k":
                extra = [g["in_stride"], g["in_stride"] + 1]
            if name == "cap":
                extra = [o.av("block_rows", 1), o.av("block_rows", 1) + 1]
        if o.role == "segment":
            k = self.seed.get(o.owner.split("/weight/")[0]).av("k", 0)
            rows = o.av("row_end", 0) - o.av("row_begin", 0)
            if name == "group_size":
                extra = [3, k // 2, k + 1, 2 * k, 32]
            if name == "scale_rows":
                extra = [rows, rows + 1, 2**31, U32_MAX]
            if name == "row_end":
                extra = [o.av("row_begin", 0)]
        if o.role == "root" and name == "ncert_schema_version":
            extra = [2, 3]
        return name in extents, least, extra

    def int_expect(self, o, name, v):
        """What an integer attribute value makes of the dump."""
        orig = o.attrs[name].value
        extent, least, _ = self.int_context(o, name)
        if v == orig:
            return "any", "unchanged"
        if v > I64_MAX or v < -2**63:
            return "refuse", "beyond 64 signed bits (dump-format §1)"
        if least is not None and v < least:
            return "refuse", "below the least value %d (§3.1 / §4.1 / §5.1)" % least
        if extent and v > U32_MAX:
            return "refuse", "an extent above 2^32 - 1 (shape-limit, §7)"
        if o.role == "root":
            if name == "ncert_schema_version":
                if v == 2:
                    return "any", "version 2 reads version 1"
                return "refuse", "a version other than 1 or 2 (228)"
            return "any", "not a format attribute"
        if o.role == "projection":
            if name == "k":
                return "reject", "K disagrees with the weights' shapes (224, or 309 for AF4)"
            if name == "n":
                return "reject", "N disagrees with the segments (308) or the shapes (224)"
            if name in ("in_stride", "out_stride"):
                return "reject", "a stride disagreeing with the arrays (224) or below K/N (306)"
            if name in ("requests", "block_rows"):
                return "reject", "R x B no longer M (224) or the request guards"
            if name == "cap":
                b = o.av("block_rows")
                if b is not None and v > b:
                    return "reject", "cap above block_rows (315)"
                return "any", "a cap the rows may respect"
            if name == "x_quant_group":
                return "reject", "x_scales no longer [M, K/g] (224) or g not dividing K (309)"
            return "any", "a label"
        if o.role == "segment":
            rows = o.av("row_end", 0) - o.av("row_begin", 0)
            if name in ("row_begin", "row_end"):
                return "reject", "rows disagree with the datasets (224) or tile badly (308)"
            if name == "group_size":
                return "reject", "group size against K and the scales' shape (309, 224)"
            if name == "scale_rows":
                if -(-rows // v) == -(-rows // orig):
                    return "any", "the same count of scale rows"
                return "reject", "scales no longer [ceil(rows/scale_rows), ...] (224)"
            return "any", "not a format attribute"
        if o.role == "run" and name == "vocab":
            return "refuse", "V disagrees with the logits (224)"
        return "any", "not a format attribute"

    def int_attribute(self, o, a):
        self.akind = "int"
        if a.value is None:
            return
        extent, least, extra = self.int_context(o, a.name)
        vals = int_attr_values(a.value)
        for v in extra:
            if v != a.value and v not in vals:
                vals.append(v)
        for v in vals:
            store = "int" if -2**63 <= v <= I64_MAX else "uint64"
            if store == "uint64" and v >= 2**64:
                continue
            exp, why = self.int_expect(o, a.name, v)
            self.add(Mutation(o.path, attribute=a.name, store=store, value=v, expect=exp, why=why,
                              akind="int"))
        # beyond 64 signed bits, as an unsigned 64-bit attribute
        for v in (2**63, 2**64 - 1):
            self.add(Mutation(o.path, attribute=a.name, store="uint64", value=v, expect="refuse",
                              why="does not fit in 64 signed bits (dump-format §1)"))
        # the same value in other storage: accepted (any integer type, one-element array) or not
        if -128 <= a.value <= 127:
            self.add(Mutation(o.path, attribute=a.name, store="int8", value=a.value, expect="any",
                              why="any HDF5 integer type is accepted (§1)"))
        self.add(Mutation(o.path, attribute=a.name, store="array1", value=[a.value], expect="any",
                          why="a one-element array is accepted (§1)"))
        defined = self.defined(o, a.name)
        self.add(Mutation(o.path, attribute=a.name, store="array2", value=[a.value, a.value],
                          expect="refuse" if defined else "any",
                          why="an array of several values (222)"))
        self.add(Mutation(o.path, attribute=a.name, store="float", value=float(a.value),
                          expect="refuse" if defined else "any",
                          why="a float where an int is expected (222)"))
        self.add(Mutation(o.path, attribute=a.name, store="vlen", value=str(a.value),
                          expect="refuse" if defined else "any",
                          why="a string where an int is expected (222)"))

    def defined(self, o, name):
        """Whether the format defines this attribute of this object (else it is ignored)."""
        if o.role == "root":
            return name in ("ncert_schema", "ncert_schema_version", "engine", "build", "model",
                            "device")
        if o.role == "projection":
            return name in ("op", "k", "n", "in_stride", "out_stride", "accumulator",
                            "output_dtype", "epilogue", "residual_at", "bias_at", "output_rounding",
                            "k_walk", "layer", "role", "logits_run", "requests", "block_rows",
                            "cap", "weights_xxh3", "x_quant", "x_quant_group", "x_quant_rounding")
        if o.role == "segment":
            return name in ("format", "row_begin", "row_end", "group_size", "scale_rows",
                            "variant", "codebook", "packing", "zero_point_packing", "dequant",
                            "dequant_op")
        if o.role == "run":
            return name in ("vocab", "tie_break", "prompt")
        if o.is_dataset:
            return name in ("dtype", "compare")
        return False

    def str_words(self, o, a):
        name, orig = a.name, a.value
        words = []
        if name == "k_walk":
            words = k_walk_words(self.seed.get(o.path).av("k", 0))
        elif name in WORDS:
            words = list(WORDS[name]) + list(NEAR_MISSES.get(name, ()))
        elif name == "compare":
            words = ["bitwise"] + list(NEAR_MISSES["compare"])
        elif name == "weights_xxh3":
            words = [orig.upper(), orig[:-1], orig + "0", "0" * 32, orig[:-1] + "g",
                     " " + orig[:-1], "%032x" % (int(orig, 16) ^ 1) if re.fullmatch(
                         "[0-9a-f]{32}", orig) else "0" * 31 + "1"]
        elif name == "logits_run":
            words = ["nope"] + [r.path.rsplit("/", 1)[1] for r in self.seed.runs()]
        elif name == "role":
            words = ["lm_head", "LM_HEAD", "lm-head", "attention"]
        generic = ["", " ", "bogus", orig + " ", " " + orig, orig.upper(), orig + "\n",
                   orig.replace("-", "\u2010") if "-" in orig else orig + "\u00e9",
                   "\x1b[31m" + orig]
        out = []
        for w in words + generic:
            if w != orig and w not in out:
                out.append(w)
        return out

    def str_expect(self, o, name, w):
        """What a string attribute value makes of the dump."""
        if not self.defined(o, name):
            return "any", "an attribute the format ignores"
        if name in FREE_TEXT and name not in ("role", "logits_run"):
            return "any", "free text"
        if "\x00" in w:
            return "refuse", "an embedded NUL (222, §7)"
        if name == "k_walk":
            proj = self.seed.get(o.path)
            exp = k_walk_expect(w, proj.av("k", 0))
            why = {"refuse": "not a §3.4 form (406)", "reject": "a split not dividing K (314)",
                   "any": "another valid walk"}[exp]
            return exp, why
        if name == "accumulator":
            exp = accumulator_expect(w)
            return exp, {"refuse": "not f32-rn, f32-rz, matrix-unit or u=<x>, 0 < x < 1/2 (405)",
                         "any": "another valid accumulator",
                         "unclear": "a number the doc's u=<x> does not spell out"}[exp]
        if name == "compare":
            # inspect and check do not read tensors: only compare refuses a policy (409)
            exp = compare_expect(w)
            return "any", ("a policy compare refuses (409)" if exp == "refuse"
                           else "a valid policy")
        if name == "weights_xxh3":
            if re.fullmatch("[0-9a-f]{32}", w):
                return "refuse-check", "a hash the weights do not have (222)"
            return "refuse", "not 32 lowercase hex digits (222)"
        if name == "logits_run":
            role = self.seed.get(o.path).av("role")
            if role != "lm_head":
                return "any", "logits_run without role lm_head"
            if w not in [r.path.rsplit("/", 1)[1] for r in self.seed.runs()]:
                return "refuse", "an lm_head naming no run (223)"
            return "reject", "an lm_head of another run (224 or logits differ)"
        if name == "role":
            return "any", "a label (an lm_head no longer: intervals SKIP)"
        valid = WORDS.get(name, ())
        if name == "dequant_op" and w in valid:
            zp = self.seed.get(o.path).av("variant") == "zero-point"
            ok = w in (("sub-mul", "fused") if zp else ("fma", "mul-add", "either"))
            return ("any", "another valid order") if ok else \
                ("refuse", "an order of the other variants (411)")
        if w not in valid:
            return "refuse", "not one of %s" % ", ".join(valid)
        if name in ("output_dtype", "format", "variant", "x_quant", "ncert_schema"):
            return "refuse", "the datasets' types or members no longer match"
        if name == "dtype" and o.role == "tensor":
            return "any", "check does not read tensors"
        if name in ("epilogue", "packing", "zero_point_packing", "codebook", "dtype"):
            return "reject", "the data now reads as something else"
        return "any", "another valid word"

    def str_attribute(self, o, a):
        self.akind = "str"
        if a.value is None:
            return
        defined = self.defined(o, a.name)
        for w in self.str_words(o, a):
            exp, why = self.str_expect(o, a.name, w)
            self.add(Mutation(o.path, attribute=a.name, store=a.storage, value=w, expect=exp,
                              why=why))
        orig = a.value
        # (check and inspect do not read a tensor's compare policy: nothing to refuse there)
        refuse_if_defined = "refuse" if defined and a.name != "compare" else "any"
        extra = [
            ("nul", orig + "\x00evil", refuse_if_defined, "an embedded NUL (222, §7)"),
            ("vlen-ascii", orig.encode("utf-8") + b"\xff\xfe",
             "any" if a.name in FREE_TEXT else refuse_if_defined,
             "invalid UTF-8: escaped when printed; not a valid word"),
            ("vlen", (orig or "x") * (LONG_STRING // max(1, len(orig))),
             "any" if a.name in FREE_TEXT else refuse_if_defined,
             "a 64 KiB string (under the 1 MiB limit)"),
            ("vlen", orig + "x" * (BIG_STRING - len(orig)), refuse_if_defined,
             "an attribute above 1 MiB (222, §1)"),
            ("spacepad", orig + "   ", "any",
             "a space-padded string loses its trailing blanks (§1)"),
            ("fixed", orig, "any", "fixed-length storage of the same word"),
            ("array1", [orig], "any", "a one-element array is accepted (§1)"),
            ("array2", [orig, orig], refuse_if_defined, "an array of several values (222)"),
            ("int", 1, refuse_if_defined, "a number where a string is expected (222)"),
        ]
        for store, value, exp, why in extra:
            self.add(Mutation(o.path, attribute=a.name, store=store, value=value, expect=exp,
                              why=why))

    # -- datasets --

    def read_mask(self, o):
        """(read, bitwise): the elements a check reads, and among them those it compares bit
        for bit with another dataset (identity, untouched, an lm_head's logits), where any
        change must be seen; (None, None) when no element is known to be read."""
        shape = o.shape
        if not shape or o.data is None or o.data.size == 0:
            return None, None
        s = self.seed
        read = np.zeros(shape, bool)
        bits = np.zeros(shape, bool)
        if o.role == "projection-member":
            g = s.geometry(o.owner)
            k, n, sel, has = g["k"], g["n"], g["selector"], g["has"]
            chosen = g["selected"]
            if o.member == "x":
                read[:, :k] = True
            elif o.member in ("x_quantized", "x_scales", "x_zero_points", "bias",
                              "commit_counts", "selector"):
                read[...] = True
            elif o.member == "residual":
                read[:, :n] = True
            elif o.member == "y_unpacked":
                read[:, :n] = True
                if "y_packed" in has or "y_compact" in has:
                    for r in chosen:
                        bits[r, :n] = True
                lm = o.owner if s.get(o.owner).av("role") == "lm_head" else None
                if lm and s.get("/logits/" + str(s.get(o.owner).av("logits_run"))):
                    bits[:, :n] = True
            elif o.member == "y_packed":
                for r in chosen:
                    read[r, :n] = True
                    if "y_unpacked" in has or "y_compact" in has:
                        bits[r, :n] = True
                if "y_before" in has:
                    rest = ~read
                    read[rest] = True
                    bits[rest] = True
            elif o.member == "y_compact":
                for p, r in enumerate(sel):
                    if 0 <= r < g["m"]:
                        read[p, :n] = True
                        if "y_packed" in has or "y_unpacked" in has:
                            bits[p, :n] = True
            elif o.member == "y_before":
                if "y_packed" in has:
                    read[...] = True
                    for r in chosen:
                        read[r, :n] = False
                    bits[...] = read
            else:
                return None, None
            return read, bits
        if o.role == "segment-member":
            if o.member in ("values", "scales", "biases", "codes", "zero_points"):
                read[...] = True
                return read, bits
            return None, None  # a codebook entry may be unused
        if o.role == "run-member" and o.member in ("logits", "tokens"):
            read[...] = True
            if o.member == "logits" and s.lm_head_of(o.owner):
                bits[...] = True
            return read, bits
        return None, None

    def positions(self, o):
        """(name, index or None for every element) of the elements to change."""
        shape = o.shape
        first = tuple(0 for _ in shape)
        last = tuple(d - 1 for d in shape)
        out = [("first", first), ("last", last), ("all", None)]
        if len(shape) == 2 and o.role == "projection-member":
            g = self.seed.geometry(o.owner)
            width = g["k"] if o.member == "x" else g["n"] if o.member in (
                "residual", "y_unpacked", "y_packed", "y_compact", "y_before") else None
            if width and shape[1] > width:
                out.append(("last-valid", (shape[0] - 1, width - 1)))
                out.append(("first-pad", (shape[0] - 1, width)))
        if o.role == "run-member" and o.member == "logits" and len(shape) == 2:
            tok = self.seed.member(o.owner, "tokens")
            if tok is not None and tok.data is not None and tok.data.size:
                t0 = int(tok.data.astype(np.uint32).view(np.int32)[0])
                if 0 <= t0 < shape[1]:
                    out.append(("token", (0, t0)))
        seen = []
        res = []
        for name, idx in out:
            if idx is not None and idx in seen:
                continue
            if idx is not None:
                seen.append(idx)
            res.append((name, idx))
        return res

    def data_expect(self, o, where, idx, label, pattern, masks, new):
        """What the mutated elements make of the dump (new: the whole mutated raw array)."""
        s = self.seed
        if o.role == "tensor" or o.role == "tensor-group":
            return "any", "check does not read tensors"
        if o.role == "run-member" and o.member in ("positions", "prompt_tokens"):
            return "any", "labels and compare/forks data"
        if o.role == "segment-member" and o.member == "zero_points":
            bad = zero_points_invalid(s.get(o.owner), s, new)
            if bad:
                return "refuse-check", bad
        if o.role == "run-member" and o.member == "tokens":
            v = s.get(o.owner).av("vocab", 0)
            vals = new.astype(np.uint32).view(np.int32)
            if np.any((vals < 0) | (vals >= v)):
                return "reject", "a token outside [0, V)"
            return "any", "another token (may be the argmax)"
        if o.role == "projection-member" and o.member == "selector":
            g = s.geometry(o.owner)
            vals = new.astype(np.uint32).view(np.int32)
            if np.any((vals < -1) | (vals >= g["m"])):
                return "reject", "a selector row outside [-1, M) (300)"
            real = vals[vals >= 0]
            if len(set(real.tolist())) != len(real):
                return "reject", "a row selected twice (301)"
            if real.size == 0:
                return "reject", "no row selected (vacuity)"
            return "any", "another valid selection"
        if o.role == "projection-member" and o.member == "commit_counts":
            p = s.get(o.owner)
            if all(p.av(a) is not None for a in ("block_rows", "cap")):
                return "reject", "counts that disagree with the selector (304)"
            return "any", "the per-request guards do not run"
        mask, bits = masks
        if mask is None:
            return "any", "an element no check is known to read"
        touched = mask if idx is None else mask[idx]
        if not np.any(touched):
            return "any", "padding or an element never compared"
        if np.any(bits if idx is None else bits[idx]):
            return "reject", "an element compared bit for bit (identity, untouched or logits)"
        if o.etype in FLOAT_TYPES:
            if o.role == "run-member" and o.member == "logits":
                if label in ("NaN", "sNaN", "-NaN", "+inf"):
                    return "reject", "a NaN or +inf in a logits row fails its witness (§5.1)"
                if label in ("max-finite", "1e30") and where != "token":
                    return "reject", "a new row maximum that is not the emitted token"
                if label == "-inf" and where in ("token", "all"):
                    return "reject", "the emitted token's logit masked out"
                return "any", "-inf is a masked entry; other values may keep the argmax"
            if label in LOUD:
                return "reject", "a non-finite or absurd value in data a check reads"
            if idx is None:
                return "reject", "every element replaced"
            if o.role == "projection-member" and o.member == "x_scales":
                return "reject", "an x_scale not positive, or not the codes' scale"
            return "any", "a small change may hide in the bound"
        # integer data: weights' codes and values, quantized activations
        if idx is None:
            return "reject", "every element replaced"
        return "any", "one integer changed"

    def dataset(self, o):
        et = o.etype
        masks = self.read_mask(o)
        positions = self.positions(o)
        if et in FLOAT_TYPES:
            values = FLOAT_PATTERNS[et]
        else:
            values = int_data_values(o, self.seed)
        old = o.data
        for label, pattern in values:
            for where, idx in positions:
                if label in FIRST_ONLY and where != "first":
                    continue
                new = old.copy()
                if idx is None:
                    new[...] = pattern
                else:
                    new[idx] = pattern
                if np.array_equal(new, old):
                    continue
                exp, why = self.data_expect(o, where, idx, label, pattern, masks, new)
                self.add(Mutation(o.path, where=where, elem=idx, label=label,
                                  pattern=int(pattern), expect=exp, why=why))


def int_data_values(o, seed):
    """(label, pattern) of the integer values written into a dataset."""
    et = o.etype
    lo, hi = INT_RANGES[et]
    vals = [("0", 0), ("-1", -1), ("1", 1), ("max", hi), ("min", lo)]
    if o.role == "projection-member":
        g = seed.geometry(o.owner)
        if o.member == "selector":
            vals += [("M", g["m"]), ("-2", -2), ("M-1", g["m"] - 1)]
        if o.member == "commit_counts":
            vals += [("block_rows+1", seed.get(o.owner).av("block_rows", 1) + 1)]
    if o.role == "run-member" and o.member == "tokens":
        v = seed.get(o.owner).av("vocab", 0)
        vals += [("V", v), ("V-1", v - 1)]
    if o.role == "segment-member" and o.member == "zero_points":
        vals += [("16", 16), ("15", 15), ("0xf0", 0xF0), ("0x0f", 0x0F)]
        if et == "u32":
            vals += [("0xf0000000", 0xF0000000), ("0x0fffffff", 0x0FFFFFFF)]
    if o.role == "segment-member" and o.member == "codes" and et == "u32":
        vals += [("0x80000000", 0x80000000)]
    out = []
    for label, v in vals:
        if lo <= v <= hi and (label, v) not in out and v not in [x[1] for x in out]:
            out.append((label, v))
    return [(label, to_pattern(v, et)) for label, v in out]


def zero_points_invalid(seg, seed, stored):
    """Why stored zero points are refused (a value above 15, a nonzero unused nibble), or ''."""
    proj = seed.get(seg.owner.split("/weight/")[0])
    k = proj.av("k", 0)
    gs = seg.av("group_size", 0)
    if not gs or k % gs:
        return ""
    groups = k // gs
    packing = seg.av("zero_point_packing", "u8")
    rows = stored.reshape(stored.shape[0], -1) if stored.ndim >= 1 else stored
    for r in range(rows.shape[0]):
        row = rows[r]
        if packing == "u8":
            if np.any(row[:groups] > 15):
                return "a zero point above 15 (222, §4.2)"
            continue
        per = 8 if packing == "u32-lsb" else 2
        nibbles = []
        for word in row.tolist():
            for j in range(per):
                if packing == "u8-msb":
                    nibbles.append((word >> (4 * (1 - j))) & 0xF)
                else:
                    nibbles.append((word >> (4 * j)) & 0xF)
        if any(nibbles[groups:]):
            return "a nonzero unused trailing nibble (222, §4.2)"
    return ""


# ---- writing a mutant -------------------------------------------------------------------------

def write_string_attr(obj, name, value, store):
    if store == "nul":  # a fixed-length string holding a NUL followed by more text
        obj.attrs.create(name, np.bytes_(value.encode("utf-8", "surrogateescape")))
        return
    if store == "fixed":
        b = value.encode("utf-8", "surrogateescape")
        obj.attrs.create(name, np.array(b, dtype="S%d" % max(1, len(b))))
        return
    if store == "spacepad":
        b = value.encode("utf-8")
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(len(b))
        tid.set_strpad(h5py.h5t.STR_SPACEPAD)
        tid.set_cset(h5py.h5t.CSET_UTF8)
        aid = h5py.h5a.create(obj.id, name.encode(), tid, h5py.h5s.create(h5py.h5s.SCALAR))
        aid.write(np.array(b, dtype="S%d" % len(b)), mtype=tid)
        aid.close()
        return
    if store == "vlen-ascii":
        obj.attrs.create(name, value, dtype=h5py.string_dtype("ascii"))
        return
    obj.attrs.create(name, value, dtype=h5py.string_dtype("utf-8"))


def apply_mutation(path, seed, m):
    """Writes mutation m into the file at path (a copy of the seed)."""
    with h5py.File(path, "r+") as f:
        obj = f[m.object] if m.object != "/" else f
        if m.attribute is not None:
            name = m.attribute
            if name in obj.attrs:
                del obj.attrs[name]
            v, store = m.value, m.store
            if store in ("vlen", "fixed", "spacepad", "vlen-ascii", "nul"):
                write_string_attr(obj, name, v, store)
            elif store == "int":
                orig = seed.get(m.object).attrs[name].storage
                dt = orig if isinstance(orig, np.dtype) and orig.kind in "iu" and \
                    np.iinfo(orig).min <= v <= np.iinfo(orig).max else np.dtype(np.int64)
                obj.attrs.create(name, v, dtype=dt)
            elif store == "uint64":
                obj.attrs.create(name, v, dtype=np.uint64)
            elif store == "int8":
                obj.attrs.create(name, v, dtype=np.int8)
            elif store == "float":
                obj.attrs.create(name, v, dtype=np.float64)
            elif store in ("array1", "array2"):
                if isinstance(v[0], str):
                    obj.attrs.create(name, v, dtype=h5py.string_dtype("utf-8"))
                else:
                    obj.attrs.create(name, np.array(v, dtype=np.int64))
            else:
                raise ValueError("unknown attribute storage %r" % store)
            return
        dset = obj
        arr = read_raw(dset)
        idx = m.elem
        if idx is None:
            arr[...] = m.pattern
        else:
            arr[idx] = m.pattern
        write_raw(dset, arr)


# ---- the built-in version 2 seeds -------------------------------------------------------------
# Small dumps of every version 2 feature ncert's demo lacks, each one passing `ncert check`: the
# walks lanes:8:pairs, splitk:2:pairs/seq-fma, promote:16:12:rz:fma and
# lanes:8:butterfly(4,1,2):fma emulated bit for bit; f16 activations, weights, biases, residuals
# (at the output), outputs and logits; AF4 zero-point (u32-lsb and u8-msb zero points, sub-mul
# and fused), affine with f16 scales, custom and af4-64 codebooks; int8, e4m3 and e5m2 weights per
# block, channel and tensor; int8, uint8 (with zero points), e4m3 and e5m2 activations; bf16
# logits compressed; FP8, f32 and 0-d tensors with compare policies; a weights hash.

def _add32(a, b):
    return np.add(a, b, dtype=np.float32)


def _mul32(a, b):
    return np.multiply(a, b, dtype=np.float32)


def _sum_odd(a, b):
    """a + b (float64) rounded to odd: rounding that again to 24 bits or fewer rounds once."""
    s = a + b
    z = s - a
    err = (a - (s - z)) + (b - z)
    toward = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
    odd = (s.view(np.int64) & 1) == 1
    return np.where((err == 0) | odd, s, toward)


def _fma32(a, b, c):
    return _sum_odd(a.astype(np.float64) * b.astype(np.float64),
                    c.astype(np.float64)).astype(np.float32)


def _round_bits(v, p, rnd):
    mant, e = np.frexp(v)
    s = np.ldexp(mant, p)
    return np.ldexp(np.trunc(s) if rnd == "rz" else np.rint(s), e - p)


def _tree(vals, form):
    v = list(vals)
    n = len(v)
    if form == "seq":
        t = v[0]
        for u in v[1:]:
            t = _add32(t, u)
        return t
    if form == "halving":
        dists = [n >> i for i in range(1, n.bit_length())]
    elif form == "pairs":
        dists = [1 << i for i in range(n.bit_length() - 1)]
    else:
        dists = [int(t) for t in form[len("butterfly("):-1].split(",")]
    for d in dists:
        v = [_add32(v[i], v[i + d]) if not (i & d) else v[i] for i in range(n)]
    return v[0]


def emulate_walk(x, w, form):
    """Every row of x [M, K] against every row of w [N, K] (f32) in the k_walk order `form`."""
    m, k = x.shape
    n = w.shape[0]
    a = np.broadcast_to(x[:, None, :], (m, n, k))
    b = np.broadcast_to(w[None, :, :], (m, n, k))
    fma = form.endswith(":fma")
    base = form[:-4] if fma else form
    if base == "seq-fma":
        base, fma = "seq", True

    def step(acc, kk):
        if fma:
            return _fma32(a[:, :, kk], b[:, :, kk], acc)
        return _add32(acc, _mul32(a[:, :, kk], b[:, :, kk]))
    if base.startswith("splitk:"):
        s_txt, rest = base[len("splitk:"):].split(":", 1)
        s = int(s_txt)
        tr, inner = rest.split("/", 1)
        part = k // s
        return _tree([emulate_walk(x[:, j * part:(j + 1) * part], w[:, j * part:(j + 1) * part],
                                   inner) for j in range(s)], tr)
    if base == "seq":
        acc = np.zeros((m, n), np.float32)
        for kk in range(k):
            acc = step(acc, kk)
        return acc
    if base.startswith("lanes:"):
        _, l_txt, tr = base.split(":", 2)
        lanes = [np.zeros((m, n), np.float32) for _ in range(int(l_txt))]
        for kk in range(k):
            lanes[kk % len(lanes)] = step(lanes[kk % len(lanes)], kk)
        return _tree(lanes, tr)
    if base.startswith("promote:"):
        _, blk, p, rnd = base.split(":")
        blk, p = int(blk), int(p)
        total = None
        for j0 in range(0, k, blk):
            acc = np.zeros((m, n), np.float64)
            for kk in range(j0, min(k, j0 + blk)):
                prod = a[:, :, kk].astype(np.float64) * b[:, :, kk].astype(np.float64)
                if not fma:
                    prod = _round_bits(prod, p, rnd)
                acc = _round_bits(_sum_odd(prod, acc), p, rnd)
            bj = acc.astype(np.float32)
            total = bj if total is None else _add32(total, bj)
        return total
    raise ValueError("no emulation of k_walk %r" % form)


class SeedBuilder:
    """The built-in version 2 seeds, written with python/ncert_dump."""

    def __init__(self):
        sys.path.insert(0, os.path.join(REPO, "python"))
        import ncert_dump
        from ncert_dump import af4, codecs, quant
        self.nd, self.af4, self.codecs, self.quant = ncert_dump, af4, codecs, quant

    def narrow(self, v, dtype, rounding="rne"):
        if dtype == "f32":
            return np.asarray(v, np.float64).astype(np.float32)
        return self.codecs.round_narrow(np.asarray(v), dtype, rounding)

    def widen(self, p, dtype):
        if dtype == "f32":
            return np.asarray(p, np.float32)
        return self.codecs.decode(p, dtype).astype(np.float32)

    def outputs(self, acc, out_dtype, n, out_stride, bias=None, residual=None, residual_at="f32",
                rounding="rne"):
        """The epilogue of §3.3 on f32 accumulators (or exact float64 sums), padded."""
        f32 = acc.dtype == np.float32
        v = acc
        if bias is not None:
            v = _add32(v, bias[None, :]) if f32 else v + bias[None, :]
        res = None if residual is None else residual[:, :n]
        if res is not None and residual_at == "f32":
            v = _add32(v, res) if f32 else v + res
        y = self.narrow(v, out_dtype, rounding)
        if res is not None and residual_at == "output":
            y = self.narrow(self.widen(y, out_dtype).astype(np.float64) + res.astype(np.float64),
                            out_dtype, rounding)
        full = np.zeros((acc.shape[0], out_stride), y.dtype)
        full[:, :n] = y
        full[:, n:] = self.narrow(np.full((acc.shape[0], out_stride - n), 7.0), out_dtype)
        return full

    @staticmethod
    def scatter(y, selector, n, before):
        packed = before.copy()
        compact = np.zeros((len(selector), y.shape[1]), y.dtype)
        for p, r in enumerate(selector):
            if r >= 0:
                packed[r, :n] = y[r, :n]
                compact[p] = y[r]
        return packed, compact

    def write_all(self, directory):
        os.makedirs(directory, exist_ok=True)
        paths = [os.path.join(directory, name) for name in BUILTIN_SEEDS]
        self.walks(paths[0])
        self.quantized(paths[1])
        self.large(paths[2])
        return paths

    def large(self, path):
        """Weights big enough (3.4 MB) for the reader's large-dataset path and for an over-read
        of a dataset to leave its allocation: AF4 zero-point, 512 x 8192 in groups of 8, f16
        scales, 256 KiB of zero points packed u8-lsb."""
        Segment, af4 = self.nd.Segment, self.af4
        rng = np.random.default_rng(5)
        m, k, n, gs = 2, 8192, 512, 8
        codes = rng.integers(0, 16, (n, k))
        zps = rng.integers(0, 16, (n, k // gs))
        sc = (rng.standard_normal((n, k // gs)) / 64).astype(np.float16)
        w = af4.dequantize(codes, sc.astype(np.float32), group_size=gs, variant="zero-point",
                           zero_points=zps)
        x = rng.standard_normal((m, k)).astype(np.float32)
        y = (x.astype(np.float64) @ np.asarray(w, np.float64).T).astype(np.float32)
        with self.nd.DumpWriter(path, engine="values-fuzz", build="v2-large",
                                overwrite=True) as dw:
            dw.add_projection("big", x=x, weights=[Segment("af4", 0, n, codes=codes, scales=sc,
                                                           zero_points=zps, group_size=gs,
                                                           variant="zero-point", packing="u8-lsb",
                                                           zero_point_packing="u8-lsb",
                                                           name="zp")],
                              accumulator="f32-rn", output_dtype="f32",
                              selector=np.arange(m, dtype=np.int32), y_unpacked=y,
                              y_packed=y.copy())

    def walks(self, path):
        Segment, af4, widen, narrow = self.nd.Segment, self.af4, self.widen, self.narrow
        rng = np.random.default_rng(20240607)
        m, k, n = 4, 64, 16
        sel = np.arange(m, dtype=np.int32)
        with self.nd.DumpWriter(path, engine="values-fuzz", build="v2-walks", model="toy",
                                device="cpu", overwrite=True) as dw:
            # lanes:8:pairs: f32 x, bf16 + f16 segments, f16 bias, bf16 outputs
            x = rng.standard_normal((m, k)).astype(np.float32)
            w_bf = narrow(rng.standard_normal((8, k)) / 8, "bf16")
            w_h = narrow(rng.standard_normal((8, k)) / 8, "f16")
            w = np.concatenate([widen(w_bf, "bf16"), widen(w_h, "f16")])
            bias = narrow(rng.standard_normal(n) / 4, "f16")
            y = self.outputs(emulate_walk(x, w, "lanes:8:pairs"), "bf16", n, n,
                             bias=widen(bias, "f16"))
            dw.add_projection("lanes", x=x,
                              weights=[Segment("bf16", 0, 8, values=w_bf),
                                       Segment("f16", 8, 16, values=w_h)],
                              accumulator="f32-rn", output_dtype="bf16", epilogue="bias",
                              bias=bias, bias_dtype="f16", selector=sel, k_walk="lanes:8:pairs",
                              y_unpacked=y, y_packed=y.copy(), y_compact=y.copy(), layer=0)
            # splitk:2:pairs/seq-fma: bf16 x (stride 72), AF4 zero-point (u32-lsb zero points,
            # f32 sub-mul) and int8 (f32, 2-row scale blocks), f16 outputs with the residual
            # added at the output, packed with request geometry and y_before
            in_stride, out_stride = 72, 20
            xb = narrow(rng.standard_normal((m, in_stride)), "bf16")
            codes = rng.integers(0, 16, (8, k))
            zps = rng.integers(0, 16, (8, 2))
            sc = (rng.standard_normal((8, 2)) / 16).astype(np.float32)
            seg_zp = Segment("af4", 0, 8, codes=codes, scales=sc, zero_points=zps, group_size=32,
                             variant="zero-point", packing="u32-lsb",
                             zero_point_packing="u32-lsb", dequant="f32", dequant_op="sub-mul",
                             name="zp")
            w_zp = af4.dequantize(codes, sc, group_size=32, variant="zero-point", dequant="f32",
                                  dequant_op="sub-mul", zero_points=zps, activation="bf16")
            q8 = rng.integers(-127, 128, (8, k)).astype(np.int8)
            s8 = (np.abs(rng.standard_normal((4, 2))) / 64 + 1e-3).astype(np.float32)
            seg_i8 = Segment("int8", 8, 16, values=q8, scales=s8, group_size=32, scale_rows=2,
                             dequant="f32", name="i8")
            w_i8 = _mul32(q8.astype(np.float32), np.repeat(np.repeat(s8, 2, 0), 32, 1))
            w = np.concatenate([np.asarray(w_zp, np.float32), w_i8])
            acc = emulate_walk(widen(xb, "bf16")[:, :k], w, "splitk:2:pairs/seq-fma")
            resid = narrow(rng.standard_normal((m, out_stride)), "f16")
            y = self.outputs(acc, "f16", n, out_stride, residual=widen(resid, "f16"),
                             residual_at="output")
            selector = np.array([0, 1, 2, -1], np.int32)
            packed, compact = self.scatter(y, selector, n, resid)
            dw.add_projection("splitk", x=xb, x_dtype="bf16", weights=[seg_zp, seg_i8],
                              accumulator="f32-rn", output_dtype="f16", epilogue="residual",
                              residual=resid, residual_dtype="f16", residual_at="output",
                              selector=selector, requests=2, block_rows=2, cap=2,
                              commit_counts=np.array([2, 1], np.int32),
                              k_walk="splitk:2:pairs/seq-fma", y_unpacked=y, y_packed=packed,
                              y_compact=compact, y_before=resid.copy(), in_stride=in_stride,
                              out_stride=out_stride, weights_hash=True)
            # promote:16:12:rz:fma: f32 x, e4m3 weights per channel (f32 scales, f32 dequant)
            xf = rng.standard_normal((m, k)).astype(np.float32)
            q_e4 = self.codecs.round_narrow(rng.standard_normal((n, k)) * 4, "e4m3", "rne",
                                            "saturate")
            s_e4 = (np.abs(rng.standard_normal((n, 1))) / 32 + 1e-3).astype(np.float32)
            w = _mul32(widen(q_e4, "e4m3"), np.repeat(s_e4, k, axis=1))
            y = self.outputs(emulate_walk(xf, w, "promote:16:12:rz:fma"), "f32", n, n)
            dw.add_projection("promote", x=xf, weights=[Segment("e4m3", 0, n, values=q_e4,
                                                                scales=s_e4, group_size=k,
                                                                dequant="f32")],
                              accumulator="f32-rn", output_dtype="f32", selector=sel,
                              k_walk="promote:16:12:rz:fma", y_unpacked=y, y_packed=y.copy())
            # lanes:8:butterfly(4,1,2):fma: f16 x, AF4 affine (f16 scales, f32 fma) and a custom
            # codebook, bias and residual in f32, f32 outputs
            xh = narrow(rng.standard_normal((m, k)), "f16")
            ca, sa, ba = af4.quantize_affine(rng.standard_normal((8, k)), 16, "f16")
            seg_aff = Segment("af4", 0, 8, codes=ca, scales=sa.astype(np.float16),
                              biases=ba.astype(np.float16), scale_dtype="f16", group_size=16,
                              variant="affine", packing="u8-lsb", dequant="f32",
                              dequant_op="fma", name="aff")
            w_aff = af4.dequantize(ca, sa, ba, group_size=16, variant="affine", dequant="f32",
                                   dequant_op="fma", activation="f32")
            table = np.sort(rng.standard_normal(16)).astype(np.float32)
            cc, scb = af4.quantize_codebook(rng.standard_normal((8, k)), 32, table, "f32")
            seg_cb = Segment("af4", 8, 16, codes=cc, scales=scb, group_size=32,
                             variant="codebook", codebook=table, packing="u8-msb", dequant="f32",
                             name="cb")
            w_cb = af4.dequantize(cc, scb, group_size=32, variant="codebook", codebook=table,
                                  dequant="f32", activation="f32")
            w = np.concatenate([np.asarray(w_aff, np.float32), np.asarray(w_cb, np.float32)])
            bias32 = rng.standard_normal(n).astype(np.float32)
            res32 = rng.standard_normal((m, n)).astype(np.float32)
            y = self.outputs(emulate_walk(widen(xh, "f16"), w, "lanes:8:butterfly(4,1,2):fma"),
                             "f32", n, n, bias=bias32, residual=res32)
            dw.add_projection("butterfly", x=xh, x_dtype="f16", weights=[seg_aff, seg_cb],
                              accumulator="f32-rn", output_dtype="f32", epilogue="bias+residual",
                              bias=bias32, residual=res32, selector=sel,
                              k_walk="lanes:8:butterfly(4,1,2):fma", y_unpacked=y,
                              y_packed=y.copy(), y_compact=y.copy())
            # an lm_head with f16 outputs and its run's f16 logits
            t, v = 5, 32
            xl = narrow(rng.standard_normal((t, k)), "bf16")
            wl = narrow(rng.standard_normal((v, k)) / 4, "bf16")
            y = self.outputs(emulate_walk(widen(xl, "bf16"), widen(wl, "bf16"), "seq"), "f16",
                             v, v)
            dw.add_projection("lm_head", x=xl, x_dtype="bf16",
                              weights=[Segment("bf16", 0, v, values=wl)], accumulator="f32-rn",
                              output_dtype="f16", selector=np.arange(t, dtype=np.int32),
                              k_walk="seq", y_unpacked=y, role="lm_head", logits_run="gen16")
            dw.add_logits_run("gen16", tokens=widen(y, "f16").argmax(axis=1).astype(np.int32),
                              logits=y, logits_dtype="f16",
                              positions=np.arange(3, 3 + t, dtype=np.int64),
                              prompt_tokens=np.array([1, 2, 3], np.int32), prompt="p16")

    def quantized(self, path):
        Segment, af4, widen, narrow = self.nd.Segment, self.af4, self.widen, self.narrow
        qa, dqa = self.quant.quantize_activations, self.quant.dequantize_activations
        rng = np.random.default_rng(99)
        m, k, n = 4, 64, 16
        sel = np.arange(m, dtype=np.int32)

        def exact(xdq, w64, out_dtype, rounding="rne", bias=None):
            return self.outputs(xdq @ w64.T, out_dtype, n, n, bias=bias, rounding=rounding)
        with self.nd.DumpWriter(path, engine="values-fuzz", build="v2-quant",
                                overwrite=True) as dw:
            # W8A8: f16 x quantized to int8 per 32 columns, int8 weights in 2 x 32 blocks
            x = narrow(rng.standard_normal((m, k)), "f16")
            xq, xs, _ = qa(x, k, "int8", group=32, x_dtype="f16", scale_dtype="f16")
            q8 = rng.integers(-127, 128, (n, k)).astype(np.int8)
            s8 = narrow(np.abs(rng.standard_normal((n // 2, 2))) / 64 + 1e-3, "f16")
            w64 = q8.astype(np.float64) * np.repeat(np.repeat(
                widen(s8, "f16").astype(np.float64), 2, 0), 32, 1)
            y = exact(dqa(xq, xs, "int8"), w64, "bf16")
            dw.add_projection("w8a8", x=x, x_dtype="f16",
                              weights=[Segment("int8", 0, n, values=q8, scales=s8,
                                               scale_dtype="f16", group_size=32, scale_rows=2)],
                              accumulator="f32-rn", output_dtype="bf16", selector=sel,
                              x_quant="int8", x_quant_group=32, x_quantized=xq,
                              x_scales=xs.astype(np.float16), x_scales_dtype="f16",
                              y_unpacked=y, y_packed=y.copy())
            # FP8: bf16 x to e4m3 per token, e5m2 weights with one bf16 scale, f16 rz outputs
            x = narrow(rng.standard_normal((m, k)), "bf16")
            xq, xs, _ = qa(x, k, "e4m3", x_dtype="bf16")
            q5 = self.codecs.round_narrow(rng.standard_normal((n, k)) * 8, "e5m2")
            w64 = widen(q5, "e5m2").astype(np.float64) * 0.0625
            y = exact(dqa(xq, xs, "e4m3"), w64, "f16", rounding="rz")
            dw.add_projection("fp8", x=x, x_dtype="bf16",
                              weights=[Segment("e5m2", 0, n, values=q5,
                                               scales=narrow(np.array([[0.0625]]), "bf16"),
                                               scale_dtype="bf16", group_size=k, scale_rows=n)],
                              accumulator="matrix-unit", output_dtype="f16", output_rounding="rz",
                              selector=sel, x_quant="e4m3", x_quantized=xq, x_scales=xs,
                              y_unpacked=y, y_packed=y.copy())
            # uint8 with zero points (rna, groups of 16), AF4 af4-64 codebook, bf16 bias
            x = rng.standard_normal((m, k)).astype(np.float32)
            xq, xs, xz = qa(x, k, "uint8", group=16, rounding="rna", asymmetric=True)
            cc, scb = af4.quantize_codebook(rng.standard_normal((n, k)), 16, "af4-64", "bf16")
            w64 = af4.dequantize(cc, scb, group_size=16, variant="codebook", codebook="af4-64")
            bias = narrow(rng.standard_normal(n), "bf16")
            y = exact(dqa(xq, xs, "uint8", xz), w64, "f32",
                      bias=widen(bias, "bf16").astype(np.float64))
            dw.add_projection("u8zp", x=x, weights=[Segment("af4", 0, n, codes=cc,
                                                            scales=narrow(scb, "bf16"),
                                                            scale_dtype="bf16", group_size=16,
                                                            variant="codebook", codebook="af4-64",
                                                            packing="u32-lsb")],
                              accumulator="u=1e-06", output_dtype="f32", epilogue="bias",
                              bias=bias, bias_dtype="bf16", selector=sel, x_quant="uint8",
                              x_quant_group=16, x_quant_rounding="rna", x_quantized=xq,
                              x_scales=xs, x_zero_points=xz, y_unpacked=y, y_packed=y.copy(),
                              y_compact=y.copy())
            # e5m2 activations per 32 columns; f32 weights and AF4 zero-point (u8-msb zero
            # points, fused), bf16 outputs rounded "any"
            x = rng.standard_normal((m, k)).astype(np.float32)
            xq, xs, _ = qa(x, k, "e5m2", group=32, scale_dtype="bf16")
            wf = rng.standard_normal((8, k)).astype(np.float32)
            codes = rng.integers(0, 16, (8, k))
            zps = rng.integers(0, 16, (8, 4))
            sc = narrow(rng.standard_normal((8, 4)) / 16, "bf16")
            seg_zp = Segment("af4", 8, 16, codes=codes, scales=sc, scale_dtype="bf16",
                             zero_points=zps, group_size=16, variant="zero-point",
                             packing="u8-msb", zero_point_packing="u8-msb", dequant="f32",
                             dequant_op="fused", name="zp")
            w_zp = af4.dequantize(codes, widen(sc, "bf16"), group_size=16, variant="zero-point",
                                  dequant="f32", dequant_op="fused", zero_points=zps,
                                  activation="f32")
            w64 = np.concatenate([wf, np.asarray(w_zp, np.float32)]).astype(np.float64)
            y = exact(dqa(xq, xs, "e5m2"), w64, "bf16")
            dw.add_projection("e5m2act", x=x, weights=[Segment("f32", 0, 8, values=wf, name="f"),
                                                       seg_zp],
                              accumulator="f32-rz", output_dtype="bf16", output_rounding="any",
                              selector=sel, x_quant="e5m2", x_quant_group=32, x_quantized=xq,
                              x_scales=xs, x_scales_dtype="bf16", y_unpacked=y)
            # bf16 logits without an lm_head, chunked and compressed; tensors
            lg = narrow(rng.standard_normal((6, 40)) * 3, "bf16")
            dw.add_logits_run("genbf", tokens=widen(lg, "bf16").argmax(axis=1).astype(np.int32),
                              logits=lg, logits_dtype="bf16", tie_break="lowest", chunk_rows=2,
                              compression="deflate")
            dw.add_tensor("kv/e5m2", self.codecs.round_narrow(rng.standard_normal((2, 3, 8)),
                                                              "e5m2"),
                          dtype="e5m2", compare="ulp:2")
            dw.add_tensor("state", rng.standard_normal((3, 5)).astype(np.float32),
                          compare="abs:1e-3,rel:1e-2")
            dw.add_tensor("scalar", np.array(1.5, np.float32))


# ---- running ncert on a mutant ----------------------------------------------------------------

def escaped_forms(text):
    """The ways a message may print a string value: as is, or escaped as docs/cli.md says."""
    forms = {text}
    b = text.encode("utf-8", "surrogateescape")
    esc = []
    for ch in b.decode("utf-8", "backslashreplace"):
        o = ord(ch)
        if ch == "\n":
            esc.append("\\n")
        elif ch == "\t":
            esc.append("\\t")
        elif ch == "\r":
            esc.append("\\r")
        elif o < 0x20 or o == 0x7F:
            esc.append("\\x%02x" % o)
        else:
            esc.append(ch)
    s = "".join(esc)
    forms.add(s)
    forms.add(re.sub(r"\\x([0-9a-f]{2})", lambda mm: "\\x" + mm.group(1).upper(), s))
    return forms


# Refusals about a value itself: their message should show it (docs/dump-format.md §7 names the
# object, the attribute and the value). Other refusals (a shape, a type, a missing member) state
# the consequence of the value, which need not repeat it.
VALUE_ERRORS = ("attribute-invalid", "schema-version", "schema-unknown", "shape-limit",
                "policy-invalid", "k-walk-invalid")


def judge_refusal(m, message, error_name, mutant_path):
    """(names_file, names_object, names_value) of an exit-3 message for mutation m; names_value
    is None where the value need not be named."""
    names_file = mutant_path in message or os.path.basename(mutant_path) in message
    obj = m.object
    if obj == "/":
        ok = re.search(r"(^|: )/(: |$| )", message) is not None and \
            (m.attribute is None or m.attribute in message)
        # a version too low is refused naming the member that needs the higher one (§Versions)
        ok = ok or (error_name == "schema-version" and (m.attribute or "") in message)
        names_object = "exact" if ok else "no"
    elif obj in message:
        names_object = "exact"
    else:
        parts = obj.strip("/").split("/")
        parent = "/" + "/".join(parts[:2]) if len(parts) >= 2 else None
        names_object = "parent" if parent and parent in message else "no"
    names_value = None
    about_value = error_name in VALUE_ERRORS or (error_name or "").endswith("-unknown")
    if "weights_xxh3" in message and m.attribute != "weights_xxh3":
        about_value = False  # the weights hash no longer matches: the refusal §4.5 documents
    if m.attribute is not None and about_value:
        v = m.value
        placeholders = ("<oversized", "<uint64", "embedded NUL", "<float", "<array", "elements",
                        "not an integer", "not a string")
        if any(p in message for p in placeholders) or m.store in ("array1", "array2", "float"):
            names_value = True if any(p in message for p in placeholders) or \
                m.store != "float" or "float" in message else False
        elif isinstance(v, str) and len(v) > 200:
            names_value = str(len(v.encode())) in message or v[:32] in message
        elif isinstance(v, bytes):
            names_value = "\\x" in message or "\\X" in message or "UTF-8" in message
        elif isinstance(v, str):
            names_value = any(('"%s"' % f) in message for f in escaped_forms(v)) or \
                (len(v) >= 3 and any(f in message for f in escaped_forms(v)))
        elif isinstance(v, bool):
            names_value = None
        elif isinstance(v, int):
            names_value = re.search(r"(?<![0-9])%d(?![0-9])" % v, message) is not None
    return names_file, names_object, names_value


class Runner:
    """Runs every mutant through the commands, classifies, keeps failures."""

    def __init__(self, args, seeds, workdir, t0, total):
        self.args = args
        self.seeds = seeds
        self.workdir = workdir
        self.env = dict(os.environ, OMP_NUM_THREADS="1")
        self.t0 = t0
        self.total = total
        self.step = max(1, total // 20)
        self.lock = threading.Lock()
        self.done = 0

    def __call__(self, task):
        seed, m = task
        if stopping():
            return task, None
        args = self.args
        mfile = os.path.join(self.workdir, "mutants", "%s.h5" % m.id)
        shutil.copyfile(seed.run_path, mfile)
        try:
            apply_mutation(mfile, seed, m)
        except Exception as e:  # noqa: BLE001 - a mutation h5py cannot write is reported
            os.remove(mfile)
            self.count_done()
            return task, {"mutation": m.record(), "seed": seed.name, "runs": [],
                          "write_error": "%s: %s" % (type(e).__name__, e)}
        runs = [self.run_command(c, m, mfile, seed) for c in args.commands]
        rec = {"mutation": m.record(), "seed": seed.name, "runs": runs}
        flagged = any(r["bad"] for r in runs) or any(r.get("finding") for r in runs)
        if flagged and args.keep_failures:
            dst = os.path.join(args.keep_failures, "%s.h5" % m.id)
            shutil.copyfile(mfile, dst)
            write_repro(dst[:-3] + ".txt", os.path.basename(dst), seed, m, runs, args)
        if not args.keep:
            os.remove(mfile)
        self.count_done()
        return task, rec

    def run_command(self, c, m, mfile, seed):
        args = self.args
        out_json = os.path.join(self.workdir, "reports", "%s.%s.json" % (m.id, c))
        argv_ = build_argv(args.ncert, c, mfile, seed.run_path, out_json, 0, args.hdf5_timeout)
        start = time.monotonic()
        rc, out, err = run_one(argv_, args.timeout, self.env)
        seconds = time.monotonic() - start
        outcome, flags, bad, ename = classify(rc, out, err, out_json)
        run = {"command": c, "outcome": outcome, "flags": flags, "bad": bad,
               "error_name": ename, "returncode": rc, "seconds": round(seconds, 3)}
        message = None
        if rc is not None and rc >= 2 and os.path.isfile(out_json):
            try:
                with open(out_json, encoding="utf-8") as f:
                    message = json.load(f).get("error", {}).get("message")
            except (ValueError, OSError, AttributeError):
                message = None
        if message is not None:
            run["message"] = message.replace(self.workdir, "<workdir>")
        if message is not None and rc == 3:
            nf, no, nv = judge_refusal(m, message, ename, mfile)
            run["names"] = {"file": nf, "object": no, "value": nv}
            unclear = []
            if no == "no":
                unclear.append("object not named")
            if nv is False:
                unclear.append("value not named")
            if c == "check" and not nf:
                unclear.append("file not named")
            if unclear:
                run["finding"] = "unclear refusal: " + ", ".join(unclear)
            if c == "check" and (ename or "").startswith("guard-"):
                # docs/error-codes.md: a guard trip is a FAIL of the geometry check (exit 1)
                run["finding"] = "guard %s refused the dump (exit 3) instead of failing the " \
                    "projection's geometry check (exit 1)" % ename
        base = seed.baseline.get(c)
        if rc == 0 and base == "exit0":
            exp = m.expect
            if (c == "check" and exp in ("refuse", "refuse-check", "reject")) or \
                    (c == "inspect" and exp == "refuse"):
                run["finding"] = "suspicious PASS: %s" % (m.why or exp)
        if bad or run.get("finding"):
            text = (out + b"\n" + err).decode("utf-8", "replace")
            run["output_tail"] = tail_text(text.encode(), self.workdir, 1500)
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


def write_repro(path_txt, mutant_file, seed, m, runs, args):
    lines = ["mutant %s: seed %s (sha256 %s), mutation %d" % (m.id, seed.name, seed.sha256,
                                                              m.index),
             "mutation: " + m.describe(),
             "expected by docs/dump-format.md: %s (%s)" % (m.expect, m.why), "", "outcomes:"]
    for r in runs:
        extra = [", ".join(r["flags"])] if r["flags"] else []
        if r.get("finding"):
            extra.append(r["finding"])
        lines.append("  ncert %s -> %s%s" % (r["command"], r["outcome"],
                                             (" [" + "; ".join(extra) + "]") if extra else ""))
        if r.get("message"):
            lines.append("    message: " + r["message"][:2000])
    lines += ["", "reproduce (from this directory):"]
    for r in runs:
        other = " SEED.h5" if r["command"] in TWO_INPUT else ""
        lines.append("  ncert %s %s%s --json out.json --threads 1 --hdf5-timeout %g   # -> %s" % (
            r["command"], mutant_file, other, args.hdf5_timeout, r["outcome"]))
    if any(r["command"] in TWO_INPUT for r in runs):
        lines.append("  (SEED.h5: the unmodified seed %s)" % seed.path)
    lines += ["", "debug:", "  gdb -batch -ex run -ex bt --args ncert %s %s --threads 1" % (
        next((r["command"] for r in runs if r["bad"]), runs[0]["command"]), mutant_file),
        "", "regenerate (from the repository root):",
        "  /usr/bin/python3 tools/fuzz/values.py --ncert NCERT%s --only %s --keep-failures DIR" % (
            "" if seed.name in DEFAULT_DEMO_SEEDS + BUILTIN_SEEDS else " --seeds " + seed.path,
            m.id)]
    if seed.name in DEFAULT_DEMO_SEEDS + BUILTIN_SEEDS:
        lines.append("  (no --seeds: %s is one of the default seeds, `ncert demo`'s or built in)"
                     % seed.name)
    ranked = sorted(runs, key=lambda r: (not r["bad"], r["command"] != "check"))
    tail = next((r.get("output_tail") for r in ranked if r.get("output_tail")), None)
    if tail:
        lines += ["", "output (tail):", tail]
    with open(path_txt, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ---- the tally --------------------------------------------------------------------------------

def summarize(results, commands):
    tally = {c: {"runs": 0, "bad": 0, "findings": 0, "outcomes": {}, "flags": {},
                 "error_names": {}, "by_kind": {}, "refusals": {"total": 0, "names_file": 0,
                                                                "names_object": 0,
                                                                "names_value": 0,
                                                                "value_judged": 0}}
             for c in commands}
    bad, findings, write_errors, slow = [], [], [], []
    for rec in results:
        if rec.get("write_error"):
            write_errors.append(rec)
            continue
        kind = rec["mutation"]["kind"]
        for r in rec["runs"]:
            t = tally[r["command"]]
            t["runs"] += 1
            t["outcomes"][r["outcome"]] = t["outcomes"].get(r["outcome"], 0) + 1
            for fl in r["flags"]:
                t["flags"][fl] = t["flags"].get(fl, 0) + 1
            if r["outcome"] == "exit3" and r.get("error_name"):
                t["error_names"][r["error_name"]] = t["error_names"].get(r["error_name"], 0) + 1
            k = t["by_kind"].setdefault(kind, {"runs": 0, "bad": 0, "outcomes": {}})
            k["runs"] += 1
            k["outcomes"][r["outcome"]] = k["outcomes"].get(r["outcome"], 0) + 1
            if r.get("names"):
                rf = t["refusals"]
                rf["total"] += 1
                rf["names_file"] += bool(r["names"]["file"])
                rf["names_object"] += r["names"]["object"] != "no"
                if r["names"]["value"] is not None:
                    rf["value_judged"] += 1
                    rf["names_value"] += bool(r["names"]["value"])
            entry = {"mutant": rec["mutation"]["id"], "seed": rec["seed"],
                     "mutation": rec["mutation"]["description"],
                     "expect": rec["mutation"]["expect"], "command": r["command"],
                     "outcome": r["outcome"], "flags": r["flags"],
                     "returncode": r["returncode"]}
            if r.get("message"):
                entry["message"] = r["message"]
            if r["bad"]:
                t["bad"] += 1
                k["bad"] += 1
                entry["output_tail"] = r.get("output_tail", "")
                bad.append(entry)
            if r.get("finding"):
                t["findings"] += 1
                entry = dict(entry, finding=r["finding"])
                findings.append(entry)
            slow.append((r["seconds"], rec["mutation"]["id"], r["command"], r["outcome"]))
    slow.sort(key=lambda s: (-s[0], s[1], s[2]))
    return tally, bad, findings, write_errors, slow[:10]


def print_report(tally, bad, findings, write_errors, slow, commands, n_mutants, elapsed,
                 out=sys.stdout):
    rows = ["exit0", "exit1", "exit3", "exit2", "exit4"]
    extra = sorted({o for c in commands for o in tally[c]["outcomes"]} - set(rows) - {"hang"})
    rows += extra + ["hang"]
    labels = {"exit0": "exit 0 (pass)", "exit1": "exit 1 (check failed)",
              "exit3": "exit 3 (refused)", "exit2": "exit 2 (usage)  BAD",
              "exit4": "exit 4 (internal)  BAD", "hang": "hang (timeout)  BAD"}
    w0 = 30
    print("%-*s" % (w0, "outcome") + "".join("%10s" % c for c in commands), file=out)
    print("%-*s" % (w0, "runs") + "".join("%10d" % tally[c]["runs"] for c in commands), file=out)
    for r in rows:
        name = labels.get(r, r.replace("signal:", "signal ").replace("exit_other:", "exit ") +
                          "  BAD")
        print("%-*s" % (w0, name) + "".join("%10d" % tally[c]["outcomes"].get(r, 0)
                                            for c in commands), file=out)
    flags = sorted({f for c in commands for f in tally[c]["flags"]})
    for f in flags:
        print("%-*s" % (w0, f + "  BAD") + "".join("%10d" % tally[c]["flags"].get(f, 0)
                                                   for c in commands), file=out)
    print("%-*s" % (w0, "bad runs") + "".join("%10d" % tally[c]["bad"] for c in commands),
          file=out)
    print("%-*s" % (w0, "findings") + "".join("%10d" % tally[c]["findings"] for c in commands),
          file=out)
    print("%-*s" % (w0, "refusals naming the file") + "".join(
        "%10s" % ("%d/%d" % (tally[c]["refusals"]["names_file"], tally[c]["refusals"]["total"]))
        for c in commands), file=out)
    print("%-*s" % (w0, "refusals naming the object") + "".join(
        "%10s" % ("%d/%d" % (tally[c]["refusals"]["names_object"],
                             tally[c]["refusals"]["total"])) for c in commands), file=out)
    print("%-*s" % (w0, "refusals naming the value") + "".join(
        "%10s" % ("%d/%d" % (tally[c]["refusals"]["names_value"],
                             tally[c]["refusals"]["value_judged"])) for c in commands), file=out)
    print("", file=out)
    kinds = sorted({k for c in commands for k in tally[c]["by_kind"]})
    print("%-*s" % (w0, "by mutation kind (runs / bad)") +
          "".join("%10s" % c for c in commands), file=out)
    for k in kinds:
        print("%-*s" % (w0, k) + "".join(
            "%10s" % ("%d/%d" % (tally[c]["by_kind"].get(k, {}).get("runs", 0),
                                 tally[c]["by_kind"].get(k, {}).get("bad", 0)))
            for c in commands), file=out)
    print("", file=out)
    if bad:
        print("bad runs (%d):" % len(bad), file=out)
        for b in bad[:60]:
            print("  %s  ncert %s -> %s%s  %s" % (b["mutant"], b["command"], b["outcome"],
                                                  " [%s]" % ", ".join(b["flags"])
                                                  if b["flags"] else "", b["mutation"]), file=out)
        if len(bad) > 60:
            print("  ... %d more in the JSON" % (len(bad) - 60), file=out)
    if findings:
        print("findings (%d):" % len(findings), file=out)
        for fnd in findings[:60]:
            print("  %s  ncert %s -> %s  %s: %s" % (fnd["mutant"], fnd["command"], fnd["outcome"],
                                                    fnd["finding"], fnd["mutation"]), file=out)
        if len(findings) > 60:
            print("  ... %d more in the JSON" % (len(findings) - 60), file=out)
    if write_errors:
        print("mutations h5py could not write (%d):" % len(write_errors), file=out)
        for w in write_errors[:20]:
            print("  %s  %s: %s" % (w["mutation"]["id"], w["mutation"]["description"],
                                    w["write_error"]), file=out)
    print("slowest runs:", file=out)
    for s in slow:
        print("  %7.2f s  %s  ncert %s -> %s" % s, file=out)
    print("%d mutants, %d bad runs, %d findings, %.0f s" % (
        n_mutants, len(bad), len(findings), elapsed), file=out)


# ---- the command line -------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="values.py",
        description="Write deterministic copies of valid ncert dumps with one hostile value "
                    "each and run ncert inspect and check on every one; exit 0 when no run "
                    "crashed, hung, exited 2 or 4, or broke the report contract, 1 otherwise, "
                    "2 on usage errors.")
    p.add_argument("--ncert", required=True, help="the ncert binary")
    p.add_argument("--seeds", nargs="+", metavar="DIR_OR_FILE",
                   help="valid .h5 dumps (directories: every *.h5 in them); default: %s from "
                        "`ncert demo` and the built-in version 2 seeds" %
                        ", ".join(DEFAULT_DEMO_SEEDS))
    p.add_argument("--builtin-seeds", action="store_true",
                   help="with --seeds: add the built-in version 2 seeds (%s)" %
                        ", ".join(BUILTIN_SEEDS))
    p.add_argument("--smoke", action="store_true",
                   help="CI preset: %s, %d mutations of each (%s) spread over its list, "
                        "and the pinned regressions; under a minute on two cores" %
                        (", ".join(SMOKE_SEEDS), SMOKE_PER_SEED,
                         ", ".join("%s %d" % kv for kv in SMOKE_SHARE.items())))
    p.add_argument("--per-seed", type=int, default=None, metavar="N",
                   help="at most N mutations of each seed, spread evenly over its list "
                        "(default: all; %d with --smoke)" % SMOKE_PER_SEED)
    p.add_argument("--match", metavar="REGEX", default=None,
                   help="only mutations of objects whose path matches REGEX (re.search)")
    p.add_argument("--commands", nargs="+", default=list(COMMANDS),
                   choices=COMMANDS + TWO_INPUT,
                   help="ncert commands run on every mutant (default: inspect check; compare "
                        "and forks get the unmodified seed as second input)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds per ncert run before it counts as a hang (default 30)")
    p.add_argument("--hdf5-timeout", type=float, default=5.0, metavar="SEC",
                   help="passed to ncert as --hdf5-timeout (default 5; 0: not passed)")
    p.add_argument("--jobs", type=int, default=None,
                   help="mutants run in parallel (default: number of CPUs)")
    p.add_argument("--workdir", default=None,
                   help="where seeds, mutants and reports go (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--keep-failures", metavar="DIR", default=None,
                   help="copy every mutant with a bad outcome or a finding here, with a .txt")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="write the tally, every bad outcome and every finding as JSON")
    p.add_argument("--only", nargs="+", metavar="MUTANT_ID", default=None,
                   help="run only these mutants (SEEDSTEM.NNNN, as in the report)")
    p.add_argument("--list", action="store_true",
                   help="print every planned mutation with its expectation, run nothing")
    p.add_argument("--strict", action="store_true",
                   help="findings (suspicious PASS, unclear refusals) count as bad outcomes")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    if a.jobs is None:
        a.jobs = os.cpu_count() or 1
    if a.per_seed is None and a.smoke:
        a.per_seed = SMOKE_PER_SEED
    if a.jobs < 1:
        p.error("--jobs must be >= 1")
    if a.per_seed is not None and a.per_seed < 1:
        p.error("--per-seed must be >= 1")
    if not a.timeout > 0:
        p.error("--timeout must be > 0")
    if a.hdf5_timeout < 0:
        p.error("--hdf5-timeout must be >= 0")
    if not (os.path.isfile(a.ncert) and os.access(a.ncert, os.X_OK)):
        p.error("--ncert %s: not an executable file" % a.ncert)
    a.ncert = os.path.abspath(a.ncert)
    if a.match is not None:
        try:
            a.match = re.compile(a.match)
        except re.error as e:
            p.error("--match: %s" % e)
    return a


def default_seed_paths(args, workdir):
    d = os.path.join(workdir, "seeds")
    rc, out, err = run_one([args.ncert, "demo", "--dir", d, "--force", "--quiet"], 120,
                           dict(os.environ))
    paths = [os.path.join(d, n) for n in DEFAULT_DEMO_SEEDS if os.path.isfile(os.path.join(d, n))]
    if not paths:
        fail_usage("`ncert demo` wrote none of %s (exit %s): %s" % (
            ", ".join(DEFAULT_DEMO_SEEDS), rc, tail_text(err, None, 400)))
    return paths + SeedBuilder().write_all(d)


def load_seeds(args, workdir):
    if args.seeds:
        paths = collect_seed_paths(args.seeds)
        if args.builtin_seeds:
            paths += SeedBuilder().write_all(os.path.join(workdir, "seeds"))
    else:
        paths = default_seed_paths(args, workdir)
    seeds, stems = [], set()
    for pth in paths:
        try:
            s = Seed(pth)
        except (OSError, KeyError, ValueError) as e:
            fail_usage("seed %s cannot be read with h5py: %s" % (pth, e))
        base, n = s.stem, 1
        while s.stem in stems:
            n += 1
            s.stem = "%s~%d" % (base, n)
        stems.add(s.stem)
        seeds.append(s)
    if args.smoke:
        chosen = [s for name in SMOKE_SEEDS for s in seeds if s.name == name]
        seeds = chosen or seeds[:len(SMOKE_SEEDS)]
    os.makedirs(os.path.join(workdir, "baseline"), exist_ok=True)
    for s in seeds:
        s.run_path = os.path.join(workdir, "baseline", s.stem + ".h5")
        shutil.copyfile(s.path, s.run_path)
    return seeds


def spread(items, count):
    """`count` items spread evenly over the list (all of them when it is shorter)."""
    if count is None or len(items) <= count:
        return list(items)
    step = len(items) / float(count)
    return [items[int(i * step)] for i in range(count)]


def pinned(seed, m):
    for name, obj, attr, value in SMOKE_PINNED:
        if seed.name == name and m.object == obj and m.attribute == attr and \
                (m.value == value if attr is not None else m.label == value) and \
                m.store in (None, "int", "vlen"):
            return True
    return False


def plan_tasks(args, seeds):
    tasks = []
    for s in seeds:
        muts = Planner(s).plan()
        s.planned = len(muts)
        if args.match is not None:
            muts = [m for m in muts if args.match.search(m.object)]
        if args.only:
            muts = [m for m in muts if m.id in args.only]
        else:
            count = args.per_seed
            if args.smoke and count == SMOKE_PER_SEED:
                count = SMOKE_SHARE.get(s.name, count)
            chosen = spread(muts, count)
            if args.smoke:
                chosen += [m for m in muts if m not in chosen and pinned(s, m)]
                chosen.sort(key=lambda m: m.index)
            muts = chosen
        tasks += [(s, m) for m in muts]
    if args.only:
        found = {m.id for _, m in tasks}
        missing = [i for i in args.only if i not in found]
        if missing:
            fail_usage("--only: no such mutant %s (ids are SEEDSTEM.NNNN)" % ", ".join(missing))
    return tasks


def run_baselines(args, seeds, workdir):
    """Every command on every unmodified seed: a seed must load (exit 0 or 1)."""
    out = []
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for s in seeds:
        s.baseline = {}
        for c in args.commands:
            out_json = os.path.join(workdir, "baseline", "%s.%s.json" % (s.stem, c))
            argv_ = build_argv(args.ncert, c, s.run_path, s.run_path, out_json, 0,
                               args.hdf5_timeout)
            rc, o, e = run_one(argv_, args.timeout, env)
            outcome, flags, bad, _ = classify(rc, o, e, out_json)
            bad = bad or outcome not in ("exit0", "exit1")
            s.baseline[c] = outcome
            out.append({"seed": s.name, "command": c, "outcome": outcome, "flags": flags,
                        "bad": bad})
    return out


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()
    disable_core_files()
    own = args.workdir is None
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="ncert-values-"))
    for d in ("mutants", "reports"):
        os.makedirs(os.path.join(workdir, d), exist_ok=True)
    if args.keep_failures:
        os.makedirs(args.keep_failures, exist_ok=True)
    try:
        seeds = load_seeds(args, workdir)
        tasks = plan_tasks(args, seeds)
        if args.list:
            for s, m in tasks:
                print("%s  [%s]  %s  (%s)" % (m.id, m.expect, m.describe(), m.why))
            print("%d mutation(s) of %d seed(s)" % (len(tasks), len(seeds)), file=sys.stderr)
            return 0
        baselines = run_baselines(args, seeds, workdir)
        if not args.quiet:
            print("values.py: %d seed(s), %d mutant(s) of %d planned, commands %s, %d job(s), "
                  "workdir %s" % (len(seeds), len(tasks), sum(s.planned for s in seeds),
                                  " ".join(args.commands), args.jobs, workdir),
                  file=sys.stderr, flush=True)
        work = Runner(args, seeds, workdir, t0, len(tasks))
        results = []
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
        try:
            for _task, rec in pool.map(work, tasks):
                if rec is not None:
                    results.append(rec)
        except KeyboardInterrupt:
            stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            print("values.py: interrupted", file=sys.stderr)
            return 130
        pool.shutdown(wait=True)
        elapsed = time.monotonic() - t0
        tally, bad, findings, write_errors, slow = summarize(results, args.commands)
        bad_baselines = [b for b in baselines if b["bad"]]
        for b in bad_baselines:
            bad.insert(0, {"mutant": "(baseline)", "seed": b["seed"], "mutation": "none",
                           "command": b["command"], "outcome": b["outcome"], "flags": b["flags"]})
        print_report(tally, bad, findings, write_errors, slow, args.commands, len(results),
                     elapsed)
        if args.json:
            doc = {"tool": "ncert-values", "version": 1,
                   "arguments": {"commands": args.commands, "timeout": args.timeout,
                                 "hdf5_timeout": args.hdf5_timeout, "smoke": args.smoke,
                                 "per_seed": args.per_seed, "only": args.only,
                                 "match": args.match.pattern if args.match else None,
                                 "strict": args.strict},
                   "seeds": [{"name": s.name, "bytes": s.bytes, "sha256": s.sha256,
                              "version": s.version, "planned": s.planned,
                              "baseline": s.baseline} for s in seeds],
                   "baseline": baselines, "mutants": len(results), "bad_runs": len(bad),
                   "findings_count": len(findings), "tally": tally, "bad": bad,
                   "findings": findings,
                   "write_errors": [{"mutant": w["mutation"]["id"],
                                     "mutation": w["mutation"]["description"],
                                     "error": w["write_error"]} for w in write_errors],
                   "slowest": [{"seconds": s[0], "mutant": s[1], "command": s[2],
                                "outcome": s[3]} for s in slow]}
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1, sort_keys=False)
                f.write("\n")
        failed = bool(bad) or bool(write_errors) or (args.strict and bool(findings))
        return 1 if failed else 0
    finally:
        if own and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif args.keep:
            print("work directory kept: %s" % workdir, file=sys.stderr)
        else:
            for d in ("mutants", "reports"):
                shutil.rmtree(os.path.join(workdir, d), ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
