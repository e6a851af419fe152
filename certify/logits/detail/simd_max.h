// This header defines the repair of an `omp simd reduction(max : m)` over floats whose values may
// all be -inf (a masked logits row, or a masked chunk of one).
#pragma once

#include <limits>

#include "reference/dtype.h"

namespace ncert::certify::detail {

/// OpenMP starts each private copy of a max reduction at the type's "least representable
/// value": GCC 12 takes -inf, clang 14 takes lowest() = -FLT_MAX. Over values that are all -inf
/// clang's result is then -FLT_MAX, a value the data does not hold (found by the clang build:
/// a row masked but for one token got a finite margin of 3.4e38 instead of an infinite one).
/// Returns `m`, or -inf when `m` is lowest() and no value of v[0..n) below `bound` equals it.
/// The scan runs only in that case.
inline float simd_max_result(float m, const float* v, Index n, float bound = std::numeric_limits<float>::infinity()) {
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  if (m != kLowest) return m;
  if (kLowest < bound) {
    for (Index i = 0; i < n; ++i) {
      if (v[i] == kLowest) return m;
    }
  }
  return -std::numeric_limits<float>::infinity();
}

}  // namespace ncert::certify::detail
