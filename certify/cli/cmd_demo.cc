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
      return run_reported("demo", cl->common, CommandFiles{}, [&] { return certify::run_demo(cl->options); });
    };
  });
}

}  // namespace ncert::cli
