#include "certify/campaign/run_campaign.h"

#include <chrono>
#include <map>

#include "certify/campaign/detail/executors.h"
#include "certify/campaign/entry_options.h"
#include "certify/campaign/journal.h"

namespace ncert::certify {

std::string journal_path(const CampaignOptions& o) {
  return o.journal.empty() ? o.manifest + ".journal" : o.journal;
}

Result<Report> run_campaign(const CampaignOptions& o) {
  NCERT_ASSIGN_OR_RETURN(Manifest manifest, load_manifest(o.manifest));
  NCERT_RETURN_IF_ERROR(validate_entries(manifest));
  CampaignRun run(manifest, o.settings);
  std::vector<JournalRecord> records;
  const std::string path = journal_path(o);
  NCERT_ASSIGN_OR_RETURN(Journal journal, o.resume ? Journal::resume(path, manifest.xxh3_128, &records)
                                                   : Journal::create(path, manifest.xxh3_128));
  // A resumed campaign starts where the journal ends: its items are done, in their order.
  for (const JournalRecord& r : records) NCERT_RETURN_IF_ERROR(run.finish(r.key, r.result, 0));
  detail::Recorder record = [&](const std::string& key, const Json& result, double seconds) -> Status {
    NCERT_RETURN_IF_ERROR(journal.append(JournalRecord{key, result}));
    return run.finish(key, result, seconds);
  };
  if (mpi_available()) {
    NCERT_RETURN_IF_ERROR(detail::run_items_mpi(manifest, o, run, record));
  } else {
    NCERT_RETURN_IF_ERROR(detail::run_items_local(manifest, o, run, record));
  }
  return run.report();
}

}  // namespace ncert::certify
