#include "certify/report/format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ncert::certify {

std::string format_f32(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int p = 6; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) return buf;
  }
  return buf;
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int p = 6; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return buf;
}

std::string format_short(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string format_scale(double v) {
  const double d = std::fabs(v - 1);
  if (!std::isfinite(v) || d == 0 || d >= 1e-3) return format_short(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", 3 + static_cast<int>(std::ceil(-std::log10(d))), v);
  return buf;
}

std::string hex_bits_f32(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", u);
  return buf;
}

std::string hex_bits_u16(std::uint16_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}

}  // namespace ncert::certify
