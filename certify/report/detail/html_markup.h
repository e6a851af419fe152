// This header defines how text reaches the HTML and JUnit XML reports (render_html.h,
// render_junit.h): every string that may come from a dump is first made printable (printable.h:
// control characters and invalid UTF-8 become \xNN text), then markup-escaped, so a name such as
// `<script>"x"\x1b` shows as those characters and can neither open an element, close an
// attribute, nor make the XML ill-formed. XML 1.0 also forbids the noncharacters U+FFFE and
// U+FFFF, valid UTF-8 that printable() keeps: they become \xNN text too. Numbers are formatted
// here for both pages.
#pragma once

#include <string>
#include <string_view>

namespace ncert::certify::detail {

/// printable(raw), then &, <, >, " and ' escaped as character references: safe in element text
/// and in quoted attribute values, in HTML and in XML 1.0.
std::string markup(std::string_view raw);

/// A path-like id ("step-000/projections/attn_qkv/bound", a file path) as markup() gives it, cut
/// after each '/' into <span class="n"> parts that do not wrap inside (render_html.cc's style),
/// joined by <wbr>: the id breaks between its parts and nowhere else, never inside a name nor at a
/// name's own '-' ("wrong-row-scattered"; an id without '/' is one part).
std::string id_markup(std::string_view raw);

/// Text that is already ASCII and printable (numbers, fixed labels), escaped the same way.
std::string markup_fixed(std::string_view text);

/// A count with thousands separators ("1,234,567").
std::string count_text(long long n);

/// A double with 4 significant digits; "inf", "-inf", "nan" where not finite.
std::string short_text(double v);

}  // namespace ncert::certify::detail
