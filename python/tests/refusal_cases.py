"""One broken projection per rule the writer enforces, shared by the refusal tests (the writer
says no, with this name and sentence) and the parity tests (the C++ reader says the same)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ncert_dump import Segment, bf16_from_f32, rules

from .support import af4_segment, base_projection, zero_point_segment

P = "/projections/q"
# The accepted k_walk forms as the reader's k-walk-invalid message lists them
# (reference/linear_spec.h kKWalkForms), written out here so that a change on either side shows.
K_WALK_FORMS = (
    "seq, seq-fma, split:<P>, split:<P>:fma (P >= 1), lanes:<L>:<tree>, lanes:<L>:<tree>:fma (L >= 2), "
    "promote:<P>:<p>:<rnd>, promote:<P>:<p>:<rnd>:fma (P >= 1, 8 <= p <= 24, rnd rne or rz), "
    "splitk:<S>:<tree>/<inner> (S >= 1, inner seq, seq-fma, a lanes or a promote form); "
    "tree seq, halving, pairs or butterfly(<d>,...) (all but seq need L or S a power of two; a butterfly's "
    "distances are the powers of two below it, each once, in the order the kernel adds them)")


@dataclass
class Case:
    id: str
    name: str               # expected error name
    fragment: str           # expected part of the message
    path: str               # expected object path
    overrides: Callable[[dict], dict]  # base kwargs -> changes
    reader: Optional[str]   # "inspect": a schema finding; "check": a geometry guard; None: writer rule


def _allowed(leaf: str) -> str:
    """The element types the reader's table allows for a projection dataset, as it words them."""
    return " or ".join(rules.dataset("projection", leaf)["dtypes"])


def _refused_float_reachable(leaf: str) -> bool:
    """Whether the writer's arguments can store a type the table refuses for `leaf`: f16
    (`x_dtype="f16"`) while the table is v1's (f32, bf16). Once f16 is allowed none can: every
    float or integer array is stored as f32, f16 or bf16 (integers, int8 included, are values).
    test_rule_parity then covers the reader's refusal of other types, planting them directly."""
    return "f16" not in rules.dataset("projection", leaf)["dtypes"]


def _refused_float_member(leaf: str, patterns: np.ndarray) -> dict:
    return {leaf: patterns, f"{leaf}_dtype": "f16"}


def _w(kw):
    return kw["weights"]


def _bf16_rows(kw, rows, k=16, seed=3):
    return bf16_from_f32(np.random.default_rng(seed).standard_normal((rows, k)))


def _with_af4(kw, **changes):
    seg = af4_segment(rows=4, k=16, row_begin=4)
    for key, v in changes.items():
        setattr(seg, key, v)
    return {"weights": [_w(kw)[0], seg]}


def _codebook_seg(kw, **changes):
    seg = af4_segment(rows=4, k=16, row_begin=4)
    seg.variant, seg.codebook, seg.biases = "codebook", "nf4", None
    for key, v in changes.items():
        setattr(seg, key, v)
    return {"weights": [_w(kw)[0], seg]}


def _zero_point_seg(kw, **changes):
    return {"weights": [_w(kw)[0], zero_point_segment(rows=4, k=16, row_begin=4, **changes)]}


def _narrow_packed_af4():
    """An affine AF4 segment over all 8 rows whose packed u8-lsb codes hold half the bytes K = 16
    needs ([8, 4], not [8, 8]); its scales and biases fit K = 16."""
    seg = af4_segment(rows=8, k=16, packing="u8-lsb")
    seg.codes, seg.packed_codes = None, np.zeros((8, 4), np.uint8)
    return seg


S1 = P + "/weight/s1_bf16"
A1 = P + "/weight/s1_af4"

CASES = [
    # ---- projection attributes (schema.cc check_projection) ----
    Case("k_below_one", "attribute-invalid", 'attribute "k" = 0 is below 1', P,
         lambda kw: {"k": 0}, "inspect"),
    Case("k_not_an_integer", "attribute-invalid", 'attribute "k" = "16" is not an integer', P,
         lambda kw: {"k": "16"}, "inspect"),
    Case("k_a_float", "attribute-invalid",
         'attribute "k" = 16 is not an integer (stored as a float: write an integer attribute)', P,
         lambda kw: {"k": 16.0}, "inspect"),
    Case("accumulator_missing", "missing-attribute", 'missing attribute "accumulator"', P,
         lambda kw: {"accumulator": None}, "inspect"),
    Case("accumulator_unknown", "accumulator-unknown",
         'accumulator "f32" is not one of f32-rn, f32-rz, matrix-unit, u=<x> with 0 < x < 0.5', P,
         lambda kw: {"accumulator": "f32"}, "inspect"),
    Case("accumulator_u_out_of_range", "accumulator-unknown", 'accumulator "u=0.5"', P,
         lambda kw: {"accumulator": "u=0.5"}, "inspect"),
    Case("accumulator_u_trailing_blank", "accumulator-unknown", 'accumulator "u=1e-7 "', P,
         lambda kw: {"accumulator": "u=1e-7 "}, "inspect"),
    Case("output_dtype_unknown", "output-dtype-unknown",
         f'output_dtype "f8" is not one of {", ".join(rules.one_of_names("projection", "output_dtype"))}',
         P, lambda kw: {"output_dtype": "f8"}, "inspect"),
    Case("epilogue_unknown", "epilogue-unknown",
         'epilogue "gelu" is not one of none, bias, residual, bias+residual', P,
         lambda kw: {"epilogue": "gelu"}, "inspect"),
    Case("residual_at_unknown", "output-dtype-unknown",
         'residual_at "bf16" is not one of f32, output', P,
         lambda kw: {"residual_at": "bf16"}, "inspect"),
    Case("bias_at_unknown", "epilogue-unknown",
         'bias_at "begin" is not one of end, start', P,
         lambda kw: {"bias_at": "begin"}, "inspect"),
    Case("k_walk_invalid", "k-walk-invalid",
         'k_walk "split:0" is not one of ' + K_WALK_FORMS, P,
         lambda kw: {"k_walk": "split:0"}, "inspect"),
    Case("k_walk_lanes_not_power_of_two", "k-walk-invalid",
         'k_walk "lanes:6:halving" is not one of ' + K_WALK_FORMS, P,
         lambda kw: {"k_walk": "lanes:6:halving"}, "inspect"),
    Case("k_walk_splitk_nested", "k-walk-invalid",
         'k_walk "splitk:2:seq/split:2" is not one of ' + K_WALK_FORMS, P,
         lambda kw: {"k_walk": "splitk:2:seq/split:2"}, "inspect"),
    Case("layer_not_an_integer", "attribute-invalid", 'attribute "layer" = "3" is not an integer',
         P, lambda kw: {"layer": "3"}, "inspect"),
    Case("role_not_a_string", "attribute-invalid", 'attribute "role" = 5 is not a string', P,
         lambda kw: {"role": 5}, "inspect"),
    Case("cap_below_zero", "attribute-invalid", 'attribute "cap" = -1 is below 0', P,
         lambda kw: {"cap": -1}, "inspect"),
    Case("output_rounding_invalid", "output-rounding-unknown",
         'output_rounding "up" is not one of rne, rz, any', P,
         lambda kw: {"output_rounding": "up"}, "inspect"),
    Case("string_attribute_with_nul", "attribute-invalid", 'holds an embedded NUL', P,
         lambda kw: {"role": "lm\0head"}, None),
    # ---- projection members ----
    Case("x_missing", "missing-member", 'missing dataset "x"', P,
         lambda kw: {"x": None}, "inspect"),
    Case("x_rows_not_requests_times_block_rows", "shape-mismatch",
         "4 rows but requests x block_rows = 3 x 2 = 6", P + "/x",
         lambda kw: {"requests": 3, "commit_counts": [2, 1, 0]}, "inspect"),
    Case("x_width_not_in_stride", "shape-mismatch",
         "shape [4, 16] but the attributes require [*, 20]", P + "/x",
         lambda kw: {"in_stride": 20}, "inspect"),
    Case("x_dtype_refused", "datatype-refused",
         f"dtype f16 where {_allowed('x')} is required",
         P + "/x", lambda kw: _refused_float_member("x", kw["x"]), "inspect"),
    Case("selector_missing", "missing-member", 'missing dataset "selector"', P,
         lambda kw: {"selector": None}, "inspect"),
    Case("selector_not_integers", "datatype-refused", "dtype f64 where i32 is required",
         P + "/selector", lambda kw: {"selector": np.array([0.0, 1.0, 2.0])}, None),
    Case("selector_rank", "shape-mismatch", "shape [1, 3] but the attributes require [*]",
         P + "/selector", lambda kw: {"selector": np.array([[0, 1, 2]], np.int32)}, "inspect"),
    Case("selector_outside_i32", "datatype-refused", "does not fit i32", P + "/selector",
         lambda kw: {"selector": np.array([0, 1, 2**31])}, None),
    Case("commit_counts_length", "shape-mismatch",
         "shape [3] but the attributes require [2]", P + "/commit_counts",
         lambda kw: {"commit_counts": [2, 1, 0]}, "inspect"),
    Case("bias_missing", "missing-member", 'missing dataset "bias"', P,
         lambda kw: {"epilogue": "bias"}, "inspect"),
    Case("bias_shape", "shape-mismatch", "shape [7] but the attributes require [8]",
         P + "/bias", lambda kw: {"epilogue": "bias", "bias": np.zeros(7, np.float32)}, "inspect"),
    Case("bias_dtype_refused", "datatype-refused",
         f"dtype f16 where {_allowed('bias')} is required",
         P + "/bias", lambda kw: dict(_refused_float_member("bias", np.zeros(8, np.uint16)),
                                      epilogue="bias"), "inspect"),
    Case("bias_without_bias_epilogue", "invalid-argument", "the epilogue has no bias", P + "/bias",
         lambda kw: {"bias": np.zeros(8, np.float32)}, None),
    Case("residual_shape", "shape-mismatch", "shape [4, 7] but the attributes require [4, 8]",
         P + "/residual", lambda kw: {"epilogue": "residual",
                                      "residual": np.zeros((4, 7), np.float32)}, "inspect"),
    Case("y_unpacked_shape", "shape-mismatch",
         "shape [3, 8] but the attributes require [4, 8] (M: the rows of x)",
         P + "/y_unpacked", lambda kw: {"y_unpacked": kw["y_unpacked"][:3]}, "inspect"),
    Case("y_compact_rows_not_slots", "shape-mismatch",
         "shape [2, 8] but the attributes require [3, 8]", P + "/y_compact",
         lambda kw: {"y_compact": np.zeros((2, 8), np.float32)}, "inspect"),
    Case("y_output_not_exact_in_bf16", "datatype-refused", "not exactly representable in bf16",
         P + "/y_unpacked", lambda kw: {"output_dtype": "bf16",
                                        "y_unpacked": np.full((4, 8), 0.1, np.float32)}, None),
    Case("y_patterns_for_f32_output", "datatype-refused",
         "dtype u16 (raw 16-bit patterns) where f32 is required", P + "/y_unpacked",
         lambda kw: {"y_unpacked": np.zeros((4, 8), np.uint16)}, None),
    Case("no_engine_output", "missing-member", "at least one of y_unpacked, y_packed, y_compact",
         P, lambda kw: {"y_unpacked": None, "y_before": np.zeros((4, 8), np.float32)}, None),
    Case("logits_run_without_lm_head_role", "attribute-invalid",
         'is only read with role = "lm_head"', P,
         lambda kw: {"logits_run": "r", "role": "ffn"}, None),
    Case("lm_head_logits_run_empty", "missing-member",
         'logits_run = "" names no /logits run (omit it for an lm_head of no run)', P,
         lambda kw: {"logits_run": "", "role": "lm_head"}, "inspect"),
    # ---- weight segments (schema.cc check_segment) ----
    Case("weight_group_missing", "missing-member", 'missing group "weight"', P,
         lambda kw: {"weights": None, "k": 16, "n": 8}, "inspect"),
    Case("no_weight_segments", "missing-member", "no weight segments", P + "/weight",
         lambda kw: {"weights": [], "k": 16, "n": 8}, "inspect"),
    Case("segment_format_unknown", "format-unknown",
         'format "int4" is not one of af4, bf16, f32', P + "/weight/s1_int4",
         lambda kw: {"weights": [_w(kw)[0], Segment("int4", 4, 8)]}, "inspect"),
    Case("segment_rows_empty", "attribute-invalid", "row_end 4 <= row_begin 4", S1,
         lambda kw: {"weights": [_w(kw)[0], Segment("bf16", 4, 4, values=_bf16_rows(kw, 0))],
                     "n": 8}, "inspect"),
    Case("segment_row_begin_negative", "attribute-invalid",
         'attribute "row_begin" = -1 is below 0', S1,
         lambda kw: {"weights": [_w(kw)[0], Segment("bf16", -1, 8, values=_bf16_rows(kw, 9))]},
         "inspect"),
    Case("segment_values_shape", "shape-mismatch",
         "shape [4, 15] but the attributes require [4, 16]", S1 + "/values",
         lambda kw: {"weights": [_w(kw)[0], Segment("bf16", 4, 8, values=_bf16_rows(kw, 4, 15))]},
         "inspect"),
    Case("segment_rows_inclusive", "shape-mismatch",
         "shape [5, 16] but the attributes require [4, 16] (rows: row_end - row_begin, row_end exclusive)",
         S1 + "/values",
         lambda kw: {"weights": [_w(kw)[0], Segment("bf16", 4, 8, values=_bf16_rows(kw, 5))]},
         "inspect"),
    Case("segment_values_missing", "missing-member", 'missing dataset "values"', S1,
         lambda kw: {"weights": [_w(kw)[0], Segment("bf16", 4, 8)]}, "inspect"),
    Case("segment_values_patterns_for_f32", "datatype-refused",
         "dtype u16 (raw 16-bit patterns) where f32 is required", P + "/weight/s1_f32/values",
         lambda kw: {"weights": [_w(kw)[0],
                                 Segment("f32", 4, 8, values=np.zeros((4, 16), np.uint16))]},
         None),
    Case("af4_group_size_missing", "missing-attribute", 'missing attribute "group_size"', A1,
         lambda kw: _with_af4(kw, group_size=None), "inspect"),
    Case("af4_variant_unknown", "af4-variant-unknown",
         'AF4 variant "lut" is not one of affine, codebook', A1,
         lambda kw: _with_af4(kw, variant="lut"), "inspect"),
    Case("af4_packing_unknown", "af4-packing-unknown",
         'AF4 packing "u4" is not one of u32-lsb, u8-msb, u8-lsb', A1,
         lambda kw: _with_af4(kw, packing="u4"), "inspect"),
    Case("af4_dequant_unknown", "af4-dequant-unknown",
         'AF4 dequant "bf16" is not one of exact, f32, output, folded', A1,
         lambda kw: _with_af4(kw, dequant="bf16"), "inspect"),
    Case("af4_dequant_op_invalid", "dequant-op-unknown",
         'AF4 dequant_op "fmadd" is not one of fma, mul-add, either, sub-mul, fused', A1,
         lambda kw: _with_af4(kw, dequant="f32", dequant_op="fmadd"), "inspect"),
    Case("af4_dequant_op_of_zero_point", "dequant-op-unknown",
         'AF4 dequant_op "fused" applies to variant zero-point only; variant affine accepts fma, '
         'mul-add, either', A1,
         lambda kw: _with_af4(kw, dequant="f32", dequant_op="fused"), "inspect"),
    # ---- zero-point segments (§4.2) ----
    Case("zp_dequant_op_of_affine", "dequant-op-unknown",
         'AF4 dequant_op "fma" is not one of sub-mul, fused (what variant zero-point accepts)', A1,
         lambda kw: _zero_point_seg(kw, dequant="f32", dequant_op="fma"), "inspect"),
    Case("zp_dequant_op_unknown", "dequant-op-unknown",
         'AF4 dequant_op "sub_mul" is not one of sub-mul, fused (what variant zero-point accepts)',
         A1, lambda kw: _zero_point_seg(kw, dequant="f32", dequant_op="sub_mul"), "inspect"),
    Case("zp_packing_unknown", "af4-packing-unknown",
         'AF4 zero_point_packing "u4" is not one of u8, u32-lsb, u8-msb, u8-lsb', A1,
         lambda kw: _zero_point_seg(kw, zero_point_packing="u4"), "inspect"),
    Case("zp_missing", "missing-member", 'missing dataset "zero_points"', A1,
         lambda kw: _zero_point_seg(kw, zero_points=None), "inspect"),
    Case("zp_above_15", "attribute-invalid",
         "row 1, group 0: zero point 16 is above 15 (a zero point is a 4-bit code, 0..15)",
         A1 + "/zero_points",
         lambda kw: _zero_point_seg(kw, zero_points=np.array([[1, 2], [16, 3], [0, 0], [5, 5]])),
         None),
    Case("zp_packed_columns", "shape-mismatch", "shape [4, 2] but the attributes require [4, 1]",
         A1 + "/zero_points",
         lambda kw: _zero_point_seg(kw, zero_points=np.zeros((4, 3), np.int64),
                                    zero_point_packing="u8-lsb"), "inspect"),
    Case("zp_for_affine", "invalid-argument", "only variant zero-point has zero points",
         A1 + "/zero_points",
         lambda kw: _with_af4(kw, zero_points=np.zeros((4, 2), np.int64)), None),
    Case("af4_codebook_unknown", "af4-codebook-unknown",
         'AF4 codebook "nf5" is not one of nf4, af4-64, custom', A1,
         lambda kw: _codebook_seg(kw, codebook="nf5"), "inspect"),
    Case("af4_codebook_missing", "missing-attribute", 'missing attribute "codebook"', A1,
         lambda kw: _codebook_seg(kw, codebook=None), "inspect"),
    Case("af4_custom_codebook_size", "shape-mismatch",
         "shape [15] but the attributes require [16]", A1 + "/codebook",
         lambda kw: _codebook_seg(kw, codebook=np.linspace(-1, 1, 15).astype(np.float32)), "inspect"),
    Case("af4_packed_codes_dtype", "datatype-refused", "dtype u8 where u32 is required",
         A1 + "/codes",
         lambda kw: _with_af4(kw, codes=None, packed_codes=np.zeros((4, 8), np.uint8)), None),
    Case("af4_codes_missing", "missing-member", 'missing dataset "codes"', A1,
         lambda kw: _with_af4(kw, codes=None), "inspect"),
    Case("af4_scales_rows", "shape-mismatch", "shape [3, 2] but the attributes require [4, *]",
         A1 + "/scales",
         lambda kw: _with_af4(kw, scales=np.ones((3, 2), np.uint16),
                              biases=np.ones((3, 2), np.uint16)), "inspect"),
    Case("af4_scales_dtype", "datatype-refused", "dtype i32 where bf16 or f16 or f32 is required",
         A1 + "/scales", lambda kw: _with_af4(kw, scale_dtype="i32"), None),
    Case("af4_biases_missing", "missing-member", 'missing dataset "biases"', A1,
         lambda kw: _with_af4(kw, biases=None), "inspect"),
    Case("af4_biases_for_codebook", "invalid-argument", "the codebook variant has no biases",
         A1 + "/biases", lambda kw: _codebook_seg(kw, biases=np.ones((4, 2), np.uint16)), None),
    Case("af4_unpacked_codes_width", "guard-af4-geometry",
         "segment s1_af4: unpacked codes have 8 columns, K = 16", A1,
         lambda kw: _with_af4(kw, codes=np.zeros((4, 8), np.uint8)), None),
    # ---- host guards that make the reference impossible (packing/guards.cc 3-6) ----
    Case("walk_split", "guard-walk-split", "k_walk split:3: K = 16 is not a multiple of 3", P,
         lambda kw: {"k_walk": "split:3"}, "check"),
    Case("walk_splitk", "guard-walk-split",
         "k_walk splitk:3:seq/lanes:4:halving: K = 16 is not a multiple of 3", P,
         lambda kw: {"k_walk": "splitk:3:seq/lanes:4:halving"}, "check"),
    Case("walk_code_chunk", "guard-walk-split",
         "k_walk codes:32:scale-product/seq: K = 16 is not a multiple of C = 32", P,
         lambda kw: {"k_walk": "codes:32:scale-product/seq"}, "check"),
    Case("walk_code_sums_split", "guard-walk-split",
         "k_walk codes:4:scale-product/split:3: K = 16 makes 4 code sums of 4, not a multiple of 3", P,
         lambda kw: {"k_walk": "codes:4:scale-product/split:3"}, "check"),
    Case("walk_code_once", "guard-walk-split",
         "k_walk codes:4:scale-product/once: K = 16 makes 4 code sums of 4, where once scales a single sum (C = K)",
         P, lambda kw: {"k_walk": "codes:4:scale-product/once"}, "check"),
    Case("segment_gap", "guard-segment-table",
         "gap: output columns [4, 6) belong to no segment (next is s1_bf16)", P + "/weight",
         lambda kw: {"weights": [_w(kw)[0], Segment("bf16", 6, 8, values=_bf16_rows(kw, 2))]},
         "check"),
    Case("segment_overlap", "guard-segment-table",
         "overlap: segment s1_bf16 starts at 3 but columns up to 4 are already covered",
         P + "/weight",
         lambda kw: {"weights": [_w(kw)[0], Segment("bf16", 3, 8, values=_bf16_rows(kw, 5))]},
         "check"),
    Case("segment_total", "guard-segment-table", "segments cover [0, 8) but N = 10", P + "/weight",
         lambda kw: {"n": 10, "out_stride": 10,
                     "y_unpacked": np.zeros((4, 10), np.float32)}, "check"),
    Case("af4_group_size_does_not_divide_k", "guard-af4-geometry",
         "segment s1_af4: group_size 5 does not divide K = 16", A1,
         lambda kw: _with_af4(kw, group_size=5, scales=np.ones((4, 3), np.uint16),
                              biases=np.ones((4, 3), np.uint16)), "check"),
    Case("af4_codes_columns", "guard-af4-geometry",
         "segment s1_af4: codes have 1 columns; u32-lsb with K = 16 needs K/8 = 2", A1,
         lambda kw: _with_af4(kw, codes=None, packed_codes=np.zeros((4, 1), np.uint32)), "check"),
    # K not declared: the width of x (16) is what the scales state too (2 columns of 8), so
    # the codes (u8-lsb [rows, 4], which alone would say K = 8) are blamed, as by the reader.
    Case("af4_codes_columns_k_from_x", "guard-af4-geometry",
         "segment s0_af4: codes have 4 columns; u8-lsb with K = 16 needs K/2 = 8",
         P + "/weight/s0_af4",
         lambda kw: {"weights": [_narrow_packed_af4()]}, "check"),
    Case("af4_scales_columns", "guard-af4-geometry",
         "segment s1_af4: scales have 3 columns, K/group_size = 2", A1,
         lambda kw: _with_af4(kw, scales=np.ones((4, 3), np.uint16),
                              biases=np.ones((4, 3), np.uint16)), "check"),
    Case("af4_scales_fit_another_group_size", "guard-af4-geometry",
         "s1_af4's stored scales fit group_size = 4 (K 16 / 4 columns), not the declared 8", A1,
         lambda kw: _with_af4(kw, scales=np.ones((4, 4), np.uint16),
                              biases=np.ones((4, 4), np.uint16)), "check"),
    Case("x_quant_group_not_dividing_k", "guard-af4-geometry", "x_quant_group 12 does not divide K = 16", P,
         lambda kw: {"x_quant": "int8", "x_quant_group": 12,
                     "x_quantized": np.zeros((kw["x"].shape[0], 16), np.int8),
                     "x_scales": np.ones((kw["x"].shape[0], 1), np.float32)}, "check"),
    Case("x_quant_rna_with_fp8", "attribute-invalid",
         'x_quant_rounding = "rna" with x_quant = "e4m3": FP8 quantization always rounds to nearest even '
         "(docs/dump-format.md §3.6)", P,
         lambda kw: {"x_quant": "e4m3", "x_quant_rounding": "rna",
                     "x_quantized": np.zeros((kw["x"].shape[0], 16), np.uint8),
                     "x_scales": np.ones((kw["x"].shape[0], 1), np.float32)}, "inspect"),
    Case("input_stride_below_width", "guard-stride-below-width",
         "input x stride 12 < valid width 16", P,
         lambda kw: {"x": kw["x"][:, :12], "k": 16}, "check"),
    Case("output_stride_below_width", "guard-stride-below-width",
         "output stride 6 < valid width 8", P,
         lambda kw: {"y_unpacked": kw["y_unpacked"][:, :6]}, "check"),
]


# The dtype cases (case -> member) exist only while the writer's arguments can reach a type the
# table refuses.
_DTYPE_CASES = {"x_dtype_refused": "x", "bias_dtype_refused": "bias"}
CASES = [c for c in CASES if c.id not in _DTYPE_CASES or _refused_float_reachable(_DTYPE_CASES[c.id])]


def case_kwargs(case: Case) -> dict:
    """The base projection with the case's changes applied."""
    kw = base_projection()
    kw.update(case.overrides(kw))
    return kw
