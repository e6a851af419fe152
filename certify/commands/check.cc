#include "certify/commands/check.h"

#include <omp.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <system_error>

#include "certify/io/input_file.h"
#include "certify/logits/lm_head.h"
#include "certify/logits/witness.h"
#include "certify/projection/check_projection.h"
#include "certify/projection/memory.h"
#include "certify/report/progress.h"

namespace ncert::certify {

namespace {

bool selected(const std::string& name, const std::string& only) {
  return only.empty() || name.find(only) != std::string::npos;
}

/// --only must select something: a filter that matches nothing would certify nothing.
Status check_selection(const DumpModel& m, const std::string& only) {
  if (only.empty()) return Status();
  for (const ProjectionInfo& p : m.projections) {
    if (selected(p.name, only)) return Status();
  }
  for (const LogitsRunInfo& r : m.logits) {
    if (selected(r.name, only)) return Status();
  }
  return Status(ErrorCode::kUsage, "--only \"" + only + "\" matches no projection or logits run of " + m.file);
}

/// A dump with nothing check certifies proves nothing: that is a failure, not a pass.
CheckResult dump_vacuity(Index projections, Index runs, Index empty_runs, const CheckPlan& plan) {
  CheckResult v;
  v.id = "vacuity";
  v.subject = "dump";
  v.kind = CheckKind::kVacuity;
  VacuityEvidence e;
  e.outputs = projections + runs;
  if (projections + runs > 0) {
    v.reason =
        "certified " + std::to_string(projections) + " projection(s) and " + std::to_string(runs) + " logits run(s)";
  } else {
    v.verdict = Verdict::kFail;
    e.vacuous.push_back(empty_runs > 0 ? "no projection, and no logits run with an emission"
                                       : "no projection and no logits run");
    // A projection of 0 rows is in the file and left out: "holds no projection" read as if it
    // were not there.
    const Index empty = plan.projections_without_rows;
    v.reason = "nothing to certify: the dump holds no projection" +
               (empty > 0 ? " with rows (" + std::to_string(empty) + " of 0 rows left out)" : std::string()) + " and " +
               (empty_runs > 0 ? std::to_string(empty_runs) + " logits run(s), none with an emission"
                               : std::string("no logits run")) +
               std::string(plan.has_tensors ? " (its tensors are compared by ncert compare)" : "");
  }
  v.evidence = std::move(e);
  return v;
}

CheckResult schema_check(const DumpModel& m) {
  CheckResult schema;
  schema.id = "schema";
  schema.subject = "dump";
  schema.kind = CheckKind::kSchema;
  SchemaEvidence e;
  for (const Finding& f : m.findings) e.notes += f.severity == Severity::kNote;
  e.engine = m.engine;
  e.build = m.build;
  e.projections = static_cast<Index>(m.projections.size());
  e.logits_runs = static_cast<Index>(m.logits.size());
  e.tensors = static_cast<Index>(m.tensors.size());
  schema.reason = "valid ncert dump v" + std::to_string(m.schema_version) + " (engine " + m.engine + ", build " +
                  m.build + "): " + std::to_string(m.projections.size()) + " projection(s), " +
                  std::to_string(m.logits.size()) + " logits run(s)" +
                  (e.notes ? ", " + std::to_string(e.notes) + " note(s)" : "");
  schema.evidence = std::move(e);
  return schema;
}

/// The lm_head projections whose reference also certifies a run's logits: checked with the
/// run, in the rest part (their collector must see every block).
std::vector<const ProjectionInfo*> usable_heads(const DumpModel& m, const std::string& only) {
  std::vector<const ProjectionInfo*> out;
  for (const LogitsRunInfo& run : m.logits) {
    const ProjectionInfo* head = find_lm_head(m, run.name);
    if (!head || !lm_head_unusable(*head).empty() || !selected(run.name, only)) continue;
    out.push_back(head);
  }
  return out;
}

bool is_head(const std::vector<const ProjectionInfo*>& heads, const std::string& name) {
  for (const ProjectionInfo* h : heads) {
    if (h->name == name) return true;
  }
  return false;
}

void add_timing(CheckPart& part, const ProjectionOutcome& o) {
  part.read_seconds += o.timing.read_seconds;
  part.reference_seconds += o.timing.reference_seconds;
  part.compare_seconds += o.timing.compare_seconds;
  part.other_seconds += o.timing.other_seconds;
}

/// How a dump of this check is opened: projections may omit their weights when a weights dump
/// is given.
ReaderOptions dump_reader_options(const CheckCommandOptions& options) {
  ReaderOptions r = options.reader;
  r.weights_elsewhere = !options.weights.empty();
  return r;
}

/// Where one call's projections get their weights: the weights dump (opened once per cache) and
/// the cache of weights read, when the caller keeps one across calls.
class WeightsAccess {
 public:
  explicit WeightsAccess(const CheckCommandOptions& options)
      : options_(options), cache_(options.weights_cache ? options.weights_cache : &own_) {}
  WeightsAccess(const WeightsAccess&) = delete;
  WeightsAccess& operator=(const WeightsAccess&) = delete;

  /// The projection with its weights bound (bind_weights), and where to read them.
  Result<ProjectionInfo> bind(const DumpReader& reader, const ProjectionInfo& p, WeightsSource* source) {
    const WeightsDump* dump = nullptr;
    if (p.weights_omitted && !options_.weights.empty()) {
      NCERT_ASSIGN_OR_RETURN(dump, cache_->weights_dump(options_.weights, options_.reader));
    }
    return bind_weights(reader, p, dump, source);
  }
  /// The cache to keep weights read in: only the caller's (a check alone keeps nothing, so its
  /// memory stays one projection's).
  WeightsCache* shared() const { return options_.weights_cache; }

 private:
  const CheckCommandOptions& options_;
  WeightsCache own_;
  WeightsCache* cache_;
};

/// check_projection with the projection's weights bound.
Result<ProjectionOutcome> check_bound(const DumpReader& reader, const ProjectionInfo& p,
                                      const CheckCommandOptions& options, WeightsAccess& weights,
                                      const BlockHook& hook = {}) {
  WeightsSource source;
  NCERT_ASSIGN_OR_RETURN(ProjectionInfo bound, weights.bind(reader, p, &source));
  return check_projection(reader, bound, options.check, hook, &source, weights.shared());
}

/// The rest of a dump: schema, the lm_head projections with their runs' witnesses, every
/// logits run's witnesses.
Result<CheckPart> rest_part(const DumpReader& reader, const CheckCommandOptions& options) {
  const DumpModel& m = reader.model();
  CheckPart part;
  part.head.push_back(schema_check(m));
  // An lm_head's reference intervals bound its run's logits: collect them while the lm_head
  // projection is checked, so its reference is evaluated once.
  struct Head {
    std::unique_ptr<LmHeadCollector> collector;
    bool checked = false;    // selected by --only, so checked in this part
    bool evaluated = false;  // and its reference evaluated (its host guards held)
  };
  std::map<std::string, Head> heads;  // by projection name
  WeightsAccess weights(options);
  for (const ProjectionInfo* head : usable_heads(m, options.only)) {
    const LogitsRunInfo* run = nullptr;
    for (const LogitsRunInfo& r : m.logits) {
      if (find_lm_head(m, r.name) == head) run = &r;
    }
    NCERT_ASSIGN_OR_RETURN(auto tokens, reader.read_i32(run->path + "/tokens"));
    heads[head->name] = Head{std::make_unique<LmHeadCollector>(
        std::move(tokens), std::vector<std::pair<Index, Index>>{}, omp_get_max_threads())};
  }
  for (const ProjectionInfo& p : m.projections) {
    auto head = heads.find(p.name);
    if (head == heads.end() || !selected(p.name, options.only)) continue;
    LmHeadCollector* c = head->second.collector.get();
    const BlockHook hook = [c](const reference::ReferenceBlock& b) { c->consume(b); };
    NCERT_ASSIGN_OR_RETURN(ProjectionOutcome outcome, check_bound(reader, p, options, weights, hook));
    head->second.checked = true;
    head->second.evaluated = outcome.reference_evaluated;
    add_timing(part, outcome);
    part.projections.emplace_back(p.name, std::move(outcome.checks));
  }
  // Raw target-maximum witnesses of every logits run.
  const auto t_logits = std::chrono::steady_clock::now();
  for (const LogitsRunInfo& run : m.logits) {
    if (!selected(run.name, options.only)) continue;
    LogitErrorModel model;
    const ProjectionInfo* head = find_lm_head(m, run.name);
    auto it = head ? heads.find(head->name) : heads.end();
    if (it != heads.end() && it->second.evaluated) {
      model = lm_head_error_model(*head, it->second.collector->rows());
    } else if (it != heads.end() && it->second.checked) {
      // Checked above without its reference (a host guard, the weights or the selector failed
      // its checks, which say why): evaluating it again for the run would refuse the whole dump
      // on what is one projection's FAIL.
      model = unevaluated_head_model(options.logit_error, head_not_evaluated(*head, "see its checks"),
                                     "correct lm_head " + head->name + " as its failing checks say");
    } else {
      NCERT_ASSIGN_OR_RETURN(model, error_model_for(reader, run, options.logit_error, options.check.lambda));
    }
    NCERT_ASSIGN_OR_RETURN(RunWitnesses w, witness_run(reader, run, std::move(model)));
    for (CheckResult& c : witness_checks(w)) part.tail.push_back(std::move(c));
    // A run with no emission certifies nothing.
    ++(w.witnesses.empty() ? part.empty_runs : part.runs);
  }
  part.logits_seconds = seconds_since(t_logits);
  return part;
}

Result<CheckPart> projection_part(const DumpReader& reader, const CheckCommandOptions& options,
                                  const std::string& name) {
  for (const ProjectionInfo& p : reader.model().projections) {
    if (p.name != name) continue;
    WeightsAccess weights(options);
    NCERT_ASSIGN_OR_RETURN(ProjectionOutcome outcome, check_bound(reader, p, options, weights));
    CheckPart part;
    add_timing(part, outcome);
    part.projections.emplace_back(p.name, std::move(outcome.checks));
    return part;
  }
  return Status(ErrorCode::kInvalidArgument, reader.model().file + " has no projection " + name);
}

}  // namespace

Result<CheckPlan> plan_check(const DumpReader& reader, const CheckCommandOptions& options) {
  const DumpModel& m = reader.model();
  NCERT_RETURN_IF_ERROR(check_selection(m, options.only));
  CheckPlan plan;
  // A weights dump named is an input even when no projection needs it: a FIFO, a device or a
  // missing file there is refused at once, not only when a projection first reads it.
  if (!options.weights.empty()) {
    if (auto w = InputFile::open(options.weights); !w.ok()) {
      plan.refused = Status(w.status().code(), "--weights " + w.status().message());
      return plan;
    }
  }
  // The whole run within --max-memory: every projection is certified alone, so each must fit.
  // A projection that omits its weights must find them in the weights dump (and fit with them).
  WeightsAccess weights(options);
  for (const ProjectionInfo& p : m.projections) {
    if (!selected(p.name, options.only)) continue;
    WeightsSource source;
    Result<ProjectionInfo> bound = weights.bind(reader, p, &source);
    if (!bound.ok()) {
      plan.refused = bound.status();
      return plan;
    }
    const std::uint64_t elsewhere = p.weights_omitted ? weight_bytes(source.reader->model(), *source.projection) : 0;
    const Status s = check_projection_memory(m, p, omp_get_max_threads(), options.check.reference.block_cols,
                                             options.reader.memory_limit, elsewhere);
    if (!s.ok()) {
      plan.refused = s;
      return plan;
    }
  }
  plan.has_tensors = !m.tensors.empty();
  plan.projections_without_rows = m.projections_without_rows;
  const std::vector<const ProjectionInfo*> heads = usable_heads(m, options.only);
  double rest_cost = 0;
  for (const ProjectionInfo& p : m.projections) {
    if (!selected(p.name, options.only)) continue;
    plan.order.push_back(p.name);
    const double cost = static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
    if (is_head(heads, p.name)) {
      rest_cost += cost;
    } else {
      plan.units.push_back(
          CheckUnit{p.name, cost, p.weights_omitted ? options.weights + "|" + p.weights_xxh3 : std::string()});
    }
  }
  for (const LogitsRunInfo& run : m.logits) {
    if (selected(run.name, options.only)) rest_cost += static_cast<double>(run.tokens) * static_cast<double>(run.vocab);
  }
  plan.units.push_back(CheckUnit{std::nullopt, rest_cost, {}});
  return plan;
}

Result<CheckPlan> plan_check(const CheckCommandOptions& options) {
  auto reader = DumpReader::open(options.dump, dump_reader_options(options));
  if (!reader.ok()) {
    CheckPlan plan;
    plan.refused = reader.status();
    return plan;
  }
  return plan_check(*reader, options);
}

Result<CheckPart> run_check_part(const DumpReader& reader, const CheckCommandOptions& options, const CheckUnit& unit) {
  if (unit.projection) return projection_part(reader, options, *unit.projection);
  return rest_part(reader, options);
}

Result<CheckPart> run_check_part(const CheckCommandOptions& options, const CheckUnit& unit) {
  NCERT_ASSIGN_OR_RETURN(DumpReader reader, DumpReader::open(options.dump, dump_reader_options(options)));
  return run_check_part(reader, options, unit);
}

Report assemble_check(const CheckCommandOptions& options, const InputInfo& input, const CheckPlan& plan,
                      std::vector<CheckPart> parts, double total_seconds) {
  Report report;
  report.command = "check";
  report.inputs = {input};
  if (plan.refused) {
    report.refuse(*plan.refused);
    return report;
  }
  report.show_coverage = true;
  report.preamble.push_back("ncert check " + options.dump + "  (xxh3_128 " + input.xxh3_128 + ")");
  if (!options.weights.empty()) {
    report.preamble.push_back("weights omitted from the dump are read from " + options.weights +
                              ", matched by weights_xxh3");
  }
  std::map<std::string, std::vector<CheckResult>> by_projection;
  std::vector<CheckResult> head, tail;
  double t_read = 0, t_ref = 0, t_cmp = 0, t_other = 0, t_logits = 0;
  Index runs = 0, empty_runs = 0;
  for (CheckPart& part : parts) {
    for (auto& [name, checks] : part.projections) by_projection[name] = std::move(checks);
    for (CheckResult& c : part.head) head.push_back(std::move(c));
    for (CheckResult& c : part.tail) tail.push_back(std::move(c));
    t_read += part.read_seconds;
    t_ref += part.reference_seconds;
    t_cmp += part.compare_seconds;
    t_other += part.other_seconds;
    t_logits += part.logits_seconds;
    runs += part.runs;
    empty_runs += part.empty_runs;
  }
  // The order run_check has always had: schema, projections in the dump's order, witnesses,
  // the dump's vacuity.
  for (CheckResult& c : head) report.checks.push_back(std::move(c));
  Index certified = 0;
  for (const std::string& name : plan.order) {
    auto it = by_projection.find(name);
    if (it == by_projection.end()) continue;
    for (CheckResult& c : it->second) report.checks.push_back(std::move(c));
    ++certified;
  }
  for (CheckResult& c : tail) report.checks.push_back(std::move(c));
  report.checks.push_back(dump_vacuity(certified, runs, empty_runs, plan));
  report.apply(options.require);
  if (options.skip_policy) report.apply(*options.skip_policy);
  report.stats["timing_logits_seconds"] = t_logits;
  report.stats["logits_runs"] = runs;
  report.stats["projections"] = certified;
  report.stats["checks"] = report.checks.size();
  report.stats["failed"] = report.failed_checks();
  report.stats["timing_total_seconds"] = total_seconds;
  report.stats["timing_read_seconds"] = t_read;
  report.stats["timing_reference_seconds"] = t_ref;
  report.stats["timing_compare_seconds"] = t_cmp;
  report.stats["timing_other_seconds"] = t_other;
  return report;
}

namespace {

/// The inputs' content hashes (describe_inputs), computed on a thread of their own while the
/// dump is opened and its projections read, where the machine has a second thread for them:
/// hashing reads every byte once, serially (XXH3-128 is one stream), and before the overlap it
/// was 3 % of a 4-bit check's CPU (63 MB, 5-13 ms of 0.2 s), all of it ahead of the reading.
/// The file names and hashes are the same either way.
class InputsHashed {
 public:
  InputsHashed(const std::vector<std::string>& paths, int threads) {
    if (threads > 1) {
      try {
        pending_ = std::async(std::launch::async, [paths] { return describe_inputs(paths, /*serial=*/true); });
        return;
      } catch (const std::system_error&) {  // no thread to spare: hashed here instead
      }
    }
    done_ = describe_inputs(paths);
  }
  const std::vector<InputInfo>& get() {
    if (pending_.valid()) done_ = pending_.get();
    return done_;
  }

 private:
  std::future<std::vector<InputInfo>> pending_;
  std::vector<InputInfo> done_;
};

}  // namespace

Result<Report> run_check(const CheckCommandOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  // Every file the verdict rests on is an input of the report: the dump, and the weights dump
  // its omitted weights come from.
  std::vector<std::string> paths = {options.dump};
  if (!options.weights.empty()) paths.push_back(options.weights);
  InputsHashed inputs(paths, omp_get_max_threads());
  auto with_inputs = [&](Report report) {
    report.inputs = inputs.get();
    return report;
  };
  auto reader = DumpReader::open(options.dump, dump_reader_options(options));
  if (!reader.ok()) {
    CheckPlan refused;
    refused.refused = reader.status();
    return with_inputs(assemble_check(options, inputs.get().front(), refused, {}, seconds_since(t0)));
  }
  NCERT_ASSIGN_OR_RETURN(CheckPlan plan, plan_check(*reader, options));
  std::vector<CheckPart> parts;
  if (!plan.refused) {
    Progress progress("check: projections", static_cast<std::int64_t>(plan.order.size()));
    for (const CheckUnit& unit : plan.units) {
      NCERT_ASSIGN_OR_RETURN(CheckPart part, run_check_part(*reader, options, unit));
      progress.advance(static_cast<std::int64_t>(part.projections.size()));
      parts.push_back(std::move(part));
    }
  }
  return with_inputs(assemble_check(options, inputs.get().front(), plan, std::move(parts), seconds_since(t0)));
}

}  // namespace ncert::certify
