// This header defines how numbers appear in reasons and reports: shortest round-trip decimals
// for values, four significant digits for statistics, and raw bit patterns in hex.
#pragma once

#include <cstdint>
#include <string>

namespace ncert::certify {

/// Shortest round-trip decimal of a double ("0.1", "1e-07").
std::string format_float(double v);
/// Shortest decimal that reads back as the same f32 (logits: "13.999999", not "13.999999046325684").
std::string format_f32(float v);
/// 4 significant digits, for statistics in human-readable reasons ("1.27e-05", "0.0161").
std::string format_short(double v);
/// A fitted scale with the digits its distance from 1 needs: "1.0005" (format_short prints 1,
/// as for a row without a fault), "1.02".
std::string format_scale(double v);
/// "0x3f800000" for an f32, "0x3f80" for a bf16 pattern.
std::string hex_bits_f32(float v);
std::string hex_bits_u16(std::uint16_t v);

}  // namespace ncert::certify
