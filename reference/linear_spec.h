// This header defines how a projection Y = X*W^T (+ epilogue) is described to the reference:
// the accumulator model (unit roundoff u_eff), the epilogue and where the residual is added,
// the output type, the kernel's declared K walk, and non-owning views of X, the segmented
// weights W, the bias and the residual. Nothing here touches HDF5: certify/ builds these views
// from a dump, packing/ and tests build them from plain buffers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reference/af4.h"
#include "reference/dtype.h"
#include "reference/float_bits.h"
#include "reference/status.h"

namespace ncert::reference {

// ---- accumulator --------------------------------------------------------------------------

enum class AccumulatorKind : std::uint8_t { kF32Rn, kF32Rz, kMatrixUnit, kExplicit };

/// The error model of the engine's accumulation (docs/error-bounds.md §2).
struct Accumulator {
  AccumulatorKind kind = AccumulatorKind::kF32Rn;
  /// Unit roundoff used in gamma_K(u_eff): 2^-24 (f32-rn), 2^-23 (f32-rz: one full ulp per
  /// directed rounding), 2^-22 (matrix-unit: covers 2(1+1/b) 2^-23 for any block size b), or
  /// the explicit u=<x>.
  double u_eff = 0x1p-24;
  /// True only for verified round-to-nearest (f32-rn, or u=<x> with x <= 2^-24): the
  /// probabilistic tier lambda*sqrt(K)*u*S is meaningful only then (docs/error-bounds.md §3); other units get T = B/2.
  bool round_to_nearest = true;
  std::string name = "f32-rn";
};
/// "f32-rn", "f32-rz", "matrix-unit", "u=<float>" (0 < u < 1/2).
Result<Accumulator> parse_accumulator(std::string_view s);

// ---- epilogue and output -------------------------------------------------------------------

enum class Epilogue : std::uint8_t { kNone, kBias, kResidual, kBiasResidual };
enum class ResidualAt : std::uint8_t { kF32, kOutput };
Result<Epilogue> parse_epilogue(std::string_view s);
Result<ResidualAt> parse_residual_at(std::string_view s);
std::string_view epilogue_name(Epilogue e);
std::string_view residual_at_name(ResidualAt r);
inline bool has_bias(Epilogue e) { return e == Epilogue::kBias || e == Epilogue::kBiasResidual; }
inline bool has_residual(Epilogue e) { return e == Epilogue::kResidual || e == Epilogue::kBiasResidual; }
/// "f32" or "bf16".
Result<DType> parse_output_dtype(std::string_view s);

/// How a bf16 output is rounded from the f32 value after the epilogue (docs/dump-format.md §8):
/// to nearest even (the default), toward zero, or by a rule the engine does not pin down. The
/// accepted interval of a stored value is rounded the same way (a monotone rounding maps an
/// interval of f32 values onto the interval of its results); only kAny widens it outward.
enum class OutputRounding : std::uint8_t { kNearestEven, kTowardZero, kAny };
/// "rne", "rz", "any".
Result<OutputRounding> parse_output_rounding(std::string_view s);
std::string_view output_rounding_name(OutputRounding r);

// ---- K walk ---------------------------------------------------------------------------------

/// The kernel's exact reduction order over K (docs/dump-format.md §3 k_walk).
struct KWalk {
  bool declared = false;  ///< false: no k_walk attribute, nothing to emulate
  bool fma = false;       ///< each step one fused multiply-add (else multiply, then add)
  Index parts = 1;        ///< split:<P>; 1 for seq / seq-fma
  std::string name;       ///< as written, for reports
};
/// "seq", "seq-fma", "split:<P>", "split:<P>:fma" with P >= 1.
Result<KWalk> parse_k_walk(std::string_view s);

// ---- what a projection computes ----------------------------------------------------------------

/// How a projection computes, whatever holds its data: the engine's accumulation, the epilogue
/// and where its residual is added, the output type and the declared K walk. The dump model
/// (certify ProjectionInfo), the packing plan (packing PackPlan) and the reference problem
/// (LinearProblem) are each this description plus what their stage adds: where the members are
/// in the file, the slot geometry the host guards judge, views of the data (docs/design.md
/// "One projection, three views").
struct ProjectionArithmetic {
  Accumulator accumulator;
  Epilogue epilogue = Epilogue::kNone;
  ResidualAt residual_at = ResidualAt::kF32;
  DType output = DType::kF32;
  OutputRounding output_rounding = OutputRounding::kNearestEven;
  KWalk walk;

  ProjectionArithmetic& arithmetic() { return *this; }
  const ProjectionArithmetic& arithmetic() const { return *this; }
};

/// The valid widths and row strides of a projection's buffers and its activation type, shared by
/// the dump model and the packing plan.
struct ProjectionLayout {
  Index k = 0;           ///< valid input columns (K)
  Index n = 0;           ///< valid output columns (N)
  Index in_stride = 0;   ///< elements between rows of x (>= k)
  Index out_stride = 0;  ///< elements between rows of every output (>= n)
  DType x_dtype = DType::kBf16;

  ProjectionLayout& layout() { return *this; }
  const ProjectionLayout& layout() const { return *this; }
};

// ---- operand views --------------------------------------------------------------------------

/// A row-major matrix of f32 or bf16 values with a row stride (in elements).
struct MatrixView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  Index rows = 0;
  Index cols = 0;    ///< valid columns
  Index stride = 0;  ///< elements between rows, >= cols

  float at(Index r, Index c) const {
    const Index i = r * stride + c;
    return dtype == DType::kF32 ? static_cast<const float*>(data)[i]
                                : bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
  }
  bool empty() const { return data == nullptr; }
};

/// A vector of f32 or bf16 values (the bias).
struct VectorView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  Index size = 0;
  float at(Index i) const {
    return dtype == DType::kF32 ? static_cast<const float*>(data)[i]
                                : bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
  }
  bool empty() const { return data == nullptr; }
};

enum class WeightFormat : std::uint8_t { kAf4, kBf16, kF32 };
Result<WeightFormat> parse_weight_format(std::string_view s);
std::string_view weight_format_name(WeightFormat f);

/// One segment of W covering output columns [row_begin, row_end).
struct WeightSegment {
  std::string name;
  WeightFormat format = WeightFormat::kBf16;
  Index row_begin = 0;
  Index row_end = 0;
  const void* values = nullptr;  ///< bf16 (raw u16) or f32, [rows, k] row-major (non-AF4)
  Af4View af4;                   ///< AF4 only
};

/// W in segments that tile [0, n) (sorted by row_begin; the packing guards check the tiling).
struct Weights {
  Index n = 0;
  Index k = 0;
  std::vector<WeightSegment> segments;
};

/// The segment that holds weight row j (asserts the tiling).
const WeightSegment& segment_of(const Weights& w, Index j);

/// Decodes weight row j (af4_decode_row's outputs for AF4 segments; bf16/f32 weights are
/// their own exact, kernel and charged values with no spread). Any output pointer may be null.
void decode_weight_row(const Weights& w, Index j, DType activation, double* exact, double* alg, float* kernel,
                       double* spread = nullptr);

/// The probabilistic tier multiplier λ when none is given (docs/error-bounds.md §3): the one
/// default of every --lambda, manifest "lambda" and options struct.
inline constexpr double kDefaultLambda = 10.0;

/// Everything the reference needs for one projection: its arithmetic and views of its data.
struct LinearProblem : ProjectionArithmetic {
  MatrixView x;  ///< [M, k] activations (original layout)
  const Weights* weights = nullptr;
  VectorView bias;                 ///< [n] when the epilogue has a bias
  MatrixView residual;             ///< [M, n] when the epilogue has a residual
  double lambda = kDefaultLambda;  ///< probabilistic tier multiplier (docs/error-bounds.md §3)
};

/// Checks that the views are consistent (shapes, dtypes, epilogue operands present).
Status validate_problem(const LinearProblem& p);

}  // namespace ncert::reference
