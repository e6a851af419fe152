// This header defines the narrow binary float formats of the dump format (docs/dump-format.md §1):
// f16, bf16, and the two OCP 8-bit formats e4m3 (E4M3FN: no infinities, one NaN per sign,
// largest finite 448) and e5m2 (IEEE-like, largest finite 57,344). One description per format,
// an exact decode, and the one correct rounding of an f64 value into each in every mode the format
// names (to nearest even, to nearest away, toward zero, down, up), with the overflow rule of IEEE
// (inf, or NaN for a format without infinities) or the OCP `satfinite` saturation.
#pragma once

#include <cstdint>

#include "reference/dtype.h"

namespace ncert::reference {

struct NarrowFormat {
  int exponent_bits = 5;
  int mantissa_bits = 10;  ///< stored fraction bits (the significand has one more)
  int bias = 15;
  /// IEEE formats reserve the top exponent for inf/NaN; E4M3FN uses it for finite values except
  /// the all-ones mantissa (NaN) and has no infinity.
  bool has_infinity = true;
  double max_finite = 65504.0;

  int width() const { return 1 + exponent_bits + mantissa_bits; }
  std::uint32_t sign_bit() const { return std::uint32_t{1} << (exponent_bits + mantissa_bits); }
};

inline constexpr NarrowFormat kF16Format{5, 10, 15, true, 65504.0};
inline constexpr NarrowFormat kBf16Format{8, 7, 127, true, 0x1.FEp127};
inline constexpr NarrowFormat kE4m3Format{4, 3, 7, false, 448.0};
inline constexpr NarrowFormat kE5m2Format{5, 2, 15, true, 57344.0};

/// The format of f16, bf16, e4m3 or e5m2 (nullptr for any other type).
const NarrowFormat* narrow_format(DType t);

enum class NarrowRounding : std::uint8_t { kNearestEven, kNearestAway, kTowardZero, kDown, kUp };
/// kIeee: a result beyond the largest finite value is an infinity (NaN for e4m3) where the mode
/// rounds away from it, else the largest finite value; kSaturate: always the largest finite value
/// (OCP satfinite), an infinite input included. NaN stays NaN either way.
enum class NarrowOverflow : std::uint8_t { kIeee, kSaturate };

/// The exact value of a pattern (its low width() bits): NaN for NaN patterns, +-inf for IEEE
/// infinities, subnormals kept.
double narrow_decode(const NarrowFormat& f, std::uint32_t bits);
/// x rounded once into the format. A NaN becomes the format's quiet NaN with x's sign; -0 stays
/// -0, and a nonzero value that rounds to zero keeps its sign.
std::uint32_t narrow_round(const NarrowFormat& f, double x, NarrowRounding mode,
                           NarrowOverflow overflow = NarrowOverflow::kIeee);

/// ULP distance on the patterns of a narrow format, by docs/formats.md "ULP distance": a NaN is
/// UINT64_MAX from everything; an infinity 0 from itself and UINT64_MAX from anything else;
/// +0 and -0 are 0 apart; otherwise the difference of the sign-magnitude keys.
std::uint64_t narrow_ulp_distance(const NarrowFormat& f, std::uint32_t a, std::uint32_t b);

/// Decode tables of the two 8-bit formats (index = pattern), exact in f32.
float e4m3_to_f32(std::uint8_t b);
float e5m2_to_f32(std::uint8_t b);

}  // namespace ncert::reference
