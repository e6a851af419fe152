// S = sum |x| a as an f32 GEMM made a true upper bound (docs/error-bounds.md §1):
//  - the inflation (s_hat + K 2^-122)(1 + gamma_K(2^-24)) covers every summation order of
//    non-negative f32 terms (sequential, fused, reversed, pairwise, SIMD-lane panels, largest
//    first so that small terms are absorbed), checked against sums in binary128, including an
//    order that attains the worst case to within one unit roundoff and gamma_K's second-order
//    term;
//  - end to end, the reference's S is >= the exact S and exceeds it by at most 2 gamma_K, by the
//    f32 GEMM and (bf16 shapes) S from bf16 magnitudes, for
//    bf16, f32 and AF4 weights (exact f64 weights rounded up to f32 included), and B grows by
//    at most that over the previous f64 S (measured: max and mean printed);
//  - an f32 overflow, and non-finite operands, give the f64 results; subnormal products are
//    covered, also in a process that flushes subnormals (FTZ/DAZ); blocks that take either
//    path are identical at one and two threads;
//  - S from bf16 magnitudes (reference/detail/s_bf16.h): the operands round up and stay in the
//    range that keeps every product exact; the AVX512-BF16 instruction (where the build has it)
//    and the portable path both sum in the order the header states, bit for bit (an oracle
//    written from those words), operands at the range's ends included, and masking the
//    instruction changes no bit of the reference; S stays above the exact S and B grows by at
//    most 2^-7 (activations rounded up to bf16) over the f32 S; an overflow falls back to the
//    f64 GEMM; magnitudes out of range keep the f32 GEMM, and threads do not change bits.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "reference/bounds.h"
#include "reference/detail/gemm.h"
#include "reference/detail/s_bf16.h"
#include "reference/linear.h"
#include "tests/common/linear_fixture.h"
#include "tests/common/reference_threads.h"
#include "tests/common/s_bf16_oracle.h"
#include "tests/common/summation_orders.h"

namespace ncert::reference {
namespace {

using ncert::testing::af4_segment;
using ncert::testing::make_problem;
using ncert::testing::OwnedProblem;
using ncert::testing::ProblemOptions;
using ncert::testing::same_array_bits;
using ncert::testing::SegmentSpec;
using Quad = __float128;

constexpr double kU32 = 0x1p-24;

double gamma_k(Index k) { return static_cast<double>(k) * kU32 / (1 - static_cast<double>(k) * kU32); }

/// sum a_k b_k in binary128: each product of two f32 is exact in f64, the sum's relative error
/// is below K 2^-113 (1e-30 at K = 16480), far below every margin tested here.
Quad exact_dot(const float* a, const float* b, Index k) {
  Quad s = 0;
  for (Index c = 0; c < k; ++c) s += static_cast<Quad>(static_cast<double>(a[c]) * static_cast<double>(b[c]));
  return s;
}

// ---- summation orders of non-negative f32 terms (tests/common/summation_orders.h) -------------

using ncert::testing::largest_first;
using ncert::testing::pairwise;
using ncert::testing::panels;
using ncert::testing::reversed;
using ncert::testing::seq;
using ncert::testing::seq_fma;

/// Eigen's f32 GEMM itself, one row by one column, called as the reference calls it (inside a
/// parallel region, so Eigen stays on the calling thread).
float eigen(const float* a, const float* b, Index k) {
  float c = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    detail::gemm_abt(a, 1, k, b, 1, &c);
  }
  return c;
}

using Order = float (*)(const float*, const float*, Index);
constexpr Order kOrders[] = {seq, seq_fma, reversed, pairwise, panels, largest_first, eigen};

TEST(F32SumBound, CoversEverySummationOrder) {
  std::mt19937_64 rng(77);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> e(-60.0f, 60.0f);
  Index cases = 0;
  for (const Index k : {Index{1}, Index{2}, Index{7}, Index{64}, Index{512}, Index{5120}, Index{16480}}) {
    const F32SumInflation inflation = f32_sum_inflation(k);
    for (int dist = 0; dist < 4; ++dist) {
      std::vector<float> a(static_cast<std::size_t>(k)), b(a.size());
      for (Index c = 0; c < k; ++c) {
        switch (dist) {
          case 0:  // the production case: bf16 activations x small weights
            a[c] = std::fabs(round_to_bf16(n(rng)));
            b[c] = std::fabs(0.02f * n(rng));
            break;
          case 1:  // magnitudes spread over 2^+-60
            a[c] = std::fabs(n(rng)) * std::exp2(e(rng));
            b[c] = std::fabs(n(rng)) * std::exp2(e(rng));
            break;
          case 2:  // one large term, then terms just below half an ulp of the sum: all absorbed
            a[c] = c == 0 ? 1.0f : 0x1.fffffep-25f;
            b[c] = 1.0f;
            break;
          default:  // products in f32's subnormal range (partly lost to underflow)
            a[c] = f32_magnitude(std::fabs(n(rng)) * 0x1p-70f);
            b[c] = f32_magnitude(std::fabs(n(rng)) * 0x1p-75f);
            break;
        }
      }
      const Quad exact = exact_dot(a.data(), b.data(), k);
      for (const Order order : kOrders) {
        const float s_hat = order(a.data(), b.data(), k);
        const double up = inflation.up(s_hat);
        EXPECT_GE(static_cast<Quad>(up), exact) << "k " << k << " dist " << dist;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 7 * 4 * 7);
}

TEST(F32SumBound, TheInflationIsAttainedToSecondOrder) {
  // 1 followed by K - 1 terms of just under 2^-24: sequential f32 summation returns 1, the
  // exact sum is 1 + (K - 1)(2^-24 - 2^-48); gamma_K cannot be made smaller in general.
  const Index k = 5120;
  std::vector<float> a(k, 0x1.fffffep-25f), b(k, 1.0f);
  a[0] = 1.0f;
  const float s_hat = seq(a.data(), b.data(), k);
  EXPECT_EQ(s_hat, 1.0f);
  const double exact = static_cast<double>(exact_dot(a.data(), b.data(), k));
  const double up = f32_sum_inflation(k).up(s_hat);
  EXPECT_GE(up, exact);
  // up / exact = (1 + K u)(1 + (K u)^2 + ...) / (1 + (K - 1) u): one unit roundoff plus the
  // second-order term of gamma_K, (K u)^2 = 9.3e-8, above the exact sum.
  const double ku = static_cast<double>(k) * kU32;
  EXPECT_LT(up / exact - 1, kU32 + 1.01 * ku * ku);
}

// ---- end to end ------------------------------------------------------------------------------

/// The charged magnitudes as f64 (decode_weight_row's `alg`) and |x|, per element: exact S in
/// binary128 from the unrounded values.
std::vector<double> exact_s(const OwnedProblem& p) {
  const Index M = p.m, K = p.k, N = p.n;
  std::vector<double> alg(static_cast<std::size_t>(K)), out(static_cast<std::size_t>(M * N));
  for (Index j = 0; j < N; ++j) {
    decode_weight_row(p.weights, j, p.x_dtype, nullptr, alg.data(), nullptr, nullptr);
    for (Index i = 0; i < M; ++i) {
      Quad s = 0;
      for (Index c = 0; c < K; ++c) {
        // |x| a: a has up to 53 bits, |x| up to 24: split a into two exact halves.
        const double x = std::fabs(static_cast<double>(p.x_values[i * K + c]));
        s += static_cast<Quad>(x) * static_cast<Quad>(alg[c]);
      }
      out[static_cast<std::size_t>(i * N + j)] = static_cast<double>(s);
    }
  }
  return out;
}

/// The reference of `problem` in blocks of 16 columns with the options as set by `first` and
/// by `second`: two ways to S side by side.
template <typename F, typename G>
auto two_ways(const LinearProblem& problem, F&& first, G&& second) {
  ReferenceOptions one, two;
  one.block_cols = two.block_cols = 16;
  first(one);
  second(two);
  auto a = compute_reference(problem, one);
  auto b = compute_reference(problem, two);
  return std::pair{std::move(a), std::move(b)};
}

/// The reference with the option `member` on (its default) and off.
auto with_and_without(const LinearProblem& problem, bool ReferenceOptions::*member) {
  return two_ways(
      problem, [](ReferenceOptions&) {}, [member](ReferenceOptions& o) { o.*member = false; });
}

struct RatioStats {
  double max = 0, sum = 0, min = 1e300;
  Index n = 0;
  void add(double r) {
    max = std::max(max, r);
    min = std::min(min, r);
    sum += r;
    ++n;
  }
};

TEST(F32SumBound, ReferenceSIsAnUpperBoundAndBGrowsByAtMostTheInflation) {
  struct Shape {
    const char* name;
    Index k;
    std::vector<SegmentSpec> segments;
    DType x;
  };
  // The fixture presets' K (tiny: 64, 96, 512; production and qwen-mixer: 5120, 16480) and
  // their weight formats; N is small (every column is an independent sample).
  const std::vector<Shape> shapes = {
      {"K=64 af4-exact/bf16/f32",
       64,
       {af4_segment(24, Dequant::kExact, DType::kBf16, 32), {WeightFormat::kBf16, 16, {}}, {WeightFormat::kF32, 8, {}}},
       DType::kBf16},
      {"K=96 af4-f32 (f16 scales)", 96, {af4_segment(40, Dequant::kF32, DType::kF16, 16)}, DType::kF32},
      {"K=512 af4-output/bf16",
       512,
       {af4_segment(16, Dequant::kOutput, DType::kBf16), {WeightFormat::kBf16, 16, {}}},
       DType::kBf16},
      {"K=5120 af4-exact (f32 scales)", 5120, {af4_segment(32, Dequant::kExact, DType::kF32)}, DType::kBf16},
      {"K=5120 bf16", 5120, {{WeightFormat::kBf16, 32, {}}}, DType::kBf16},
      {"K=5120 af4-folded", 5120, {af4_segment(32, Dequant::kFolded, DType::kBf16)}, DType::kBf16},
      {"K=16480 bf16", 16480, {{WeightFormat::kBf16, 16, {}}}, DType::kBf16},
  };
  // Both ways to S: the f32 GEMM (bf16_s off) and S from bf16 magnitudes, which the bf16
  // shapes take by default.
  for (const bool bf16_s : {false, true}) {
    for (const Shape& shape : shapes) {
      ProblemOptions o;
      o.m = 6;
      o.k = shape.k;
      o.segments = shape.segments;
      o.x_dtype = shape.x;
      auto p = make_problem(o);
      ReferenceOptions ro;
      ro.bf16_s = bf16_s;
      auto r = compute_reference(p->problem, ro);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const std::vector<double> s_exact = exact_s(*p);
      const double g = gamma_k(shape.k);
      RatioStats s_ratio, b_ratio;
      for (Index i = 0; i < p->m; ++i) {
        double x_l1 = 0;
        for (Index c = 0; c < p->k; ++c) x_l1 += std::fabs(static_cast<double>(p->x_values[i * p->k + c]));
        for (Index j = 0; j < p->n; ++j) {
          const std::size_t e = static_cast<std::size_t>(r->at(i, j));
          ASSERT_GE(r->s[e], s_exact[e]) << shape.name << " (" << i << ", " << j << ")";
          // S from bf16 magnitudes rounds one operand up where it is not bf16 already: weights
          // other than bf16 ones (with bf16 activations), by at most 2^-7.
          const double rounding = bf16_s && segment_of(p->weights, j).format != WeightFormat::kBf16 ? 0x1p-7 : 0.0;
          ASSERT_LE(r->s[e], s_exact[e] * (1 + rounding) * (1 + 2.0 * g * (1 + 1e-6)) + 1e-30) << shape.name;
          // B as the f64 S gave it: the same formula over S (1 + 2 gamma_{K+3}(2^-53)).
          const WeightSegment& seg = segment_of(p->weights, j);
          const BoundTerms terms =
              bound_terms(column_model(seg, p->k), p->problem.accumulator, p->problem.lambda, p->k);
          const double b_old = element_bound(terms, inflate_s(s_exact[e], p->k), 0.0, x_l1, 0.0).bound;
          s_ratio.add(r->s[e] / s_exact[e]);
          b_ratio.add(r->bound[e] / b_old);
          EXPECT_LE(r->bound[e] / b_old, (1 + rounding) * (1 + 2.0 * g * (1 + 1e-6))) << shape.name;
        }
      }
      // B_new / B_old lies in [1, 1 + 2 gamma_K] (times 1 + 2^-7 where one operand rounds up to
      // bf16, checked per element above); it is ~1 + gamma_K for typical data.
      EXPECT_GE(b_ratio.min, 1 - 1e-9) << shape.name;
      if (!bf16_s) {
        EXPECT_LE(b_ratio.max, 1 + 2.0 * g * (1 + 1e-6)) << shape.name;
      }
      std::printf(
          "  %-30s %s S_up/S: max 1 + %.3g, mean 1 + %.3g | B_new/B_old: max 1 + %.3g, mean 1 + %.3g "
          "(gamma_K = %.3g)\n",
          shape.name, bf16_s ? "(bf16 S)" : "(f32 S) ", s_ratio.max - 1,
          s_ratio.sum / static_cast<double>(s_ratio.n) - 1, b_ratio.max - 1,
          b_ratio.sum / static_cast<double>(b_ratio.n) - 1, g);
    }
  }
}

TEST(F32SumBound, OverflowAndNonFiniteOperandsGiveTheF64Results) {
  ProblemOptions o;
  o.m = 3;
  o.k = 64;
  o.x_dtype = DType::kF32;
  o.segments = {{WeightFormat::kF32, 40, {}}};
  auto p = make_problem(o);
  // Column 3: 1e30 weights, x = 1e10: products of 1e40 overflow f32 but not f64.
  for (Index c = 0; c < o.k; ++c) p->f32_store[0][3 * o.k + c] = 1e30f;
  for (Index c = 0; c < o.k; ++c) p->x_f32[c] = c % 2 ? 1e10f : -1e10f;
  // Column 7: +inf at k = 5 (x(1, 5) = 0: 0 * inf is NaN in f64 too); column 9: NaN at k = 2.
  p->f32_store[0][7 * o.k + 5] = INFINITY;
  p->x_f32[1 * o.k + 5] = 0.0f;
  p->f32_store[0][9 * o.k + 2] = NAN;
  for (Index i = 0; i < o.m * o.k; ++i) p->x_values[i] = p->x_f32[i];
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok());
  // The f64 S, term by term.
  for (Index i = 0; i < o.m; ++i) {
    for (Index j = 0; j < p->n; ++j) {
      double s = 0;
      for (Index c = 0; c < o.k; ++c) {
        s += std::fabs(static_cast<double>(p->x_f32[i * o.k + c])) *
             std::fabs(static_cast<double>(p->f32_store[0][j * o.k + c]));
      }
      const double got = r->s[static_cast<std::size_t>(r->at(i, j))];
      SCOPED_TRACE("element (" + std::to_string(i) + ", " + std::to_string(j) + ")");
      EXPECT_EQ(std::isnan(got), std::isnan(s));
      EXPECT_EQ(std::isinf(got), std::isinf(s));
      if (std::isfinite(s)) {
        EXPECT_GE(got, s * (1 - 1e-12));
        EXPECT_LE(got, s * (1 + 2.0 * gamma_k(o.k)) + 1e-30);
      }
    }
  }
  EXPECT_TRUE(std::isfinite(r->s[static_cast<std::size_t>(r->at(0, 3))]));
  EXPECT_GT(r->s[static_cast<std::size_t>(r->at(0, 3))], 1e41);
  EXPECT_TRUE(std::isnan(r->s[static_cast<std::size_t>(r->at(1, 7))]));
  EXPECT_TRUE(std::isinf(r->s[static_cast<std::size_t>(r->at(0, 7))]));
  EXPECT_TRUE(std::isnan(r->s[static_cast<std::size_t>(r->at(2, 9))]));
}

TEST(F32SumBound, SubnormalActivationsAndProductsAreCovered) {
  ProblemOptions o;
  o.m = 4;
  o.k = 256;
  o.segments = {{WeightFormat::kBf16, 8, {}}};
  auto p = make_problem(o);
  // Activations around 2^-70 and 2^-130 (bf16 subnormals), weights around 2^-75: products
  // from 2^-145 (f32 subnormal, partly lost) to 2^-205 (below f32 entirely).
  for (Index i = 0; i < o.m * o.k; ++i) {
    const float v = p->x_values[i] * (i < 2 * o.k ? 0x1p-70f : 0x1p-126f * 0x1p-4f);
    p->x_bf16[i] = f32_to_bf16(v);
    p->x_values[i] = bf16_to_f32(p->x_bf16[i]);
  }
  for (auto& w : p->u16_store[0]) w = f32_to_bf16(bf16_to_f32(w) * 0x1p-70f);
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok());
  const std::vector<double> s_exact = exact_s(*p);
  for (std::size_t e = 0; e < s_exact.size(); ++e) {
    EXPECT_GT(s_exact[e], 0.0);
    EXPECT_GE(r->s[e], s_exact[e]);
    EXPECT_LT(r->s[e], 1e-30);  // raising |x| and a to 2^-126 costs at most 2^-126 sum(other)
  }
}

#if defined(__SSE__)
TEST(F32SumBound, StaysAnUpperBoundWhenTheProcessFlushesSubnormals) {
  // A host process may run with FTZ and DAZ set (engines that link the reference do). Subnormal
  // activations (2^-130) times large weights (2^60) make products of 2^-70: a term a DAZ unit
  // would drop whole if |x| reached the f32 GEMM unraised. Raised to 2^-126 it cannot.
  ProblemOptions o;
  o.m = 2;
  o.k = 128;
  o.segments = {{WeightFormat::kBf16, 4, {}}};
  auto p = make_problem(o);
  for (Index i = 0; i < o.m * o.k; ++i) {
    p->x_bf16[i] = f32_to_bf16(p->x_values[i] * 0x1p-130f);
    p->x_values[i] = bf16_to_f32(p->x_bf16[i]);
  }
  for (auto& w : p->u16_store[0]) w = f32_to_bf16(bf16_to_f32(w) * 0x1p66f);
  const std::vector<double> s_exact = exact_s(*p);  // before the flush modes are set
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);  // the reference runs on this thread, whose MXCSR is set here
  const unsigned saved_csr = _mm_getcsr();
  _mm_setcsr(saved_csr | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  auto r = compute_reference(p->problem);
  _mm_setcsr(saved_csr);
  omp_set_num_threads(saved_threads);
  ASSERT_TRUE(r.ok());
  for (std::size_t e = 0; e < s_exact.size(); ++e) {
    EXPECT_GT(s_exact[e], 0x1p-80);
    EXPECT_GE(r->s[e], s_exact[e]) << e;
  }
}

TEST(F32SumBound, SubnormalWeightsStayInSWithAWalkWhenTheProcessFlushes) {
  // With a walk, S (and y*) take f32 weights from the walk's panels instead of the decoded rows
  // (reference/detail/gemm.h). Subnormal f32 weights (2^-130) times large activations (2^60):
  // under FTZ a weight narrowed from its f64 value would become 0 in the panels, and S would
  // lose every term. The panels hold the weights' bits, so S is the same with the walk as
  // without it, and an upper bound, under FTZ alone and under FTZ with DAZ.
  ProblemOptions o;
  o.m = 2;
  o.k = 128;
  o.x_dtype = DType::kF32;
  o.walk = "seq-fma";
  o.segments = {{WeightFormat::kF32, 128, {}}};
  auto p = make_problem(o);
  for (Index i = 0; i < o.m * o.k; ++i) {
    p->x_values[i] = std::fabs(p->x_values[i]) * 0x1p60f + 0x1p60f;
    p->x_f32[i] = p->x_values[i];
  }
  for (auto& w : p->f32_store[0]) w = 0x1p-130f;
  const std::vector<double> s_exact = exact_s(*p);
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);                            // the reference runs on this thread, whose MXCSR is set here
  for (const unsigned modes : {0x8000u, 0x8040u}) {  // FTZ; FTZ and DAZ
    SCOPED_TRACE(modes == 0x8000u ? "FTZ" : "FTZ and DAZ");
    ReferenceOptions with, without;
    without.emulate_walk = false;
    const unsigned saved_csr = _mm_getcsr();
    _mm_setcsr(saved_csr | modes);
    auto a = compute_reference(p->problem, with);
    auto b = compute_reference(p->problem, without);
    _mm_setcsr(saved_csr);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_FALSE(a->walk.empty());
    for (std::size_t e = 0; e < s_exact.size(); ++e) {
      EXPECT_GT(s_exact[e], 0x1p-80);
      EXPECT_GE(a->s[e], s_exact[e]) << e;
      EXPECT_EQ(std::bit_cast<std::uint64_t>(a->s[e]), std::bit_cast<std::uint64_t>(b->s[e])) << e;
      EXPECT_EQ(std::bit_cast<std::uint64_t>(a->y_star[e]), std::bit_cast<std::uint64_t>(b->y_star[e])) << e;
    }
  }
  omp_set_num_threads(saved_threads);
}
#endif

TEST(F32SumBound, BothPathsAreBitIdenticalAtOneAndTwoThreads) {
  ProblemOptions o;
  o.m = 5;
  o.k = 320;
  o.x_dtype = DType::kF32;
  SegmentSpec either = af4_segment(40, Dequant::kF32, DType::kF32);
  either.af4.dequant_op = DequantOp::kEither;  // two-valued weights: the spread's GEMM
  o.segments = {either, {WeightFormat::kF32, 70, {}}};
  auto p = make_problem(o);
  for (Index c = 0; c < o.k; ++c) p->f32_store[0][50 * o.k + c] = 1e36f;  // an f32 overflow: f64 S
  ReferenceOptions ro;
  ro.block_cols = 16;
  auto [one, two] = ncert::testing::reference_at_one_and_two_threads(p->problem, ro);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_GT(one->summary.ambiguous_weights, 0);
  EXPECT_GT(one->s[static_cast<std::size_t>(one->at(0, 40 + 50))], 1e36);
  EXPECT_TRUE(same_array_bits(one->y_star, two->y_star));
  EXPECT_TRUE(same_array_bits(one->s, two->s));
  EXPECT_TRUE(same_array_bits(one->bound, two->bound));
  EXPECT_TRUE(same_array_bits(one->tier, two->tier));
  EXPECT_TRUE(same_array_bits(one->accept, two->accept));
  EXPECT_TRUE(same_array_bits(one->expect, two->expect));
}

// ---- S from bf16 magnitudes (reference/detail/s_bf16.h; docs/error-bounds.md §1) -------------

using testing::bf16_value;

TEST(Bf16S, MagnitudesRoundUpStayInRangeAndKeepBf16NumbersExact) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> e(-60, 60);
  const Index k = 37;  // padded to 64
  std::vector<float> mag(static_cast<std::size_t>(2 * k));
  for (float& m : mag) m = static_cast<float>(std::exp2(e(rng)));
  mag[3] = 0.0f;
  std::vector<std::uint16_t> out(static_cast<std::size_t>(2 * detail::bf16_padded(k)), 0xFFFF);
  ASSERT_TRUE(detail::to_bf16_magnitudes(mag.data(), 2, k, true, out.data()));
  for (Index r = 0; r < 2; ++r) {
    for (Index c = 0; c < k; ++c) {
      const float m = mag[static_cast<std::size_t>(r * k + c)];
      const std::uint16_t h = out[static_cast<std::size_t>(r * 64 + c)];
      EXPECT_GE(bf16_value(h), m);  // never below the magnitude
      if (m != 0) {
        EXPECT_LT(bf16_value(static_cast<std::uint16_t>(h - 1)), m);  // the next bf16 up
      }
      EXPECT_LE(bf16_value(h), m * (1 + 0x1p-7f));
    }
    for (Index c = k; c < 64; ++c) EXPECT_EQ(out[static_cast<std::size_t>(r * 64 + c)], 0) << "padding";
  }
  EXPECT_EQ(out[3], 0);
  // bf16 numbers pass unrounded; anything else is refused where exactness is asked.
  std::vector<float> exact = {0.0f, 1.0f, bf16_value(0x3F81), 0x1p-63f, bf16_value(0x5EFF)};
  std::vector<std::uint16_t> e_out(32);
  ASSERT_TRUE(detail::to_bf16_magnitudes(exact.data(), 1, 5, false, e_out.data()));
  EXPECT_EQ(e_out[2], 0x3F81);
  EXPECT_EQ(e_out[3], 64 << 7);
  const float not_bf16 = std::nextafter(1.0f, 2.0f);
  EXPECT_FALSE(detail::to_bf16_magnitudes(&not_bf16, 1, 1, false, e_out.data()));
  // The range that keeps every product a normal, exact f32: [2^-63, 2^63), after rounding.
  const float below = std::nextafter(0x1p-63f, 0.0f);
  ASSERT_TRUE(detail::to_bf16_magnitudes(&below, 1, 1, true, e_out.data()));
  EXPECT_EQ(e_out[0], 64 << 7);
  for (const float v : {0x1p-64f, 0x1.8p-64f, 0x1p63f, std::nextafter(bf16_value(0x5EFF), 1e30f), 0x1p-140f,
                        std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_FALSE(detail::to_bf16_magnitudes(&v, 1, 1, true, e_out.data())) << v;
  }
}

/// Both ways s_gemm_bf16 computes: the instruction where this build has it, the portable path
/// always.
std::vector<bool> s_gemm_paths() {
  if (detail::kSBf16Instruction) return {true, false};
  return {false};
}

TEST(Bf16S, BothPathsSumInTheDocumentedOrderBitForBit) {
  for (const bool instruction : s_gemm_paths()) testing::expect_the_documented_order(instruction);
}

// The portable path fed the weights' f32 magnitudes, as the reference feeds it: the bits and
// the refusals of the route through their bf16 copy.
TEST(Bf16S, WeightsFromF32MagnitudesGiveTheBitsOfTheirBf16Copy) { testing::expect_the_f32_route_to_match(); }

// The reference with S by the instruction and with the instruction masked off (the path builds
// for CPUs without AVX512-BF16 take): the same S and B, bit for bit, so a verdict does not
// depend on the CPU a build targets.
TEST(Bf16S, MaskingTheInstructionChangesNoBitOfTheReference) {
  if (!detail::kSBf16Instruction) GTEST_SKIP() << "this build has no AVX512-BF16 instruction to mask";
  ProblemOptions o;
  o.m = 7;
  o.k = 5120;
  o.x_dtype = DType::kF32;
  o.segments = {{WeightFormat::kBf16, 45, {}}, af4_segment(19, Dequant::kF32, DType::kBf16, 64)};
  auto p = make_problem(o);
  const auto kernel = [](Bf16SKernel k) { return [k](ReferenceOptions& options) { options.bf16_s_kernel = k; }; };
  auto [r_on, r_masked] = two_ways(p->problem, kernel(Bf16SKernel::kInstruction), kernel(Bf16SKernel::kPortable));
  ASSERT_TRUE(r_on.ok() && r_masked.ok());
  // Columns 0-31 (blocks 0 and 1) hold bf16 weights only; blocks 2-3 hold AF4's, whose S stays
  // the f32 GEMM's.
  EXPECT_EQ(r_on->summary.s_bf16_blocks, 2);
  EXPECT_EQ(r_masked->summary.s_bf16_blocks, 2);
  EXPECT_EQ(std::memcmp(r_on->s.data(), r_masked->s.data(), r_on->s.size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(r_on->bound.data(), r_masked->bound.data(), r_on->bound.size() * sizeof(double)), 0);
}

TEST(Bf16S, SStaysAnUpperBoundAndBGrowsByAtMostOneOperandsRounding) {
  struct Shape {
    const char* name;
    Index m, k;
    DType x;
    std::vector<SegmentSpec> segments;
    Index bf16_blocks;  // blocks of 16 columns whose S comes from bf16 magnitudes
  };
  const std::vector<Shape> shapes = {
      {"K=5120 bf16, f32 x", 6, 5120, DType::kF32, {{WeightFormat::kBf16, 40, {}}}, 3},
      {"K=5120 bf16, bf16 x", 6, 5120, DType::kBf16, {{WeightFormat::kBf16, 40, {}}}, 3},
      {"K=100 bf16 + af4, f32 x",
       5,
       100,
       DType::kF32,
       {{WeightFormat::kBf16, 37, {}}, af4_segment(21, Dequant::kF32, DType::kBf16, 20)},
       2},  // the AF4 blocks keep the f32 GEMM: both operands would round
      // bf16 activations: the AF4 weights' magnitudes round up, the activations' are exact.
      {"K=5120 af4, bf16 x", 6, 5120, DType::kBf16, {af4_segment(40, Dequant::kF32, DType::kBf16, 64)}, 3},
      {"K=100 bf16 + af4, bf16 x",
       5,
       100,
       DType::kBf16,
       {{WeightFormat::kBf16, 37, {}}, af4_segment(21, Dequant::kF32, DType::kBf16, 20)},
       4},
  };
  const double max_growth = 0x1p-7;  // one operand rounded up to bf16, the other exact
  for (const Shape& shape : shapes) {
    ProblemOptions o;
    o.m = shape.m;
    o.k = shape.k;
    o.x_dtype = shape.x;
    o.segments = shape.segments;
    auto p = make_problem(o);
    auto [r_on, r_off] = with_and_without(p->problem, &ReferenceOptions::bf16_s);
    ASSERT_TRUE(r_on.ok() && r_off.ok());
    EXPECT_EQ(r_on->summary.s_bf16_blocks, shape.bf16_blocks) << shape.name;
    EXPECT_EQ(r_off->summary.s_bf16_blocks, 0);
    EXPECT_EQ(std::memcmp(r_on->y_star.data(), r_off->y_star.data(), r_on->y_star.size() * sizeof(double)), 0);
    const std::vector<double> s_exact = exact_s(*p);
    const double g = gamma_k(shape.k);
    RatioStats b_ratio;
    for (std::size_t e = 0; e < s_exact.size(); ++e) {
      ASSERT_GE(r_on->s[e], s_exact[e]) << shape.name << " element " << e;
      ASSERT_LE(r_on->s[e], s_exact[e] * (1 + max_growth) * (1 + 2.0 * g * (1 + 1e-6)) + 1e-30) << shape.name;
      b_ratio.add(r_on->bound[e] / r_off->bound[e]);
    }
    EXPECT_GE(b_ratio.min, 1 - 2.0 * g * (1 + 1e-6)) << shape.name;
    EXPECT_LE(b_ratio.max, 1 + max_growth + 2.0 * g * (1 + 1e-6)) << shape.name;
    std::printf("  %-62s B (bf16 S) / B (f32 S): min 1 %+.3g, max 1 %+.3g, mean 1 %+.3g\n", shape.name, b_ratio.min - 1,
                b_ratio.max - 1, b_ratio.sum / static_cast<double>(b_ratio.n) - 1);
  }
}

TEST(Bf16S, AnOverflowInTheKernelFallsBackToTheF64Gemm) {
  // bf16 weights and f32 activations near 2^62: each product 2^124 is finite, their sum over
  // K = 64 is not; the block's S must come from the f64 GEMM, finite and above the exact S.
  ProblemOptions o;
  o.m = 3;
  o.k = 64;
  o.x_dtype = DType::kF32;
  o.segments = {{WeightFormat::kBf16, 8, {}}};
  auto p = make_problem(o);
  for (Index c = 0; c < o.k; ++c) p->u16_store[0][2 * o.k + c] = reference::f32_to_bf16(0x1p62f);
  for (Index c = 0; c < o.k; ++c) p->x_f32[c] = p->x_values[c] = 0x1.8p61f;
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->summary.s_bf16_blocks, 1) << "the bf16 S ran, then its infinity sent the block to f64";
  const std::vector<double> s_exact = exact_s(*p);
  const double s02 = r->s[static_cast<std::size_t>(r->at(0, 2))];
  EXPECT_TRUE(std::isfinite(s02));
  EXPECT_GT(s02, 1e38);
  for (std::size_t e = 0; e < s_exact.size(); ++e) ASSERT_GE(r->s[e], s_exact[e]);
}

TEST(Bf16S, MagnitudesOutOfRangeKeepTheF32GemmAndThreadsDoNotChangeBits) {
  ProblemOptions o;
  o.m = 5;
  o.k = 96;
  o.x_dtype = DType::kF32;
  o.segments = {{WeightFormat::kBf16, 48, {}}};
  auto p = make_problem(o);
  ReferenceOptions ro;
  ro.block_cols = 16;
  // A weight of 2^-70 in column 20 (block 1): that block's products could be subnormal.
  p->u16_store[0][20 * o.k + 7] = reference::f32_to_bf16(0x1p-70f);
  auto r = compute_reference(p->problem, ro);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->summary.s_bf16_blocks, 2) << "blocks 0 and 2 only";
  const std::vector<double> s_exact = exact_s(*p);
  for (std::size_t e = 0; e < s_exact.size(); ++e) ASSERT_GE(r->s[e], s_exact[e]);
  // An activation of 1e-30: no block can take S from bf16 magnitudes.
  p->x_f32[3] = p->x_values[3] = 1e-30f;
  auto tiny = compute_reference(p->problem, ro);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->summary.s_bf16_blocks, 0);
  // One and two threads: the same bits, bf16 S or not.
  p->x_f32[3] = p->x_values[3] = 0.5f;
  auto [one, two] = ncert::testing::reference_at_one_and_two_threads(p->problem, ro);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(std::memcmp(one->s.data(), two->s.data(), one->s.size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(one->bound.data(), two->bound.data(), one->bound.size() * sizeof(double)), 0);
}

// docs/error-bounds.md §6c, binades: an f32 rounding to nearest of any value of magnitude at
// most M errs by at most 2^-24 mu(M), mu(M) = 2^floor(log2 M), and that bound is reached. The
// oracle is the CPU's own conversion of doubles to float.
TEST(NoiseMagnitude, BoundsEveryF32RoundingOfAValueAtMostM) {
  EXPECT_EQ(noise_magnitude(1.0, true), 1.0);
  EXPECT_EQ(noise_magnitude(1.5, true), 1.0);
  EXPECT_EQ(noise_magnitude(0.75, true), 0.5);
  EXPECT_EQ(noise_magnitude(0x1.fffffp3, true), 8.0);
  EXPECT_EQ(noise_magnitude(0.0, true), 0.0);
  EXPECT_EQ(noise_magnitude(1.5, false), 1.5);
  EXPECT_TRUE(std::isinf(noise_magnitude(HUGE_VAL, true)));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-100, 100), unit(-1, 1);
  double tightest = 0;
  for (int i = 0; i < 200000; ++i) {
    const double m = std::exp2(exponent(rng));
    const double v = m * unit(rng);
    const double err = std::fabs(static_cast<double>(static_cast<float>(v)) - v);
    const double bound = 0x1p-24 * noise_magnitude(m, true);
    ASSERT_LE(err, bound) << "v " << v << " m " << m;
    tightest = std::max(tightest, err / bound);
  }
  EXPECT_GT(tightest, 0.99);  // reached: half a spacing of M's own binade
}

// The same for every rounding of a sequential f32 dot product: each partial sum's rounding errs
// by at most 2^-24 mu(M) with M = max(P, N) (the sums of the positive and of the negative
// products; every partial sum lies between -N and P, to first order).
TEST(NoiseMagnitude, BoundsEveryRoundingOfASequentialF32Sum) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> p(512);
    double pos = 0, neg = 0;
    for (float& t : p) {
      t = static_cast<float>(normal(rng) * normal(rng));
      (t > 0 ? pos : neg) += std::fabs(static_cast<double>(t));
    }
    const double m = std::max(pos, neg) * (1 + 0x1p-14);  // first order: B is far below this
    const double bound = 0x1p-24 * noise_magnitude(m, true);
    float s = 0;
    for (float t : p) {
      const double exact = static_cast<double>(s) + static_cast<double>(t);
      s += t;
      ASSERT_LE(std::fabs(static_cast<double>(s) - exact), bound);
    }
  }
}

/// A problem whose column 3 overflows the f32 S (1e30 weights against 1e10 activations), so
/// its block takes S in f64 from |x|: the buffer a kept scratch must not carry over.
std::unique_ptr<OwnedProblem> overflowing(Index m, Index k, std::uint64_t seed, const std::string& walk,
                                          std::vector<SegmentSpec> segments) {
  ProblemOptions o;
  o.m = m;
  o.k = k;
  o.seed = seed;
  o.x_dtype = DType::kF32;
  o.walk = walk;
  o.segments = std::move(segments);
  auto p = make_problem(o);
  if (o.segments.front().format == WeightFormat::kF32) {
    for (Index c = 0; c < k; ++c) p->f32_store[0][static_cast<std::size_t>(3 * k + c)] = 1e30f;
  }
  for (Index c = 0; c < k; ++c)
    p->x_f32[static_cast<std::size_t>(c)] = (c % 2 ? 1e10f : -1e10f) * static_cast<float>(1 + seed);
  for (Index i = 0; i < m * k; ++i) p->x_values[static_cast<std::size_t>(i)] = p->x_f32[static_cast<std::size_t>(i)];
  return p;
}

TEST(ReferenceScratch, KeptFromCallToCallItGivesEveryCallsOwnResults) {
  // Problems of other shapes, S in f64 or not, with a walk or two-valued weights, one after
  // another on one kept scratch, against each evaluated alone: every array bit for bit. The
  // second overflowing problem has more rows and larger activations than the first, whose |x|
  // a kept scratch once reused (S below the true S, and a read past the buffer's end).
  std::vector<std::unique_ptr<OwnedProblem>> problems;
  problems.push_back(overflowing(3, 64, 1, "", {{WeightFormat::kF32, 40, {}}}));
  problems.push_back(overflowing(8, 256, 2, "", {{WeightFormat::kF32, 300, {}}}));
  problems.push_back(overflowing(5, 128, 3, "split:4:fma", {{WeightFormat::kF32, 200, {}}}));
  SegmentSpec affine = af4_segment(130, Dequant::kF32, DType::kF32, 64, DequantOp::kEither);
  affine.af4.variant = Af4Variant::kAffine;
  problems.push_back(overflowing(4, 128, 4, "", {affine}));
  std::vector<ReferenceResult> alone;
  for (const auto& p : problems) {
    auto r = compute_reference(p->problem);
    ASSERT_TRUE(r.ok());
    alone.push_back(std::move(*r));
  }
  EXPECT_GT(alone[3].summary.ambiguous_weights, 0);  // the spread's buffers are used
  ReferenceScratch scratch;
  ReferenceOptions kept;
  kept.scratch = &scratch;
  for (const std::size_t i : {0, 1, 2, 3, 1, 0, 3, 2, 1}) {
    SCOPED_TRACE("problem " + std::to_string(i));
    auto r = compute_reference(problems[i]->problem, kept);
    ASSERT_TRUE(r.ok());
    const ReferenceResult& a = alone[i];
    EXPECT_EQ(r->y_star, a.y_star);
    EXPECT_EQ(r->s, a.s);
    EXPECT_EQ(r->bound, a.bound);
    EXPECT_EQ(r->tier, a.tier);
    EXPECT_EQ(r->center, a.center);
    EXPECT_EQ(r->sigma, a.sigma);
    EXPECT_EQ(r->walk, a.walk);
    EXPECT_EQ(r->summary.s_bf16_blocks, a.summary.s_bf16_blocks);
    for (std::size_t e = 0; e < a.accept.size(); ++e) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(r->accept[e].lo), std::bit_cast<std::uint32_t>(a.accept[e].lo)) << e;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(r->accept[e].hi), std::bit_cast<std::uint32_t>(a.accept[e].hi)) << e;
    }
  }
}

}  // namespace
}  // namespace ncert::reference
