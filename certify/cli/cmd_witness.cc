#include <optional>

#include "certify/cli/cli_common.h"
#include "certify/commands/option_tables.h"
#include "certify/commands/witness.h"
#include "certify/report/report_file.h"

namespace ncert::cli {

namespace {

/// `witness --verify WITNESS.h5 DUMP.h5`: re-derives a witness file; takes --lambda from the
/// witness table (a verify entry of a campaign has the same one option).
int run_verify(const CommandLine<certify::WitnessOptions>& cl, const std::vector<std::string>& verify) {
  certify::VerifyOptions v;
  v.witness_file = verify[0];
  v.dump = verify[1];
  v.reader.memory_limit = cl.common.max_memory;
  v.lambda = cl.options.lambda;
  return run_reported("witness", cl.common, {{{"--verify WITNESS", v.witness_file}, {"--verify DUMP", v.dump}}, {}, {}},
                      [&] { return certify::run_witness_verify(v); });
}

}  // namespace

void register_witness(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::WitnessOptions>>();
  auto verify = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "witness", "Write the raw target-maximum witness of every emitted token (or --verify a witness file)");
  cmd->add_option("DUMP", cl->options.dump, "Engine dump (HDF5)");
  cmd->add_option("--verify", *verify,
                  "Instead: re-derive every stored witness of WITNESS.h5 from DUMP.h5 and compare field by field")
      ->expected(2)
      ->type_name("WITNESS.h5 DUMP.h5");
  cl->register_on(cmd, certify::witness_option_table());
  cmd->callback([cl, verify, &action] {
    if (verify->empty() == cl->options.dump.empty()) {
      throw CLI::ValidationError("witness", "give either DUMP or --verify WITNESS.h5 DUMP.h5");
    }
    action = [cl, verify] {
      cl->apply();
      if (!verify->empty()) return run_verify(*cl, *verify);
      certify::WitnessOptions& w = cl->options;
      w.reader.memory_limit = cl->common.max_memory;
      w.table = cl->common.verbose;
      // The witness file is an HDF5 file replaced whole, its summary written beside it: a device
      // or pipe is no place for either (a review's --out /dev/null --force made /dev/null.json),
      // and --force overwrites nothing without --out.
      std::optional<Status> bad;
      if (!w.out.empty() && certify::is_stream_path(w.out)) {
        bad = Status(ErrorCode::kUsage, "--out " + w.out + " is not a regular file: a witness file is an HDF5 file");
      } else if (w.overwrite && w.out.empty()) {
        bad = Status(ErrorCode::kUsage, "--force overwrites --out, and no --out is given");
      }
      if (bad) return refuse_before_running(*bad);
      // --out writes the witness file and its summary beside it (WITNESS.h5.json).
      CommandFiles files{{{"DUMP", w.dump}, {"--policy", policy_path(w.skip_policy)}}, {}, {}};
      // The summary is a report: it replaces only an empty file or a report, --force or not.
      if (!w.out.empty()) files.outputs = {{"--out", w.out}, {"--out's summary", w.out + ".json", true}};
      return run_reported("witness", cl->common, files, [&] { return certify::run_witness(w); });
    };
  });
}

}  // namespace ncert::cli
