// This header defines `ncert campaign MANIFEST`: the whole campaign, run on this machine (work
// items in isolated child processes, `workers` at a time) or across MPI ranks (rank 0 schedules,
// the others run items), with a journal that lets a killed campaign resume.
#pragma once

#include <string>

#include "certify/campaign/campaign.h"
#include "certify/commands/option_table.h"
#include "certify/isolation/supervisor.h"

namespace ncert::certify {

struct CampaignOptions {
  std::string manifest;
  CampaignSettings settings;
  IsolationOptions isolation;
  int workers = 1;         ///< items at once on this machine (without MPI)
  std::string state;       ///< --state: the directory of the journal ("" : report_dir)
  std::string report_dir;  ///< where the report goes (the command line's first report file's directory)
  std::string journal;     ///< --journal: the journal's path itself ("" : in the state directory)
  bool resume = false;     ///< finish the campaign the journal records
  /// --policy: the skip policy of every entry that takes one (check, witness, forks), replacing
  /// the manifest's skip_policy and the entries' own.
  std::string skip_policy;
};

/// The manifest as this campaign runs it: load_manifest, then --policy given to every entry that
/// takes a skip policy (rank 0 and every MPI worker rank read it the same way).
Result<Manifest> campaign_manifest(const CampaignOptions& options);

/// `ncert campaign`'s own options (--workers, --state, --journal, --resume, --policy): the command line's only,
/// a manifest does not set them.
const OptionTable<CampaignOptions>& campaign_option_table();

/// The journal path a campaign uses: --journal, else <state>/<manifest's file name>.journal in
/// the state directory (--state, else the report's directory, else the working directory).
std::string journal_path(const CampaignOptions& options);

/// Runs the campaign here (rank 0 of an MPI job, or alone). kUsage for a bad manifest or for
/// --state with --journal, kOutputExists for a journal a running campaign holds. Without --resume
/// the campaign starts afresh: a journal already at its path is replaced once the new one has its
/// header (a finished campaign reruns with no cleanup). kInterrupted when
/// SIGINT or SIGTERM stopped it (the journal keeps the finished items): `*stop_signal`, when
/// given, is then the signal, and no report of the unfinished campaign exists.
Result<Report> run_campaign(const CampaignOptions& options, int* stop_signal = nullptr);

/// True when this process was started by an MPI launcher with more than one rank and ncert
/// was built with MPI.
bool mpi_available();
/// The ranks that run items (all but rank 0); 0 without MPI.
int mpi_worker_ranks();
/// Whether this process is rank 0 (always true without MPI).
bool mpi_is_root();
/// Runs the work loop of an MPI worker rank until rank 0 says stop. 0 on a clean stop.
int run_campaign_worker(const CampaignOptions& options);
/// MPI_Init / MPI_Finalize when launched under MPI (no-ops otherwise).
void mpi_start(int* argc, char*** argv);
void mpi_stop();

}  // namespace ncert::certify
