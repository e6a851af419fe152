#include "certify/report/printable.h"

#include <cstdint>
#include <cstdio>

namespace ncert::certify {

namespace {

/// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 if the bytes there are not one
/// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<std::uint8_t>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const std::uint8_t c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

void hex_escape(std::string& out, std::uint8_t c) {
  char buf[5];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

std::string repair(std::string_view s, bool escape_controls) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      hex_escape(out, static_cast<std::uint8_t>(s[i]));
      ++i;
      continue;
    }
    const auto c = static_cast<std::uint8_t>(s[i]);
    // C1 controls (U+0080-U+009F) are encoded C2 80 - C2 9F.
    const bool c1 = n == 2 && c == 0xC2 && static_cast<std::uint8_t>(s[i + 1]) < 0xA0;
    if (escape_controls && (c < 0x20 || c == 0x7F || c1)) {
      if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c == '\r')
        out += "\\r";
      else if (c1) {
        hex_escape(out, c);
        hex_escape(out, static_cast<std::uint8_t>(s[i + 1]));
      } else {
        hex_escape(out, c);
      }
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string printable(std::string_view text) { return repair(text, true); }
std::string valid_utf8(std::string_view text) { return repair(text, false); }

}  // namespace ncert::certify
