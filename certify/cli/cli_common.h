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

#include "certify/cli/table_options.h"
#include "certify/commands/option_table.h"
#include "certify/io/dump_reader.h"
#include "certify/isolation/supervisor.h"
#include "certify/report/report.h"
#include "certify/report/report_file.h"
#include "certify/report/skip_policy.h"

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

/// Applies --threads to OpenMP (fixed team size, no dynamic adjustment: results are identical
/// at any thread count anyway, but timings should not surprise).
void apply_threads(const CommonOptions& options);

/// The options every command takes (docs/cli.md "Common to every command"): --json, --html,
/// --junit, --threads, --quiet, --verbose, --max-memory and --hdf5-timeout.
const certify::OptionTable<CommonOptions>& common_option_table();

/// A subcommand's options as the CLI holds them: the command's own options struct and the
/// common ones, both registered from their tables. `apply()` (in the command's action) stores
/// what was given and applies --threads.
template <class Options>
struct CommandLine {
  CommonOptions common;
  Options options;
  std::unique_ptr<TableOptions<Options>> table;
  std::unique_ptr<TableOptions<CommonOptions>> common_table;

  /// Registers `own` (the command's table) and then the common table on `cmd`.
  void register_on(CLI::App* cmd, const certify::OptionTable<Options>& own) {
    table = std::make_unique<TableOptions<Options>>(cmd, own, &options);
    common_table = std::make_unique<TableOptions<CommonOptions>>(cmd, common_option_table(), &common);
  }
  void apply() {
    const Status own = table->apply();
    const Status shared = common_table->apply();
    NCERT_ASSERT(own.ok() && shared.ok(), "option values were validated while parsing");
    apply_threads(common);
  }
};

/// The path of a --policy given (empty: none), as a command's input.
inline std::string policy_path(const std::optional<certify::SkipPolicy>& policy) {
  return policy ? policy->path : std::string();
}

/// The files one command reads and writes besides its reports (docs/cli.md "Reports and exit
/// status"), each named by what gives it ("DUMP", "--weights", "entry step-3").
struct CommandFiles {
  std::vector<certify::NamedPath> inputs;        ///< the report's `inputs` when the command stops on an error
  std::vector<certify::NamedPath> other_inputs;  ///< read, listed in other reports: a campaign's entries' files
  std::vector<certify::NamedPath> outputs;       ///< beyond --json, --html, --junit: witness --out, the journal
};

/// A command refused before it runs anything (a path or option the command line got wrong):
/// `s` printed as "ncert: error <name> (<code>): ..." on stderr, and its exit code.
int refuse_before_running(const Status& s);

/// Runs a command the CLI way (docs/cli.md "Isolation" and "Reports and exit status"): checks
/// every path of `files` and the reports first (an output that is an input or another output is
/// path-conflict, an unwritable place a usage error, both before any work), runs `run` in a
/// supervised child process (a crash or hang of libhdf5 becomes a refusal that names the
/// object), prints the summary (failures only with --quiet), writes --json, --html and --junit,
/// and returns the exit code. An error the command returns is reported like a refused input: a
/// REFUSED line and a JSON report with `error`.
/// `isolate = false` runs `run` in this process: for a campaign, which isolates each of its
/// work items itself (and whose MPI ranks must not fork before MPI_Init).
int run_reported(const char* command, const CommonOptions& options, const CommandFiles& files,
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
