"""From the caller's arrays to storage-ready elements of one ncert type.

Rules (README "Values and types"):

- float targets (f32, f16, bf16) take float or integer arrays as *values* and round them to
  nearest even into the target type (float64 goes to f32 first, as an engine holds f32);
- a ``uint16`` array is taken as raw 16-bit patterns of the target type (bf16 or f16), stored
  unchanged; a ``bfloat16`` array (ml_dtypes, or a torch tensor) is taken as its patterns too;
- integer targets (i32, i64, u8, u32) take integer arrays whose values fit;
- ``exact=True`` (engine outputs: ``y_*`` and logits) refuses any value the target type cannot
  hold exactly: the writer must never round an engine's output, or it would certify its own
  rounding instead of the engine's.
"""

from __future__ import annotations

import numpy as np

from .codecs import bf16_from_f32, decode, f16_from_f32
from .errors import DumpFormatError
from .nodes import STORAGE_DTYPES, Stored

__all__ = ["as_numpy", "shape_of", "natural_name", "encode_float", "encode_int", "FLOAT_TYPES"]

FLOAT_TYPES = ("f32", "f16", "bf16")
_INT_RANGES = {
    "u8": (0, 2**8 - 1),
    "u32": (0, 2**32 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
}


def shape_of(obj) -> tuple:
    """The shape of an array-like without converting it (torch tensors included)."""
    shape = getattr(obj, "shape", None)
    return tuple(int(d) for d in shape) if shape is not None else np.shape(obj)


def as_numpy(obj) -> np.ndarray:
    """A numpy view of `obj`; torch tensors go through torch_helpers (bf16 kept as patterns)."""
    if type(obj).__module__.startswith("torch") and hasattr(obj, "detach"):
        from .torch_helpers import tensor_to_numpy

        return tensor_to_numpy(obj)
    return np.asarray(obj)


def _is_bfloat16(dt: np.dtype) -> bool:
    return dt.name == "bfloat16" and dt.itemsize == 2


def natural_name(dt: np.dtype) -> str:
    """How a numpy type would be named in ncert's messages (f32, u16, i64, bool, ...)."""
    if _is_bfloat16(dt):
        return "bf16"
    if dt.kind == "b":
        return "bool"
    if dt.kind in "fiu":
        return f"{dt.kind}{dt.itemsize * 8}"
    return dt.name


def _refuse_type(path: str, got: str, want: str) -> DumpFormatError:
    return DumpFormatError("datatype-refused", path, f"dtype {got} where {want} is required")


def encode_float(obj, dtype: str, path: str, *, exact: bool = False) -> Stored:
    """Elements of float type `dtype` (f32, f16, bf16) for the dataset at `path`."""
    a = as_numpy(obj)
    want = STORAGE_DTYPES[dtype]
    if _is_bfloat16(a.dtype):
        if dtype == "bf16":
            return Stored(dtype, np.ascontiguousarray(a).view(np.uint16).astype(want))
        a = decode(np.ascontiguousarray(a).view(np.uint16), "bf16")
    if a.dtype == np.uint16:
        if dtype == "f32":
            raise _refuse_type(path, "u16 (raw 16-bit patterns)", "f32")
        return Stored(dtype, np.ascontiguousarray(a, dtype=want))
    if a.dtype == np.float16 and dtype == "f16":
        return Stored(dtype, np.ascontiguousarray(a, dtype=want))
    if a.dtype.kind not in "fiu" or (a.dtype.kind == "f" and a.dtype.itemsize > 8):
        raise _refuse_type(path, natural_name(a.dtype), dtype)
    if a.dtype == np.float32 and dtype == "f32":
        return Stored(dtype, np.ascontiguousarray(a, dtype=want))
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = a.astype(np.float32)
    if dtype == "f32":
        stored = f32.astype(want)
    elif dtype == "bf16":
        stored = bf16_from_f32(f32).astype(want)
    else:
        stored = f16_from_f32(f32).view(np.float16).astype(want)
    if exact:
        _require_exact(a, stored, dtype, path)
    return Stored(dtype, np.ascontiguousarray(stored))


def _require_exact(source: np.ndarray, stored: np.ndarray, dtype: str, path: str) -> None:
    src = source.astype(np.float64)
    raw = stored.view(np.uint16) if dtype in ("bf16", "f16") else stored
    back = decode(raw, dtype).astype(np.float64)
    same = (src == back) | (np.isnan(src) & np.isnan(back))
    if np.all(same):
        return
    bad = np.argwhere(~same)
    where = ", ".join(str(int(i)) for i in bad[0])
    value = src[tuple(bad[0])]
    raise DumpFormatError(
        "datatype-refused", path,
        f"{len(bad)} value(s) not exactly representable in {dtype} (first at [{where}]: "
        f"{value!r}); an engine output is stored as the engine wrote it, never rounded by the "
        f"writer (pass {dtype} bit patterns or exact values)")


def encode_int(obj, dtype: str, path: str) -> Stored:
    """Elements of integer type `dtype` (u8, u32, i32, i64), refusing values that do not fit."""
    a = as_numpy(obj)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # an empty list arrives as float64
    if a.dtype.kind not in "iu":
        raise _refuse_type(path, natural_name(a.dtype), dtype)
    lo, hi = _INT_RANGES[dtype]
    if a.size:
        mn, mx = int(a.min()), int(a.max())
        if mn < lo or mx > hi:
            bad = mn if mn < lo else mx
            raise DumpFormatError("datatype-refused", path,
                                  f"value {bad} does not fit {dtype} [{lo}, {hi}]")
    return Stored(dtype, np.ascontiguousarray(a, dtype=STORAGE_DTYPES[dtype]))
