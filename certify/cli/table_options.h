// This header registers a command's option table (certify/commands/option_table.h) as CLI11
// options: each spec becomes one flag with its range as a validator, a text's grammar as a
// validator (a usage error, exit 2, before any work) and "help (range; default)" as its
// description, so --help, the completion script and the man page show what the table says.
// The values land in the options struct when the command is chosen (apply()).
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "certify/commands/option_table.h"

namespace ncert::cli {

template <class Options>
class TableOptions {
 public:
  /// Adds every spec of `table` to `cmd`; the values are applied to `*target` by apply().
  TableOptions(CLI::App* cmd, const certify::OptionTable<Options>& table, Options* target) : target_(target) {
    for (const certify::OptionSpec<Options>& spec : table) add(cmd, spec);
  }

  /// Stores every option given on the command line into the target. The validators ran the
  /// same parsers already, so a failure here is a programming error.
  Status apply() const {
    for (const std::unique_ptr<Slot>& s : slots_) {
      if (s->option->count() == 0) continue;
      NCERT_RETURN_IF_ERROR(s->spec->set(*target_, s->value()));
    }
    return Status();
  }

 private:
  struct Slot {
    const certify::OptionSpec<Options>* spec = nullptr;
    CLI::Option* option = nullptr;
    bool flag = false;
    double number = 0;
    std::int64_t integer = 0;
    std::string text;
    std::vector<std::string> texts;

    certify::OptionValue value() const {
      switch (spec->type) {
        case certify::OptionType::kFlag:
          return flag;
        case certify::OptionType::kNumber:
          return number;
        case certify::OptionType::kInteger:
          return integer;
        case certify::OptionType::kText:
          return text;
        case certify::OptionType::kTextList:
          return texts;
      }
      return flag;
    }
  };

  /// A CLI11 validator running the spec's own parser on one text.
  static CLI::Validator grammar(const certify::OptionSpec<Options>* spec) {
    return CLI::Validator(
        [spec](const std::string& text) {
          Options scratch{};
          const Status s = spec->type == certify::OptionType::kTextList
                               ? spec->set(scratch, std::vector<std::string>{text})
                               : spec->set(scratch, text);
          if (s.ok()) return std::string();
          // A refusal with a code of its own (a bad skip policy file) says it, as errors do.
          if (s.code() != ErrorCode::kUsage) return s.to_string();
          return s.message();
        },
        // No description: the value's name is already shown, and the help carries the grammar.
        "");
  }

  /// A CLI11 validator for a number option: "8GiB is not a whole number of bytes (e.g. 8589934592 for
  /// 8 GiB)", "0 is outside 1–1000", in the terms of the help, where CLI11's Range said "Value
  /// 8GiB not in range 1048576 to 1125899906842624" for both.
  static CLI::Validator bounded(const certify::OptionSpec<Options>* spec) {
    return CLI::Validator(
        [spec](const std::string& text) {
          const bool integer = spec->type == certify::OptionType::kInteger;
          const char* begin = text.c_str();
          char* end = nullptr;
          errno = 0;
          const double v = integer ? static_cast<double>(std::strtoll(begin, &end, 10)) : std::strtod(begin, &end);
          const bool parsed = !text.empty() && end == begin + text.size() && errno == 0 && std::isfinite(v);
          if (!parsed) {
            if (spec->value_name == "BYTES")
              return text + " is not a whole number of bytes (e.g. 8589934592 for 8 GiB)";
            if (spec->value_name == "SECONDS") return text + " is not a number of seconds";
            return text + " is not " + (integer ? "an integer" : "a number");
          }
          if (v < spec->lo || v > spec->hi) return text + " is outside " + spec->range_text();
          return std::string();
        },
        "");
  }

  void add(CLI::App* cmd, const certify::OptionSpec<Options>& spec) {
    slots_.push_back(std::make_unique<Slot>());
    Slot& s = *slots_.back();
    s.spec = &spec;
    const std::string name = "--" + spec.flag;
    const std::string help = spec.described();
    switch (spec.type) {
      case certify::OptionType::kFlag:
        s.option = cmd->add_flag(name, s.flag, help);
        return;
      case certify::OptionType::kNumber:
        // The range is in the help ("(1–1000; default 10)"), as in the man page and the docs.
        s.option = cmd->add_option(name, s.number, help)->check(bounded(&spec));
        break;
      case certify::OptionType::kInteger:
        s.option = cmd->add_option(name, s.integer, help)->check(bounded(&spec));
        break;
      case certify::OptionType::kText:
        s.option = cmd->add_option(name, s.text, help)->check(grammar(&spec));
        break;
      case certify::OptionType::kTextList:
        s.option = cmd->add_option(name, s.texts, help)->check(grammar(&spec));
        break;
    }
    s.option->type_name(spec.value_name);
  }

  Options* target_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace ncert::cli
