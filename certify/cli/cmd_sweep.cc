#include "certify/cli/cli_common.h"
#include "certify/commands/sweep.h"

namespace ncert::cli {

void register_sweep(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    certify::SweepOptions sweep;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("sweep", "Run the packing helper's alias / host-guard / identity sweep on the CPU reference");
  cmd->add_option("--case", opts->sweep.case_key, "Rerun one case by its repro key (pack(...))")->type_name("KEY");
  cmd->add_option("--filter", opts->sweep.filter, "Run only cases whose key contains TEXT")->type_name("TEXT");
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      return run_reported("sweep", opts->common, {}, [&] { return certify::run_sweep(opts->sweep); });
    };
  });
}

}  // namespace ncert::cli
