// Internal: the reference's per-element loop. For each element of a block it derives, from y*,
// S and the column's bound constants, B and T (docs/error-bounds.md §2-3), the slack and scale
// the residual tests read (§6c), the centre, and the accepted and expected intervals carried
// through the epilogue and the output rounding with outward rounding (bounds.h propagate).
//
// At M 128 x N 16,480 that is 2.1 M elements, each two interval propagations of four directed
// roundings; one element at a time it was 12 % of the reference's CPU (bench_reference, an
// Intel Xeon, 2026-12-05). element_bounds_row takes eight elements a step in AVX-512 where
// the build has it, with the same IEEE operations in the same order (the build forbids FMA
// contraction), so the bits are element_bounds_one's; a lane whose operands reach one of the
// scalar code's special cases (a sum that is 0 or not finite, a NaN, a subnormal noise scale)
// is recomputed by element_bounds_one. bf16 and f16 outputs declared with `any` output rounding
// run element_bounds_one throughout.
#pragma once

#include "reference/bounds.h"
#include "reference/linear_spec.h"

namespace ncert::reference::detail {

/// What one row of a block holds for its columns [begin, end): arrays indexed by column.
struct ElementBoundsIn {
  const double* y = nullptr;        ///< y*
  const double* s = nullptr;        ///< S as a true upper bound
  const double* spread = nullptr;   ///< D as a true upper bound; null: 0 (no two-valued weights)
  const double* a_l1 = nullptr;     ///< upper bounds of the column 1-norms
  const float* bias = nullptr;      ///< the bias; null where the epilogue has none
  const float* residual = nullptr;  ///< the row's residual; null where the epilogue has none
  double x_l1 = 0;                  ///< upper bound of the row's 1-norm
};

/// Where they go, indexed alike.
struct ElementBoundsOut {
  double* bound = nullptr;
  double* tier = nullptr;
  double* slack = nullptr;
  double* sigma = nullptr;
  double* center = nullptr;
  Interval* accept = nullptr;
  Interval* expect = nullptr;
};

/// Element e: the definition.
void element_bounds_one(const BoundTerms& terms, const ProjectionArithmetic& a, const ElementBoundsIn& in, Index e,
                        const ElementBoundsOut& out);

/// Elements [begin, end), whose columns share `terms`: element_bounds_one's bits for each.
void element_bounds_row(const BoundTerms& terms, const ProjectionArithmetic& a, const ElementBoundsIn& in, Index begin,
                        Index end, const ElementBoundsOut& out);

/// Whether element_bounds_row takes AVX-512 steps for this arithmetic in this build.
bool element_bounds_vectorized(const ProjectionArithmetic& a);

}  // namespace ncert::reference::detail
