// ncert: the command-line entry point. Parses flags with CLI11, runs the one library entry
// point of the chosen subcommand, writes its report and maps the outcome to the exit code of
// docs/cli.md (0 pass, 1 fail, 2 usage, 3 input refused, 4 internal). Nothing else.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "certify/campaign/run_campaign.h"
#include "certify/cli/app.h"
#include "certify/cli/cli_common.h"
#include "certify/report/report.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"ncert: certify the numerics of an LLM inference engine build from its dumps"};
  ncert::cli::Action action;
  ncert::cli::build_app(app, action);
  // A mistyped command gets a suggestion, not CLI11's "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-' && !ncert::cli::is_subcommand(app, argv[1])) {
    const std::string near = ncert::cli::suggest_subcommand(app, argv[1]);
    std::fprintf(stderr, "ncert: unknown command \"%s\"%s\nRun with --help for the list of commands.\n", argv[1],
                 near.empty() ? "" : ("; did you mean \"" + near + "\"?").c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A misspelt option is left over as an extra argument, and CLI11 names the dump beside it
    // ("The following arguments were not expected: D.h5 --thread"): name the option instead.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      const std::string unknown = ncert::cli::unknown_option(app, std::vector<std::string>(argv + 1, argv + argc));
      if (!unknown.empty()) {
        std::fprintf(stderr, "ncert: %s\nRun `ncert %s --help` for its options.\n", unknown.c_str(), argv[1]);
        return 2;
      }
    }
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    return action ? action() : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncert: internal error (900): %s\n", e.what());
    return 4;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that went away (`ncert check D.h5 --json - | head -c 10`) must not kill ncert
  // before it says so: with SIGPIPE ignored the write fails with EPIPE, which is report-write
  // (205) on stderr and the verdict's exit code, where the default action ended it with 141 and
  // no word (docs/cli.md "Reports and exit status").
  std::signal(SIGPIPE, SIG_IGN);
  // Started by an MPI launcher (a campaign across ranks): MPI first, before anything forks.
  ncert::certify::mpi_start(&argc, &argv);
  const int rc = run(argc, argv);
  ncert::certify::mpi_stop();
  return rc;
}
