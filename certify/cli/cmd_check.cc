#include "certify/check_command.h"
#include "certify/cli/cli_common.h"

namespace ncert::cli {

void register_check(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    certify::CheckCommandOptions check;
    double logit_error = -1;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Certify every projection and logits run in an engine dump (PASS or FAIL, with evidence)");
  cmd->add_option("DUMP", opts->check.dump, "Engine dump (HDF5, dump-format v1)")->required();
  cmd->add_flag("--strict", opts->check.check.strict, "Also fail on values beyond the probabilistic tier");
  cmd->add_flag("--allow-vacuous", opts->check.check.allow_vacuous,
                "Let projections that prove nothing pass (reported as vacuous)");
  cmd->add_option("--lambda", opts->check.check.lambda, "Probabilistic tier multiplier (default 10)")
      ->check(CLI::Range(1.0, 1000.0));
  cmd->add_option("--logit-error", opts->logit_error,
                  "Absolute error bound of every logit for runs without an lm_head projection")
      ->check(CLI::Range(0.0, 1e30))
      ->type_name("ABS");
  cmd->add_option("--only", opts->check.only, "Certify only projections/runs whose name contains TEXT")
      ->type_name("TEXT");
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      opts->check.reader.memory_limit = opts->common.max_memory;
      if (opts->logit_error >= 0) opts->check.logit_error = opts->logit_error;
      return emit(certify::run_check(opts->check), opts->common);
    };
  });
}

}  // namespace ncert::cli
