// This header defines the packing model of an engine's verify step: R request slots of B rows
// each (M = R*B original rows); for each request the first c_r <= cap committable rows are
// gathered into P physical slots, the unchanged linear kernel runs on the compact buffer, and
// the results are scattered back through the epilogue. PackPlan describes one call (geometry,
// selector, strides and valid widths, formats, epilogue, K walk); HostBuffers are the caller's
// memory for it. Nothing here owns data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/linear_spec.h"

namespace ncert::packing {

inline constexpr Index kMaxRequests = 8;  ///< R <= 8 request slots
inline constexpr Index kMaxCap = 4;       ///< at most 4 rows gathered per request
/// Every buffer base must be aligned to 16 bytes: the engine's kernels issue 128-bit loads.
inline constexpr std::size_t kBufferAlignment = 16;

/// Shape facts of one weight segment, as found in the dump (dataset extents), so the guards
/// can check them before anything is decoded.
struct SegmentGeometry {
  std::string name;
  reference::WeightFormat format = reference::WeightFormat::kBf16;
  Index row_begin = 0;
  Index row_end = 0;
  reference::Af4Layout af4;  ///< AF4 only
  Index values_cols = 0;     ///< bf16/f32: columns of `values` (must be K)
  Index codes_cols = 0;      ///< AF4: columns of `codes` (K/8 u32 or K/2 u8)
  Index scales_cols = 0;     ///< AF4: columns of `scales` (K/group_size)
  Index biases_cols = 0;     ///< AF4 affine: columns of `biases` (same as scales)
  /// int8 / e4m3 / e5m2: the scale grid (group_size, scale_rows, dequant) and the rows of
  /// `scales` (ceil(rows / scale_rows)); its columns are scales_cols.
  reference::ScaledView scaled;
  Index scales_rows = 0;
};

/// One packed call: the projection's arithmetic and layout (reference/linear_spec.h) plus the
/// slot geometry, the compact buffers' strides and the segment shapes the host guards judge.
struct PackPlan : reference::ProjectionArithmetic, reference::ProjectionLayout {
  Index requests = 1;    ///< R
  Index block_rows = 1;  ///< B
  Index cap = 1;         ///< most rows gathered per request
  /// False when the dump declares no request geometry (requests, block_rows, cap): then R = 1,
  /// B = M and only the slot-level rules apply (rows in range, no duplicates, slots suffice).
  bool request_rules = true;
  /// The packing helper's own calls take R <= kMaxRequests; an engine's plan read from a dump
  /// is bounded by the format's shape limit alone (a decode batch of 16 requests of one row each
  /// is a plan the format allows, and failed `geometry` while this limit applied to dumps).
  bool helper_limits = true;
  Index slots = 0;                          ///< P physical slots (= selector.size())
  std::vector<std::int32_t> commit_counts;  ///< [R] rows committed per request
  std::vector<std::int32_t> selector;       ///< [P] slot -> original row, -1 empty

  Index residual_stride = 0;
  Index compact_in_stride = 0;   ///< scratch rows of gathered activations
  Index compact_out_stride = 0;  ///< scratch rows of f32 accumulators

  DType bias_dtype = DType::kF32;
  DType residual_dtype = DType::kF32;
  std::vector<SegmentGeometry> segments;  ///< (an undeclared walk: the helper's kernel uses seq-fma)

  Index rows() const { return requests * block_rows; }
};

/// The caller's buffers for one call, with their extents in bytes. out == residual (same base
/// and stride) is in-place residual addition, which is supported; any other overlap is not.
struct HostBuffers {
  const void* x = nullptr;
  std::size_t x_bytes = 0;
  void* out = nullptr;
  std::size_t out_bytes = 0;
  const void* residual = nullptr;  ///< when the epilogue has a residual
  std::size_t residual_bytes = 0;
  const void* bias = nullptr;  ///< when the epilogue has a bias
  std::size_t bias_bytes = 0;
  void* compact_in = nullptr;  ///< scratch, P x compact_in_stride of x_dtype
  std::size_t compact_in_bytes = 0;
  float* compact_out = nullptr;  ///< scratch, P x compact_out_stride f32
  std::size_t compact_out_bytes = 0;
};

/// Bytes a row-major buffer of `rows` rows needs: (rows - 1) * stride + width elements.
std::size_t extent_bytes(Index rows, Index stride, Index width, DType t);

/// The selector of the canonical plan for commit counts: request r's first c_r rows fill the
/// next slots in request order, the remaining slots are -1.
std::vector<std::int32_t> canonical_selector(Index block_rows, const std::vector<std::int32_t>& commits, Index slots);

}  // namespace ncert::packing
