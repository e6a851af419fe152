// The reference's row decoder (reference/detail/weight_rows.h) gives decode_weight_row's
// values bit for bit — for bf16 and f32 rows and for every AF4 variant, packing, group size
// (the per-row path below 16, the 16-code table path from 16 up, with its scalar and its vector
// look-up), scale type, dequantization, operation order and activation type — and the f32
// magnitudes the S GEMM reads are the charged magnitudes rounded up (never below them, never a
// nonzero subnormal). Special values (NaN, inf, subnormals, zeros, f32 scales that overflow)
// keep their facts.
#include "reference/detail/weight_rows.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "reference/bounds.h"
#include "reference/float_bits.h"
#include "tests/common/linear_fixture.h"

namespace ncert::reference {
namespace {

using ncert::testing::af4_segment;
using ncert::testing::make_problem;
using ncert::testing::OwnedProblem;
using ncert::testing::ProblemOptions;
using ncert::testing::SegmentSpec;

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }
bool same_bits(float a, float b) { return f32_bits(a) == f32_bits(b); }

/// Rows compare_all_rows also decoded with no exact values (segment_exact_is_kernel), and with
/// no magnitudes either (segment_magnitudes_are_kernels).
Index exact_is_kernel_rows = 0;
Index magnitudes_are_kernel_rows = 0;

/// A row decoded with fewer outputs tells the same facts, l1 bit for bit.
void expect_same_facts(const detail::WeightRowFacts& got, const detail::WeightRowFacts& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.nonfinite, want.nonfinite);
  EXPECT_EQ(got.first_nonfinite, want.first_nonfinite);
  EXPECT_EQ(got.all_zero, want.all_zero);
  EXPECT_EQ(got.kernel_is_exact, want.kernel_is_exact);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(got.l1), std::bit_cast<std::uint64_t>(want.l1));
}

/// l1 of a row's finite |kernel weights| summed column c into lane c mod 16 (lanes permuted by
/// `lane_of`), each lane in column order, then the lanes pairwise (8, 4, 2, 1 apart).
double l1_in_lanes(const std::vector<float>& kernel, int (*lane_of)(int)) {
  double lanes[16] = {};
  for (std::size_t c = 0; c < kernel.size(); ++c) {
    if (std::isfinite(kernel[c])) lanes[lane_of(static_cast<int>(c % 16))] += std::fabs(static_cast<double>(kernel[c]));
  }
  for (int w = 8; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  }
  return lanes[0];
}

/// Decodes every row both ways and compares (stops at the first mismatch).
void compare_all_rows(const OwnedProblem& p, const std::string& what) {
  const Weights& W = p.weights;
  const Index K = W.k;
  const DType act = p.problem.x.dtype;
  detail::WeightRowDecoder decoder(W, act);
  std::vector<double> exact(K), alg(K), spread(K), f_exact(K), f_spread(K);
  std::vector<float> kernel(K), f_kernel(K), f_mag(K);
  for (Index j = 0; j < W.n; ++j) {
    decode_weight_row(W, j, act, exact.data(), alg.data(), kernel.data(), spread.data());
    const detail::WeightRowOut out{f_exact.data(), f_mag.data(), f_spread.data(), f_kernel.data()};
    const detail::WeightRowFacts facts = decoder.decode(j, out);
    double l1 = 0;
    Index nonfinite = 0, first = -1, ambiguous = 0;
    bool all_zero = true;
    for (Index c = 0; c < K; ++c) {
      SCOPED_TRACE(what + " row " + std::to_string(j) + " col " + std::to_string(c));
      ASSERT_TRUE(same_bits(f_exact[c], exact[c]) || (std::isnan(f_exact[c]) && std::isnan(exact[c])));
      ASSERT_TRUE(same_bits(f_kernel[c], kernel[c]) || (std::isnan(f_kernel[c]) && std::isnan(kernel[c])));
      ASSERT_TRUE(same_bits(f_spread[c], spread[c]));
      const float want = f32_magnitude(f64_to_f32_up(alg[c]));
      ASSERT_TRUE(same_bits(f_mag[c], want) || (std::isnan(f_mag[c]) && std::isnan(want)));
      if (!std::isnan(alg[c])) {
        ASSERT_GE(static_cast<double>(f_mag[c]), alg[c]);
        ASSERT_FALSE(f_mag[c] > 0 && f_mag[c] < FLT_MIN);
      }
      if (!std::isfinite(exact[c])) {
        if (nonfinite++ == 0) first = c;
      } else {
        l1 += alg[c];
      }
      ambiguous += spread[c] != 0;
      if (exact[c] != 0.0) all_zero = false;
    }
    EXPECT_EQ(facts.nonfinite, nonfinite) << what << " row " << j;
    EXPECT_EQ(facts.first_nonfinite, first) << what << " row " << j;
    EXPECT_EQ(facts.ambiguous, ambiguous) << what << " row " << j;
    EXPECT_EQ(facts.all_zero, all_zero) << what << " row " << j;
    const WeightSegment& seg = W.segments[static_cast<std::size_t>(
        std::find_if(W.segments.begin(), W.segments.end(), [&](const WeightSegment& g) { return j < g.row_end; }) -
        W.segments.begin())];
    if (detail::segment_exact_is_kernel(seg, act)) {
      // The walk's weights then stand for the exact ones, which are not stored: the exact
      // values are the kernel weights widened, NaN and infinities included, and a row decoded
      // without them gives the same kernel weights, magnitudes and facts.
      std::vector<float> g_kernel(K, -1.0f), g_mag(K, -1.0f);
      std::vector<double> g_spread(K, -1.0);
      const detail::WeightRowFacts g = decoder.decode(j, {nullptr, g_mag.data(), g_spread.data(), g_kernel.data()});
      for (Index c = 0; c < K; ++c) {
        ASSERT_TRUE(same_bits(f_exact[c], static_cast<double>(f_kernel[c]))) << what << " row " << j << " col " << c;
        ASSERT_TRUE(same_bits(g_kernel[c], f_kernel[c]) && same_bits(g_mag[c], f_mag[c]) &&
                    same_bits(g_spread[c], f_spread[c]))
            << what << " row " << j << " col " << c;
      }
      expect_same_facts(g, facts, what + " row " + std::to_string(j) + ", no exact values");
      ++exact_is_kernel_rows;
    }
    if (detail::segment_magnitudes_are_kernels(seg, act)) {
      // S then packs the magnitudes from the walk's weights (gemm_abt_magnitudes), which are
      // not stored: every magnitude is f32_magnitude of its kernel weight, and a row decoded
      // with neither exact values nor magnitudes gives the same kernel weights and facts.
      ASSERT_TRUE(detail::segment_exact_is_kernel(seg, act));
      std::vector<float> h_kernel(K, -1.0f);
      const detail::WeightRowFacts h = decoder.decode(j, {nullptr, nullptr, nullptr, h_kernel.data()});
      for (Index c = 0; c < K; ++c) {
        ASSERT_TRUE(same_bits(f_mag[c], f32_magnitude(f_kernel[c])) && same_bits(h_kernel[c], f_kernel[c]))
            << what << " row " << j << " col " << c;
      }
      expect_same_facts(h, facts, what + " row " + std::to_string(j) + ", no exact values or magnitudes");
      // Straight from the codes (decode_sub_mul_vector, AVX-512 or AVX2 alike), l1 is summed in
      // one documented order, the same bits on both: column c in lane c mod 16, each lane in
      // column order, then the lanes pairwise (8, 4, 2, 1 apart). Non-finite weights add 0.
      const double documented = l1_in_lanes(f_kernel, [](int l) { return l; });
      EXPECT_TRUE(same_bits(facts.l1, documented)) << what << " row " << j << ": l1 " << facts.l1 << ", " << documented;
      ++magnitudes_are_kernel_rows;
    }
    if (facts.kernel_is_exact) {
      // y* then takes its weights from the walk's (reference/linear.cc): bit for bit the same.
      for (Index c = 0; c < K; ++c) {
        ASSERT_TRUE(same_bits(exact[c], static_cast<double>(kernel[c])) && std::isfinite(exact[c]))
            << what << " row " << j << " col " << c;
      }
    }
    // l1 is summed in another order: equal up to f64 rounding of K non-negative terms.
    EXPECT_NEAR(facts.l1, l1, 2.0 * static_cast<double>(K) * 0x1p-53 * l1) << what << " row " << j;
  }
}

TEST(WeightRows, DenseRowsMatchTheDecoderIncludingSpecialValues) {
  const Index before = exact_is_kernel_rows;
  for (const WeightFormat f : {WeightFormat::kBf16, WeightFormat::kF32}) {
    for (const DType act : {DType::kBf16, DType::kF32}) {
      ProblemOptions o;
      o.k = 80;  // not a multiple of the vector width: the loop's tail is exercised
      o.x_dtype = act;
      o.segments = {{f, 6, {}}};
      auto p = make_problem(o);
      // Row 1: NaN, +-inf, +-0, subnormals, the largest finite; row 2: all zero.
      const std::vector<float> specials = {NAN,    INFINITY, -INFINITY, 0.0f,    -0.0f,
                                           1e-39f, -1e-40f,  FLT_MIN,   FLT_MAX, -FLT_MAX};
      for (std::size_t i = 0; i < specials.size(); ++i) {
        const Index at = 1 * o.k + 3 + static_cast<Index>(i) * 7;
        if (f == WeightFormat::kBf16) {
          p->u16_store[0][at] = f32_to_bf16(specials[i]);
        } else {
          p->f32_store[0][at] = specials[i];
        }
      }
      for (Index c = 0; c < o.k; ++c) {
        if (f == WeightFormat::kBf16) {
          p->u16_store[0][2 * o.k + c] = static_cast<std::uint16_t>(c % 2 ? 0x8000 : 0);
        } else {
          p->f32_store[0][2 * o.k + c] = c % 2 ? -0.0f : 0.0f;
        }
      }
      compare_all_rows(*p, std::string(weight_format_name(f)));
    }
  }
  EXPECT_EQ(exact_is_kernel_rows - before, 4 * 6);  // every row, decoded with no exact values too
}

/// Three rows of 4-bit zero points under sub-mul (f32 scales, groups of `group`), K `k`, f32
/// activations.
std::unique_ptr<OwnedProblem> zero_point_rows(Dequant dq, Index group, Index k) {
  SegmentSpec s = af4_segment(3, dq, DType::kF32, group, DequantOp::kSubMul);
  s.af4.variant = Af4Variant::kZeroPoint;
  ProblemOptions o;
  o.k = k;
  o.x_dtype = DType::kF32;
  o.segments = {s};
  return make_problem(o);
}

/// Whether every row of the problem's weights reports kernel_is_exact, with and without the
/// kernel weights asked for.
std::pair<bool, bool> kernel_is_exact(const OwnedProblem& p) {
  const Weights& W = p.weights;
  detail::WeightRowDecoder decoder(W, p.problem.x.dtype);
  std::vector<double> exact(W.k), spread(W.k);
  std::vector<float> kernel(W.k), mag(W.k);
  bool with = true, without = false;
  for (Index j = 0; j < W.n; ++j) {
    with = with && decoder.decode(j, {exact.data(), mag.data(), spread.data(), kernel.data()}).kernel_is_exact;
    without = without || decoder.decode(j, {exact.data(), mag.data(), spread.data(), nullptr}).kernel_is_exact;
  }
  return {with, without};
}

TEST(WeightRows, KernelWeightsServeAsExactOnesWhereTheyAre) {
  // f32 and bf16 rows (f16 rows are widened to f32 ones first); 4-bit zero points dequantized in f32 (MatMulNBits: both
  // the vector sub-mul path and, at group 20, the table); AF4 affine with bf16 scales and f32 dequantization (s q + b
  // exact in f32 for bf16 s and 4-bit q: the table path). Never without kernel weights.
  std::vector<std::pair<std::string, ProblemOptions>> yes;
  for (const WeightFormat f : {WeightFormat::kF32, WeightFormat::kBf16}) {
    ProblemOptions o;
    o.k = 80;
    o.segments = {{f, 5, {}}};
    yes.emplace_back(weight_format_name(f), o);
  }
  for (const Index group : {Index{32}, Index{20}}) {
    SegmentSpec s = af4_segment(3, Dequant::kF32, DType::kF32, group, DequantOp::kSubMul);
    s.af4.variant = Af4Variant::kZeroPoint;
    ProblemOptions o;
    o.k = 4 * group;
    o.x_dtype = DType::kF32;
    o.segments = {s};
    yes.emplace_back("zero-point group " + std::to_string(group), o);
  }
  ProblemOptions affine;
  affine.k = 128;
  affine.segments = {af4_segment(3, Dequant::kF32, DType::kBf16, 64, DequantOp::kMulAdd)};
  yes.emplace_back("af4 affine bf16 scales", affine);
  for (const auto& [what, o] : yes) {
    auto p = make_problem(o);
    EXPECT_EQ(kernel_is_exact(*p), std::make_pair(true, false)) << what;
    compare_all_rows(*p, what);
  }
  // Exact dequantization of f32 scales: s (q - zp) in f64 is rarely an f32 number.
  EXPECT_FALSE(kernel_is_exact(*zero_point_rows(Dequant::kExact, 32, 128)).first);
  // A NaN weight: never (its bits need not survive the round trip).
  ProblemOptions nan;
  nan.k = 80;
  nan.segments = {{WeightFormat::kF32, 2, {}}};
  auto q = make_problem(nan);
  q->f32_store[0][5] = NAN;
  EXPECT_FALSE(kernel_is_exact(*q).first);
}

TEST(WeightRows, EveryAf4LayoutMatchesTheDecoder) {
  Index combos = 0;
  // Below 16: af4_decode_row per row; 20: the table with the scalar look-up; multiples of 16:
  // the table with the vector look-up (where the build has AVX-512). Four groups per row.
  for (const Index group : {Index{8}, Index{12}, Index{20}, Index{16}, Index{32}, Index{48}, Index{64}, Index{96}}) {
    const Index K = 4 * group;
    for (const Af4Variant variant : {Af4Variant::kAffine, Af4Variant::kCodebook}) {
      for (const Af4Codebook cb : {Af4Codebook::kNf4, Af4Codebook::kAf4_64, Af4Codebook::kCustom}) {
        if (variant == Af4Variant::kAffine && cb != Af4Codebook::kNf4) continue;  // one affine pass
        for (const Af4Packing packing : {Af4Packing::kU32Lsb, Af4Packing::kU8Msb, Af4Packing::kU8Lsb}) {
          for (const DType scale : {DType::kBf16, DType::kF16, DType::kF32}) {
            for (const Dequant dq : {Dequant::kExact, Dequant::kF32, Dequant::kOutput, Dequant::kFolded}) {
              for (const DequantOp op : {DequantOp::kFma, DequantOp::kMulAdd, DequantOp::kEither}) {
                for (const DType act : {DType::kBf16, DType::kF32}) {
                  SegmentSpec s;
                  s.format = WeightFormat::kAf4;
                  s.rows = 3;
                  s.af4.group_size = group;
                  s.af4.variant = variant;
                  s.af4.codebook = variant == Af4Variant::kCodebook ? cb : Af4Codebook::kNone;
                  if (cb == Af4Codebook::kCustom && variant == Af4Variant::kCodebook) {
                    for (int q = 0; q < 16; ++q) s.af4.table[q] = 0.37f * static_cast<float>(q - 7) + 0x1p-20f;
                  }
                  s.af4.packing = packing;
                  s.af4.scale_dtype = scale;
                  s.af4.dequant = dq;
                  s.af4.dequant_op = op;
                  ProblemOptions o;
                  o.k = K;
                  o.x_dtype = act;
                  o.segments = {s, {WeightFormat::kBf16, 2, {}}};
                  o.seed = static_cast<std::uint64_t>(combos + 1);
                  auto p = make_problem(o);
                  compare_all_rows(*p, "af4 combo " + std::to_string(combos));
                  ++combos;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(combos, 8 * 4 * 3 * 3 * 4 * 3 * 2);
}

TEST(WeightRows, EveryZeroPointLayoutMatchesTheDecoder) {
  [[maybe_unused]] const Index before = exact_is_kernel_rows;  // read on AVX-512 and AVX2 builds only
  [[maybe_unused]] const Index magnitudes_before = magnitudes_are_kernel_rows;
  // w = (q - zp)*s: the table path and af4_decode_row agree for each group size, packing, scale
  // type, dequantization, operation order (sub-mul, fused) and activation type.
  Index combos = 0;
  for (const Index group : {Index{8}, Index{20}, Index{32}, Index{64}}) {
    for (const Af4Packing packing : {Af4Packing::kU32Lsb, Af4Packing::kU8Msb}) {
      for (const DType scale : {DType::kBf16, DType::kF16, DType::kF32}) {
        for (const Dequant dq : {Dequant::kExact, Dequant::kF32, Dequant::kOutput, Dequant::kFolded}) {
          for (const DequantOp op : {DequantOp::kSubMul, DequantOp::kFused}) {
            for (const DType act : {DType::kBf16, DType::kF32}) {
              SegmentSpec s = af4_segment(3, dq, scale, group, op);
              s.af4.variant = Af4Variant::kZeroPoint;
              s.af4.packing = packing;
              ProblemOptions o;
              o.k = 4 * group;
              o.x_dtype = act;
              o.segments = {s, {WeightFormat::kBf16, 2, {}}};
              o.seed = static_cast<std::uint64_t>(combos + 101);
              auto p = make_problem(o);
              compare_all_rows(*p, "zero-point combo " + std::to_string(combos));
              ++combos;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(combos, 4 * 2 * 3 * 4 * 2 * 2);
#if defined(__AVX512F__) || defined(__AVX2__)
  // Every combination's 2 bf16 rows; and its 3 zero-point rows where they take the sub-mul path:
  // groups of 32 and 64, both packings, 3 scale types, `f32` under either activation type or
  // `output` under f32 activations (f32 rounding), sub-mul (not fused).
  constexpr Index kSubMulRows = 108;  // 3 rows x 2 groups x 2 packings x 3 scale types x 3
  EXPECT_EQ(exact_is_kernel_rows - before, 2 * combos + kSubMulRows);
  EXPECT_EQ(magnitudes_are_kernel_rows - magnitudes_before, kSubMulRows);  // the zero-point rows alone
#endif
}

TEST(WeightRows, Af4SpecialScalesKeepTheirFacts) {
  // f32 scales: NaN, inf, a scale whose s * q overflows f32 (and so the f32 magnitude), zero
  // (a group of zero weights), a subnormal; with the exact and the f32 dequantizations, and for
  // f32 each declared operation order (a single one gives an inf or NaN weight no spread);
  // `output` rounds the weights to the activations' bf16, NaN included, and `folded` charges
  // |s q| + |b|.
  for (const Dequant dq : {Dequant::kExact, Dequant::kF32, Dequant::kOutput, Dequant::kFolded}) {
    for (const DequantOp op : {DequantOp::kEither, DequantOp::kFma, DequantOp::kMulAdd}) {
      if ((dq == Dequant::kExact || dq == Dequant::kFolded) && op != DequantOp::kEither) continue;
      for (const Index group : {Index{8}, Index{64}}) {
        const SegmentSpec s = af4_segment(2, dq, DType::kF32, group, op);
        ProblemOptions o;
        o.k = 320;
        o.segments = {s};
        auto p = make_problem(o);
        const auto set = [&](std::size_t store, Index i, float v) {
          std::memcpy(p->byte_store[store].data() + i * 4, &v, 4);
        };
        set(1, 0, NAN);
        set(1, 1, INFINITY);
        set(1, 2, 3e38f);
        set(2, 2, 3e38f);
        set(1, 3, 0.0f);
        set(2, 3, 0.0f);
        set(1, 4, 1e-42f);
        set(2, 4, 0.0f);
        compare_all_rows(*p, std::string("special scales ") + std::string(dequant_name(dq)) + " op " +
                                 std::to_string(static_cast<int>(op)));
        if (op != DequantOp::kEither) {
          // One declared order: no weight has two values, not even a non-finite one.
          std::vector<double> exact(320), alg(320), spread(320);
          std::vector<float> kernel(320);
          for (Index j = 0; j < 2; ++j) {
            decode_weight_row(p->weights, j, DType::kF32, exact.data(), alg.data(), kernel.data(), spread.data());
            for (double h : spread) EXPECT_EQ(h, 0.0);
          }
        }
      }
    }
  }
}

TEST(WeightRows, ZeroPointSpecialScalesKeepTheirFacts) {
  // The same special scales for (q - zp) * s, under each operation order and at a group of 8 (the
  // per-row decoder) and of 64 (with `dequant = f32` and sub-mul, ONNX Runtime's order, the
  // weights straight from the codes with no table; else the table): an inf or NaN weight is
  // counted non-finite and left out of l1, an overflowing product too, a zero scale gives a group
  // of zero weights, a subnormal one subnormal weights whose f32 magnitudes are raised.
  for (const Dequant dq : {Dequant::kExact, Dequant::kF32, Dequant::kOutput}) {
    for (const DequantOp op : {DequantOp::kSubMul, DequantOp::kFused}) {
      for (const Index group : {Index{8}, Index{64}}) {
        SegmentSpec s = af4_segment(3, dq, DType::kF32, group, op);
        s.af4.variant = Af4Variant::kZeroPoint;
        ProblemOptions o;
        o.k = 320;
        o.x_dtype = DType::kF32;
        o.segments = {s};
        auto p = make_problem(o);
        const auto set = [&](Index i, float v) { std::memcpy(p->byte_store[1].data() + i * 4, &v, 4); };
        set(0, NAN);
        set(1, INFINITY);
        set(2, 3e38f);
        set(3, 0.0f);
        set(4, 1e-42f);
        set(2 * (o.k / group), -INFINITY);  // row 2's first group: its first weight is the row's first non-finite
        compare_all_rows(*p, std::string("zero-point special scales ") + std::string(dequant_name(dq)) + " op " +
                                 std::to_string(static_cast<int>(op)) + " group " + std::to_string(group));
      }
    }
  }
}

// compare_all_rows holds l1 from the codes to the 16-lane order, but its weights are a few
// binades apart, where every order sums exactly. Here groups alternate scales 2^40 apart, so
// that each lane's sum rounds: the same bits as the documented order, and other bits from the
// lanes in another order (lanes 4-7 and 8-11 swapped, as a mix-up of the AVX2 form's four
// accumulators would give).
TEST(WeightRows, ZeroPointL1FromTheCodesIsSummedInTheDocumentedLanes) {
  const Index k = 320;
  auto p = zero_point_rows(Dequant::kF32, 16, k);
  ASSERT_TRUE(detail::segment_magnitudes_are_kernels(p->weights.segments[0], DType::kF32))
      << "this build decodes zero points through the table: no order to hold";
  const Index groups = 3 * (k / 16);
  for (Index i = 0; i < groups; ++i) {
    const float v =
        i % 2 == 0 ? 1.0f + static_cast<float>(i) * 0x1p-20f : 0x1p-40f * (1.37f + static_cast<float>(i) * 0x1p-18f);
    std::memcpy(p->byte_store[1].data() + i * 4, &v, 4);
  }
  detail::WeightRowDecoder decoder(p->weights, DType::kF32);
  std::vector<double> exact(k);
  std::vector<float> mag(k), kernel(k);
  Index order_sensitive = 0;
  for (Index j = 0; j < 3; ++j) {
    const detail::WeightRowFacts facts = decoder.decode(j, {exact.data(), mag.data(), nullptr, kernel.data()});
    const double documented = l1_in_lanes(kernel, [](int l) { return l; });
    const double swapped = l1_in_lanes(kernel, [](int l) { return l >= 4 && l < 12 ? (l < 8 ? l + 4 : l - 4) : l; });
    EXPECT_TRUE(same_bits(facts.l1, documented)) << "row " << j << ": " << facts.l1 << " against " << documented;
    order_sensitive += !same_bits(swapped, documented);
  }
  EXPECT_GT(order_sensitive, 0) << "no row whose l1 depends on the lanes: the test could not see a mix-up";
}

TEST(WeightRows, OnlyEitherWithPinnedDequantizationCanSpread) {
  WeightSegment seg;
  EXPECT_FALSE(detail::segment_may_spread(seg));  // bf16
  seg.format = WeightFormat::kAf4;
  for (const Dequant dq : {Dequant::kExact, Dequant::kF32, Dequant::kOutput, Dequant::kFolded}) {
    for (const DequantOp op : {DequantOp::kFma, DequantOp::kMulAdd, DequantOp::kEither}) {
      seg.af4.layout.dequant = dq;
      seg.af4.layout.dequant_op = op;
      const bool pinned = dq == Dequant::kF32 || dq == Dequant::kOutput;
      EXPECT_EQ(detail::segment_may_spread(seg), pinned && op == DequantOp::kEither);
    }
  }
}

}  // namespace
}  // namespace ncert::reference
