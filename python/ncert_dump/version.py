"""Which dump-format version a member needs: 1 unless it uses a v2 feature (dump-format v2).

The writer declares the least version that describes the file, so a v1 reader keeps reading
every dump that needs nothing newer. v2 features: f16 or FP8/i8 element types where v1 had
f32 / bf16 only (x, bias, residual, outputs, logits, tensors), the weight formats f16, int8,
e4m3, e5m2 (ggml's blocks are declared in these and AF4 forms), the zero-point variant,
activation quantization, and the k_walk forms lanes:, promote:, splitk: and codes: (docs/dump-format.md
§2's declaration table).
"""

from __future__ import annotations

from .nodes import Group, Stored

__all__ = ["projection_features", "logits_features", "tensor_features"]

_V2_WALKS = ("lanes:", "promote:", "splitk:", "codes:")
_V2_FORMATS = ("f16", "int8", "e4m3", "e5m2")


def projection_features(path: str, g: Group) -> list[str]:
    """Descriptions of the v2 features a validated projection group uses (empty: v1)."""
    out = []
    for leaf in ("x", "bias", "residual", "y_unpacked", "y_packed", "y_compact", "y_before"):
        d = g.dataset(leaf)
        if d is not None and d.dtype not in ("f32", "bf16"):
            out.append(f"{path}/{leaf} of type {d.dtype}")
    walk = g.attrs.get("k_walk")
    if isinstance(walk, str) and walk.startswith(_V2_WALKS):
        out.append(f'{path}: k_walk "{walk}"')
    if g.attrs.get("bias_at") == "start":
        out.append(f'{path}: bias_at "start"')
    for name in ("x_quant", "x_quant_group", "x_quant_rounding"):
        if name in g.attrs:
            out.append(f"{path}: {name}")
    for name in ("x_quantized", "x_scales", "x_zero_points"):
        if name in g.members:
            out.append(f"{path}/{name}")
    weight = g.group("weight")
    for name, seg in sorted(weight.members.items()) if weight is not None else ():
        spath = f"{path}/weight/{name}"
        a = seg.attrs
        if a.get("format") in _V2_FORMATS:
            out.append(f'{spath}: format "{a["format"]}"')
        if a.get("variant") == "zero-point":
            out.append(f'{spath}: variant "zero-point"')
    return out


def logits_features(path: str, g: Group) -> list[str]:
    d = g.dataset("logits")
    return [f"{path}/logits of type {d.dtype}"] if d is not None and d.dtype != "f32" else []


def tensor_features(path: str, d: Stored) -> list[str]:
    return [f"{path} of type {d.dtype}"] if d.dtype not in ("f32", "f16", "bf16") else []
