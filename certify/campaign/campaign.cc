#include "certify/campaign/campaign.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "certify/campaign/entry_options.h"
#include "certify/io/hash.h"
#include "certify/report/wire.h"

namespace ncert::certify {

namespace {

const char* kind_text(WorkItem::Kind k) {
  switch (k) {
    case WorkItem::Kind::kPlan:
      return "plan";
    case WorkItem::Kind::kUnit:
      return "unit";
    case WorkItem::Kind::kRun:
      return "run";
    case WorkItem::Kind::kBatch:
      return "batch";
  }
  return "?";
}

// The work items' keys (campaign.h WorkItem::key): one place, used to hand items out, to
// journal them and to find their results when the report is assembled.
std::string plan_key(const std::string& id) { return id + "#plan"; }
std::string run_key(const std::string& id) { return id + "#run"; }
std::string unit_key(const std::string& id, const CheckUnit& u) {
  return id + (u.projection ? "#unit:" + *u.projection : std::string("#rest"));
}

Json plan_json(const CheckPlan& p, const InputInfo& input) {
  Json units = Json::array();
  for (const CheckUnit& u : p.units) {
    Json unit = Json{{"projection", u.projection ? Json(*u.projection) : Json(nullptr)}, {"cost", u.cost}};
    if (!u.shared_weights.empty()) unit["shared_weights"] = u.shared_weights;
    units.push_back(std::move(unit));
  }
  Json j = Json{{"order", p.order},
                {"units", units},
                {"has_tensors", p.has_tensors},
                {"projections_without_rows", p.projections_without_rows},
                {"input", Json{{"path", input.path}, {"xxh3_128", input.xxh3_128}}}};
  if (p.refused) j["refused"] = status_to_wire(*p.refused);
  return j;
}

Status plan_from(const Json& j, CheckPlan* p, InputInfo* input) {
  try {
    p->order = j.at("order").get<std::vector<std::string>>();
    p->has_tensors = j.at("has_tensors").get<bool>();
    p->projections_without_rows = j.at("projections_without_rows").get<Index>();
    for (const Json& u : j.at("units")) {
      CheckUnit unit;
      if (!u.at("projection").is_null()) unit.projection = u.at("projection").get<std::string>();
      unit.cost = u.at("cost").get<double>();
      if (u.contains("shared_weights")) unit.shared_weights = u.at("shared_weights").get<std::string>();
      p->units.push_back(std::move(unit));
    }
    input->path = j.at("input").at("path").get<std::string>();
    input->xxh3_128 = j.at("input").at("xxh3_128").get<std::string>();
  } catch (const Json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, std::string("malformed plan: ") + e.what());
  }
  if (j.contains("refused")) {
    Status s;
    NCERT_RETURN_IF_ERROR(status_from_wire(j.at("refused"), &s));
    p->refused = std::move(s);
  }
  return Status();
}

Json part_json(const CheckPart& p) {
  Json projections = Json::array();
  for (const auto& [name, checks] : p.projections)
    projections.push_back(Json{{"name", name}, {"checks", checks_to_wire(checks)}});
  return Json{{"projections", projections},
              {"head", checks_to_wire(p.head)},
              {"tail", checks_to_wire(p.tail)},
              {"runs", p.runs},
              {"empty_runs", p.empty_runs},
              {"read_seconds", p.read_seconds},
              {"reference_seconds", p.reference_seconds},
              {"compare_seconds", p.compare_seconds},
              {"other_seconds", p.other_seconds},
              {"logits_seconds", p.logits_seconds}};
}

Result<CheckPart> part_from(const Json& j) {
  CheckPart p;
  try {
    for (const Json& pr : j.at("projections")) {
      NCERT_ASSIGN_OR_RETURN(auto checks, checks_from_wire(pr.at("checks")));
      p.projections.emplace_back(pr.at("name").get<std::string>(), std::move(checks));
    }
    NCERT_ASSIGN_OR_RETURN(p.head, checks_from_wire(j.at("head")));
    NCERT_ASSIGN_OR_RETURN(p.tail, checks_from_wire(j.at("tail")));
    p.runs = j.at("runs").get<Index>();
    p.empty_runs = j.at("empty_runs").get<Index>();
    p.read_seconds = j.at("read_seconds").get<double>();
    p.reference_seconds = j.at("reference_seconds").get<double>();
    p.compare_seconds = j.at("compare_seconds").get<double>();
    p.other_seconds = j.at("other_seconds").get<double>();
    p.logits_seconds = j.at("logits_seconds").get<double>();
  } catch (const Json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, std::string("malformed check part: ") + e.what());
  }
  return p;
}

/// The command an entry runs, for its report's `command` and its error reports.
const char* command_of(EntryKind k) {
  switch (k) {
    case EntryKind::kCheck:
      return "check";
    case EntryKind::kCompare:
      return "compare";
    case EntryKind::kForks:
      return "forks";
    case EntryKind::kWitness:
    case EntryKind::kVerify:
      return "witness";
  }
  return "?";
}

/// The report an entry's own command writes when it ends in an error (the CLI's error report),
/// its inputs with the hashes the campaign pinned.
Report error_report(const CampaignEntry& e, std::vector<InputInfo> inputs, const Status& status) {
  Report r;
  r.command = command_of(e.kind);
  r.inputs = std::move(inputs);
  r.refuse(status);
  return r;
}

/// The result of an item that refused to read files other than the pinned ones.
Json changed_result(const Status& status) {
  Json r = error_result(status);
  r["input_changed"] = true;
  return r;
}

Result<Report> run_entry(const CampaignEntry& e, const CampaignSettings& s) {
  switch (e.kind) {
    case EntryKind::kCheck: {
      NCERT_ASSIGN_OR_RETURN(auto o, check_options(e, s.reader));
      return run_check(o);
    }
    case EntryKind::kCompare: {
      NCERT_ASSIGN_OR_RETURN(auto o, compare_options(e, s.reader));
      return run_compare(o);
    }
    case EntryKind::kForks: {
      NCERT_ASSIGN_OR_RETURN(auto o, forks_options(e, s.reader));
      return run_forks(o);
    }
    case EntryKind::kWitness: {
      NCERT_ASSIGN_OR_RETURN(auto o, witness_options(e, s.reader));
      return run_witness(o);
    }
    case EntryKind::kVerify: {
      NCERT_ASSIGN_OR_RETURN(auto o, verify_options(e, s.reader));
      return run_witness_verify(o);
    }
  }
  return Status(ErrorCode::kInternal, "unknown entry kind");
}

/// A batch's units in this process, one cache for all: the weights they share are read from the
/// weights dump and hashed once, not once per unit (docs/campaigns.md "Shared weights").
Json run_batch(const Manifest& m, const CampaignSettings& s, const WorkItem& batch) {
  WeightsCache cache;
  Json results = Json::object();
  for (const WorkItem& w : batch.members) {
    auto o = check_options(m.entries.at(w.entry), s.reader);
    if (!o.ok()) {
      results[w.key] = error_result(o.status());
      continue;
    }
    if (Status held = pins_hold(w.inputs); !held.ok()) {
      results[w.key] = changed_result(held);
      continue;
    }
    o->weights_cache = &cache;
    Result<CheckPart> part = run_check_part(*o, w.unit);
    results[w.key] = part.ok() ? Json{{"part", part_json(*part)}} : error_result(part.status());
    if (Status held = pins_hold(w.inputs); !held.ok()) results[w.key] = changed_result(held);
  }
  return Json{{"batch", results}};
}

Json run_item_unguarded(const Manifest& m, const CampaignSettings& s, const WorkItem& item) {
  if (item.kind == WorkItem::Kind::kBatch) return run_batch(m, s, item);
  const CampaignEntry& e = m.entries.at(item.entry);
  if (item.kind == WorkItem::Kind::kRun) {
    Result<Report> r = run_entry(e, s);
    if (!r.ok()) return error_result(r.status());
    return Json{{"report", report_to_wire(*r)}};
  }
  auto o = check_options(e, s.reader);
  if (!o.ok()) return error_result(o.status());
  if (item.kind == WorkItem::Kind::kPlan) {
    // The dump's hash is the campaign's pin (checked before and after the item reads it).
    InputInfo input{o->dump, ""};
    for (const InputPin& pin : item.inputs) {
      if (pin.path == o->dump) input.xxh3_128 = pin.xxh3_128;
    }
    Result<CheckPlan> plan = plan_check(*o);
    if (!plan.ok()) return error_result(plan.status());
    return Json{{"plan", plan_json(*plan, input)}};
  }
  Result<CheckPart> part = run_check_part(*o, item.unit);
  if (!part.ok()) return error_result(part.status());
  return Json{{"part", part_json(*part)}};
}

}  // namespace

Json work_item_json(const WorkItem& item) {
  Json j = Json{{"key", item.key},
                {"entry", item.entry},
                {"kind", kind_text(item.kind)},
                {"projection", item.unit.projection ? Json(*item.unit.projection) : Json(nullptr)},
                {"cost", item.cost}};
  if (!item.unit.shared_weights.empty()) j["shared_weights"] = item.unit.shared_weights;
  Json inputs = Json::array();
  for (const InputPin& pin : item.inputs) inputs.push_back(pin_json(pin));
  j["inputs"] = inputs;
  if (item.kind == WorkItem::Kind::kBatch) {
    Json members = Json::array();
    for (const WorkItem& w : item.members) members.push_back(work_item_json(w));
    j["members"] = members;
  }
  return j;
}

Result<WorkItem> work_item_from_json(const Json& j) {
  WorkItem item;
  try {
    item.key = j.at("key").get<std::string>();
    item.entry = j.at("entry").get<std::size_t>();
    const std::string kind = j.at("kind").get<std::string>();
    item.kind = kind == "plan"    ? WorkItem::Kind::kPlan
                : kind == "unit"  ? WorkItem::Kind::kUnit
                : kind == "batch" ? WorkItem::Kind::kBatch
                                  : WorkItem::Kind::kRun;
    if (!j.at("projection").is_null()) item.unit.projection = j.at("projection").get<std::string>();
    item.cost = j.at("cost").get<double>();
    if (j.contains("shared_weights")) item.unit.shared_weights = j.at("shared_weights").get<std::string>();
    for (const Json& p : j.at("inputs")) {
      NCERT_ASSIGN_OR_RETURN(InputPin pin, pin_from_json(p));
      item.inputs.push_back(std::move(pin));
    }
    if (item.kind == WorkItem::Kind::kBatch) {
      for (const Json& w : j.at("members")) {
        NCERT_ASSIGN_OR_RETURN(WorkItem member, work_item_from_json(w));
        item.members.push_back(std::move(member));
      }
    }
  } catch (const Json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, std::string("malformed work item: ") + e.what());
  }
  return item;
}

Json error_result(const Status& status) { return Json{{"error", status_to_wire(status)}}; }

bool input_changed(const Json& result) { return result.is_object() && result.contains("input_changed"); }

Json run_work_item(const Manifest& m, const CampaignSettings& s, const WorkItem& item) {
  try {
    // A batch checks each member's pins itself; any other item checks its own around its run.
    if (Status held = pins_hold(item.inputs); !held.ok()) return changed_result(held);
    Json result = utf8_repaired(run_item_unguarded(m, s, item));
    if (Status held = pins_hold(item.inputs); !held.ok()) return changed_result(held);
    return result;
  } catch (const std::bad_alloc&) {
    return error_result(Status(ErrorCode::kMemoryLimit, "ran out of memory within the budget (--max-memory)"));
  }
}

CampaignRun::CampaignRun(const Manifest& manifest, const CampaignSettings& settings,
                         std::map<std::string, InputPin> pins)
    : manifest_(&manifest), settings_(settings), pins_(std::move(pins)) {
  for (std::size_t i = 0; i < manifest.entries.size(); ++i) {
    const CampaignEntry& e = manifest.entries[i];
    entry_by_id_[e.id] = i;
    WorkItem item;
    item.entry = i;
    if (e.kind == EntryKind::kCheck) {
      item.kind = WorkItem::Kind::kPlan;
      item.key = plan_key(e.id);
    } else {
      item.kind = WorkItem::Kind::kRun;
      item.key = run_key(e.id);
      // Whole entries: the bytes they stream (logits) are what they cost.
      for (const std::string& in : e.inputs) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(in, ec);
        item.cost += ec ? 0.0 : static_cast<double>(size);
      }
    }
    add(std::move(item));
  }
}

std::vector<InputPin> CampaignRun::pins_of(std::size_t entry) const {
  std::vector<InputPin> pins;
  for (const std::string& path : entry_files(manifest_->entries.at(entry))) {
    auto it = pins_.find(path);
    // Every entry's files were pinned together (pin_inputs); an unpinned one fails its items.
    if (it != pins_.end()) {
      pins.push_back(it->second);
    } else {
      pins.push_back(InputPin{path, "", {}, true});
    }
  }
  return pins;
}

std::vector<InputInfo> CampaignRun::inputs_of(const std::vector<std::string>& paths) const {
  std::vector<InputInfo> inputs;
  for (const std::string& path : paths) {
    auto it = pins_.find(path);
    inputs.push_back(InputInfo{path, it == pins_.end() ? std::string() : it->second.xxh3_128});
  }
  return inputs;
}

Json CampaignRun::input_hashes(const std::string& key) const {
  // Keys start with their entry's id, which has no '#' (manifest.cc).
  auto it = entry_by_id_.find(key.substr(0, key.find('#')));
  if (it == entry_by_id_.end()) return nullptr;
  Json hashes = Json::object();
  for (const InputPin& pin : pins_of(it->second)) hashes[pin.path] = pin.xxh3_128;
  // The command line's settings that can change a result: a record made under a memory limit
  // that refused a dump is not one a run under a larger limit may trust.
  // A file the manifest names "ncert:settings" (relative, beside a manifest in the working
  // directory) keeps its hash in front: either changing still changes the record's binding.
  const std::string settings = "memory_limit " + std::to_string(settings_.reader.memory_limit);
  Json& slot = hashes[std::string(kSettingsKey)];
  slot = slot.is_string() ? Json(slot.get<std::string>() + "; " + settings) : Json(settings);
  return hashes;
}

void CampaignRun::add(WorkItem item) {
  if (results_.count(item.key)) return;
  item.inputs = pins_of(item.entry);
  pending_.emplace(item.key, std::move(item));
}

std::optional<WorkItem> CampaignRun::next() {
  if (pending_.empty()) return std::nullopt;
  // Plans first (they reveal the work), then the largest estimated cost; ties by key.
  auto rank = [](const WorkItem& w) { return std::make_pair(w.kind == WorkItem::Kind::kPlan ? 1 : 0, w.cost); };
  auto best = pending_.begin();
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (rank(it->second) > rank(best->second)) best = it;
  }
  WorkItem item = best->second;
  running_.emplace(item.key, item);
  pending_.erase(best);
  if (item.kind != WorkItem::Kind::kUnit || item.unit.shared_weights.empty() || item.alone) return item;
  // The pending units that take the same weights, largest cost first, ties by key: the batch
  // takes its share of them over the workers (at least itself), at most kMaxBatchUnits.
  std::vector<const WorkItem*> same;
  for (const auto& [key, w] : pending_) {
    if (w.kind == WorkItem::Kind::kUnit && !w.alone && w.unit.shared_weights == item.unit.shared_weights) {
      same.push_back(&w);
    }
  }
  std::stable_sort(same.begin(), same.end(), [](const WorkItem* a, const WorkItem* b) { return a->cost > b->cost; });
  const std::size_t workers = std::max<std::size_t>(settings_.workers, 1);
  const std::size_t share = (same.size() + 1 + workers - 1) / workers;
  const std::size_t take = std::min({same.size(), share - 1, kMaxBatchUnits - 1});
  if (take == 0) return item;
  WorkItem batch;
  batch.kind = WorkItem::Kind::kBatch;
  batch.entry = item.entry;  // its members carry their own pins
  batch.cost = item.cost;
  batch.members.push_back(item);
  for (std::size_t i = 0; i < take; ++i) batch.members.push_back(*same[i]);
  for (std::size_t i = 1; i < batch.members.size(); ++i) {
    const WorkItem& w = batch.members[i];
    batch.cost += w.cost;
    running_.emplace(w.key, w);
    pending_.erase(w.key);
  }
  // Unit keys start with their entry's id, which has no '#' (manifest.cc): no unit key can
  // equal a batch key.
  batch.key = "#batch:" + std::to_string(batch.members.size()) + ":" + item.key;
  batches_[batch.key] = batch;
  return batch;
}

const WorkItem* CampaignRun::batch(const std::string& key) const {
  auto it = batches_.find(key);
  return it == batches_.end() ? nullptr : &it->second;
}

void CampaignRun::retry_alone(const std::string& batch_key) {
  auto it = batches_.find(batch_key);
  if (it == batches_.end()) return;
  for (const WorkItem& w : it->second.members) {
    auto r = running_.find(w.key);
    if (r == running_.end()) continue;
    WorkItem again = r->second;
    again.alone = true;
    running_.erase(r);
    pending_.emplace(again.key, std::move(again));
  }
  batches_.erase(it);
}

Status CampaignRun::finish(const std::string& key, const Json& result, double seconds) {
  if (results_.count(key)) return Status();  // a journal replay or a duplicate: first one wins
  WorkItem item;
  if (auto it = running_.find(key); it != running_.end()) {
    item = it->second;
    running_.erase(it);
  } else if (auto jt = pending_.find(key); jt != pending_.end()) {
    item = jt->second;
    pending_.erase(jt);
  } else {
    return Status(ErrorCode::kInvalidArgument, "campaign result for unknown item " + key);
  }
  results_[key] = result;
  seconds_[key] = seconds;
  if (item.kind == WorkItem::Kind::kPlan && result.contains("plan")) {
    CheckPlan plan;
    InputInfo input;
    NCERT_RETURN_IF_ERROR(plan_from(result.at("plan"), &plan, &input));
    if (!plan.refused) {
      const std::string& id = manifest_->entries[item.entry].id;
      for (const CheckUnit& u : plan.units) {
        WorkItem w;
        w.entry = item.entry;
        w.kind = WorkItem::Kind::kUnit;
        w.unit = u;
        w.cost = u.cost;
        w.key = unit_key(id, u);
        add(std::move(w));
      }
    }
  }
  return Status();
}

Report CampaignRun::report() const {
  Report campaign;
  campaign.command = "campaign";
  // The manifest's hash is that of the bytes the campaign was planned from.
  campaign.inputs = {InputInfo{manifest_->path, manifest_->xxh3_128}};
  campaign.preamble.push_back("ncert campaign " + manifest_->path + "  (" + manifest_->name + ", " +
                              std::to_string(manifest_->entries.size()) + " entries, " +
                              std::to_string(results_.size()) + " work items)");
  Index failed_entries = 0;
  double seconds_total = 0;
  for (const auto& [key, s] : seconds_) seconds_total += s;
  for (std::size_t i = 0; i < manifest_->entries.size(); ++i) {
    const CampaignEntry& e = manifest_->entries[i];
    Report r;
    auto error_of = [&](const std::string& key) -> std::optional<Status> {
      auto it = results_.find(key);
      if (it == results_.end()) return Status(ErrorCode::kInternal, "work item " + key + " never finished");
      if (!it->second.contains("error")) return std::nullopt;
      Status s;
      const Status parsed = status_from_wire(it->second.at("error"), &s);
      return parsed.ok() ? s : parsed;
    };
    if (e.kind != EntryKind::kCheck) {
      const std::string key = run_key(e.id);
      if (auto err = error_of(key)) {
        r = error_report(e, inputs_of(e.inputs), *err);
      } else {
        auto parsed = report_from_wire(results_.at(key).at("report"));
        r = parsed.ok() ? *parsed : error_report(e, inputs_of(e.inputs), parsed.status());
      }
    } else if (auto err = error_of(plan_key(e.id))) {
      r = error_report(e, inputs_of(e.inputs), *err);
    } else {
      CheckPlan plan;
      InputInfo input;
      const auto options = check_options(e, settings_.reader);
      Status s = plan_from(results_.at(plan_key(e.id)).at("plan"), &plan, &input);
      std::vector<CheckPart> parts;
      double seconds = seconds_.count(plan_key(e.id)) ? seconds_.at(plan_key(e.id)) : 0;
      for (const CheckUnit& u : plan.refused ? std::vector<CheckUnit>{} : plan.units) {
        if (!s.ok()) break;
        const std::string key = unit_key(e.id, u);
        if (auto unit_error = error_of(key)) {
          s = *unit_error;
          break;
        }
        auto part = part_from(results_.at(key).at("part"));
        if (!part.ok()) {
          s = part.status();
          break;
        }
        parts.push_back(std::move(*part));
        seconds += seconds_.at(key);
      }
      r = s.ok() ? assemble_check(*options, input, plan, std::move(parts), seconds)
                 : error_report(e, inputs_of(e.inputs), s);
    }
    // The campaign's own check list: every entry's checks, ids and subjects under the entry; the
    // entry's report itself, typed, for the JSON's `entries` and the HTML page's parts.
    failed_entries += r.verdict() == Verdict::kFail;
    campaign.add_entry(e.id, std::string(entry_kind_name(e.kind)), std::move(r));
  }
  // Journal lines that did not verify: their items ran again, and the report says so.
  if (!journal_notices_.empty()) {
    campaign.extra["journal_notices"] = journal_notices_;
    for (const std::string& notice : journal_notices_) campaign.preamble.push_back("journal: " + notice);
  }
  campaign.stats["entries"] = manifest_->entries.size();
  campaign.stats["failed_entries"] = failed_entries;
  campaign.stats["work_items"] = results_.size();
  campaign.stats["checks"] = campaign.checks.size();
  campaign.stats["failed"] = campaign.failed_checks();
  campaign.stats["timing_item_seconds"] = seconds_total;
  return campaign;
}

}  // namespace ncert::certify
