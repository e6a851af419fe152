"""Weight segments (dump-format.md §4): one contiguous range of W rows in one format."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

import numpy as np

from . import af4
from .encode import as_numpy, encode_float, encode_int, natural_name, shape_of
from .errors import DumpFormatError
from .nodes import Group

__all__ = ["Segment", "as_segment", "segment_group", "stated_ks", "default_k"]


@dataclass
class Segment:
    """Rows ``[row_begin, row_end)`` of W (= output columns) in one weight format.

    bf16 / f32 segments: ``values`` ``[rows, k]`` (floats rounded to nearest even into
    `format`, or uint16 bf16 patterns).

    af4 segments: either ``codes`` (unpacked ``[rows, k]`` integers 0..15, packed here per
    `packing`) or ``packed_codes`` (already in the stored layout: ``uint32 [rows, k/8]`` for
    u32-lsb, ``uint8 [rows, k/2]`` for u8-msb / u8-lsb); ``scales`` ``[rows, k/group_size]`` and,
    for ``variant="affine"``, ``biases`` of the same shape, stored as `scale_dtype` (default:
    bf16 for uint16 patterns, f16 for float16 arrays, else f32). ``codebook`` is "nf4",
    "af4-64" or 16 custom values (written as codebook = "custom" plus a ``codebook`` dataset).
    ``dequant`` / ``dequant_op`` declare what the kernel does with the weights (§4, §8).

    ``variant="zero-point"`` (w = (q - zp)*scale, GPTQ / AWQ style) takes ``zero_points``
    ``[rows, k/group_size]`` integers 0..15, one per group, and no biases; they are stored as
    ``zero_point_packing`` says: "u8" (one per byte, the default) or packed along the groups
    like codes ("u32-lsb", "u8-msb", "u8-lsb"). Its ``dequant_op`` is "sub-mul" (the default)
    or "fused".

    f16 segments: ``values`` ``[rows, k]`` like bf16 / f32. Scaled segments ("int8", "e4m3",
    "e5m2"): ``values`` ``[rows, k]`` of that type (int8 integers; e4m3 / e5m2 as uint8
    patterns or values exact in the type) and ``scales`` ``[ceil(rows / scale_rows),
    k / group_size]`` (w = q * s); ``group_size`` is required, as dump-format.md §4.1 says
    (``group_size=k`` for one scale per row), and ``scale_rows`` defaults to 1.

    ggml.segment_from_blocks builds the segment that declares ggml's Q4_0, Q4_1 or Q8_0 blocks.
    """

    format: str
    row_begin: int
    row_end: int
    values: Any = None
    codes: Any = None
    packed_codes: Any = None
    scales: Any = None
    biases: Any = None
    group_size: Optional[int] = None
    variant: Optional[str] = None
    packing: Optional[str] = None
    codebook: Any = None
    dequant: Optional[str] = None
    dequant_op: Optional[str] = None
    zero_points: Any = None
    zero_point_packing: Optional[str] = None
    scale_dtype: Optional[str] = None
    name: Optional[str] = None
    scale_rows: Optional[int] = None


_FIELDS = {f.name for f in fields(Segment)}


def as_segment(spec, path: str) -> Segment:
    """A Segment from a Segment or a dict with the same keys."""
    if isinstance(spec, Segment):
        return spec
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - _FIELDS)
        if unknown:
            raise DumpFormatError("invalid-argument", path,
                                  f"unknown segment key(s) {', '.join(unknown)}")
        try:
            return Segment(**spec)
        except TypeError as e:
            raise DumpFormatError("invalid-argument", path, f"segment: {e}") from None
    raise DumpFormatError("invalid-argument", path,
                          f"a segment is a Segment or a dict, got {type(spec).__name__}")


def segment_name(seg: Segment, index: int) -> str:
    """The group name: the caller's, or s<i>_<format> like the project's own fixtures."""
    return seg.name if seg.name is not None else f"s{index}_{seg.format}"


def stated_ks(seg: Segment) -> tuple[Optional[int], Optional[int]]:
    """K as this segment's arrays state it: (by its weights: the width of values or unpacked
    codes, or of packed codes times the codes per element; by its scales: their columns times
    group_size), each None when the arrays do not state it."""
    by_weights = by_scales = None
    if seg.values is not None:
        shape = shape_of(seg.values)
    elif seg.codes is not None:
        shape = shape_of(seg.codes)
    elif seg.packed_codes is not None and seg.packing in af4.PACKINGS:
        s = shape_of(seg.packed_codes)
        shape = (s[0], s[1] * af4.codes_per_word(seg.packing)) if len(s) == 2 else s
    else:
        shape = ()
    if len(shape) == 2:
        by_weights = int(shape[1])
    gs = seg.group_size
    if seg.scales is not None and isinstance(gs, (int, np.integer)) and not isinstance(gs, bool):
        s = shape_of(seg.scales)
        if len(s) == 2 and gs >= 1:
            by_scales = int(s[1]) * int(gs)
    return by_weights, by_scales


def default_k(segs: list[Segment], x_width: Optional[int] = None) -> Optional[int]:
    """K when the caller does not declare it: what the segments' arrays state. When they state
    several values, one is wrong, and the one equal to the width of x (unpadded activations) is
    taken: the checks then name the array that disagrees with it, as the reader names it in a
    file that declares that K (packed codes of half the width are the codes' fault, not the
    scales'). Otherwise the first weights that state a K decide, else the first scales."""
    stated = [k for seg in segs for k in stated_ks(seg)]
    if x_width is not None and x_width in stated:
        return x_width
    by_weights = [w for w, _ in map(stated_ks, segs) if w is not None]
    if by_weights:
        return by_weights[0]
    return next((k for k in stated if k is not None), None)


#: Formats stored as values, and the type of those values.
VALUE_FORMATS = {"bf16": "bf16", "f32": "f32", "f16": "f16"}
#: Scaled formats (values of a narrow type times scales) and the type of their values.
SCALED_FORMATS = {"int8": "i8", "e4m3": "e4m3", "e5m2": "e5m2"}
_ATTRS = ("format", "row_begin", "row_end", "group_size", "scale_rows", "variant", "packing",
          "zero_point_packing", "dequant", "dequant_op")


def segment_group(seg: Segment, path: str, k: Optional[int]) -> Group:
    """The group of one segment: attributes as given, arrays encoded for storage.

    Arrays that cannot be stored under the declared attributes (an unknown format or packing)
    are left out: the schema check then reports the attribute, as the reader would.
    """
    g = Group()
    for attr in _ATTRS:
        v = getattr(seg, attr)
        if v is not None:
            g.attrs[attr] = v
    fmt = seg.format
    if seg.codebook is not None:
        # Written whatever the format and variant: where the format does not read it, the
        # schema check refuses the attribute rather than the writer dropping it unsaid.
        g.attrs["codebook"] = seg.codebook if isinstance(seg.codebook, str) else "custom"
    if fmt in VALUE_FORMATS or fmt in SCALED_FORMATS:
        others = ["codes", "packed_codes", "zero_points", "biases"]
        if fmt in VALUE_FORMATS:
            others.append("scales")
        for other in others:
            if getattr(seg, other) is not None:
                raise DumpFormatError("invalid-argument", path,
                                      f"{other} given for a {fmt} segment (it takes values"
                                      f"{'' if fmt in VALUE_FORMATS else ' and scales'})")
        vtype = VALUE_FORMATS.get(fmt) or SCALED_FORMATS[fmt]
        if seg.values is not None:
            g.members["values"] = encode_float(seg.values, vtype, path + "/values", arg="format")
        if fmt in SCALED_FORMATS:
            _add_scales(seg, path, g)
        return g
    if fmt != "af4":
        return g
    if seg.values is not None:
        raise DumpFormatError("invalid-argument", path,
                              "values given for an af4 segment (it takes codes or packed_codes, "
                              "scales and biases)")
    if seg.codes is not None and seg.packed_codes is not None:
        raise DumpFormatError("invalid-argument", path, "give codes or packed_codes, not both")
    if seg.variant == "codebook" and seg.codebook is not None and not isinstance(seg.codebook, str):
        g.members["codebook"] = encode_float(seg.codebook, "f32", path + "/codebook")
    _add_codes(seg, path, g, k)
    _add_scales(seg, path, g)
    _add_zero_points(seg, path, g)
    return g


def _add_scales(seg: Segment, path: str, g: Group) -> None:
    """scales (and biases, of the same type) as scale_dtype or the array's type."""
    if seg.scales is not None:
        dt = seg.scale_dtype
        if dt is not None and dt not in ("bf16", "f16", "f32"):
            raise DumpFormatError("datatype-refused", path + "/scales",
                                  f"dtype {dt} where bf16 or f16 or f32 is required")
        g.members["scales"] = encode_float(seg.scales, dt, path + "/scales", arg="scale_dtype")
        if seg.biases is not None:
            g.members["biases"] = encode_float(seg.biases, g.members["scales"].dtype,
                                               path + "/biases", arg="scale_dtype")
    elif seg.biases is not None:
        raise DumpFormatError("missing-member", path, 'missing dataset "scales"')


def _add_zero_points(seg: Segment, path: str, g: Group) -> None:
    """Zero points, checked (integers 0..15, [rows, groups]) and packed for storage."""
    if seg.zero_points is None:
        return
    where = path + "/zero_points"
    if seg.variant != "zero-point":
        raise DumpFormatError("invalid-argument", where,
                              f"zero_points given for a {seg.variant} segment (only variant "
                              "zero-point has zero points)")
    packing = seg.zero_point_packing if seg.zero_point_packing is not None else "u8"
    if packing not in af4.ZERO_POINT_PACKINGS:
        return  # the schema check reports the attribute, as the reader would
    zp = as_numpy(seg.zero_points)
    if zp.dtype.kind not in "iu":
        raise DumpFormatError("datatype-refused", where,
                              f"zero points must be integers 0..15, got {zp.dtype}")
    if zp.ndim != 2:
        raise DumpFormatError("shape-mismatch", where,
                              f"zero points have shape {list(zp.shape)}; [rows, K/group_size] is "
                              "required")
    bad = np.argwhere((zp < 0) | (zp > 15))
    if bad.size:
        r, grp = (int(v) for v in bad[0])
        v = int(zp[r, grp])
        raise DumpFormatError("attribute-invalid", where,
                              f"row {r}, group {grp}: zero point {v} is "
                              f"{'above 15' if v > 15 else 'negative'} (a zero point is a 4-bit "
                              "code, 0..15)")
    packed = af4.pack_zero_points(zp, packing)
    g.members["zero_points"] = encode_int(packed, "u32" if packing == "u32-lsb" else "u8", where)


def _add_codes(seg: Segment, path: str, g: Group, k: Optional[int]) -> None:
    if seg.packed_codes is not None:
        # Packed words are bit layouts: no widening between u8 and u32, whose layouts differ.
        # The layout is of the word's value (element i of a u32-lsb word in its bits 4i..4i+3),
        # so a big-endian array holds the same codes and is stored little-endian, as any other.
        want = "u32" if seg.packing == "u32-lsb" else "u8"
        packed = as_numpy(seg.packed_codes)
        if packed.dtype.kind != "u" or packed.dtype.itemsize != (4 if want == "u32" else 1):
            raise DumpFormatError("datatype-refused", path + "/codes",
                                  f"dtype {natural_name(packed.dtype)} where {want} is required")
        g.members["codes"] = encode_int(packed, want, path + "/codes")
        return
    packing = seg.packing
    if seg.codes is None or packing not in af4.PACKINGS:
        return
    codes = as_numpy(seg.codes)
    if codes.dtype.kind not in "iu":
        raise DumpFormatError("datatype-refused", path + "/codes",
                              f"unpacked codes must be integers 0..15, got {codes.dtype}")
    if codes.ndim != 2:
        raise DumpFormatError("shape-mismatch", path + "/codes",
                              f"unpacked codes have shape {list(codes.shape)}; [rows, K] is "
                              "required")
    if codes.size and (codes.min() < 0 or codes.max() > 15):
        raise DumpFormatError("invalid-argument", path + "/codes",
                              "unpacked codes must lie in 0..15")
    per = af4.codes_per_word(packing)
    width = codes.shape[1]
    name = path.rsplit("/", 1)[1]
    if k is not None and width != k:
        raise DumpFormatError("guard-af4-geometry", path,
                              f"segment {name}: unpacked codes have {width} columns, K = {k}")
    if width % per:
        raise DumpFormatError(
            "guard-af4-geometry", path,
            f"segment {name}: unpacked codes cannot be packed; {packing} with K = {width} "
            f"needs K/{per} (K is not a multiple)")
    packed = af4.pack_codes(codes, packing)
    g.members["codes"] = encode_int(packed, "u32" if per == 8 else "u8", path + "/codes")
