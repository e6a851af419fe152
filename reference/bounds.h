// This header defines the certification math of docs/error-bounds.md as small pure
// functions: gamma_n(u), what each output column's weight format charges (roundings per path,
// dequantization error), the per-element deterministic bound B and probabilistic tier T, and
// the propagation of [y* - B, y* + B] through bias, residual and output rounding with outward
// (directed) rounding. An engine value is accepted iff it lies in the final interval.
#pragma once

#include <bit>
#include <cstdint>

#include "reference/linear_spec.h"

namespace ncert::reference {

/// gamma_n(u) = n u / (1 - n u), evaluated so the result is an upper bound; +inf when
/// n u >= 1/2 (the classical bound exists up to n u < 1, but beyond 1/2 it certifies nothing).
double gamma(double n, double u);

/// What the bound charges the elements of one output column, by the column's weight segment.
struct ColumnModel {
  double k_eff = 0;  ///< roundings on the longest path of one product: K, or K + 3 (folded)
  /// A promoted walk (k_walk promote, docs/error-bounds.md §2a): each product's path has at most
  /// `inner_roundings` roundings at `inner_u` (the p-bit accumulator's unit, never below the
  /// accumulator's u_eff) and `outer_roundings` f32 additions at u_eff. 0 inner roundings: no
  /// promotion, gamma_{K_eff}(u_eff) for any order.
  double inner_roundings = 0;
  double inner_u = 0;
  double outer_roundings = 0;
  bool inner_round_to_nearest = true;  ///< the promoted accumulator rounds to nearest (rne)
  /// Every operand the kernel rounds is a product or a partial sum of the dot product's own
  /// terms x_k w_k (no scale applied after a rounding: not a group sum scaled afterwards under
  /// `dequant = output` or `folded`, not a sum of quantized activations' codes).
  bool rounds_own_terms = true;
};

/// bf16 / f32 weights and AF4 exact, f32 and output: {K} (the f32 and output dequantizations
/// pin the kernel's weights down, so the reference uses those weights and charges nothing for
/// them; docs/error-bounds.md §2). AF4 folded: {K + 3} with S_alg = S_q. A declared promote walk
/// (alone or inside splitk) adds its two stages (docs/error-bounds.md §2a), except for folded
/// segments, whose kernel has its own order and no walk. `u_eff` is the accumulator's unit.
ColumnModel column_model(const WeightSegment& segment, Index k, const KWalk& walk = {}, double u_eff = 0x1p-24,
                         bool quantized_x = false);

/// The same model with the bias as one more term of the sum (bias_at = start; docs/error-bounds.md
/// §2): every product's path gains at most one rounding, the f32 add into the bias (for a
/// promoted walk, of its outer stage), and the bias itself passes no more roundings than a
/// product does. The bound then takes S + |bias| for S.
ColumnModel with_bias_term(ColumnModel m);

/// gamma for a product passing n_in roundings at u_in and n_out at u_out:
/// (1 + u_in)^n_in (1 + u_out)^n_out - 1 <= g_in + g_out + g_in g_out with g = gamma_n(u),
/// rounded up; +inf when either gamma is.
double promoted_gamma(double n_in, double u_in, double n_out, double u_out);

/// The computed S (an f64 GEMM of non-negative terms) made a true upper bound:
/// S_true <= S_computed (1 + 2 gamma_{K+3}(2^-53)).
double inflate_s(double s_computed, Index k);

/// S computed as an f32 GEMM of non-negative terms (|x| and the charged magnitudes rounded up
/// to f32, and up to 2^-126 where they are nonzero and smaller), made a true upper bound of the
/// exact S in f64 (docs/error-bounds.md §1): S <= (s_hat + K 2^-122)(1 + gamma_K(2^-24)) for
/// any summation order of the K products.
/// `factor` is 1 + gamma_K(2^-24) rounded so that the f64 evaluation of up() never falls
/// below that product. Valid only for a finite s_hat: an overflow (inf) or 0 * inf (NaN) in
/// the f32 GEMM is recomputed in f64 by the caller.
struct F32SumInflation {
  double slack = 0;   ///< K 2^-122: underflow and flush-to-zero of up to 3K operations
  double factor = 1;  ///< (1 + gamma_K(2^-24)) (1 + 2^-50)
  double up(float s_hat) const { return (static_cast<double>(s_hat) + slack) * factor; }
};
F32SumInflation f32_sum_inflation(Index k);

/// An f32 operand of the S GEMM: |v| (exact), raised to 2^-126 if it is a nonzero subnormal, so
/// that a process that reads subnormal inputs as zero (DAZ) loses no term. Bit operations only
/// (a DAZ unit would read the comparison's operand as 0). Inf and NaN are kept: they make s_hat
/// non-finite, and the caller falls back to f64. Magnitudes held in f64 are first rounded up
/// to f32 (f64_to_f32_up).
inline float f32_magnitude(float v) {
  std::uint32_t b = std::bit_cast<std::uint32_t>(v) & 0x7FFFFFFFu;
  if (b != 0 && b < 0x00800000u) b = 0x00800000u;
  return std::bit_cast<float>(b);
}

struct ElementBound {
  double bound = 0;  ///< B: deterministic, any summation order
  double tier = 0;   ///< T: probabilistic tier (lambda sqrt(K) u S, or B/2 for non-RN units)
  /// The part of B that is not the accumulator's rounding (the weights' spread, the f64
  /// reference's own error, underflow): what the residual tests treat as a deterministic offset.
  double slack = 0;
};

/// What a rounding error's bound scales with when every rounded operand is at most `m`:
/// 2^floor(log2 m) when `in_binades` (half a spacing of the highest binade m reaches, per unit
/// roundoff), m otherwise; 0 for m = 0, m itself when not finite.
double noise_magnitude(double m, bool in_binades);

/// The per-column constants of B and T (one set per weight segment), so the per-element
/// evaluation is a few multiply-adds (docs/error-bounds.md §2-3).
struct BoundTerms {
  double gamma_acc = 0;  ///< gamma_{K_eff}(u_eff)
  double tier_coef = 0;  ///< lambda sqrt(K_eff) u_eff (round-to-nearest accumulators)
  double eps_coef = 0;   ///< gamma_{K+2}(2^-53): the f64 reference's own error per unit of S
  double eta_base = 0;   ///< 2 K_eff + 8
  /// sqrt(sum of u^2 over a product's roundings): sqrt(K_eff) u_eff, or for a promoted walk
  /// sqrt(n_in u_in^2 + n_out u_eff^2). Times a bound M on every rounded operand it is the
  /// sub-Gaussian scale of the accumulated error under the mean-independent rounding model
  /// (docs/error-bounds.md §6c); 0 where the errors are biased (not round-to-nearest).
  double noise_coef = 0;
  /// The rounded operands are the dot product's own partial sums and products (ColumnModel::
  /// rounds_own_terms) in binary formats rounding to nearest (f32-rn, a promoted rne stage):
  /// an operand of magnitude at most M lies in a binade no higher than 2^floor(log2 M), where a
  /// rounding errs by at most u 2^floor(log2 M) (half a spacing), not u M. The residual scale is
  /// then noise_coef * noise_magnitude(M), on average 0.54 of (noise_coef M)^2 in energy.
  bool noise_in_binades = false;
  /// Quantized segments (AF4, scaled): the kernel's dequantized weights may differ from the
  /// reference's by roundings the reference does not pin (a fused zero point's fl32(-zp s) once
  /// per group, f32 products of code and scale), each up to u of a charged magnitude. Such an
  /// error is the same for every row of a column, so the residual tests treat it as a fixed
  /// offset: shared_coef * S of slack (2 f32 units: two roundings per weight at most).
  double shared_coef = 0;
  bool round_to_nearest = true;
};
BoundTerms bound_terms(const ColumnModel& column, const Accumulator& acc, double lambda, Index k);

/// B = gamma_{K_eff}(u_eff) S + D + eps_ref + eta, with D = sum |x| spread (the weights' own
/// uncertainty where dequant_op = either leaves two values; 0 otherwise), eps_ref =
/// gamma_{K+2}(2^-53) S (the f64 reference's own error) and eta = 2^-126 (2 K_eff + 8 +
/// 2 (|x_i|_1 + |a_j|_1)) covering flush-to-zero of every operation and subnormal inputs read
/// as zero. `s_up` is the inflated S_alg, `x_l1`/`a_l1` upper bounds of the row and column
/// 1-norms.
inline ElementBound element_bound(const BoundTerms& t, double s_up, double spread_up, double x_l1, double a_l1) {
  // 1 + 2^-50 absorbs the f64 roundings of these few operations (each at most 2^-53).
  constexpr double kSlack = 1.0 + 0x1p-50;
  const double eps_ref = t.eps_coef * s_up;
  const double eta = 0x1p-126 * (t.eta_base + 2 * (x_l1 + a_l1));
  ElementBound e;
  e.bound = (t.gamma_acc * s_up + spread_up + eps_ref + eta) * kSlack;
  e.slack = (spread_up + eps_ref + eta) * kSlack;
  if (t.round_to_nearest) {
    e.tier = (t.tier_coef * s_up + spread_up + eps_ref + eta) * kSlack;
    if (e.tier > e.bound) e.tier = e.bound;
  } else {
    // Truncating / directed accumulators have biased errors that grow linearly
    // (docs/error-bounds.md §3): a sqrt(K) tier would flag correct kernels, so the tier is half
    // the rigorous bound.
    e.tier = 0.5 * e.bound;
  }
  return e;
}

/// The same from the column model (bound_terms then the above).
ElementBound element_bound(double s_up, double spread_up, double x_l1, double a_l1, const ColumnModel& column,
                           const Accumulator& acc, double lambda, Index k);

/// An accepted interval of stored output values (bf16 values are exact in f32).
struct Interval {
  float lo = 0;
  float hi = 0;
};

/// Propagates [y* - b, y* + b] through the epilogue the projection declares: the f32 adds of
/// bias and residual outward (down for lo, up for hi); the rounding to a bf16 output as the
/// projection declares it (rne or rz: the same rounding of both ends, which is exact for a
/// monotone rounding; any: outward); the residual added at the output the same way.
Interval propagate(double y_star, double b, float bias, float residual, const ProjectionArithmetic& a);

/// True iff z is not NaN and lo <= z <= hi.
inline bool contains(const Interval& iv, float z) { return iv.lo <= z && z <= iv.hi; }

}  // namespace ncert::reference
