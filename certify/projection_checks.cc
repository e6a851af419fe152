#include "certify/projection_checks.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "packing/guards.h"
#include "reference/bound_stats.h"
#include "reference/float_bits.h"

namespace ncert::certify {

namespace {

using reference::BoundStats;

constexpr const char* kOutputNames[3] = {"y_unpacked", "y_packed", "y_compact"};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string hex_bits(std::uint32_t bits, DType t) {
  return t == DType::kF32 ? hex_bits_f32(reference::f32_from_bits(bits))
                          : hex_bits_u16(static_cast<std::uint16_t>(bits));
}

std::string value_text(float v, DType t) {
  const std::uint32_t bits = t == DType::kF32 ? reference::f32_bits(v) : reference::f32_to_bf16(v);
  return format_float(v) + " (" + hex_bits(bits, t) + ")";
}

std::uint32_t walk_bits(float w, DType t) {
  return t == DType::kF32 ? reference::f32_bits(w) : reference::f32_to_bf16(w);
}

std::string where(Index row, Index col, Index slot) {
  std::string s = "row " + std::to_string(row) + " col " + std::to_string(col);
  if (slot >= 0) s += " (slot " + std::to_string(slot) + ")";
  return s;
}

struct WalkStats {
  Index compared = 0;
  Index mismatches = 0;
  Index row = -1, col = -1;
  std::uint32_t engine = 0, walk = 0;
  void add(Index r, Index c, std::uint32_t e, std::uint32_t w) {
    ++compared;
    if (e == w) return;
    ++mismatches;
    if (row < 0 || r < row || (r == row && c < col)) {
      row = r;
      col = c;
      engine = e;
      walk = w;
    }
  }
  void merge(const WalkStats& o) {
    compared += o.compared;
    mismatches += o.mismatches;
    if (o.row >= 0 && (row < 0 || o.row < row || (o.row == row && o.col < col))) {
      row = o.row;
      col = o.col;
      engine = o.engine;
      walk = o.walk;
    }
  }
};

/// Compares every engine output with each reference block as it is produced.
class CheckSink final : public reference::ReferenceSink {
 public:
  struct Partial {
    BoundStats bound[3];
    WalkStats walk[3];
    double seconds = 0;
  };

  CheckSink(const LoadedProjection& L, const std::vector<Index>& slot_of_row, Index blocks,
            const BlockHook& hook)
      : L_(L), slot_of_row_(slot_of_row), hook_(hook), parts(static_cast<std::size_t>(blocks)) {}

  void consume(const reference::ReferenceBlock& b) override {
    const auto t0 = std::chrono::steady_clock::now();
    Partial& part = parts[static_cast<std::size_t>(b.index)];
    const ProjectionInfo& I = *L_.info;
    const DType t = I.output;
    const Index stride = I.out_stride;
    const EngineOutput* outs[3] = {&L_.y_unpacked, &L_.y_packed, &L_.y_compact};
    for (Index i = 0; i < b.rows; ++i) {
      const Index slot = slot_of_row_[static_cast<std::size_t>(i)];
      for (int o = 0; o < 3; ++o) {
        const EngineOutput& out = *outs[o];
        if (!out.present || (o > 0 && slot < 0)) continue;
        const Index src_row = o == 2 ? slot : i;
        for (Index c = b.col_begin; c < b.col_end; ++c) {
          const Index e = b.at(i, c);
          const float z = out.value(t, stride, src_row, c);
          part.bound[o].add(i, c, z, b.center[e], b.bound[e], b.accept[e], b.expect[e]);
          if (b.walk) part.walk[o].add(i, c, out.bits(t, stride, src_row, c), walk_bits(b.walk[e], t));
        }
      }
    }
    part.seconds += seconds_since(t0);
    if (hook_) hook_(b);
  }

  const LoadedProjection& L_;
  const std::vector<Index>& slot_of_row_;
  const BlockHook& hook_;
  std::vector<Partial> parts;
};

Json record_json(const reference::ElementRecord& r) {
  if (!r.found()) return nullptr;
  return Json{{"row", r.row}, {"col", r.col}};
}

Json bound_stats_json(const BoundStats& s) {
  return Json{{"elements", s.elements()},
              {"outside", s.outside()},
              {"beyond_tier", s.beyond_tier()},
              {"nonfinite", s.nonfinite()},
              {"max_abs_error", s.max_abs_error()},
              {"max_abs_error_at", record_json(s.max_abs_at())},
              {"max_error_over_bound", std::isfinite(s.max_error_over_bound()) ? Json(s.max_error_over_bound()) : Json("inf")},
              {"max_utilization", std::isfinite(s.max_utilization()) ? Json(s.max_utilization()) : Json("inf")},
              {"mean_signed_error", s.mean_signed_error()},
              {"mean_signed_error_over_bound", s.mean_signed_error_over_bound()}};
}

CheckResult make(const ProjectionInfo& info, const char* kind) {
  CheckResult r;
  r.id = "projections/" + info.name + "/" + kind;
  r.kind = kind;
  return r;
}

CheckResult not_evaluated(const ProjectionInfo& info, const char* kind, const std::string& why) {
  CheckResult r = make(info, kind);
  r.verdict = Verdict::kFail;
  r.reason = "not evaluated: " + why;
  r.stats["evaluated"] = false;
  return r;
}

std::string segments_text(const ProjectionInfo& info) {
  std::string s;
  for (const SegmentInfo& g : info.segments) {
    if (!s.empty()) s += ", ";
    s += std::string(reference::weight_format_name(g.format)) + " [" + std::to_string(g.row_begin) + "," +
         std::to_string(g.row_end) + ")";
  }
  return s;
}

CheckResult geometry_check(const LoadedProjection& L, const Status& plan_status) {
  const ProjectionInfo& info = *L.info;
  CheckResult r = make(info, "geometry");
  Index used = 0;
  for (std::int32_t s : L.selector) used += s >= 0;
  r.stats = Json{{"rows", info.m}, {"slots", info.p}, {"slots_used", used}, {"k", info.k}, {"n", info.n},
                 {"in_stride", info.in_stride}, {"out_stride", info.out_stride},
                 {"request_rules", L.plan.request_rules}};
  if (L.plan.request_rules) {
    r.stats["requests"] = L.plan.requests;
    r.stats["block_rows"] = L.plan.block_rows;
    r.stats["cap"] = L.plan.cap;
  }
  if (!plan_status.ok()) {
    r.verdict = Verdict::kFail;
    r.reason = std::string(error_name(plan_status.code())) + " (" +
               std::to_string(static_cast<int>(plan_status.code())) + "): " + plan_status.message();
    r.stats["guard"] = std::string(error_name(plan_status.code()));
    r.stats["guard_code"] = static_cast<int>(plan_status.code());
    return r;
  }
  r.reason = "plan valid: ";
  if (L.plan.request_rules) {
    r.reason += std::to_string(L.plan.requests) + " requests x " + std::to_string(L.plan.block_rows) +
                " rows, cap " + std::to_string(L.plan.cap) + ", ";
  } else {
    r.reason += std::to_string(info.m) + " rows (no request geometry declared), ";
  }
  r.reason += std::to_string(used) + " of " + std::to_string(info.p) + " slots used; " + segments_text(info);
  return r;
}

// y_packed vs y_unpacked on selected rows; y_compact scattered vs y_packed. Bitwise.
CheckResult identity_check(const LoadedProjection& L) {
  const ProjectionInfo& info = *L.info;
  CheckResult r = make(info, "identity");
  const DType t = info.output;
  const Index stride = info.out_stride;
  struct First {
    std::string text;
    Index row = -1, col = -1;
  } first;
  Index compared = 0, differ = 0;
  auto note = [&](const std::string& what, Index row, Index col, Index slot, std::uint32_t a, std::uint32_t b,
                  const char* an, const char* bn) {
    ++differ;
    if (first.row >= 0) return;
    first.row = row;
    first.col = col;
    first.text = what + " at " + where(row, col, slot) + ": " + an + " " + hex_bits(a, t) + " vs " + bn + " " +
                 hex_bits(b, t) + " (" + format_float(L.y_packed.present ? L.y_packed.value(t, stride, row, col) : 0) + ")";
  };
  std::vector<std::pair<Index, Index>> pairs;  // (slot, row)
  for (Index s = 0; s < static_cast<Index>(L.selector.size()); ++s) {
    if (L.selector[static_cast<std::size_t>(s)] >= 0) pairs.emplace_back(s, L.selector[static_cast<std::size_t>(s)]);
  }
  std::sort(pairs.begin(), pairs.end(), [](auto& a, auto& b) { return a.second < b.second; });
  Index packed_vs_unpacked = 0, compact_vs_packed = 0;
  for (const auto& [slot, row] : pairs) {
    for (Index c = 0; c < info.n; ++c) {
      if (L.y_packed.present && L.y_unpacked.present) {
        const std::uint32_t a = L.y_packed.bits(t, stride, row, c), b = L.y_unpacked.bits(t, stride, row, c);
        ++compared;
        ++packed_vs_unpacked;
        if (a != b) note("y_packed != y_unpacked", row, c, slot, a, b, "y_packed", "y_unpacked");
      }
      if (L.y_compact.present && L.y_packed.present) {
        const std::uint32_t a = L.y_compact.bits(t, stride, slot, c), b = L.y_packed.bits(t, stride, row, c);
        ++compared;
        ++compact_vs_packed;
        if (a != b) note("y_compact scattered != y_packed", row, c, slot, a, b, "y_compact", "y_packed");
      }
    }
  }
  r.stats = Json{{"elements_compared", compared}, {"packed_vs_unpacked", packed_vs_unpacked},
                 {"compact_vs_packed", compact_vs_packed}, {"differ", differ}, {"selected_rows", pairs.size()}};
  if (differ > 0) {
    r.verdict = Verdict::kFail;
    r.reason = first.text + "; " + std::to_string(differ) + " of " + std::to_string(compared) + " elements differ";
    r.stats["first"] = Json{{"row", first.row}, {"col", first.col}};
  } else {
    r.reason = std::to_string(compared) + " elements bit-identical over " + std::to_string(pairs.size()) +
               " selected rows (" + (packed_vs_unpacked ? "packed vs unpacked" : "") +
               (packed_vs_unpacked && compact_vs_packed ? ", " : "") + (compact_vs_packed ? "compact vs packed" : "") + ")";
  }
  return r;
}

CheckResult untouched_check(const LoadedProjection& L, const std::vector<Index>& slot_of_row) {
  const ProjectionInfo& info = *L.info;
  CheckResult r = make(info, "untouched");
  const DType t = info.output;
  const Index stride = info.out_stride;
  Index compared = 0, changed = 0;
  std::string first;
  for (Index row = 0; row < info.m; ++row) {
    const bool selected = slot_of_row[static_cast<std::size_t>(row)] >= 0;
    for (Index c = selected ? info.n : 0; c < stride; ++c) {
      ++compared;
      const std::uint32_t a = L.y_before.bits(t, stride, row, c), b = L.y_packed.bits(t, stride, row, c);
      if (a == b) continue;
      if (changed++ == 0) {
        first = std::string(c >= info.n ? "padding column" : "unselected row") + " written at row " +
                std::to_string(row) + " col " + std::to_string(c) + ": y_before " + hex_bits(a, t) +
                " -> y_packed " + hex_bits(b, t);
        r.stats["first"] = Json{{"row", row}, {"col", c}, {"padding", c >= info.n}};
      }
    }
  }
  r.stats["elements_compared"] = compared;
  r.stats["changed"] = changed;
  if (changed > 0) {
    r.verdict = Verdict::kFail;
    r.reason = first + "; " + std::to_string(changed) + " of " + std::to_string(compared) + " elements changed";
  } else {
    r.reason = std::to_string(compared) + " elements of unselected rows and padding columns unchanged";
  }
  return r;
}

}  // namespace

Result<std::vector<CheckResult>> check_projection(const DumpReader& reader, const ProjectionInfo& info,
                                                  const CheckOptions& options, ProjectionTiming* timing,
                                                  const BlockHook& hook) {
  NCERT_ASSIGN_OR_RETURN(LoadedProjection L, load_projection(reader, info));
  L.info = &info;
  ProjectionTiming local;
  ProjectionTiming& T = timing ? *timing : local;
  T.read_seconds = L.read_seconds;
  std::vector<CheckResult> checks;

  // 1. geometry, and what later checks may rely on.
  const Status plan_status = packing::validate_plan(L.plan);
  const Status weights_status = packing::validate_weights(L.plan);
  const Status rows_status = packing::validate_selector_rows(L.plan);
  checks.push_back(geometry_check(L, plan_status));

  std::vector<Index> slot_of_row(static_cast<std::size_t>(info.m), -1);
  if (rows_status.ok()) {
    for (Index s = 0; s < static_cast<Index>(L.selector.size()); ++s) {
      const Index row = L.selector[static_cast<std::size_t>(s)];
      if (row >= 0) slot_of_row[static_cast<std::size_t>(row)] = s;
    }
  }
  const bool any_output = L.y_unpacked.present || L.y_packed.present || L.y_compact.present;

  // 2. identity (only where two engine outputs can be compared).
  auto t_other = std::chrono::steady_clock::now();
  const bool identity_applies = L.y_packed.present && (L.y_unpacked.present || L.y_compact.present);
  if (identity_applies) {
    checks.push_back(rows_status.ok() ? identity_check(L)
                                      : not_evaluated(info, "identity", "the selector does not map slots to rows (" +
                                                                            rows_status.message() + ")"));
  }
  T.other_seconds = seconds_since(t_other);

  // 3-4. bound and walk, in one pass of the reference.
  const reference::LinearProblem problem = L.problem(options.lambda);
  const bool walk_declared = info.walk.declared;
  std::string ref_blocker;
  if (!weights_status.ok()) ref_blocker = "the weights cannot be evaluated (" + weights_status.message() + ")";
  else if (!rows_status.ok() && (L.y_packed.present || L.y_compact.present)) {
    ref_blocker = "the selector does not map slots to rows (" + rows_status.message() + ")";
  }
  if (const Status ps = reference::validate_problem(problem); ref_blocker.empty() && !ps.ok()) {
    ref_blocker = ps.message();
  }
  reference::ReferenceSummary summary;
  bool evaluated = false;
  if (!any_output) {
    // Nothing to bound: vacuity reports it.
  } else if (!ref_blocker.empty()) {
    checks.push_back(not_evaluated(info, "bound", ref_blocker));
    if (walk_declared) checks.push_back(not_evaluated(info, "walk", ref_blocker));
  } else {
    reference::ReferenceOptions ro = options.reference;
    // A walk whose combination is unsupported (folded AF4) has no emulation to compare with.
    const bool walk_supported = walk_declared && plan_status.code() != ErrorCode::kGuardUnsupported;
    ro.emulate_walk = walk_supported;
    const Index blocks = (info.n + ro.block_cols - 1) / ro.block_cols;
    CheckSink sink(L, slot_of_row, blocks, hook);
    const auto t0 = std::chrono::steady_clock::now();
    auto s = reference::evaluate_reference(problem, sink, ro);
    T.reference_seconds = seconds_since(t0);
    if (!s.ok()) return s.status().with_context(info.path);
    summary = *s;
    evaluated = true;
    CheckSink::Partial total;
    double compare_cpu = 0;
    for (const CheckSink::Partial& p : sink.parts) {
      for (int o = 0; o < 3; ++o) {
        total.bound[o].merge(p.bound[o]);
        total.walk[o].merge(p.walk[o]);
      }
      compare_cpu += p.seconds;
    }
    T.compare_seconds = compare_cpu / std::max(1, omp_get_max_threads());
    const EngineOutput* outs[3] = {&L.y_unpacked, &L.y_packed, &L.y_compact};

    CheckResult b = make(info, "bound");
    Json per = Json::object();
    Index elements = 0, outside = 0, beyond = 0;
    double max_util = 0, max_err_over_b = 0;
    int worst = -1;
    for (int o = 0; o < 3; ++o) {
      if (!outs[o]->present) continue;
      const BoundStats& st = total.bound[o];
      per[kOutputNames[o]] = bound_stats_json(st);
      elements += st.elements();
      outside += st.outside();
      beyond += st.beyond_tier();
      max_util = std::max(max_util, st.max_utilization());
      max_err_over_b = std::max(max_err_over_b, st.max_error_over_bound());
      if (worst < 0 && st.outside() > 0) worst = o;
    }
    b.stats = Json{{"outputs", per}, {"accumulator", info.accumulator.name}, {"u_eff", info.accumulator.u_eff},
                   {"lambda", options.lambda},
                   {"tier", info.accumulator.round_to_nearest ? "lambda*sqrt(K)*u*S" : "B/2 (not round-to-nearest)"},
                   {"k", info.k}, {"elements", elements}, {"outside", outside}, {"beyond_tier", beyond}};
    if (summary.nonfinite_x > 0 || summary.nonfinite_w > 0) {
      b.verdict = Verdict::kFail;
      if (summary.nonfinite_x > 0) {
        b.reason = "x holds " + std::to_string(summary.nonfinite_x) + " non-finite value(s), first at row " +
                   std::to_string(summary.first_nonfinite_x / info.k) + " col " +
                   std::to_string(summary.first_nonfinite_x % info.k) + ": the reference cannot certify them";
      } else {
        b.reason = "the dequantized weights hold " + std::to_string(summary.nonfinite_w) +
                   " non-finite value(s), first at W row " + std::to_string(summary.first_nonfinite_w / info.k) +
                   " col " + std::to_string(summary.first_nonfinite_w % info.k);
      }
    } else if (summary.vacuous_bound) {
      b.verdict = Verdict::kFail;
      b.reason = "the deterministic bound is vacuous: K_eff * u_eff >= 1/2 (K = " + std::to_string(info.k) +
                 ", u_eff = " + format_float(info.accumulator.u_eff) + "): nothing can be certified";
    } else if (worst >= 0) {
      const reference::ElementRecord& f = total.bound[worst].first_outside();
      const Index slot = slot_of_row[static_cast<std::size_t>(f.row)];
      b.verdict = Verdict::kFail;
      b.reason = std::string(kOutputNames[worst]) + " " + where(f.row, f.col, worst > 0 ? slot : -1) + ": " +
                 value_text(f.value, info.output) + " outside [" + format_float(f.accept.lo) + ", " +
                 format_float(f.accept.hi) + "] (reference " + format_short(f.center) + ", B = " +
                 format_short(f.bound) + "); " + std::to_string(outside) + " of " + std::to_string(elements) +
                 " values outside";
      b.stats["first"] = Json{{"output", kOutputNames[worst]}, {"row", f.row}, {"col", f.col},
                              {"slot", worst > 0 ? Json(slot) : Json(nullptr)}, {"value", f.value},
                              {"reference", f.center}, {"bound", f.bound}, {"lo", f.accept.lo}, {"hi", f.accept.hi}};
    } else if (options.strict && beyond > 0) {
      b.verdict = Verdict::kFail;
      int o = 0;
      while (o < 3 && (!outs[o]->present || total.bound[o].beyond_tier() == 0)) ++o;
      const reference::ElementRecord& f = total.bound[o].first_beyond_tier();
      b.reason = std::to_string(beyond) + " values beyond the probabilistic tier (--strict), first " +
                 kOutputNames[o] + " " + where(f.row, f.col, -1) + ": " + value_text(f.value, info.output) +
                 " (reference " + format_short(f.center) + ")";
    } else {
      // For f32 outputs |y - y*| / B is the bound utilization proper; for bf16 outputs the
      // output rounding dominates |y - y*|, so the share of the accepted interval used is the
      // informative figure (both are in the stats).
      b.reason = "all " + std::to_string(elements) + " engine values inside the reference intervals (" +
                 (info.output == DType::kF32 ? "max |y - y*| / B " + format_short(max_err_over_b)
                                             : "bf16 outputs, max share of the accepted interval " + format_short(max_util)) +
                 ", " + std::to_string(beyond) + " beyond the probabilistic tier)";
    }
    checks.push_back(std::move(b));

    if (walk_declared) {
      if (!walk_supported) {
        checks.push_back(not_evaluated(info, "walk", "k_walk " + info.walk.name +
                                                         " is not defined for this weight format (" +
                                                         plan_status.message() + ")"));
      } else {
        CheckResult w = make(info, "walk");
        Index compared = 0, mismatches = 0;
        int first = -1;
        Json perw = Json::object();
        for (int o = 0; o < 3; ++o) {
          if (!outs[o]->present) continue;
          const WalkStats& ws = total.walk[o];
          perw[kOutputNames[o]] = Json{{"compared", ws.compared}, {"mismatches", ws.mismatches}};
          compared += ws.compared;
          mismatches += ws.mismatches;
          if (first < 0 && ws.mismatches > 0) first = o;
        }
        w.stats = Json{{"k_walk", info.walk.name}, {"outputs", perw}, {"compared", compared}, {"mismatches", mismatches}};
        if (mismatches > 0) {
          const WalkStats& ws = total.walk[first];
          const Index slot = slot_of_row[static_cast<std::size_t>(ws.row)];
          w.verdict = Verdict::kFail;
          w.reason = std::string(kOutputNames[first]) + " " + where(ws.row, ws.col, first > 0 ? slot : -1) +
                     " differs from the emulated " + info.walk.name + " walk: engine " + hex_bits(ws.engine, info.output) +
                     " vs walk " + hex_bits(ws.walk, info.output) + "; " + std::to_string(mismatches) + " of " +
                     std::to_string(compared) + " values differ";
          w.stats["first"] = Json{{"output", kOutputNames[first]}, {"row", ws.row}, {"col", ws.col}};
        } else {
          w.reason = "all " + std::to_string(compared) + " engine values equal the emulated " + info.walk.name +
                     " walk bit for bit";
        }
        checks.push_back(std::move(w));
      }
    }
  }

  // 5. untouched.
  t_other = std::chrono::steady_clock::now();
  if (L.y_before.present && L.y_packed.present) {
    checks.push_back(rows_status.ok() ? untouched_check(L, slot_of_row)
                                      : not_evaluated(info, "untouched", "the selector does not map slots to rows"));
  }

  // 6. vacuity.
  CheckResult v = make(info, "vacuity");
  Index selected = 0;
  for (std::int32_t s : L.selector) selected += s >= 0;
  std::vector<std::string> why;
  if (!any_output) why.push_back("no engine output (y_unpacked, y_packed, y_compact)");
  if (selected == 0) why.push_back("no selected rows");
  if (evaluated && summary.all_zero_x) why.push_back("all-zero activations");
  if (evaluated && summary.all_zero_w) why.push_back("all-zero weights");
  v.stats = Json{{"selected_rows", selected}, {"outputs", (L.y_unpacked.present ? 1 : 0) + (L.y_packed.present ? 1 : 0) +
                                                              (L.y_compact.present ? 1 : 0)}};
  if (why.empty()) {
    v.reason = "proves something: " + std::to_string(selected) + " selected rows, nonzero data";
  } else {
    std::string list;
    for (const std::string& w : why) list += (list.empty() ? "" : ", ") + w;
    v.stats["vacuous"] = why;
    if (options.allow_vacuous) {
      v.reason = "vacuous (allowed by --allow-vacuous): " + list;
    } else {
      v.verdict = Verdict::kFail;
      v.reason = "vacuous: " + list;
    }
  }
  checks.push_back(std::move(v));
  T.other_seconds += seconds_since(t_other);
  return checks;
}

}  // namespace ncert::certify
