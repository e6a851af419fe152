#include "reference/bounds.h"

#include <cmath>
#include <limits>

namespace ncert::reference {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// Relative slack that absorbs the f64 roundings of evaluating a bound formula itself (a few
// operations, each at most 2^-53): 2^-50 is 8x that.
constexpr double kSlack = 1.0 + 0x1p-50;
}  // namespace

double gamma(double n, double u) {
  const double nu = n * u;
  if (!(nu < 0.5)) return kInf;
  return nu / (1.0 - nu) * kSlack;
}

ColumnModel column_model(const WeightSegment& segment, Index k) {
  ColumnModel m;
  m.k_eff = static_cast<double>(k);
  if (segment.format == WeightFormat::kAf4 && segment.af4.layout.dequant == Dequant::kFolded) {
    // s * sum(q x) + b * sum(x) per group, then the groups: every product's path has at most
    // G - 1 + 1 (q*x) + 1 (*s) + 1 (+) + K/G - 1 <= K + 2 roundings; K + 3 for margin.
    m.k_eff = static_cast<double>(k) + 3;
  }
  return m;
}

double inflate_s(double s_computed, Index k) {
  return s_computed * (1.0 + 2.0 * gamma(static_cast<double>(k) + 3, 0x1p-53));
}

ElementBound element_bound(double s_up, double spread_up, double x_l1, double a_l1, const ColumnModel& column,
                           const Accumulator& acc, double lambda, Index k) {
  const double eps_ref = gamma(static_cast<double>(k) + 2, 0x1p-53) * s_up;
  const double eta = 0x1p-126 * (2 * column.k_eff + 8 + 2 * (x_l1 + a_l1));
  const double g = gamma(column.k_eff, acc.u_eff);
  ElementBound e;
  e.bound = (g * s_up + spread_up + eps_ref + eta) * kSlack;
  if (acc.round_to_nearest) {
    const double t = lambda * std::sqrt(column.k_eff) * acc.u_eff;
    e.tier = (t * s_up + spread_up + eps_ref + eta) * kSlack;
    if (e.tier > e.bound) e.tier = e.bound;
  } else {
    // Truncating / directed accumulators have biased errors that grow linearly (docs/error-bounds.md §3):
    // a sqrt(K) tier would flag correct kernels, so the tier is half the rigorous bound.
    e.tier = 0.5 * e.bound;
  }
  return e;
}

namespace {

// [lo, hi] (f64 reals) + c, rounded outward into f32.
void add_into_f32(double& lo, double& hi, double c) {
  lo = f64_to_f32_down(add_down(lo, c));
  hi = f64_to_f32_up(add_up(hi, c));
}

// The engine's value before the output rounding is an f32 v in [lo32, hi32] (the outward f32
// cover of [lo, hi]); the stored value is round(v). A monotone rounding (rne, rz) maps that
// interval onto [round(lo32), round(hi32)] exactly; a rounding the engine does not pin down
// ("any") is covered by rounding lo down and hi up.
void round_out(double& lo, double& hi, DType output, OutputRounding rounding) {
  if (output != DType::kBf16) {
    lo = f64_to_f32_down(lo);
    hi = f64_to_f32_up(hi);
    return;
  }
  switch (rounding) {
    case OutputRounding::kNearestEven:
      lo = round_to_bf16(f64_to_f32_down(lo));
      hi = round_to_bf16(f64_to_f32_up(hi));
      return;
    case OutputRounding::kTowardZero:
      lo = bf16_to_f32(f32_to_bf16_truncate(f64_to_f32_down(lo)));
      hi = bf16_to_f32(f32_to_bf16_truncate(f64_to_f32_up(hi)));
      return;
    case OutputRounding::kAny:
      lo = bf16_to_f32(f64_to_bf16_down(lo));
      hi = bf16_to_f32(f64_to_bf16_up(hi));
      return;
  }
}

}  // namespace

Interval propagate(double y_star, double b, float bias, float residual, const ProjectionArithmetic& a) {
  double lo = add_down(y_star, -b);
  double hi = add_up(y_star, b);
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

}  // namespace ncert::reference
