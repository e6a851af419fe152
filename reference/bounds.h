// This header defines the certification math of docs/error-bounds.md as small pure
// functions: gamma_n(u), what each output column's weight format charges (roundings per path,
// dequantization error), the per-element deterministic bound B and probabilistic tier T, and
// the propagation of [y* - B, y* + B] through bias, residual and output rounding with outward
// (directed) rounding. An engine value is accepted iff it lies in the final interval.
#pragma once

#include "reference/linear_spec.h"

namespace ncert::reference {

/// gamma_n(u) = n u / (1 - n u), evaluated so the result is an upper bound; +inf when
/// n u >= 1/2 (the classical bound exists up to n u < 1, but beyond 1/2 it certifies nothing).
double gamma(double n, double u);

/// What the bound charges the elements of one output column, by the column's weight segment.
struct ColumnModel {
  double k_eff = 0;    ///< roundings on the longest path of one product: K, or K + 3 (folded)
};

/// bf16 / f32 weights and AF4 exact, f32 and output: {K} (the f32 and output dequantizations
/// pin the kernel's weights down, so the reference uses those weights and charges nothing for
/// them; docs/error-bounds.md §2). AF4 folded: {K + 3} with S_alg = S_q.
ColumnModel column_model(const WeightSegment& segment, Index k);

/// The computed S (an f64 GEMM of non-negative terms) made a true upper bound:
/// S_true <= S_computed (1 + 2 gamma_{K+3}(2^-53)).
double inflate_s(double s_computed, Index k);

struct ElementBound {
  double bound = 0;  ///< B: deterministic, any summation order
  double tier = 0;   ///< T: probabilistic tier (lambda sqrt(K) u S, or B/2 for non-RN units)
};

/// B = gamma_{K_eff}(u_eff) S + D + eps_ref + eta, with D = sum |x| spread (the weights' own
/// uncertainty where dequant_op = either leaves two values; 0 otherwise), eps_ref =
/// gamma_{K+2}(2^-53) S (the f64 reference's own error) and eta = 2^-126 (2 K_eff + 8 +
/// 2 (|x_i|_1 + |a_j|_1)) covering flush-to-zero of every operation and subnormal inputs read
/// as zero. `s_up` is the inflated S_alg, `x_l1`/`a_l1` the row and column 1-norms.
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
