// The exact reference and its rigorous bounds (docs/error-bounds.md):
//  - hand-checked small integer cases (y*, S, B and the intervals by hand);
//  - rigour: every f32 result of any summation order (sequential, FMA, pairwise, split-K,
//    reversed_fma, shuffled, round-toward-zero, a simulated truncating block accumulator) and of
//    every AF4 dequantization path lies inside the accepted interval: zero false failures;
//  - (power: planted errors caught, and the detection limits, are in linear_power_test.cc);
//  - the K-walk emulation equals independent naive loops bit for bit;
//  - results are bit-identical at 1 and 2 threads.
#include "reference/linear.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "reference/bound_stats.h"
#include "reference/k_walk.h"
#include "tests/common/independent_weights.h"
#include "tests/common/linear_fixture.h"
#include "tests/common/reference_threads.h"
#include "tests/common/summation_orders.h"

namespace ncert::reference {
namespace {

using ncert::testing::make_problem;
using ncert::testing::OwnedProblem;
using ncert::testing::ProblemOptions;
using ncert::testing::SegmentSpec;

// ---- an independent engine -------------------------------------------------------------------

using ncert::testing::engine_weights;

using ncert::testing::Order;
using ncert::testing::pairwise;
using ncert::testing::reversed_fma;
using ncert::testing::seq;
using ncert::testing::seq_fma;
using ncert::testing::shuffled;
using ncert::testing::split;

/// Recursive summation with every operation rounded toward zero by the FPU (f32-rz units).
float seq_round_toward_zero(const float* x, const float* w, Index k) {
  const int saved = std::fegetround();
  std::fesetround(FE_TOWARDZERO);
  float a = 0;
  for (Index c = 0; c < k; ++c) {
    float xv = x[c], wv = w[c];
    asm volatile("" : "+x"(xv), "+x"(wv), "+x"(a));
    a = a + xv * wv;
    asm volatile("" : "+x"(a));
  }
  std::fesetround(saved);
  return a;
}

double rz_bits(double v, int p) {
  if (v == 0.0) return 0.0;
  int e;
  const double m = std::frexp(v, &e);
  return std::ldexp(std::trunc(m * std::ldexp(1.0, p)), e - p);
}

/// A tensor-core-like block accumulator (Fasi et al. 2021; docs/error-bounds.md §2 "matrix-unit" and §6): blocks of
/// b exact products plus the accumulator, each term truncated to 24 bits at the block's largest
/// exponent (no guard bits), an exact sum, then normalization with truncation.
Order truncating_block(int b) {
  return [b](const float* x, const float* w, Index k) {
    double c = 0;
    for (Index i = 0; i < k; i += b) {
      std::vector<double> terms = {c};
      for (Index t = i; t < std::min<Index>(k, i + b); ++t) {
        terms.push_back(static_cast<double>(x[t]) * static_cast<double>(w[t]));  // exact
      }
      int emax = INT32_MIN;
      for (double t : terms) {
        if (t != 0) {
          int e;
          std::frexp(t, &e);
          emax = std::max(emax, e - 1);
        }
      }
      if (emax == INT32_MIN) continue;
      const double q = std::ldexp(1.0, emax - 23);
      double acc = 0;
      for (double t : terms) acc += std::trunc(t / q);  // integers < 2^29: exact
      c = rz_bits(acc * q, 24);
    }
    return static_cast<float>(c);
  };
}

/// The folded AF4 kernel of MLX qmv (s * sum(q x) + b * sum(x) per group), from plain params.
float folded_dot(const OwnedProblem& p, Index i, Index j) {
  for (std::size_t s = 0; s < p.weights.segments.size(); ++s) {
    const WeightSegment& seg = p.weights.segments[s];
    if (j < seg.row_begin || j >= seg.row_end) continue;
    const auto& a = p.af4_plain[s];
    const Index G = seg.af4.layout.group_size, groups = p.k / G, r = j - seg.row_begin;
    float total = 0;
    for (Index g = 0; g < groups; ++g) {
      float qx = 0, sx = 0;
      for (Index c = g * G; c < (g + 1) * G; ++c) {
        const float xv = p.x_values[i * p.k + c];
        const int q = a.q[r * p.k + c];
        const float level =
            seg.af4.layout.variant == Af4Variant::kCodebook ? seg.af4.layout.table[q] : static_cast<float>(q);
        qx = qx + level * xv;
        sx = sx + xv;
      }
      const float t = a.scale[r * groups + g] * qx + a.bias[r * groups + g] * sx;
      total = total + t;
    }
    return total;
  }
  return NAN;
}

std::vector<Order> all_orders(const std::string& accumulator) {
  std::vector<Order> orders = {seq,
                               seq_fma,
                               reversed_fma,
                               pairwise,
                               split(2, false),
                               split(3, true),
                               split(8, true),
                               split(16, false),
                               split(32, true),
                               shuffled(1),
                               shuffled(2)};
  if (accumulator == "f32-rz" || accumulator == "matrix-unit") {
    orders.push_back(seq_round_toward_zero);
  }
  if (accumulator == "matrix-unit") {
    for (int b : {1, 4, 8, 16}) orders.push_back(truncating_block(b));
  }
  return orders;
}

/// Runs every order for every element and asserts each result is inside the interval.
/// Returns the number of (element, order) results checked.
Index expect_all_orders_inside(const OwnedProblem& p, const std::string& accumulator) {
  auto ref = compute_reference(p.problem);
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  if (!ref.ok()) return 0;
  const auto orders = all_orders(accumulator);
  Index checked = 0;
  for (Index j = 0; j < p.n; ++j) {
    const bool folded = [&] {
      for (const auto& seg : p.weights.segments) {
        if (j >= seg.row_begin && j < seg.row_end && seg.format == WeightFormat::kAf4) {
          return seg.af4.layout.dequant == Dequant::kFolded;
        }
      }
      return false;
    }();
    const std::vector<float> w_mul = engine_weights(p, j, false);
    const std::vector<float> w_fma = engine_weights(p, j, true);
    for (Index i = 0; i < p.m; ++i) {
      const float* x = p.x_values.data() + i * p.k;
      std::vector<float> results;
      if (folded) {
        results.push_back(folded_dot(p, i, j));
      } else {
        for (const auto& order : orders) {
          results.push_back(order(x, w_mul.data(), p.k));
          results.push_back(order(x, w_fma.data(), p.k));
        }
      }
      const float bias = has_bias(p.problem.epilogue) ? p.bias[j] : 0.0f;
      const float res = has_residual(p.problem.epilogue) ? p.residual[i * p.n + j] : 0.0f;
      const Interval iv = ref->accept[ref->at(i, j)];
      for (float acc : results) {
        const float z = epilogue_value(acc, bias, res, p.problem);
        EXPECT_TRUE(contains(iv, z)) << "element (" << i << ", " << j << ") value " << z << " outside [" << iv.lo
                                     << ", " << iv.hi << "], y* = " << ref->y_star[ref->at(i, j)]
                                     << " B = " << ref->bound[ref->at(i, j)];
        ++checked;
      }
    }
  }
  return checked;
}

using ncert::testing::af4;

// ---- hand-checked ------------------------------------------------------------------------------

/// x = [1, 2, 3, 4] (f32), w = [1, -1, 2, 0.5] (bf16): y* = 1 - 2 + 6 + 2 = 7, S = 11.
std::unique_ptr<OwnedProblem> hand_problem(Epilogue epilogue, ResidualAt at, DType output) {
  ProblemOptions o;
  o.m = 1;
  o.k = 4;
  o.x_dtype = DType::kF32;
  o.segments = {{WeightFormat::kBf16, 1, {}}};
  o.epilogue = epilogue;
  o.residual_at = at;
  o.output = output;
  auto p = make_problem(o);
  p->x_f32 = {1, 2, 3, 4};
  p->x_values = p->x_f32;
  p->problem.x.data = p->x_f32.data();
  p->u16_store[0] = {f32_to_bf16(1.0f), f32_to_bf16(-1.0f), f32_to_bf16(2.0f), f32_to_bf16(0.5f)};
  p->weights.segments[0].values = p->u16_store[0].data();
  p->bias = {0.5f};
  p->residual = {1.0f};
  return p;
}

TEST(ReferenceHand, ExactValueSumAndBoundByHand) {
  auto p = hand_problem(Epilogue::kNone, ResidualAt::kF32, DType::kF32);
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->y_star[0], 7.0);
  // S = 11 is an f32 GEMM here (exact: small integers), inflated to (11 + 4 * 2^-122)
  // (1 + gamma_4(2^-24))(1 + 2^-50): 2.4e-7 relative (docs/error-bounds.md §1).
  const double u = 0x1p-24, g4 = 4 * u / (1 - 4 * u);
  EXPECT_GE(r->s[0], 11.0 * (1 + g4));
  EXPECT_LT(r->s[0], 11.0 * (1 + g4) * (1 + 1e-14));
  // B = gamma_4(2^-24) * S + eps_ref; gamma_4 = 4u / (1 - 4u), and the f64 reference's own
  // error eps_ref = gamma_6(2^-53) * S = 7.3e-15 adds 2.8e-9 relative.
  const double s_up = 11.0 * (1 + g4);
  const double eps_ref = 6 * 0x1p-53 * s_up;
  EXPECT_GE(r->bound[0], g4 * s_up + eps_ref);
  EXPECT_LT(r->bound[0], (g4 * s_up + eps_ref) * (1 + 1e-12));
  // B = 2.62e-6 = 5.5 ulp(7) (ulp = 2^-21): RD/RU land 6 ulps either side of 7.
  EXPECT_EQ(r->accept[0].lo, 7.0f - 6 * 0x1p-21f);
  EXPECT_EQ(r->accept[0].hi, 7.0f + 6 * 0x1p-21f);
  // The probabilistic tier 10 sqrt(4) u S = 1.3e-5 exceeds B here (lambda sqrt(K) > K for
  // K < lambda^2 = 100), so it is capped at B: the same interval.
  EXPECT_EQ(r->tier[0], r->bound[0]);
  EXPECT_EQ(r->expect[0].lo, r->accept[0].lo);
}

TEST(ReferenceHand, Bf16OutputAndResidualAtOutputByHand) {
  // v lies in [7 - 2.6e-6, 7 + 2.6e-6] (f32 interval [7 - 6 ulp, 7 + 6 ulp]). Declared rne (the
  // default): both ends round to nearest 7 (bf16 spacing in [4, 8) is 1/32), so 7 is the only
  // stored value a round-to-nearest engine can produce.
  auto p = hand_problem(Epilogue::kNone, ResidualAt::kF32, DType::kBf16);
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->accept[0].lo, 7.0f);
  EXPECT_EQ(r->accept[0].hi, 7.0f);
  // Declared any: lo rounds down to 7 - 1/32, hi up to 7 + 1/32.
  p->problem.output_rounding = OutputRounding::kAny;
  auto ra = compute_reference(p->problem);
  ASSERT_TRUE(ra.ok());
  EXPECT_EQ(ra->accept[0].lo, 6.96875f);
  EXPECT_EQ(ra->accept[0].hi, 7.03125f);
  // Declared rz: both ends truncate: 7 - 2.6e-6 to 7 - 1/32, 7 + 2.6e-6 to 7.
  p->problem.output_rounding = OutputRounding::kTowardZero;
  auto rz = compute_reference(p->problem);
  ASSERT_TRUE(rz.ok());
  EXPECT_EQ(rz->accept[0].lo, 6.96875f);
  EXPECT_EQ(rz->accept[0].hi, 7.0f);
  // out = bf16(fl32(bf16(v) + 1)): rne gives 8 from both ends; any gives lo = RD(6.96875 + 1) =
  // 7.96875 (exact), hi = RU(8.03125) = 8.0625 (spacing 1/16 in [8, 16)).
  auto q = hand_problem(Epilogue::kResidual, ResidualAt::kOutput, DType::kBf16);
  auto rq = compute_reference(q->problem);
  ASSERT_TRUE(rq.ok());
  EXPECT_EQ(rq->accept[0].lo, 8.0f);
  EXPECT_EQ(rq->accept[0].hi, 8.0f);
  EXPECT_EQ(rq->center[0], 8.0);
  q->problem.output_rounding = OutputRounding::kAny;
  auto rqa = compute_reference(q->problem);
  ASSERT_TRUE(rqa.ok());
  EXPECT_EQ(rqa->accept[0].lo, 7.96875f);
  EXPECT_EQ(rqa->accept[0].hi, 8.0625f);
}

TEST(ReferenceHand, BiasAndResidualAtF32ByHand) {
  auto p = hand_problem(Epilogue::kBiasResidual, ResidualAt::kF32, DType::kF32);
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok());
  // 7 +- 5.5 ulp(7) + 0.5 + 1 = 8.5 +- 2.62e-6; ulp(8.5) = 2^-20: +-2.75 -> 3 ulps out.
  EXPECT_EQ(r->center[0], 8.5);
  EXPECT_EQ(r->accept[0].lo, 8.5f - 3 * 0x1p-20f);
  EXPECT_EQ(r->accept[0].hi, 8.5f + 3 * 0x1p-20f);
  BoundStats st;
  st.add(0, 0, 8.5f, r->center[0], r->bound[0], r->accept[0], r->expect[0]);
  st.add(0, 0, 8.5f + 3 * 0x1p-20f, r->center[0], r->bound[0], r->accept[0], r->expect[0]);
  st.add(0, 0, 8.5f + 4 * 0x1p-20f, r->center[0], r->bound[0], r->accept[0], r->expect[0]);
  EXPECT_EQ(st.outside(), 1);
  EXPECT_EQ(st.first_outside().value, 8.5f + 4 * 0x1p-20f);
}

TEST(ReferenceHand, ExactInputsAreCertifiedExactlyByEveryOrder) {
  // Small integers: every order computes 7 exactly, which is the interval's centre.
  auto p = hand_problem(Epilogue::kNone, ResidualAt::kF32, DType::kF32);
  EXPECT_EQ(expect_all_orders_inside(*p, "f32-rn"), 22);
}

// ---- rigour --------------------------------------------------------------------------------------

struct RigourCase {
  std::string name;
  ProblemOptions options;
};

std::vector<RigourCase> rigour_cases() {
  std::vector<RigourCase> cases;
  std::uint64_t seed = 100;
  for (const std::string acc : {"f32-rn", "f32-rz", "matrix-unit"}) {
    for (Index k : {1, 7, 64, 300, 1024, 5120}) {
      for (float mean : {0.0f, 0.5f}) {
        ProblemOptions o;
        o.m = 2;
        o.k = k;
        o.x_mean = mean;
        o.w_mean = mean * 0.02f;
        o.accumulator = acc;
        o.segments = {{WeightFormat::kBf16, 3, {}}, {WeightFormat::kF32, 2, {}}};
        o.x_dtype = k % 2 ? DType::kF32 : DType::kBf16;
        o.seed = seed++;
        cases.push_back({acc + "_k" + std::to_string(k) + "_mean" + std::to_string(mean), o});
      }
      ProblemOptions pos;
      pos.m = 1;
      pos.k = k;
      pos.positive = true;  // all-positive: the worst case for truncating accumulators
      pos.accumulator = acc;
      pos.segments = {{WeightFormat::kBf16, 3, {}}};
      pos.seed = seed++;
      cases.push_back({acc + "_k" + std::to_string(k) + "_positive", pos});
    }
  }
  return cases;
}

TEST(ReferenceRigour, EverySummationOrderLiesInsideTheInterval) {
  Index checked = 0;
  for (const RigourCase& c : rigour_cases()) {
    SCOPED_TRACE(c.name);
    auto p = make_problem(c.options);
    checked += expect_all_orders_inside(*p, c.options.accumulator);
  }
  EXPECT_GT(checked, 5000);
}

TEST(ReferenceRigour, EpiloguesAndOutputTypes) {
  std::uint64_t seed = 500;
  for (Epilogue e : {Epilogue::kNone, Epilogue::kBias, Epilogue::kResidual, Epilogue::kBiasResidual}) {
    for (ResidualAt at : {ResidualAt::kF32, ResidualAt::kOutput}) {
      for (DType out : {DType::kF32, DType::kBf16}) {
        ProblemOptions o;
        o.m = 3;
        o.k = 256;
        o.epilogue = e;
        o.residual_at = at;
        o.output = out;
        o.segments = {{WeightFormat::kBf16, 4, {}}};
        o.seed = seed++;
        SCOPED_TRACE(std::string(epilogue_name(e)) + "/" + std::string(residual_at_name(at)) + "/" +
                     std::string(dtype_name(out)));
        auto p = make_problem(o);
        expect_all_orders_inside(*p, "f32-rn");
      }
    }
  }
}

TEST(ReferenceRigour, EveryAf4DequantPathAndVariant) {
  std::uint64_t seed = 900;
  for (Dequant dq : {Dequant::kExact, Dequant::kF32, Dequant::kOutput, Dequant::kFolded}) {
    for (DType scale : {DType::kBf16, DType::kF16, DType::kF32}) {
      if (dq == Dequant::kExact && scale == DType::kF32) continue;  // w must be exact in f32
      ProblemOptions o;
      o.m = 3;
      o.k = 384;
      o.accumulator = dq == Dequant::kFolded ? "f32-rn" : "matrix-unit";
      o.segments = {
          {WeightFormat::kAf4, 3, af4(Af4Variant::kAffine, Af4Packing::kU32Lsb, 64, dq, scale)},
          {WeightFormat::kAf4, 2, af4(Af4Variant::kAffine, Af4Packing::kU8Msb, 32, dq, scale)},
          {WeightFormat::kAf4, 2, af4(Af4Variant::kCodebook, Af4Packing::kU8Lsb, 128, dq, scale, Af4Codebook::kNf4)},
          {WeightFormat::kBf16, 1, {}}};
      o.seed = seed++;
      SCOPED_TRACE(std::string(dequant_name(dq)) + "/" + std::string(dtype_name(scale)));
      auto p = make_problem(o);
      expect_all_orders_inside(*p, o.accumulator);
    }
  }
}

// ---- K-walk emulation against naive loops ----------------------------------------------------

TEST(ReferenceWalk, EmulationMatchesNaiveLoopsBitForBit) {
  std::mt19937_64 rng(77);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct W {
    std::string walk;
    Index k;
  };
  const std::vector<W> walks = {
      {"seq", 5},       {"seq", 1001},        {"seq-fma", 17}, {"seq-fma", 4099},      {"split:3", 111},
      {"split:5", 250}, {"split:7:fma", 777}, {"split:1", 33}, {"split:64:fma", 4096}, {"split:9", 9}};
  for (const W& c : walks) {
    SCOPED_TRACE(c.walk + " K=" + std::to_string(c.k));
    ProblemOptions o;
    o.m = 3;
    o.k = c.k;
    o.x_dtype = DType::kF32;
    o.walk = c.walk;
    o.segments = {{WeightFormat::kF32, 37, {}}};  // 37 columns: not a multiple of any vector width
    o.seed = rng();
    auto p = make_problem(o);
    auto r = compute_reference(p->problem);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const KWalk& kw = p->problem.walk;
    for (Index i = 0; i < p->m; ++i) {
      for (Index j = 0; j < p->n; ++j) {
        const float* x = p->x_values.data() + i * p->k;
        const float* w = p->f32_store[0].data() + j * p->k;
        // Naive, written from the spec text: parts of K/P, each from 0, then summed in order.
        float total = 0;
        const Index len = c.k / kw.parts;
        for (Index part = 0; part < kw.parts; ++part) {
          float acc = 0;
          for (Index t = part * len; t < (part + 1) * len; ++t) {
            if (kw.fma) {
              acc = std::fma(x[t], w[t], acc);
            } else {
              const float prod = x[t] * w[t];
              acc = acc + prod;
            }
          }
          total = part == 0 ? acc : total + acc;
        }
        ASSERT_EQ(f32_bits(r->walk[r->at(i, j)]), f32_bits(total)) << i << "," << j;
        ASSERT_EQ(f32_bits(walk_dot(kw, x, w, p->k)), f32_bits(total));
      }
    }
  }
}

TEST(ReferenceWalk, EpilogueConventionIsAppliedBitForBit) {
  ProblemOptions o;
  o.m = 2;
  o.k = 96;
  o.walk = "seq";
  o.epilogue = Epilogue::kBiasResidual;
  o.residual_at = ResidualAt::kOutput;
  o.output = DType::kBf16;
  o.segments = {{WeightFormat::kBf16, 9, {}}};
  auto p = make_problem(o);
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok());
  for (Index i = 0; i < p->m; ++i) {
    for (Index j = 0; j < p->n; ++j) {
      std::vector<float> w = engine_weights(*p, j, true);
      float acc = seq(p->x_values.data() + i * p->k, w.data(), p->k);
      float v = acc + p->bias[j];
      float out = bf16_to_f32(f32_to_bf16(v));
      out = bf16_to_f32(f32_to_bf16(out + p->residual[i * p->n + j]));
      ASSERT_EQ(f32_bits(r->walk[r->at(i, j)]), f32_bits(out));
    }
  }
}

// ---- determinism ------------------------------------------------------------------------------

TEST(ReferenceDeterminism, BitIdenticalAtOneAndTwoThreads) {
  ProblemOptions o;
  o.m = 7;
  o.k = 1000;
  o.walk = "split:8:fma";
  o.epilogue = Epilogue::kBiasResidual;
  o.output = DType::kBf16;
  o.segments = {{WeightFormat::kAf4, 70, af4(Af4Variant::kAffine, Af4Packing::kU32Lsb, 40, Dequant::kF32)},
                {WeightFormat::kBf16, 130, {}},
                {WeightFormat::kF32, 60, {}}};
  auto p = make_problem(o);
  ReferenceOptions ro;
  ro.block_cols = 32;
  auto [one, two] = ncert::testing::reference_at_one_and_two_threads(p->problem, ro);
  ASSERT_TRUE(one.ok() && two.ok());
  using ncert::testing::same_array_bits;
  EXPECT_TRUE(same_array_bits(one->y_star, two->y_star));
  EXPECT_TRUE(same_array_bits(one->s, two->s));
  EXPECT_TRUE(same_array_bits(one->bound, two->bound));
  EXPECT_TRUE(same_array_bits(one->tier, two->tier));
  EXPECT_TRUE(same_array_bits(one->accept, two->accept));
  EXPECT_TRUE(same_array_bits(one->walk, two->walk));
}

TEST(ReferenceSummary, FlagsNonFiniteAndZeroInputs) {
  ProblemOptions o;
  o.m = 2;
  o.k = 8;
  o.x_dtype = DType::kF32;
  o.segments = {{WeightFormat::kF32, 3, {}}};
  auto p = make_problem(o);
  p->x_f32[5] = NAN;
  p->f32_store[0][10] = INFINITY;
  auto r = compute_reference(p->problem);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->summary.nonfinite_x, 1);
  EXPECT_EQ(r->summary.first_nonfinite_x, 5);
  EXPECT_EQ(r->summary.nonfinite_w, 1);
  EXPECT_EQ(r->summary.first_nonfinite_w, 10);
  std::fill(p->x_f32.begin(), p->x_f32.end(), 0.0f);
  auto z = compute_reference(p->problem);
  EXPECT_TRUE(z->summary.all_zero_x);
  EXPECT_FALSE(z->summary.all_zero_w);
}

TEST(ReferenceErrors, InvalidProblemsAreRejected) {
  ProblemOptions o;
  o.k = 10;
  o.walk = "split:3";
  o.segments = {{WeightFormat::kBf16, 2, {}}};
  auto p = make_problem(o);
  EXPECT_EQ(compute_reference(p->problem).status().code(), ErrorCode::kGuardWalkSplit);
  p->problem.walk = {};
  p->problem.epilogue = Epilogue::kBias;
  p->problem.bias = {};
  EXPECT_EQ(compute_reference(p->problem).status().code(), ErrorCode::kShapeMismatch);
}

TEST(ReferenceErrors, Af4SegmentsTheHostGuardWouldRefuseAreRefusedNotRead) {
  // A caller that evaluates without the host guards (a run's lm_head, alone) got a read past
  // the arrays or a null zero-point table; the reference refuses both itself.
  ProblemOptions o;
  o.k = 64;
  o.segments = {ncert::testing::af4_segment(16, reference::Dequant::kExact, DType::kBf16, 32)};
  auto p = make_problem(o);
  ASSERT_TRUE(compute_reference(p->problem).ok());
  reference::Af4View& a = p->weights.segments[0].af4;
  a.layout.group_size = 24;  // does not divide K = 64
  auto r = compute_reference(p->problem);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kGuardAf4Geometry);
  EXPECT_NE(r.status().message().find("group_size 24 does not divide K = 64"), std::string::npos)
      << r.status().to_string();
  a.layout.group_size = 32;
  a.layout.variant = reference::Af4Variant::kZeroPoint;
  a.layout.dequant_op = reference::DequantOp::kSubMul;
  a.zero_points = nullptr;
  r = compute_reference(p->problem);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("zero points"), std::string::npos) << r.status().to_string();
}

TEST(AccumulatorDeclaration, TheDocumentedFormsParseAndNearMissesAreRefused) {
  for (const char* ok : {"f32-rn", "f32-rz", "matrix-unit", "u=0.001", "u=+0.001", "u=.001", "u=0x1p-24", "u=1e-300",
                         "u= 0.001", "u=\t0.001"}) {
    EXPECT_TRUE(parse_accumulator(ok).ok()) << ok;
  }
  EXPECT_EQ(parse_accumulator("u=0x1p-24")->u_eff, 0x1p-24);
  EXPECT_TRUE(parse_accumulator("u=0x1p-24")->round_to_nearest);
  EXPECT_FALSE(parse_accumulator("u=0.001")->round_to_nearest);
  // A leading blank loads (strtod skips it, and dumps written so since format v1 keep loading, as
  // python/ncert_dump's parse agrees); a trailing one, signs and bounds do not.
  for (const char* bad : {"u=0.001 ", "u=", "u=0", "u=-0.001", "u=0.5", "u=nan", "u=inf", "u=1/3", "u=0.001x", "f32",
                          "F32-RN", " f32-rn"}) {
    const auto a = parse_accumulator(bad);
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), ErrorCode::kAccumulatorUnknown) << bad;
    }
  }
}

TEST(ReferenceWalk, YStarAndSAreTheSameWithTheWalksWeightsAsWithout) {
  // With a walk, y*'s weight blocks, and S's blocks of weight magnitudes, are packed from the
  // walk's f32 panels wherever the exact weights are the kernel's widened (reference/detail/
  // gemm.h); without one, from the decoded rows. Both must give every number bit for bit (S's
  // magnitudes raise subnormal weights to 2^-126 either way), for weights where they are (f32, bf16,
  // zero points under sub-mul: the vector path at group 32, the table at 20) and where they are
  // not (zero points dequantized exactly), alone and mixed in one block; block widths whose row
  // panels are 24, 16 and 8 wide, with last blocks of 8, 16 and 12 columns.
  using ncert::testing::af4_segment;
  const auto zero_point = [](Index rows, Dequant dq, Index group) {
    SegmentSpec s = af4_segment(rows, dq, DType::kF32, group, DequantOp::kSubMul);
    s.af4.variant = Af4Variant::kZeroPoint;
    return s;
  };
  const std::vector<std::pair<std::string, std::vector<SegmentSpec>>> weights = {
      {"f32", {{WeightFormat::kF32, 0, {}}}},
      {"bf16", {{WeightFormat::kBf16, 0, {}}}},
      {"zero-point sub-mul, group 32", {zero_point(0, Dequant::kF32, 32)}},
      {"zero-point sub-mul, group 20", {zero_point(0, Dequant::kF32, 20)}},
      {"zero-point exact", {zero_point(0, Dequant::kExact, 32)}},
      {"f32 then zero-point exact", {{WeightFormat::kF32, 24, {}}, zero_point(0, Dequant::kExact, 32)}},
      {"f32 with NaN and infinite weights", {{WeightFormat::kF32, 0, {}}}},
      {"f32 with subnormal and signed-zero weights", {{WeightFormat::kF32, 0, {}}}},
  };
  for (const auto& [what, segments] : weights) {
    for (const auto& [block, tail] : {std::pair<Index, Index>{128, 8}, {40, 16}, {24, 12}, {32, 8}}) {
      SCOPED_TRACE(what + ", blocks of " + std::to_string(block) + ", last " + std::to_string(tail));
      ProblemOptions o;
      o.m = 8;
      o.k = 320;
      o.x_dtype = DType::kF32;
      o.walk = "seq-fma";
      o.segments = segments;
      Index rows = 2 * block + tail;
      for (SegmentSpec& seg : o.segments) {
        if (seg.rows == 0) seg.rows = rows;
        rows -= seg.rows;
      }
      auto p = make_problem(o);
      if (what == "f32 with NaN and infinite weights") {
        p->f32_store[0][3] = NAN;
        p->f32_store[0][o.k + 7] = INFINITY;
        p->f32_store[0][5 * o.k + 1] = -INFINITY;
      }
      if (what == "f32 with subnormal and signed-zero weights") {
        for (Index j = 0; j < 2 * block + tail; j += 3) {
          p->f32_store[0][j * o.k + j % o.k] = j % 2 == 0 ? -0x1p-140f : -0.0f;
          p->f32_store[0][j * o.k + (j + 1) % o.k] = 0x1p-127f;
        }
        // A column of subnormal weights alone: its S is the raised magnitudes' sum.
        for (Index c = 0; c < o.k; ++c) p->f32_store[0][4 * o.k + c] = c % 2 == 0 ? 0x1p-140f : -0x1p-133f;
      }
      ReferenceOptions with, without;
      with.block_cols = without.block_cols = block;
      without.emulate_walk = false;
      auto a = compute_reference(p->problem, with);
      auto b = compute_reference(p->problem, without);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_FALSE(a->walk.empty());
      EXPECT_EQ(a->summary.nonfinite_w, b->summary.nonfinite_w);
      EXPECT_EQ(a->summary.first_nonfinite_w, b->summary.first_nonfinite_w);
      for (std::size_t e = 0; e < a->y_star.size(); ++e) {
        ASSERT_EQ(std::bit_cast<std::uint64_t>(a->y_star[e]), std::bit_cast<std::uint64_t>(b->y_star[e])) << e;
        ASSERT_EQ(std::bit_cast<std::uint64_t>(a->s[e]), std::bit_cast<std::uint64_t>(b->s[e])) << e;
        ASSERT_EQ(std::bit_cast<std::uint64_t>(a->bound[e]), std::bit_cast<std::uint64_t>(b->bound[e])) << e;
        ASSERT_EQ(std::bit_cast<std::uint64_t>(a->center[e]), std::bit_cast<std::uint64_t>(b->center[e])) << e;
      }
    }
  }
}

TEST(ReferenceWalk, FourBitSubMulBlocksTakeSFromTheF32GemmUnlessTheActivationsAreBf16) {
  // Zero points under sub-mul with f32 scales of 2^-7: every weight (q - zp) 2^-7 is a bf16
  // number, so without a walk S comes from bf16 magnitudes (the activations' rounded up where
  // they are f32). With the walk emulated the decoder stores no magnitudes for these blocks
  // (where Eigen packs f32 blocks in panels of three register packets: AVX2 and AVX-512 builds)
  // and S comes from the f32 GEMM over the panels, unless the activations are bf16 numbers:
  // then S still comes from bf16 magnitudes, the weights' rounded up.
  using ncert::testing::af4_segment;
  using TraitsF = Eigen::internal::gebp_traits<float, float>;
  constexpr bool kPanels = TraitsF::mr == 3 * TraitsF::LhsProgress;
  for (const DType act : {DType::kF32, DType::kBf16}) {
    SCOPED_TRACE(act == DType::kF32 ? "f32 activations" : "bf16 activations");
    ProblemOptions o;
    o.m = 8;
    o.k = 320;
    o.x_dtype = act;
    o.walk = "seq-fma";
    SegmentSpec seg = af4_segment(256, Dequant::kF32, DType::kF32, 32, DequantOp::kSubMul);
    seg.af4.variant = Af4Variant::kZeroPoint;
    o.segments = {seg};
    auto p = make_problem(o);
    std::vector<std::uint8_t>& scales = p->byte_store[p->seg_slot[0] + 1];
    const float two_to_minus_7 = 0x1p-7f;
    for (std::size_t i = 0; i < scales.size(); i += 4) std::memcpy(&scales[i], &two_to_minus_7, 4);
    for (float& sc : p->af4_plain[0].scale) sc = two_to_minus_7;
    ReferenceOptions with, without;
    with.block_cols = without.block_cols = 128;
    without.emulate_walk = false;
    auto a = compute_reference(p->problem, with);
    auto b = compute_reference(p->problem, without);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_FALSE(a->walk.empty());
    EXPECT_EQ(b->summary.s_bf16_blocks, 2);
    // Without those panels there is no sub-mul path: the magnitudes are stored.
    EXPECT_EQ(a->summary.s_bf16_blocks, act == DType::kBf16 || !kPanels ? 2 : 0);
  }
}

TEST(ReferenceWalk, TileDotsReadTheWalksPanelsAsTheExactRows) {
  // Where a block's exact weights are not stored, column_tile_dots reads the column from the
  // walk's panel (16 columns, or the narrower last one): the same f32 values, the same dots.
  std::mt19937_64 rng(41);
  std::normal_distribution<float> value(0, 1);
  const Index rows = 3, K = 100, width = 37;  // two full panels and one of 5 columns
  std::vector<float> x(static_cast<std::size_t>(rows * K)), panels(static_cast<std::size_t>(width * K));
  std::vector<double> exact(panels.size());
  for (float& v : x) v = value(rng);
  for (Index j = 0; j < width; ++j) {
    const Index p0 = j - j % 16, pw = std::min<Index>(16, width - p0);
    for (Index c = 0; c < K; ++c) {
      const float w = value(rng);
      exact[static_cast<std::size_t>(j * K + c)] = w;
      panels[static_cast<std::size_t>(p0 * K + c * pw + j - p0)] = w;
    }
  }
  ReferenceBlock from_rows, from_panels;
  for (ReferenceBlock* b : {&from_rows, &from_panels}) {
    b->col_begin = 64;
    b->col_end = 64 + width;
    b->rows = rows;
    b->x_f32 = x.data();
    b->k = K;
    b->tile = 16;
    b->tiles = (K + 15) / 16;
  }
  from_rows.w_exact = exact.data();
  from_panels.w_panels = panels.data();
  std::vector<float> a(static_cast<std::size_t>(rows * from_rows.tiles)), b(a.size());
  for (Index c = from_rows.col_begin; c < from_rows.col_end; ++c) {
    column_tile_dots(from_rows, c, a.data());
    column_tile_dots(from_panels, c, b.data());
    for (std::size_t e = 0; e < a.size(); ++e) ASSERT_EQ(f32_bits(a[e]), f32_bits(b[e])) << c << ", " << e;
  }
}

}  // namespace
}  // namespace ncert::reference
