#include "certify/campaign/run_campaign.h"
#include "certify/cli/cli_common.h"

namespace ncert::cli {

void register_campaign(CLI::App& app, Action& action) {
  auto cl = std::make_shared<CommandLine<certify::CampaignOptions>>();
  CLI::App* cmd = app.add_subcommand(
      "campaign", "Certify many dumps as one campaign (a manifest), on local processes or across MPI ranks");
  cmd->add_option("MANIFEST", cl->options.manifest, "Campaign manifest (JSON, docs/campaigns.md)")->required();
  cl->register_on(cmd, certify::campaign_option_table());
  cmd->callback([cl, &action] {
    action = [cl] {
      cl->apply();
      certify::CampaignOptions& o = cl->options;
      o.settings.reader.memory_limit = cl->common.max_memory;
      o.isolation = command_isolation(cl->common);
      // Worker ranks run items and report to rank 0, which alone writes the report.
      if (!certify::mpi_is_root()) return certify::run_campaign_worker(o);
      return run_reported(
          "campaign", cl->common, {o.manifest}, [&] { return certify::run_campaign(o); }, /*isolate=*/false);
    };
  });
}

}  // namespace ncert::cli
