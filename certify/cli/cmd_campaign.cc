#include <csignal>
#include <cstdio>
#include <filesystem>

#include "certify/campaign/created_directories.h"
#include "certify/campaign/manifest.h"
#include "certify/campaign/run_campaign.h"
#include "certify/cli/cli_common.h"
#include "certify/report/printable.h"
#include "certify/report/report_file.h"

namespace ncert::cli {

namespace {

/// Ends the process the way a signal would have (docs/cli.md: 128 + the signal, no report): the
/// campaign stopped its items and kept its journal; nothing of its report is written.
[[noreturn]] void end_by_signal(int sig, const Status& status) {
  std::fprintf(stderr, "ncert: %s; no report written\n", certify::printable(status.message()).c_str());
  std::fflush(nullptr);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
  std::_Exit(128 + sig);  // a signal the process ignores even at SIG_DFL (none of SIGINT, SIGTERM)
}

}  // namespace

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
      // The journal goes beside the report by default (never beside the inputs unless the
      // report goes there): the first report written to a file names the directory. A report
      // written in place (/dev/null, /dev/stdout, a FIFO) names none: the journal went to /dev.
      for (const std::string* report : {&cl->common.json_path, &cl->common.html_path, &cl->common.junit_path}) {
        if (report->empty() || *report == "-" || certify::is_stream_path(*report)) continue;
        const std::filesystem::path dir = std::filesystem::path(*report).parent_path();
        o.report_dir = dir.empty() ? "." : dir.string();
        break;
      }
      // Worker ranks run items and report to rank 0, which alone writes the report.
      if (!certify::mpi_is_root()) return certify::run_campaign_worker(o);
      // Every entry's files are inputs too: no report and no journal may be one of them. A
      // manifest that does not load is the campaign's own refusal, reported as such.
      const std::string journal = certify::journal_path(o);
      // "-" would be a file of that name in the working directory: the journal is read back and
      // appended to, never a stream (a review's `--journal -`).
      if (o.journal == "-") {
        return refuse_before_running(
            Status(ErrorCode::kUsage, "--journal -: a campaign journal is a file, not stdout"));
      }
      // --state DIR is created if missing (docs/cli.md), before the path checks look for it; a
      // file there is the command line's mistake (usage), not the disk's.
      if (std::error_code ec;
          !o.state.empty() && std::filesystem::exists(o.state, ec) && !std::filesystem::is_directory(o.state, ec)) {
        return refuse_before_running(
            Status(ErrorCode::kUsage, "--state " + o.state + " exists and is not a directory"));
      }
      // Removed again if the run leaves it empty: a refused run leaves no directory behind.
      certify::CreatedDirectories made;
      if (!o.state.empty()) {
        if (const std::error_code ec = made.create(o.state)) {
          // An output's place the command line names: usage, as for every output (docs/cli.md).
          return refuse_before_running(
              Status(ErrorCode::kUsage, "--state " + o.state + ": cannot create the directory: " + ec.message()));
        }
      }
      CommandFiles files{{{"MANIFEST", o.manifest}, {"--policy", o.skip_policy}}, {}, {{"the journal", journal}}};
      if (auto manifest = certify::load_manifest(o.manifest); manifest.ok()) {
        for (const certify::CampaignEntry& e : manifest->entries) {
          for (certify::NamedPath& f : certify::named_entry_files(e)) files.other_inputs.push_back(std::move(f));
        }
      }
      // The journal is read back on --resume and appended to: a FIFO or device there would block
      // or swallow it.
      if (certify::is_stream_path(journal)) {
        return refuse_before_running(
            Status(ErrorCode::kNotRegularFile,
                   "the journal " + journal + " is not a regular file; a campaign journal must be one"));
      }
      return run_reported(
          "campaign", cl->common, files,
          [&]() -> Result<certify::Report> {
            int stop_signal = 0;
            Result<certify::Report> report = certify::run_campaign(o, &stop_signal);
            if (!report.ok() && report.status().code() == ErrorCode::kInterrupted && stop_signal != 0) {
              end_by_signal(stop_signal, report.status());
            }
            return report;
          },
          /*isolate=*/false);
    };
  });
}

}  // namespace ncert::cli
