#include "certify/cli/cli_common.h"
#include "certify/commands/option_tables.h"
#include "certify/commands/sweep.h"

namespace ncert::cli {

void register_sweep(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::SweepOptions>>();
  CLI::App* cmd =
      app.add_subcommand("sweep", "Run the packing helper's alias / host-guard / identity sweep on the CPU reference");
  cl->register_on(cmd, certify::sweep_option_table());
  cmd->callback([cl, &action] {
    action = [cl] {
      cl->apply();
      return run_reported("sweep", cl->common, CommandFiles{}, [&] { return certify::run_sweep(cl->options); });
    };
  });
}

}  // namespace ncert::cli
