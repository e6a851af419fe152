#include "certify/cli/generated_json.h"

#include <charconv>
#include <vector>

namespace ncert::cli {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t skip_space(std::string_view text, std::size_t at) {
  while (at < text.size() && is_space(text[at])) ++at;
  return at;
}

// The end of the string literal starting at `at` (its opening quote).
std::size_t skip_string(std::string_view text, std::size_t at) {
  for (++at; at < text.size(); ++at) {
    if (text[at] == '\\') {
      ++at;
    } else if (text[at] == '"') {
      return at + 1;
    }
  }
  return text.size();
}

// The end of the value starting at `at`. The text is known to be valid JSON (checked first), so
// a container ends where its brackets balance, outside strings.
std::size_t skip_value(std::string_view text, std::size_t at) {
  if (text[at] == '"') return skip_string(text, at);
  if (text[at] != '{' && text[at] != '[') {
    while (at < text.size() && !is_space(text[at]) && text[at] != ',' && text[at] != '}' && text[at] != ']') ++at;
    return at;
  }
  int depth = 0;
  while (at < text.size()) {
    const char c = text[at];
    if (c == '"') {
      at = skip_string(text, at);
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth == 0) return at + 1;
    }
    ++at;
  }
  return text.size();
}

// The reference tokens of a JSON pointer, with ~1 and ~0 decoded (RFC 6901 §4).
std::optional<std::vector<std::string>> pointer_tokens(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer[0] != '/') return std::nullopt;
  std::string token;
  for (std::size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens.push_back(token);
      token.clear();
    } else if (pointer[i] == '~') {
      if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) return std::nullopt;
      token += pointer[++i] == '0' ? '~' : '/';
    } else {
      token += pointer[i];
    }
  }
  return tokens;
}

// Steps from the container at `at` into its member `token`; the position of that member's value.
std::optional<std::size_t> step_into(std::string_view text, std::size_t at, const std::string& token) {
  if (text[at] == '{') {
    at = skip_space(text, at + 1);
    while (text[at] == '"') {
      const std::size_t key_end = skip_string(text, at);
      const auto key = nlohmann::json::parse(text.substr(at, key_end - at)).get<std::string>();
      at = skip_space(text, skip_space(text, key_end) + 1);  // past ':'
      if (key == token) return at;
      at = skip_space(text, skip_value(text, at));
      if (text[at] == ',') at = skip_space(text, at + 1);
    }
    return std::nullopt;
  }
  if (text[at] == '[') {
    std::size_t index = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
    if (ec != std::errc() || end != token.data() + token.size() || token.empty()) return std::nullopt;
    at = skip_space(text, at + 1);
    for (std::size_t i = 0; text[at] != ']'; ++i) {
      if (i == index) return at;
      at = skip_space(text, skip_value(text, at));
      if (text[at] == ',') at = skip_space(text, at + 1);
    }
  }
  return std::nullopt;
}

std::string one_line(const nlohmann::ordered_json& value) {
  if (value.is_object() && !value.empty()) {
    std::string s = "{";
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (it != value.begin()) s += ", ";
      s += nlohmann::json(it.key()).dump() + ": " + one_line(it.value());
    }
    return s + "}";
  }
  if (value.is_array() && !value.empty()) {
    std::string s = "[";
    for (std::size_t i = 0; i < value.size(); ++i) s += (i ? ", " : "") + one_line(value[i]);
    return s + "]";
  }
  return value.dump();
}

// `tail` is what follows the value on its line (a comma, or nothing).
void format_into(std::string& out, const nlohmann::ordered_json& value, std::size_t indent, std::size_t column,
                 std::size_t tail, std::size_t width) {
  const std::string line = one_line(value);
  if (!value.is_structured() || value.empty() || column + line.size() + tail <= width) {
    out += line;
    return;
  }
  const std::string inner(indent + 2, ' ');
  out += value.is_object() ? "{\n" : "[\n";
  std::size_t i = 0;
  for (auto it = value.begin(); it != value.end(); ++it, ++i) {
    const bool last = i + 1 == value.size();
    out += inner;
    std::size_t at = inner.size();
    if (value.is_object()) {
      const std::string key = nlohmann::json(it.key()).dump() + ": ";
      out += key;
      at += key.size();
    }
    format_into(out, it.value(), indent + 2, at, last ? 0 : 1, width);
    out += last ? "\n" : ",\n";
  }
  out += std::string(indent, ' ') + (value.is_object() ? "}" : "]");
}

}  // namespace

std::optional<JsonSpan> find_json_value(std::string_view text, std::string_view pointer) {
  if (!nlohmann::json::accept(text)) return std::nullopt;
  const auto tokens = pointer_tokens(pointer);
  if (!tokens) return std::nullopt;
  std::size_t at = skip_space(text, 0);
  for (const std::string& token : *tokens) {
    const auto next = step_into(text, at, token);
    if (!next) return std::nullopt;
    at = *next;
  }
  return JsonSpan{at, skip_value(text, at)};
}

std::string format_json(const nlohmann::ordered_json& value, std::size_t indent, std::size_t column,
                        std::size_t width) {
  std::string out;
  format_into(out, value, indent, column, 0, width);
  return out;
}

std::optional<std::string> replace_json_value(std::string_view text, std::string_view pointer,
                                              const nlohmann::ordered_json& value) {
  const auto span = find_json_value(text, pointer);
  if (!span) return std::nullopt;
  const std::size_t line_start =
      text.rfind('\n', span->begin) == std::string_view::npos ? 0 : text.rfind('\n', span->begin) + 1;
  std::size_t indent = line_start;
  while (indent < span->begin && text[indent] == ' ') ++indent;
  std::string out(text.substr(0, span->begin));
  out += format_json(value, indent - line_start, span->begin - line_start);
  out += text.substr(span->end);
  return out;
}

}  // namespace ncert::cli
