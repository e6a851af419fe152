#include "certify/cli/cli_common.h"
#include "certify/commands/inspect.h"

namespace ncert::cli {

void register_inspect(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    std::string dump;
    bool no_hashes = false;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("inspect", "List what a dump holds, validate it, print content hashes");
  cmd->add_option("DUMP", opts->dump, "Engine dump (HDF5)")->required();
  cmd->add_flag("--no-hashes", opts->no_hashes, "Skip dataset hashes (no raw data is read)");
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      certify::InspectOptions o;
      o.reader.memory_limit = opts->common.max_memory;
      o.dump = opts->dump;
      o.hashes = !opts->no_hashes;
      return run_reported("inspect", opts->common, {o.dump}, [&] { return certify::run_inspect(o); });
    };
  });
}

}  // namespace ncert::cli
