#include "certify/cli/cli_common.h"
#include "certify/commands/compare.h"
#include "certify/commands/option_tables.h"

namespace ncert::cli {

void register_compare(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::CompareOptions>>();
  CLI::App* cmd =
      app.add_subcommand("compare", "Full-vocabulary F32 comparison of logits runs and /tensors between two dumps");
  cmd->add_option("A", cl->options.a, "First dump")->required();
  cmd->add_option("B", cl->options.b, "Second dump")->required();
  cl->register_on(cmd, certify::compare_option_table());
  cmd->callback([cl, &action] {
    action = [cl] {
      cl->apply();
      certify::CompareOptions& o = cl->options;
      o.reader.memory_limit = cl->common.max_memory;
      return run_reported("compare", cl->common, {{{"A", o.a}, {"B", o.b}}, {}, {}},
                          [&] { return certify::run_compare(o); });
    };
  });
}

}  // namespace ncert::cli
