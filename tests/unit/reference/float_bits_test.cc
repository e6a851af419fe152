// Bit-exactness of the format codecs (docs/formats.md "bf16" test vectors, exhaustive bf16/f16
// sweeps, >= 10^7 random f32 -> bf16 against an independent formulation, directed roundings
// against the FPU's own directed modes, ULP keys).
#include "reference/float_bits.h"

#include <gtest/gtest.h>

#include <cfenv>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace ncert::reference {
namespace {

// Independent RNE: pick the nearer of the two bf16 neighbours of |f| by exact distance in
// f64; ties to the even pattern; the neighbour above the largest finite is "2^128" (IEEE
// overflow rule). No bit tricks shared with the implementation.
std::uint16_t reference_f32_to_bf16(float f) {
  if (std::isnan(f)) return 0;  // not used for NaN
  const std::uint32_t u = f32_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const double a = std::fabs(static_cast<double>(f));
  const std::uint16_t lo = static_cast<std::uint16_t>((u & 0x7FFFFFFFu) >> 16);
  const double lo_v = std::fabs(static_cast<double>(bf16_to_f32(lo)));
  if (lo_v == a) return static_cast<std::uint16_t>(sign | lo);
  const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
  const double hi_v = hi == 0x7F80 ? std::ldexp(1.0, 128) : static_cast<double>(bf16_to_f32(hi));
  const double dlo = a - lo_v;
  const double dhi = hi_v - a;
  std::uint16_t pick;
  if (dlo < dhi)
    pick = lo;
  else if (dhi < dlo)
    pick = hi;
  else
    pick = (lo % 2 == 0) ? lo : hi;
  return static_cast<std::uint16_t>(sign | pick);
}

// The FPU's own directed rounding, as an independent reference. GCC moves FP operations across
// fesetround() even under -frounding-math; the empty asm statements pin the operation between
// the two mode switches (the operands are "modified" right after the switch, the result is
// "used" right before the switch back).
float fpu_to_f32(int mode, double x) {
  const int saved = std::fegetround();
  std::fesetround(mode);
  asm volatile("" : "+x"(x));
  float r = static_cast<float>(x);
  asm volatile("" : "+x"(r));
  std::fesetround(saved);
  return r;
}

double fpu_add(int mode, double a, double b) {
  const int saved = std::fegetround();
  std::fesetround(mode);
  asm volatile("" : "+x"(a), "+x"(b));
  double r = a + b;
  asm volatile("" : "+x"(r));
  std::fesetround(saved);
  return r;
}

TEST(Bf16, DecodeIsExactForAllPatterns) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_f32(static_cast<std::uint16_t>(b));
    ASSERT_EQ(f32_bits(f), b << 16);
  }
}

TEST(Bf16, AllPatternsRoundTripThroughF32) {
  int signaling = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto p = static_cast<std::uint16_t>(b);
    const std::uint16_t back = f32_to_bf16(bf16_to_f32(p));
    const bool nan = (p & 0x7FFF) > 0x7F80;
    const bool quiet = (p & 0x0040) != 0;
    if (nan && !quiet) {
      // Policy (docs/formats.md): NaN becomes a quiet NaN, sign and payload kept. The 126
      // signaling patterns therefore come back with the quiet bit set and nothing else changed.
      ++signaling;
      ASSERT_EQ(back, p | 0x0040) << std::hex << b;
    } else {
      ASSERT_EQ(back, p) << std::hex << b;
    }
  }
  EXPECT_EQ(signaling, 126);
}

TEST(Bf16, FormatsMdTestVectors) {
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7F7FFFFFu)), 0x7F80);  // overflow to inf
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00008000u)), 0x0000);  // subnormal tie to even 0
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00018000u)), 0x0002);  // subnormal tie, odd goes up
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x80008000u)), 0x8000);  // negative zero kept
  // NaNs stay NaN (quiet), never turn into an infinity even with payload only in low bits.
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7FC00001u)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0xFFC12345u)), 0xFFC1);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7F800000u)), 0x7F80);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0xFF800000u)), 0xFF80);
}

TEST(Bf16, RneMatchesIndependentFormulationOnBoundaryClasses) {
  std::vector<std::uint32_t> cases;
  // For every exponent (subnormal range included) and both signs: the pattern itself, the
  // tie points with even and odd kept bit, one below and above each tie, all-ones low half,
  // and mantissas that carry into the next binade.
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t e = 0; e < 255; ++e) {
      for (std::uint32_t top : {0x00u, 0x01u, 0x7Eu, 0x7Fu, 0x40u, 0x3Fu}) {
        for (std::uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
          cases.push_back(sign | (e << 23) | (top << 16) | low);
        }
      }
    }
  }
  for (std::uint32_t u : cases) {
    const float f = f32_from_bits(u);
    ASSERT_EQ(f32_to_bf16(f), reference_f32_to_bf16(f)) << std::hex << u;
  }
}

TEST(Bf16, RneMatchesIndependentFormulationOnTenMillionRandomPatterns) {
  std::mt19937_64 rng(20261130);
  int checked = 0;
  for (int i = 0; i < 10'000'000; ++i) {
    const auto u = static_cast<std::uint32_t>(rng());
    const float f = f32_from_bits(u);
    if (std::isnan(f)) {
      const std::uint16_t b = f32_to_bf16(f);
      ASSERT_TRUE((b & 0x7FFF) > 0x7F80 && (b & 0x0040)) << std::hex << u;
      ASSERT_EQ(b & 0x8000, (u >> 16) & 0x8000);
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), reference_f32_to_bf16(f)) << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 9'900'000);
}

TEST(Bf16, TruncateAndDirected) {
  EXPECT_EQ(f32_to_bf16_truncate(f32_from_bits(0x3F81FFFFu)), 0x3F81);
  EXPECT_EQ(f32_to_bf16_truncate(f32_from_bits(0xBF81FFFFu)), 0xBF81);
  EXPECT_EQ(f32_to_bf16_down(f32_from_bits(0x3F81FFFFu)), 0x3F81);
  EXPECT_EQ(f32_to_bf16_up(f32_from_bits(0x3F81FFFFu)), 0x3F82);
  EXPECT_EQ(f32_to_bf16_down(f32_from_bits(0xBF810001u)), 0xBF82);
  EXPECT_EQ(f32_to_bf16_up(f32_from_bits(0xBF810001u)), 0xBF81);
  EXPECT_EQ(f32_to_bf16_up(f32_from_bits(0x3F810000u)), 0x3F81);  // exact stays
  EXPECT_EQ(f32_to_bf16_up(FLT_MAX), 0x7F80);                     // past the largest bf16
  EXPECT_EQ(f32_to_bf16_down(FLT_MAX), 0x7F7F);
  EXPECT_EQ(f32_to_bf16_down(-FLT_MAX), 0xFF80);
}

TEST(DirectedRounding, F64ToF32AgreesWithTheFpuDirectedModes) {
  std::mt19937_64 rng(7);
  std::vector<double> xs = {0.0,
                            -0.0,
                            1.0,
                            0.1,
                            -0.1,
                            1e-40,
                            -1e-40,
                            1e-46,
                            FLT_MAX,
                            3.5e38,
                            -3.5e38,
                            1e300,
                            -1e300,
                            DBL_MIN,
                            -DBL_MIN,
                            std::ldexp(1.0, -149),
                            std::ldexp(1.0, -150),
                            std::ldexp(3.0, -151)};
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-160, 130);
  for (int i = 0; i < 200000; ++i) xs.push_back(std::ldexp(mant(rng), ex(rng)));
  for (double x : xs) {
    const float down = fpu_to_f32(FE_DOWNWARD, x);
    const float up = fpu_to_f32(FE_UPWARD, x);
    ASSERT_EQ(f32_bits(f64_to_f32_down(x)), f32_bits(down)) << x;
    ASSERT_EQ(f32_bits(f64_to_f32_up(x)), f32_bits(up)) << x;
    // bf16: the directed results bracket x and are adjacent (or equal when exact).
    const float bd = bf16_to_f32(f64_to_bf16_down(x));
    const float bu = bf16_to_f32(f64_to_bf16_up(x));
    ASSERT_LE(static_cast<double>(bd), x);
    ASSERT_GE(static_cast<double>(bu), x);
    const std::uint16_t pd = f64_to_bf16_down(x), pu = f64_to_bf16_up(x);
    if (static_cast<double>(bd) == x) {
      ASSERT_EQ(static_cast<double>(bu), x);
    } else {
      ASSERT_EQ(ulp_distance_bf16(pd, pu) <= 1 || (std::isinf(bd) || std::isinf(bu)), true) << x;
    }
  }
}

TEST(DirectedRounding, AdditionsAgreeWithTheFpuDirectedModes) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-60, 60);
  for (int i = 0; i < 200000; ++i) {
    const double a = std::ldexp(mant(rng), ex(rng));
    const double b = std::ldexp(mant(rng), ex(rng));
    ASSERT_EQ(add_down(a, b), fpu_add(FE_DOWNWARD, a, b));
    ASSERT_EQ(add_up(a, b), fpu_add(FE_UPWARD, a, b));
  }
  EXPECT_EQ(add_down(DBL_MAX, DBL_MAX), DBL_MAX);
  EXPECT_TRUE(std::isinf(add_up(DBL_MAX, DBL_MAX)));
  EXPECT_EQ(add_up(-DBL_MAX, -DBL_MAX), -DBL_MAX);
}

#if defined(__FLT16_MANT_DIG__)
TEST(F16, DecodeAllPatternsMatchesCompilerFloat16) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    _Float16 x;
    const auto p = static_cast<std::uint16_t>(h);
    std::memcpy(&x, &p, 2);
    const float want = static_cast<float>(x);
    const float got = f16_to_f32(p);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
      // Our decode keeps the payload exactly (the compiler's may quiet a signaling NaN).
      ASSERT_EQ((f32_bits(got) >> 13) & 0x3FFu, p & 0x3FFu) << std::hex << h;
      ASSERT_EQ(f32_bits(got) >> 31, static_cast<std::uint32_t>(p >> 15)) << std::hex << h;
    } else {
      ASSERT_EQ(f32_bits(got), f32_bits(want)) << std::hex << h;
    }
  }
}

TEST(F16, EncodeMatchesCompilerFloat16) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2'000'000; ++i) {
    const auto u = static_cast<std::uint32_t>(rng());
    const float f = f32_from_bits(u);
    if (std::isnan(f)) continue;
    const _Float16 want = static_cast<_Float16>(f);
    std::uint16_t wb;
    std::memcpy(&wb, &want, 2);
    ASSERT_EQ(f32_to_f16(f), wb) << std::hex << u;
  }
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even zero
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // tie, odd 1 goes to 2
}
#endif

TEST(F16, DecodeKnownValues) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::isinf(f16_to_f32(0xFC00)) && f16_to_f32(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
}

TEST(Ulp, KeysAndDistances) {
  EXPECT_EQ(ulp_distance_f32(0.0f, -0.0f), 0u);
  EXPECT_EQ(ulp_distance_f32(1.0f, std::nextafter(1.0f, 2.0f)), 1u);
  const float tiny = std::ldexp(1.0f, -149);
  EXPECT_EQ(ulp_distance_f32(tiny, -tiny), 2u);
  EXPECT_EQ(ulp_distance_f32(-1.0f, 1.0f), 2u * 0x3F800000u);
  EXPECT_EQ(ulp_distance_f32(NAN, NAN), kUlpInfinite);
  EXPECT_EQ(ulp_distance_f32(1.0f, NAN), kUlpInfinite);
  EXPECT_EQ(ulp_distance_f32(INFINITY, INFINITY), 0u);
  EXPECT_EQ(ulp_distance_f32(INFINITY, FLT_MAX), kUlpInfinite);
  EXPECT_EQ(ulp_distance_f32(-INFINITY, INFINITY), kUlpInfinite);
  EXPECT_LT(ulp_key_f32(-2.0f), ulp_key_f32(-1.0f));
  EXPECT_EQ(ulp_distance_bf16(0x3F80, 0x3F81), 1u);
  EXPECT_EQ(ulp_distance_bf16(0x0000, 0x8000), 0u);
  EXPECT_EQ(ulp_distance_bf16(0x0001, 0x8001), 2u);
  EXPECT_EQ(ulp_distance_bf16(0x7FC0, 0x7FC0), kUlpInfinite);
  EXPECT_EQ(ulp_distance_bf16(0x7F80, 0x7F7F), kUlpInfinite);
}

TEST(Ulp, SpacingOfF32) {
  EXPECT_EQ(ulp_of_f32(1.0f), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp_of_f32(1.5f), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp_of_f32(-2.0f), std::ldexp(1.0, -22));
  EXPECT_EQ(ulp_of_f32(0.0f), std::ldexp(1.0, -149));
  EXPECT_EQ(ulp_of_f32(FLT_MIN), std::ldexp(1.0, -149));
  EXPECT_EQ(ulp_of_f32(40.0f), std::ldexp(1.0, -18));
  EXPECT_TRUE(std::isinf(ulp_of_f32(INFINITY)));
}

}  // namespace
}  // namespace ncert::reference
