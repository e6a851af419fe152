#include <filesystem>

#include "certify/cli/cli_common.h"
#include "certify/demo/demo.h"

namespace ncert::cli {

void register_demo(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::DemoOptions>>();
  CLI::App* cmd =
      app.add_subcommand("demo", "Write synthetic dumps (good and faulty) and certify them: the zero-setup tour");
  cl->register_on(cmd, certify::demo_option_table());
  cmd->callback([cl, &action] {
    action = [cl] {
      cl->apply();
      // The demo's own files are outputs: a report aimed at one of them (--json DIR/good.h5) is a
      // path conflict before anything is written. Where --dir does not exist yet none can be.
      CommandFiles files;
      std::error_code ec;
      if (std::filesystem::is_directory(cl->options.dir, ec)) {
        for (std::string& path : certify::demo_paths(cl->options.dir)) files.outputs.push_back({"demo file", path});
      }
      return run_reported("demo", cl->common, files, [&] { return certify::run_demo(cl->options); });
    };
  });
}

}  // namespace ncert::cli
