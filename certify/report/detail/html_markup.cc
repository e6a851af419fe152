#include "certify/report/detail/html_markup.h"

#include <cstdint>

#include "certify/report/format.h"
#include "certify/report/printable.h"

namespace ncert::certify::detail {

std::string markup_fixed(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default: {
        // U+FFFE and U+FFFF (EF BF BE, EF BF BF) are not XML 1.0 characters.
        const auto u = [&](std::size_t k) { return static_cast<std::uint8_t>(text[k]); };
        if (u(i) == 0xEF && i + 2 < text.size() && u(i + 1) == 0xBF && (u(i + 2) == 0xBE || u(i + 2) == 0xBF)) {
          out += u(i + 2) == 0xBE ? "\\xef\\xbf\\xbe" : "\\xef\\xbf\\xbf";
          i += 2;
        } else {
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

std::string markup(std::string_view raw) { return markup_fixed(printable(raw)); }

std::string id_markup(std::string_view raw) {
  // Escaping leaves '/' alone and never produces one, so splitting the escaped text is exact.
  const std::string escaped = markup(raw);
  if (escaped.empty()) return "";
  std::string out;
  out.reserve(escaped.size() * 2);
  std::size_t begin = 0;
  while (begin < escaped.size()) {
    const std::size_t slash = escaped.find('/', begin);
    const std::size_t end = slash == std::string::npos ? escaped.size() : slash + 1;
    out += "<span class=\"n\">" + escaped.substr(begin, end - begin) + "</span>";
    if (slash != std::string::npos && end < escaped.size()) out += "<wbr>";
    begin = end;
  }
  return out;
}

std::string count_text(long long n) {
  const bool negative = n < 0;
  std::string digits =
      std::to_string(negative ? -static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return negative ? "-" + out : out;
}

std::string short_text(double v) { return format_short(v); }

}  // namespace ncert::certify::detail
