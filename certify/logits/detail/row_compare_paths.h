// Internal to the row comparison: what its fast path (row_compare.cc) and its careful path
// (row_compare_careful.cc) share.
#pragma once

#include <cstdint>
#include <limits>

#include "certify/logits/row_compare.h"

namespace ncert::certify::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr float kPosInfF = std::numeric_limits<float>::infinity();

/// |r| <= 0.02: tanh(r/2) = r/2 - r^3/24 + r^5/240, the next term below 1e-17 relative.
/// T is double or a vector of doubles (row_compare.cc's lanes).
template <typename T>
inline T tanh_half_small(T rr) {
  const T r2 = rr * rr;
  return rr * (0.5 + r2 * (-1.0 / 24 + r2 * (1.0 / 240)));
}

/// Every statistic of a row pair that holds NaN, +-Inf or -Inf (masked vocabulary), given the
/// rows' maxima; argmax, rank and top-k are the caller's.
void careful_path(const float* a, const float* b, Index V, std::int32_t token, const ElementTest& test, float ma,
                  float mb, RowComparison& r);

}  // namespace ncert::certify::detail
