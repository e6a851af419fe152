// Internal: the kernel's weight for one AF4 code under a pinned dequantization (`f32` /
// `output`), and the weight and charged magnitude of the other modes, shared by af4_decode_row
// (reference/af4.cc) and the reference's table decoder (reference/detail/weight_rows.cc), which
// must agree bit for bit.
#pragma once

#include <cmath>

#include "reference/af4.h"
#include "reference/float_bits.h"

namespace ncert::reference::detail {

/// Whether the declared dequant_op pins the fused order (fma, fused) or the unfused one
/// (mul-add, sub-mul); `either` pins neither.
inline bool dequant_op_only_fused(DequantOp op) { return op == DequantOp::kFma || op == DequantOp::kFused; }
inline bool dequant_op_only_unfused(DequantOp op) { return op == DequantOp::kMulAdd || op == DequantOp::kSubMul; }

/// The f32 value s * q + b (affine), table[q] * s (codebook) or (q - zp) * s (zero-point) by
/// one operation order, rounded to the activation type `round_to` for `output` (kF32: kept). Affine: one fused
/// multiply-add, or a multiply then an add. Zero-point: fused is m = fl32(-zp * s), then
/// fma(q, s, m) (one rounding after the exact q*s + m); unfused is sub-mul, the integer
/// q - zp (exact in f32) times s, one rounding. -ffp-contract=off (CMake) keeps s * qf + b two
/// roundings unless fma says one.
inline float kernel_weight(const Af4Layout& L, float s, float b, int zp, int q, bool fused, DType round_to) {
  float w;
  if (L.variant == Af4Variant::kAffine) {
    const float qf = static_cast<float>(q);
    w = fused ? std::fma(s, qf, b) : s * qf + b;
  } else if (L.variant == Af4Variant::kZeroPoint) {
    w = fused ? std::fma(static_cast<float>(q), s, -(static_cast<float>(zp) * s)) : static_cast<float>(q - zp) * s;
  } else {
    w = L.table[q] * s;
  }
  return round_to_type(w, round_to, false);
}

/// The f32 weight the K-walk emulation multiplies by where the dequantization is `exact` or
/// `folded` (the walk check reports those as SKIP or certifies a real-valued weight; this is
/// only the emulation's operand): fmaf(s, q, b), table[q] * s or fl32((q - zp) * s).
inline float exact_kernel_weight(const Af4Layout& L, float s, float b, int zp, int q) {
  if (L.variant == Af4Variant::kAffine) return std::fma(s, static_cast<float>(q), b);
  if (L.variant == Af4Variant::kZeroPoint) return static_cast<float>(q - zp) * s;
  return L.table[q] * s;
}

/// The magnitude the bound charges for one weight w of the exact / folded dequantizations: |w|,
/// except for `folded`, where the kernel multiplies the codes and the offset separately
/// (docs/error-bounds.md §2): |s*q| + |b| (affine) or |s*q| + |s*zp| (zero-point,
/// s*sum(q*x) - s*zp*sum(x)). sd and bd are s and b in f64; every product is exact there.
inline double folded_magnitude(const Af4Layout& L, double sd, double bd, int zp, int q, double w) {
  if (L.dequant != Dequant::kFolded) return std::fabs(w);
  if (L.variant == Af4Variant::kAffine) return std::fabs(sd * q) + std::fabs(bd);
  if (L.variant == Af4Variant::kZeroPoint) return std::fabs(sd * q) + std::fabs(sd * zp);
  return std::fabs(w);
}

}  // namespace ncert::reference::detail
