"""The C++ reader's schema rules (certify/io/schema.cc), applied to what is about to be written.

Which members exist, whether they are required (and when), their element types, shapes,
integer minimums and closed value sets are the reader's own rule table, loaded from
schema_rules.json (rules.py), which ncert-docgen generates from certify/io/schema_rules.cc.
This file holds what schema.cc holds in code: the order of the checks, the rules that join
members (x rows = requests x block_rows, lm_head shapes) and the sentences. The checks run in
the reader's order and raise the first violation as a DumpFormatError with the reader's error
name, object path and sentence. A few rules the reader does not (yet) enforce but
dump-format.md states are marked "writer rule" below; they use the same style.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from . import af4, limits, parse, rules
from .errors import DumpFormatError
from .nodes import Group, Stored

__all__ = [
    "render",
    "check_string_attrs",
    "unencodable",
    "check_root",
    "check_projection",
    "check_logits",
    "check_tensor",
    "check_lm_head",
    "check_chunks",
    "ProjectionFacts",
    "SegmentFacts",
    "Af4Facts",
]

INT64_MIN = -(2**63)

#: A grammar check of parse.py: None when the value is valid, else (error name, message).
Parser = Callable[[str], parse.Problem]


# ---- attribute values, as the reader classifies and renders them ---------------------------

def _utf8_bytes(s: str) -> int:
    """The bytes a string attribute is stored with (UTF-8; a lone surrogate, which the writer
    refuses elsewhere, counted as the three bytes it would take)."""
    return len(s.encode("utf-8", "surrogatepass"))


def _kind(v) -> str:
    if isinstance(v, (str, np.str_)):
        # The reader reads a string of more than kMaxAttrBytes as an oversized value of no
        # kind (hdf5_util.cc), so such a string is "not a string" wherever one is read.
        return "string" if _utf8_bytes(str(v)) <= limits.MAX_ATTRIBUTE_BYTES else "other"
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


def _not_a_string(v) -> str:
    """Why a string attribute is refused, as the reader says it: its size where it is beyond the
    reader's limit, else its kind."""
    if isinstance(v, (str, np.str_)) and _kind(v) != "string":
        return " is larger than an attribute may be (1 MiB or 65,536 elements, docs/dump-format.md §1)"
    return " is not a string"


def render(v) -> str:
    """AttrValue::render: how `ncert inspect` prints an attribute value."""
    kind = _kind(v)
    if kind == "string":
        return _quote(str(v))
    if isinstance(v, (str, np.str_)):
        return f"<oversized: {_utf8_bytes(str(v))} bytes>"  # never printed, as by the reader
    if kind == "int":
        return str(int(v))
    if kind == "float":
        return _render_double(float(v))
    if isinstance(v, (bool, np.bool_)):
        return "<enum>"
    return f"<{type(v).__name__}>"


class _Attrs:
    """Typed access to one object's attributes, raising the reader's findings."""

    def __init__(self, path: str, attrs: dict) -> None:
        self.path = path
        self.attrs = attrs

    def _missing(self, name: str) -> DumpFormatError:
        return DumpFormatError("missing-attribute", self.path, f'missing attribute "{name}"')

    def string(self, name: str, required: bool) -> Optional[str]:
        v = self.attrs.get(name)
        if v is None:
            if required:
                raise self._missing(name)
            return None
        if _kind(v) != "string":
            raise DumpFormatError("attribute-invalid", self.path,
                                  f'attribute "{name}" = {render(v)}{_not_a_string(v)}')
        _refuse_unencodable(self.path, name, str(v))
        return str(v)

    def integer(self, name: str, required: bool, min_value: int) -> Optional[int]:
        v = self.attrs.get(name)
        if v is None:
            if required:
                raise self._missing(name)
            return None
        if _kind(v) != "int":
            # A float attribute renders as "64": say what is stored (the reader's words).
            floating = _kind(v) == "float" and np.ndim(v) == 0
            hint = " (stored as a float: write an integer attribute)" if floating else ""
            raise DumpFormatError("attribute-invalid", self.path,
                                  f'attribute "{name}" = {render(v)} is not an integer{hint}')
        if int(v) < min_value:
            raise DumpFormatError("attribute-invalid", self.path,
                                  f'attribute "{name}" = {int(v)} is below {min_value}')
        return int(v)

    @staticmethod
    def _expect(rule: dict, kind: str) -> None:
        # The caller names the type it reads; the table is the authority on it.
        if rule["type"] != kind:
            raise TypeError(f'attribute "{rule["name"]}" is {rule["type"]} in the rule table, '
                            f"read as {kind}")

    def check_int(self, rule: dict) -> Optional[int]:
        """An integer attribute as its rule says: presence, type and minimum; then, for an
        extent or a count (a rule with a minimum of 0 or more), the largest value the reader
        accepts (int_attr of schema.cc)."""
        self._expect(rule, "int")
        lo = rule["min_value"]
        v = self.integer(rule["name"], rule["required"], INT64_MIN if lo is None else lo)
        if v is not None and lo is not None and lo >= 0 and v > limits.MAX_SHAPE_VALUE:
            raise DumpFormatError(
                "shape-limit", self.path,
                f'attribute "{rule["name"]}" = {v} is above {limits.MAX_SHAPE_VALUE} (2^32 - 1), '
                "the largest extent ncert accepts; refused before any size is computed from it")
        return v

    def check_str(self, rule: dict, parser: Optional[Parser] = None,
                  closed: bool = True) -> Optional[str]:
        """A string attribute as its rule says: presence and type, then (unless `closed` is
        False, for a caller that checks the value later, as the reader does) its closed value
        set, then the grammar `parser` checks."""
        self._expect(rule, "string")
        s = self.string(rule["name"], rule["required"])
        if s is not None and closed:
            self.closed(rule, s)
        if s is not None and parser is not None:
            problem = parser(s)
            if problem:
                raise DumpFormatError(problem[0], self.path, problem[1])
        return s

    def require_int(self, rule: dict) -> int:
        """check_int of an attribute the caller needs: absent, it is refused as missing."""
        v = self.check_int(rule)
        if v is None:
            raise self._missing(rule["name"])
        return v

    def require_str(self, rule: dict, closed: bool = True) -> str:
        """check_str of an attribute the caller needs: absent, it is refused as missing."""
        s = self.check_str(rule, closed=closed)
        if s is None:
            raise self._missing(rule["name"])
        return s

    def closed(self, rule: dict, s: Optional[str]) -> None:
        """The rule's closed value set: a parser's refusal, or the one value the format defines."""
        values = rule["values"]
        if s is None or not values or s in values["names"]:
            return
        if values["what"]:
            message = f'{values["what"]} "{s}" is not one of {", ".join(values["names"])}'
        else:
            message = f'{rule["name"]} = "{s}"; only "{values["names"][0]}" is defined'
        raise DumpFormatError(values["refused"], self.path, message)


def unencodable(s: str) -> Optional[str]:
    """What in `s` UTF-8 cannot encode ("a lone surrogate (U+DCFF at offset 1)"), or None: HDF5
    stores names and strings as UTF-8, so such a str cannot be written at all."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"a lone surrogate (U+{ord(s[e.start]):04X} at offset {e.start})"
    return None


def _refuse_unencodable(path: str, name: str, s: str) -> None:
    """Writer rule: a string attribute UTF-8 cannot encode cannot be written; refused when it is
    read, before its value is judged (or printed: the message could not be)."""
    bad = unencodable(s)
    if bad is not None:
        raise DumpFormatError("invalid-argument", path,
                              f'attribute "{name}" holds {bad}, which UTF-8 cannot encode')


def check_string_attrs(path: str, attrs: dict) -> None:
    """Writer rule (dump-format.md §7): no string attribute may hold an embedded NUL, nor be
    oversized (§1). Where the checks above read an attribute, an oversized one was refused there
    first, as by the reader; elsewhere the reader would see a value of no kind, never the text."""
    for name, v in attrs.items():
        if isinstance(v, (str, np.str_)):
            _refuse_unencodable(path, name, str(v))
        if isinstance(v, (str, np.str_)) and _kind(v) != "string":
            raise DumpFormatError("attribute-invalid", path,
                                  f'attribute "{name}" = {render(v)}{_not_a_string(v)}')
        if _kind(v) == "string" and "\0" in str(v):
            raise DumpFormatError("attribute-invalid", path,
                                  f'attribute "{name}" = {render(v)} holds an embedded NUL')


# ---- datasets -------------------------------------------------------------------------------

def _shape_string(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _missing_dataset(path: str) -> DumpFormatError:
    parent, leaf = path.rsplit("/", 1)
    return DumpFormatError("missing-member", parent, f'missing dataset "{leaf}"')


def _member(group: Optional[Group], path: str, required: bool, allowed: Iterable[str],
            expected: Sequence[int], dims: Optional[Sequence[str]] = None) -> Optional[Stored]:
    """The reader's member(): presence, element type, then shape (-1 = any extent)."""
    leaf = path.rsplit("/", 1)[1]
    node = group.members.get(leaf) if group is not None else None
    if node is None:
        if required:
            raise _missing_dataset(path)
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
        # Where each extent that did not match comes from (the reader's words, dim_origin).
        origins = []
        if dims is not None and len(shape) == len(expected):
            for i, (e, d) in enumerate(zip(expected, shape)):
                origin = rules.DATA["dim_origins"].get(dims[i], "") if i < len(dims) else ""
                if e >= 0 and e != d and origin:
                    origins.append(origin)
        why = f" ({'; '.join(origins)})" if origins else ""
        raise DumpFormatError("shape-mismatch", path,
                              f"shape {_shape_string(shape)} but the attributes require [{want}]{why}")
    return node


def _dataset(g: Group, path: str, rule: dict, types: Mapping[str, Optional[str]],
             symbols: Mapping[str, Optional[int]]) -> Optional[Stored]:
    """A dataset member of the container at `path` as its rule says (member() of schema.cc)."""
    return _member(g, f"{path}/{rule['name']}", rule["required"],
                   rules.allowed_dtypes(rule, types), rules.expected_shape(rule, symbols), rule["dims"])


def _required_dataset(g: Group, path: str, rule: dict, types: Mapping[str, Optional[str]],
                      symbols: Mapping[str, Optional[int]]) -> Stored:
    """_dataset of a member the caller needs: absent, it is refused as member() refuses it."""
    node = _dataset(g, path, rule, types, symbols)
    if node is None:
        raise _missing_dataset(f"{path}/{rule['name']}")
    return node


def _dtype_prose(dtypes: Sequence[str]) -> str:
    """"f32, f16 or bf16"."""
    return ", ".join(dtypes[:-1]) + " or " + dtypes[-1] if len(dtypes) > 1 else "".join(dtypes)


# ---- root -----------------------------------------------------------------------------------

def check_root(attrs: dict) -> None:
    """Root attributes (§2). The writer sets ncert_schema and the version itself."""
    a = _Attrs("/", attrs)
    schema = attrs.get("ncert_schema")
    if schema is None:
        raise DumpFormatError(rules.attribute("root", "ncert_schema")["refused"], "/",
                              "no ncert_schema attribute: not an ncert dump (dump-format.md §2)")
    if a.string("ncert_schema", False) != rules.SCHEMA:
        raise DumpFormatError("schema-unknown", "/",
                              f'ncert_schema = "{schema}", expected "{rules.SCHEMA}"')
    ver = attrs.get("ncert_schema_version")
    if ver is None:
        raise DumpFormatError(rules.attribute("root", "ncert_schema_version")["refused"], "/",
                              'missing attribute "ncert_schema_version"')
    if _kind(ver) != "int":
        raise DumpFormatError("attribute-invalid", "/",
                              f"ncert_schema_version = {render(ver)} is not an integer")
    if int(ver) not in rules.VERSIONS:
        raise DumpFormatError("schema-version", "/",
                              f"ncert_schema_version = {int(ver)}; this build of ncert reads "
                              f"version {' or '.join(map(str, rules.VERSIONS))} only")
    for name in ("engine", "build", "model", "device"):
        a.check_str(rules.attribute("root", name))
    check_string_attrs("/", attrs)


# ---- projections ----------------------------------------------------------------------------

@dataclass
class Af4Facts:
    """What the checks learned of a valid AF4 segment (for guard 5, AF4 geometry)."""

    group_size: int
    variant: str
    packing: str
    codes_cols: int
    scales_cols: int
    biases_cols: int  # 0 when the variant has no biases (codebook)


@dataclass
class ScaledFacts:
    """What the checks learned of a valid int8 / e4m3 / e5m2 segment (for guard 5)."""

    group_size: int
    scale_rows: int
    scales_rows: int
    scales_cols: int


@dataclass
class SegmentFacts:
    """What the checks learned of a valid weight segment (for guards 4 and 5)."""

    path: str
    name: str
    format: str
    row_begin: int
    row_end: int
    af4: Optional[Af4Facts] = None  # None for the formats stored as values (bf16, f32)
    scaled: Optional[ScaledFacts] = None  # int8, e4m3, e5m2


@dataclass
class ProjectionFacts:
    """What the checks learned of a valid projection (for the guards and the lm_head rule)."""

    path: str
    k: int
    n: int
    m: int
    p: int
    in_stride: int
    out_stride: int
    k_walk: Optional[str]
    role: Optional[str]
    logits_run: Optional[str]
    segments: list[SegmentFacts]  # sorted by (row_begin, name)
    x_quant_group: Optional[int] = None  # declared with x_quant: for guard 309


_P, _S, _R = "projection", "segment", "logits_run"


def check_projection(path: str, g: Group) -> ProjectionFacts:
    """check_projection of schema.cc, then the writer rules of §3 (outputs, role)."""
    a = _Attrs(path, g.attrs)
    # projection_attributes: in the reader's order, which is the table's.
    a.check_str(rules.attribute(_P, "op"))
    k = a.require_int(rules.attribute(_P, "k"))
    n = a.require_int(rules.attribute(_P, "n"))
    in_stride = a.check_int(rules.attribute(_P, "in_stride"))
    out_stride = a.check_int(rules.attribute(_P, "out_stride"))
    a.check_str(rules.attribute(_P, "accumulator"), parse.parse_accumulator)
    output = a.require_str(rules.attribute(_P, "output_dtype"))
    epilogue = a.require_str(rules.attribute(_P, "epilogue"))
    a.check_str(rules.attribute(_P, "residual_at"))
    a.check_str(rules.attribute(_P, "bias_at"))
    a.check_str(rules.attribute(_P, "output_rounding"))
    k_walk = a.check_str(rules.attribute(_P, "k_walk"), parse.parse_k_walk)
    x_quant, x_quant_group = _x_quant_attributes(path, g, a)
    a.check_int(rules.attribute(_P, "layer"))
    role = a.check_str(rules.attribute(_P, "role"))
    logits_run = a.check_str(rules.attribute(_P, "logits_run"))
    requests = a.check_int(rules.attribute(_P, "requests"))
    block_rows = a.check_int(rules.attribute(_P, "block_rows"))
    a.check_int(rules.attribute(_P, "cap"))
    xxh3 = a.check_str(rules.attribute(_P, "weights_xxh3"))
    if xxh3 is not None and (len(xxh3) != 32 or set(xxh3) - set("0123456789abcdef")):
        # §4.5: the canonical form (the writer declares it itself, after these checks).
        raise DumpFormatError("attribute-invalid", path,
                              f'weights_xxh3 = "{xxh3}" is not an XXH3-128 hash in 32 lowercase '
                              "hex digits")
    check_string_attrs(path, g.attrs)
    in_stride = k if in_stride is None else in_stride
    out_stride = n if out_stride is None else out_stride

    # projection_datasets: x gives M, the selector P, then the members shaped by them.
    context: dict[str, Optional[str]] = {"epilogue": epilogue}
    types: dict[str, Optional[str]] = {"output_dtype": output}
    sym: dict[str, Optional[int]] = {"K": k, "N": n, "in_stride": in_stride, "out_stride": out_stride}
    x = _required_dataset(g, path, rules.dataset(_P, "x"), types, sym)
    m = sym["M"] = x.shape[0]
    _x_quant_datasets(path, g, x_quant, k if x_quant_group is None else x_quant_group, types, sym)
    if requests is not None and block_rows is not None and requests * block_rows != m:
        raise DumpFormatError(
            "shape-mismatch", path + "/x",
            f"{m} rows but requests x block_rows = {requests} x {block_rows} = "
            f"{requests * block_rows}")
    sel = _required_dataset(g, path, rules.dataset(_P, "selector"), types, sym)
    p = sym["P"] = sel.shape[0]
    sym["R"] = requests
    _dataset(g, path, rules.dataset(_P, "commit_counts"), types, sym)
    for leaf in ("bias", "residual"):
        rule = rules.dataset(_P, leaf)
        if rules.applies(rule, context):
            _dataset(g, path, rule, types, sym)
        elif g.dataset(leaf) is not None:
            # The reader notes and ignores it; a writer refuses to write what nobody reads.
            raise DumpFormatError("invalid-argument", f"{path}/{leaf}",
                                  f"present but the epilogue has no {leaf}; it would be ignored")
    if g.attrs.get("bias_at") == "start" and not rules.applies(rules.dataset(_P, "bias"), context):
        # The reader notes and ignores it, as it does a bias the epilogue does not add.
        raise DumpFormatError("invalid-argument", path,
                              'bias_at = "start" but the epilogue has no bias; it would be ignored')
    outputs = [leaf for leaf in ("y_unpacked", "y_packed", "y_before", "y_compact")
               if _dataset(g, path, rules.dataset(_P, leaf), types, sym) is not None]

    # projection_weights
    weight_rule = rules.group(_P, "weight")
    wpath = f"{path}/{weight_rule['name']}"
    weight = g.members.get(weight_rule["name"])
    if weight is None:
        raise DumpFormatError(weight_rule["refused"], path, 'missing group "weight"')
    segments: list[SegmentFacts] = []
    for name in sorted(weight.members):
        spath = f"{wpath}/{name}"
        segment = weight.members[name]
        if not isinstance(segment, Group):
            raise DumpFormatError("missing-member", spath,
                                  "expected a weight segment group, found a dataset")
        segments.append(_check_segment(spath, segment, k))
    if not segments:
        raise DumpFormatError("missing-member", wpath, "no weight segments")

    # Writer rules of dump-format.md §3 that the reader leaves to `check`.
    if not any(o in outputs for o in ("y_unpacked", "y_packed", "y_compact")):
        raise DumpFormatError("missing-member", path,
                              'missing dataset "y_unpacked" (at least one of y_unpacked, '
                              "y_packed, y_compact is required)")
    if logits_run == "" and role == "lm_head":
        raise DumpFormatError("missing-member", path,
                              'logits_run = "" names no /logits run (omit it for an lm_head of no run)')
    if logits_run is not None and role != "lm_head":
        raise DumpFormatError("attribute-invalid", path,
                              f'logits_run = "{logits_run}" is only read with role = "lm_head"')
    segments.sort(key=lambda s: (s.row_begin, s.name))
    return ProjectionFacts(path=path, k=k, n=n, m=m, p=p, in_stride=in_stride,
                           out_stride=out_stride, k_walk=k_walk, role=role,
                           logits_run=logits_run, segments=segments,
                           x_quant_group=x_quant_group if x_quant is not None else None)


def _known(container: str, kind: str, name: str) -> Optional[dict]:
    """The table's rule of a member, or None while the table does not have it."""
    try:
        return rules.rule(container, kind, name)
    except KeyError:
        return None


def _unknown_member(path: str, what: str) -> DumpFormatError:
    """A v2 member the generated rule table (the reader this package was built with) lacks."""
    return DumpFormatError("invalid-argument", path,
                           f"{what}: the reader's rule table (schema_rules.json) has no such "
                           "member; this build cannot write it")


_X_QUANT_ATTRS = ("x_quant", "x_quant_group", "x_quant_rounding")
_X_QUANT_DATASETS = ("x_quantized", "x_scales", "x_zero_points")


def _x_quant_attributes(path: str, g: Group, a: _Attrs) -> tuple[Optional[str], Optional[int]]:
    """x_quant, x_quant_group, x_quant_rounding as the reader reads them after k_walk; the
    group and rounding without x_quant are refused (the reader would ignore them)."""
    given = [n for n in _X_QUANT_ATTRS if n in g.attrs]
    for name in given:
        if _known(_P, "attribute", name) is None:
            raise _unknown_member(path, f"attribute {name}")
    if not given:
        return None, None
    quant = a.check_str(rules.attribute(_P, "x_quant"))
    group = a.check_int(rules.attribute(_P, "x_quant_group"))
    rounding = a.check_str(rules.attribute(_P, "x_quant_rounding"))
    if quant is None:
        raise DumpFormatError("invalid-argument", path,
                              f"{given[0]} without x_quant; it would be ignored")
    if rounding == "rna" and quant in ("e4m3", "e5m2"):
        # FP8 quantization always rounds to nearest even (dump-format v2); the reader refuses it alike.
        raise DumpFormatError("attribute-invalid", path,
                              f'x_quant_rounding = "rna" with x_quant = "{quant}": FP8 '
                              "quantization always rounds to nearest even (docs/dump-format.md §3.6)")
    return quant, group


def _x_quant_datasets(path: str, g: Group, quant: Optional[str], group: int,
                      types: dict[str, Optional[str]], sym: dict[str, Optional[int]]) -> None:
    """x_quantized, x_scales, x_zero_points after x, as the reader checks them. The scales'
    values are the quantize check's business: a scale that is not positive and finite is the
    engine's fault, which `ncert check` reports, so it is written as it is."""
    for name in _X_QUANT_DATASETS:
        if name in g.members and _known(_P, "dataset", name) is None:
            raise _unknown_member(f"{path}/{name}", f"dataset {name}")
    if quant is None and not any(name in g.members for name in _X_QUANT_DATASETS):
        return
    context = {"x_quant": quant}
    types = dict(types, x_quant=quant)
    k = sym["K"]
    assert k is not None
    # A group that does not divide K is guard 309 (guards.py): any column count until then.
    sym = dict(sym, **{"K/x_quant_group": k // group if k % group == 0 else None})
    for name in _X_QUANT_DATASETS:
        rule = rules.dataset(_P, name)
        if rules.applies(rule, context):
            _dataset(g, path, rule, types, sym)
        elif name in g.members:
            why = ("present without x_quant" if quant is None
                   else f"present but x_quant = {quant} has no zero points")
            raise DumpFormatError("invalid-argument", f"{path}/{name}", f"{why}; it would be ignored")


def _check_segment(path: str, g: Group, k: int) -> SegmentFacts:
    """check_segment of schema.cc: presence and type of the attributes it needs first, then
    their values, then the members the format, variant and codebook call for."""
    attrs = g.attrs
    a = _Attrs(path, attrs)
    format_rule = rules.attribute(_S, "format")
    fmt = a.require_str(format_rule, closed=False)
    begin = a.require_int(rules.attribute(_S, "row_begin"))
    end = a.require_int(rules.attribute(_S, "row_end"))
    a.closed(format_rule, fmt)
    if end <= begin:
        raise DumpFormatError("attribute-invalid", path, f"row_end {end} <= row_begin {begin}")
    name = path.rsplit("/", 1)[1]
    facts = SegmentFacts(path=path, name=name, format=fmt, row_begin=begin, row_end=end)
    context: dict[str, Optional[str]] = {"format": fmt}
    types: dict[str, Optional[str]] = {"format": fmt}
    sym: dict[str, Optional[int]] = {"K": k, "rows": end - begin}
    values_rule = rules.dataset(_S, "values")
    if rules.applies(values_rule, context):
        _dataset(g, path, values_rule, types, sym)
        if fmt in _SCALED:
            _check_scaled(path, g, a, facts, k, context, types, sym)
        _refuse_unread_attributes(path, g, context)
        check_string_attrs(path, g.attrs)
        return facts
    sym[_SCALE_ROWS_DIM] = end - begin
    gs = a.require_int(rules.attribute(_S, "group_size"))
    variant_rule, packing_rule = rules.attribute(_S, "variant"), rules.attribute(_S, "packing")
    variant = a.require_str(variant_rule, closed=False)
    packing = a.require_str(packing_rule, closed=False)
    a.closed(variant_rule, variant)
    a.closed(packing_rule, packing)
    context["variant"] = variant
    types["packing"] = packing
    a.check_str(rules.attribute(_S, "dequant"))
    _check_dequant_op(a, path, variant)
    zpp_rule = rules.attribute(_S, "zero_point_packing")
    if rules.applies(zpp_rule, context):
        types["zero_point_packing"] = a.check_str(zpp_rule) or "u8"
    codebook_rule = rules.attribute(_S, "codebook")
    if rules.applies(codebook_rule, context):
        context["codebook"] = a.check_str(codebook_rule)
        table_rule = rules.dataset(_S, "codebook")
        if rules.applies(table_rule, context):
            _dataset(g, path, table_rule, types, sym)
    codes = _required_dataset(g, path, rules.dataset(_S, "codes"), types, sym)
    scales = _required_dataset(g, path, rules.dataset(_S, "scales"), types, sym)
    biases_rule = rules.dataset(_S, "biases")
    biases: Optional[Stored] = None
    types["scales"] = scales.dtype
    sym["K/group_size"] = scales.shape[1]
    if rules.applies(biases_rule, context):
        biases = _dataset(g, path, biases_rule, types, sym)
    elif g.dataset("biases") is not None:
        raise DumpFormatError("invalid-argument", path + "/biases",
                              f"present but the {variant} variant has no biases; it would be ignored")
    zp_rule = rules.dataset(_S, "zero_points")
    if rules.applies(zp_rule, context):
        _check_zero_points(g, path, zp_rule, types, sym)
    _refuse_unread_attributes(path, g, context)
    check_string_attrs(path, g.attrs)
    facts.af4 = Af4Facts(group_size=gs, variant=variant, packing=packing,
                         codes_cols=codes.shape[1], scales_cols=scales.shape[1],
                         biases_cols=biases.shape[1] if biases is not None else 0)
    return facts


def _refuse_unread_attributes(path: str, g: Group, context: Mapping[str, Optional[str]]) -> None:
    """Writer rule: an attribute of the table that the segment's format (or variant) does not
    read is refused, once the reader's own checks have passed. The reader ignores it silently
    (dump-format.md §1.2), so `dequant_op = "fma"` on an int8 segment, or `group_size` on a bf16
    one, would declare something of the kernel that nothing reads or checks."""
    for rule in rules.rules_of(_S, "attribute"):
        name = rule["name"]
        if name not in g.attrs or rules.applies(rule, context):
            continue
        cond, values = next((c, v) for c, v in rule["if"].items() if context.get(c) not in v)
        raise DumpFormatError(
            "invalid-argument", path,
            f'attribute "{name}" = {render(g.attrs[name])} does not apply to {cond} '
            f'{context.get(cond)} (it is read for {cond} {", ".join(values)} only); it '
            "would be ignored")


#: The scaled weight formats (values of a narrow type times scales, dump-format v2).
_SCALED = ("int8", "e4m3", "e5m2")


#: The shape symbol of a scales dataset's rows: ceil(rows / scale_rows) (rows for AF4).
_SCALE_ROWS_DIM = "⌈rows/scale_rows⌉"


def _check_scaled(path: str, g: Group, a: _Attrs, facts: SegmentFacts, k: int,
                  context: Mapping[str, Optional[str]], types: dict[str, Optional[str]],
                  sym: dict[str, Optional[int]]) -> None:
    """scaled_members of schema.cc: group_size, scale_rows, dequant, then scales of
    [ceil(rows / scale_rows), *]; the grid itself is guard 309 (guards.py)."""
    gs_rule = rules.attribute(_S, "group_size")
    if rules.applies(gs_rule, context):
        gs = a.require_int(gs_rule)
    else:  # a table whose group_size row is AF4's only: optional, default K
        gs = a.integer("group_size", False, 1) or k
    sr_rule = _known(_S, "attribute", "scale_rows")
    if sr_rule is None and "scale_rows" in a.attrs:
        raise _unknown_member(path, "attribute scale_rows")
    scale_rows = (a.check_int(sr_rule) if sr_rule is not None else None) or 1
    a.check_str(rules.attribute(_S, "dequant"))
    rows = facts.row_end - facts.row_begin
    scale_row_count = -(-rows // scale_rows)
    sym = dict(sym, **{_SCALE_ROWS_DIM: scale_row_count, "K/group_size": None})
    scales_rule = rules.dataset(_S, "scales")
    if rules.applies(scales_rule, context):
        scales = _required_dataset(g, path, scales_rule, types, sym)
    else:  # a table whose scales row is AF4's only: the same member, as the spec states it
        found = _member(g, path + "/scales", True, ("bf16", "f16", "f32"), (scale_row_count, -1))
        assert found is not None
        scales = found
    facts.scaled = ScaledFacts(group_size=gs, scale_rows=scale_rows, scales_rows=scales.shape[0],
                               scales_cols=scales.shape[1])


def _check_dequant_op(a: _Attrs, path: str, variant: str) -> None:
    """dequant_op as schema.cc reads it: a value of the closed set that fits the variant
    (sub-mul and fused for zero-point only, the others for affine and codebook only)."""
    rule = rules.attribute(_S, "dequant_op")
    op = a.check_str(rule, closed=False)
    if op is None:
        return
    fits = op in af4.ZERO_POINT_OPS if variant == "zero-point" else op not in af4.ZERO_POINT_OPS
    if variant == "zero-point" and not fits:
        raise DumpFormatError("dequant-op-unknown", path,
                              f'AF4 dequant_op "{op}" is not one of sub-mul, fused '
                              "(what variant zero-point accepts)")
    a.closed(rule, op)
    if not fits:
        raise DumpFormatError("dequant-op-unknown", path,
                              f'AF4 dequant_op "{op}" applies to variant zero-point only; variant '
                              f"{variant} accepts fma, mul-add, either")


def _check_zero_points(g: Group, path: str, rule: dict, types: Mapping[str, Optional[str]],
                       sym: dict[str, Optional[int]]) -> None:
    """zero_points: present, of the type and width its packing gives (Z, §1.1), and, as ncert
    refuses them when it reads the weights, every value 0..15 and every trailing nibble 0."""
    packing = types.get("zero_point_packing") or "u8"
    groups = sym["K/group_size"]
    assert groups is not None
    sym["Z"] = af4.zero_point_columns(groups, packing)
    zp = _required_dataset(g, path, rule, types, sym)
    try:
        af4.unpack_zero_points(zp.array, packing, groups)
    except ValueError as e:
        raise DumpFormatError("attribute-invalid", f"{path}/{rule['name']}", str(e)) from None


# ---- storage the reader refuses before any member rule -------------------------------------

def check_chunks(path: str, d: Stored) -> None:
    """check_chunk_count of dataset_checks.cc: more than MAX_SMALL_CHUNKS chunks each under
    SMALL_CHUNK_BYTES is a chunk bomb, refused from the shape and chunk dims alone."""
    chunks = d.chunks
    if chunks is None:
        return
    count = 1
    for extent, c in zip(d.shape, chunks):
        count *= -(-extent // max(c, 1))
    one_chunk = d.array.itemsize
    for c in chunks:
        one_chunk *= max(c, 1)
    if count > limits.MAX_SMALL_CHUNKS and one_chunk < limits.SMALL_CHUNK_BYTES:
        raise DumpFormatError(
            "chunk-bomb", path,
            f"declares {_shape_string(d.shape)} in chunks of {_shape_string(chunks)} ({one_chunk} "
            f"bytes each): {count} chunks, over the {limits.MAX_SMALL_CHUNKS} allowed under "
            f"{limits.SMALL_CHUNK_BYTES} bytes each: its chunk index outweighs its data; refused "
            "before reading; rewrite it with chunks of whole rows")


# ---- logits runs, tensors, lm_heads ---------------------------------------------------------

def check_logits(path: str, g: Group) -> tuple[int, int]:
    """check_logits of schema.cc. Returns (tokens T, vocab V)."""
    a = _Attrs(path, g.attrs)
    vocab = a.require_int(rules.attribute(_R, "vocab"))
    a.check_str(rules.attribute(_R, "tie_break"))
    a.check_str(rules.attribute(_R, "prompt"))
    check_string_attrs(path, g.attrs)
    types: dict[str, Optional[str]] = {}
    sym: dict[str, Optional[int]] = {"V": vocab}
    tokens = _required_dataset(g, path, rules.dataset(_R, "tokens"), types, sym)
    t = sym["T"] = tokens.shape[0]
    # The logits are streamed, not read whole: their own sentences (schema.cc).
    logits_rule = rules.dataset(_R, "logits")
    lpath = f"{path}/{logits_rule['name']}"
    logits = g.dataset(logits_rule["name"])
    if logits is None:
        _dataset(g, path, logits_rule, types, sym)  # raises: missing, or a group in its place
        raise _missing_dataset(lpath)  # (were the table ever to make it optional)
    allowed = rules.allowed_dtypes(logits_rule)
    if logits.dtype not in allowed:
        raise DumpFormatError("datatype-refused", lpath,
                              f"dtype {logits.dtype} where {' or '.join(allowed)} is required "
                              "(raw logits)")
    if logits.shape != rules.expected_shape(logits_rule, sym):
        raise DumpFormatError("shape-mismatch", lpath,
                              f"shape {_shape_string(logits.shape)} but tokens and vocab "
                              f"require [{t}, {vocab}]")
    _dataset(g, path, rules.dataset(_R, "positions"), types, sym)
    _dataset(g, path, rules.dataset(_R, "prompt_tokens"), types, sym)
    return t, vocab


def check_tensor(path: str, d: Stored) -> None:
    """check_tensors of schema.cc, plus the compare policy the compare command parses."""
    allowed = rules.allowed_dtypes(rules.dataset("tensor", ""))
    if d.dtype not in allowed:
        raise DumpFormatError("datatype-refused", path,
                              f"dtype {d.dtype}; state tensors are {_dtype_prose(allowed)}")
    a = _Attrs(path, d.attrs)
    a.check_str(rules.attribute("tensor", "compare"), parse.parse_tensor_policy)
    check_string_attrs(path, d.attrs)


def check_lm_head(facts: ProjectionFacts, runs: Mapping[str, tuple[int, int]]) -> None:
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
