#include "certify/cli/cli_common.h"
#include "certify/commands/check.h"

namespace ncert::cli {

void register_check(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    certify::CheckCommandOptions check;
    LogitErrorOptions errors;
    std::string require;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Certify every projection and logits run in an engine dump (PASS or FAIL, with evidence)");
  cmd->add_option("DUMP", opts->check.dump, "Engine dump (HDF5, dump-format v1)")->required();
  cmd->add_flag("--strict", opts->check.check.strict, "Also fail on values beyond the probabilistic tier");
  cmd->add_flag("--allow-vacuous", opts->check.check.allow_vacuous,
                "Let projections that prove nothing pass (reported as vacuous)");
  add_logit_error_options(cmd, &opts->errors,
                          "Absolute error bound of every logit for runs without an lm_head projection");
  cmd->add_option("--only", opts->check.only, "Certify only projections/runs whose name contains TEXT")
      ->type_name("TEXT");
  cmd->add_option("--weights", opts->check.weights,
                  "Weights dump: projections that omit their weights and declare weights_xxh3 take the weights "
                  "with that hash from it (docs/dump-format.md §4.5)")
      ->type_name("W.h5");
  add_require_option(cmd, &opts->require);
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      opts->check.reader.memory_limit = opts->common.max_memory;
      opts->check.logit_error = opts->errors.absolute();
      opts->check.check.lambda = opts->errors.lambda;
      opts->check.require = requirement(opts->require);
      return run_reported("check", opts->common, {opts->check.dump}, [&] { return certify::run_check(opts->check); });
    };
  });
}

}  // namespace ncert::cli
