// This header defines a campaign run: a manifest's entries broken into work items (a dump's
// plan, then each of its projections alone and its rest; a whole compare, forks, witness or
// verify), scheduled largest estimated cost first, run anywhere (isolated child processes on
// this machine, MPI ranks), and assembled into one report whose every entry is byte-identical
// (timing fields aside) to the report of the entry's own command, whatever the order, thread
// count or rank count.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "certify/campaign/input_pins.h"
#include "certify/campaign/manifest.h"
#include "certify/commands/check.h"
#include "certify/io/dump_reader.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct WorkItem {
  enum class Kind : std::uint8_t {
    kPlan,   ///< open a dump to check, plan its units, hash it
    kUnit,   ///< one unit of a planned dump (a projection, or the rest)
    kRun,    ///< a whole compare, forks, witness or verify entry
    kBatch,  ///< projection units that take the same weights from a weights dump, in one process
  };
  /// "<entry>#plan", "<entry>#unit:<projection>", "<entry>#rest", "<entry>#run"; a batch:
  /// its first member's key + "+<members>"
  std::string key;
  std::size_t entry = 0;
  Kind kind = Kind::kRun;
  CheckUnit unit;
  double cost = 0;
  std::vector<WorkItem> members;  ///< kBatch: its units, each journaled under its own key
  bool alone = false;             ///< never batched again (its batch's process ended abnormally)
  /// The pins of every file its entry reads (input_pins.h; a batch: none, its members have
  /// theirs): the item checks them before and after it reads, and a plan's report carries their
  /// hashes, never a hash of its own taken at another time.
  std::vector<InputPin> inputs;
};

Json work_item_json(const WorkItem& item);
Result<WorkItem> work_item_from_json(const Json& j);

/// The key of a journal record's inputs that holds the campaign's settings.
inline constexpr std::string_view kSettingsKey = "ncert:settings";

/// What every item is run with (the same everywhere).
struct CampaignSettings {
  ReaderOptions reader;
  /// Items that run at once (local workers or worker ranks): a batch takes at most its share
  /// of the pending units with its weights, so batching never idles a worker.
  std::size_t workers = 1;
};

/// The most units one batch holds: 16 projections share one read of their weights (168 MB
/// at K 5,120 x N 16,480 in bf16) and a crash costs 16 units a rerun each.
inline constexpr std::size_t kMaxBatchUnits = 16;

/// Runs one item here and returns its result: {"plan": ...}, {"part": ...}, {"report": ...},
/// {"batch": {key: result, ...}} (one process, one weights cache for all its units), or
/// {"error": ...} when the command could not run. Never throws (std::bad_alloc becomes a
/// memory-limit error). An item (or a batch member) whose files are no longer those pinned, before
/// or after it read them, is {"error": ..., "input_changed": true}: the campaign reports it but
/// never journals it (see input_changed()).
Json run_work_item(const Manifest& manifest, const CampaignSettings& settings, const WorkItem& item);

/// The result an item gets when its process ended abnormally (a crash inside libhdf5 is a
/// refused input, like the entry's own command would report).
Json error_result(const Status& status);

/// Whether a result is an item's refusal to give a verdict on files that changed under it: such a
/// result is reported, never journaled, so --resume hashes the files again and reruns the item.
bool input_changed(const Json& result);

/// The scheduler and the assembly: which items are pending, what each produced.
class CampaignRun {
 public:
  /// `pins`: every file of every entry (pin_inputs), handed to the items that read them.
  CampaignRun(const Manifest& manifest, const CampaignSettings& settings, std::map<std::string, InputPin> pins);

  /// The pending item of largest estimated cost (plans first, then ties by key), or none. A
  /// projection unit whose weights come from a weights dump is handed out as a batch with the
  /// pending units that share them (at most kMaxBatchUnits, and at most its share over
  /// `workers`), largest cost first, ties by key.
  std::optional<WorkItem> next();
  /// The members of a batch handed out by next(), or null for any other key.
  const WorkItem* batch(const std::string& key) const;
  /// A batch whose process ended abnormally: its unfinished units go back to pending, each to
  /// run alone, so one corrupt dump is one failed entry, as without batching.
  void retry_alone(const std::string& batch_key);
  /// A batch whose units are all recorded: forgotten.
  void end_batch(const std::string& batch_key) { batches_.erase(batch_key); }
  /// Records an item's result (a plan adds its units). Items known from a journal may be
  /// finished before they are handed out.
  Status finish(const std::string& key, const Json& result, double seconds);
  bool done() const { return pending_.empty() && running_.empty(); }
  bool finished(const std::string& key) const { return results_.count(key) > 0; }
  /// Whether the item is pending or handed out (a journal record for it can be replayed now).
  bool known(const std::string& key) const { return pending_.count(key) > 0 || running_.count(key) > 0; }
  /// The content hashes of the files the item `key` reads, {path: XXH3-128} in the entry's order,
  /// then under kSettingsKey the settings a result depends on (what its journal record carries,
  /// and what --resume holds it to); null for a key of no entry.
  Json input_hashes(const std::string& key) const;
  /// Lines of the journal that were not trusted (journal.h), shown in the report.
  void set_journal_notices(std::vector<std::string> notices) { journal_notices_ = std::move(notices); }
  std::size_t items_total() const { return results_.size() + pending_.size() + running_.size(); }
  std::size_t items_finished() const { return results_.size(); }

  /// The campaign's report: one flattened check list (ids prefixed with the entry id), every
  /// entry's own report in `entries` (Report::add_entry; the JSON's top-level "entries"), one verdict.
  Report report() const;

 private:
  void add(WorkItem item);
  std::vector<InputPin> pins_of(std::size_t entry) const;
  std::vector<InputInfo> inputs_of(const std::vector<std::string>& paths) const;
  const Manifest* manifest_;
  CampaignSettings settings_;
  std::map<std::string, InputPin> pins_;
  std::map<std::string, std::size_t> entry_by_id_;
  std::vector<std::string> journal_notices_;
  std::map<std::string, WorkItem> pending_;
  std::map<std::string, WorkItem> running_;
  std::map<std::string, WorkItem> batches_;  ///< handed out, by batch key
  std::map<std::string, Json> results_;
  std::map<std::string, double> seconds_;
};

}  // namespace ncert::certify
