// This header defines how text that came from a dump (object names, attribute values, HDF5
// messages) is made safe to print: a name like "a\nPASS  schema  fake\x1b[2J" must neither
// forge a report line nor drive the terminal, and bytes that are not UTF-8 must not stop the
// JSON writer.
#pragma once

#include <string>
#include <string_view>

namespace ncert::certify {

/// Valid UTF-8 without control characters is returned as is; control characters (C0, DEL,
/// C1) become \n, \t, \r or \xNN, backslashes stay, and bytes that are not part of valid UTF-8
/// (overlong forms, surrogates, truncated sequences) become \xNN.
std::string printable(std::string_view text);

/// Only the UTF-8 repair of printable(): invalid bytes become \xNN, everything valid (control
/// characters included: JSON escapes those itself) is kept. For JSON strings.
std::string valid_utf8(std::string_view text);

}  // namespace ncert::certify
