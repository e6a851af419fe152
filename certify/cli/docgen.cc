// ncert-docgen: writes ncert's bash completion and man page from the very CLI11 App the
// executable parses with (app.h), so they cannot fall behind a flag.
// Usage: ncert-docgen COMPLETION_FILE MAN_FILE
#include <cstdio>
#include <fstream>

#include "certify/cli/app.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ncert-docgen COMPLETION_FILE MAN_FILE\n");
    return 2;
  }
  CLI::App app{"ncert: certify the numerics of an LLM inference engine build from its dumps"};
  app.name("ncert");
  ncert::cli::Action action;
  ncert::cli::build_app(app, action);
  std::ofstream(argv[1]) << ncert::cli::bash_completion(app);
  std::ofstream(argv[2]) << ncert::cli::man_page(app);
  return 0;
}
