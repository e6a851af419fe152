#include "reference/bounds.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
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

namespace {

/// A quantized segment whose kernel scales a sum of codes times activations (`output`, or
/// `folded`): the sums it rounds are not partial sums of x_k w_k.
bool is_dequant_after_sum(const WeightSegment& segment) {
  Dequant d = Dequant::kExact;
  if (segment.format == WeightFormat::kAf4) d = segment.af4.layout.dequant;
  if (is_scaled_format(segment.format)) d = segment.scaled.dequant;
  return d == Dequant::kOutput || d == Dequant::kFolded;
}

}  // namespace

double noise_magnitude(double m, bool in_binades) {
  if (!in_binades || !(m > 0) || !std::isfinite(m)) return m;
  // 2^floor(log2 m) from the bits (frexp and ldexp were 2 % of a check's CPU): a normal m
  // with its fraction cleared; a subnormal m is its pattern k times 2^-1074, so the power is
  // the pattern's highest set bit.
  const auto b = std::bit_cast<std::uint64_t>(m);
  return std::bit_cast<double>(m < DBL_MIN ? std::bit_floor(b) : b & 0xFFF0000000000000ull);
}

ColumnModel column_model(const WeightSegment& segment, Index k, const KWalk& walk, double u_eff, bool quantized_x) {
  ColumnModel m;
  m.k_eff = static_cast<double>(k);
  const bool promoted = walk.declared && walk.inner == KWalkInner::kPromote;
  m.rounds_own_terms = !quantized_x && !is_dequant_after_sum(segment);
  if (quantized_x && !promoted) {
    // Quantized activations (docs/error-bounds.md §6b): a kernel that sums a group's integer (or
    // FP8) products exactly and scales the sum passes each term through the product of the two
    // scales, the scaling and the K/g - 1 additions of the group sums (or through an f32 walk
    // over (q - zp)*s): at most K/g + 2 <= K + 2 roundings; K + 3 as for the folded AF4 forms.
    // Quantized x with a folded AF4 weight is charged the same: its paths are no longer.
    m.k_eff = static_cast<double>(k) + 3;
    return m;
  }
  const bool scaled_folded = is_scaled_format(segment.format) && segment.scaled.dequant == Dequant::kFolded;
  if ((segment.format == WeightFormat::kAf4 && segment.af4.layout.dequant == Dequant::kFolded) || scaled_folded) {
    // A folded scaled segment (s * sum(q x) per group, then the groups) has the same paths
    // without the offset term: G - 1 + 1 + 1 + K/G - 1 <= K + 1 roundings.
    // s * sum(q x) + b * sum(x) per group, then the groups: every product's path has at most
    // G - 1 + 1 (q*x) + 1 (*s) + 1 (+) + K/G - 1 <= K + 2 roundings; K + 3 for margin. The
    // zero-point form s * sum(q x) - s * zp * sum(x) has the same count: its offset path is
    // G - 1 (sum x) + 2 (the products by zp and s, in either order) + 1 (-) + K/G - 1.
    m.k_eff = static_cast<double>(k) + 3;
    return m;
  }
  if (!walk.declared || walk.inner != KWalkInner::kPromote) return m;
  // docs/error-bounds.md §2a. A part of len = K/S terms is cut into nb = ceil(len/P) blocks. In
  // a block of b <= min(P, len) terms, the term at position i passes its own product rounding
  // (or its fused step) and the b - 1 - i later steps: at most min(P, len) roundings at u_p
  // (the first add to the zero accumulator is exact). Block 0's sum then passes nb - 1 f32
  // additions, and a part's sum the combine tree's: S - 1 (seq) or log2 S (halving, pairs,
  // butterfly).
  // A code walk's promoted blocks hold K / C terms, each a sum already exact (code_walk.h).
  const Index len = walk.terms(k) / std::max<Index>(1, walk.parts);
  const Index blocks = len == 0 ? 0 : (len - 1) / walk.promote_block + 1;
  const double combine = walk.combine == KWalkTree::kSeq ? static_cast<double>(walk.parts - 1)
                                                         : std::log2(static_cast<double>(walk.parts));
  m.inner_roundings = static_cast<double>(std::min(walk.promote_block, len));
  m.inner_u = std::max(walk.promote_unit(), u_eff);
  m.outer_roundings = static_cast<double>(std::max<Index>(0, blocks - 1)) + combine;
  // A promoted kernel over quantized activations scales each block's sum by the product of two
  // scales before the f32 total: two more f32 roundings, one more for margin.
  if (quantized_x) m.outer_roundings += 3;
  m.inner_round_to_nearest = walk.promote_rounding == PromoteRounding::kNearestEven;
  return m;
}

ColumnModel with_bias_term(ColumnModel m) {
  m.k_eff += 1;
  if (m.inner_roundings > 0) m.outer_roundings += 1;
  return m;
}

double promoted_gamma(double n_in, double u_in, double n_out, double u_out) {
  // (1 + u)^n <= 1 / (1 - n u) = 1 + gamma_n(u) for n u < 1, so the product of the two stages'
  // factors is at most (1 + g_in)(1 + g_out). gamma() already rounds up; the two adds and the
  // product are three f64 roundings, covered by kSlack (2^-50 > 3 * 2^-53).
  const double g_in = gamma(n_in, u_in);
  const double g_out = gamma(n_out, u_out);
  if (std::isinf(g_in) || std::isinf(g_out)) return kInf;
  return (g_in + g_out + g_in * g_out) * kSlack;
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
  t.noise_coef = std::sqrt(column.k_eff) * acc.u_eff;
  if (column.inner_roundings > 0) {
    // A promoted walk (§2a): its two stages replace gamma_K(u_eff). The tier is Higham and
    // Mary's sqrt(n) u with n the path length and the larger unit, for round-to-nearest stages
    // only; a truncating p-bit accumulator is biased, so its tier is B/2 as for f32-rz.
    const double path = column.inner_roundings + column.outer_roundings;
    t.gamma_acc = promoted_gamma(column.inner_roundings, column.inner_u, column.outer_roundings, acc.u_eff);
    t.tier_coef = lambda * std::sqrt(path) * column.inner_u;
    t.round_to_nearest = acc.round_to_nearest && column.inner_round_to_nearest;
    t.noise_coef = std::sqrt(column.inner_roundings * column.inner_u * column.inner_u +
                             column.outer_roundings * acc.u_eff * acc.u_eff);
  }
  if (!t.round_to_nearest) t.noise_coef = 0;
  // f32-rn's unit is 2^-24 and a promoted stage's 2^-p: binary formats rounding to nearest. An
  // explicit u= declares a bound, not a format, and keeps u M.
  t.noise_in_binades = column.rounds_own_terms && acc.kind == AccumulatorKind::kF32Rn;
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
