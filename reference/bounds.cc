#include "reference/bounds.h"

#include <cmath>
#include <limits>

#include "reference/detail/interval.h"

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
    // G - 1 + 1 (q*x) + 1 (*s) + 1 (+) + K/G - 1 <= K + 2 roundings; K + 3 for margin. The
    // zero-point form s * sum(q x) - s * zp * sum(x) has the same count: its offset path is
    // G - 1 (sum x) + 2 (the products by zp and s, in either order) + 1 (-) + K/G - 1.
    m.k_eff = static_cast<double>(k) + 3;
  }
  return m;
}

double inflate_s(double s_computed, Index k) {
  return s_computed * (1.0 + 2.0 * gamma(static_cast<double>(k) + 3, 0x1p-53));
}

F32SumInflation f32_sum_inflation(Index k) {
  // docs/error-bounds.md §1. Model each f32 operation of the GEMM as v(1 + d) + e with
  // |d| <= 2^-24 (round to nearest) and e its absolute loss: at most 2^-150 for a product under
  // gradual underflow, below 2^-126 for a result flushed to zero (FTZ), and below 2^-126 more
  // per operand a DAZ unit reads as zero (only partial sums: the operands are never subnormal).
  // Every product's path has at most K roundings and there are at most 3K operations, so for
  // non-negative terms s_hat >= (1 - 2^-24)^K S - 9K 2^-126 >= (1 - K 2^-24) S - K 2^-122, i.e.
  // S <= (s_hat + K 2^-122) / (1 - K 2^-24) = (s_hat + K 2^-122)(1 + gamma_K(2^-24)).
  // gamma() returns an upper bound; the add, 1 + g and the two products are four f64 roundings,
  // (1 - 2^-53)^4 > 1 - 2^-50 together, which the factor (1 + 2^-50) covers.
  F32SumInflation f;
  const double kd = static_cast<double>(k);
  f.slack = kd * 0x1p-122;
  f.factor = (1.0 + gamma(kd, 0x1p-24)) * kSlack;
  return f;
}

BoundTerms bound_terms(const ColumnModel& column, const Accumulator& acc, double lambda, Index k) {
  BoundTerms t;
  t.gamma_acc = gamma(column.k_eff, acc.u_eff);
  t.tier_coef = lambda * std::sqrt(column.k_eff) * acc.u_eff;
  t.eps_coef = gamma(static_cast<double>(k) + 2, 0x1p-53);
  t.eta_base = 2 * column.k_eff + 8;
  t.round_to_nearest = acc.round_to_nearest;
  return t;
}

ElementBound element_bound(double s_up, double spread_up, double x_l1, double a_l1, const ColumnModel& column,
                           const Accumulator& acc, double lambda, Index k) {
  return element_bound(bound_terms(column, acc, lambda, k), s_up, spread_up, x_l1, a_l1);
}

Interval propagate(double y_star, double b, float bias, float residual, const ProjectionArithmetic& a) {
  return detail::propagate_interval(y_star, b, bias, residual, a);
}

}  // namespace ncert::reference
