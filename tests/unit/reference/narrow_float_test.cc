// The narrow float codecs (reference/narrow_float.h) over every pattern: f16 against the CPU's
// own IEEE binary16 conversions (F16C's vcvtph2ps / vcvtps2ph, or the compiler's _Float16 where
// F16C is not enabled: an independent implementation), e4m3 and e5m2 against the OCP FP8 specification's defining
// formula and its named values; then every rounding mode at every midpoint and just beside it, and the overflow and
// saturation boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "reference/float_bits.h"
#include "reference/narrow_float.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace ncert::reference {
namespace {

// The independent binary16 oracle: the hardware's conversions where F16C is enabled (every x86-64
// CPU with AVX2 has it; clang 14 has no _Float16 on x86), else the compiler's _Float16.
#if defined(__F16C__)
constexpr bool kHaveF16Oracle = true;
float oracle_f16_to_f32(std::uint16_t h) { return _cvtsh_ss(h); }
std::uint16_t oracle_f32_to_f16(float x) {
  // _mm_cvtps_ph rather than _cvtss_sh: clang's _cvtss_sh is a macro over a C99 compound literal.
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT);
  return static_cast<std::uint16_t>(_mm_extract_epi16(h, 0));
}
#elif defined(__FLT16_MAX__)
constexpr bool kHaveF16Oracle = true;
float oracle_f16_to_f32(std::uint16_t h) {
  _Float16 f;
  std::memcpy(&f, &h, 2);
  return static_cast<float>(f);
}
std::uint16_t oracle_f32_to_f16(float x) {
  const auto f = static_cast<_Float16>(x);
  std::uint16_t h;
  std::memcpy(&h, &f, 2);
  return h;
}
#else
constexpr bool kHaveF16Oracle = false;
float oracle_f16_to_f32(std::uint16_t) { return 0; }
std::uint16_t oracle_f32_to_f16(float) { return 0; }
#endif

// The OCP 8-bit formats from their definition (OCP FP8 spec v1.0 §5): sign, biased exponent e,
// fraction m; e = 0 is subnormal m * 2^(1 - bias - mbits); E4M3FN's S.1111.111 is NaN and it has
// no infinity; E5M2 is IEEE-like.
double ocp_value(int bits, int ebits, int mbits, int bias, bool fn) {
  const bool neg = (bits >> (ebits + mbits)) & 1;
  const int e = (bits >> mbits) & ((1 << ebits) - 1);
  const int m = bits & ((1 << mbits) - 1);
  const int e_all = (1 << ebits) - 1;
  double v;
  if (fn && e == e_all && m == (1 << mbits) - 1) return std::numeric_limits<double>::quiet_NaN();
  if (!fn && e == e_all) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = m * std::pow(2.0, 1 - bias - mbits);
  } else {
    v = (1.0 + m / std::pow(2.0, mbits)) * std::pow(2.0, e - bias);
  }
  return neg ? -v : v;
}

void expect_same(double a, double b, std::uint32_t pattern) {
  if (std::isnan(b)) {
    EXPECT_TRUE(std::isnan(a)) << std::hex << pattern;
  } else {
    EXPECT_EQ(a, b) << std::hex << pattern;
    EXPECT_EQ(std::signbit(a), std::signbit(b)) << std::hex << pattern;
  }
}

TEST(NarrowFloat, F16DecodeMatchesTheHardwaresBinary16ForAllPatterns) {
  if (!kHaveF16Oracle) GTEST_SKIP() << "no F16C and no _Float16 on this target: no independent binary16";
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = oracle_f16_to_f32(h);
    expect_same(narrow_decode(kF16Format, b), static_cast<double>(f), b);
    expect_same(f16_to_f32(h), static_cast<double>(f), b);
  }
}

TEST(NarrowFloat, Fp8DecodeMatchesTheOcpDefinitionForAllPatterns) {
  for (std::uint32_t b = 0; b < 256; ++b) {
    expect_same(narrow_decode(kE4m3Format, b), ocp_value(static_cast<int>(b), 4, 3, 7, true), b);
    expect_same(narrow_decode(kE5m2Format, b), ocp_value(static_cast<int>(b), 5, 2, 15, false), b);
    expect_same(e4m3_to_f32(static_cast<std::uint8_t>(b)), narrow_decode(kE4m3Format, b), b);
    expect_same(e5m2_to_f32(static_cast<std::uint8_t>(b)), narrow_decode(kE5m2Format, b), b);
  }
  // The specification's named values.
  EXPECT_EQ(narrow_decode(kE4m3Format, 0x7E), 448.0);
  EXPECT_EQ(narrow_decode(kE4m3Format, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(narrow_decode(kE5m2Format, 0x7B), 57344.0);
  EXPECT_EQ(narrow_decode(kE5m2Format, 0x01), std::ldexp(1.0, -16));
  EXPECT_TRUE(std::isinf(narrow_decode(kE5m2Format, 0x7C)));
  EXPECT_TRUE(std::isnan(narrow_decode(kE4m3Format, 0x7F)));
  EXPECT_TRUE(std::isnan(narrow_decode(kE4m3Format, 0xFF)));
}

// Every non-NaN pattern of a format encodes back to itself in every mode (exact values are
// never moved), and NaN stays NaN.
void round_trip(const NarrowFormat& f) {
  const std::uint32_t count = std::uint32_t{1} << f.width();
  for (std::uint32_t b = 0; b < count; ++b) {
    const double v = narrow_decode(f, b);
    for (NarrowRounding m : {NarrowRounding::kNearestEven, NarrowRounding::kNearestAway, NarrowRounding::kTowardZero,
                             NarrowRounding::kDown, NarrowRounding::kUp}) {
      const std::uint32_t r = narrow_round(f, v, m);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(narrow_decode(f, r))) << std::hex << b;
      } else {
        EXPECT_EQ(r, b) << std::hex << b << " mode " << static_cast<int>(m);
      }
    }
  }
}

TEST(NarrowFloat, EveryPatternEncodesBackToItself) {
  round_trip(kF16Format);
  round_trip(kBf16Format);
  round_trip(kE4m3Format);
  round_trip(kE5m2Format);
}

// The finite non-negative values in ascending order.
std::vector<double> ladder(const NarrowFormat& f) {
  std::vector<double> v;
  const std::uint32_t half = std::uint32_t{1} << (f.width() - 1);
  for (std::uint32_t b = 0; b < half; ++b) {
    const double d = narrow_decode(f, b);
    if (std::isfinite(d)) v.push_back(d);
  }
  return v;
}

// Between every two adjacent values a < b: the midpoint goes to the one with the even pattern
// (rne) or to b (rna), one f64 ulp beside it to the nearer; directed modes go down / up; and the
// same mirrored for negative values.
void midpoints(const NarrowFormat& f) {
  const std::vector<double> v = ladder(f);
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    const double a = v[i], b = v[i + 1], mid = a + (b - a) / 2;  // exact in f64
    const std::uint32_t ba = narrow_round(f, a, NarrowRounding::kNearestEven);
    const std::uint32_t bb = narrow_round(f, b, NarrowRounding::kNearestEven);
    for (const double sign : {1.0, -1.0}) {
      const auto dec = [&](double x, NarrowRounding m) { return narrow_decode(f, narrow_round(f, sign * x, m)); };
      const double even = (ba & 1) == 0 ? a : b;
      EXPECT_EQ(dec(mid, NarrowRounding::kNearestEven), sign * even) << a;
      EXPECT_EQ(dec(mid, NarrowRounding::kNearestAway), sign * b) << a;
      EXPECT_EQ(dec(std::nextafter(mid, 0.0), NarrowRounding::kNearestEven), sign * a) << a;
      EXPECT_EQ(dec(std::nextafter(mid, 1e300), NarrowRounding::kNearestEven), sign * b) << a;
      EXPECT_EQ(dec(mid, NarrowRounding::kTowardZero), sign * a) << a;
      EXPECT_EQ(dec(mid, sign > 0 ? NarrowRounding::kDown : NarrowRounding::kUp), sign * a) << a;
      EXPECT_EQ(dec(mid, sign > 0 ? NarrowRounding::kUp : NarrowRounding::kDown), sign * b) << a;
    }
    (void)bb;
  }
}

TEST(NarrowFloat, EveryMidpointRoundsAsItsModeSays) {
  midpoints(kF16Format);
  midpoints(kE4m3Format);
  midpoints(kE5m2Format);
}

TEST(NarrowFloat, F16RoundingOfEveryF32MidpointMatchesTheHardware) {
  // The oracle's f32 -> binary16 conversion rounds to nearest even: compare it at every f16
  // midpoint and its two f32 neighbours, and on a sweep of f32 patterns.
  if (!kHaveF16Oracle) GTEST_SKIP() << "no F16C and no _Float16 on this target: no independent binary16";
  const std::vector<double> v = ladder(kF16Format);
  const auto same = [](float x) {
    const std::uint16_t want = oracle_f32_to_f16(x);
    EXPECT_EQ(f32_to_f16(x), want) << x;
    if (std::isnan(x)) {  // narrow_round returns the canonical quiet NaN, not the payload
      EXPECT_TRUE(std::isnan(
          f16_to_f32(static_cast<std::uint16_t>(narrow_round(kF16Format, x, NarrowRounding::kNearestEven)))));
    } else {
      EXPECT_EQ(narrow_round(kF16Format, x, NarrowRounding::kNearestEven), want) << x;
    }
  };
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    const auto mid = static_cast<float>(v[i] + (v[i + 1] - v[i]) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      same(x);
      same(-x);
    }
  }
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 65521)
    same(f32_from_bits(static_cast<std::uint32_t>(u)));
}

TEST(NarrowFloat, OverflowAndSaturationBoundaries) {
  // f16: 65520 is the midpoint of 65504 and 2^16; ties to even go to infinity.
  EXPECT_EQ(narrow_round(kF16Format, 65519.99, NarrowRounding::kNearestEven), 0x7BFFu);
  EXPECT_EQ(narrow_round(kF16Format, 65520.0, NarrowRounding::kNearestEven), 0x7C00u);
  EXPECT_EQ(narrow_round(kF16Format, 1e9, NarrowRounding::kTowardZero), 0x7BFFu);
  EXPECT_EQ(narrow_round(kF16Format, 1e9, NarrowRounding::kDown), 0x7BFFu);
  EXPECT_EQ(narrow_round(kF16Format, -1e9, NarrowRounding::kDown), 0xFC00u);
  EXPECT_EQ(narrow_round(kF16Format, 1e9, NarrowRounding::kUp), 0x7C00u);
  EXPECT_EQ(narrow_round(kF16Format, 1e9, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate), 0x7BFFu);
  // e4m3: 464 (between 448 and the NaN slot's 480) ties to 448 (even); beyond it overflow is
  // NaN without saturation, 448 with it.
  EXPECT_EQ(narrow_round(kE4m3Format, 464.0, NarrowRounding::kNearestEven), 0x7Eu);
  EXPECT_EQ(narrow_round(kE4m3Format, 465.0, NarrowRounding::kNearestEven), 0x7Fu);
  EXPECT_EQ(narrow_round(kE4m3Format, 465.0, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate), 0x7Eu);
  EXPECT_EQ(narrow_round(kE4m3Format, -1e6, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate), 0xFEu);
  EXPECT_EQ(narrow_round(kE4m3Format, std::numeric_limits<double>::infinity(), NarrowRounding::kNearestEven,
                         NarrowOverflow::kSaturate),
            0x7Eu);
  // e5m2: 61440 is the midpoint of 57344 and 2^16; ties to even go to infinity.
  EXPECT_EQ(narrow_round(kE5m2Format, 61439.0, NarrowRounding::kNearestEven), 0x7Bu);
  EXPECT_EQ(narrow_round(kE5m2Format, 61440.0, NarrowRounding::kNearestEven), 0x7Cu);
  EXPECT_EQ(narrow_round(kE5m2Format, 61440.0, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate), 0x7Bu);
  // Underflow keeps the sign; below half the smallest subnormal rounds to zero.
  EXPECT_EQ(narrow_round(kE4m3Format, -std::ldexp(1.0, -11), NarrowRounding::kNearestEven), 0x80u);
  EXPECT_EQ(narrow_round(kE4m3Format, std::ldexp(1.0, -10), NarrowRounding::kNearestEven), 0x00u);  // tie to even 0
  EXPECT_EQ(narrow_round(kE4m3Format, std::ldexp(1.5, -10), NarrowRounding::kNearestEven), 0x01u);
  EXPECT_EQ(narrow_round(kE4m3Format, std::nan(""), NarrowRounding::kNearestEven), 0x7Fu);
  EXPECT_EQ(narrow_round(kE5m2Format, -std::nan(""), NarrowRounding::kNearestEven) & 0x80u, 0x80u);
}

TEST(NarrowFloat, F16DirectedRoundingsBracketTheValue) {
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 99991) {
    const float x = f32_from_bits(static_cast<std::uint32_t>(u));
    if (!std::isfinite(x)) continue;
    const std::uint16_t d = f64_to_f16_down(x), up = f64_to_f16_up(x);
    const double lo = f16_to_f32(d), hi = f16_to_f32(up);
    EXPECT_LE(lo, x);
    EXPECT_GE(hi, x);
    // Adjacent patterns (sign-magnitude: the magnitude steps by one), or both x itself.
    if (lo == hi) {
      EXPECT_EQ(lo, x);
    } else {
      EXPECT_EQ(x > 0 ? up - d : d - up, 1) << x;
    }
  }
}

TEST(NarrowFloat, Fp8UlpDistanceFollowsThePolicy) {
  const NarrowFormat& f = kE4m3Format;
  EXPECT_EQ(narrow_ulp_distance(f, 0x00, 0x80), 0u);  // +0, -0
  EXPECT_EQ(narrow_ulp_distance(f, 0x01, 0x81), 2u);  // across zero
  EXPECT_EQ(narrow_ulp_distance(f, 0x7E, 0x7D), 1u);
  EXPECT_EQ(narrow_ulp_distance(f, 0x7F, 0x7F), std::numeric_limits<std::uint64_t>::max());  // NaN
  EXPECT_EQ(narrow_ulp_distance(kE5m2Format, 0x7C, 0x7C), 0u);                               // +inf
  EXPECT_EQ(narrow_ulp_distance(kE5m2Format, 0x7C, 0x7B), std::numeric_limits<std::uint64_t>::max());
}

}  // namespace
}  // namespace ncert::reference
