"""The attribute-value parsers of the C++ reader, with its exact messages.

Each function returns None when the value is valid and otherwise ``(error_name, message)``.
The closed value sets (output_dtype, epilogue, residual_at, format, the AF4 attributes,
output_rounding) come from the reader's member rules (rules.py, schema_rules.json); the grammars
of accumulator, k_walk and the tensor compare policy are transcribed from
reference/linear_spec.cc and certify/logits/policy.cc (including the C library's number syntax:
strtod / from_chars, not Python's).
"""

from __future__ import annotations

import math
import re
from typing import List, Optional, Tuple

from . import rules

__all__ = [
    "strtod_full",
    "parse_accumulator",
    "parse_output_dtype",
    "parse_epilogue",
    "parse_residual_at",
    "parse_k_walk",
    "k_walk_parts",
    "k_walk_chunk",
    "k_walk_message",
    "parse_weight_format",
    "parse_af4_variant",
    "parse_af4_codebook",
    "parse_af4_packing",
    "parse_dequant",
    "parse_dequant_op",
    "parse_output_rounding",
    "parse_tensor_policy",
]

Problem = Optional[Tuple[str, str]]

_WS = "[ \t\n\v\f\r]*"
# re.ASCII: \d is 0-9 only, as for the C library (Python would also take other scripts' digits).
_DEC = re.compile(_WS + r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)
_HEX = re.compile(_WS + r"([+-]?)0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?\d+)?",
                  re.ASCII)
_SPECIAL = re.compile(_WS + r"[+-]?(inf|infinity|nan(\([0-9a-zA-Z_]*\))?)",
                      re.IGNORECASE | re.ASCII)


def strtod_full(text: str) -> Optional[float]:
    """The value C's strtod gives when it consumes all of `text`, else None.

    (strtod skips leading blanks, takes decimal and hexadecimal forms, inf and nan; the reader
    then demands that nothing is left over, so a trailing blank is refused.)
    """
    if _DEC.fullmatch(text):
        return float(text.lstrip(" \t\n\v\f\r"))
    m = _HEX.fullmatch(text)
    if m:
        body = text.lstrip(" \t\n\v\f\r")
        sign = -1.0 if body.startswith("-") else 1.0
        digits = body.lstrip("+-")
        if not m.group(3):
            digits += "p0"
        return sign * float.fromhex(digits)
    if _SPECIAL.fullmatch(text):
        word = text.strip(" \t\n\v\f\r").lower()
        value = math.nan if "nan" in word else math.inf
        return -value if word.startswith("-") else value
    return None


def _from_chars_int(text: str, signed: bool, bits: int) -> Optional[int]:
    """std::from_chars over all of `text` (no '+', no blanks, '-' only when signed)."""
    if not re.fullmatch(r"-?[0-9]+" if signed else r"[0-9]+", text):
        return None
    v = int(text)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return v if lo <= v <= hi else None


def _one_of(value: str, container: str, attribute: str) -> Problem:
    """The attribute's closed value set, as the reader's rule holds it."""
    values = rules.attribute(container, attribute)["values"]
    if value in values["names"]:
        return None
    names = ", ".join(values["names"])
    return values["refused"], f'{values["what"]} "{value}" is not one of {names}'


def parse_accumulator(s: str) -> Problem:
    if s in ("f32-rn", "f32-rz", "matrix-unit"):
        return None
    if s.startswith("u="):
        u = strtod_full(s[2:]) if s[2:] else None
        if u is not None and math.isfinite(u) and 0 < u < 0.5:
            return None
    return ("accumulator-unknown",
            f'accumulator "{s}" is not one of f32-rn, f32-rz, matrix-unit, u=<x> with 0 < x < 0.5')


def parse_output_dtype(s: str) -> Problem:
    return _one_of(s, "projection", "output_dtype")


def parse_epilogue(s: str) -> Problem:
    return _one_of(s, "projection", "epilogue")


def parse_residual_at(s: str) -> Problem:
    return _one_of(s, "projection", "residual_at")


_K_WALK_FORMS = (
    "seq, seq-fma, split:<P>, split:<P>:fma (P >= 1), lanes:<L>:<tree>, lanes:<L>:<tree>:fma (L >= 2), "
    "promote:<P>:<p>:<rnd>, promote:<P>:<p>:<rnd>:fma (P >= 1, 8 <= p <= 24, rnd rne or rz), "
    "splitk:<S>:<tree>/<inner> (S >= 1, inner seq, seq-fma, a lanes or a promote form); "
    "tree seq, halving, pairs or butterfly(<d>,...) (all but seq need L or S a power of two; a butterfly's "
    "distances are the powers of two below it, each once, in the order the kernel adds them), or for lanes "
    "groups(<g>,<inner>,<outer>) (g >= 2 dividing L <= 65536, inner and outer seq, halving or pairs); "
    "codes:<C>:<scaling>/<walk> (C >= 1, scaling scale-product, w-scale-first or x-scale-first, walk any form "
    "above, or once for one sum scaled once, C = K) for a kernel that sums integer code products")
_CODE_SCALINGS = ("scale-product", "w-scale-first", "x-scale-first")
_TREES = ("seq", "halving", "pairs")


def _butterfly_distances(tree: str) -> Optional[List[int]]:
    """The distances of butterfly(<d>,...), each a power of two given once; None otherwise."""
    if not tree.startswith("butterfly(") or not tree.endswith(")") or len(tree) <= len("butterfly("):
        return None
    out: List[int] = []
    for field in tree[len("butterfly("):-1].split(","):
        d = _from_chars_int(field, True, 64)
        if d is None or d < 1 or d & (d - 1) or d in out:
            return None
        out.append(d)
    return out


def _groups(tree: str) -> Optional[tuple[int, str, str]]:
    """(g, inner, outer) of groups(<g>,<inner>,<outer>), inner and outer seq, halving or
    pairs and g >= 2; None otherwise."""
    if not tree.startswith("groups(") or not tree.endswith(")"):
        return None
    f = tree[len("groups("):-1].split(",")
    if len(f) != 3 or f[1] not in _TREES or f[2] not in _TREES:
        return None
    g = _from_chars_int(f[0], True, 64)
    return (g, f[1], f[2]) if g is not None and g >= 2 else None


def _tree_fits(tree: str, n: int, lanes: bool = False) -> bool:
    """A tree over n values (reference/linear_spec.cc tree_fits): seq for any n; halving, pairs
    and butterfly for powers of two, a butterfly's distances exactly 1, 2, ..., n/2; for lanes
    groups(g,inner,outer) with g dividing n <= 65536 and each tree fitting its values."""
    groups = _groups(tree)
    if groups is not None:
        g, inner, outer = groups
        return lanes and n <= 65536 and n % g == 0 and _tree_fits(inner, g) and _tree_fits(outer, n // g)
    if tree == "seq":
        return True
    if n < 1 or n & (n - 1):
        return False
    if tree in _TREES:
        return True
    distances = _butterfly_distances(tree)
    return distances is not None and n >= 2 and sum(distances) == n - 1


def _inner_walk_valid(s: str) -> bool:
    """The walks a part can be reduced by: seq, seq-fma, lanes:<L>:<tree>[:fma],
    promote:<P>:<p>:<rnd>[:fma] (reference/linear_spec.cc parse_inner)."""
    if s in ("seq", "seq-fma"):
        return True
    f = s.split(":")
    if f[0] == "lanes":
        if len(f) != 3 and not (len(f) == 4 and f[3] == "fma"):
            return False
        lanes = _from_chars_int(f[1], True, 64)
        return lanes is not None and lanes >= 2 and _tree_fits(f[2], lanes, lanes=True)
    if f[0] == "promote":
        if len(f) != 4 and not (len(f) == 5 and f[4] == "fma"):
            return False
        block = _from_chars_int(f[1], True, 64)
        bits = _from_chars_int(f[2], True, 64)
        return (block is not None and block >= 1 and bits is not None and 8 <= bits <= 24
                and f[3] in ("rne", "rz"))
    return False


def k_walk_chunk(s: str) -> Optional[int]:
    """C of a valid codes:<C>:<scaling>/<walk> (the K elements each integer term sums), 1 for
    every other valid form; None when invalid (reference/linear_spec.cc parse_codes)."""
    if not s.startswith("codes:"):
        return 1 if k_walk_parts(s) is not None else None
    head, slash, walk = s[6:].partition("/")
    fields = head.split(":")
    if not slash or len(fields) != 2 or walk.startswith("codes:"):
        return None
    chunk = _from_chars_int(fields[0], True, 64)
    if chunk is None or chunk < 1 or fields[1] not in _CODE_SCALINGS:
        return None
    return chunk if walk == "once" or k_walk_parts(walk) is not None else None


def k_walk_parts(s: str) -> Optional[int]:
    """The number of equal parts a valid k_walk cuts its terms into (guard-walk-split: they must
    be a multiple): P of split:<P>, S of splitk:<S>:..., 1 for every other form, the inner walk's
    for codes:<C>:<scaling>/<walk>; None when invalid."""
    if s.startswith("codes:"):
        walk = s.partition("/")[2]
        if k_walk_chunk(s) is None:
            return None
        return 1 if walk == "once" else k_walk_parts(walk)
    if _inner_walk_valid(s):
        return 1
    if s.startswith("splitk:"):
        head, slash, inner = s[7:].partition("/")
        fields = head.split(":")
        if not slash or len(fields) != 2:
            return None
        parts = _from_chars_int(fields[0], True, 64)
        if parts is None or parts < 1 or not _tree_fits(fields[1], parts) or not _inner_walk_valid(inner):
            return None
        return parts
    m = re.fullmatch(r"split:([^:]*)(:fma)?", s)
    if not m:
        return None
    parts = _from_chars_int(m.group(1), True, 64)
    return parts if parts is not None and parts >= 1 else None


def k_walk_message(s: str) -> str:
    """The reader's sentence on an invalid k_walk (error k-walk-invalid)."""
    return f'k_walk "{s}" is not one of {_K_WALK_FORMS}'


def parse_k_walk(s: str) -> Problem:
    if k_walk_parts(s) is not None:
        return None
    return ("k-walk-invalid", k_walk_message(s))


def parse_weight_format(s: str) -> Problem:
    return _one_of(s, "segment", "format")


def parse_af4_variant(s: str) -> Problem:
    return _one_of(s, "segment", "variant")


def parse_af4_codebook(s: str) -> Problem:
    return _one_of(s, "segment", "codebook")


def parse_af4_packing(s: str) -> Problem:
    return _one_of(s, "segment", "packing")


def parse_dequant(s: str) -> Problem:
    return _one_of(s, "segment", "dequant")


def parse_dequant_op(s: str) -> Problem:
    """dump-format.md §4 segment attribute: the f32 operation order of s*q + b."""
    return _one_of(s, "segment", "dequant_op")


def parse_output_rounding(s: str) -> Problem:
    """dump-format.md §3 projection attribute: how the engine rounds to the output type."""
    return _one_of(s, "projection", "output_rounding")


def _policy_double(text: str) -> bool:
    v = strtod_full(text) if text else None
    return v is not None and math.isfinite(v) and v >= 0


def parse_tensor_policy(s: str) -> Problem:
    """certify/logits/policy.cc parse_tensor_policy: the /tensors compare attribute."""
    bad = ("policy-invalid",
           f'policy "{s}" is not one of bitwise, ulp:N, abs:A[,rel:R], kl:X, top1')
    kind = None
    if s in ("bitwise", "top1"):
        kind = s
    elif s.startswith("ulp:"):
        if _from_chars_int(s[4:], False, 64) is None:
            return bad
        kind = "ulp"
    elif s.startswith("kl:"):
        if not _policy_double(s[3:]):
            return bad
        kind = "kl"
    elif s.startswith("abs:"):
        rest = s[4:]
        a, comma, r = rest.partition(",")
        if not _policy_double(a):
            return bad
        if comma and (not r.startswith("rel:") or not _policy_double(r[4:])):
            return bad
        kind = "abs"
    else:
        return bad
    if kind in ("kl", "top1"):
        return ("policy-invalid",
                f'policy "{s}" applies to logits only; tensors take bitwise, ulp:N or abs:A[,rel:R]')
    return None
