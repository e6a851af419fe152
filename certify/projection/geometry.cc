// geometry: the packing plan the dump describes passes every host guard of the packing helper
// (packing/guards.h), in the guards' documented order; a failure names the guard and its numbers.
#include "certify/projection/checks.h"

namespace ncert::certify {

namespace {

std::string segments_text(const ProjectionInfo& info) {
  std::string s;
  for (const SegmentInfo& g : info.segments) {
    if (!s.empty()) s += ", ";
    s += std::string(reference::weight_format_name(g.format)) + " [" + std::to_string(g.row_begin) + "," +
         std::to_string(g.row_end) + ")";
  }
  return s;
}

}  // namespace

CheckResult geometry_check(const ProjectionFacts& f) {
  const ProjectionInfo& info = f.info();
  const packing::PackPlan& plan = f.data.plan;
  CheckResult r = projection_check(info, CheckKind::kGeometry);
  Index used = 0;
  for (std::int32_t s : f.data.selector) used += s >= 0;
  GeometryEvidence e;
  e.rows = info.m;
  e.slots = info.p;
  e.slots_used = used;
  e.k = info.k;
  e.n = info.n;
  e.in_stride = info.in_stride;
  e.out_stride = info.out_stride;
  e.request_rules = plan.request_rules;
  e.requests = plan.requests;
  e.block_rows = plan.block_rows;
  e.cap = plan.cap;
  if (!f.plan.ok()) {
    e.guard = f.plan.code();
    r.verdict = Verdict::kFail;
    r.reason = std::string(error_name(f.plan.code())) + " (" + std::to_string(static_cast<int>(f.plan.code())) +
               "): " + f.plan.message();
    r.evidence = e;
    return r;
  }
  r.reason = "plan valid: ";
  if (plan.request_rules) {
    r.reason += std::to_string(plan.requests) + " requests x " + std::to_string(plan.block_rows) + " rows, cap " +
                std::to_string(plan.cap) + ", ";
  } else {
    r.reason += std::to_string(info.m) + " rows (no request geometry declared), ";
  }
  r.reason += std::to_string(used) + " of " + std::to_string(info.p) + " slots used; " + segments_text(info);
  r.evidence = e;
  return r;
}

}  // namespace ncert::certify
