#include "certify/campaign/run_campaign.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "certify/campaign/created_directories.h"
#include "certify/campaign/detail/executors.h"
#include "certify/campaign/entry_options.h"
#include "certify/campaign/journal.h"
#include "certify/report/skip_policy.h"

namespace ncert::certify {

const OptionTable<CampaignOptions>& campaign_option_table() {
  using O = CampaignOptions;
  static const OptionTable<O> table = [] {
    OptionTable<O> t = {
        integer_option<O>("workers", "N",
                          "Work items at once on this machine, each its own supervised process with --threads threads "
                          "(under MPI: one per rank)",
                          1, 1024, [](O& o) -> int& { return o.workers; }),
        path_option<O>("state", "DIR",
                       "Directory of the campaign's journal, created if missing (and removed again if a refused run "
                       "leaves it empty; default: that of the first of "
                       "--json, --html, --junit written to a regular file, else the working directory); the journal is "
                       "DIR/<manifest's file name>.journal",
                       [](O& o) -> std::string& { return o.state; }),
        path_option<O>("journal", "PATH", "The journal's path itself, instead of one in the --state directory",
                       [](O& o) -> std::string& { return o.journal; }),
        path_option<O>("policy", "FILE",
                       "Skip policy (JSON, docs/cli.md \"Skip policy\") for every check, witness and forks entry, "
                       "replacing the manifest's skip_policy",
                       [](O& o) -> std::string& { return o.skip_policy; }),
        flag_option<O>("resume",
                       "Finish the campaign the journal records: finished items are not redone unless an input they "
                       "read changed or their journal line does not verify, and the report equals a fresh run's. "
                       "Without it a campaign starts afresh and replaces the journal there once it has started",
                       [](O& o) -> bool& { return o.resume; }),
    };
    for (OptionSpec<O>& s : t) s.key.clear();
    return t;
  }();
  return table;
}

std::string journal_path(const CampaignOptions& o) {
  if (!o.journal.empty()) return o.journal;
  const std::filesystem::path dir = !o.state.empty() ? o.state : !o.report_dir.empty() ? o.report_dir : ".";
  return (dir / (std::filesystem::path(o.manifest).filename().string() + ".journal")).string();
}

Result<Manifest> campaign_manifest(const CampaignOptions& o) {
  NCERT_ASSIGN_OR_RETURN(Manifest manifest, load_manifest(o.manifest));
  if (o.skip_policy.empty()) return manifest;
  // The command line's policy, refused as the command line's: given to every entry, its error
  // read "MANIFEST: entry g: option \"skip_policy\": ..." of a manifest that names none.
  if (auto policy = load_skip_policy(o.skip_policy); !policy.ok()) {
    return Status(policy.status().code(), "--policy: " + policy.status().message());
  }
  for (CampaignEntry& e : manifest.entries) {
    const std::vector<std::string> keys = entry_option_keys(e.kind);
    if (std::find(keys.begin(), keys.end(), "skip_policy") != keys.end()) e.options["skip_policy"] = o.skip_policy;
  }
  return manifest;
}

namespace {

/// A resumed campaign starts where the journal ends: the records that verified and whose files
/// still hash as they did when the item read them are done; every other item runs again. A unit's
/// record is replayed once its plan is (its key is known only then); records of items this
/// campaign no longer has (a plan that ran again and listed other units) are left unused.
Status replay(const std::vector<JournalRecord>& records, CampaignRun& run) {
  std::vector<const JournalRecord*> waiting;
  // Items whose record's files changed; whose settings (or a record without them) changed. Keys,
  // not records: a journal keeps the records a later run superseded, and each resume counted them
  // again ("68 finished items ... run again" of an 18-item campaign that ran none: a review's).
  std::set<std::string> stale, resettled;
  for (const JournalRecord& r : records) {
    const Json now = run.input_hashes(r.key);
    if (r.inputs == now) {
      waiting.push_back(&r);
      continue;
    }
    // The files as they were, and only the settings (or their absence) differ: another memory
    // limit, or a record of an ncert before they were recorded. Any file's hash that differs,
    // or an item this campaign cannot bind: the files changed.
    const std::string key(kSettingsKey);
    bool files_equal = r.inputs.is_object() && now.is_object();
    if (files_equal) {
      Json before = r.inputs, after = now;
      before.erase(key);
      after.erase(key);
      files_equal = before == after;
    }
    (files_equal ? resettled : stale).insert(r.key);
  }
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<const JournalRecord*> later;
    for (const JournalRecord* r : waiting) {
      if (run.finished(r->key)) continue;  // a record of an item already replayed: the first wins
      if (!run.known(r->key)) {
        later.push_back(r);
        continue;
      }
      NCERT_RETURN_IF_ERROR(run.finish(r->key, r->result, 0));
      progress = true;
    }
    waiting = std::move(later);
  }
  // Only the items no record replayed run again, and only they are counted.
  const auto running_again = [&](const std::set<std::string>& keys) {
    return static_cast<std::size_t>(std::count_if(
        keys.begin(), keys.end(), [&](const std::string& k) { return run.known(k) && !run.finished(k); }));
  };
  const std::size_t changed = running_again(stale);
  std::size_t settled = 0;
  for (const std::string& k : resettled) settled += run.known(k) && !run.finished(k) && !stale.count(k);
  if (changed > 0) {
    std::fprintf(stderr, "ncert: campaign: %zu finished item(s) read files that changed since: they run again\n",
                 changed);
  }
  if (settled > 0) {
    std::fprintf(stderr,
                 "ncert: campaign: %zu finished item(s) ran under other settings (--max-memory), or were journaled "
                 "by an ncert that did not record them: they run again\n",
                 settled);
  }
  return Status();
}

}  // namespace

Result<Report> run_campaign(const CampaignOptions& o, int* stop_signal) {
  NCERT_ASSIGN_OR_RETURN(Manifest manifest, campaign_manifest(o));
  NCERT_RETURN_IF_ERROR(validate_entries(manifest));
  CampaignSettings settings = o.settings;
  settings.workers =
      mpi_available() ? static_cast<std::size_t>(mpi_worker_ranks()) : static_cast<std::size_t>(o.workers);
  if (!o.state.empty() && !o.journal.empty()) {
    return Status(ErrorCode::kUsage, "campaign: --state and --journal both name where the journal goes: give one");
  }
  const std::string path = journal_path(o);
  CreatedDirectories made;  // removed again if a refused resume leaves them empty
  if (const std::filesystem::path dir = std::filesystem::path(path).parent_path(); !dir.empty()) {
    if (const std::error_code ec = made.create(dir))
      return Status(ErrorCode::kIo, dir.string() + ": cannot create the journal's directory: " + ec.message());
  }
  JournalContents journaled;
  NCERT_ASSIGN_OR_RETURN(Journal journal, o.resume ? Journal::resume(path, manifest.xxh3_128, &journaled)
                                                   : Journal::create(path, manifest.xxh3_128));
  // Every file hashed once, now: a resumed campaign compares its records with these.
  CampaignRun run(manifest, settings, pin_inputs(manifest));
  run.set_journal_notices(journaled.notices);
  NCERT_RETURN_IF_ERROR(replay(journaled.records, run));
  auto record_one = [&](const std::string& key, const Json& result, double seconds,
                        const std::string& batch = std::string()) -> Status {
    // An item that found its files changed is reported, never journaled: --resume hashes them
    // again and runs it again.
    if (!input_changed(result)) {
      NCERT_RETURN_IF_ERROR(journal.append(JournalRecord{key, run.input_hashes(key), result, batch}));
    }
    return run.finish(key, result, seconds);
  };
  // A batch is journaled unit by unit, so a resumed or re-run campaign sees the same items
  // whether or not they ran batched. A batch whose process ended abnormally (a crash inside
  // libhdf5 on one of its dumps) journals nothing: each unit runs again alone.
  detail::Recorder record = [&](const std::string& key, const Json& result, double seconds) -> Status {
    const WorkItem* batch = run.batch(key);
    if (!batch) return record_one(key, result, seconds);
    if (!result.contains("batch")) {
      run.retry_alone(key);
      return Status();
    }
    const Json& results = result.at("batch");
    const WorkItem members = *batch;  // finish() below may not outlive it
    const double each = seconds / static_cast<double>(members.members.size());
    for (const WorkItem& w : members.members) {
      if (!results.contains(w.key)) {
        return Status(ErrorCode::kInternal, "campaign: batch " + key + " returned no result for " + w.key);
      }
      NCERT_RETURN_IF_ERROR(record_one(w.key, results.at(w.key), each, key));
    }
    run.end_batch(key);
    return Status();
  };
  if (mpi_available()) {
    NCERT_RETURN_IF_ERROR(detail::run_items_mpi(manifest, o, run, record, stop_signal));
  } else {
    NCERT_RETURN_IF_ERROR(detail::run_items_local(manifest, o, run, record, stop_signal));
  }
  return run.report();
}

}  // namespace ncert::certify
