// This header defines the full-vocabulary comparison of two raw f32 logits rows (run A and
// run B at the same position), computed in f64 from the f32 values:
//   max |d| and where, max ULP distance, mean |d|, RMS of d after removing its mean (softmax is
//   shift-invariant), argmax agreement, top-k overlap (k = 1, 5, 10), KL(A||B), KL(B||A) and
//   JSD in cancellation-free forms (docs/error-bounds.md §"KL"), dp of A's emitted token and its
//   rank in B; plus the facts the verdict policies need (bit identity, first differing column,
//   largest abs/rel excess). d = b - a.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/dtype.h"
#include "reference/status.h"

namespace ncert::certify {

struct RowComparison {
  bool bit_identical = true;
  Index first_diff = -1;       ///< first column whose bits differ
  double max_abs = 0;          ///< max |b - a| over finite pairs
  Index max_abs_col = -1;
  std::uint64_t max_ulp = 0;   ///< f32 ULP distance (kUlpInfinite for NaN/Inf mismatches)
  Index max_ulp_col = -1;
  double mean_abs = 0;
  double rms_centered = 0;     ///< RMS of (d - mean d)
  Index argmax_a = -1, argmax_b = -1;  ///< lowest index among maxima
  double top5_overlap = 0, top10_overlap = 0;  ///< |top-k(A) & top-k(B)| / k
  double kl_ab = 0, kl_ba = 0, jsd = 0;
  double dp_token = 0;         ///< p_B(t) - p_A(t) for A's emitted token t
  Index rank_in_b = 0;         ///< 1-based rank of A's token in row B (ties: lower id first)
  bool nonfinite = false;      ///< a NaN or +Inf in either row (probabilities undefined)
  bool masked = false;         ///< -Inf (masked vocabulary) present
  /// For abs:A,rel:R policies: max over j of |d_j| - R max(|a_j|, |b_j|), and where.
  double max_excess = 0;
  Index max_excess_col = -1;
};

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
