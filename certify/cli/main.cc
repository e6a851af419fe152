// ncert: the command-line entry point. Parses flags with CLI11, runs the one library entry
// point of the chosen subcommand, writes its report and maps the outcome to the exit code of
// docs/cli.md (0 pass, 1 fail, 2 usage, 3 input refused, 4 internal). Nothing else.
#include <cstdio>
#include <exception>

#include "certify/cli/cli_common.h"
#include "certify/report/report.h"

int main(int argc, char** argv) {
  CLI::App app{"ncert: certify the numerics of an LLM inference engine build from its dumps"};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", std::string(ncert::certify::ncert_version()));
  app.footer("Exit codes: 0 pass, 1 fail, 2 usage, 3 input refused, 4 internal error.");
  ncert::cli::Action action;
  ncert::cli::register_check(app, action);
  ncert::cli::register_compare(app, action);
  ncert::cli::register_witness(app, action);
  ncert::cli::register_forks(app, action);
  ncert::cli::register_sweep(app, action);
  ncert::cli::register_inspect(app, action);
  ncert::cli::register_demo(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
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
