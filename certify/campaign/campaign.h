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

#include "certify/campaign/manifest.h"
#include "certify/commands/check.h"
#include "certify/io/dump_reader.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct WorkItem {
  enum class Kind : std::uint8_t {
    kPlan,  ///< open a dump to check, plan its units, hash it
    kUnit,  ///< one unit of a planned dump (a projection, or the rest)
    kRun,   ///< a whole compare, forks, witness or verify entry
  };
  std::string key;  ///< "<entry>#plan", "<entry>#unit:<projection>", "<entry>#rest", "<entry>#run"
  std::size_t entry = 0;
  Kind kind = Kind::kRun;
  CheckUnit unit;
  double cost = 0;
};

Json work_item_json(const WorkItem& item);
Result<WorkItem> work_item_from_json(const Json& j);

/// What every item is run with (the same everywhere).
struct CampaignSettings {
  ReaderOptions reader;
};

/// Runs one item here and returns its result: {"plan": ...}, {"part": ...}, {"report": ...},
/// or {"error": ...} when the command could not run. Never throws (std::bad_alloc becomes a
/// memory-limit error).
Json run_work_item(const Manifest& manifest, const CampaignSettings& settings, const WorkItem& item);

/// The result an item gets when its process ended abnormally (a crash inside libhdf5 is a
/// refused input, like the entry's own command would report).
Json error_result(const Status& status);

/// The scheduler and the assembly: which items are pending, what each produced.
class CampaignRun {
 public:
  CampaignRun(const Manifest& manifest, const CampaignSettings& settings);

  /// The pending item of largest estimated cost (plans first, then ties by key), or none.
  std::optional<WorkItem> next();
  /// Records an item's result (a plan adds its units). Items known from a journal may be
  /// finished before they are handed out.
  Status finish(const std::string& key, const Json& result, double seconds);
  bool done() const { return pending_.empty() && running_.empty(); }
  bool finished(const std::string& key) const { return results_.count(key) > 0; }
  std::size_t items_total() const { return results_.size() + pending_.size() + running_.size(); }

  /// The campaign's report: one flattened check list (ids prefixed with the entry id), every
  /// entry's own report under extra["entries"], one verdict.
  Report report() const;

 private:
  void add(WorkItem item);
  const Manifest* manifest_;
  CampaignSettings settings_;
  std::map<std::string, WorkItem> pending_;
  std::map<std::string, WorkItem> running_;
  std::map<std::string, Json> results_;
  std::map<std::string, double> seconds_;
};

}  // namespace ncert::certify
