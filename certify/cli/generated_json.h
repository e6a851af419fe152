// JSON parts of the generated files (generated.h): JSON has no comments to mark a section, so a
// JSON part names its value by a JSON pointer (RFC 6901, "/$defs/error/oneOf") and ncert-docgen
// replaces that value's text in place. Only the value's own text changes: the rest of the file
// keeps its hand layout (docs/report.schema.json puts short objects on one line), so a generated
// value does not reformat the whole file and a hand edit elsewhere never looks stale.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ncert::cli {

/// Where a value's text lies in a JSON document: bytes [begin, end).
struct JsonSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};

/// The span of the value at `pointer` ("" is the whole document) in `text`, or nothing when the
/// text is not JSON or the pointer names no value.
std::optional<JsonSpan> find_json_value(std::string_view text, std::string_view pointer);

/// `value` in the layout docs/report.schema.json uses: an object or array is written on one line
/// (`{"a": 1, "b": [2, 3]}`) when that line ends by column `width`, else one member per line,
/// each indented two spaces more than `indent`. `column` is where the value's first character
/// goes (the text before it on its line).
std::string format_json(const nlohmann::ordered_json& value, std::size_t indent, std::size_t column,
                        std::size_t width = 120);

/// `text` with the value at `pointer` replaced by `value`, formatted by format_json at the
/// column and indentation the old value had; nothing when find_json_value finds no value.
std::optional<std::string> replace_json_value(std::string_view text, std::string_view pointer,
                                              const nlohmann::ordered_json& value);

}  // namespace ncert::cli
