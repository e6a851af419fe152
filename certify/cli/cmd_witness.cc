#include "certify/cli/cli_common.h"
#include "certify/commands/witness.h"
#include "certify/report/printable.h"
#include "certify/report/report_file.h"

namespace ncert::cli {

void register_witness(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    std::string dump;
    std::vector<std::string> verify;
    std::string out;
    bool force = false;
    LogitErrorOptions errors;
    std::string only;
    std::string require;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "witness", "Write the raw target-maximum witness of every emitted token (or --verify a witness file)");
  cmd->add_option("DUMP", opts->dump, "Engine dump (HDF5)");
  cmd->add_option("--verify", opts->verify, "Re-check a witness file against a dump: --verify WITNESS.h5 DUMP.h5")
      ->expected(2)
      ->type_name("WITNESS.h5 DUMP.h5");
  cmd->add_option("--out", opts->out, "Write the witnesses to WITNESS.h5 (and a JSON summary beside it)")
      ->type_name("WITNESS.h5");
  cmd->add_flag("--force", opts->force, "Overwrite --out if it exists");
  add_logit_error_options(cmd, &opts->errors,
                          "Absolute error bound of every logit for runs without an lm_head projection");
  cmd->add_option("--only", opts->only, "Only runs whose name contains TEXT")->type_name("TEXT");
  add_require_option(cmd, &opts->require);
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, cmd, &action] {
    if (opts->verify.empty() == opts->dump.empty()) {
      throw CLI::ValidationError("witness", "give either DUMP or --verify WITNESS.h5 DUMP.h5");
    }
    action = [opts] {
      apply_threads(opts->common);
      if (!opts->verify.empty()) {
        certify::VerifyOptions v;
        v.witness_file = opts->verify[0];
        v.dump = opts->verify[1];
        v.reader.memory_limit = opts->common.max_memory;
        v.lambda = opts->errors.lambda;
        return run_reported("witness", opts->common, {v.witness_file, v.dump},
                            [&] { return certify::run_witness_verify(v); });
      }
      certify::WitnessOptions w;
      w.dump = opts->dump;
      w.reader.memory_limit = opts->common.max_memory;
      w.logit_error = opts->errors.absolute();
      w.lambda = opts->errors.lambda;
      w.out = opts->out;
      w.overwrite = opts->force;
      w.only = opts->only;
      w.require = requirement(opts->require);
      w.table = opts->common.verbose;
      if (Status s = certify::check_report_path(w.out, {w.dump}, "--out"); !s.ok()) {
        std::fprintf(stderr, "ncert: %s\n", certify::printable(s.to_string()).c_str());
        return exit_code_for(s.code());
      }
      return run_reported("witness", opts->common, {w.dump}, [&] { return certify::run_witness(w); });
    };
    (void)cmd;
  });
}

}  // namespace ncert::cli
