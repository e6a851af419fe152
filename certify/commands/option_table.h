// This header defines the one declarative description of a command's options: for each option
// its flag, its manifest key, its type, range and default, its help and the field it sets. One
// table per command (option_tables.h) is the only place an option is written down:
//   - the CLI registers its CLI11 options from it (certify/cli/table_options.h), with the range
//     as a validator and the help, range and default in --help, the completion and the man page;
//   - a campaign validates and applies each manifest entry's options through it
//     (certify/campaign/entry_options.cc), with the same ranges and parsers;
//   - ncert-docgen writes the options tables of docs/cli.md and docs/campaigns.md from it, and a
//     test fails when a committed table differs from what the code would write.
// The default is never written in the table: it is read from a value-initialized options
// struct, so the field's initializer is the one source of it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "certify/report/format.h"
#include "reference/status.h"

namespace ncert::certify {

/// What an option takes: nothing (a flag), a number, a whole number, a text, or texts (a
/// repeatable flag on the command line, a JSON list in a manifest).
enum class OptionType { kFlag, kNumber, kInteger, kText, kTextList };

/// A value as given, before it is applied: the type's alternative of OptionType, in order.
using OptionValue = std::variant<bool, double, std::int64_t, std::string, std::vector<std::string>>;

template <class Options>
struct OptionSpec {
  std::string flag;  ///< "allow-vacuous": `--allow-vacuous` on the command line
  std::string key;   ///< "allow_vacuous": the manifest key; "" for command-line-only options
  OptionType type = OptionType::kFlag;
  std::string value_name;  ///< "X", "TEXT", "W.h5" ("" for a flag)
  std::string help;        ///< one or two sentences, plain text (--help, man page, docs)
  double lo = 0, hi = 0;   ///< kNumber / kInteger: the accepted range, both ends included
  bool nullable = false;   ///< manifest: JSON null means "not given" (e.g. logit_error)
  /// Parses (where the type has a grammar) and stores a value; a kUsage message without the
  /// option's name when it is malformed ("unknown kind 'x'").
  std::function<Status(Options&, const OptionValue&)> set;
  /// The default as shown to people ("10", "bitwise"), read from Options{}; nullopt: none.
  std::function<std::optional<std::string>(const Options&)> shown_default;

  /// `--flag VALUE` as written in the docs and the man page.
  std::string synopsis() const { return "--" + flag + (value_name.empty() ? "" : " " + value_name); }
  /// The range as text ("1–1000"), "" for types without one.
  std::string range_text() const;
  /// Help plus range and default, for --help and the man page.
  std::string described() const;
};

template <class Options>
using OptionTable = std::vector<OptionSpec<Options>>;

/// The spec of `table` named by its manifest key, or nullptr.
template <class Options>
const OptionSpec<Options>* find_by_key(const OptionTable<Options>& table, std::string_view key) {
  for (const OptionSpec<Options>& s : table) {
    if (!s.key.empty() && s.key == key) return &s;
  }
  return nullptr;
}

namespace option_detail {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

inline std::string default_key(std::string_view flag) {
  std::string key(flag);
  for (char& c : key) c = c == '-' ? '_' : c;
  return key;
}

template <class Options, class Field>
auto field_of(const Options& defaults, Field field) {
  Options copy = defaults;
  return field(copy);
}

}  // namespace option_detail

template <class Options>
std::string OptionSpec<Options>::range_text() const {
  if (type == OptionType::kInteger) return std::to_string(std::int64_t(lo)) + "–" + std::to_string(std::int64_t(hi));
  if (type == OptionType::kNumber) return format_float(lo) + "–" + format_float(hi);
  return "";
}

template <class Options>
std::string OptionSpec<Options>::described() const {
  std::string out = help;
  const std::string range = range_text();
  const std::optional<std::string> d = shown_default(Options{});
  if (!range.empty() || d) {
    out += " (";
    if (!range.empty()) out += range;
    if (d) out += (range.empty() ? "" : "; ") + std::string("default ") + *d;
    out += ")";
  }
  return out;
}

/// Builders: each takes the flag, the value's name, the help and `field`, a callable that
/// returns a reference to the member the option sets (`[](CheckCommandOptions& o) -> auto& {
/// return o.check.lambda; }`). Chain `.key`, by assignment, where the manifest key is not the
/// flag with '_' for '-'; an empty key keeps an option off manifests.

/// A flag: present means true. Its default (false) is not shown.
template <class Options, class Field>
OptionSpec<Options> flag_option(const std::string& flag, const std::string& help, Field field) {
  OptionSpec<Options> s;
  s.key = option_detail::default_key(flag);
  s.flag = flag;
  s.type = OptionType::kFlag;
  s.help = help;
  s.set = [field](Options& o, const OptionValue& v) {
    field(o) = std::get<bool>(v);
    return Status();
  };
  s.shown_default = [](const Options&) { return std::optional<std::string>(); };
  return s;
}

/// A number in [lo, hi]; a field of type std::optional<double> makes it nullable (no default).
template <class Options, class Field>
OptionSpec<Options> number_option(const std::string& flag, const std::string& value_name, const std::string& help,
                                  double lo, double hi, Field field) {
  OptionSpec<Options> s;
  s.key = option_detail::default_key(flag);
  s.flag = flag;
  s.type = OptionType::kNumber;
  s.value_name = value_name;
  s.help = help;
  s.lo = lo;
  s.hi = hi;
  using Stored = std::remove_reference_t<decltype(field(std::declval<Options&>()))>;
  s.nullable = option_detail::IsOptional<Stored>::value;
  s.set = [field](Options& o, const OptionValue& v) {
    field(o) = std::get<double>(v);
    return Status();
  };
  s.shown_default = [field](const Options& defaults) {
    const auto value = option_detail::field_of(defaults, field);
    if constexpr (std::is_same_v<Stored, double>) {
      return std::optional<std::string>(format_float(value));
    } else {
      return value ? std::optional<std::string>(format_float(*value)) : std::nullopt;
    }
  };
  return s;
}

/// A whole number in [lo, hi] (4.5 and 1e3 are refused, on the command line and in manifests).
template <class Options, class Field>
OptionSpec<Options> integer_option(const std::string& flag, const std::string& value_name, const std::string& help,
                                   std::int64_t lo, std::int64_t hi, Field field) {
  OptionSpec<Options> s;
  s.key = option_detail::default_key(flag);
  s.flag = flag;
  s.type = OptionType::kInteger;
  s.value_name = value_name;
  s.help = help;
  s.lo = static_cast<double>(lo);
  s.hi = static_cast<double>(hi);
  s.set = [field](Options& o, const OptionValue& v) {
    using Stored = std::remove_reference_t<decltype(field(o))>;
    field(o) = static_cast<Stored>(std::get<std::int64_t>(v));
    return Status();
  };
  s.shown_default = [field](const Options& defaults) {
    return std::optional<std::string>(std::to_string(option_detail::field_of(defaults, field)));
  };
  return s;
}

/// A text stored as given; its default is shown when not empty.
template <class Options, class Field>
OptionSpec<Options> text_option(const std::string& flag, const std::string& value_name, const std::string& help,
                                Field field) {
  OptionSpec<Options> s;
  s.key = option_detail::default_key(flag);
  s.flag = flag;
  s.type = OptionType::kText;
  s.value_name = value_name;
  s.help = help;
  s.set = [field](Options& o, const OptionValue& v) {
    field(o) = std::get<std::string>(v);
    return Status();
  };
  s.shown_default = [field](const Options& defaults) {
    const std::string value = option_detail::field_of(defaults, field);
    return value.empty() ? std::nullopt : std::optional<std::string>(value);
  };
  return s;
}

/// A path: a text that may not be empty. An empty path names no file, and the empty field means
/// "not given", so `--json ""` (a shell variable never set) would silently write no report.
template <class Options, class Field>
OptionSpec<Options> path_option(const std::string& flag, const std::string& value_name, const std::string& help,
                                Field field) {
  OptionSpec<Options> s = text_option<Options>(flag, value_name, help, field);
  s.set = [field](Options& o, const OptionValue& v) {
    const std::string& path = std::get<std::string>(v);
    if (path.empty()) return Status(ErrorCode::kUsage, "an empty path names no file");
    field(o) = path;
    return Status();
  };
  return s;
}

/// A text with a grammar: `parse(text) -> Result<T>` stores into a field of type T or
/// std::optional<T>; `name(const T&) -> std::string` shows the default (nullopt for an empty
/// optional). A text that does not parse is a usage error carrying the parser's message (or the
/// parser's own error, when it has another code).
template <class Options, class Field, class Parse, class Name>
OptionSpec<Options> parsed_option(const std::string& flag, const std::string& value_name, const std::string& help,
                                  Parse parse, Name name, Field field) {
  OptionSpec<Options> s = text_option<Options>(flag, value_name, help, [](Options&) -> std::string& {
    static thread_local std::string unused;
    return unused;
  });
  s.set = [field, parse](Options& o, const OptionValue& v) {
    auto parsed = parse(std::get<std::string>(v));
    // A parser's own refusal code is kept where it is the command line's kind of error
    // (skip-policy-invalid, 107: exit 2); any other code is a usage error with the parser's
    // message: `--policy ulp:-1` printed policy-invalid (409), whose exit for an input is 3, and
    // exited 2.
    if (!parsed.ok() && exit_code_for(parsed.status().code()) == 2) return parsed.status();
    if (!parsed.ok()) return Status(ErrorCode::kUsage, parsed.status().message());
    field(o) = *std::move(parsed);
    return Status();
  };
  s.shown_default = [field, name](const Options& defaults) -> std::optional<std::string> {
    const auto value = option_detail::field_of(defaults, field);
    std::string shown;
    if constexpr (option_detail::IsOptional<std::remove_cv_t<decltype(value)>>::value) {
      if (!value) return std::nullopt;
      shown = name(*value);
    } else {
      shown = name(value);
    }
    return shown.empty() ? std::nullopt : std::optional<std::string>(shown);
  };
  return s;
}

/// Texts, each parsed by `parse_each(text) -> Result<E>` and appended to a std::vector<E>
/// field (a repeatable flag; a JSON list of strings in a manifest).
template <class Options, class Field, class Parse>
OptionSpec<Options> list_option(const std::string& flag, const std::string& value_name, const std::string& help,
                                Parse parse_each, Field field) {
  OptionSpec<Options> s;
  s.key = option_detail::default_key(flag);
  s.flag = flag;
  s.type = OptionType::kTextList;
  s.value_name = value_name;
  s.help = help;
  s.set = [field, parse_each](Options& o, const OptionValue& v) {
    auto& out = field(o);
    out.clear();
    for (const std::string& text : std::get<std::vector<std::string>>(v)) {
      auto parsed = parse_each(text);
      if (!parsed.ok()) return Status(ErrorCode::kUsage, parsed.status().message());
      out.push_back(*std::move(parsed));
    }
    return Status();
  };
  s.shown_default = [](const Options&) { return std::optional<std::string>(); };
  return s;
}

}  // namespace ncert::certify
