"""From the caller's arrays to storage-ready elements of one ncert type.

Rules (README "Values and types"):

- the element type is explicit or the array's own: float32 arrays are f32, float16 arrays f16,
  torch / ml_dtypes bfloat16 arrays bf16 (their patterns), FP8 arrays (ml_dtypes, torch) e4m3 /
  e5m2; float64 and integer arrays (int8 included) hold *values* and default to f32;
- a ``uint16`` array holds raw 16-bit patterns of no stated type: it needs the type named
  (bf16 or f16); a ``uint8`` array given for e4m3 / e5m2 holds their raw patterns;
- an array of another type than the one named is converted only when every value survives the
  conversion exactly (checked by a round trip): the writer never rounds. Rounding is the
  engine's business, and a dump that silently rounded its inputs or outputs would describe a
  computation the engine never did (codecs.round_narrow rounds deliberately);
- integer targets (i8, u8, u32, i32, i64) take integer arrays whose values fit (i8 also floats
  that are such integers).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .codecs import decode, nan_patterns, round_narrow
from .errors import DumpFormatError
from .nodes import STORAGE_DTYPES, Stored

__all__ = ["as_numpy", "held_type", "shape_of", "natural_name", "encode_float", "encode_int",
           "FLOAT_TYPES", "VALUE_TYPES"]

FLOAT_TYPES = ("f32", "f16", "bf16")
#: Every element type encode_float stores values of.
VALUE_TYPES = ("f32", "f16", "bf16", "e4m3", "e5m2", "i8")
_INT_RANGES = {
    "i8": (-(2**7), 2**7 - 1),
    "u8": (0, 2**8 - 1),
    "u32": (0, 2**32 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
}
# Type names of ml_dtypes / torch arrays whose elements are raw patterns of an ncert type.
_PATTERN_NAMES = {"bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def shape_of(obj) -> tuple:
    """The shape of an array-like without converting it (torch tensors included)."""
    shape = getattr(obj, "shape", None)
    return tuple(int(d) for d in shape) if shape is not None else np.shape(obj)


def _is_torch(obj) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "detach")


def held_type(obj) -> tuple[np.ndarray, str]:
    """A numpy copy or view of `obj` and what it holds: "f32", "f16", "bf16", "e4m3", "e5m2"
    (patterns as uint16 / uint8), "f64", "i8", "u8", "u16" (raw 16-bit patterns), "int" (other
    integers), or the natural name of anything else."""
    if _is_torch(obj):
        name = str(obj.dtype).replace("torch.", "")
        if name in _PATTERN_NAMES:
            import torch  # only reached with a torch tensor in hand

            t = obj.detach().to("cpu").contiguous()
            width = torch.int16 if name == "bfloat16" else torch.uint8
            raw = t.view(width).numpy().copy()
            return raw.view(np.uint16) if name == "bfloat16" else raw, _PATTERN_NAMES[name]
        from .torch_helpers import tensor_to_numpy

        obj = tensor_to_numpy(obj)
    a = np.asarray(obj)
    if a.dtype.str.startswith(">"):
        a = a.astype(a.dtype.newbyteorder("<"))  # values, not bytes: storage is little-endian
    dt = a.dtype
    if dt.name in _PATTERN_NAMES and dt.itemsize in (1, 2):
        raw = np.ascontiguousarray(a).view(np.uint16 if dt.itemsize == 2 else np.uint8)
        return raw, _PATTERN_NAMES[dt.name]
    if dt == np.float32:
        return a, "f32"
    if dt == np.float16:
        return a, "f16"
    if dt == np.float64:
        return a, "f64"
    if dt == np.uint16:
        return a, "u16"
    if dt == np.int8:
        return a, "i8"
    if dt == np.uint8:
        return a, "u8"
    if dt.kind in "iu":
        return a, "int"
    return a, natural_name(dt)


def as_numpy(obj) -> np.ndarray:
    """A numpy view of `obj`; torch tensors go through torch_helpers (bf16 kept as patterns)."""
    if _is_torch(obj):
        from .torch_helpers import tensor_to_numpy

        return tensor_to_numpy(obj)
    return np.asarray(obj)


def natural_name(dt: np.dtype) -> str:
    """How a numpy type would be named in ncert's messages (f32, u16, i64, bool, ...)."""
    if dt.name in _PATTERN_NAMES:
        return _PATTERN_NAMES[dt.name]
    if dt.kind == "b":
        return "bool"
    if dt.kind in "fiu":
        return f"{dt.kind}{dt.itemsize * 8}"
    return dt.name


def _refuse_type(path: str, got: str, want: str) -> DumpFormatError:
    return DumpFormatError("datatype-refused", path, f"dtype {got} where {want} is required")


def _patterns(a: np.ndarray, dtype: str) -> np.ndarray:
    """Storage of raw patterns (f16 patterns as float16 bits, the others as they are)."""
    want = STORAGE_DTYPES[dtype]
    return np.ascontiguousarray(a).view(want) if a.dtype.itemsize == want.itemsize else a


def _values64(a: np.ndarray, held: str) -> np.ndarray:
    """The exact values of `a` as float64 (integers beyond 2^53 would not be: none fit)."""
    if held in ("bf16", "e4m3", "e5m2"):
        return decode(a, held).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return a.astype(np.float64)


def encode_float(obj, dtype: Optional[str], path: str, *, arg: str = "dtype") -> Stored:
    """Elements of type `dtype` (f32, f16, bf16, e4m3, e5m2, i8; None: the array's own type)
    for the dataset at `path`; `arg` names the argument that declares the type (for messages).

    Raises "invalid-argument" for uint16 patterns without a declared 16-bit type and
    "datatype-refused" for an array that cannot be stored as `dtype` without changing a value.
    """
    a, held = held_type(obj)
    leaf = path.rsplit("/", 1)[-1]
    if dtype is None:
        if held == "u16":
            raise DumpFormatError(
                "invalid-argument", path,
                f'{leaf} is a uint16 array: raw 16-bit patterns of no stated type; declare '
                f'{arg}="bf16" or {arg}="f16"')
        # Integer arrays hold values, whatever their width: int8 too, although i8 is a type of
        # its own, stored only where it is named (scaled weights' values, x_quantized).
        dtype = {"f64": "f32", "int": "f32", "u8": "f32", "i8": "f32"}.get(held, held)
        if dtype not in VALUE_TYPES:
            raise _refuse_type(path, held, " or ".join(FLOAT_TYPES))
    if dtype not in VALUE_TYPES:
        raise DumpFormatError("invalid-argument", path,
                              f'{arg} "{dtype}" is not one of {", ".join(VALUE_TYPES)}')
    want = STORAGE_DTYPES[dtype]
    if held == dtype:
        return Stored(dtype, np.ascontiguousarray(_patterns(a, dtype), dtype=want))
    if held == "u16":
        if dtype in ("bf16", "f16"):
            return Stored(dtype, np.ascontiguousarray(_patterns(a, dtype)))
        raise _refuse_type(path, "u16 (raw 16-bit patterns)", dtype)
    if held == "u8" and dtype in ("e4m3", "e5m2"):
        return Stored(dtype, np.ascontiguousarray(a, dtype=want))
    if dtype == "i8":
        return _encode_i8(a, held, path, arg)
    if held not in ("f32", "f16", "bf16", "e4m3", "e5m2", "f64", "i8", "u8", "int"):
        raise _refuse_type(path, held, dtype)
    values = _values64(a, held)
    if dtype == "f32":
        stored = values.astype(np.float32)
        back = stored.astype(np.float64)
    else:
        pats = round_narrow(values, dtype, "rne", "ieee")
        stored = _patterns(pats, dtype)
        back = decode(pats, dtype).astype(np.float64)
    _require_exact(values, back, held, dtype, path, arg)
    nan = np.isnan(values)
    if nan.any():
        stored = _exact_nans(a, held, nan, np.array(stored), dtype, path, arg)
    return Stored(dtype, np.ascontiguousarray(stored, dtype=want))


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _nan_f32_bits(src: np.ndarray, held: str) -> tuple[np.ndarray, np.ndarray]:
    """The f32 bits of NaN elements `src` (of the array's type `held`), and whether f32 holds
    each exactly: every narrow type widens exactly (decode keeps payloads); an f64 NaN only when
    the 29 payload bits f32 lacks are 0."""
    if held == "f32":
        return src.view(np.uint32), np.ones(src.shape, bool)
    if held == "f64":
        b = src.view(np.uint64)
        bits = (((b >> np.uint64(32)) & np.uint64(0x80000000)) | np.uint64(0x7F800000)
                | ((b >> np.uint64(29)) & np.uint64(0x7FFFFF)))
        return bits.astype(np.uint32), (b & np.uint64((1 << 29) - 1)) == 0
    raw = src.view(np.uint16) if held == "f16" else src
    return decode(raw, held).view(np.uint32), np.ones(src.shape, bool)


def _exact_nans(a: np.ndarray, held: str, nan: np.ndarray, stored: np.ndarray, dtype: str,
                path: str, arg: str) -> np.ndarray:
    """`stored` with each NaN element replaced by the `dtype` NaN that holds it exactly: the
    same sign, signalling bit and payload, decoded back to the same bits. A NaN no `dtype`
    pattern holds is refused as any other value that would change: the rounding conversion
    would make it the target's quiet NaN, a value the engine never had."""
    src = np.ascontiguousarray(a)[nan]
    bits, exact = _nan_f32_bits(src, held)
    if dtype == "f32":
        pats = bits
        ok = exact
    elif dtype == "e4m3":
        # E4M3FN has one NaN per sign and no payload to lose: every NaN is it, with its sign
        # (PyTorch widens that NaN to 0x7ff00000, which no e4m3 pattern decodes back to).
        pats = nan_patterns(bits, dtype)
        ok = np.ones(bits.shape, bool)
    else:
        pats = nan_patterns(bits, dtype)
        ok = exact & (decode(pats, dtype).view(np.uint32) == bits)
    if not ok.all():
        first = int(np.argmin(ok))
        where = ", ".join(str(int(i)) for i in np.argwhere(nan)[first])
        width = src.dtype.itemsize
        src_bits = int(src.view(_UINT[width])[first]) if src.dtype.kind == "f" else int(src[first])
        rounded = stored.view(_UINT[stored.dtype.itemsize])[nan][first]
        leaf = path.rsplit("/", 1)[-1]
        what = "float64 values" if held == "f64" else f"{held} values"
        remedy = f'pass {dtype} values or declare {arg}="{held}"' if held != "f64" else \
            f"pass values exact in {dtype}"
        raise DumpFormatError(
            "datatype-refused", path,
            f"{leaf}: {int((~ok).sum())} of its {what} are NaNs not exactly representable in "
            f"{dtype} (first at [{where}]: NaN {src_bits:#0{2 + 2 * width}x}, whose sign, "
            f"signalling bit and payload no {dtype} NaN holds, would become "
            f"{int(rounded):#0{2 + 2 * stored.dtype.itemsize}x}); converting {held} to {dtype} would "
            f"change them and the writer never rounds: {remedy}")
    out = stored.copy()
    view = out.view(_UINT[out.dtype.itemsize])
    view[nan] = pats.astype(view.dtype)
    return out


def _encode_i8(a: np.ndarray, held: str, path: str, arg: str) -> Stored:
    if a.dtype.kind in "iu":
        return encode_int(a, "i8", path)
    if a.dtype.kind != "f" and held not in ("bf16", "e4m3", "e5m2"):
        raise _refuse_type(path, held, "i8")
    values = _values64(a, held)
    with np.errstate(invalid="ignore"):
        back = np.clip(np.nan_to_num(values, nan=0.5), -128, 127).round()
    _require_exact(values, back, held, "i8", path, arg)
    return Stored("i8", np.ascontiguousarray(back.astype(np.int8)))


def _require_exact(values: np.ndarray, back: np.ndarray, held: str, dtype: str, path: str,
                   arg: str) -> None:
    """Refuses a conversion that would change a value (NaN to NaN counts as unchanged)."""
    same = (values == back) | (np.isnan(values) & np.isnan(back))
    if np.all(same):
        return
    bad = np.argwhere(~same)
    where = ", ".join(str(int(i)) for i in bad[0])
    value, becomes = values[tuple(bad[0])], back[tuple(bad[0])]
    leaf = path.rsplit("/", 1)[-1]
    what = "float64 values" if held == "f64" else f"{held} values" if held != "int" else "integers"
    remedy = (f'pass {dtype} values or declare {arg}="{held}"'
              if held in FLOAT_TYPES + ("e4m3", "e5m2") else f"pass values exact in {dtype}")
    raise DumpFormatError(
        "datatype-refused", path,
        f"{leaf}: {len(bad)} of its {what} not exactly representable in {dtype} (first at "
        f"[{where}]: {float(value)!r} would become {float(becomes)!r}); converting {held} to "
        f"{dtype} would change them and the writer never rounds: {remedy}")


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
