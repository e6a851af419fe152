// Internal: inline twins of float_bits.h's directed roundings (add_down, add_up,
// f64_to_f32_down, f64_to_f32_up) for the reference's per-element interval propagation, which
// runs them four times per accepted interval and twice per element (2.1 M elements at
// M = 128, N = 16480). The out-of-line versions call libm's nextafter; these step the bit
// pattern, which is the same function on every non-NaN input (tests/unit/reference/
// directed_test.cc compares them on edge cases and random values, bit for bit).
#pragma once

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ncert::reference::detail {

/// std::nextafter(v, -inf) for non-NaN v (NaN is returned unchanged).
inline double next_down(double v) {
  if (v != v || v == -std::numeric_limits<double>::infinity()) return v;
  if (v == 0.0) return -std::numeric_limits<double>::denorm_min();
  const auto b = std::bit_cast<std::uint64_t>(v);
  return std::bit_cast<double>(v > 0 ? b - 1 : b + 1);
}
inline double next_up(double v) {
  if (v != v || v == std::numeric_limits<double>::infinity()) return v;
  if (v == 0.0) return std::numeric_limits<double>::denorm_min();
  const auto b = std::bit_cast<std::uint64_t>(v);
  return std::bit_cast<double>(v > 0 ? b + 1 : b - 1);
}
inline float next_down(float v) {
  if (v != v || v == -std::numeric_limits<float>::infinity()) return v;
  if (v == 0.0f) return -std::numeric_limits<float>::denorm_min();
  const auto b = std::bit_cast<std::uint32_t>(v);
  return std::bit_cast<float>(v > 0 ? b - 1 : b + 1);
}
inline float next_up(float v) {
  if (v != v || v == std::numeric_limits<float>::infinity()) return v;
  if (v == 0.0f) return std::numeric_limits<float>::denorm_min();
  const auto b = std::bit_cast<std::uint32_t>(v);
  return std::bit_cast<float>(v > 0 ? b + 1 : b - 1);
}

/// The error of s = fl(a + b) (TwoSum, Knuth): s + e == a + b exactly when s is finite.
inline double two_sum_error(double a, double b, double s) {
  const double z = s - a;
  return (a - (s - z)) + (b - z);
}

// The steps below are selects, not branches: whether a rounding was inexact, and in which
// direction, is a coin flip per element, and mispredicted branches made these functions the
// largest cost of the per-element loop (10 % of the reference's time at M = 128, N = 16480).

/// The neighbour of a nonzero finite (or infinite, for f32) value one step toward -inf
/// (`down`) or +inf, or v itself when `step` is false. A step of a positive value toward -inf
/// decrements its bit pattern; of a negative value, increments it; and the reverse toward +inf.
inline double step_if(double v, bool step, bool down) {
  // Arithmetic, not a conditional: GCC turns `step ? d : 0` back into a branch.
  const auto b = std::bit_cast<std::uint64_t>(v);
  const std::uint64_t toward_zero = (b >> 63) ^ static_cast<std::uint64_t>(down);  // -1, else +1
  const std::uint64_t delta = (std::uint64_t{0} - static_cast<std::uint64_t>(step)) & (1 - 2 * toward_zero);
  return std::bit_cast<double>(b + delta);
}
inline float step_if(float v, bool step, bool down) {
  const auto b = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t toward_zero = (b >> 31) ^ static_cast<std::uint32_t>(down);
  const std::uint32_t delta = (0u - static_cast<std::uint32_t>(step)) & (1u - 2u * toward_zero);
  return std::bit_cast<float>(b + delta);
}

/// a + b rounded toward -inf / +inf (float_bits.h add_down / add_up).
inline double add_down(double a, double b) {
  const double s = a + b;
  if (!std::isfinite(s)) [[unlikely]] {
    // Overflow of finite operands: the exact sum is finite, so RD(+overflow) = DBL_MAX.
    if (std::isinf(s) && std::isfinite(a) && std::isfinite(b) && s > 0) return DBL_MAX;
    return s;
  }
  const bool inexact_low = two_sum_error(a, b, s) < 0;
  // A sum that rounds to 0 is exact under gradual underflow; kept for identity all the same.
  if (s == 0.0) [[unlikely]]
    return inexact_low ? next_down(s) : s;
  return step_if(s, inexact_low, true);
}
inline double add_up(double a, double b) {
  const double s = a + b;
  if (!std::isfinite(s)) [[unlikely]] {
    if (std::isinf(s) && std::isfinite(a) && std::isfinite(b) && s < 0) return -DBL_MAX;
    return s;
  }
  const bool inexact_high = two_sum_error(a, b, s) > 0;
  if (s == 0.0) [[unlikely]]
    return inexact_high ? next_up(s) : s;
  return step_if(s, inexact_high, false);
}

/// The largest f32 <= x and the smallest f32 >= x (float_bits.h f64_to_f32_down / _up).
/// When the conversion rounded up, f is never +0 (x > 0 would round to +0 only from below)
/// and -0 steps to -denorm_min by the increment; +inf steps to FLT_MAX. NaN never steps.
inline float f64_to_f32_down(double x) {
  const float f = static_cast<float>(x);
  return step_if(f, static_cast<double>(f) > x, true);
}
inline float f64_to_f32_up(double x) {
  const float f = static_cast<float>(x);
  return step_if(f, static_cast<double>(f) < x, false);
}

}  // namespace ncert::reference::detail
