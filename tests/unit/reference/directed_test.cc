// The reference's inline directed roundings (reference/detail/directed.h) are the functions of
// float_bits.h, bit for bit: on every pair of edge values (zeros, subnormals, the normal range's
// ends, overflow, infinities, NaN) and on millions of random inputs, including sums that cancel
// and conversions that land next to f32 values. float_bits.h's versions are themselves tested
// against the FPU's own rounding modes (float_bits_test.cc).
#include "reference/detail/directed.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reference/bounds.h"
#include "reference/float_bits.h"
#include "tests/common/same_bits.h"

namespace ncert::reference {
namespace {

using ncert::testing::same_or_both_nan;

std::vector<double> edge_doubles() {
  const double inf = std::numeric_limits<double>::infinity();
  const double dmin = std::numeric_limits<double>::denorm_min();
  std::vector<double> base = {0.0,
                              dmin,
                              2 * dmin,
                              DBL_MIN,
                              DBL_MIN - dmin,
                              std::nextafter(DBL_MIN, 1.0),
                              0x1p-149,
                              0x1p-150,
                              0x1.8p-150,
                              0x1p-126,
                              std::nextafter(0x1p-126, 0.0),
                              1.0,
                              std::nextafter(1.0, 2.0),
                              std::nextafter(1.0, 0.0),
                              1.0 + 0x1p-24,
                              1.0 + 0x1p-25,
                              1.0 + 0x1p-29,
                              3.0,
                              0.1,
                              static_cast<double>(FLT_MAX),
                              static_cast<double>(FLT_MAX) * (1 + 0x1p-30),
                              0x1p128,
                              std::nextafter(0x1p128, 0.0),
                              1e300,
                              DBL_MAX,
                              std::nextafter(DBL_MAX, 0.0),
                              inf,
                              std::numeric_limits<double>::quiet_NaN()};
  std::vector<double> all;
  for (double v : base) {
    all.push_back(v);
    all.push_back(-v);
  }
  return all;
}

TEST(DirectedTwins, NextStepsMatchNextafterOnEdges) {
  for (double v : edge_doubles()) {
    EXPECT_TRUE(same_or_both_nan(detail::next_down(v), std::nextafter(v, -INFINITY))) << v;
    EXPECT_TRUE(same_or_both_nan(detail::next_up(v), std::nextafter(v, INFINITY))) << v;
    const float f = static_cast<float>(v);
    EXPECT_TRUE(same_or_both_nan(detail::next_down(f), std::nextafter(f, -INFINITY))) << f;
    EXPECT_TRUE(same_or_both_nan(detail::next_up(f), std::nextafter(f, INFINITY))) << f;
  }
}

TEST(DirectedTwins, AddsMatchOnEveryPairOfEdges) {
  const auto v = edge_doubles();
  for (double a : v) {
    for (double b : v) {
      EXPECT_TRUE(same_or_both_nan(detail::add_down(a, b), add_down(a, b))) << a << " + " << b;
      EXPECT_TRUE(same_or_both_nan(detail::add_up(a, b), add_up(a, b))) << a << " + " << b;
    }
  }
}

TEST(DirectedTwins, ConversionsMatchOnEdges) {
  for (double x : edge_doubles()) {
    EXPECT_TRUE(same_or_both_nan(detail::f64_to_f32_down(x), f64_to_f32_down(x))) << x;
    EXPECT_TRUE(same_or_both_nan(detail::f64_to_f32_up(x), f64_to_f32_up(x))) << x;
  }
}

TEST(DirectedTwins, RandomAddsAndConversionsMatch) {
  std::mt19937_64 rng(2024);
  std::uniform_int_distribution<std::uint64_t> any_bits;
  std::normal_distribution<double> n(0.0, 1.0);
  std::uniform_int_distribution<int> shift(-60, 60);
  Index mismatches = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    double a, b;
    switch (i % 4) {
      case 0:  // any bit patterns: every exponent, subnormals, NaN, inf
        a = std::bit_cast<double>(any_bits(rng));
        b = std::bit_cast<double>(any_bits(rng));
        break;
      case 1:  // the reference's use: y* -+ B with B far below |y*|
        a = n(rng) * 100;
        b = std::fabs(n(rng)) * std::ldexp(1.0, shift(rng) / 3 - 10);
        break;
      case 2:  // near-cancellation
        a = n(rng);
        b = -a * (1 + n(rng) * 0x1p-40);
        break;
      default:  // magnitudes apart by up to 2^60
        a = n(rng);
        b = n(rng) * std::ldexp(1.0, shift(rng));
        break;
    }
    mismatches += !same_or_both_nan(detail::add_down(a, b), add_down(a, b));
    mismatches += !same_or_both_nan(detail::add_up(a, b), add_up(a, b));
    // Conversions: the raw values and values one f64 ulp beside an f32 value.
    const double near_f32 = static_cast<double>(static_cast<float>(a));
    for (double x : {a, b, near_f32, std::nextafter(near_f32, INFINITY), std::nextafter(near_f32, -INFINITY)}) {
      mismatches += !same_or_both_nan(detail::f64_to_f32_down(x), f64_to_f32_down(x));
      mismatches += !same_or_both_nan(detail::f64_to_f32_up(x), f64_to_f32_up(x));
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DirectedTwins, PropagatedIntervalsAreOutwardEvenWhenTheSumIsExact) {
  // An exact y* +- B needs no step; an inexact one steps outward by one ulp.
  EXPECT_EQ(detail::add_down(1.0, -0.5), 0.5);
  EXPECT_EQ(detail::add_up(1.0, 0x1p-60), std::nextafter(1.0, 2.0));
  EXPECT_EQ(detail::add_down(1.0, -0x1p-60), std::nextafter(1.0, 0.0));
  EXPECT_EQ(detail::add_down(-1.0, -0x1p-60), std::nextafter(-1.0, -2.0));
  EXPECT_EQ(detail::f64_to_f32_down(-1e-60), -std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(detail::f64_to_f32_up(1e-60), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(detail::f64_to_f32_down(1e39), FLT_MAX);
  EXPECT_EQ(detail::f64_to_f32_up(-1e39), -FLT_MAX);
}

TEST(Propagate, AValueEveryOrderOverflowsIsInfinityUnderRoundToNearest) {
  // x = [3e38, 3e38], w = [2, 2]: y* = 1.2e39, past FLT_MAX by 3.5x. Every f32-rn order
  // overflows to +inf; rounding y* - B down into f32 accepted FLT_MAX (a review's).
  ProjectionArithmetic a;
  const double inf = std::numeric_limits<double>::infinity();
  const Interval rn = propagate(1.2e39, 1e33, 0.0f, 0.0f, a);
  EXPECT_EQ(rn.lo, inf);
  EXPECT_EQ(rn.hi, inf);
  EXPECT_EQ(propagate(-1.2e39, 1e33, 0.0f, 0.0f, a).hi, -inf);
  // Half a spacing past FLT_MAX rounds to infinity (the tie goes to the even 2^128); below it,
  // to FLT_MAX.
  EXPECT_EQ(propagate(0x1.ffffffp127, 0, 0.0f, 0.0f, a).lo, inf);
  EXPECT_EQ(propagate(0x1.fffffefffffffp127, 0, 0.0f, 0.0f, a).lo, FLT_MAX);
  // A bias that carries the sum past it: fl32(v + bias) is infinity too; and a dot product
  // past it is infinity before a bias that would bring it back (inf - 3e38 = inf).
  a.epilogue = Epilogue::kBias;
  EXPECT_EQ(propagate(3e38, 1e30, 1e38f, 0.0f, a).lo, inf);
  EXPECT_EQ(propagate(1.2e39, 1e33, -3e38f, 0.0f, a).lo, inf);
  EXPECT_EQ(propagate(1.2e39, 1e33, -3e38f, 0.0f, a).hi, inf);
  // Past it in some orders only: the low end finite, the high end infinity.
  EXPECT_EQ(propagate(0x1.ffffffp127, 0x1p110, -3e38f, 0.0f, a).hi, inf);
  EXPECT_LT(propagate(0x1.ffffffp127, 0x1p110, -3e38f, 0.0f, a).lo, 1e38f);
  a.epilogue = Epilogue::kNone;
  // A promoted walk whose inner stage truncates stops at its largest value (dump-format.md
  // §3.4): FLT_MAX stays inside.
  a.walk.declared = true;
  a.walk.inner = KWalkInner::kPromote;
  a.walk.promote_rounding = PromoteRounding::kTowardZero;
  EXPECT_EQ(propagate(1.2e39, 1e33, 0.0f, 0.0f, a).lo, FLT_MAX);
  a.walk = KWalk{};
  // bf16 outputs: the f32 value is infinity, and so is its rounding, to nearest or toward zero.
  a.output = DType::kBf16;
  EXPECT_EQ(propagate(1.2e39, 1e33, 0.0f, 0.0f, a).lo, inf);
  a.output_rounding = OutputRounding::kTowardZero;
  EXPECT_EQ(propagate(1.2e39, 1e33, 0.0f, 0.0f, a).lo, inf);
  // A truncating accumulator stops at the largest finite value.
  a.accumulator.round_to_nearest = false;
  EXPECT_EQ(propagate(1.2e39, 1e33, 0.0f, 0.0f, a).lo, 0x1.fep127f);
  a.output = DType::kF32;
  EXPECT_EQ(propagate(1.2e39, 1e33, 0.0f, 0.0f, a).lo, FLT_MAX);
  EXPECT_EQ(propagate(1.2e39, 1e33, 0.0f, 0.0f, a).hi, inf);
}

// noise_magnitude and spacing_of_type read the binade from the bits; frexp and ldexp, their
// definition, agree on every edge value and on a million random patterns of every binade.
double binade_by_frexp(double m) {
  int e = 0;
  std::frexp(m, &e);
  return std::ldexp(1.0, e - 1);
}
double spacing_by_frexp(double a, DType t) {
  const int mantissa = t == DType::kF32 ? 23 : t == DType::kBf16 ? 7 : 10;
  const int emin = t == DType::kF16 ? -14 : -126;
  if (!(a >= std::ldexp(1.0, emin))) return std::ldexp(1.0, emin - mantissa);
  int e = 0;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - 1 - mantissa);
}

TEST(Directed, BinadesFromTheBitsAreFrexpsOnes) {
  std::vector<double> values = edge_doubles();
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000000; ++i) values.push_back(std::bit_cast<double>(rng()));
  for (const double v : values) {
    const double want = (v > 0 && std::isfinite(v)) ? binade_by_frexp(v) : v;
    ASSERT_TRUE(same_or_both_nan(noise_magnitude(v, true), want)) << v;
    ASSERT_TRUE(same_or_both_nan(noise_magnitude(v, false), v)) << v;
    if (std::isnan(v) || v < 0) continue;  // spacing_of_type's argument is a magnitude
    for (const DType t : {DType::kF32, DType::kBf16, DType::kF16}) {
      ASSERT_TRUE(same_or_both_nan(spacing_of_type(v, t), spacing_by_frexp(v, t))) << v << " " << dtype_name(t);
    }
  }
}

}  // namespace
}  // namespace ncert::reference
