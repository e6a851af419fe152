#include "certify/check_command.h"

#include <chrono>

#include "certify/hash.h"

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
  InputInfo input{options.dump, ""};
  if (auto h = file_xxh3_128(options.dump); h.ok()) input.xxh3_128 = *h;
  report.inputs.push_back(input);

  auto reader = DumpReader::open(options.dump, options.reader);
  CheckResult schema;
  schema.id = "schema";
  schema.kind = "schema";
  if (!reader.ok()) {
    schema.verdict = Verdict::kFail;
    schema.reason = reader.status().message();
    report.error = reader.status();
    report.checks.push_back(std::move(schema));
    return report;
  }
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

  double t_read = 0, t_ref = 0, t_cmp = 0, t_other = 0;
  Index certified = 0;
  for (const ProjectionInfo& p : m.projections) {
    if (!options.only.empty() && p.name.find(options.only) == std::string::npos) continue;
    ProjectionTiming timing;
    NCERT_ASSIGN_OR_RETURN(auto checks, check_projection(*reader, p, options.check, &timing));
    for (CheckResult& c : checks) report.checks.push_back(std::move(c));
    t_read += timing.read_seconds;
    t_ref += timing.reference_seconds;
    t_cmp += timing.compare_seconds;
    t_other += timing.other_seconds;
    ++certified;
  }
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
