// Internal to the campaign: the two ways its work items run (run_campaign.cc chooses).
#pragma once

#include <functional>
#include <string>

#include "certify/campaign/campaign.h"
#include "certify/campaign/run_campaign.h"

namespace ncert::certify::detail {

/// Journals an item's result, then records it in the run.
using Recorder = std::function<Status(const std::string& key, const Json& result, double seconds)>;

/// Every pending item in isolated children on this machine, `options.workers` at a time.
/// kInterrupted when SIGINT/SIGTERM stopped them (`*stop_signal`, when given: which).
Status run_items_local(const Manifest& manifest, const CampaignOptions& options, CampaignRun& run,
                       const Recorder& record, int* stop_signal);
/// Rank 0's loop: hands items to the worker ranks as they become idle (mpi.cc, or an error
/// when ncert was built without MPI). kInterrupted when SIGINT/SIGTERM reached rank 0
/// (`*stop_signal`, when given: which), as run_items_local.
Status run_items_mpi(const Manifest& manifest, const CampaignOptions& options, CampaignRun& run, const Recorder& record,
                     int* stop_signal);

/// Runs one item in an isolated child and returns its result (an abnormal end becomes the
/// error the entry's own command would report).
Json run_item_isolated(const Manifest& manifest, const CampaignOptions& options, const WorkItem& item, double* seconds);

/// The result of a finished isolated job (exit 0 with JSON output, or an error result).
Json job_result(const IsolatedJobs::Done& done, const IsolationOptions& isolation);

}  // namespace ncert::certify::detail
