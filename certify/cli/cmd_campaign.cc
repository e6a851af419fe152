#include "certify/campaign/run_campaign.h"
#include "certify/cli/cli_common.h"

namespace ncert::cli {

void register_campaign(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    certify::CampaignOptions campaign;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "campaign", "Certify many dumps as one campaign (a manifest), on local processes or across MPI ranks");
  cmd->add_option("MANIFEST", opts->campaign.manifest, "Campaign manifest (JSON, docs/cli.md \"ncert campaign\")")
      ->required();
  cmd->add_option("--workers", opts->campaign.workers,
                  "Work items at once on this machine, each in its own process with --threads threads (default 1; "
                  "under MPI: one per rank)")
      ->check(CLI::Range(1, 1024))
      ->type_name("N");
  cmd->add_option("--journal", opts->campaign.journal, "Journal of finished items (default MANIFEST.journal)")
      ->type_name("PATH");
  cmd->add_flag("--resume", opts->campaign.resume,
                "Finish the campaign the journal records, without redoing its items");
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      opts->campaign.settings.reader.memory_limit = opts->common.max_memory;
      opts->campaign.isolation = command_isolation(opts->common);
      // Worker ranks run items and report to rank 0, which alone writes the report.
      if (!certify::mpi_is_root()) return certify::run_campaign_worker(opts->campaign);
      return run_reported(
          "campaign", opts->common, {opts->campaign.manifest}, [&] { return certify::run_campaign(opts->campaign); },
          /*isolate=*/false);
    };
  });
}

}  // namespace ncert::cli
