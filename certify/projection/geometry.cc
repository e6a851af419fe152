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

/// What the stored scales say the declaration should be, for guard 309: a scales array whose
/// columns divide K fits group_size = K / columns ("" when none fits). (A scaled segment's
/// scale rows that do not match scale_rows are refused earlier, as a shape mismatch.)
std::string group_geometry_hint(const packing::PackPlan& plan) {
  for (const packing::SegmentGeometry& g : plan.segments) {
    const bool scaled = reference::is_scaled_format(g.format);
    if (!scaled && g.format != reference::WeightFormat::kAf4) continue;
    const Index declared = scaled ? g.scaled.group_size : g.af4.group_size;
    if (g.scales_cols >= 1 && plan.k % g.scales_cols == 0 && plan.k / g.scales_cols != declared) {
      return "; " + g.name + "'s stored scales fit group_size = " + std::to_string(plan.k / g.scales_cols) + " (K " +
             std::to_string(plan.k) + " / " + std::to_string(g.scales_cols) + " columns), not the declared " +
             std::to_string(declared);
    }
  }
  return {};
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
    if (f.plan.code() == ErrorCode::kGuardAf4Geometry) r.reason += group_geometry_hint(plan);
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
