#include "reference/narrow_float.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace ncert::reference {

namespace {

bool is_nan_pattern(const NarrowFormat& f, std::uint32_t e, std::uint32_t m) {
  const std::uint32_t e_all = (std::uint32_t{1} << f.exponent_bits) - 1;
  const std::uint32_t m_all = (std::uint32_t{1} << f.mantissa_bits) - 1;
  if (e != e_all) return false;
  return f.has_infinity ? m != 0 : m == m_all;
}

std::uint32_t nan_bits(const NarrowFormat& f, bool negative) {
  const std::uint32_t e_all = (std::uint32_t{1} << f.exponent_bits) - 1;
  // IEEE: the quiet bit (top fraction bit); E4M3FN: its one NaN, all fraction bits set.
  const std::uint32_t m =
      f.has_infinity ? std::uint32_t{1} << (f.mantissa_bits - 1) : (std::uint32_t{1} << f.mantissa_bits) - 1;
  return (negative ? f.sign_bit() : 0u) | (e_all << f.mantissa_bits) | m;
}

std::uint32_t inf_bits(const NarrowFormat& f, bool negative) {
  if (!f.has_infinity) return nan_bits(f, negative);
  const std::uint32_t e_all = (std::uint32_t{1} << f.exponent_bits) - 1;
  return (negative ? f.sign_bit() : 0u) | (e_all << f.mantissa_bits);
}

// The pattern of a representable magnitude a (finite, >= 0).
std::uint32_t encode_magnitude(const NarrowFormat& f, double a) {
  const int emin = 1 - f.bias;
  if (a == 0) return 0;
  if (a < std::ldexp(1.0, emin)) {  // subnormal: a multiple of 2^(emin - mantissa_bits)
    return static_cast<std::uint32_t>(std::ldexp(a, f.mantissa_bits - emin));
  }
  const int e = std::ilogb(a);
  const auto m = static_cast<std::uint32_t>(std::ldexp(a, f.mantissa_bits - e)) - (std::uint32_t{1} << f.mantissa_bits);
  return (static_cast<std::uint32_t>(e + f.bias) << f.mantissa_bits) | m;
}

}  // namespace

const NarrowFormat* narrow_format(DType t) {
  switch (t) {
    case DType::kF16:
      return &kF16Format;
    case DType::kBf16:
      return &kBf16Format;
    case DType::kE4m3:
      return &kE4m3Format;
    case DType::kE5m2:
      return &kE5m2Format;
    default:
      return nullptr;
  }
}

double narrow_decode(const NarrowFormat& f, std::uint32_t bits) {
  const bool negative = (bits & f.sign_bit()) != 0;
  const std::uint32_t e = (bits >> f.mantissa_bits) & ((std::uint32_t{1} << f.exponent_bits) - 1);
  const std::uint32_t m = bits & ((std::uint32_t{1} << f.mantissa_bits) - 1);
  double v = 0;
  if (is_nan_pattern(f, e, m)) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (f.has_infinity && e == (std::uint32_t{1} << f.exponent_bits) - 1) {
    v = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(m + (std::uint32_t{1} << f.mantissa_bits)),
                   static_cast<int>(e) - f.bias - f.mantissa_bits);
  }
  return negative ? -v : v;
}

std::uint32_t narrow_round(const NarrowFormat& f, double x, NarrowRounding mode, NarrowOverflow overflow) {
  const bool negative = std::signbit(x);
  const std::uint32_t sign = negative ? f.sign_bit() : 0u;
  if (std::isnan(x)) return nan_bits(f, negative);
  // Does the mode move the magnitude away from zero when inexact?
  const bool magnitude_up = (mode == NarrowRounding::kDown && negative) || (mode == NarrowRounding::kUp && !negative);
  const bool magnitude_down = (mode == NarrowRounding::kTowardZero) || (mode == NarrowRounding::kDown && !negative) ||
                              (mode == NarrowRounding::kUp && negative);
  const double a = std::fabs(x);
  auto overflowed = [&]() -> std::uint32_t {
    // Nearest modes and directed modes away from zero reach the infinity; the others stop at
    // the largest finite value (IEEE 754 §7.4).
    if (overflow == NarrowOverflow::kSaturate || magnitude_down) return sign | encode_magnitude(f, f.max_finite);
    return inf_bits(f, negative);
  };
  if (std::isinf(a)) {  // exact: an infinity stays one (NaN for e4m3) unless saturating
    return overflow == NarrowOverflow::kSaturate ? sign | encode_magnitude(f, f.max_finite) : inf_bits(f, negative);
  }
  if (a == 0) return sign;
  // The quantum of a's binade, never below the subnormal spacing 2^(emin - mantissa_bits); the
  // binade of an overflowing value continues unbounded above emax (IEEE's "unbounded exponent").
  const int emin = 1 - f.bias;
  const int e = std::max(std::ilogb(a), emin);
  const int q = e - f.mantissa_bits;
  const double scaled = std::ldexp(a, -q);  // exact: a power-of-two scaling of an f64 (a >= 2^-1074)
  double m = std::floor(scaled);
  const double frac = scaled - m;  // exact: m is scaled's integer part
  if (frac != 0) {
    if (magnitude_up) {
      m += 1;
    } else if (!magnitude_down) {
      const bool odd = std::fmod(m, 2.0) != 0;
      if (frac > 0.5 || (frac == 0.5 && (mode == NarrowRounding::kNearestAway || odd))) m += 1;
    }
  }
  const double r = std::ldexp(m, q);
  if (r > f.max_finite) return overflowed();
  return sign | encode_magnitude(f, r);
}

std::uint64_t narrow_ulp_distance(const NarrowFormat& f, std::uint32_t a, std::uint32_t b) {
  const double va = narrow_decode(f, a), vb = narrow_decode(f, b);
  constexpr std::uint64_t kInfinite = std::numeric_limits<std::uint64_t>::max();
  if (std::isnan(va) || std::isnan(vb)) return kInfinite;
  if (std::isinf(va) || std::isinf(vb)) return va == vb ? 0 : kInfinite;
  const auto key = [&](std::uint32_t bits) {
    const auto magnitude = static_cast<std::int64_t>(bits & (f.sign_bit() - 1));
    return (bits & f.sign_bit()) ? -magnitude : magnitude;
  };
  const std::int64_t d = key(a) - key(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

float e4m3_to_f32(std::uint8_t b) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = static_cast<float>(narrow_decode(kE4m3Format, static_cast<std::uint32_t>(i)));
    return t;
  }();
  return table[b];
}

float e5m2_to_f32(std::uint8_t b) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = static_cast<float>(narrow_decode(kE5m2Format, static_cast<std::uint32_t>(i)));
    return t;
  }();
  return table[b];
}

}  // namespace ncert::reference
