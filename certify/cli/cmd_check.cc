#include "certify/cli/cli_common.h"
#include "certify/commands/check.h"
#include "certify/commands/option_tables.h"

namespace ncert::cli {

void register_check(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::CheckCommandOptions>>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Certify every projection and logits run in an engine dump (PASS or FAIL, with evidence)");
  cmd->add_option("DUMP", cl->options.dump, "Engine dump (HDF5, dump format v1 or v2)")->required();
  cl->register_on(cmd, certify::check_option_table());
  cmd->callback([cl, &action] {
    action = [cl] {
      cl->apply();
      certify::CheckCommandOptions& o = cl->options;
      o.reader.memory_limit = cl->common.max_memory;
      return run_reported(
          "check", cl->common,
          {{{"DUMP", o.dump}, {"--weights", o.weights}, {"--policy", policy_path(o.skip_policy)}}, {}, {}},
          [&] { return certify::run_check(o); });
    };
  });
}

}  // namespace ncert::cli
