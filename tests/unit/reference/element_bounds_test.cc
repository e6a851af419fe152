// The reference's per-element loop in eight-element steps (reference/detail/element_bounds.cc)
// gives element_bounds_one's bits for every element: for every output type, output rounding,
// epilogue and residual position, bound model, and values from ordinary ones to the special
// cases the vector steps hand back (sums that cancel to 0 or overflow, infinities, NaN,
// subnormal noise scales, f32 overflow, bf16 ties).
#include "reference/detail/element_bounds.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/common/same_bits.h"

namespace ncert::reference {
namespace {

using ncert::testing::same_or_both_nan;

/// One row of inputs, with every array the loop reads.
struct Row {
  std::vector<double> y, s, spread, a_l1;
  std::vector<float> bias, residual;
};

struct Outputs {
  explicit Outputs(std::size_t n) : bound(n), tier(n), slack(n), sigma(n), center(n), accept(n), expect(n) {}
  std::vector<double> bound, tier, slack, sigma, center;
  std::vector<Interval> accept, expect;
  detail::ElementBoundsOut view() {
    return {bound.data(), tier.data(), slack.data(), sigma.data(), center.data(), accept.data(), expect.data()};
  }
};

/// Ordinary values over many binades, with special values and the cases the vector steps hand
/// back mixed in at random places (so that they share a step with ordinary lanes).
Row make_row(std::mt19937_64& rng, std::size_t n) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> binade(-40, 40);
  std::uniform_int_distribution<int> pick(0, 19);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Row r;
  for (std::size_t e = 0; e < n; ++e) {
    const double scale = std::ldexp(1.0, binade(rng));
    double y = unit(rng) * scale;
    double s = std::fabs(y) * (1 + 4 * std::fabs(unit(rng))) + 1e-3 * scale;
    float bias = static_cast<float>(unit(rng) * scale);
    float res = static_cast<float>(unit(rng) * scale);
    switch (pick(rng)) {
      case 0:
        y = 0.0;
        break;
      case 1:
        y = -0.0;
        s = 0.0;
        break;
      case 2:
        y = inf;
        break;
      case 3:
        y = nan;
        break;
      case 4:
        s = inf;
        break;
      case 5:
        y = 3.4e38;
        s = 1e36;
        break;  // f32 overflow of the interval's ends
      case 6:
        y = 1e-310;
        s = 2e-310;
        break;  // subnormal noise scale where eta is 0
      case 7:
        bias = std::numeric_limits<float>::infinity();
        break;
      case 8:
        res = std::numeric_limits<float>::quiet_NaN();
        break;
      case 9:
        bias = static_cast<float>(-y);
        break;  // a sum that cancels
      case 10:
        y = 1.0 + 0x1p-8;
        s = 0x1p-30;
        break;  // next to a bf16 tie
      case 11:
        y = -(1.0 + 0x1p-8);
        s = 0x1p-30;
        break;
      default:
        break;
    }
    r.y.push_back(y);
    r.s.push_back(s);
    r.spread.push_back(std::fabs(unit(rng)) * 1e-3 * scale);
    r.a_l1.push_back(std::fabs(unit(rng)) * 100 * scale);
    r.bias.push_back(bias);
    r.residual.push_back(res);
  }
  return r;
}

std::vector<BoundTerms> term_models() {
  BoundTerms rn;
  rn.gamma_acc = 5120 * 0x1p-24 / (1 - 5120 * 0x1p-24);
  rn.tier_coef = 6 * std::sqrt(5120.0) * 0x1p-24;
  rn.eps_coef = 5122 * 0x1p-53;
  rn.eta_base = 2 * 5120 + 8;
  rn.noise_coef = std::sqrt(5120.0) * 0x1p-24;
  rn.noise_in_binades = true;
  BoundTerms plain = rn;
  plain.noise_in_binades = false;
  plain.shared_coef = 2 * 0x1p-24;
  plain.tier_coef = 1.0;  // T above B: clipped to B
  BoundTerms biased = rn;
  biased.round_to_nearest = false;
  biased.noise_coef = 0;
  BoundTerms no_eta = rn;  // subnormal scales reach the noise magnitude
  no_eta.eta_base = 0;
  return {rn, plain, biased, no_eta};
}

std::vector<ProjectionArithmetic> arithmetics() {
  std::vector<ProjectionArithmetic> all;
  for (DType output : {DType::kF32, DType::kBf16, DType::kF16}) {
    for (OutputRounding rounding : {OutputRounding::kNearestEven, OutputRounding::kTowardZero, OutputRounding::kAny}) {
      for (Epilogue epilogue : {Epilogue::kNone, Epilogue::kBias, Epilogue::kResidual, Epilogue::kBiasResidual}) {
        for (ResidualAt at : {ResidualAt::kF32, ResidualAt::kOutput}) {
          if (!has_residual(epilogue) && at == ResidualAt::kOutput) continue;
          ProjectionArithmetic a;
          a.output = output;
          a.output_rounding = rounding;
          a.epilogue = epilogue;
          a.residual_at = at;
          all.push_back(a);
        }
      }
    }
  }
  return all;
}

TEST(ElementBounds, StepsGiveTheOneElementBitsForEveryArithmetic) {
  std::mt19937_64 rng(20261205);
  constexpr std::size_t kN = 203;  // steps of 8 and a tail of 3
  Index compared = 0;
  for (const BoundTerms& terms : term_models()) {
    for (const ProjectionArithmetic& a : arithmetics()) {
      for (bool spread : {false, true}) {
        const Row row = make_row(rng, kN);
        detail::ElementBoundsIn in;
        in.y = row.y.data();
        in.s = row.s.data();
        in.spread = spread ? row.spread.data() : nullptr;
        in.a_l1 = row.a_l1.data();
        in.bias = has_bias(a.epilogue) ? row.bias.data() : nullptr;
        in.residual = has_residual(a.epilogue) ? row.residual.data() : nullptr;
        in.x_l1 = terms.eta_base == 0 ? 0.0 : 12.5;
        Outputs stepped(kN), one(kN);
        // A range that starts off a multiple of 8, as a run of columns after a segment border does.
        detail::element_bounds_row(terms, a, in, 1, static_cast<Index>(kN), stepped.view());
        for (Index e = 1; e < static_cast<Index>(kN); ++e) detail::element_bounds_one(terms, a, in, e, one.view());
        for (std::size_t e = 1; e < kN; ++e) {
          const std::string where = "element " + std::to_string(e) + " y " + std::to_string(row.y[e]) + " output " +
                                    std::string(dtype_name(a.output)) + " epilogue " +
                                    std::string(epilogue_name(a.epilogue));
          ASSERT_TRUE(same_or_both_nan(stepped.bound[e], one.bound[e])) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.tier[e], one.tier[e])) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.slack[e], one.slack[e])) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.sigma[e], one.sigma[e])) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.center[e], one.center[e])) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.accept[e].lo, one.accept[e].lo)) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.accept[e].hi, one.accept[e].hi)) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.expect[e].lo, one.expect[e].lo)) << where;
          ASSERT_TRUE(same_or_both_nan(stepped.expect[e].hi, one.expect[e].hi)) << where;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 10000);
}

// The vector steps run where they can: a build for AVX-512 takes them for f32, bf16
// and f16 outputs (the test above would otherwise compare the one-element code with itself).
TEST(ElementBounds, AnAvx512BuildTakesTheSteps) {
  ProjectionArithmetic f32, bf16_rz, f16, bf16_any;
  bf16_rz.output = DType::kBf16;
  bf16_rz.output_rounding = OutputRounding::kTowardZero;
  f16.output = DType::kF16;
  bf16_any.output = DType::kBf16;
  bf16_any.output_rounding = OutputRounding::kAny;
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__F16C__)
  EXPECT_TRUE(detail::element_bounds_vectorized(f32));
  EXPECT_TRUE(detail::element_bounds_vectorized(bf16_rz));
  EXPECT_TRUE(detail::element_bounds_vectorized(f16));
#else
  EXPECT_FALSE(detail::element_bounds_vectorized(f32));
  EXPECT_FALSE(detail::element_bounds_vectorized(f16));
#endif
  EXPECT_FALSE(detail::element_bounds_vectorized(bf16_any));
  ProjectionArithmetic fp8;  // not an output type: left to the one-element code, whatever it does
  fp8.output = DType::kE4m3;
  EXPECT_FALSE(detail::element_bounds_vectorized(fp8));
}

}  // namespace
}  // namespace ncert::reference
