"""The C++ reader's schema rules (certify/io/schema.cc), applied to what is about to be written.

The checks run in the reader's order and raise the first violation as a DumpFormatError with
the reader's error name, object path and sentence. A few rules the reader does not (yet)
enforce but dump-format.md states are marked "writer rule" below; they use the same style.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np

from . import parse
from .errors import DumpFormatError
from .nodes import Group, Stored

__all__ = [
    "render",
    "check_string_attrs",
    "check_root",
    "check_projection",
    "check_logits",
    "check_tensor",
    "check_lm_head",
    "ProjectionFacts",
]

INT64_MIN = -(2**63)


# ---- attribute values, as the reader classifies and renders them ---------------------------

def _kind(v) -> str:
    if isinstance(v, (str, np.str_)):
        return "string"
    if isinstance(v, (bool, np.bool_)):
        return "other"  # h5py stores a bool as an enum
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    return "other"


def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\")
        if ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _render_double(d: float) -> str:
    for p in range(6, 18):
        text = "%.*g" % (p, d)
        if float(text) == d:
            return text
    return "%.17g" % d


def render(v) -> str:
    """AttrValue::render: how `ncert inspect` prints an attribute value."""
    kind = _kind(v)
    if kind == "string":
        return _quote(str(v))
    if kind == "int":
        return str(int(v))
    if kind == "float":
        return _render_double(float(v))
    if isinstance(v, (bool, np.bool_)):
        return "<enum>"
    return f"<{type(v).__name__}>"


class _Attrs:
    """Typed access to one object's attributes, raising the reader's findings."""

    def __init__(self, path: str, attrs: dict):
        self.path = path
        self.attrs = attrs

    def string(self, name: str, required: bool) -> Optional[str]:
        v = self.attrs.get(name)
        if v is None:
            if required:
                raise DumpFormatError("missing-attribute", self.path, f'missing attribute "{name}"')
            return None
        if _kind(v) != "string":
            raise DumpFormatError("attribute-invalid", self.path,
                                  f'attribute "{name}" = {render(v)} is not a string')
        return str(v)

    def integer(self, name: str, required: bool, min_value: int) -> Optional[int]:
        v = self.attrs.get(name)
        if v is None:
            if required:
                raise DumpFormatError("missing-attribute", self.path, f'missing attribute "{name}"')
            return None
        if _kind(v) != "int":
            raise DumpFormatError("attribute-invalid", self.path,
                                  f'attribute "{name}" = {render(v)} is not an integer')
        if int(v) < min_value:
            raise DumpFormatError("attribute-invalid", self.path,
                                  f'attribute "{name}" = {int(v)} is below {min_value}')
        return int(v)

    def parsed(self, name: str, required: bool, parser) -> Optional[str]:
        s = self.string(name, required)
        if s is not None:
            problem = parser(s)
            if problem:
                raise DumpFormatError(problem[0], self.path, problem[1])
        return s


def check_string_attrs(path: str, attrs: dict) -> None:
    """Writer rule (dump-format.md §7): no string attribute may hold an embedded NUL."""
    for name, v in attrs.items():
        if _kind(v) == "string" and "\0" in str(v):
            raise DumpFormatError("attribute-invalid", path,
                                  f'attribute "{name}" = {render(v)} holds an embedded NUL')


# ---- datasets -------------------------------------------------------------------------------

def _shape_string(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _member(group: Optional[Group], path: str, required: bool, allowed: Iterable[str],
            expected: Sequence[int]) -> Optional[Stored]:
    """The reader's member(): presence, element type, then shape (-1 = any extent)."""
    leaf = path.rsplit("/", 1)[1]
    node = group.members.get(leaf) if group is not None else None
    if node is None:
        if required:
            raise DumpFormatError("missing-member", path.rsplit("/", 1)[0],
                                  f'missing dataset "{leaf}"')
        return None
    if isinstance(node, Group):
        raise DumpFormatError("missing-member", path, "expected a dataset, found a group")
    allowed = list(allowed)
    if node.dtype not in allowed:
        raise DumpFormatError("datatype-refused", path,
                              f"dtype {node.dtype} where {' or '.join(allowed)} is required")
    shape = node.shape
    if len(shape) != len(expected) or any(e >= 0 and e != d for e, d in zip(expected, shape)):
        want = ", ".join("*" if e < 0 else str(e) for e in expected)
        raise DumpFormatError("shape-mismatch", path,
                              f"shape {_shape_string(shape)} but the attributes require [{want}]")
    return node


# ---- root -----------------------------------------------------------------------------------

def check_root(attrs: dict) -> None:
    """Root attributes (§2). The writer sets ncert_schema and the version itself."""
    a = _Attrs("/", attrs)
    schema = attrs.get("ncert_schema")
    if schema is None:
        raise DumpFormatError("schema-unknown", "/",
                              "no ncert_schema attribute: not an ncert dump (dump-format.md §2)")
    if a.string("ncert_schema", False) != "ncert-dump":
        raise DumpFormatError("schema-unknown", "/",
                              f'ncert_schema = "{schema}", expected "ncert-dump"')
    ver = attrs.get("ncert_schema_version")
    if ver is None:
        raise DumpFormatError("missing-attribute", "/",
                              'missing attribute "ncert_schema_version"')
    if _kind(ver) != "int":
        raise DumpFormatError("attribute-invalid", "/",
                              f"ncert_schema_version = {render(ver)} is not an integer")
    if int(ver) != 1:
        raise DumpFormatError("schema-version", "/",
                              f"ncert_schema_version = {int(ver)}; this build of ncert reads "
                              "version 1 only")
    a.string("engine", True)
    a.string("build", True)
    a.string("model", False)
    a.string("device", False)
    check_string_attrs("/", attrs)


# ---- projections ----------------------------------------------------------------------------

class ProjectionFacts:
    """What the checks learned of a valid projection (for the guards and the lm_head rule)."""

    # Set from the keywords; the ones read outside this module, declared for mypy.
    path: str
    m: int
    n: int
    role: Optional[str]
    logits_run: Optional[str]

    def __init__(self, **kw):
        self.__dict__.update(kw)


def check_projection(path: str, g: Group) -> ProjectionFacts:
    """check_projection of schema.cc, then the writer rules of §3 (outputs, role, rounding)."""
    a = _Attrs(path, g.attrs)
    op = a.string("op", True)
    if op != "linear":
        raise DumpFormatError("attribute-invalid", path,
                              f'op = "{op}"; only "linear" is defined')
    k = a.integer("k", True, 1)
    n = a.integer("n", True, 1)
    in_stride = a.integer("in_stride", False, 1)
    out_stride = a.integer("out_stride", False, 1)
    a.parsed("accumulator", True, parse.parse_accumulator)
    output = a.parsed("output_dtype", True, parse.parse_output_dtype)
    epilogue = a.parsed("epilogue", True, parse.parse_epilogue)
    a.parsed("residual_at", False, parse.parse_residual_at)
    k_walk = a.parsed("k_walk", False, parse.parse_k_walk)
    a.integer("layer", False, INT64_MIN)
    role = a.string("role", False)
    logits_run = a.string("logits_run", False)
    requests = a.integer("requests", False, 1)
    block_rows = a.integer("block_rows", False, 1)
    a.integer("cap", False, 0)
    a.parsed("output_rounding", False, parse.parse_output_rounding)  # writer rule (§8)
    check_string_attrs(path, g.attrs)
    in_stride = k if in_stride is None else in_stride
    out_stride = n if out_stride is None else out_stride

    x = _member(g, path + "/x", True, ("f32", "bf16"), (-1, in_stride))
    m = x.shape[0]
    if requests is not None and block_rows is not None and requests * block_rows != m:
        raise DumpFormatError(
            "shape-mismatch", path + "/x",
            f"{m} rows but requests x block_rows = {requests} x {block_rows} = "
            f"{requests * block_rows}")
    sel = _member(g, path + "/selector", True, ("i32",), (-1,))
    p = sel.shape[0]
    r = requests if requests is not None else -1
    _member(g, path + "/commit_counts", False, ("i32",), (r,))
    for leaf, needed, shape in (("bias", parse.has_bias(epilogue), (n,)),
                                ("residual", parse.has_residual(epilogue), (m, out_stride))):
        if needed:
            _member(g, f"{path}/{leaf}", True, ("f32", "bf16"), shape)
        elif g.dataset(leaf) is not None:
            # The reader notes and ignores it; a writer refuses to write what nobody reads.
            raise DumpFormatError("invalid-argument", f"{path}/{leaf}",
                                  f"present but the epilogue has no {leaf}; it would be ignored")
    outputs = []
    for leaf in ("y_unpacked", "y_packed", "y_before"):
        if _member(g, f"{path}/{leaf}", False, (output,), (m, out_stride)) is not None:
            outputs.append(leaf)
    if _member(g, path + "/y_compact", False, (output,), (p, out_stride)) is not None:
        outputs.append("y_compact")

    wpath = path + "/weight"
    weight = g.members.get("weight")
    if weight is None:
        raise DumpFormatError("missing-member", path, 'missing group "weight"')
    segments = []
    for name in sorted(weight.members):
        spath = f"{wpath}/{name}"
        if not isinstance(weight.members[name], Group):
            raise DumpFormatError("missing-member", spath,
                                  "expected a weight segment group, found a dataset")
        segments.append(_check_segment(spath, weight.members[name], k))
    if not segments:
        raise DumpFormatError("missing-member", wpath, "no weight segments")

    # Writer rules of dump-format.md §3 that the reader leaves to `check`.
    if not any(o in outputs for o in ("y_unpacked", "y_packed", "y_compact")):
        raise DumpFormatError("missing-member", path,
                              'missing dataset "y_unpacked" (at least one of y_unpacked, '
                              "y_packed, y_compact is required)")
    if logits_run is not None and role != "lm_head":
        raise DumpFormatError("attribute-invalid", path,
                              f'logits_run = "{logits_run}" is only read with role = "lm_head"')
    segments.sort(key=lambda s: (s.row_begin, s.name))
    return ProjectionFacts(path=path, k=k, n=n, m=m, p=p, in_stride=in_stride,
                           out_stride=out_stride, k_walk=k_walk, role=role,
                           logits_run=logits_run, segments=segments)


def _check_segment(path: str, g: Group, k: int) -> ProjectionFacts:
    a = _Attrs(path, g.attrs)
    fmt = a.string("format", True)
    begin = a.integer("row_begin", True, 0)
    end = a.integer("row_end", True, 0)
    problem = parse.parse_weight_format(fmt)
    if problem:
        raise DumpFormatError(problem[0], path, problem[1])
    if end <= begin:
        raise DumpFormatError("attribute-invalid", path, f"row_end {end} <= row_begin {begin}")
    rows = end - begin
    name = path.rsplit("/", 1)[1]
    facts = ProjectionFacts(path=path, name=name, format=fmt, row_begin=begin, row_end=end)
    if fmt != "af4":
        _member(g, path + "/values", True, (fmt,), (rows, k))
        check_string_attrs(path, g.attrs)
        return facts
    gs = a.integer("group_size", True, 1)
    variant = a.parsed("variant", True, parse.parse_af4_variant)
    packing = a.parsed("packing", True, parse.parse_af4_packing)
    a.parsed("dequant", False, parse.parse_dequant)
    a.parsed("dequant_op", False, parse.parse_dequant_op)  # writer rule (§8)
    if variant == "codebook":
        cb = a.parsed("codebook", True, parse.parse_af4_codebook)
        if cb == "custom":
            _member(g, path + "/codebook", True, ("f32",), (16,))
    code_type = "u32" if packing == "u32-lsb" else "u8"
    codes = _member(g, path + "/codes", True, (code_type,), (rows, -1))
    scales = _member(g, path + "/scales", True, ("bf16", "f16", "f32"), (rows, -1))
    if variant == "affine":
        _member(g, path + "/biases", True, (scales.dtype,), scales.shape)
    elif g.dataset("biases") is not None:
        raise DumpFormatError("invalid-argument", path + "/biases",
                              "present but the codebook variant has no biases; it would be ignored")
    check_string_attrs(path, g.attrs)
    facts.__dict__.update(group_size=gs, variant=variant, packing=packing,
                          codes_cols=codes.shape[1], scales_cols=scales.shape[1],
                          biases_cols=g.dataset("biases").shape[1] if variant == "affine" else 0)
    return facts


# ---- logits runs, tensors, lm_heads ---------------------------------------------------------

def check_logits(path: str, g: Group):
    """check_logits of schema.cc. Returns (tokens T, vocab V)."""
    a = _Attrs(path, g.attrs)
    vocab = a.integer("vocab", True, 1)
    tb = a.string("tie_break", False)
    if tb is not None and tb != "lowest":
        raise DumpFormatError("attribute-invalid", path,
                              f'tie_break = "{tb}"; only "lowest" is defined')
    a.string("prompt", False)
    check_string_attrs(path, g.attrs)
    tokens = _member(g, path + "/tokens", True, ("i32",), (-1,))
    t = tokens.shape[0]
    logits = g.dataset("logits")
    lpath = path + "/logits"
    if logits is None:
        _member(g, lpath, True, ("f32",), (t, vocab))  # raises: missing dataset "logits"
    if logits.dtype != "f32":
        raise DumpFormatError("datatype-refused", lpath,
                              f"dtype {logits.dtype} where f32 is required (raw logits)")
    if logits.shape != (t, vocab):
        raise DumpFormatError("shape-mismatch", lpath,
                              f"shape {_shape_string(logits.shape)} but tokens and vocab "
                              f"require [{t}, {vocab}]")
    _member(g, path + "/positions", False, ("i64",), (t,))
    _member(g, path + "/prompt_tokens", False, ("i32",), (-1,))
    return t, vocab


def check_tensor(path: str, d: Stored) -> None:
    """check_tensors of schema.cc, plus the compare policy the compare command parses."""
    if d.dtype not in ("f32", "f16", "bf16"):
        raise DumpFormatError("datatype-refused", path,
                              f"dtype {d.dtype}; state tensors are f32, f16 or bf16")
    a = _Attrs(path, d.attrs)
    a.parsed("compare", False, parse.parse_tensor_policy)
    check_string_attrs(path, d.attrs)


def check_lm_head(facts: ProjectionFacts, runs: dict) -> None:
    """check_lm_heads of schema.cc against the runs written so far ({name: (T, V)})."""
    if facts.role != "lm_head" or facts.logits_run is None:
        return
    run = facts.logits_run
    if run not in runs:
        raise DumpFormatError("missing-member", facts.path,
                              f'logits_run = "{run}" names no /logits run')
    t, v = runs[run]
    if v != facts.n or t != facts.m:
        raise DumpFormatError(
            "shape-mismatch", facts.path,
            f'lm_head of run "{run}" has {facts.m} x {facts.n} outputs but the run has {t} '
            f"tokens x vocab {v}")
