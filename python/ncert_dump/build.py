"""From the writer's keyword arguments to node trees (nodes.py), before any validation.

Nothing here decides validity: it only encodes arrays into their declared types and fills in
the defaults the format allows (k and n from the weights, strides from the arrays). The schema
and guard checks then judge the result as the reader would.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .encode import FLOAT_TYPES, VALUE_TYPES, as_numpy, encode_float, encode_int, shape_of
from .errors import DumpFormatError
from .nodes import Group, Stored
from .schema import unencodable
from .segments import as_segment, default_k, segment_group, segment_name

__all__ = ["build_projection", "build_logits", "build_tensor", "check_leaf",
           "DEFAULT_CHUNK_BYTES"]

#: Rows per chunk of a compressed logits dataset aim at about this many bytes.
DEFAULT_CHUNK_BYTES = 1 << 20

_OUTPUTS = ("y_unpacked", "y_packed", "y_compact", "y_before")


def _width(arr) -> Optional[int]:
    if arr is None:
        return None
    shape = shape_of(arr)
    return int(shape[1]) if len(shape) == 2 else None


def _refuse_transposed(seg, where: str, k: Optional[int], x_width: Optional[int]) -> None:
    """A weight array given as [K, rows] instead of [rows, K] (W is stored one row per output
    column; PyTorch's ``Linear.weight`` already is, its ``.T`` is not): said as such, rather than
    as the stride or shape error it would cause further on."""
    array = seg.values if seg.values is not None else seg.codes
    if array is None or not isinstance(seg.row_begin, (int, np.integer)) \
            or not isinstance(seg.row_end, (int, np.integer)):
        return
    shape = shape_of(array)
    rows = int(seg.row_end) - int(seg.row_begin)
    if len(shape) != 2 or shape[0] == rows or shape[1] != rows:
        return
    if k is not None and shape[0] != k:
        return
    if k is None and x_width is not None and shape[0] > x_width:
        return
    member = "values" if seg.values is not None else "codes"
    raise DumpFormatError("shape-mismatch", f"{where}/{member}",
                          f"{member} has shape [{shape[0]}, {shape[1]}], which is [K, rows] for this "
                          f"segment's {rows} rows: W is stored [rows, K], one row per output column; "
                          f"pass its transpose (PyTorch's Linear.weight is already [n, k], its .T is not)")


def build_projection(path: str, *, x, weights, accumulator, output_dtype, epilogue, selector,
                     k, n, in_stride, out_stride, residual_at, k_walk, output_rounding, bias,
                     residual, commit_counts, requests, block_rows, cap, outputs: dict, role,
                     logits_run, layer, x_dtype, bias_dtype=None, residual_dtype=None,
                     x_quant=None, x_quant_group=None, x_quant_rounding=None, x_quantized=None,
                     x_scales=None, x_zero_points=None, x_scales_dtype=None, bias_at=None) -> Group:
    """The group of one projection (§3); `outputs` maps y_* names to arrays (or None)."""
    for arg, declared in (("x_dtype", x_dtype), ("bias_dtype", bias_dtype),
                          ("residual_dtype", residual_dtype)):
        if declared is not None and declared not in FLOAT_TYPES:
            raise DumpFormatError("invalid-argument", path,
                                  f'{arg} "{declared}" is not one of f32, f16, bf16')
    if weights is not None and not isinstance(weights, (list, tuple)):
        raise DumpFormatError("invalid-argument", path + "/weight",
                              "weights is a list of segments")
    segs = [as_segment(s, f"{path}/weight") for s in (weights or [])]
    names = [segment_name(s, i) for i, s in enumerate(segs)]
    for i, name in enumerate(names):
        check_leaf(name, f"{path}/weight", "segment name")
        if names.index(name) != i:
            raise DumpFormatError("invalid-argument", f"{path}/weight/{name}",
                                  "two segments have this name")
    for seg, name in zip(segs, names):
        _refuse_transposed(seg, f"{path}/weight/{name}", k, _width(x))
    if k is None:
        k = default_k(segs, _width(x))
    if n is None:
        ends = [s.row_end for s in segs if isinstance(s.row_end, (int, np.integer))]
        n = max(int(e) for e in ends) if ends else None
    if in_stride is None:
        in_stride = _width(x) if _width(x) is not None else k
    if out_stride is None:
        candidates = [outputs.get(o) for o in ("y_unpacked", "y_packed", "y_before",
                                               "y_compact")] + [residual]
        out_stride = next((w for w in map(_width, candidates) if w is not None), n)
    if logits_run is not None and role is None:
        role = "lm_head"

    g = Group()
    attrs = {"op": "linear", "k": k, "n": n, "in_stride": in_stride, "out_stride": out_stride,
             "accumulator": accumulator, "output_dtype": output_dtype, "epilogue": epilogue,
             "residual_at": residual_at, "bias_at": bias_at, "k_walk": k_walk,
             "output_rounding": output_rounding,
             "layer": layer, "role": role, "logits_run": logits_run, "requests": requests,
             "block_rows": block_rows, "cap": cap, "x_quant": x_quant,
             "x_quant_group": x_quant_group, "x_quant_rounding": x_quant_rounding}
    g.attrs = {name: v for name, v in attrs.items() if v is not None}

    m = g.members
    # A member passed as None is simply absent: the schema check names it as the reader would.
    if x is not None:
        _refuse_codes_as_x(x, x_quant, path)
        m["x"] = encode_float(x, x_dtype, path + "/x", arg="x_dtype")
    if selector is not None:
        m["selector"] = encode_int(selector, "i32", path + "/selector")
    if commit_counts is not None:
        m["commit_counts"] = encode_int(commit_counts, "i32", path + "/commit_counts")
    if bias is not None:
        m["bias"] = encode_float(bias, bias_dtype, path + "/bias", arg="bias_dtype")
    if residual is not None:
        m["residual"] = encode_float(residual, residual_dtype, path + "/residual",
                                     arg="residual_dtype")
    if output_dtype in FLOAT_TYPES:  # else the schema refuses the attribute first
        for leaf in _OUTPUTS:
            if outputs.get(leaf) is not None:
                m[leaf] = encode_float(outputs[leaf], output_dtype, f"{path}/{leaf}",
                                       arg="output_dtype")
    _add_x_quant(m, path, x_quant, x_quantized, x_scales, x_zero_points, x_scales_dtype)
    if weights is not None:
        weight = Group()
        for seg, name in zip(segs, names):
            weight.members[name] = segment_group(seg, f"{path}/weight/{name}", k)
        m["weight"] = weight
    return g


def _refuse_codes_as_x(x, x_quant, path: str) -> None:
    """x given as the int8 / uint8 codes of a declared integer x_quant: an integer array is
    stored as values (encode_float), so without this the mistake is seen only by `ncert check`'s
    quantize; x is the activations before quantization (dump-format.md §3.6)."""
    code = {"int8": np.int8, "uint8": np.uint8}.get(x_quant) if isinstance(x_quant, str) else None
    held = getattr(x, "dtype", None)
    if code is not None and held is not None and str(held) in (np.dtype(code).name, f"torch.{np.dtype(code).name}"):
        raise DumpFormatError("invalid-argument", path + "/x",
                              f"x is an {np.dtype(code).name} array while x_quant = \"{x_quant}\": x holds "
                              "the activations before quantization (dump-format.md §3.6); pass the "
                              "codes as x_quantized")


def _add_x_quant(m: dict, path: str, x_quant, x_quantized, x_scales, x_zero_points,
                 x_scales_dtype) -> None:
    """The quantized activations: x_quantized in the type x_quant names (int8 integers, uint8,
    e4m3 / e5m2 patterns or exact values), x_scales (f32, f16, bf16), x_zero_points (i8 for
    int8, u8 for uint8). With an unknown x_quant they are left out for the schema to refuse."""
    if x_scales is not None:
        m["x_scales"] = encode_float(x_scales, x_scales_dtype, path + "/x_scales",
                                     arg="x_scales_dtype")
    stored = {"int8": "i8", "uint8": "u8", "e4m3": "e4m3", "e5m2": "e5m2"}.get(x_quant)
    if stored is None:
        for name, arr in (("x_quantized", x_quantized), ("x_zero_points", x_zero_points)):
            if arr is not None and x_quant is None:
                raise DumpFormatError("invalid-argument", f"{path}/{name}",
                                      "present but x_quant is not given; it would be ignored")
        return
    if x_quantized is not None:
        where = path + "/x_quantized"
        m["x_quantized"] = encode_int(x_quantized, "u8", where) if stored == "u8" \
            else encode_float(x_quantized, stored, where, arg="x_quant")
    if x_zero_points is not None:
        where = path + "/x_zero_points"
        if stored not in ("i8", "u8"):
            raise DumpFormatError("invalid-argument", where,
                                  f"present but x_quant = {x_quant} has no zero points (int8 and "
                                  "uint8 only); it would be ignored")
        m["x_zero_points"] = encode_int(x_zero_points, stored, where)


def check_leaf(name, parent: str, what: str) -> None:
    """Refuses a member name that HDF5 would split into groups, that holds a NUL, or that UTF-8
    (HDF5's encoding of link names) cannot encode: a lone surrogate."""
    if not isinstance(name, str) or not name or "/" in name or "\0" in name \
            or name in (".", ".."):
        raise DumpFormatError("invalid-argument", parent,
                              f"{what} {name!r} must be a non-empty string without '/' or NUL")
    bad = unencodable(name)
    if bad is not None:
        raise DumpFormatError("invalid-argument", parent,
                              f"{what} {name!r} holds {bad}, which UTF-8 cannot encode")


def _compression(compression, path: str) -> Optional[int]:
    if compression is None:
        return None
    if compression == "deflate":
        return 4
    if isinstance(compression, (int, np.integer)) and not isinstance(compression, bool) \
            and 1 <= int(compression) <= 9:
        return int(compression)
    raise DumpFormatError("invalid-argument", path,
                          f"compression {compression!r} is not None, \"deflate\" or a level 1..9")


def build_logits(path: str, *, tokens, logits, positions, prompt_tokens, prompt, tie_break,
                 chunk_rows, compression, vocab, logits_dtype=None) -> Group:
    """The group of one logits run (§5). Logits are engine outputs, stored exactly in their own
    type (f32, bf16, f16) or in `logits_dtype` when every value converts exactly."""
    lg = as_numpy(logits)
    if vocab is None and lg.ndim >= 1:
        vocab = int(lg.shape[-1])
    g = Group()
    g.attrs = {name: v for name, v in (("vocab", vocab), ("tie_break", tie_break),
                                       ("prompt", prompt)) if v is not None}
    m = g.members
    if tokens is not None:
        m["tokens"] = encode_int(tokens, "i32", path + "/tokens")
    if logits is None:
        return g
    if logits_dtype is not None and logits_dtype not in FLOAT_TYPES:
        raise DumpFormatError("invalid-argument", path,
                              f'logits_dtype "{logits_dtype}" is not one of f32, f16, bf16')
    stored = encode_float(logits, logits_dtype, path + "/logits", arg="logits_dtype")
    level = _compression(compression, path)
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or
                                   not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1):
        raise DumpFormatError("invalid-argument", path, f"chunk_rows {chunk_rows!r} is not >= 1")
    if level is not None and chunk_rows is None:
        row_bytes = stored.array.itemsize * max(1, int(lg.shape[-1]) if lg.ndim else 1)
        chunk_rows = max(1, DEFAULT_CHUNK_BYTES // row_bytes)
    stored.chunk_rows = int(chunk_rows) if chunk_rows is not None else None
    stored.deflate = level
    stored.shuffle = level is not None
    m["logits"] = stored
    if positions is not None:
        m["positions"] = encode_int(positions, "i64", path + "/positions")
    if prompt_tokens is not None:
        m["prompt_tokens"] = encode_int(prompt_tokens, "i32", path + "/prompt_tokens")
    return g


def build_tensor(path: str, array, dtype: Optional[str], compare) -> Stored:
    """One /tensors dataset (§6) of type `dtype` (None: the array's own), converted only when
    exact."""
    if dtype is None or dtype in VALUE_TYPES:
        d = encode_float(array, dtype, path)
    elif dtype in ("u8", "u32", "i32", "i64"):
        d = encode_int(array, dtype, path)  # refused by the schema check, as by the reader
    else:
        raise DumpFormatError("invalid-argument", path,
                              f'dtype "{dtype}" is not one of {", ".join(VALUE_TYPES)}')
    if compare is not None:
        d.attrs["compare"] = compare
    return d
