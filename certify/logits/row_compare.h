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

/// The element-wise part of a comparison policy: which elements of a row pair break it, counted
/// in RowComparison::violations. kNone counts nothing; `rel` also weighs max_excess.
struct ElementTest {
  enum class Kind : std::uint8_t { kNone, kBits, kUlp, kAbs } kind = Kind::kNone;
  std::uint64_t ulp = 0;  ///< kUlp: more than this many ulps apart breaks it
  double abs = 0;         ///< kAbs: |d| - rel max(|a|, |b|) above this breaks it
  double rel = 0;
};

/// Compares two rows. `token` is A's emitted token (or -1).
RowComparison compare_rows(const float* a, const float* b, Index vocab, std::int32_t token, const ElementTest& test,
                           CompareScratch& scratch);
/// The same with no element test: `rel` weighs max_excess only.
inline RowComparison compare_rows(const float* a, const float* b, Index vocab, std::int32_t token, double rel,
                                  CompareScratch& scratch) {
  ElementTest t;
  t.rel = rel;
  return compare_rows(a, b, vocab, token, t, scratch);
}

/// phi(x) = expm1(x) - x >= 0, accurate to a few ulps for every x (series near 0).
double phi(double x);
/// psi(t) = ((1+t) log(1+t) + (1-t) log(1-t)) / 2 >= 0 for |t| < 1.
double psi(double t);

}  // namespace ncert::certify
