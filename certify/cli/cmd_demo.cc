#include "certify/cli/cli_common.h"
#include "certify/demo/demo.h"

namespace ncert::cli {

void register_demo(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    certify::DemoOptions demo;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("demo", "Write synthetic dumps (good and faulty) and certify them: the zero-setup tour");
  cmd->add_option("--dir", opts->demo.dir, "Directory for the demo dumps (default ./ncert-demo)")->type_name("DIR");
  cmd->add_flag("--force", opts->demo.force, "Overwrite demo files left by an earlier run");
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      return run_reported("demo", opts->common, {}, [&] { return certify::run_demo(opts->demo); });
    };
  });
}

}  // namespace ncert::cli
