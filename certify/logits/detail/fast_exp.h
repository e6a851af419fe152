// This header defines exp_nonpositive, the vectorizable exponential of row_compare's softmax
// passes. Internal to certify; here so its accuracy test can reach it.
#pragma once

#include <bit>
#include <cstdint>

namespace ncert::certify::detail {

/// exp(x) for x <= 0 (softmax arguments), division-free so the loops that call it vectorize:
/// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by its Taylor polynomial to
/// r^13 (remainder |r|^14/14! < 4.2e-18), times 2^n built in the exponent bits. Relative error
/// below 4e-16 (row_compare_test checks it against std::exp); x below -708 returns 0 (such a
/// term is < 1e-307 of the row's largest, which contributes 1).
inline double exp_nonpositive(double x) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 0.6931471803691238;      // ln2 with 32 trailing zero bits
  constexpr double kLn2Lo = 1.9082149292705877e-10;  // ln2 - kLn2Hi
  constexpr double kShift = 0x1.8p52;                // adding it rounds to an integer
  const double xc = x < -708.0 ? -708.0 : x;
  const double nd = xc * kLog2e + kShift;
  const double n = nd - kShift;
  const double r = (xc - n * kLn2Hi) - n * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^n: n sits in the low bits of nd's significand; move it into the exponent field.
  const std::uint64_t bits = (std::bit_cast<std::uint64_t>(nd) + 1023) << 52;
  const double e = p * std::bit_cast<double>(bits);
  return x < -708.0 ? 0.0 : e;
}

}  // namespace ncert::certify::detail
