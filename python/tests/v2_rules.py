"""Provisional v2 rows for the writer's tests while schema_rules.json (generated from the C++
table) does not have them yet: each row modelled on the v2 spec of dump-format.md, applied with
mock.patch for the duration of a test. Once the generated table has a member, its own row wins
and nothing here is used for it."""

from __future__ import annotations

import copy
from contextlib import ExitStack, contextmanager
from typing import Iterator
from unittest import mock

from ncert_dump import rules

HAVE_V2_TABLE = 2 in rules.VERSIONS


def _row(container, kind, name, typ, **extra):
    row = {"container": container, "kind": kind, "name": name, "required": False, "when": "always",
           "if": {}, "type": typ, "min_value": None, "values": None, "dtypes": [], "dtype_by": None,
           "shape": "scalar", "dims": [], "absent": "none", "refused": None, "skips": [],
           "default": None}
    row.update(extra)
    return row


def _extend(values: list, *more) -> None:
    values.extend(v for v in more if v not in values)


@contextmanager
def v2_rules() -> Iterator[None]:
    """The rule table with every v2 member (the generated rows where they exist)."""
    rows = copy.deepcopy(rules._RULES)

    def get(container, kind, name):
        return rows[(container, kind, name)]

    _extend(get("projection", "dataset", "x")["dtypes"], "f16")
    for leaf in ("bias", "residual"):
        _extend(get("projection", "dataset", leaf)["dtypes"], "f16")
    _extend(get("projection", "attribute", "output_dtype")["values"]["names"], "f16")
    for leaf in ("y_unpacked", "y_packed", "y_compact", "y_before"):
        get("projection", "dataset", leaf)["dtype_by"]["map"].setdefault("f16", ["f16"])
    _extend(get("logits_run", "dataset", "logits")["dtypes"], "bf16", "f16")
    _extend(get("tensor", "dataset", "")["dtypes"], "e4m3", "e5m2")
    _extend(get("segment", "attribute", "format")["values"]["names"], "f16", "int8", "e4m3", "e5m2")
    values = get("segment", "dataset", "values")
    _extend(values["if"]["format"], "f16", "int8", "e4m3", "e5m2")
    for fmt, t in (("f16", "f16"), ("int8", "i8"), ("e4m3", "e4m3"), ("e5m2", "e5m2")):
        values["dtype_by"]["map"].setdefault(fmt, [t])
    _extend(get("segment", "attribute", "packing")["values"]["names"], "u8-ggml")
    get("segment", "dataset", "codes")["dtype_by"]["map"].setdefault("u8-ggml", ["u8"])
    for name in ("group_size", "dequant"):
        _extend(get("segment", "attribute", name)["if"]["format"], "int8", "e4m3", "e5m2")
    scales = get("segment", "dataset", "scales")
    _extend(scales["if"]["format"], "int8", "e4m3", "e5m2")
    scales["dims"] = ["⌈rows/scale_rows⌉", "K/group_size"]
    quant_if = {"x_quant": ["int8", "uint8", "e4m3", "e5m2"]}
    by_quant = {"of": "x_quant", "map": {"int8": ["i8"], "uint8": ["u8"], "e4m3": ["e4m3"],
                                         "e5m2": ["e5m2"]}}
    new = [
        _row("segment", "attribute", "preset", "string",
             values={"names": ["q4_0", "q4_1", "q8_0"], "refused": "attribute-invalid",
                     "what": "preset"}),
        _row("segment", "attribute", "zero_point", "int", min_value=0),
        _row("segment", "attribute", "scale_rows", "int", min_value=1,
             **{"if": {"format": ["int8", "e4m3", "e5m2"]}}),
        _row("projection", "attribute", "x_quant", "string",
             values={"names": quant_if["x_quant"], "refused": "attribute-invalid",
                     "what": "x_quant"}),
        _row("projection", "attribute", "x_quant_group", "int", min_value=1, **{"if": quant_if}),
        _row("projection", "attribute", "x_quant_rounding", "string", **{"if": quant_if},
             values={"names": ["rne", "rna"], "refused": "attribute-invalid",
                     "what": "x_quant_rounding"}),
        _row("projection", "dataset", "x_quantized", "x_quant_dtype", required=True,
             dtype_by=by_quant, shape="dims", dims=["M", "K"], **{"if": quant_if}),
        _row("projection", "dataset", "x_scales", "dtypes", required=True,
             dtypes=["f32", "f16", "bf16"], shape="dims", dims=["M", "K/x_quant_group"],
             **{"if": quant_if}),
        _row("projection", "dataset", "x_zero_points", "x_quant_dtype", dtype_by=by_quant,
             shape="dims", dims=["M", "K/x_quant_group"],
             **{"if": {"x_quant": ["int8", "uint8"]}}),
    ]
    for r in new:
        rows.setdefault((r["container"], r["kind"], r["name"]), r)
    per = dict(rules.DATA["af4_codes_per_element"])
    per.setdefault("u8-ggml", 2)
    dims = dict(rules.DATA["dims"])
    for d in ("⌈rows/scale_rows⌉", "K/x_quant_group"):
        dims.setdefault(d, "known")
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(rules, "_RULES", rows))
        stack.enter_context(mock.patch.dict(rules.DATA, {"af4_codes_per_element": per, "dims": dims}))
        stack.enter_context(mock.patch.object(rules, "VERSIONS", (1, 2)))
        yield
