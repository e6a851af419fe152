// The quantize check's arithmetic (reference/x_quant.h) against an oracle that enumerates codes:
// a code n is allowed when some quotient within the slack rounds to n under the declared rule
// (a brute-force reading of the definition, not the monotonicity argument the code uses).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "reference/narrow_float.h"
#include "reference/x_quant.h"

namespace ncert::reference {
namespace {

// Does some t' in [lo, hi] round to the integer n? Round to nearest: the set rounding to n is
// (n - 1/2, n + 1/2), plus an end where the tie rule sends it to n.
bool reaches(double lo, double hi, double n, XQuantRounding r) {
  const double a = n - 0.5, b = n + 0.5;
  const auto tie_to_n = [&](double tie) {
    if (r == XQuantRounding::kNearestAway) return std::fabs(n) > std::fabs(tie);
    return std::fmod(std::fabs(n), 2.0) == 0;
  };
  if (hi > a && lo < b) return true;  // the open interval meets [lo, hi]
  if (lo <= a && a <= hi && tie_to_n(a)) return true;
  if (lo <= b && b <= hi && tie_to_n(b)) return true;
  return false;
}

TEST(XQuant, AScaleStoredBelowItsTypesNormalRangeAllowsItsRoundingsAbsoluteError) {
  // The engine's own quantizer: s = fl32(amax / 127), codes rne(fl32(x / s)), s stored in f16
  // (or bf16) afterwards. Where the stored scale is subnormal its rounding errs by up to half the
  // type's smallest spacing, 0.4 % of s = 7.6e-6 in f16: the slack for that scale holds every
  // code, and f16's normal-range slack (2^-11) did not (an outside exporter's false FAIL).
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(-1, 1);
  const XQuantizer q{XQuantType::kInt8, XQuantRounding::kNearestEven, 64};
  int missed_by_normal_slack = 0;
  for (DType storage : {DType::kF16, DType::kBf16}) {
    const NarrowFormat& f = storage == DType::kF16 ? kF16Format : kBf16Format;
    // amax from 4e-6 to 4e-3 (f16) and 1e-38 to 1e-36 (bf16): scales across the subnormal range.
    const double lo = storage == DType::kF16 ? 4e-6 : 1e-38, hi = storage == DType::kF16 ? 4e-3 : 1e-36;
    for (int i = 0; i < 4000; ++i) {
      const auto amax = static_cast<float>(lo * std::pow(hi / lo, (unit(rng) + 1) / 2));
      const float s_used = amax / 127.0f;
      const double stored = narrow_decode(f, narrow_round(f, s_used, NarrowRounding::kNearestEven));
      if (!(stored > 0)) continue;  // rounded to zero: no quotient to check
      for (int j = 0; j < 8; ++j) {
        const float x = j == 0 ? amax : static_cast<float>(amax * unit(rng));
        const double code = std::nearbyint(static_cast<double>(x / s_used));
        const XQuantRange got = x_quant_allowed(q, x, stored, 0, x_quant_tolerance(storage, stored));
        ASSERT_TRUE(got.valid);
        EXPECT_LE(got.lowest, code) << x << " / " << stored;
        EXPECT_GE(got.highest, code) << x << " / " << stored;
        // The check's own slack, narrower below: still every code.
        const XQuantRange tight = x_quant_allowed(q, x, stored, 0, x_quant_tolerance(storage, stored), 0,
                                                  x_quant_tolerance_low(storage, stored));
        ASSERT_TRUE(tight.valid);
        EXPECT_LE(tight.lowest, code) << x << " / " << stored;
        EXPECT_GE(tight.highest, code) << x << " / " << stored;
        const XQuantRange normal = x_quant_allowed(q, x, stored, 0, x_quant_tolerance(storage));
        missed_by_normal_slack += code < normal.lowest || code > normal.highest;
      }
    }
  }
  EXPECT_GT(missed_by_normal_slack, 0);  // the case is real: the normal-range slack misses codes
  // Below, the slack is the storage rounding's, not symmetric: at the smallest f16 scale 2^-24
  // (delta 1/2) x / s_u >= (x / s) / 1.5, so x = 0.3456 (x / s = 5.8e6) must saturate to 127; a
  // review's code 16 passed when the slack reached down to 0.
  const double tiny = 0x1p-24;
  const XQuantRange sat = x_quant_allowed(q, 0.3456, tiny, 0, x_quant_tolerance(DType::kF16, tiny), 0,
                                          x_quant_tolerance_low(DType::kF16, tiny));
  EXPECT_EQ(sat.lowest, 127);
  EXPECT_EQ(sat.highest, 127);
  EXPECT_NEAR(x_quant_tolerance_low(DType::kF16, tiny), 1.0 / 3, 1e-6);
  // In the normal range the per-scale slack is the type's.
  EXPECT_EQ(x_quant_tolerance(DType::kF16, 0.01), x_quant_tolerance(DType::kF16));
  EXPECT_EQ(x_quant_tolerance(DType::kBf16, 1e-30), x_quant_tolerance(DType::kBf16));
  EXPECT_EQ(x_quant_tolerance(DType::kF32, 1e-30), x_quant_tolerance(DType::kF32));
}

TEST(XQuant, IntegerRangesMatchAnEnumeratingOracle) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  for (int i = 0; i < 20000; ++i) {
    for (XQuantType type : {XQuantType::kInt8, XQuantType::kUint8}) {
      for (XQuantRounding rounding : {XQuantRounding::kNearestEven, XQuantRounding::kNearestAway}) {
        XQuantizer q{type, rounding, 32};
        const double s = std::ldexp(1.0 + std::fabs(nd(rng)), -7);
        // Every ninth x a tie, or a tie nudged by less than the slack.
        double x = 60 * nd(rng) * s;
        if (i % 9 == 0) x = (std::floor(x / s) + 0.5) * s;
        if (i % 9 == 1) x = (std::floor(x / s) + 0.5) * s * (1 + 1e-8);
        const double zp = type == XQuantType::kUint8 ? 128 : 0;
        const double tol = x_quant_tolerance(DType::kF32);
        const XQuantRange got = x_quant_allowed(q, x, s, zp, tol);
        ASSERT_TRUE(got.valid);
        const double t = x / s, slack = std::fabs(t) * (tol + 0x1p-50);
        const double min = type == XQuantType::kInt8 ? -128 : 0, max = type == XQuantType::kInt8 ? 127 : 255;
        double lowest = 1e9, highest = -1e9;
        for (double code = min; code <= max; ++code) {
          // A saturated code is reached by every quotient beyond it.
          const double n = code - zp;
          bool ok = reaches(t - slack, t + slack, n, rounding);
          if (code == max && t + slack >= n) ok = true;
          if (code == min && t - slack <= n) ok = true;
          if (ok) {
            lowest = std::min(lowest, code);
            highest = std::max(highest, code);
          }
        }
        EXPECT_EQ(got.lowest, lowest) << x << " / " << s;
        EXPECT_EQ(got.highest, highest) << x << " / " << s;
      }
    }
  }
}

TEST(XQuant, Fp8RangesAreTheRoundingsOfTheSlackInterval) {
  XQuantizer q{XQuantType::kE4m3, XQuantRounding::kNearestEven, 16};
  // x / s exactly 2.125: the midpoint of the e4m3 values 2 (mantissa 000) and 2.25 (001) ties to
  // 2; the slack's upper end rounds up to 2.25.
  XQuantRange r = x_quant_allowed(q, 2.125, 1.0, 0, 0x1p-22);
  EXPECT_EQ(r.lowest, 2.0);
  EXPECT_EQ(r.highest, 2.25);
  r = x_quant_allowed(q, 2.3, 1.0, 0, 0x1p-22);  // nearest 2.25 either way
  EXPECT_EQ(r.lowest, 2.25);
  EXPECT_EQ(r.highest, 2.25);
  r = x_quant_allowed(q, 1e6, 1.0, 0, 0x1p-22);  // saturates
  EXPECT_EQ(r.lowest, 448.0);
  q.type = XQuantType::kE5m2;
  r = x_quant_allowed(q, -1e6, 1.0, 0, 0x1p-22);
  EXPECT_EQ(r.highest, -57344.0);
}

TEST(XQuant, ScalesMustBePositiveAndFinite) {
  const XQuantizer q{XQuantType::kInt8, XQuantRounding::kNearestEven, 8};
  EXPECT_FALSE(x_quant_allowed(q, 1.0, -0.5, 0, 0x1p-22).valid);
  EXPECT_FALSE(x_quant_allowed(q, 1.0, std::nan(""), 0, 0x1p-22).valid);
  EXPECT_FALSE(x_quant_allowed(q, 1.0, 0.0, 0, 0x1p-22).valid);
  const XQuantRange zero = x_quant_allowed(q, 0.0, 0.0, 3, 0x1p-22);
  EXPECT_TRUE(zero.valid);
  EXPECT_EQ(zero.lowest, 3);
  EXPECT_EQ(zero.highest, 3);
}

TEST(XQuant, AScaleItsTypeStoresAsZeroAllowsTheCodesOfTheEnginesOwnScale) {
  // ggml's Q8_0 quantizes a block with d = amax / 127 in f32 and stores d in f16: a block whose
  // |x| stays under 127 * 2^-25 = 3.8e-6 has its codes from d but a stored 0 (an outside review's
  // false FAIL). Oracle: that quantization, run here, for blocks of amax 1e-9 .. 3.7e-6.
  const double below = x_quant_zero_scale_below(DType::kF16);
  EXPECT_EQ(below, 0x1p-25);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (const XQuantRounding rounding : {XQuantRounding::kNearestEven, XQuantRounding::kNearestAway}) {
    const XQuantizer q{XQuantType::kInt8, rounding, 32};
    for (const double amax : {1e-9, 1e-7, 1e-6, 3.7e-6}) {
      const float d = static_cast<float>(amax / 127);
      ASSERT_EQ(
          narrow_decode(kF16Format, narrow_round(kF16Format, d, NarrowRounding::kNearestEven, NarrowOverflow::kIeee)),
          0.0);
      for (int i = 0; i < 200; ++i) {
        const auto x = static_cast<float>(amax * unit(rng));
        const float t = x / d;
        const double code = rounding == XQuantRounding::kNearestEven ? std::nearbyint(t) : std::round(t);
        const XQuantRange r = x_quant_allowed(q, x, 0.0, 0, x_quant_tolerance(DType::kF16), below);
        ASSERT_TRUE(r.valid) << x;
        EXPECT_LE(r.lowest, code) << x;
        EXPECT_GE(r.highest, code) << x;
      }
    }
  }
  // Any code: an asymmetric quantizer's zero point came from the unknown scale too (a review's
  // int8 codes with zero point -128 failed a range of x's sign), and the products are 0 whatever
  // the code. An x beyond every code's reach of such a scale, or with no type given, still fails.
  const XQuantizer q{XQuantType::kInt8, XQuantRounding::kNearestEven, 32};
  const XQuantRange r = x_quant_allowed(q, 1e-7, 0.0, -128, 0x1p-22, below);
  EXPECT_TRUE(r.valid);
  EXPECT_EQ(r.lowest, -128);
  EXPECT_EQ(r.highest, 127);
  EXPECT_FALSE(x_quant_allowed(q, 1e-3, 0.0, 0, 0x1p-22, below).valid);
  EXPECT_FALSE(x_quant_allowed(q, 1e-6, 0.0, 0, 0x1p-22).valid);
  // An f32 scale underflowed in the engine (ggml's guard d ? 1 / d : 0 then makes every code 0).
  EXPECT_TRUE(x_quant_allowed(q, 1e-44, 0.0, 0, 0x1p-22, x_quant_zero_scale_below(DType::kF32)).valid);
  const XQuantizer e{XQuantType::kE4m3, XQuantRounding::kNearestEven, 32};
  const XQuantRange f = x_quant_allowed(e, -1e-6, 0.0, 0, 0x1p-22, below);
  EXPECT_TRUE(f.valid);
  EXPECT_EQ(f.lowest, -448);
  EXPECT_EQ(f.highest, 448);
}

TEST(XQuant, F16ScalesWidenTheSlackByTheirRounding) {
  EXPECT_EQ(x_quant_tolerance(DType::kF32), 0x1p-22);
  // t / (1 - delta) with the f32 operations' 2^-22: a little more than 2^-22 + delta.
  EXPECT_EQ(x_quant_tolerance(DType::kF16), (1 + 0x1p-22) / (1 - 0x1p-11) - 1);
  EXPECT_EQ(x_quant_tolerance(DType::kBf16), (1 + 0x1p-22) / (1 - 0x1p-8) - 1);
  EXPECT_GT(x_quant_tolerance(DType::kF16), 0x1p-22 + 0x1p-11);
}

}  // namespace
}  // namespace ncert::reference
