// This header defines the ncert command line as one CLI11 App (every subcommand registered),
// shared by the executable and by the generator of its bash completion and man page, so the
// three never disagree.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "certify/cli/cli_common.h"

namespace ncert::cli {

/// Registers every subcommand, --version and the exit-code footer on `app`.
void build_app(CLI::App& app, Action& action);

/// Whether `name` is one of the app's subcommands.
bool is_subcommand(const CLI::App& app, std::string_view name);

/// The subcommand closest to `typo` (Damerau-Levenshtein distance <= 2, or a prefix), or "".
std::string suggest_subcommand(const CLI::App& app, std::string_view typo);

/// For a command line CLI11 refused with arguments left over: the first `--name` (or
/// `--name=value`) that is not an option of the command `args[0]` names, said as "unknown option
/// --thread for `ncert check`; did you mean --threads?", or "" when every option is known (the
/// left-over argument is then a positional one, and CLI11's message stands).
std::string unknown_option(const CLI::App& app, const std::vector<std::string>& args);

/// The bash completion script (subcommands, their flags, files for positional arguments).
std::string bash_completion(const CLI::App& app);
/// The man page (troff -man): synopsis, every subcommand with its options, exit codes.
std::string man_page(const CLI::App& app);

}  // namespace ncert::cli
