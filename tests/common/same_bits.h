// Test support: equal bits, or both NaN (NaN payloads are not part of the contract): what the
// reference's fast paths promise against the functions that define them
// (tests/unit/reference/directed_test.cc, element_bounds_test.cc).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ncert::testing {

inline bool same_or_both_nan(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}
inline bool same_or_both_nan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

}  // namespace ncert::testing
