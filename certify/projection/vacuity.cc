// vacuity: the projection proves something: it has an engine output, selected rows, and
// nonzero activations and weights (a PASS over all-zero data certifies nothing).
#include "certify/projection/checks.h"

namespace ncert::certify {

CheckResult vacuity_check(const ProjectionFacts& f, const ReferencePass* pass, const CheckOptions& options) {
  const LoadedProjection& L = f.data;
  CheckResult r = projection_check(f.info(), CheckKind::kVacuity);
  VacuityEvidence e;
  for (std::int32_t s : L.selector) e.selected_rows += s >= 0;
  e.outputs = (L.y_unpacked.present ? 1 : 0) + (L.y_packed.present ? 1 : 0) + (L.y_compact.present ? 1 : 0);
  if (!f.any_output()) e.vacuous.push_back("no engine output (y_unpacked, y_packed, y_compact)");
  if (e.selected_rows == 0) e.vacuous.push_back("no selected rows");
  if (pass && pass->summary.all_zero_x) e.vacuous.push_back("all-zero activations");
  if (pass && pass->summary.all_zero_w) e.vacuous.push_back("all-zero weights");
  if (e.vacuous.empty()) {
    r.reason = "proves something: " + std::to_string(e.selected_rows) + " selected rows, nonzero data";
  } else {
    std::string list;
    for (const std::string& w : e.vacuous) list += (list.empty() ? "" : ", ") + w;
    if (options.allow_vacuous) {
      r.reason = "vacuous (allowed by --allow-vacuous): " + list;
    } else {
      r.verdict = Verdict::kFail;
      r.reason = "vacuous: " + list;
    }
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
