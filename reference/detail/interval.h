// Internal: the propagation of [y* - B, y* + B] through the epilogue (bounds.h propagate), inline
// so the reference's per-element loop compiles it in place with the branch-free directed
// roundings of directed.h: at two intervals per element it was the largest cost after the
// GEMMs when it was an out-of-line call (9 % of the reference's time at M = 128, N = 16480).
#pragma once

#include <limits>

#include "reference/bounds.h"
#include "reference/detail/directed.h"
#include "reference/float_bits.h"

namespace ncert::reference::detail {

/// Half a spacing past FLT_MAX (2^128 - 2^103): a round-to-nearest f32 operation whose exact
/// result lies at or beyond it returns infinity (ties go to 2^128, whose significand is even).
inline constexpr double kF32RoundsToInf = 0x1.ffffffp127;

// The outward f32 cover of [lo, hi] (f64 reals) as the engine's f32 arithmetic can reach it:
// where it rounds to nearest (`nearest`), a value whose every order lies at or beyond
// kF32RoundsToInf is +-inf, not +-FLT_MAX, which rounding lo down alone gives (x = [3e38,
// 3e38], w = [2, 2] under f32-rn accepted FLT_MAX for 1.2e39, a review's; a truncating
// accumulator does stop at FLT_MAX).
inline void f32_cover(double& lo, double& hi, bool nearest) {
  const bool lo_inf = nearest && lo >= kF32RoundsToInf, hi_inf = nearest && hi <= -kF32RoundsToInf;
  lo = lo_inf ? std::numeric_limits<double>::infinity() : detail::f64_to_f32_down(lo);
  hi = hi_inf ? -std::numeric_limits<double>::infinity() : detail::f64_to_f32_up(hi);
}

/// Whether the engine's arithmetic rounds a value past f32's range to +-inf: its accumulator
/// rounds to nearest, and so does a promoted walk's inner stage (`promote:<P>:<p>:rz` stops at
/// its largest p-bit value, dump-format.md §3.4: a walk reproduced bit for bit had failed
/// bound, a review's).
inline bool rounds_past_max_to_inf(const ProjectionArithmetic& a) {
  const bool rz_stage = a.walk.declared && a.walk.inner == KWalkInner::kPromote &&
                        a.walk.promote_rounding != PromoteRounding::kNearestEven;
  return a.accumulator.round_to_nearest && !rz_stage;
}

// [lo, hi] (f64 reals) + c, rounded outward into f32.
inline void add_into_f32(double& lo, double& hi, double c, bool nearest) {
  lo = detail::add_down(lo, c);
  hi = detail::add_up(hi, c);
  f32_cover(lo, hi, nearest);
}

// The engine's value before the output rounding is an f32 v in [lo32, hi32] (the outward f32
// cover of [lo, hi]); the stored value is round(v). A monotone rounding (rne, rz) maps that
// interval onto [round(lo32), round(hi32)] exactly; a rounding the engine does not pin down
// ("any") is covered by rounding lo down and hi up.
inline void round_out(double& lo, double& hi, DType output, OutputRounding rounding, bool nearest) {
  if (output == DType::kF32) {
    f32_cover(lo, hi, nearest);
    return;
  }
  const bool bf16 = output == DType::kBf16;
  switch (rounding) {
    case OutputRounding::kNearestEven:
    case OutputRounding::kTowardZero: {
      const bool rz = rounding == OutputRounding::kTowardZero;
      f32_cover(lo, hi, nearest);
      lo = round_to_type(static_cast<float>(lo), output, rz);
      hi = round_to_type(static_cast<float>(hi), output, rz);
      return;
    }
    case OutputRounding::kAny:
      lo = bf16 ? bf16_to_f32(f64_to_bf16_down(lo)) : f16_to_f32(f64_to_f16_down(lo));
      hi = bf16 ? bf16_to_f32(f64_to_bf16_up(hi)) : f16_to_f32(f64_to_f16_up(hi));
      return;
  }
}

inline Interval propagate_interval(double y_star, double b, float bias, float residual, const ProjectionArithmetic& a) {
  const bool nearest = rounds_past_max_to_inf(a);
  // With the bias a term of the sum (bias_at = start) the accumulator's result is y* + bias +-
  // B, never y* alone: the bias joins the centre here, outward, and is not added again below
  // (x = [3e38, 3e38], w = [1, 1], bias -3e38 stores 3e38, which the f32 range rule applied to
  // y* = 6e38 failed as [inf, inf]: a review's).
  const bool in_sum = bias_in_sum(a);
  double lo = detail::add_down(in_sum ? detail::add_down(y_star, static_cast<double>(bias)) : y_star, -b);
  double hi = detail::add_up(in_sum ? detail::add_up(y_star, static_cast<double>(bias)) : y_star, b);
  // The accumulator's own result first: past f32's range in every order it is +-inf, and stays
  // so through the epilogue's adds (x = [3e38, 3e38], w = [2, 2], bias -3e38: the correct +inf
  // failed, 3e38 passed; a review's).
  // An end past it on either side is that infinity (the other end may be finite: the result
  // then overflows in some orders only).
  if (nearest) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    lo = lo >= kF32RoundsToInf ? kInf : lo <= -kF32RoundsToInf ? -kInf : lo;
    hi = hi >= kF32RoundsToInf ? kInf : hi <= -kF32RoundsToInf ? -kInf : hi;
  }
  if (has_bias(a.epilogue) && !in_sum) add_into_f32(lo, hi, bias, nearest);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kF32) add_into_f32(lo, hi, residual, nearest);
  round_out(lo, hi, a.output, a.output_rounding, nearest);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kOutput) {
    // out = rnd_o(fl32(rnd_o(v) + r)): the f32 add (outward) then the output rounding again.
    add_into_f32(lo, hi, residual, nearest);
    round_out(lo, hi, a.output, a.output_rounding, nearest);
  }
  return {static_cast<float>(lo), static_cast<float>(hi)};
}

}  // namespace ncert::reference::detail
