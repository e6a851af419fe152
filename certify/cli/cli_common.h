// Shared plumbing of the `ncert` subcommands: the common options of docs/cli.md
// (--json, --html, --junit, --threads, --quiet, plus --max-memory), and emit(), which prints the
// human summary, writes the JSON, HTML and JUnit reports and maps the outcome to the exit code.
// Nothing else lives here.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/isolation/supervisor.h"
#include "certify/report/report.h"

namespace ncert::cli {

struct CommonOptions {
  std::string json_path;   ///< "-" for stdout
  std::string html_path;   ///< --html: the self-contained HTML report ("-" for stdout)
  std::string junit_path;  ///< --junit: the JUnit XML report ("-" for stdout)
  int threads = 0;         ///< 0: OpenMP's default (OMP_NUM_THREADS or all cores)
  bool quiet = false;
  bool verbose = false;  ///< also print an error's low-level detail (HDF5's error stack)
  std::uint64_t max_memory = certify::kDefaultMemoryLimit;
  double hdf5_timeout = 60;  ///< watchdog seconds (0: off)
};

/// Adds --json, --html, --junit, --threads, --quiet, --verbose, --max-memory and --hdf5-timeout to a subcommand.
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

/// Runs a command the CLI way (docs/cli.md "Isolation" and "Reports and exit status"): checks
/// --json against `inputs` first (a usage error before any work), runs `run` in a supervised
/// child process (a crash or hang of libhdf5 becomes a refusal that names the object), prints
/// the summary (failures only with --quiet), writes --json, --html and --junit (all three
/// paths checked up front, none two the same file), and returns the exit code. An
/// error the command returns is reported like a refused input: a REFUSED line and a JSON
/// report with `error`.
/// `isolate = false` runs `run` in this process: for a campaign, which isolates each of its
/// work items itself (and whose MPI ranks must not fork before MPI_Init).
int run_reported(const char* command, const CommonOptions& options, const std::vector<std::string>& inputs,
                 const std::function<Result<certify::Report>()>& run, bool isolate = true);

/// How commands are isolated (--hdf5-timeout, the memory budget, NCERT_ISOLATION=off).
certify::IsolationOptions command_isolation(const CommonOptions& options);

/// Each subcommand registers itself and sets `action` when it is the one chosen.
using Action = std::function<int()>;
void register_inspect(CLI::App& app, Action& action);
void register_check(CLI::App& app, Action& action);
void register_demo(CLI::App& app, Action& action);
void register_sweep(CLI::App& app, Action& action);
void register_witness(CLI::App& app, Action& action);
void register_compare(CLI::App& app, Action& action);
void register_forks(CLI::App& app, Action& action);
void register_campaign(CLI::App& app, Action& action);

}  // namespace ncert::cli
