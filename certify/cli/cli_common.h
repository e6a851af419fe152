// Shared plumbing of the `ncert` subcommands: the common options of docs/cli.md
// (--json, --threads, --quiet, plus --max-memory), and emit(), which prints the human summary,
// writes the JSON report and maps the outcome to the exit code. Nothing else lives here.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/report/report.h"

namespace ncert::cli {

struct CommonOptions {
  std::string json_path;  ///< "-" for stdout
  int threads = 0;        ///< 0: OpenMP's default (OMP_NUM_THREADS or all cores)
  bool quiet = false;
  std::uint64_t max_memory = certify::kDefaultMemoryLimit;
};

/// Adds --json, --threads, --quiet and --max-memory to a subcommand.
void add_common_options(CLI::App* cmd, CommonOptions* options);

/// The error model of logits: --logit-error ABS (absent: negative) and --lambda, with one help
/// text wherever they appear (check, witness, forks).
struct LogitErrorOptions {
  double logit_error = -1;
  double lambda = 10.0;
  std::optional<double> absolute() const {
    return logit_error >= 0 ? std::optional<double>(logit_error) : std::nullopt;
  }
};
void add_logit_error_options(CLI::App* cmd, LogitErrorOptions* options, const char* logit_error_help);

/// --require all|KIND[,KIND...]: skipped checks of these kinds fail the run. Validated by CLI11
/// (a usage error for an unknown kind); `requirement()` parses the accepted text.
void add_require_option(CLI::App* cmd, std::string* text);
certify::Requirement requirement(const std::string& text);

/// --pair a:b (repeatable), validated by CLI11 (a usage error without the colon).
void add_pair_option(CLI::App* cmd, std::vector<std::string>* pairs);
std::vector<std::pair<std::string, std::string>> split_pairs(const std::vector<std::string>& pairs);

/// Applies --threads to OpenMP (fixed team size, no dynamic adjustment: results are identical
/// at any thread count anyway, but timings should not surprise).
void apply_threads(const CommonOptions& options);

/// Prints the report (summary to stdout unless --quiet, which prints failures only), writes
/// --json, and returns the exit code. A library error becomes "ncert: error: ..." on stderr
/// with its mapped exit code.
int emit(const Result<certify::Report>& result, const CommonOptions& options);

/// Each subcommand registers itself and sets `action` when it is the one chosen.
using Action = std::function<int()>;
void register_inspect(CLI::App& app, Action& action);
void register_check(CLI::App& app, Action& action);
void register_demo(CLI::App& app, Action& action);
void register_sweep(CLI::App& app, Action& action);
void register_witness(CLI::App& app, Action& action);
void register_compare(CLI::App& app, Action& action);
void register_forks(CLI::App& app, Action& action);

}  // namespace ncert::cli
