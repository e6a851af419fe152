"""The packing helper's host guards that decide whether a projection can be evaluated at all.

`ncert check` runs packing/guards.cc on every projection; a weight table or a stride it trips
means no reference can be computed (the geometry check fails and the bound is blocked). Those
are mistakes of the dump, not findings about the engine, so the writer refuses them with the
guard's name and sentence: walk split, segment table, AF4 geometry, strides (checks 3-6).

The selector rules (rows in range, duplicates, cap, commit counts, prefix) are deliberately not
refused: they describe what the engine did, and a dump of a misbehaving engine must be
writable so that `ncert check` can report it.
"""

from __future__ import annotations

from . import parse, rules
from .errors import DumpFormatError
from .schema import ProjectionFacts

__all__ = ["check_weights_and_strides"]


def check_weights_and_strides(f: ProjectionFacts) -> None:
    """Guards 3 (walk split), 4 (segment table), 5 (AF4 geometry), 6 (strides), in order."""
    if f.k_walk is not None:
        parts = parse.k_walk_parts(f.k_walk)
        chunk = parse.k_walk_chunk(f.k_walk)
        if parts is None or chunk is None:  # check_projection refuses it first; the same finding if it did not
            raise DumpFormatError("k-walk-invalid", f.path, parse.k_walk_message(f.k_walk))
        head = f"k_walk {f.k_walk}: K = {f.k}"
        if f.k_walk.startswith("codes:") and f.k % chunk:
            raise DumpFormatError("guard-walk-split", f.path, f"{head} is not a multiple of C = {chunk}")
        if f.k_walk.startswith("codes:") and f.k_walk.endswith("/once") and f.k // chunk != 1:
            raise DumpFormatError("guard-walk-split", f.path, f"{head} makes {f.k // chunk} code sums of {chunk}, "
                                  "where once scales a single sum (C = K)")
        if f.k_walk.startswith("codes:") and (f.k // chunk) % parts:
            raise DumpFormatError("guard-walk-split", f.path, f"{head} makes {f.k // chunk} code sums of {chunk}, "
                                  f"not a multiple of {parts}")
        if f.k % parts:
            raise DumpFormatError("guard-walk-split", f.path, f"{head} is not a multiple of {parts}")
    if f.x_quant_group is not None and (f.x_quant_group < 1 or f.k % f.x_quant_group):
        raise DumpFormatError("guard-af4-geometry", f.path,
                              f"x_quant_group {f.x_quant_group} does not divide K = {f.k}")
    _check_segments(f)
    _check_af4(f)
    for what, stride, width in (("input x", f.in_stride, f.k), ("output", f.out_stride, f.n)):
        if stride < width:
            raise DumpFormatError("guard-stride-below-width", f.path,
                                  f"{what} stride {stride} < valid width {width}")


def _check_segments(f: ProjectionFacts) -> None:
    wpath = f.path + "/weight"
    nxt = 0
    for s in f.segments:  # sorted by row_begin
        if s.row_begin > nxt:
            raise DumpFormatError(
                "guard-segment-table", wpath,
                f"gap: output columns [{nxt}, {s.row_begin}) belong to no segment "
                f"(next is {s.name})")
        if s.row_begin < nxt:
            raise DumpFormatError(
                "guard-segment-table", wpath,
                f"overlap: segment {s.name} starts at {s.row_begin} but columns up to {nxt} "
                "are already covered")
        nxt = s.row_end
    if nxt != f.n:
        raise DumpFormatError("guard-segment-table", wpath,
                              f"segments cover [0, {nxt}) but N = {f.n}")


def _fits(f: ProjectionFacts, s, cols: int, declared: int) -> str:
    """What group_size the stored scales fit (K / their columns), as ncert's geometry check says."""
    if cols >= 1 and f.k % cols == 0 and f.k // cols != declared:
        return (f"; {s.name}'s stored scales fit group_size = {f.k // cols} "
                f"(K {f.k} / {cols} columns), not the declared {declared}")
    return ""


def _check_scaled(f: ProjectionFacts, s) -> None:
    """A scaled segment's grid (guards.cc): groups along K, blocks of scale_rows rows."""
    q = s.scaled
    gs, sr, rows = q.group_size, q.scale_rows, s.row_end - s.row_begin
    if gs < 1 or f.k % gs:
        raise DumpFormatError("guard-af4-geometry", s.path,
                              f"segment {s.name}: group_size {gs} does not divide K = {f.k}"
                              + _fits(f, s, q.scales_cols, gs))
    if sr < 1:
        raise DumpFormatError("guard-af4-geometry", s.path, f"segment {s.name}: scale_rows {sr} < 1")
    want_rows = -(-rows // sr)
    if q.scales_cols != f.k // gs or q.scales_rows != want_rows:
        raise DumpFormatError(
            "guard-af4-geometry", s.path,
            f"segment {s.name}: scales are [{q.scales_rows}, {q.scales_cols}], "
            f"[ceil(rows/scale_rows), K/group_size] = [{want_rows}, {f.k // gs}]"
            + _fits(f, s, q.scales_cols, gs))


def _check_af4(f: ProjectionFacts) -> None:
    for s in f.segments:
        if s.scaled is not None:
            _check_scaled(f, s)
            continue
        q = s.af4
        if q is None:  # format bf16, f32 or f16: the values are stored as they are
            continue
        gs = q.group_size
        if gs < 1 or f.k % gs:
            raise DumpFormatError("guard-af4-geometry", s.path,
                                  f"segment {s.name}: group_size {gs} does not divide K = {f.k}"
                                  + _fits(f, s, q.scales_cols, gs))
        per = rules.codes_per_element(q.packing)  # 8 per u32, 2 per u8 (schema_rules.json)
        if f.k % per or q.codes_cols != f.k // per:
            need = " (K is not a multiple)" if f.k % per else f" = {f.k // per}"
            raise DumpFormatError(
                "guard-af4-geometry", s.path,
                f"segment {s.name}: codes have {q.codes_cols} columns; {q.packing} with "
                f"K = {f.k} needs K/{per}{need}")
        if q.scales_cols != f.k // gs:
            raise DumpFormatError(
                "guard-af4-geometry", s.path,
                f"segment {s.name}: scales have {q.scales_cols} columns, K/group_size = "
                f"{f.k // gs}" + _fits(f, s, q.scales_cols, gs))
        if q.variant == "affine" and q.biases_cols != q.scales_cols:
            raise DumpFormatError(
                "guard-af4-geometry", s.path,
                f"segment {s.name}: biases have {q.biases_cols} columns, scales {q.scales_cols}")
