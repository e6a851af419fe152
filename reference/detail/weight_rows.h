// Internal: decodes weight rows straight into the arrays the reference's GEMMs read — the f64
// weight y* multiplies by, and the charged magnitude rounded up to f32 for the f32 S GEMM
// (docs/error-bounds.md §1) — with the facts the summary needs, in one pass per row.
//
// The values are decode_weight_row's, bit for bit (tests/unit/reference/weight_rows_test.cc):
// bf16 and f32 rows are converted directly; an AF4 group of >= 16 codes is decoded through a
// 16-entry table of af4_decode_row's per-code values for the group's scale and bias, so each
// code of a 64-wide group costs a table look-up instead of a decode; other AF4 groups call
// af4_decode_row per row.
#pragma once

#include <vector>

#include "reference/linear_spec.h"

namespace ncert::reference::detail {

/// Where one decoded row of K weights goes. `spread` and `kernel` may be null; `exact` too where
/// segment_exact_is_kernel holds and `kernel` is not null (the kernel weights then stand for it).
struct WeightRowOut {
  double* exact = nullptr;  ///< decode_weight_row's `exact`
  /// f32_magnitude(RU32(alg)): >= alg, never a nonzero subnormal. May be null where
  /// segment_magnitudes_are_kernels holds and `kernel` is not null.
  float* magnitude = nullptr;
  double* spread = nullptr;  ///< decode_weight_row's `spread`
  float* kernel = nullptr;   ///< decode_weight_row's `kernel`
};

/// What one row holds.
struct WeightRowFacts {
  /// Sum of `alg` over the finite weights in f64, in no fixed order: a caller that needs an
  /// upper bound inflates it (reference::inflate_s covers any order of K non-negative terms).
  double l1 = 0;
  Index nonfinite = 0;         ///< weights whose exact value is inf or NaN
  Index first_nonfinite = -1;  ///< column of the first of them
  Index ambiguous = 0;         ///< weights with a nonzero spread (two allowed kernel values)
  bool all_zero = true;        ///< every exact value is +-0
  /// Every weight is finite and its exact value is its kernel weight widened, bit for bit (set
  /// only where `kernel` was asked for; false where the decoder does not tell). y* may then take
  /// its f64 weights from the walk's f32 ones (reference/linear.cc).
  bool kernel_is_exact = false;
};

/// True when the decoder gives every row of the segment exact values that are its kernel
/// weights widened, bit for bit, whatever the values (NaN and infinities included): f32, bf16
/// and f16 rows, and 4-bit zero points dequantized in f32 under sub-mul (decoded straight from
/// the codes with AVX-512 or AVX2). Its rows may then be decoded with no `exact` (WeightRowOut).
bool segment_exact_is_kernel(const WeightSegment& segment, DType activation);

/// True when the decoder gives every row of the segment magnitudes that are f32_magnitude of its
/// kernel weights and may be told to store none (WeightRowOut): 4-bit zero points dequantized
/// in f32 under sub-mul (segment_exact_is_kernel's 4-bit rows), decoded straight from the codes.
bool segment_magnitudes_are_kernels(const WeightSegment& segment, DType activation);

/// True when some weight of the segment can have two allowed kernel values (AF4 f32/output
/// dequantization with dequant_op = either); elsewhere the spread is 0 by construction.
bool segment_may_spread(const WeightSegment& segment);

/// Decodes weight rows one at a time; holds the scratch of the per-row AF4 path.
class WeightRowDecoder {
 public:
  WeightRowDecoder(const Weights& weights, DType activation) : weights_(weights), activation_(activation) {}
  WeightRowFacts decode(Index j, const WeightRowOut& out);

 private:
  WeightRowFacts decode_af4_groups(const Af4View& v, Index row, const WeightRowOut& out);
  WeightRowFacts decode_af4_direct(const Af4View& v, Index row, const WeightRowOut& out);

  const Weights& weights_;
  DType activation_;
  std::vector<double> alg_, spread_;
  std::vector<float> widened_;  ///< an f16 row as f32 values
  WeightRowFacts decode_scaled(const ScaledView& v, Index row, const WeightRowOut& out);
};

}  // namespace ncert::reference::detail
