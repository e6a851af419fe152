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
/// Where the bias enters the sum (docs/dump-format.md §3.3): added to the accumulation's result
/// (`end`, the default), or held by the output before the kernel accumulates into it (`start`:
/// a GEMM with beta = 1 on an output pre-filled with the bias, as ONNX Runtime's Gemm runs MLAS,
/// which adds each K block's sum to it).
enum class BiasAt : std::uint8_t { kEnd, kStart };
Result<Epilogue> parse_epilogue(std::string_view s);
Result<ResidualAt> parse_residual_at(std::string_view s);
Result<BiasAt> parse_bias_at(std::string_view s);
std::string_view epilogue_name(Epilogue e);
std::string_view residual_at_name(ResidualAt r);
std::string_view bias_at_name(BiasAt b);
inline bool has_bias(Epilogue e) { return e == Epilogue::kBias || e == Epilogue::kBiasResidual; }
inline bool has_residual(Epilogue e) { return e == Epilogue::kResidual || e == Epilogue::kBiasResidual; }
/// "f32", "bf16" or "f16".
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

/// How a walk combines several f32 values v[0..n) into one (docs/dump-format.md §3.4):
///   seq      t = v[0]; t = fl32(t + v[i]) for i = 1..n-1
///   halving  while width > 1: width /= 2; v[i] = fl32(v[i] + v[i + width]) for i < width (n a
///            power of two: the horizontal sum of SIMD code)
///   pairs    level by level v[i] = fl32(v[2i] + v[2i + 1]) (n a power of two)
///   butterfly(d1,...,dm)  for each distance d in the order given: v[i] = fl32(v[i] + v[i + d]) for
///            every i whose bit d is clear (n a power of two, the distances the powers of two
///            below n, each once): the horizontal sums SIMD code writes as shuffles, e.g. the
///            AVX2 "fold the upper 128 bits, then hadd twice" over 8 lanes is butterfly(4,1,2);
///            halving is butterfly(n/2,...,1) and pairs butterfly(1,...,n/2)
///   groups(g,inner,outer)  lanes only: each run of g consecutive values reduced by `inner`, then
///            the n / g results by `outer` (inner and outer seq, halving or pairs; n a multiple of
///            g, at most 65,536): MLAS's FoldAccumulators, the 4 lanes of each 128-bit quarter
///            summed in order, then the quarters halved, is groups(4,seq,halving) over 16 lanes
enum class KWalkTree : std::uint8_t { kSeq, kHalving, kPairs, kButterfly, kGroups };
/// What each part of K is reduced by, starting from 0 (see KWalk).
enum class KWalkInner : std::uint8_t { kSeq, kLanes, kPromote };
/// The rounding of a promoted walk's p-bit accumulator.
enum class PromoteRounding : std::uint8_t { kNearestEven, kTowardZero };

/// The kernel's exact reduction order over K (docs/dump-format.md §3.4 k_walk): K is cut into
/// `parts` equal contiguous parts, each reduced by the inner walk from 0, and the parts' sums
/// are combined by `combine`. The inner walk sees its part as a whole K (term t of the part is
/// its t-th term). Forms and their descriptions:
///   seq, seq-fma                      parts 1, inner kSeq
///   split:<P>[:fma]                   parts P, combine seq, inner kSeq (= splitk:<P>:seq/seq[-fma])
///   lanes:<L>:<tree>[:fma]            inner kLanes: term t goes to lane t mod L, each lane a seq
///                                     walk from 0, the L lanes combined by lane_tree
///   promote:<P>:<p>:<rnd>[:fma]       inner kPromote: blocks of P terms accumulated at p
///                                     significand bits (rounding rnd), each block's sum then
///                                     added to an f32 total: t = b_0; t = fl32(t + b_j)
///   splitk:<S>:<combine>/<inner>      parts S, combine as named, inner any form above but split
///   codes:<C>:<scaling>/<walk>        an integer kernel (x_quant int8 / uint8, integer weight
///                                     codes): the terms the walk sums are not x_k w_k but, per
///                                     C consecutive k, the exact integer sum Q of the code
///                                     products (q_x - zp_x)(q_w - zp_w), converted to f32, and
///                                     scaled as CodeScaling says; <walk> is any form above over
///                                     those K / C terms (its fma fuses the last multiply), or
///                                     `once`: C = K, one sum scaled once and not accumulated
///                                     (an int32 GEMM's output stage: y = d * fl32(Q), a zero
///                                     keeping its sign, where seq's 0 + -0 is +0)
/// How an integer kernel turns a chunk's code sum Q into the f32 term it adds (fl32: one
/// rounding; s_x, s_w the chunk's stored scales as f32; the last multiply is the walk's, fused
/// with its add under :fma):
///   scale-product   d = fl32(s_w * s_x), term d * fl32(Q) (ggml's AVX2 vec_dot, MLAS's and
///                   oneDNN's int8 GEMMs with one combined scale)
///   w-scale-first   fl32(fl32(Q) * s_w) * s_x (ggml's scalar sumi * d_w * d_x)
///   x-scale-first   fl32(fl32(Q) * s_x) * s_w
enum class CodeScaling : std::uint8_t { kScaleProduct, kWScaleFirst, kXScaleFirst };
std::string_view code_scaling_name(CodeScaling s);

struct KWalk {
  bool declared = false;                 ///< false: no k_walk attribute, nothing to emulate
  bool fma = false;                      ///< each inner step one fused multiply-add (else multiply, then add)
  Index parts = 1;                       ///< split:<P> / splitk:<S>; 1 otherwise (guard 314: K % parts == 0)
  KWalkTree combine = KWalkTree::kSeq;   ///< how the parts' sums are combined
  std::vector<Index> combine_distances;  ///< combine = kButterfly: its distances, in order
  KWalkInner inner = KWalkInner::kSeq;
  Index lanes = 1;                               ///< kLanes: L >= 2
  KWalkTree lane_tree = KWalkTree::kSeq;         ///< kLanes: how the lanes are reduced
  std::vector<Index> lane_distances;             ///< lane_tree = kButterfly: its distances, in order
  Index lane_group = 0;                          ///< lane_tree = kGroups: g, the lanes of one group
  KWalkTree lane_group_inner = KWalkTree::kSeq;  ///< kGroups: each group's tree
  KWalkTree lane_group_outer = KWalkTree::kSeq;  ///< kGroups: the tree over the groups' sums
  Index promote_block = 0;                       ///< kPromote: P >= 1 terms per block
  int promote_bits = 24;                         ///< kPromote: p, 8..24, counting the implicit bit
  PromoteRounding promote_rounding = PromoteRounding::kNearestEven;
  /// codes:<C>:...: the K elements summed C at a time in integers before the walk (0: the walk
  /// sums f32 products of x and w); the walk's other fields then describe its K / C terms.
  Index code_chunk = 0;
  CodeScaling code_scaling = CodeScaling::kScaleProduct;
  bool code_once = false;  ///< codes:<C>:<scaling>/once: the one term is the value (C = K)
  std::string name;        ///< as written, for reports

  bool codes() const { return code_chunk > 0; }
  /// The terms the walk sums for a K: K, or K / C for code sums (guard 314: K % C == 0).
  Index terms(Index k) const { return codes() ? k / code_chunk : k; }
  /// Whether K cuts into the walk's terms and those into its parts (guard 314).
  bool divides(Index k) const {
    return parts >= 1 && (!codes() || k % code_chunk == 0) && terms(k) % parts == 0 && (!code_once || terms(k) == 1);
  }

  /// seq, seq-fma, split:<P>[:fma] and their splitk spellings: the forms the blocked fast paths
  /// of reference/k_walk.h compute directly.
  bool plain() const { return inner == KWalkInner::kSeq && combine == KWalkTree::kSeq; }
  /// The unit roundoff of a promoted walk's p-bit accumulator: 2^-p (rne), 2^(1-p) (rz).
  double promote_unit() const;
};
/// Whether a k_walk spelling is one of the forms dump format version 2 added (lanes:, promote:,
/// splitk:, codes:; docs/dump-format.md "Versions"): the reader refuses one in a version 1 file
/// (228), and the writers declare 2 for it.
bool k_walk_is_version_2(std::string_view walk);
/// Guard 314's message where !walk.divides(k): "k_walk <name>: K = <k> is not a multiple of ...".
std::string walk_split_message(const KWalk& walk, Index k);
/// The accepted forms, as the k-walk-invalid message lists them.
inline constexpr std::string_view kKWalkForms =
    "seq, seq-fma, split:<P>, split:<P>:fma (P >= 1), lanes:<L>:<tree>, lanes:<L>:<tree>:fma (L >= 2), "
    "promote:<P>:<p>:<rnd>, promote:<P>:<p>:<rnd>:fma (P >= 1, 8 <= p <= 24, rnd rne or rz), "
    "splitk:<S>:<tree>/<inner> (S >= 1, inner seq, seq-fma, a lanes or a promote form); "
    "tree seq, halving, pairs or butterfly(<d>,...) (all but seq need L or S a power of two; a butterfly's "
    "distances are the powers of two below it, each once, in the order the kernel adds them), or for lanes "
    "groups(<g>,<inner>,<outer>) (g >= 2 dividing L <= 65536, inner and outer seq, halving or pairs); "
    "codes:<C>:<scaling>/<walk> (C >= 1, scaling scale-product, w-scale-first or x-scale-first, walk any form "
    "above, or once for one sum scaled once, C = K) for a kernel that sums integer code products";

/// "seq", "seq-fma", "split:<P>", "split:<P>:fma" (P >= 1), "lanes:<L>:<tree>[:fma]" (L >= 2,
/// tree seq, halving or pairs, the last two with L a power of two), "promote:<P>:<p>:<rnd>[:fma]"
/// (P >= 1, 8 <= p <= 24, rnd rne or rz), "splitk:<S>:<combine>/<inner>" (S >= 1, combine as a
/// tree, halving and pairs with S a power of two, inner seq, seq-fma, a lanes or a promote form).
/// Numbers are decimal digits only (std::from_chars). Anything else: kKWalkInvalid.
Result<KWalk> parse_k_walk(std::string_view s);

// ---- what a projection computes ----------------------------------------------------------------

/// How a projection computes, whatever holds its data: the engine's accumulation, the epilogue
/// and where its residual is added, the output type and the declared K walk. The dump model
/// (certify ProjectionInfo), the packing plan (packing PackPlan) and the reference problem
/// (LinearProblem) are each this description plus what their stage adds: where the members are
/// in the file, the slot geometry the host guards judge, views of the data (docs/design.md
/// "One projection, three views").
// ---- activation quantization -------------------------------------------------------------------

/// What x is quantized to before the products (docs/dump-format.md §3.6): none, int8 or uint8
/// (integer codes, optional zero points), or FP8 (e4m3, e5m2).
enum class XQuantType : std::uint8_t { kNone, kInt8, kUint8, kE4m3, kE5m2 };
/// How x / s is rounded to an integer code: ties to even (`rne`, nearbyint / cvtps2dq) or away
/// from zero (`rna`, C's roundf). FP8 codes are always rounded to nearest even.
enum class XQuantRounding : std::uint8_t { kNearestEven, kNearestAway };
/// "int8", "uint8", "e4m3", "e5m2"; anything else kXQuantUnknown.
Result<XQuantType> parse_x_quant(std::string_view s);
std::string_view x_quant_name(XQuantType t);
/// int8 or uint8: integer codes, with zero points, summed exactly by an integer kernel.
inline bool x_quant_integer(XQuantType t) { return t == XQuantType::kInt8 || t == XQuantType::kUint8; }
/// The element type of x_quantized (and of x_zero_points): i8, u8, e4m3, e5m2.
DType x_quant_storage(XQuantType t);
/// "rne", "rna"; anything else kXQuantUnknown.
Result<XQuantRounding> parse_x_quant_rounding(std::string_view s);
std::string_view x_quant_rounding_name(XQuantRounding r);

/// The declared quantizer of x.
struct XQuantizer {
  XQuantType type = XQuantType::kNone;
  XQuantRounding rounding = XQuantRounding::kNearestEven;
  Index group = 0;  ///< elements of a row sharing one scale along K (K: per token)
};

/// The engine's quantized activations: codes [M, K] (no stride), scales and optional zero points
/// [M, K / group]. value(r, c) = (q - zp) * s exactly (f64 holds every such product).
struct XQuantizedView {
  XQuantType type = XQuantType::kNone;
  Index k = 0;
  Index group = 0;
  const void* values = nullptr;
  DType scale_dtype = DType::kF32;
  const void* scales = nullptr;
  const void* zero_points = nullptr;  ///< null: zero

  double code(Index r, Index c) const;
  double zero_point(Index r, Index g) const;
  double scale(Index r, Index g) const;
  double value(Index r, Index c) const;
};

struct ProjectionArithmetic {
  Accumulator accumulator;
  Epilogue epilogue = Epilogue::kNone;
  ResidualAt residual_at = ResidualAt::kF32;
  BiasAt bias_at = BiasAt::kEnd;
  DType output = DType::kF32;
  OutputRounding output_rounding = OutputRounding::kNearestEven;
  KWalk walk;
  XQuantizer x_quant;  ///< type kNone: x is used as stored

  ProjectionArithmetic& arithmetic() { return *this; }
  const ProjectionArithmetic& arithmetic() const { return *this; }
};

/// The bias is a term of the accumulation (a bias with bias_at = start): the bound charges it as
/// one more term, in any order (docs/error-bounds.md §2), and the walk's emulation adds it where
/// the kernel does (k_walk.h); the epilogue then adds it no more.
inline bool bias_in_sum(const ProjectionArithmetic& a) { return has_bias(a.epilogue) && a.bias_at == BiasAt::kStart; }

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

/// Whether rows of x hold K values and rows of every output N (guard 306,
/// kGuardStrideBelowWidth). A dump may declare narrower strides, its datasets stored that
/// narrow (geometry then fails); nothing may read K or N values from such rows.
Status rows_hold_widths(const ProjectionLayout& l);

// ---- operand views --------------------------------------------------------------------------

/// A row-major matrix of f32, bf16 or f16 values with a row stride (in elements).
struct MatrixView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  Index rows = 0;
  Index cols = 0;    ///< valid columns
  Index stride = 0;  ///< elements between rows, >= cols

  float at(Index r, Index c) const {
    const Index i = r * stride + c;
    return dtype == DType::kF32 ? static_cast<const float*>(data)[i]
                                : value_of_bits(static_cast<const std::uint16_t*>(data)[i], dtype);
  }
  bool empty() const { return data == nullptr; }
};

/// A vector of f32, bf16 or f16 values (the bias).
struct VectorView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  Index size = 0;
  float at(Index i) const {
    return dtype == DType::kF32 ? static_cast<const float*>(data)[i]
                                : value_of_bits(static_cast<const std::uint16_t*>(data)[i], dtype);
  }
  bool empty() const { return data == nullptr; }
};

enum class WeightFormat : std::uint8_t { kAf4, kBf16, kF32, kF16, kInt8, kE4m3, kE5m2 };
/// The element type of a segment's `values` (bf16, f32, f16, i8, e4m3, e5m2; AF4 has none: kU8).
DType weight_values_dtype(WeightFormat f);
/// int8, e4m3, e5m2: codes times a scale per block (docs/dump-format.md §4.6).
inline bool is_scaled_format(WeightFormat f) {
  return f == WeightFormat::kInt8 || f == WeightFormat::kE4m3 || f == WeightFormat::kE5m2;
}

/// A scaled segment: codes q [rows, k] (i8, e4m3 or e5m2) and scales [ceil(rows / scale_rows),
/// k / group_size] (f32, f16 or bf16); w = q * s with s = scales[r / scale_rows, c / group_size].
/// Per tensor is group_size = k with scale_rows >= rows, per output channel group_size = k.
struct ScaledView {
  DType values_dtype = DType::kI8;
  const void* values = nullptr;
  DType scale_dtype = DType::kF32;
  const void* scales = nullptr;
  Index rows = 0, k = 0, group_size = 0, scale_rows = 1;
  Dequant dequant = Dequant::kExact;  ///< exact, f32, output or folded (as for AF4, §4.3)

  double code(Index r, Index c) const;
  float scale(Index r, Index c) const;
};

/// Decodes row `row` of a scaled segment: exact values (q * s, exact in f64; for f32 / output
/// dequantization the kernel's fl32(q * s), rounded to the activation type for output), their
/// charged magnitudes, and the kernel's f32 weights (fl32(q * s) where the dequantization is
/// exact or folded: only the walk emulation's operand). Any pointer may be null.
void scaled_decode_row(const ScaledView& v, Index row, DType activation, double* exact, double* alg, float* kernel);
Result<WeightFormat> parse_weight_format(std::string_view s);
std::string_view weight_format_name(WeightFormat f);

/// One segment of W covering output columns [row_begin, row_end).
struct WeightSegment {
  std::string name;
  WeightFormat format = WeightFormat::kBf16;
  Index row_begin = 0;
  Index row_end = 0;
  const void* values = nullptr;  ///< bf16 / f16 (raw u16) or f32, [rows, k] row-major (unscaled formats)
  Af4View af4;                   ///< AF4 only
  ScaledView scaled;             ///< int8, e4m3, e5m2 only
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
  /// With x_quant declared: the engine's quantized activations, which the products use in place
  /// of x (x itself is what the quantize check holds them to).
  XQuantizedView x_quantized;
  const Weights* weights = nullptr;
  VectorView bias;                 ///< [n] when the epilogue has a bias
  MatrixView residual;             ///< [M, n] when the epilogue has a residual
  double lambda = kDefaultLambda;  ///< probabilistic tier multiplier (docs/error-bounds.md §3)
};

/// Checks that the views are consistent (shapes, dtypes, epilogue operands present).
Status validate_problem(const LinearProblem& p);

}  // namespace ncert::reference
