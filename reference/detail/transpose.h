// Internal: rows of floats stored as columns, for the walk's weights (reference/linear.cc keeps
// them in panels of K x 16 consecutive floats, so that one k step of walk_rows_block reads 16
// columns' weights at once and its k steps read the panel in order).
#pragma once

#include <algorithm>

#include "reference/dtype.h"

namespace ncert::reference::detail {

/// Up to this many rows are transposed in one call.
inline constexpr Index kTransposeRows = 16;

/// n rows of k floats in the walk's panels (walk_rows_block's layout, reference/linear.cc):
/// the rows from p0 = 16 q on are a panel of k x min(16, n - p0) floats at data + p0 k, its row
/// j's element c at data[p0 k + c min(16, n - p0) + j - p0].
struct F32Panels {
  const float* data = nullptr;
  Index n = 0, k = 0;
  /// Row j's first element; its element c is c * step(j) further on.
  const float* row(Index j) const { return data + (j - j % kTransposeRows) * k + j % kTransposeRows; }
  /// The width of row j's panel: 16, or the narrower last panel's.
  Index step(Index j) const { return std::min(kTransposeRows, n - (j - j % kTransposeRows)); }
};

/// dst[c * dst_stride + r] = src[r * k + c] for r < rows (1 <= rows <= kTransposeRows) and
/// c < k; no other element of dst is written. A pure copy: the same bits on every path. With
/// AVX-512 and 16 rows, 16 x 16 tiles are transposed in registers: a float-at-a-time copy was
/// ~4 % of a 4-bit check's CPU (M 32, K 5120, N 16480); with AVX alone, two 8 x 8 tiles a step
/// (the float-at-a-time copy was 11.5 % of that check's CPU on an AVX2 AMD EPYC, Zen 3).
void transpose_rows(const float* src, Index rows, Index k, float* dst, Index dst_stride);

}  // namespace ncert::reference::detail
