// The JSON report (docs/cli.md "JSON report"): the report's shell, and one function per
// evidence type that lays out a check's `stats`. This is the only place a CheckResult becomes
// JSON. Keys keep the order docs/cli.md lists them in.
#include <cmath>
#include <type_traits>

#include "certify/report/format.h"
#include "certify/report/printable.h"
#include "certify/report/report.h"
#include "reference/float_bits.h"

namespace ncert::certify {

namespace {

Json number_or_text(double v) { return std::isfinite(v) ? Json(v) : Json(format_float(v)); }
Json ulps(std::uint64_t u) { return u == reference::kUlpInfinite ? Json("inf") : Json(u); }

Json distribution_json(const Distribution& d) {
  if (d.empty) return Json::object();
  return Json{{"max", number_or_text(d.max)}, {"p99.9", number_or_text(d.p999)}, {"p99", number_or_text(d.p99)},
              {"p95", number_or_text(d.p95)}, {"p90", number_or_text(d.p90)},    {"p50", number_or_text(d.p50)},
              {"min", number_or_text(d.min)}};
}

Json histogram_json(const Log2Histogram& h) {
  return Json{{"log2_min", h.log2_min}, {"log2_max", h.log2_max}, {"zero", h.zero},  {"below", h.below},
              {"counts", h.counts},     {"above", h.above},       {"other", h.other}};
}

Json grid_json(const FailureGrid& g) {
  Json cells = Json::array();
  for (Index r = 0; r < g.cell_rows; ++r) {
    const auto begin = g.counts.begin() + static_cast<std::ptrdiff_t>(r * g.cell_cols);
    cells.push_back(std::vector<Index>(begin, begin + static_cast<std::ptrdiff_t>(g.cell_cols)));
  }
  return Json{
      {"rows", g.rows}, {"cols", g.cols}, {"cell_rows", g.cell_rows}, {"cell_cols", g.cell_cols}, {"counts", cells}};
}

Json series_json(const PositionSeries& s) {
  Json kl = Json::array();
  for (double v : s.kl_max) kl.push_back(number_or_text(v));
  return Json{{"rows", s.rows},
              {"rows_per_point", s.rows_per_point},
              {"kl_ab_max", kl},
              {"max_abs", s.max_abs},
              {"top1_agree", s.top1_agree}};
}

Json cell(const std::optional<Location>& l) { return Json{{"row", l->row}, {"col", l->col}}; }

Json bound_stats_json(const BoundFigures& s) {
  Json j = Json{
      {"elements", s.elements},
      {"outside", s.outside},
      {"beyond_tier", s.beyond_tier},
      {"nonfinite", s.nonfinite},
      {"max_abs_error", s.max_abs_error},
      {"max_abs_error_at", s.max_abs_row >= 0 ? Json{{"row", s.max_abs_row}, {"col", s.max_abs_col}} : Json(nullptr)},
      {"max_error_over_bound", number_or_text(s.max_error_over_bound)},
      {"max_utilization", number_or_text(s.max_utilization)},
      {"single_valued", s.single_valued},
      {"mean_signed_error", s.mean_signed_error},
      {"mean_signed_error_over_bound", s.mean_signed_error_over_bound}};
  // "inf" stays for existing readers; the note says what it stands for.
  if (const std::string note = s.utilization_note(); !note.empty()) j["max_utilization_note"] = note;
  return j;
}

Json row_comparison_json(const RowComparison& x, Index row) {
  return Json{{"row", row},
              {"matched", true},
              {"bit_identical", x.bit_identical},
              {"max_abs", x.max_abs},
              {"max_abs_col", x.max_abs_col},
              {"max_ulp", ulps(x.max_ulp)},
              {"max_ulp_col", x.max_ulp_col},
              {"max_ulp_values", Json::array({number_or_text(x.max_ulp_a), number_or_text(x.max_ulp_b)})},
              {"max_ulp_across_zero", ulps_cross_zero(x.max_ulp_a, x.max_ulp_b)},
              {"mean_abs", x.mean_abs},
              {"rms_centered", x.rms_centered},
              {"argmax_a", x.argmax_a},
              {"argmax_b", x.argmax_b},
              {"top5_overlap", x.top5_overlap},
              {"top10_overlap", x.top10_overlap},
              {"kl_ab", number_or_text(x.kl_ab)},
              {"kl_ba", number_or_text(x.kl_ba)},
              {"jsd", number_or_text(x.jsd)},
              {"dp_token", number_or_text(x.dp_token)},
              {"rank_in_b", x.rank_in_b}};
}

Json top_json(const std::vector<TopEntry>& top, const std::vector<std::string>& text) {
  Json j = Json::array();
  for (std::size_t i = 0; i < top.size(); ++i) {
    Json x = Json{{"token", top[i].token}, {"logit", top[i].logit}, {"gap", top[i].gap}};
    if (i < text.size()) x["text"] = text[i];
    j.push_back(x);
  }
  return j;
}

// ---- one function per evidence type -------------------------------------------------------

Json evidence_json(const std::monostate&, const CheckResult&) { return Json::object(); }

Json evidence_json(const SchemaEvidence& e, const CheckResult&) {
  return Json{{"engine", e.engine},           {"build", e.build},     {"projections", e.projections},
              {"logits_runs", e.logits_runs}, {"tensors", e.tensors}, {"notes", e.notes}};
}

Json evidence_json(const NotEvaluatedEvidence&, const CheckResult&) { return Json{{"evaluated", false}}; }

Json evidence_json(const GeometryEvidence& e, const CheckResult&) {
  Json j = Json{
      {"rows", e.rows}, {"slots", e.slots},         {"slots_used", e.slots_used}, {"k", e.k},
      {"n", e.n},       {"in_stride", e.in_stride}, {"out_stride", e.out_stride}, {"request_rules", e.request_rules}};
  if (e.request_rules) {
    j["requests"] = e.requests;
    j["block_rows"] = e.block_rows;
    j["cap"] = e.cap;
  }
  if (e.guard != ErrorCode::kOk) {
    j["guard"] = std::string(error_name(e.guard));
    j["guard_code"] = static_cast<int>(e.guard);
  }
  return j;
}

Json evidence_json(const IdentityEvidence& e, const CheckResult& c) {
  Json j = Json{{"elements_compared", e.elements_compared},
                {"packed_vs_unpacked", e.packed_vs_unpacked},
                {"compact_vs_packed", e.compact_vs_packed},
                {"differ", e.differ},
                {"selected_rows", e.selected_rows}};
  if (c.first_failure) j["first"] = cell(c.first_failure);
  if (e.rows_differing > 0) {
    j["rows_differing"] = e.rows_differing;
    j["rows_explained"] = e.rows_explained;
    Json maps = Json::array();
    for (const SlotMapping& m : e.mappings) {
      maps.push_back(Json{{"kind", std::string(slot_misroute_name(m.kind))},
                          {"slot", m.slot},
                          {"row", m.row},
                          {"actual", m.actual},
                          {"others", m.others}});
    }
    j["slot_mapping"] = std::move(maps);
  }
  return j;
}

/// The declaration trials of bound's or variance's diagnosis, the declaration first; `fits`:
/// every sampled value inside its interval, or, for a trial, all but those it left to bound.
Json diagnosis_json(const std::vector<DeclarationTrial>& diagnosis) {
  Json trials = Json::array();
  for (std::size_t i = 0; i < diagnosis.size(); ++i) {
    const DeclarationTrial& t = diagnosis[i];
    const bool fits = t.sampled > 0 && t.inside + (i > 0 ? t.left : 0) == t.sampled;
    Json j = Json{{"declaration", t.declaration}, {"segment", t.segment}, {"effect", trial_effect_name(t.effect)},
                  {"sampled", t.sampled},         {"inside", t.inside},   {"fits", fits}};
    if (t.energy >= 0) j["energy"] = t.energy;
    if (t.left > 0) j["left_to_bound"] = t.left;
    if (t.far > 0) j["left_far_off_noise"] = t.far;
    if (i == 0 && t.lean != 0) j["lean"] = t.lean;
    trials.push_back(j);
  }
  return trials;
}

/// A location fit (signature's fit, bound's location) as JSON.
Json fit_json(const LocationFit& t) {
  Json j = Json{{"kind", std::string(fit_kind_name(t.kind))},
                {"output", t.output},
                {"row", t.row},
                {"slot", t.slot},
                {"col", t.col},
                {"group", t.group},
                {"k_begin", t.k_begin},
                {"k_end", t.k_end},
                {"columns", t.columns},
                {"value", number_or_text(t.value)},
                {"explained", t.explained},
                {"alternative_explained", t.alternative_explained},
                {"offset", t.offset},
                {"steps", number_or_text(t.steps)},
                {"scale_explained", t.scale_explained},
                {"other_col", t.other_col},
                {"exchanged", t.exchanged},
                {"with_epilogue", t.with_epilogue},
                {"col_begin", t.col_begin},
                {"col_end", t.col_end},
                {"scale_row", t.scale_row},
                {"pooled", t.pooled},
                {"chance_share", t.chance_share},
                {"fits", t.fits}};
  Json rows = Json::array();
  for (const FittedRow& w : t.rows) {
    rows.push_back(Json{{"row", w.row},
                        {"slot", w.slot},
                        {"value", number_or_text(w.value)},
                        {"group", w.group},
                        {"k_begin", w.k_begin},
                        {"k_end", w.k_end},
                        {"col", w.col},
                        {"offset", w.offset},
                        {"steps", number_or_text(w.steps)},
                        {"alike", w.alike},
                        {"alike_group", w.alike_group},
                        {"alike_value", number_or_text(w.alike_value)}});
  }
  j["rows"] = std::move(rows);
  return j;
}

Json evidence_json(const BoundEvidence& e, const CheckResult&) {
  Json per = Json::object();
  for (const OutputBound& o : e.outputs) {
    Json out = bound_stats_json(o.stats);
    out["error_over_bound_histogram"] = histogram_json(o.error_over_bound);
    if (!o.outside.counts.empty()) out["outside_grid"] = grid_json(o.outside);
    per[o.output] = out;
  }
  Json j = Json{{"outputs", per},
                {"weights", e.weights},
                {"ambiguous_weights", e.ambiguous_weights},
                {"accumulator", e.accumulator},
                {"u_eff", e.u_eff},
                {"lambda", e.lambda},
                {"tier", e.round_to_nearest ? "lambda*sqrt(K)*u*S" : "B/2 (not round-to-nearest)"},
                {"k", e.k},
                {"elements", e.elements},
                {"outside", e.outside},
                {"beyond_tier", e.beyond_tier},
                {"rows_outside", e.rows_outside},
                {"rows_held", e.rows_held},
                {"rows_values", e.rows_values},
                {"rows_dominant", e.rows_dominant},
                {"rows_named", e.rows_named},
                {"rows_elsewhere", e.rows_elsewhere}};
  if (e.first) {
    const reference::ElementRecord& f = e.first->element;
    j["first"] = Json{{"output", e.first->output},
                      {"row", f.row},
                      {"col", f.col},
                      {"slot", e.first->slot >= 0 ? Json(e.first->slot) : Json(nullptr)},
                      {"value", f.value},
                      {"reference", f.center},
                      {"bound", f.bound},
                      {"lo", f.accept.lo},
                      {"hi", f.accept.hi}};
  }
  if (!e.diagnosis.empty()) j["diagnosis"] = diagnosis_json(e.diagnosis);
  if (e.location) j["location"] = fit_json(*e.location);
  return j;
}

Json evidence_json(const WalkEvidence& e, const CheckResult& c) {
  Json per = Json::object();
  for (const WalkEvidence::Output& o : e.outputs) {
    per[o.output] = Json{{"compared", o.compared}, {"mismatches", o.mismatches}};
    if (o.row_min >= 0) {
      per[o.output]["rows"] = Json::array({o.row_min, o.row_max});
      per[o.output]["columns"] = Json::array({o.col_min, o.col_max});
    }
  }
  Json j = Json{{"k_walk", e.k_walk}, {"outputs", per}, {"compared", e.compared}, {"mismatches", e.mismatches}};
  if (c.first_failure) {
    j["first"] =
        Json{{"output", c.first_failure->object}, {"row", c.first_failure->row}, {"col", c.first_failure->col}};
  }
  if (!e.diagnosis.empty()) j["diagnosis"] = diagnosis_json(e.diagnosis);
  return j;
}

Json evidence_json(const BiasEvidence& e, const CheckResult&) {
  Json per = Json::object();
  for (const BiasOutput& o : e.outputs) {
    Json j{{"values", o.values},         {"excluded", o.excluded},     {"mean_residual_ulps", o.mean_ulps},
           {"shift_ulps", o.shift_ulps}, {"limit_ulps", o.limit_ulps}, {"one_sided", o.one_sided}};
    if (e.value_threshold > 0) {
      j["tested"] = o.tested;
      j["beyond"] = o.beyond;
      j["beyond_toward_zero"] = o.beyond_toward_zero;
      j["far"] = o.far;
      if (o.row_min >= 0) j["rows"] = Json::array({o.row_min, o.row_max});
      if (o.col_min >= 0) j["columns"] = Json::array({o.col_min, o.col_max});
      j["rows_held"] = o.rows_held;
      j["one_row"] = o.one_row;
      j["row_dominates"] = o.row_dominates;
      j["peak_z"] = o.peak_z ? number_or_text(*o.peak_z) : Json(nullptr);
      if (o.worst) {
        const BiasValue& w = *o.worst;
        j["worst"] = Json{{"row", w.row},
                          {"col", w.col},
                          {"z", number_or_text(w.z)},
                          {"residual_ulps", w.residual_ulps},
                          {"allowed_ulps", w.allowed_ulps},
                          {"stored", w.stored},
                          {"exact", w.exact}};
      }
    }
    per[o.output] = std::move(j);
  }
  return Json{{"alpha", e.alpha},
              {"accumulator_model", e.nearest ? "round-to-nearest: centred errors" : "directed: bias within B"},
              {"value_threshold", e.value_threshold > 0 ? Json(e.value_threshold) : Json(nullptr)},
              {"outputs", per}};
}

Json evidence_json(const SignatureEvidence& e, const CheckResult&) {
  auto findings = [](const std::vector<SignatureFinding>& v) {
    Json a = Json::array();
    for (const SignatureFinding& s : v) {
      a.push_back(Json{{"output", s.output},
                       {"col", s.col},
                       {"k_begin", s.k_begin},
                       {"k_end", s.k_end},
                       {"group", s.group >= 0 ? Json(s.group) : Json(nullptr)},
                       {"z", number_or_text(s.z)},
                       {"fit", number_or_text(s.fit)},
                       {"one_row", s.one_row}});
    }
    return a;
  };
  const Json strongest = findings(e.strongest);
  Json j = Json{{"alpha", e.alpha},
                {"tile", e.tile},
                {"ranges_per_column", e.ranges_per_column},
                {"candidates", e.candidates},
                {"threshold", e.threshold},
                {"significant", e.significant},
                {"significant_columns", e.significant_columns},
                {"columns_as_unpacked", e.columns_as_unpacked},
                {"columns_tested", e.columns_tested},
                {"columns_screened", e.columns_screened},
                {"columns_untested", e.columns_untested},
                {"screened_max", e.screened_max},
                {"strongest", strongest},
                {"others", findings(e.others)},
                {"range_columns", e.range_columns},
                {"z_histogram", histogram_json(e.z)}};
  if (e.zero_point) {
    const ZeroPointFinding& z = *e.zero_point;
    j["zero_point"] = Json{{"output", z.output},       {"col", z.col},
                           {"group", z.group},         {"k_begin", z.k_begin},
                           {"k_end", z.k_end},         {"shift", number_or_text(z.shift)},
                           {"explained", z.explained}, {"alternative_explained", z.alternative_explained}};
  }
  if (e.fit) j["fit"] = fit_json(*e.fit);
  return j;
}

Json evidence_json(const VarianceEvidence& e, const CheckResult&) {
  Json per = Json::object();
  for (const VarianceOutput& o : e.outputs) {
    Json& j = per[o.output] = Json{{"values", o.values}, {"ratio", number_or_text(o.ratio)}, {"limit", o.limit}};
    if (o.outside > 0) j["outside_bound"] = o.outside;
    if (o.lean_z) {
      j["centre"] = Json{{"z", *o.lean_z},
                         {"limit", o.lean_limit},
                         {"values", o.leaning},
                         {"toward_zero", o.toward_zero},
                         {"away_from_zero", o.away_from_zero}};
      if (o.spread_z) {
        j["centre"]["spread_z"] = *o.spread_z;
        j["centre"]["spread_limit"] = o.spread_limit;
      }
    }
  }
  Json j = Json{{"alpha", e.alpha}, {"accumulator", e.accumulator}, {"outputs", per}};
  if (!e.diagnosis.empty()) j["diagnosis"] = diagnosis_json(e.diagnosis);
  return j;
}

Json evidence_json(const QuantizeEvidence& e, const CheckResult& c) {
  Json j = Json{{"quantizer", e.quantizer},   {"rounding", e.rounding},  {"group", e.group},
                {"values", e.values},         {"excluded", e.excluded},  {"mismatched", e.mismatched},
                {"bad_scales", e.bad_scales}, {"tolerance", e.tolerance}};
  if (c.first_failure) {
    j["first"] = Json{{"row", c.first_failure->row},
                      {"col", c.first_failure->col},
                      {"x", e.x},
                      {"scale", e.scale},
                      {"zero_point", e.zero_point},
                      {"found", e.found},
                      {"lowest", e.lowest},
                      {"highest", e.highest}};
  }
  if (e.excluded > 0) j["first_nonfinite"] = Json{{"row", e.nonfinite_row}, {"col", e.nonfinite_col}};
  return j;
}

Json evidence_json(const UntouchedEvidence& e, const CheckResult& c) {
  Json j = Json::object();
  if (c.first_failure) {
    j["first"] = Json{{"row", c.first_failure->row}, {"col", c.first_failure->col}, {"padding", e.first_in_padding}};
  }
  j["elements_compared"] = e.elements_compared;
  j["changed"] = e.changed;
  return j;
}

Json evidence_json(const VacuityEvidence& e, const CheckResult&) {
  Json j = Json{{"selected_rows", e.selected_rows}, {"outputs", e.outputs}};
  if (!e.vacuous.empty()) j["vacuous"] = e.vacuous;
  return j;
}

Json evidence_json(const WitnessEvidence& e, const CheckResult&) {
  Json j =
      Json{{"tokens", e.tokens},     {"vocab", e.vocab}, {"error_source", e.error_source}, {"certified", e.certified},
           {"near_tie", e.near_tie}, {"tie", e.tie},     {"unbounded", e.unbounded},       {"failed", e.failed}};
  if (e.smallest_margin) {
    j["min_margin"] = e.smallest_margin->margin;
    j["min_margin_position"] = e.smallest_margin->position;
    j["min_margin_ulps"] = e.smallest_margin->margin_ulps;
    j["min_margin_dtype_ulps"] = e.smallest_margin->margin_dtype_ulps;
  }
  j["logits_dtype"] = std::string(dtype_name(e.logits_dtype));
  if (e.first_failure) {
    j["position"] = e.first_failure->position;
    j["token"] = e.first_failure->token;
  }
  j["margin_histogram"] = histogram_json(e.margin);
  j["margin_ulps_histogram"] = histogram_json(e.margin_ulps);
  if (!e.tightest.empty()) {
    Json tight = Json::array();
    for (const Witness& w : e.tightest) {
      tight.push_back(Json{{"position", w.position},
                           {"token", w.token},
                           {"logit", w.logit},
                           {"runner_up", w.runner_up},
                           {"margin", w.margin},
                           {"margin_ulps", w.margin_ulps},
                           {"margin_dtype_ulps", w.margin_dtype_ulps},
                           {"class", std::string(witness_class_name(w.cls))}});
    }
    j["tightest"] = tight;
  }
  return j;
}

Json evidence_json(const VerifyEvidence& e, const CheckResult&) {
  Json j = Json::object();
  if (e.position) j["position"] = *e.position;
  j["tokens"] = e.tokens;
  j["verified"] = e.verified;
  j["error_source"] = e.error_source;
  if (e.same_file) j["same_file"] = *e.same_file;
  return j;
}

Json evidence_json(const LogitsEvidence& e, const CheckResult&) {
  Json j = Json{{"rows_a", e.rows_a},
                {"rows_b", e.rows_b},
                {"compared", e.compared},
                {"matched", e.matched},
                {"unmatched", e.unmatched},
                {"divergence_row", e.divergence_row},
                {"prompts_equal", e.prompts_equal},
                {"vocab", e.vocab},
                {"policy", e.policy},
                {"bit_identical_rows", e.bit_identical_rows},
                {"nonfinite_rows", e.nonfinite_rows},
                {"max_ulp", ulps(e.max_ulp)},
                {"top1_agreement", e.top1_agreement},
                {"top1_agreement_stderr", e.top1_agreement_stderr},
                {"top5_overlap_mean", e.top5_overlap_mean},
                {"top10_overlap_mean", e.top10_overlap_mean},
                {"kl_mean", e.kl_mean},
                {"jsd_max", e.jsd_max},
                {"kl_ab", distribution_json(e.kl_ab)},
                {"max_abs_diff", distribution_json(e.max_abs_diff)},
                {"timing_seconds", e.timing_seconds},
                {"failing_rows", e.failing_rows}};
  // Element counts only mean something for policies judged element by element.
  if (e.element_policy) j["failing_elements"] = e.failing_elements;
  if (e.max_ulp_row >= 0) {
    j["max_ulp_at"] = Json{{"row", e.max_ulp_row},
                           {"col", e.max_ulp_col},
                           {"values", Json::array({number_or_text(e.max_ulp_a), number_or_text(e.max_ulp_b)})},
                           {"across_zero", ulps_cross_zero(e.max_ulp_a, e.max_ulp_b)}};
    // Between two logits of different types the f32 ulp count says little (a bf16 value is 2^16
    // f32 ulps from its neighbour): the absolute and relative difference there say how close.
    const double d = std::fabs(static_cast<double>(e.max_ulp_b) - static_cast<double>(e.max_ulp_a));
    j["max_ulp_at"]["abs_diff"] = number_or_text(d);
    j["max_ulp_at"]["rel_diff"] = number_or_text(relative_difference(e.max_ulp_a, e.max_ulp_b));
  }
  j["policy_source"] = e.policy_source;
  j["logits_dtypes"] = Json::array({std::string(dtype_name(e.dtype_a)), std::string(dtype_name(e.dtype_b))});
  if (!e.forks.empty()) {
    Json forks = Json::array();
    for (const Fork& f : e.forks) {
      forks.push_back(Json{{"class", std::string(fork_class_name(f.cls))},
                           {"position", f.position},
                           {"row", f.row},
                           {"token_a", f.token_a},
                           {"token_b", f.token_b},
                           {"delta_at_a", f.delta_a},
                           {"delta_at_b", f.delta_b},
                           {"envelope", Json{{"source", f.envelope_source}, {"at_a", f.env_a}, {"at_b", f.env_b}}},
                           {"why", f.why}});
    }
    j["forks"] = forks;
  }
  Json rows = Json::array();
  for (std::size_t t = 0; t < e.first_rows.size(); ++t)
    rows.push_back(row_comparison_json(e.first_rows[t], static_cast<Index>(t)));
  j["first_rows"] = rows;
  if (e.first_failure_row >= 0) j["first_failure_row"] = e.first_failure_row;
  if (e.series.rows > 0) j["series"] = series_json(e.series);
  return j;
}

Json evidence_json(const TensorEvidence& e, const CheckResult&) {
  Json j = Json{{"policy", e.policy}, {"dtype", std::string(dtype_name(e.dtype))}, {"shape", e.shape}};
  if (!e.note.empty()) j["note"] = e.note;
  if (!e.compared) return j;
  j["elements"] = e.elements;
  j["violations"] = e.violations;
  j["max_abs_diff"] = e.max_abs_diff;
  j["max_ulp"] = ulps(e.max_ulp);
  if (e.first_failure >= 0) j["first_failure"] = e.first_failure;
  return j;
}

Json evidence_json(const ForkEvidence& e, const CheckResult&) {
  const Fork& f = e.fork;
  Json j = Json{{"class", std::string(fork_class_name(f.cls))},
                {"position", f.position},
                {"row", f.row},
                {"token_a", f.token_a},
                {"token_b", f.token_b},
                {"gap_a", f.a.gap},
                {"gap_a_ulps", f.a.gap_ulps},
                {"gap_a_dtype_ulps", f.a.gap_dtype_ulps},
                {"gap_b", f.b.gap},
                {"gap_b_ulps", f.b.gap_ulps},
                {"gap_b_dtype_ulps", f.b.gap_dtype_ulps},
                {"rank_of_b_in_a", f.a.other_rank},
                {"logit_of_b_in_a", f.a.other_logit},
                {"rank_of_a_in_b", f.b.other_rank},
                {"logit_of_a_in_b", f.b.other_logit},
                {"delta_at_a", f.delta_a},
                {"delta_at_b", f.delta_b},
                {"envelope", Json{{"source", f.envelope_source}, {"at_a", f.env_a}, {"at_b", f.env_b}}},
                {"witness_a", witness_json(f.a.witness)},
                {"witness_b", witness_json(f.b.witness)},
                {"top5_a", top_json(f.a.top, e.top_a_text)},
                {"top5_b", top_json(f.b.top, e.top_b_text)},
                {"before", Json{{"rows", f.before.rows},
                                {"bit_identical", f.before.bit_identical},
                                {"max_abs", f.before.max_abs},
                                {"row_max_abs_p50", f.before.p50},
                                {"row_max_abs_p99", f.before.p99}}},
                {"context", f.context},
                {"why", f.why}};
  if (e.has_text) {
    j["context_text"] = e.context_text;
    j["text_a"] = e.text_a;
    j["text_b"] = e.text_b;
  }
  return j;
}

Json evidence_json(const NoForkEvidence& e, const CheckResult&) {
  return Json{{"class", "none"},
              {"position", -1},
              {"forks", 0},
              {"rows_a", e.rows_a},
              {"rows_b", e.rows_b},
              {"compared", e.compared},
              {"prompts_equal", e.prompts_equal}};
}

Json evidence_json(const SweepEvidence& e, const CheckResult& c) {
  Json j = Json::object();
  switch (c.kind) {
    case CheckKind::kIdentity:
      j = Json{{"identity_comparisons", e.identity_comparisons},
               {"rows_compared", e.rows_compared},
               {"width_cases", e.width_cases},
               {"width_rows", e.width_rows}};
      break;
    case CheckKind::kAlias:
      j = Json{
          {"alias_cases", e.alias_cases}, {"alias_comparisons", e.alias_comparisons}, {"alias_rows", e.alias_rows}};
      break;
    default: {
      Json covered = Json::array();
      for (ErrorCode code : e.guards_covered) covered.push_back(std::string(error_name(code)));
      j = Json{{"guards_covered", covered}, {"fallbacks", e.fallbacks}};
      break;
    }
  }
  j["cases"] = e.cases;
  j["failed"] = e.failed;
  if (!e.first_failure_key.empty()) j["first_failure_key"] = e.first_failure_key;
  return j;
}

Json evidence_json(const DemoDumpEvidence& e, const CheckResult&) {
  Json j = Json{
      {"file", e.file}, {"dump_verdict", e.dump_verdict}, {"checks", e.checks}, {"failed_checks", e.failed_checks}};
  if (!e.fault.empty()) {
    j["fault"] = e.fault;
    j["expected_check"] = e.expected.empty() ? std::string() : std::string(check_kind_name(e.expected.front()));
  }
  return j;
}

Json evidence_json(const DemoCompareEvidence& e, const CheckResult&) {
  return Json{{"files", e.files}, {"policy", e.policy}};
}

Json evidence_json(const DemoForkEvidence& e, const CheckResult&) {
  return Json{{"files", e.files},
              {"expected_class", e.expected_class},
              {"class", e.found_class},
              {"forks_verdict", e.forks_verdict}};
}

}  // namespace

Json witness_json(const Witness& w) {
  Json j = Json{{"row", w.row}, {"position", w.position}, {"token", w.token}};
  if (!w.ok) {
    j["failure"] = w.failure;
    return j;
  }
  j["logit"] = w.logit;
  j["runner_up"] = w.runner_up;
  j["runner_up_logit"] = w.runner_up_logit;
  j["margin"] = w.margin;
  j["margin_ulps"] = w.margin_ulps;
  j["margin_dtype_ulps"] = w.margin_dtype_ulps;
  j["logits_dtype"] = std::string(dtype_name(w.logits_dtype));
  j["ties"] = w.ties;
  j["class"] = std::string(witness_class_name(w.cls));
  if (w.cls == WitnessClass::kCertified || w.cls == WitnessClass::kNearTie) j["certified_gap"] = w.certified_gap;
  j["row_xxh3_128"] = w.row_xxh3;
  return j;
}

Json check_json(const CheckResult& c) {
  Json cj = Json::object();
  cj["id"] = c.id;
  cj["kind"] = std::string(check_kind_name(c.kind));
  cj["verdict"] = std::string(verdict_name(c.verdict));
  cj["reason"] = c.reason;
  cj["stats"] = std::visit([&](const auto& e) { return evidence_json(e, c); }, c.evidence);
  if (c.policy_match) {
    cj["policy_rule"] =
        Json{{"policy", c.policy_match->policy}, {"rule", c.policy_match->rule_text}, {"why", c.policy_match->why}};
  }
  if (!c.details.empty()) cj["details"] = c.details;
  return cj;
}

namespace {

/// The same JSON with every string and key valid UTF-8 (invalid bytes as \\xNN text), so a
/// name from a corrupt dump can never stop the JSON writer.
Json utf8_safe(Json j) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    return valid_utf8(s);
  }
  if (j.is_array()) {
    for (Json& e : j) e = utf8_safe(std::move(e));
    return j;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[valid_utf8(it.key())] = utf8_safe(std::move(it.value()));
    return out;
  }
  return j;
}

}  // namespace

Json Report::to_json() const {
  Json j = Json::object();
  j["tool"] = "ncert";
  j["version"] = std::string(ncert_version());
  j["command"] = command;
  Json in = Json::array();
  for (const InputInfo& i : inputs) in.push_back({{"path", i.path}, {"xxh3_128", i.xxh3_128}});
  j["inputs"] = in;
  j["verdict"] = std::string(verdict_name(verdict()));
  if (error) {
    j["error"] = {{"code", static_cast<int>(error->code())},
                  {"name", std::string(error_name(error->code()))},
                  {"message", error->message()}};
    if (!error->detail().empty()) j["error"]["detail"] = error->detail();
  }
  Json cs = Json::array();
  for (const CheckResult& c : checks) cs.push_back(check_json(c));
  j["checks"] = cs;
  const std::vector<CoverageRow> rows = coverage();
  if (!rows.empty()) {
    Json cov = Json::array();
    for (const CoverageRow& r : rows) {
      Json kinds = Json::object();
      for (const auto& [k, v] : r.kinds) kinds[std::string(check_kind_name(k))] = std::string(verdict_name(v));
      cov.push_back(Json{{"subject", r.subject}, {"checks", kinds}});
    }
    j["coverage"] = cov;
  }
  j["stats"] = stats;
  if (!entries.empty()) {
    Json list = Json::array();
    for (const ReportEntry& e : entries) {
      list.push_back(Json{{"id", e.id},
                          {"command", e.command},
                          {"verdict", std::string(verdict_name(e.report.verdict()))},
                          {"exit_code", e.report.exit_code()},
                          {"report", e.report.to_json()}});
    }
    j["entries"] = list;
  }
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return utf8_safe(std::move(j));
}

}  // namespace ncert::certify
