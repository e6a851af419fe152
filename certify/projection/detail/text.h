// How the projection checks print an element: its coordinates and its stored bits.
#pragma once

#include <cstdint>
#include <string>

#include "certify/report/format.h"
#include "reference/dtype.h"
#include "reference/float_bits.h"

namespace ncert::certify::detail {

/// The raw pattern of an output element in hex (f32 bits, or the bf16 / f16 pattern).
inline std::string hex_bits(std::uint32_t bits, DType t) {
  return t == DType::kF32 ? hex_bits_f32(reference::f32_from_bits(bits))
                          : hex_bits_u16(static_cast<std::uint16_t>(bits));
}

/// "0xbfb8 (-1.4375)": an element's stored pattern, then its value.
inline std::string bits_text(std::uint32_t bits, DType t) {
  const float v = reference::value_of_bits(bits, t);
  return hex_bits(bits, t) + " (" + format_float(v) + ")";
}

/// "-1.4375 (0xbfb8)".
inline std::string value_text(float v, DType t) {
  const std::uint32_t bits = reference::bits_of_value(v, t);
  return format_float(v) + " (" + hex_bits(bits, t) + ")";
}

/// "row 3 col 7 (slot 1)"; the slot only when >= 0.
inline std::string where(Index row, Index col, Index slot) {
  std::string s = "row " + std::to_string(row) + " col " + std::to_string(col);
  if (slot >= 0) s += " (slot " + std::to_string(slot) + ")";
  return s;
}

/// "k 1088-1151", or "group 17 (k 1088-1151)" when the range is one weight group (group >= 0).
inline std::string range_text(Index k_begin, Index k_end, Index group) {
  std::string t = "k " + std::to_string(k_begin) + "-" + std::to_string(k_end - 1);
  return group >= 0 ? "group " + std::to_string(group) + " (" + t + ")" : t;
}

}  // namespace ncert::certify::detail
