#include "certify/check_command.h"

#include <chrono>

#include <map>
#include <memory>
#include <omp.h>

#include "certify/witness.h"

namespace ncert::certify {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  CheckResult schema;
  schema.id = "schema";
  schema.kind = "schema";
  const DumpModel& m = reader->model();
  int notes = 0;
  for (const Finding& f : m.findings) notes += f.severity == Severity::kNote;
  schema.reason = "valid ncert dump v1 (engine " + m.engine + ", build " + m.build + "): " +
                  std::to_string(m.projections.size()) + " projection(s), " + std::to_string(m.logits.size()) +
                  " logits run(s)" + (notes ? ", " + std::to_string(notes) + " note(s)" : "");
  schema.stats = Json{{"engine", m.engine}, {"build", m.build}, {"projections", m.projections.size()},
                      {"logits_runs", m.logits.size()}, {"tensors", m.tensors.size()}, {"notes", notes}};
  report.checks.push_back(std::move(schema));
  report.preamble.push_back("ncert check " + options.dump + "  (xxh3_128 " + input.xxh3_128 + ")");

  // An lm_head's reference intervals bound its run's logits: collect them while the lm_head
  // projection is checked, so its reference is evaluated once.
  std::map<std::string, std::unique_ptr<LmHeadCollector>> heads;
  for (const ProjectionInfo& p : m.projections) {
    if (p.role != "lm_head" || p.logits_run.empty()) continue;
    NCERT_ASSIGN_OR_RETURN(auto tokens, reader->read_i32("/logits/" + p.logits_run + "/tokens"));
    heads[p.name] = std::make_unique<LmHeadCollector>(std::move(tokens), omp_get_max_threads());
  }
  double t_read = 0, t_ref = 0, t_cmp = 0, t_other = 0;
  Index certified = 0;
  std::map<std::string, std::string> head_of_run;  // run -> lm_head projection that was evaluated
  for (const ProjectionInfo& p : m.projections) {
    if (!options.only.empty() && p.name.find(options.only) == std::string::npos) continue;
    ProjectionTiming timing;
    BlockHook hook;
    if (auto it = heads.find(p.name); it != heads.end()) {
      LmHeadCollector* c = it->second.get();
      hook = [c](const reference::ReferenceBlock& b) { c->consume(b); };
    }
    NCERT_ASSIGN_OR_RETURN(auto checks, check_projection(*reader, p, options.check, &timing, hook));
    for (const CheckResult& c : checks) {
      if (hook && c.kind == "bound" && c.stats.value("evaluated", true)) head_of_run[p.logits_run] = p.name;
    }
    for (CheckResult& c : checks) report.checks.push_back(std::move(c));
    t_read += timing.read_seconds;
    t_ref += timing.reference_seconds;
    t_cmp += timing.compare_seconds;
    t_other += timing.other_seconds;
    ++certified;
  }
  // Raw target-maximum witnesses of every logits run.
  const auto t_logits = std::chrono::steady_clock::now();
  Index runs = 0;
  for (const LogitsRunInfo& run : m.logits) {
    if (!options.only.empty() && run.name.find(options.only) == std::string::npos) continue;
    LogitErrorModel model;
    if (auto it = head_of_run.find(run.name); it != head_of_run.end()) {
      model.kind = LogitErrorModel::Kind::kLmHead;
      model.source = "lm_head projection " + it->second;
      model.intervals = heads[it->second]->result();
    } else {
      NCERT_ASSIGN_OR_RETURN(model, error_model_for(*reader, run, options.logit_error, options.check.lambda));
    }
    NCERT_ASSIGN_OR_RETURN(RunWitnesses w, witness_run(*reader, run, std::move(model)));
    report.checks.push_back(witness_check(w));
    ++runs;
  }
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
