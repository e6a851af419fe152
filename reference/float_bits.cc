#include "reference/float_bits.h"

#include <cfloat>
#include <cstring>

#include "reference/narrow_float.h"

namespace ncert::reference {

namespace {

bool is_nan_bits_f32(std::uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// Steps a finite-or-infinite bf16 pattern one ulp away from zero (magnitude + 1). From the
// largest finite value this reaches the infinity, as directed rounding must.
std::uint16_t bf16_away_from_zero(std::uint16_t b) { return static_cast<std::uint16_t>(b + 1); }

}  // namespace

std::uint16_t f32_to_bf16_down(float f) {
  const std::uint32_t u = f32_bits(f);
  if (is_nan_bits_f32(u)) return f32_to_bf16_truncate(f);
  const auto t = static_cast<std::uint16_t>(u >> 16);  // toward zero
  const bool inexact = (u & 0xFFFFu) != 0;
  const bool negative = (u & 0x80000000u) != 0;
  // Truncation rounds positive values down already; negative ones need one more step down.
  return (inexact && negative) ? bf16_away_from_zero(t) : t;
}

std::uint16_t f32_to_bf16_up(float f) {
  const std::uint32_t u = f32_bits(f);
  if (is_nan_bits_f32(u)) return f32_to_bf16_truncate(f);
  const auto t = static_cast<std::uint16_t>(u >> 16);
  const bool inexact = (u & 0xFFFFu) != 0;
  const bool negative = (u & 0x80000000u) != 0;
  return (inexact && !negative) ? bf16_away_from_zero(t) : t;
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (man << 13));  // inf / NaN payload
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24, exact in f32.
  const float mag = std::ldexp(static_cast<float>(man), -24);
  return sign ? -mag : mag;
}

std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = f32_bits(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  // 65520 = 0x477FF000 is halfway between 65504 (odd mantissa) and 2^16: ties go up to inf.
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (a >= 0x38800000u) {  // >= 2^-14: a normal f16. Rebias the exponent by 127 - 15 = 112.
    std::uint32_t r = a - 0x38000000u;
    r += 0xFFFu + ((r >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (r >> 13));
  }
  // Subnormal or zero: count units of 2^-24. The scaling by 2^24 is exact, nearbyint rounds to
  // nearest even in the default mode; 1024 units is the smallest normal, as it should be.
  const float units = std::nearbyint(f32_from_bits(a) * 16777216.0f);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(units));
}

float f64_to_f32_down(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

float f64_to_f32_up(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

std::uint16_t f32_to_f16_truncate(float f) {
  return static_cast<std::uint16_t>(narrow_round(kF16Format, f, NarrowRounding::kTowardZero));
}
std::uint16_t f64_to_f16_down(double x) {
  return static_cast<std::uint16_t>(narrow_round(kF16Format, x, NarrowRounding::kDown));
}
std::uint16_t f64_to_f16_up(double x) {
  return static_cast<std::uint16_t>(narrow_round(kF16Format, x, NarrowRounding::kUp));
}

std::uint16_t f64_to_bf16_down(double x) { return f32_to_bf16_down(f64_to_f32_down(x)); }
std::uint16_t f64_to_bf16_up(double x) { return f32_to_bf16_up(f64_to_f32_up(x)); }

namespace {
// TwoSum (Knuth): s + e == a + b exactly when no overflow occurs.
inline double two_sum_error(double a, double b, double s) {
  const double z = s - a;
  return (a - (s - z)) + (b - z);
}
}  // namespace

double add_down(double a, double b) {
  const double s = a + b;
  if (!std::isfinite(s)) {
    // Overflow of finite operands: the exact sum is finite, so RD(+overflow) = DBL_MAX.
    if (std::isinf(s) && std::isfinite(a) && std::isfinite(b) && s > 0) return DBL_MAX;
    return s;
  }
  return two_sum_error(a, b, s) < 0 ? std::nextafter(s, -std::numeric_limits<double>::infinity()) : s;
}

double add_up(double a, double b) {
  const double s = a + b;
  if (!std::isfinite(s)) {
    if (std::isinf(s) && std::isfinite(a) && std::isfinite(b) && s < 0) return -DBL_MAX;
    return s;
  }
  return two_sum_error(a, b, s) > 0 ? std::nextafter(s, std::numeric_limits<double>::infinity()) : s;
}

std::uint64_t ulp_distance_f32(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return kUlpInfinite;
  if (std::isinf(a) || std::isinf(b)) return a == b ? 0 : kUlpInfinite;
  const std::int64_t d = ulp_key_f32(a) - ulp_key_f32(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

std::uint64_t ulp_distance_bf16(std::uint16_t a, std::uint16_t b) {
  const bool a_nan = (a & 0x7FFFu) > 0x7F80u;
  const bool b_nan = (b & 0x7FFFu) > 0x7F80u;
  if (a_nan || b_nan) return kUlpInfinite;
  const bool a_inf = (a & 0x7FFFu) == 0x7F80u;
  const bool b_inf = (b & 0x7FFFu) == 0x7F80u;
  if (a_inf || b_inf) return (a == b) ? 0 : kUlpInfinite;
  const std::int64_t d = std::int64_t{ulp_key_bf16(a)} - ulp_key_bf16(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

std::uint64_t ulp_distance_f16(std::uint16_t a, std::uint16_t b) {
  const bool a_nan = (a & 0x7FFFu) > 0x7C00u;
  const bool b_nan = (b & 0x7FFFu) > 0x7C00u;
  if (a_nan || b_nan) return kUlpInfinite;
  const bool a_inf = (a & 0x7FFFu) == 0x7C00u;
  const bool b_inf = (b & 0x7FFFu) == 0x7C00u;
  if (a_inf || b_inf) return (a == b) ? 0 : kUlpInfinite;
  // Same monotone sign-magnitude key as bf16 (both are 16-bit sign-magnitude floats).
  const std::int64_t d = std::int64_t{ulp_key_bf16(a)} - ulp_key_bf16(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

double ulp_of_f32(float x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return std::numeric_limits<double>::infinity();
  const float ax = std::fabs(x);
  if (ax < FLT_MIN) return std::ldexp(1.0, -149);
  int e = 0;
  std::frexp(ax, &e);  // ax = m * 2^e, m in [0.5, 1): the binade is 2^(e-1)
  return std::ldexp(1.0, e - 24);
}

double spacing_of_type(double a, DType t) {
  const int mantissa = t == DType::kF32 ? 23 : t == DType::kBf16 ? 7 : 10;
  const double min_normal = t == DType::kF16 ? 0x1p-14 : 0x1p-126;
  if (!(a >= min_normal)) return t == DType::kF32 ? 0x1p-149 : t == DType::kBf16 ? 0x1p-133 : 0x1p-24;
  if (!std::isfinite(a)) {
    int e = 0;
    std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): floor(log2 a) = e - 1
    return std::ldexp(1.0, e - 1 - mantissa);
  }
  // A finite a at or above the smallest normal is a normal f64: floor(log2 a) is its exponent
  // field less 1023, and the spacing, 2^(that - mantissa) >= 2^-149, a normal f64 built from
  // its exponent alone (frexp and ldexp were 2 % of a check's CPU).
  const auto biased = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(a) >> 52);  // sign 0
  return std::bit_cast<double>(static_cast<std::uint64_t>(biased - mantissa) << 52);
}

float decode_element(const void* base, DType t, Index i) {
  const auto* p = static_cast<const unsigned char*>(base);
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p + i * 4, 4);
    return f;
  }
  if (t == DType::kE4m3) return e4m3_to_f32(p[i]);
  if (t == DType::kE5m2) return e5m2_to_f32(p[i]);
  std::uint16_t h;
  std::memcpy(&h, p + i * 2, 2);
  return t == DType::kBf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

void encode_element(void* base, DType t, Index i, float v) {
  auto* p = static_cast<unsigned char*>(base);
  if (t == DType::kF32) {
    std::memcpy(p + i * 4, &v, 4);
    return;
  }
  if (is_fp8_dtype(t)) {
    p[i] = static_cast<unsigned char>(narrow_round(*narrow_format(t), v, NarrowRounding::kNearestEven));
    return;
  }
  const std::uint16_t h = t == DType::kBf16 ? f32_to_bf16(v) : f32_to_f16(v);
  std::memcpy(p + i * 2, &h, 2);
}

void encode_marker_nan(void* base, DType t, Index i) {
  auto* p = static_cast<unsigned char*>(base);
  if (is_fp8_dtype(t)) {  // FP8 has no spare NaN payloads: its one quiet NaN pattern
    p[i] = static_cast<unsigned char>(narrow_round(*narrow_format(t), std::nan(""), NarrowRounding::kNearestEven));
    return;
  }
  if (t == DType::kF32) {
    const std::uint32_t u = 0x7FA5A5A5u;
    std::memcpy(p + i * 4, &u, 4);
    return;
  }
  const std::uint16_t h = t == DType::kBf16 ? 0x7FA5u : 0x7DA5u;
  std::memcpy(p + i * 2, &h, 2);
}

}  // namespace ncert::reference
