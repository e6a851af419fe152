"""The member rules of dump format v1, loaded from the C++ reader's own table.

``schema_rules.json`` (beside this file) is written by ``ncert-docgen`` from the rule table in
certify/io/schema_rules.cc, the table the C++ schema checker reads and docs/dump-format.md
prints; the C++ test ``GeneratedDocs.TheSourceTreeIsUpToDate`` fails when the file differs from
what the table renders, so it is never edited by hand. schema.py and guards.py take from it
every member's presence, element types, shape, integer minimum and closed value set, and what
the table's conditions and context-dependent types resolve to. What stays in code on both sides
is the order of the checks, the grammars of ``accumulator``, ``k_walk`` and ``compare``
(parse.py), and the rules that join members (x rows = requests x block_rows, lm_head shapes).
"""

from __future__ import annotations

import json
import os
from typing import Mapping, Optional, Sequence

__all__ = ["DATA", "SCHEMA", "VERSION", "VERSIONS", "attribute", "dataset", "group", "rule", "rules_of",
           "applies", "allowed_dtypes", "expected_shape", "codes_per_element", "one_of_names"]

_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema_rules.json")

with open(_FILE, encoding="utf-8") as _f:
    DATA = json.load(_f)

#: The root's ncert_schema and ncert_schema_version (dump-format.md §2).
SCHEMA: str = DATA["schema"]
VERSION: int = DATA["version"]

_RULES = {(r["container"], r["kind"], r["name"]): r for r in DATA["members"]}


def rule(container: str, kind: str, name: str) -> dict:
    """The rule of one member; a KeyError names a member the table does not have."""
    try:
        return _RULES[(container, kind, name)]
    except KeyError:
        raise KeyError(f"no member rule for {container} {kind} {name!r} in {_FILE}") from None


def attribute(container: str, name: str) -> dict:
    return rule(container, "attribute", name)


def dataset(container: str, name: str) -> dict:
    return rule(container, "dataset", name)


def group(container: str, name: str) -> dict:
    return rule(container, "group", name)


def rules_of(container: str, kind: Optional[str] = None) -> list:
    """The container's rules in table order (the order of the page's tables)."""
    return [r for r in DATA["members"]
            if r["container"] == container and (kind is None or r["kind"] == kind)]


def applies(r: dict, context: Mapping[str, Optional[str]]) -> bool:
    """rule_applies: the rule's condition, a conjunction over the parsed attributes
    ("epilogue", "format", "variant", "codebook"); a missing attribute satisfies nothing."""
    return all(context.get(name) in values for name, values in r["if"].items())


def allowed_dtypes(r: dict, context: Optional[Mapping[str, Optional[str]]] = None) -> list:
    """The element types a dataset member accepts; `context` gives what a context-dependent
    rule depends on ({"output_dtype": "bf16"}, {"packing": ...}, {"format": ...},
    {"scales": <the scales' dtype>})."""
    if r["dtype_by"] is None:
        return list(r["dtypes"])
    by = r["dtype_by"]
    return list(by["map"][(context or {})[by["of"]]])


def expected_shape(r: dict, symbols: Mapping[str, Optional[int]]) -> tuple[int, ...]:
    """expected_shape: the rule's dims resolved with `symbols` ({"M": 4, "in_stride": 16, ...});
    -1 for a symbol not known yet or never known when the file is opened."""
    out = []
    for d in r["dims"]:
        status = DATA["dims"][d]
        if isinstance(status, int):
            out.append(status)
        elif status == "known":
            value = symbols.get(d)
            out.append(-1 if value is None else int(value))
        else:
            out.append(-1)
    return tuple(out)


def codes_per_element(packing: str) -> int:
    """AF4 codes per stored element of the codes dataset (8 per u32, 2 per u8)."""
    return DATA["af4_codes_per_element"][packing]


#: The ncert_schema_version values the reader accepts (the table states its newest).
VERSIONS: tuple[int, ...] = tuple(DATA.get("versions", range(1, DATA["version"] + 1)))


def one_of_names(container: str, name: str) -> Sequence[str]:
    """The closed value set of a string attribute (empty when any string is accepted)."""
    values = attribute(container, name)["values"]
    return tuple(values["names"]) if values else ()
