#include "certify/cli/cli_common.h"
#include "certify/commands/inspect.h"
#include "certify/commands/option_tables.h"

namespace ncert::cli {

void register_inspect(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::InspectOptions>>();
  CLI::App* cmd = app.add_subcommand("inspect", "List what a dump holds, validate it, print content hashes");
  cmd->add_option("DUMP", cl->options.dump, "Engine dump (HDF5)")->required();
  cl->register_on(cmd, certify::inspect_option_table());
  cmd->callback([cl, &action] {
    action = [cl] {
      cl->apply();
      certify::InspectOptions& o = cl->options;
      o.reader.memory_limit = cl->common.max_memory;
      return run_reported("inspect", cl->common, {{{"DUMP", o.dump}}, {}, {}}, [&] { return certify::run_inspect(o); });
    };
  });
}

}  // namespace ncert::cli
