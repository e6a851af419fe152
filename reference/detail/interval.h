// Internal: the propagation of [y* - B, y* + B] through the epilogue (bounds.h propagate), inline
// so the reference's per-element loop compiles it in place with the branch-free directed
// roundings of directed.h: at two intervals per element it was the largest cost after the
// GEMMs when it was an out-of-line call (9 % of the reference's time at M = 128, N = 16480).
#pragma once

#include "reference/bounds.h"
#include "reference/detail/directed.h"
#include "reference/float_bits.h"

namespace ncert::reference::detail {

// [lo, hi] (f64 reals) + c, rounded outward into f32.
inline void add_into_f32(double& lo, double& hi, double c) {
  lo = detail::f64_to_f32_down(detail::add_down(lo, c));
  hi = detail::f64_to_f32_up(detail::add_up(hi, c));
}

// The engine's value before the output rounding is an f32 v in [lo32, hi32] (the outward f32
// cover of [lo, hi]); the stored value is round(v). A monotone rounding (rne, rz) maps that
// interval onto [round(lo32), round(hi32)] exactly; a rounding the engine does not pin down
// ("any") is covered by rounding lo down and hi up.
inline void round_out(double& lo, double& hi, DType output, OutputRounding rounding) {
  if (output == DType::kF32) {
    lo = detail::f64_to_f32_down(lo);
    hi = detail::f64_to_f32_up(hi);
    return;
  }
  const bool bf16 = output == DType::kBf16;
  switch (rounding) {
    case OutputRounding::kNearestEven:
    case OutputRounding::kTowardZero: {
      const bool rz = rounding == OutputRounding::kTowardZero;
      lo = round_to_type(detail::f64_to_f32_down(lo), output, rz);
      hi = round_to_type(detail::f64_to_f32_up(hi), output, rz);
      return;
    }
    case OutputRounding::kAny:
      lo = bf16 ? bf16_to_f32(f64_to_bf16_down(lo)) : f16_to_f32(f64_to_f16_down(lo));
      hi = bf16 ? bf16_to_f32(f64_to_bf16_up(hi)) : f16_to_f32(f64_to_f16_up(hi));
      return;
  }
}

inline Interval propagate_interval(double y_star, double b, float bias, float residual, const ProjectionArithmetic& a) {
  double lo = detail::add_down(y_star, -b);
  double hi = detail::add_up(y_star, b);
  if (has_bias(a.epilogue)) add_into_f32(lo, hi, bias);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kF32) add_into_f32(lo, hi, residual);
  round_out(lo, hi, a.output, a.output_rounding);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kOutput) {
    // out = rnd_o(fl32(rnd_o(v) + r)): the f32 add (outward) then the output rounding again.
    add_into_f32(lo, hi, residual);
    round_out(lo, hi, a.output, a.output_rounding);
  }
  return {static_cast<float>(lo), static_cast<float>(hi)};
}

}  // namespace ncert::reference::detail
