// This header defines the full-vocabulary comparison of two raw f32 logits rows (run A and
// run B at the same position), computed in f64 from the f32 values:
//   max |d| and where, max ULP distance, mean |d|, RMS of d after removing its mean (softmax is
//   shift-invariant), argmax agreement, top-k overlap (k = 1, 5, 10), KL(A||B), KL(B||A) and
//   JSD in cancellation-free forms (docs/error-bounds.md §7), dp of A's emitted token and its
//   rank in B; plus the facts the verdict policies need (bit identity, first differing column,
//   largest abs/rel excess). d = b - a.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "certify/report/evidence.h"
#include "reference/dtype.h"
#include "reference/status.h"

namespace ncert::certify {

/// Scratch memory reused across rows of one thread.
struct CompareScratch {
  std::vector<double> ea, eb;
};

/// Compares two rows. `token` is A's emitted token (or -1). `rel` is the policy's relative
/// weight for max_excess (0 for none).
RowComparison compare_rows(const float* a, const float* b, Index vocab, std::int32_t token,
                           double rel, CompareScratch& scratch);

/// phi(x) = expm1(x) - x >= 0, accurate to a few ulps for every x (series near 0).
double phi(double x);
/// psi(t) = ((1+t) log(1+t) + (1-t) log(1-t)) / 2 >= 0 for |t| < 1.
double psi(double t);

}  // namespace ncert::certify
