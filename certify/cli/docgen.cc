// ncert-docgen: writes what is generated from ncert's own definitions, so nothing written twice
// can drift: the bash completion and the man page from the very CLI11 App the executable parses
// with (app.h), and the generated sections of the docs and Python package (generated.h).
// Usage:
//   ncert-docgen COMPLETION_FILE MAN_FILE   the completion script and the man page (the build)
//   ncert-docgen check SOURCE_ROOT          exit 1, naming each, when a generated part is stale
//   ncert-docgen write SOURCE_ROOT          rewrite the stale parts in place
#include <cstdio>
#include <fstream>
#include <string>

#include "certify/cli/app.h"
#include "certify/cli/generated.h"

namespace {

int check(const std::string& root) {
  auto stale = ncert::cli::stale_parts(root);
  if (!stale.ok()) {
    std::fprintf(stderr, "ncert-docgen: %s\n", stale.status().to_string().c_str());
    return 2;
  }
  for (const std::string& part : *stale) {
    std::fprintf(stderr, "ncert-docgen: %s is stale: the code's tables say otherwise\n", part.c_str());
  }
  if (!stale->empty()) {
    std::fprintf(stderr, "ncert-docgen: regenerate with `ncert-docgen write %s` (from a build of this tree)\n",
                 root.c_str());
    return 1;
  }
  std::printf("ncert-docgen: %zu generated parts up to date\n", ncert::cli::generated_parts().size());
  return 0;
}

int write(const std::string& root) {
  auto written = ncert::cli::write_parts(root);
  if (!written.ok()) {
    std::fprintf(stderr, "ncert-docgen: %s\n", written.status().to_string().c_str());
    return 2;
  }
  for (const std::string& path : *written) std::printf("ncert-docgen: wrote %s\n", path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "check") return check(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "write") return write(argv[2]);
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: ncert-docgen COMPLETION_FILE MAN_FILE | ncert-docgen check SOURCE_ROOT | "
                 "ncert-docgen write SOURCE_ROOT\n");
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
