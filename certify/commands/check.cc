#include "certify/commands/check.h"

#include <omp.h>

#include <chrono>
#include <map>
#include <memory>

#include "certify/logits/lm_head.h"
#include "certify/logits/witness.h"
#include "certify/projection/check_projection.h"
#include "certify/projection/memory.h"

namespace ncert::certify {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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
CheckResult dump_vacuity(const DumpModel& m, Index projections, Index runs) {
  CheckResult v;
  v.id = "vacuity";
  v.subject = "dump";
  v.kind = CheckKind::kVacuity;
  VacuityEvidence e;
  e.outputs = projections + runs;
  if (projections + runs > 0) {
    v.reason = "certified " + std::to_string(projections) + " projection(s) and " + std::to_string(runs) +
               " logits run(s)";
  } else {
    v.verdict = Verdict::kFail;
    e.vacuous.push_back("no projection and no logits run");
    v.reason = "nothing to certify: the dump holds no projection and no logits run" +
               std::string(m.tensors.empty() ? "" : " (its tensors are compared by ncert compare)");
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
  schema.reason = "valid ncert dump v1 (engine " + m.engine + ", build " + m.build + "): " +
                  std::to_string(m.projections.size()) + " projection(s), " + std::to_string(m.logits.size()) +
                  " logits run(s)" + (e.notes ? ", " + std::to_string(e.notes) + " note(s)" : "");
  schema.evidence = std::move(e);
  return schema;
}

}  // namespace

Result<Report> run_check(const CheckCommandOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Report report;
  report.command = "check";
  report.inputs = describe_inputs({options.dump});
  const InputInfo input = report.inputs.front();

  auto reader = DumpReader::open(options.dump, options.reader);
  if (!reader.ok()) return report.refuse(reader.status());
  const DumpModel& m = reader->model();
  NCERT_RETURN_IF_ERROR(check_selection(m, options.only));
  // The whole run within --max-memory: every projection is certified alone, so each must fit.
  for (const ProjectionInfo& p : m.projections) {
    if (!selected(p.name, options.only)) continue;
    const Status s = check_projection_memory(m, p, omp_get_max_threads(), options.check.reference.block_cols,
                                             options.reader.memory_limit);
    if (!s.ok()) return report.refuse(s);
  }
  report.show_coverage = true;
  report.checks.push_back(schema_check(m));
  report.preamble.push_back("ncert check " + options.dump + "  (xxh3_128 " + input.xxh3_128 + ")");

  // An lm_head's reference intervals bound its run's logits: collect them while the lm_head
  // projection is checked, so its reference is evaluated once.
  struct Head {
    const LogitsRunInfo* run;
    std::unique_ptr<LmHeadCollector> collector;
    bool evaluated = false;
  };
  std::map<std::string, Head> heads;  // by projection name
  for (const LogitsRunInfo& run : m.logits) {
    const ProjectionInfo* head = find_lm_head(m, run.name);
    if (!head || !lm_head_unusable(*head).empty() || !selected(run.name, options.only)) continue;
    NCERT_ASSIGN_OR_RETURN(auto tokens, reader->read_i32(run.path + "/tokens"));
    heads[head->name] = Head{&run, std::make_unique<LmHeadCollector>(std::move(tokens),
                                                                      std::vector<std::pair<Index, Index>>{},
                                                                      omp_get_max_threads())};
  }
  double t_read = 0, t_ref = 0, t_cmp = 0, t_other = 0;
  Index certified = 0;
  for (const ProjectionInfo& p : m.projections) {
    if (!selected(p.name, options.only)) continue;
    BlockHook hook;
    auto head = heads.find(p.name);
    if (head != heads.end()) {
      LmHeadCollector* c = head->second.collector.get();
      hook = [c](const reference::ReferenceBlock& b) { c->consume(b); };
    }
    NCERT_ASSIGN_OR_RETURN(ProjectionOutcome outcome, check_projection(*reader, p, options.check, hook));
    if (head != heads.end()) head->second.evaluated = outcome.reference_evaluated;
    for (CheckResult& c : outcome.checks) report.checks.push_back(std::move(c));
    t_read += outcome.timing.read_seconds;
    t_ref += outcome.timing.reference_seconds;
    t_cmp += outcome.timing.compare_seconds;
    t_other += outcome.timing.other_seconds;
    ++certified;
  }
  // Raw target-maximum witnesses of every logits run.
  const auto t_logits = std::chrono::steady_clock::now();
  Index runs = 0;
  for (const LogitsRunInfo& run : m.logits) {
    if (!selected(run.name, options.only)) continue;
    LogitErrorModel model;
    const ProjectionInfo* head = find_lm_head(m, run.name);
    auto it = head ? heads.find(head->name) : heads.end();
    if (it != heads.end() && it->second.evaluated) {
      model = lm_head_error_model(*head, it->second.collector->rows());
    } else {
      NCERT_ASSIGN_OR_RETURN(model, error_model_for(*reader, run, options.logit_error, options.check.lambda));
    }
    NCERT_ASSIGN_OR_RETURN(RunWitnesses w, witness_run(*reader, run, std::move(model)));
    for (CheckResult& c : witness_checks(w)) report.checks.push_back(std::move(c));
    ++runs;
  }
  report.checks.push_back(dump_vacuity(m, certified, runs));
  report.apply(options.require);
  report.stats["timing_logits_seconds"] = since(t_logits);
  report.stats["logits_runs"] = runs;
  report.stats["projections"] = certified;
  report.stats["checks"] = report.checks.size();
  report.stats["failed"] = report.failed_checks();
  report.stats["timing_total_seconds"] = since(t0);
  report.stats["timing_read_seconds"] = t_read;
  report.stats["timing_reference_seconds"] = t_ref;
  report.stats["timing_compare_seconds"] = t_cmp;
  report.stats["timing_other_seconds"] = t_other;
  return report;
}

}  // namespace ncert::certify
