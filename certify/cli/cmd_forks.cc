#include "certify/cli/cli_common.h"
#include "certify/commands/forks.h"
#include "certify/commands/option_tables.h"

namespace ncert::cli {

void register_forks(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::ForksOptions>>();
  CLI::App* cmd =
      app.add_subcommand("forks", "Find where two runs' token streams diverge and classify each wording fork");
  cmd->add_option("A", cl->options.a, "First dump")->required();
  cmd->add_option("B", cl->options.b, "Second dump")->required();
  cl->register_on(cmd, certify::forks_option_table());
  cmd->callback([cl, &action] {
    action = [cl] {
      cl->apply();
      certify::ForksOptions& o = cl->options;
      o.reader.memory_limit = cl->common.max_memory;
      return run_reported(
          "forks", cl->common,
          {{{"A", o.a}, {"B", o.b}, {"--vocab", o.vocab_file}, {"--policy", policy_path(o.skip_policy)}}, {}, {}},
          [&] { return certify::run_forks(o); });
    };
  });
}

}  // namespace ncert::cli
