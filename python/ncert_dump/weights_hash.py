"""The weights hash of a projection (dump-format.md §4.5): XXH3-128 of its weight segments.

A step dump that declares ``weights_xxh3`` may omit its weight group; ncert then takes the
weights with that hash from a weights dump (``ncert check --weights``, a campaign's
``"weights"``). When the weights are also written, ncert checks the declared hash against them.

XXH3-128 comes from the ``xxhash`` module when installed, else from the system's libxxhash
(Debian: libxxhash0, which ncert itself needs) through ctypes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Optional

from .errors import DumpFormatError
from .nodes import Group, Stored

__all__ = ["weights_xxh3", "weights_xxh3_of_group", "Xxh3_128"]


class _Hash128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


class Xxh3_128:
    """Streaming XXH3-128 (seed 0), hex digest in canonical form (high 64 bits first)."""

    _lib = None

    def __init__(self) -> None:
        try:
            import xxhash
            self._py = xxhash.xxh3_128()
            return
        except ImportError:
            self._py = None
        lib = Xxh3_128._library()
        self._state: Optional[ctypes.c_void_p] = ctypes.c_void_p(lib.XXH3_createState())
        if not self._state:
            raise MemoryError("XXH3_createState failed")
        lib.XXH3_128bits_reset(self._state)

    @classmethod
    def _library(cls):
        if cls._lib is None:
            name = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
            try:
                lib = ctypes.CDLL(name)
            except OSError as e:
                raise DumpFormatError("invalid-argument", "weights_xxh3",
                                      "XXH3-128 needs the xxhash module or libxxhash "
                                      f"(Debian: libxxhash0): {e}") from None
            lib.XXH3_createState.restype = ctypes.c_void_p
            lib.XXH3_freeState.argtypes = [ctypes.c_void_p]
            lib.XXH3_128bits_reset.argtypes = [ctypes.c_void_p]
            lib.XXH3_128bits_update.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
            lib.XXH3_128bits_digest.argtypes = [ctypes.c_void_p]
            lib.XXH3_128bits_digest.restype = _Hash128
            cls._lib = lib
        return cls._lib

    def update(self, data: bytes) -> None:
        if self._py is not None:
            self._py.update(data)
        else:
            Xxh3_128._library().XXH3_128bits_update(self._state, data, len(data))

    def hexdigest(self) -> str:
        if self._py is not None:
            return self._py.hexdigest()
        h = Xxh3_128._library().XXH3_128bits_digest(self._state)
        return f"{h.high64:016x}{h.low64:016x}"

    def __del__(self) -> None:
        state = getattr(self, "_state", None)
        if state and Xxh3_128._lib is not None:
            Xxh3_128._lib.XXH3_freeState(state)
            self._state = None


_AF4_DEFAULTS: dict[str, object] = {
    "zero_point_packing": "u8", "dequant": "exact", "dequant_op": "either"}
_ZERO_POINT_DEFAULTS = dict(_AF4_DEFAULTS, dequant_op="sub-mul")
_SCALED_DEFAULTS: dict[str, object] = {"scale_rows": 1, "dequant": "exact"}
_SCALED_FORMATS = ("int8", "e4m3", "e5m2")


def weights_xxh3_of_group(weight: Group, k: int, n: int) -> str:
    """The §4.5 hash of a validated weight group (segment groups of storage-ready datasets)."""
    h = Xxh3_128()
    h.update(f"ncert-weights-v1\nk={int(k)}\nn={int(n)}\n".encode())
    order = sorted(weight.members.items(), key=lambda kv: (int(kv[1].attrs["row_begin"]), kv[0]))
    for name, seg in order:
        raw = name.encode()
        h.update(b"segment %d " % len(raw) + raw + b"\n")
        attrs = ["format", "row_begin", "row_end"]
        zero_point = seg.attrs.get("variant") == "zero-point"
        if seg.attrs["format"] == "af4":
            attrs += ["group_size", "variant"]
            if seg.attrs.get("variant") == "codebook":
                attrs.append("codebook")
            attrs += ["packing"] + (["zero_point_packing"] if zero_point else []) + ["dequant", "dequant_op"]
        scaled = seg.attrs["format"] in _SCALED_FORMATS
        if scaled:
            attrs += ["group_size", "scale_rows", "dequant"]
        defaults = _SCALED_DEFAULTS if scaled else _ZERO_POINT_DEFAULTS if zero_point else _AF4_DEFAULTS
        for a in attrs:
            value: Optional[object] = seg.attrs.get(a, defaults.get(a))
            h.update(f"{a}={value}\n".encode())
        members = ["values", "scales"] if scaled else ["values"]
        if seg.attrs["format"] == "af4":
            members = ["codes", "scales"]
            if seg.attrs.get("variant") == "affine":
                members.append("biases")
            if zero_point:
                members.append("zero_points")
            if seg.attrs.get("variant") == "codebook" and seg.attrs.get("codebook") == "custom":
                members.append("codebook")
        for member in members:
            d = seg.members.get(member)
            if not isinstance(d, Stored):
                continue
            dims = " ".join(str(e) for e in d.shape)
            h.update(f"{member} {d.dtype} {dims}\n".encode())
            h.update(d.array.tobytes(order="C"))
    return h.hexdigest()


def weights_xxh3(weights, k: Optional[int] = None, n: Optional[int] = None) -> str:
    """The §4.5 hash of a list of segments (Segment or dict), as ``add_projection`` would
    declare it: what a step dump that omits these weights declares as ``weights_xxh3``."""
    from .segments import as_segment, default_k, segment_group, segment_name
    segs = [as_segment(s, "/weight") for s in weights]
    if k is None:
        k = default_k(segs)
    if n is None:
        n = max(int(s.row_end) for s in segs)
    if k is None:
        raise DumpFormatError("invalid-argument", "/weight", "k cannot be inferred: pass k")
    group = Group()
    for i, s in enumerate(segs):
        name = segment_name(s, i)
        group.members[name] = segment_group(s, "/weight/" + name, k)
    return weights_xxh3_of_group(group, k, n)
