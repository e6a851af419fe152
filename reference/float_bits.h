// This header defines ncert's bit-exact float codecs: bf16 and f16 to and from f32,
// directed (outward) roundings f64 -> f32 / bf16 and f64 additions used by interval
// propagation, and ULP distances on the monotone integer key. See docs/formats.md for the
// bit layouts, the NaN policy and the test vectors.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "reference/dtype.h"

namespace ncert::reference {

inline std::uint32_t f32_bits(float f) { return std::bit_cast<std::uint32_t>(f); }
inline float f32_from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// ---- bf16 ---------------------------------------------------------------------------------

/// Exact: a bf16 is the top half of an f32.
inline float bf16_to_f32(std::uint16_t b) { return f32_from_bits(std::uint32_t{b} << 16); }

/// Round to nearest, ties to even. Overflow goes to +-inf (0x7F7FFFFF -> 0x7F80), subnormals
/// are kept (never flushed). NaN stays NaN: sign and the top 6 payload bits are kept and the
/// quiet bit is forced (the ggml convention), so a NaN never becomes an infinity.
inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// Round toward zero (what a careless kernel does: keep the top 16 bits). NaN as above.
inline std::uint16_t f32_to_bf16_truncate(float f) {
  const std::uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// f32 -> bf16 rounding toward -inf / +inf (exact values are returned unchanged).
std::uint16_t f32_to_bf16_down(float f);
std::uint16_t f32_to_bf16_up(float f);

/// Rounds an f32 value to bf16 (RNE) and back: the value an f32 takes when stored as bf16.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// ---- f16 ----------------------------------------------------------------------------------

/// Exact decode of IEEE binary16 (1/5/10 bits, bias 15), subnormals and NaN payloads kept.
float f16_to_f32(std::uint16_t h);
/// Element i of a raw array of f32, bf16, f16, e4m3 or e5m2 values (native byte order), decoded
/// exactly.
float decode_element(const void* base, DType t, Index i);
/// Stores v as element i of a raw array of t (f32 as is; bf16 and f16 rounded to nearest
/// even): the one encoder beside decode_element, shared by every writer of raw buffers.
void encode_element(void* base, DType t, Index i, float v);
/// Stores a signalling-NaN pattern (0x7FA5A5A5 f32, 0x7FA5 bf16, 0x7DA5 f16) as element i: no
/// arithmetic produces one, so finding it in an output cell means it was copied there.
void encode_marker_nan(void* base, DType t, Index i);

/// Round to nearest even; overflow (>= 65520) to +-inf; NaN stays a quiet NaN.
std::uint16_t f32_to_f16(float f);
/// Round toward zero (the careless kernel's truncation); NaN stays a quiet NaN.
std::uint16_t f32_to_f16_truncate(float f);
/// f64 -> f16 rounding toward -inf / +inf, each one correct rounding.
std::uint16_t f64_to_f16_down(double x);
std::uint16_t f64_to_f16_up(double x);

// ---- any output type ---------------------------------------------------------------------

/// The value of a stored f32, bf16 or f16 pattern (the low 16 bits for the 16-bit types).
inline float value_of_bits(std::uint32_t bits, DType t) {
  if (t == DType::kF32) return f32_from_bits(bits);
  return t == DType::kBf16 ? bf16_to_f32(static_cast<std::uint16_t>(bits))
                           : f16_to_f32(static_cast<std::uint16_t>(bits));
}
/// The pattern v takes in an f32, bf16 or f16 buffer (rounded to nearest even).
inline std::uint32_t bits_of_value(float v, DType t) {
  if (t == DType::kF32) return f32_bits(v);
  return t == DType::kBf16 ? f32_to_bf16(v) : f32_to_f16(v);
}
/// v rounded to an output type and widened back (f32 unchanged): to nearest even, or toward zero.
inline float round_to_type(float v, DType t, bool toward_zero) {
  if (t == DType::kF32) return v;
  if (t == DType::kBf16) return bf16_to_f32(toward_zero ? f32_to_bf16_truncate(v) : f32_to_bf16(v));
  return f16_to_f32(toward_zero ? f32_to_f16_truncate(v) : f32_to_f16(v));
}
/// The spacing of an output type's values at magnitude a >= 0: 2^(e - mantissa bits) in
/// [2^e, 2^(e+1)), the subnormal spacing below the smallest normal (bf16 2^-133, f16 2^-24,
/// f32 2^-149).
double spacing_of_type(double a, DType t);

// ---- directed roundings -------------------------------------------------------------------

/// The largest f32 <= x (round toward -inf) and the smallest f32 >= x. Overflow behaves as
/// directed rounding must: RD(+huge) = FLT_MAX, RD(-huge) = -inf. NaN stays NaN.
float f64_to_f32_down(double x);
float f64_to_f32_up(double x);
/// The same into bf16 (composition of two roundings in the same direction is exact).
std::uint16_t f64_to_bf16_down(double x);
std::uint16_t f64_to_bf16_up(double x);

/// a + b rounded toward -inf / +inf in f64, exactly (TwoSum tells the sign of the error).
double add_down(double a, double b);
double add_up(double a, double b);

// ---- ULPs ---------------------------------------------------------------------------------

/// Monotone integer key: key(+x) = bits, key(-x) = -(bits & 0x7FFFFFFF). Both zeros map to 0,
/// order is preserved, and adjacent floats differ by 1.
inline std::int64_t ulp_key_f32(float f) {
  const std::uint32_t u = f32_bits(f);
  return (u & 0x80000000u) ? -static_cast<std::int64_t>(u & 0x7FFFFFFFu) : static_cast<std::int64_t>(u);
}
inline std::int32_t ulp_key_bf16(std::uint16_t b) {
  return (b & 0x8000u) ? -static_cast<std::int32_t>(b & 0x7FFFu) : static_cast<std::int32_t>(b);
}

/// Returned by ulp_distance_* when no finite distance exists.
inline constexpr std::uint64_t kUlpInfinite = std::numeric_limits<std::uint64_t>::max();

/// ULP distance policy (docs/formats.md "ULP distance"): equal values (including +0 vs -0) are 0 apart;
/// any NaN is kUlpInfinite from everything, itself included (a NaN is never "close"); an
/// infinity is 0 from the same infinity and kUlpInfinite from anything else (key(+inf) =
/// key(FLT_MAX) + 1 would otherwise call overflow "1 ulp"). Otherwise |key(a) - key(b)|.
std::uint64_t ulp_distance_f32(float a, float b);
/// The same on bf16 patterns, counted in bf16 ulps (never widened to f32 first).
std::uint64_t ulp_distance_bf16(std::uint16_t a, std::uint16_t b);

/// The same on IEEE binary16 patterns, counted in f16 ulps.
std::uint64_t ulp_distance_f16(std::uint16_t a, std::uint16_t b);

/// The spacing of f32 at x: 2^(e-23) for 2^e <= |x| < 2^(e+1), 2^-149 below 2^-126, inf at inf.
double ulp_of_f32(float x);

}  // namespace ncert::reference
