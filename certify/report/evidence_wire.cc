// The wire form of typed evidence (evidence_wire.h): one table per struct naming each member
// once under its wire key, walked by the encoder (Writer) and by the decoder (Reader); scalars,
// enumerations and containers are encoded and checked in one place each (encode, decode).
#include "certify/report/evidence_wire.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ncert::certify {

namespace {

/// T or const T: each table serves the encoder (const) and the decoder (not const).
template <typename T, typename U>
concept Is = std::same_as<std::remove_const_t<T>, U>;

// ---- the tables: every member of every struct, under its wire key ---------------------------
// f(key, member) for each member, in declaration order. A member left out of its table does not
// travel: tests/unit/certify/wire_test.cc sets every member and compares the typed values.

void fields(auto& f, Is<reference::Interval> auto& x) {
  f("lo", x.lo);
  f("hi", x.hi);
}

void fields(auto& f, Is<reference::ElementRecord> auto& x) {
  f("row", x.row);
  f("col", x.col);
  f("value", x.value);
  f("center", x.center);
  f("bound", x.bound);
  f("accept", x.accept);
}

void fields(auto& f, Is<Log2Histogram> auto& x) {
  f("log2_min", x.log2_min);
  f("log2_max", x.log2_max);
  f("zero", x.zero);
  f("below", x.below);
  f("above", x.above);
  f("other", x.other);
  f("counts", x.counts);
}

void fields(auto& f, Is<FailureGrid> auto& x) {
  f("rows", x.rows);
  f("cols", x.cols);
  f("cell_rows", x.cell_rows);
  f("cell_cols", x.cell_cols);
  f("counts", x.counts);
}

void fields(auto& f, Is<Witness> auto& x) {
  f("row", x.row);
  f("position", x.position);
  f("token", x.token);
  f("logit", x.logit);
  f("runner_up", x.runner_up);
  f("runner_up_logit", x.runner_up_logit);
  f("margin", x.margin);
  f("margin_ulps", x.margin_ulps);
  f("ties", x.ties);
  f("class", x.cls);
  f("certified_gap", x.certified_gap);
  f("row_xxh3", x.row_xxh3);
  f("ok", x.ok);
  f("failure", x.failure);
  f("logits_dtype", x.logits_dtype);
  f("margin_dtype_ulps", x.margin_dtype_ulps);
}

void fields(auto& f, Is<RowComparison> auto& x) {
  f("bit_identical", x.bit_identical);
  f("first_diff", x.first_diff);
  f("max_abs", x.max_abs);
  f("max_abs_col", x.max_abs_col);
  f("max_ulp", x.max_ulp);
  f("max_ulp_col", x.max_ulp_col);
  f("max_ulp_a", x.max_ulp_a);
  f("max_ulp_b", x.max_ulp_b);
  f("mean_abs", x.mean_abs);
  f("rms_centered", x.rms_centered);
  f("argmax_a", x.argmax_a);
  f("argmax_b", x.argmax_b);
  f("top5_overlap", x.top5_overlap);
  f("top10_overlap", x.top10_overlap);
  f("kl_ab", x.kl_ab);
  f("kl_ba", x.kl_ba);
  f("jsd", x.jsd);
  f("dp_token", x.dp_token);
  f("rank_in_b", x.rank_in_b);
  f("nonfinite", x.nonfinite);
  f("masked", x.masked);
  f("max_excess", x.max_excess);
  f("max_excess_col", x.max_excess_col);
  f("violations", x.violations);
}

void fields(auto& f, Is<TopEntry> auto& x) {
  f("token", x.token);
  f("logit", x.logit);
  f("gap", x.gap);
}

void fields(auto& f, Is<ForkSide> auto& x) {
  f("witness", x.witness);
  f("top", x.top);
  f("other", x.other);
  f("other_logit", x.other_logit);
  f("other_rank", x.other_rank);
  f("gap", x.gap);
  f("gap_ulps", x.gap_ulps);
  f("gap_dtype_ulps", x.gap_dtype_ulps);
  f("exact_tie", x.exact_tie);
  f("eps_own", x.eps_own);
  f("eps_other", x.eps_other);
}

void fields(auto& f, Is<BeforeFork> auto& x) {
  f("rows", x.rows);
  f("bit_identical", x.bit_identical);
  f("max_abs", x.max_abs);
  f("p50", x.p50);
  f("p99", x.p99);
}

void fields(auto& f, Is<Fork> auto& x) {
  f("row", x.row);
  f("position", x.position);
  f("token_a", x.token_a);
  f("token_b", x.token_b);
  f("a", x.a);
  f("b", x.b);
  f("delta_a", x.delta_a);
  f("delta_b", x.delta_b);
  f("env_a", x.env_a);
  f("env_b", x.env_b);
  f("has_envelope", x.has_envelope);
  f("envelope_source", x.envelope_source);
  f("before", x.before);
  f("context", x.context);
  f("class", x.cls);
  f("why", x.why);
}

void fields(auto&, Is<std::monostate> auto&) {}

void fields(auto& f, Is<SchemaEvidence> auto& x) {
  f("engine", x.engine);
  f("build", x.build);
  f("projections", x.projections);
  f("logits_runs", x.logits_runs);
  f("tensors", x.tensors);
  f("notes", x.notes);
}

void fields(auto&, Is<NotEvaluatedEvidence> auto&) {}

void fields(auto& f, Is<GeometryEvidence> auto& x) {
  f("rows", x.rows);
  f("slots", x.slots);
  f("slots_used", x.slots_used);
  f("k", x.k);
  f("n", x.n);
  f("in_stride", x.in_stride);
  f("out_stride", x.out_stride);
  f("request_rules", x.request_rules);
  f("requests", x.requests);
  f("block_rows", x.block_rows);
  f("cap", x.cap);
  f("guard", x.guard);
}

void fields(auto& f, Is<SlotMapping> auto& x) {
  f("kind", x.kind);
  f("slot", x.slot);
  f("row", x.row);
  f("actual", x.actual);
  f("others", x.others);
}

void fields(auto& f, Is<IdentityEvidence> auto& x) {
  f("elements_compared", x.elements_compared);
  f("packed_vs_unpacked", x.packed_vs_unpacked);
  f("compact_vs_packed", x.compact_vs_packed);
  f("differ", x.differ);
  f("selected_rows", x.selected_rows);
  f("rows_differing", x.rows_differing);
  f("rows_explained", x.rows_explained);
  f("mappings", x.mappings);
}

void fields(auto& f, Is<BoundFigures> auto& x) {
  f("elements", x.elements);
  f("outside", x.outside);
  f("beyond_tier", x.beyond_tier);
  f("nonfinite", x.nonfinite);
  f("single_valued", x.single_valued);
  f("max_abs_error", x.max_abs_error);
  f("max_abs_row", x.max_abs_row);
  f("max_abs_col", x.max_abs_col);
  f("max_error_over_bound", x.max_error_over_bound);
  f("max_utilization", x.max_utilization);
  f("mean_signed_error", x.mean_signed_error);
  f("mean_signed_error_over_bound", x.mean_signed_error_over_bound);
}

void fields(auto& f, Is<OutputBound> auto& x) {
  f("output", x.output);
  f("stats", x.stats);
  f("error_over_bound", x.error_over_bound);
  f("outside", x.outside);
}

void fields(auto& f, Is<BoundFailure> auto& x) {
  f("output", x.output);
  f("element", x.element);
  f("slot", x.slot);
}

void fields(auto& f, Is<DeclarationTrial> auto& x) {
  f("declaration", x.declaration);
  f("segment", x.segment);
  f("effect", x.effect);
  f("sampled", x.sampled);
  f("inside", x.inside);
  f("energy", x.energy);
  f("left", x.left);
  f("far", x.far);
  f("lean", x.lean);
}

void fields(auto& f, Is<BoundEvidence> auto& x) {
  f("outputs", x.outputs);
  f("weights", x.weights);
  f("ambiguous_weights", x.ambiguous_weights);
  f("accumulator", x.accumulator);
  f("u_eff", x.u_eff);
  f("lambda", x.lambda);
  f("round_to_nearest", x.round_to_nearest);
  f("k", x.k);
  f("elements", x.elements);
  f("outside", x.outside);
  f("beyond_tier", x.beyond_tier);
  f("rows_outside", x.rows_outside);
  f("rows_held", x.rows_held);
  f("rows_values", x.rows_values);
  f("rows_dominant", x.rows_dominant);
  f("rows_named", x.rows_named);
  f("rows_elsewhere", x.rows_elsewhere);
  f("first", x.first);
  f("output", x.output);
  f("diagnosis", x.diagnosis);
  f("location", x.location);
}

void fields(auto& f, Is<WalkEvidence::Output> auto& x) {
  f("output", x.output);
  f("compared", x.compared);
  f("mismatches", x.mismatches);
  f("row_min", x.row_min);
  f("row_max", x.row_max);
  f("col_min", x.col_min);
  f("col_max", x.col_max);
}

void fields(auto& f, Is<WalkEvidence> auto& x) {
  f("k_walk", x.k_walk);
  f("outputs", x.outputs);
  f("compared", x.compared);
  f("mismatches", x.mismatches);
  f("diagnosis", x.diagnosis);
}

void fields(auto& f, Is<BiasValue> auto& x) {
  f("row", x.row);
  f("col", x.col);
  f("z", x.z);
  f("residual_ulps", x.residual_ulps);
  f("allowed_ulps", x.allowed_ulps);
  f("stored", x.stored);
  f("exact", x.exact);
}

void fields(auto& f, Is<BiasOutput> auto& x) {
  f("output", x.output);
  f("values", x.values);
  f("excluded", x.excluded);
  f("mean_ulps", x.mean_ulps);
  f("shift_ulps", x.shift_ulps);
  f("limit_ulps", x.limit_ulps);
  f("one_sided", x.one_sided);
  f("tested", x.tested);
  f("beyond", x.beyond);
  f("beyond_toward_zero", x.beyond_toward_zero);
  f("far", x.far);
  f("row_min", x.row_min);
  f("row_max", x.row_max);
  f("col_min", x.col_min);
  f("col_max", x.col_max);
  f("rows_held", x.rows_held);
  f("one_row", x.one_row);
  f("row_dominates", x.row_dominates);
  f("peak_z", x.peak_z);
  f("worst", x.worst);
}

void fields(auto& f, Is<BiasEvidence> auto& x) {
  f("alpha", x.alpha);
  f("nearest", x.nearest);
  f("value_threshold", x.value_threshold);
  f("outputs", x.outputs);
}

void fields(auto& f, Is<SignatureFinding> auto& x) {
  f("output", x.output);
  f("col", x.col);
  f("k_begin", x.k_begin);
  f("k_end", x.k_end);
  f("group", x.group);
  f("z", x.z);
  f("fit", x.fit);
  f("one_row", x.one_row);
}

void fields(auto& f, Is<ZeroPointFinding> auto& x) {
  f("output", x.output);
  f("col", x.col);
  f("group", x.group);
  f("k_begin", x.k_begin);
  f("k_end", x.k_end);
  f("shift", x.shift);
  f("explained", x.explained);
  f("alternative_explained", x.alternative_explained);
}

void fields(auto& f, Is<FittedRow> auto& x) {
  f("row", x.row);
  f("slot", x.slot);
  f("value", x.value);
  f("group", x.group);
  f("k_begin", x.k_begin);
  f("k_end", x.k_end);
  f("col", x.col);
  f("offset", x.offset);
  f("steps", x.steps);
  f("alike", x.alike);
  f("alike_group", x.alike_group);
  f("alike_value", x.alike_value);
}

void fields(auto& f, Is<LocationFit> auto& x) {
  f("kind", x.kind);
  f("output", x.output);
  f("row", x.row);
  f("slot", x.slot);
  f("col", x.col);
  f("group", x.group);
  f("k_begin", x.k_begin);
  f("k_end", x.k_end);
  f("columns", x.columns);
  f("value", x.value);
  f("explained", x.explained);
  f("alternative_explained", x.alternative_explained);
  f("offset", x.offset);
  f("steps", x.steps);
  f("scale_explained", x.scale_explained);
  f("other_col", x.other_col);
  f("exchanged", x.exchanged);
  f("with_epilogue", x.with_epilogue);
  f("col_begin", x.col_begin);
  f("col_end", x.col_end);
  f("scale_row", x.scale_row);
  f("pooled", x.pooled);
  f("chance_share", x.chance_share);
  f("fits", x.fits);
  f("rows", x.rows);
}

void fields(auto& f, Is<SignatureEvidence> auto& x) {
  f("alpha", x.alpha);
  f("tile", x.tile);
  f("ranges_per_column", x.ranges_per_column);
  f("candidates", x.candidates);
  f("threshold", x.threshold);
  f("significant", x.significant);
  f("significant_columns", x.significant_columns);
  f("columns_as_unpacked", x.columns_as_unpacked);
  f("columns_tested", x.columns_tested);
  f("columns_screened", x.columns_screened);
  f("columns_untested", x.columns_untested);
  f("screened_max", x.screened_max);
  f("strongest", x.strongest);
  f("others", x.others);
  f("range_columns", x.range_columns);
  f("z", x.z);
  f("zero_point", x.zero_point);
  f("fit", x.fit);
}

void fields(auto& f, Is<VarianceOutput> auto& x) {
  f("output", x.output);
  f("values", x.values);
  f("outside", x.outside);
  f("ratio", x.ratio);
  f("limit", x.limit);
  f("lean_z", x.lean_z);
  f("lean_limit", x.lean_limit);
  f("leaning", x.leaning);
  f("toward_zero", x.toward_zero);
  f("away_from_zero", x.away_from_zero);
  f("spread_z", x.spread_z);
  f("spread_limit", x.spread_limit);
}

void fields(auto& f, Is<VarianceEvidence> auto& x) {
  f("alpha", x.alpha);
  f("accumulator", x.accumulator);
  f("outputs", x.outputs);
  f("diagnosis", x.diagnosis);
}

void fields(auto& f, Is<QuantizeEvidence> auto& x) {
  f("quantizer", x.quantizer);
  f("rounding", x.rounding);
  f("group", x.group);
  f("values", x.values);
  f("excluded", x.excluded);
  f("mismatched", x.mismatched);
  f("bad_scales", x.bad_scales);
  f("tolerance", x.tolerance);
  f("x", x.x);
  f("scale", x.scale);
  f("zero_point", x.zero_point);
  f("found", x.found);
  f("lowest", x.lowest);
  f("highest", x.highest);
  f("nonfinite_row", x.nonfinite_row);
  f("nonfinite_col", x.nonfinite_col);
}

void fields(auto& f, Is<UntouchedEvidence> auto& x) {
  f("elements_compared", x.elements_compared);
  f("changed", x.changed);
  f("first_in_padding", x.first_in_padding);
}

void fields(auto& f, Is<VacuityEvidence> auto& x) {
  f("selected_rows", x.selected_rows);
  f("outputs", x.outputs);
  f("vacuous", x.vacuous);
}

void fields(auto& f, Is<WitnessEvidence> auto& x) {
  f("tokens", x.tokens);
  f("vocab", x.vocab);
  f("error_source", x.error_source);
  f("certified", x.certified);
  f("near_tie", x.near_tie);
  f("tie", x.tie);
  f("unbounded", x.unbounded);
  f("failed", x.failed);
  f("smallest_margin", x.smallest_margin);
  f("first_failure", x.first_failure);
  f("margin", x.margin);
  f("margin_ulps", x.margin_ulps);
  f("logits_dtype", x.logits_dtype);
  f("tightest", x.tightest);
}

void fields(auto& f, Is<VerifyEvidence> auto& x) {
  f("position", x.position);
  f("tokens", x.tokens);
  f("verified", x.verified);
  f("error_source", x.error_source);
  f("same_file", x.same_file);
}

void fields(auto& f, Is<Distribution> auto& x) {
  f("empty", x.empty);
  f("max", x.max);
  f("p999", x.p999);
  f("p99", x.p99);
  f("p95", x.p95);
  f("p90", x.p90);
  f("p50", x.p50);
  f("min", x.min);
}

void fields(auto& f, Is<PositionSeries> auto& x) {
  f("rows", x.rows);
  f("rows_per_point", x.rows_per_point);
  f("kl_max", x.kl_max);
  f("max_abs", x.max_abs);
  f("top1_agree", x.top1_agree);
}

void fields(auto& f, Is<LogitsEvidence> auto& x) {
  f("rows_a", x.rows_a);
  f("rows_b", x.rows_b);
  f("compared", x.compared);
  f("matched", x.matched);
  f("unmatched", x.unmatched);
  f("divergence_row", x.divergence_row);
  f("prompts_equal", x.prompts_equal);
  f("vocab", x.vocab);
  f("policy", x.policy);
  f("bit_identical_rows", x.bit_identical_rows);
  f("nonfinite_rows", x.nonfinite_rows);
  f("max_ulp", x.max_ulp);
  f("max_ulp_row", x.max_ulp_row);
  f("max_ulp_col", x.max_ulp_col);
  f("max_ulp_a", x.max_ulp_a);
  f("max_ulp_b", x.max_ulp_b);
  f("top1_agreement", x.top1_agreement);
  f("top1_agreement_stderr", x.top1_agreement_stderr);
  f("top5_overlap_mean", x.top5_overlap_mean);
  f("top10_overlap_mean", x.top10_overlap_mean);
  f("kl_mean", x.kl_mean);
  f("jsd_max", x.jsd_max);
  f("kl_ab", x.kl_ab);
  f("max_abs_diff", x.max_abs_diff);
  f("timing_seconds", x.timing_seconds);
  f("first_rows", x.first_rows);
  f("first_failure_row", x.first_failure_row);
  f("failing_rows", x.failing_rows);
  f("failing_elements", x.failing_elements);
  f("element_policy", x.element_policy);
  f("series", x.series);
  f("policy_source", x.policy_source);
  f("dtype_a", x.dtype_a);
  f("dtype_b", x.dtype_b);
  f("forks", x.forks);
}

void fields(auto& f, Is<TensorEvidence> auto& x) {
  f("policy", x.policy);
  f("dtype", x.dtype);
  f("shape", x.shape);
  f("note", x.note);
  f("compared", x.compared);
  f("elements", x.elements);
  f("violations", x.violations);
  f("max_abs_diff", x.max_abs_diff);
  f("max_ulp", x.max_ulp);
  f("first_failure", x.first_failure);
}

void fields(auto& f, Is<ForkEvidence> auto& x) {
  f("fork", x.fork);
  f("has_text", x.has_text);
  f("context_text", x.context_text);
  f("text_a", x.text_a);
  f("text_b", x.text_b);
  f("top_a_text", x.top_a_text);
  f("top_b_text", x.top_b_text);
}

void fields(auto& f, Is<NoForkEvidence> auto& x) {
  f("rows_a", x.rows_a);
  f("rows_b", x.rows_b);
  f("compared", x.compared);
  f("prompts_equal", x.prompts_equal);
}

void fields(auto& f, Is<SweepEvidence> auto& x) {
  f("cases", x.cases);
  f("failed", x.failed);
  f("identity_comparisons", x.identity_comparisons);
  f("rows_compared", x.rows_compared);
  f("width_cases", x.width_cases);
  f("width_rows", x.width_rows);
  f("alias_cases", x.alias_cases);
  f("alias_comparisons", x.alias_comparisons);
  f("alias_rows", x.alias_rows);
  f("guards_covered", x.guards_covered);
  f("fallbacks", x.fallbacks);
  f("first_failure_key", x.first_failure_key);
}

void fields(auto& f, Is<DemoDumpEvidence> auto& x) {
  f("file", x.file);
  f("dump_verdict", x.dump_verdict);
  f("checks", x.checks);
  f("failed_checks", x.failed_checks);
  f("fault", x.fault);
  f("expected", x.expected);
}

void fields(auto& f, Is<DemoCompareEvidence> auto& x) {
  f("files", x.files);
  f("policy", x.policy);
}

void fields(auto& f, Is<DemoForkEvidence> auto& x) {
  f("files", x.files);
  f("expected_class", x.expected_class);
  f("found_class", x.found_class);
  f("forks_verdict", x.forks_verdict);
}

// ---- the alternatives' wire names ------------------------------------------------------------

template <typename T>
using Of = std::type_identity<T>;

constexpr std::string_view wire_name(Of<std::monostate>) { return "none"; }
constexpr std::string_view wire_name(Of<SchemaEvidence>) { return "schema"; }
constexpr std::string_view wire_name(Of<NotEvaluatedEvidence>) { return "not-evaluated"; }
constexpr std::string_view wire_name(Of<GeometryEvidence>) { return "geometry"; }
constexpr std::string_view wire_name(Of<IdentityEvidence>) { return "identity"; }
constexpr std::string_view wire_name(Of<BoundEvidence>) { return "bound"; }
constexpr std::string_view wire_name(Of<WalkEvidence>) { return "walk"; }
constexpr std::string_view wire_name(Of<BiasEvidence>) { return "bias"; }
constexpr std::string_view wire_name(Of<SignatureEvidence>) { return "signature"; }
constexpr std::string_view wire_name(Of<VarianceEvidence>) { return "variance"; }
constexpr std::string_view wire_name(Of<QuantizeEvidence>) { return "quantize"; }
constexpr std::string_view wire_name(Of<UntouchedEvidence>) { return "untouched"; }
constexpr std::string_view wire_name(Of<VacuityEvidence>) { return "vacuity"; }
constexpr std::string_view wire_name(Of<WitnessEvidence>) { return "witness"; }
constexpr std::string_view wire_name(Of<VerifyEvidence>) { return "verify"; }
constexpr std::string_view wire_name(Of<LogitsEvidence>) { return "logits"; }
constexpr std::string_view wire_name(Of<TensorEvidence>) { return "tensor"; }
constexpr std::string_view wire_name(Of<ForkEvidence>) { return "fork"; }
constexpr std::string_view wire_name(Of<NoForkEvidence>) { return "no-fork"; }
constexpr std::string_view wire_name(Of<SweepEvidence>) { return "sweep"; }
constexpr std::string_view wire_name(Of<DemoDumpEvidence>) { return "demo-dump"; }
constexpr std::string_view wire_name(Of<DemoCompareEvidence>) { return "demo-compare"; }
constexpr std::string_view wire_name(Of<DemoForkEvidence>) { return "demo-fork"; }

/// No two alternatives share a wire name.
template <std::size_t... I>
constexpr bool names_distinct(std::index_sequence<I...>) {
  const std::string_view names[] = {wire_name(Of<std::variant_alternative_t<I, Evidence>>{})...};
  for (std::size_t i = 0; i < sizeof...(I); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (names[i] == names[j]) return false;
    }
  }
  return true;
}
static_assert(names_distinct(std::make_index_sequence<std::variant_size_v<Evidence>>{}),
              "two Evidence alternatives share a wire name");

// ---- invariants the decoder enforces beyond the members' types --------------------------------
// Only what code indexes by: a malformed journal line must be a clean error, never a read out of
// bounds in a renderer. "" when the value holds.

std::string invariant(const auto&) { return ""; }

std::string invariant(const Log2Histogram& h) {
  constexpr int kLimit = 1100;  // beyond every double's binary exponent
  if (h.log2_min < -kLimit || h.log2_max > kLimit || h.log2_min > h.log2_max) {
    return "an axis 2^" + std::to_string(h.log2_min) + " .. 2^" + std::to_string(h.log2_max) +
           " that is empty or outside 2^-1100 .. 2^1100";
  }
  if (h.counts.size() != static_cast<std::size_t>(h.log2_max - h.log2_min)) {
    return std::to_string(h.counts.size()) + " counts for the " + std::to_string(h.log2_max - h.log2_min) +
           " bins of its axis";
  }
  return "";
}

std::string invariant(const FailureGrid& g) {
  if (g.rows < 0 || g.cols < 0 || g.cell_rows != std::min(g.rows, FailureGrid::kMaxCellRows) ||
      g.cell_cols != std::min(g.cols, FailureGrid::kMaxCellCols)) {
    return "cells " + std::to_string(g.cell_rows) + " x " + std::to_string(g.cell_cols) + " are not those of " +
           std::to_string(g.rows) + " x " + std::to_string(g.cols) + " values";
  }
  if (!g.counts.empty() && g.counts.size() != static_cast<std::size_t>(g.cell_rows * g.cell_cols)) {
    return std::to_string(g.counts.size()) + " counts for " + std::to_string(g.cell_rows * g.cell_cols) + " cells";
  }
  return "";
}

std::string invariant(const PositionSeries& s) {
  if (s.max_abs.size() != s.kl_max.size() || s.top1_agree.size() != s.kl_max.size()) {
    return "kl_max, max_abs and top1_agree of different lengths";
  }
  return "";
}

// ---- scalars and enumerations ------------------------------------------------------------------

Status bad(const std::string& at, const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, at + ": " + what);
}

template <typename T>
inline constexpr bool kIsVector = false;
template <typename T>
inline constexpr bool kIsVector<std::vector<T>> = true;
template <typename T>
inline constexpr bool kIsOptional = false;
template <typename T>
inline constexpr bool kIsOptional<std::optional<T>> = true;

/// "nan:0x" and `digits` hex digits: the bits of a NaN.
std::optional<std::uint64_t> nan_bits(const std::string& s, std::size_t digits) {
  if (s.size() != 6 + digits || s.compare(0, 6, "nan:0x") != 0) return std::nullopt;
  std::uint64_t bits = 0;
  for (std::size_t i = 6; i < s.size(); ++i) {
    const char c = s[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    bits = bits << 4 | static_cast<std::uint64_t>(d);
  }
  return bits;
}

std::string nan_text(std::uint64_t bits, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s = "nan:0x";
  for (int i = digits - 1; i >= 0; --i) s.push_back(kHex[(bits >> (4 * i)) & 0xF]);
  return s;
}

Json encode_real(double v) {
  if (std::isfinite(v)) return v;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return nan_text(std::bit_cast<std::uint64_t>(v), 16);
}

Json encode_real(float v) {
  if (std::isfinite(v)) return static_cast<double>(v);
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return nan_text(std::bit_cast<std::uint32_t>(v), 8);
}

Status decode_real(const Json& j, double& v, const std::string& at) {
  if (j.is_number()) {
    v = j.get<double>();
    return Status();
  }
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "inf" || s == "-inf") {
      v = s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      return Status();
    }
    if (const auto bits = nan_bits(s, 16); bits && std::isnan(std::bit_cast<double>(*bits))) {
      v = std::bit_cast<double>(*bits);
      return Status();
    }
  }
  return bad(at, "not a number");
}

Status decode_real(const Json& j, float& v, const std::string& at) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "inf" || s == "-inf") {
      v = s == "inf" ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
      return Status();
    }
    if (const auto bits = nan_bits(s, 8); bits && std::isnan(std::bit_cast<float>(static_cast<std::uint32_t>(*bits)))) {
      v = std::bit_cast<float>(static_cast<std::uint32_t>(*bits));
      return Status();
    }
    return bad(at, "not an f32 number");
  }
  if (!j.is_number()) return bad(at, "not an f32 number");
  const double d = j.get<double>();
  // Every f32 value is a double exactly: anything else did not come from an f32.
  if (!(std::fabs(d) <= std::numeric_limits<float>::max()) || static_cast<double>(static_cast<float>(d)) != d) {
    return bad(at, "not an f32 value");
  }
  v = static_cast<float>(d);
  return Status();
}

template <std::integral T>
Status decode_integer(const Json& j, T& v, const std::string& at) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (std::cmp_greater(u, std::numeric_limits<T>::max())) return bad(at, "integer out of range");
    v = static_cast<T>(u);
    return Status();
  }
  if (j.is_number_integer()) {
    const auto i = j.get<std::int64_t>();
    if (!std::in_range<T>(i)) return bad(at, "integer out of range");
    v = static_cast<T>(i);
    return Status();
  }
  return bad(at, "not an integer");
}

std::string_view name_of(WitnessClass c) { return witness_class_name(c); }
std::string_view name_of(ForkClass c) { return fork_class_name(c); }
std::string_view name_of(SlotMisroute m) { return slot_misroute_name(m); }
std::string_view name_of(FitKind k) { return fit_kind_name(k); }
std::string_view name_of(TrialEffect e) { return trial_effect_name(e); }
std::string_view name_of(DType t) { return dtype_name(t); }
std::string_view name_of(CheckKind k) { return check_kind_name(k); }

/// The enumerator of E (one byte wide) whose name is `name`.
template <typename E>
std::optional<E> by_name(std::string_view name) {
  static_assert(sizeof(E) == 1);
  for (int i = 0; i < 256; ++i) {
    const auto e = static_cast<E>(i);
    if (name_of(e) == name && name != "?") return e;
  }
  return std::nullopt;
}

std::optional<WitnessClass> parse(Of<WitnessClass>, std::string_view s) { return by_name<WitnessClass>(s); }
std::optional<ForkClass> parse(Of<ForkClass>, std::string_view s) { return by_name<ForkClass>(s); }
std::optional<SlotMisroute> parse(Of<SlotMisroute>, std::string_view s) { return by_name<SlotMisroute>(s); }
std::optional<FitKind> parse(Of<FitKind>, std::string_view s) { return by_name<FitKind>(s); }
std::optional<TrialEffect> parse(Of<TrialEffect>, std::string_view s) { return by_name<TrialEffect>(s); }
std::optional<DType> parse(Of<DType>, std::string_view s) { return parse_dtype(s); }
std::optional<CheckKind> parse(Of<CheckKind>, std::string_view s) { return parse_check_kind(s); }

// ---- values of any type --------------------------------------------------------------------------

template <typename T>
Json encode(const T& v);
template <typename T>
Status decode(const Json& j, T& v, const std::string& at);

struct Writer {
  Json& out;
  template <typename V>
  void operator()(const char* key, const V& value) {
    out[key] = encode(value);
  }
};

/// Reads the members of one object, remembering the first error and the keys it knew.
class Reader {
 public:
  Reader(const Json& object, const std::string& at) : object_(object), at_(at) {}

  template <typename V>
  void operator()(const char* key, V& value) {
    keys_.emplace_back(key);
    if (!status_.ok()) return;
    const std::string at = at_ + "." + key;
    const auto it = object_.find(key);
    status_ = it == object_.end() ? bad(at, "missing") : decode(*it, value, at);
  }

  /// The first member's error, or a key that names no member (`extra` aside).
  Status finish(std::string_view extra) const {
    if (!status_.ok()) return status_;
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      const bool known =
          (!extra.empty() && it.key() == extra) || std::find(keys_.begin(), keys_.end(), it.key()) != keys_.end();
      if (!known) return bad(at_ + "." + it.key(), "not a member");
    }
    return Status();
  }

 private:
  const Json& object_;
  const std::string& at_;
  std::vector<std::string_view> keys_;
  Status status_;
};

/// A struct's members from a JSON object (`extra`: one more key the caller reads).
template <typename T>
Status decode_members(const Json& j, T& v, const std::string& at, std::string_view extra = {}) {
  if (!j.is_object()) return bad(at, "not an object");
  Reader reader(j, at);
  fields(reader, v);
  NCERT_RETURN_IF_ERROR(reader.finish(extra));
  if (const std::string broken = invariant(v); !broken.empty()) return bad(at, broken);
  return Status();
}

template <typename T>
Json encode(const T& v) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_floating_point_v<T>) {
    return encode_real(v);
  } else if constexpr (std::is_same_v<T, ErrorCode>) {
    return static_cast<int>(v);
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(name_of(v));
  } else if constexpr (kIsVector<T>) {
    Json a = Json::array();
    for (const auto& x : v) a.push_back(encode(x));
    return a;
  } else if constexpr (kIsOptional<T>) {
    return v ? encode(*v) : Json(nullptr);
  } else {
    Json o = Json::object();
    Writer writer{o};
    fields(writer, v);
    return o;
  }
}

template <typename T>
Status decode(const Json& j, T& v, const std::string& at) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return bad(at, "not true or false");
    v = j.get<bool>();
    return Status();
  } else if constexpr (std::is_integral_v<T>) {
    return decode_integer(j, v, at);
  } else if constexpr (std::is_floating_point_v<T>) {
    return decode_real(j, v, at);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return bad(at, "not a string");
    v = j.get<std::string>();
    return Status();
  } else if constexpr (std::is_same_v<T, ErrorCode>) {
    int code = 0;
    NCERT_RETURN_IF_ERROR(decode_integer(j, code, at));
    const auto c = static_cast<ErrorCode>(code);
    if (c != ErrorCode::kOk && error_name(c) == "unknown-code") return bad(at, "unknown error code " + j.dump());
    v = c;
    return Status();
  } else if constexpr (std::is_enum_v<T>) {
    if (!j.is_string()) return bad(at, "not a name");
    const auto e = parse(Of<T>{}, j.get_ref<const std::string&>());
    if (!e) return bad(at, "unknown name " + j.dump());
    v = *e;
    return Status();
  } else if constexpr (kIsVector<T>) {
    if (!j.is_array()) return bad(at, "not a list");
    v.clear();
    v.reserve(j.size());
    for (std::size_t i = 0; i < j.size(); ++i) {
      typename T::value_type x{};
      NCERT_RETURN_IF_ERROR(decode(j[i], x, at + "[" + std::to_string(i) + "]"));
      v.push_back(std::move(x));
    }
    return Status();
  } else if constexpr (kIsOptional<T>) {
    if (j.is_null()) {
      v.reset();
      return Status();
    }
    typename T::value_type x{};
    NCERT_RETURN_IF_ERROR(decode(j, x, at));
    v = std::move(x);
    return Status();
  } else {
    return decode_members(j, v, at);
  }
}

/// The alternative named `type`, read from `j` (whose "type" member names it).
template <std::size_t... I>
Result<Evidence> decode_alternative(const std::string& type, const Json& j, std::index_sequence<I...>) {
  Result<Evidence> out = bad("evidence.type", "unknown evidence type " + Json(type).dump());
  const auto one = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    using T = std::variant_alternative_t<K, Evidence>;
    if (type != wire_name(Of<T>{})) return;
    T v{};
    const Status s = decode_members(j, v, "evidence", "type");
    out = s.ok() ? Result<Evidence>(Evidence(std::in_place_index<K>, std::move(v))) : Result<Evidence>(s);
  };
  (one(std::integral_constant<std::size_t, I>{}), ...);
  return out;
}

}  // namespace

Json evidence_to_wire(const Evidence& evidence) {
  return std::visit(
      [](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        Json j = Json{{"type", std::string(wire_name(Of<T>{}))}};
        Writer writer{j};
        fields(writer, e);
        return j;
      },
      evidence);
}

Result<Evidence> evidence_from_wire(const Json& wire) {
  if (!wire.is_object()) return bad("evidence", "not an object");
  const auto type = wire.find("type");
  if (type == wire.end() || !type->is_string()) return bad("evidence.type", "missing, or not a string");
  return decode_alternative(type->get<std::string>(), wire, std::make_index_sequence<std::variant_size_v<Evidence>>{});
}

std::string_view evidence_type_name(const Evidence& evidence) {
  return std::visit([](const auto& e) { return wire_name(Of<std::decay_t<decltype(e)>>{}); }, evidence);
}

}  // namespace ncert::certify
