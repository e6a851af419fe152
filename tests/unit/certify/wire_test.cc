// Results on the wire (certify/report/wire.h, evidence_wire.h): every alternative of Evidence,
// with every member set, comes back from JSON text as the same typed value and the same bits
// (signed zeros, infinities, NaN payloads); every member of every aggregate has its wire key; a
// whole report renders byte-identically in text, JSON, HTML and JUnit after the round trip; and
// malformed wire JSON is a kInvalidArgument error naming the member, never a crash.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "certify/report/evidence_wire.h"
#include "certify/report/render_html.h"
#include "certify/report/render_junit.h"
#include "certify/report/wire.h"
#include "reference/float_bits.h"

namespace ncert::certify {
namespace {

// ---- one sample per alternative, every member away from its default -----------------------------

template <typename T>
using Of = std::type_identity<T>;

Log2Histogram histogram(int lo, int hi, Index seed) {
  Log2Histogram h(lo, hi);
  h.zero = seed;
  h.below = seed + 1;
  h.above = seed + 2;
  h.other = seed + 3;
  for (std::size_t i = 0; i < h.counts.size(); ++i) h.counts[i] = static_cast<Index>(i % 5) * seed;
  return h;
}

Witness witness(std::int32_t token, bool ok) {
  Witness w;
  w.row = token + 1;
  w.position = 1000 + token;
  w.token = token;
  w.logit = 12.5f + static_cast<float>(token);
  w.runner_up = token + 7;
  w.runner_up_logit = 12.25f;
  w.margin = 0.25 + token;
  w.margin_ulps = 262144.0;
  w.ties = 2;
  w.cls = token % 2 ? WitnessClass::kNearTie : WitnessClass::kCertified;
  w.certified_gap = 0.125;
  w.row_xxh3 = "0123456789abcdef0123456789abcdef";
  w.ok = ok;
  w.failure = ok ? "" : "token " + std::to_string(token) + " is not the row's maximum";
  w.logits_dtype = DType::kBf16;
  w.margin_dtype_ulps = 4.0;
  return w;
}

RowComparison row_comparison(Index seed) {
  RowComparison x;
  x.bit_identical = false;
  x.first_diff = seed;
  x.max_abs = 0.5 * static_cast<double>(seed + 1);
  x.max_abs_col = seed + 2;
  x.max_ulp = seed == 0 ? reference::kUlpInfinite : 17;
  x.max_ulp_col = seed + 3;
  x.max_ulp_a = -0.0f;  // a signed zero: the wire keeps its sign
  x.max_ulp_b = 1e-3f;
  x.mean_abs = 1e-4;
  x.rms_centered = 2e-4;
  x.argmax_a = 5;
  x.argmax_b = 6;
  x.top5_overlap = 0.8;
  x.top10_overlap = 0.9;
  x.kl_ab = std::numeric_limits<double>::infinity();
  x.kl_ba = 3e-7;
  x.jsd = 1e-7;
  x.dp_token = -0.01;
  x.rank_in_b = 2;
  x.nonfinite = true;
  x.masked = true;
  x.max_excess = 1e-5;
  x.max_excess_col = 9;
  x.violations = 4;
  return x;
}

ForkSide fork_side(std::int32_t own, std::int32_t other) {
  ForkSide s;
  s.witness = witness(own, true);
  s.top = {{own, 3.5f, 0}, {other, 3.25f, 0.25}, {other + 1, -1.0f, 4.5}};
  s.other = other;
  s.other_logit = 3.25f;
  s.other_rank = 2;
  s.gap = 0.25;
  s.gap_ulps = 1048576;
  s.gap_dtype_ulps = 16;
  s.exact_tie = true;
  s.eps_own = 1e-6;
  s.eps_other = 2e-6;
  return s;
}

Evidence sample(Of<std::monostate>) { return std::monostate{}; }

Evidence sample(Of<SchemaEvidence>) { return SchemaEvidence{"engine-x", "build 7", 3, 2, 5, 1}; }

Evidence sample(Of<NotEvaluatedEvidence>) { return NotEvaluatedEvidence{}; }

Evidence sample(Of<GeometryEvidence>) {
  return GeometryEvidence{17, 24, 20, 5120, 4096, 5184, 4160, true, 3, 8, 12, ErrorCode::kGuardCapExceeded};
}

Evidence sample(Of<IdentityEvidence>) {
  IdentityEvidence e{1000, 3, 2, 5, 17, 4, 3, {}};
  e.mappings = {{SlotMisroute::kGathered, 3, 6, 7, 0},
                {SlotMisroute::kScattered, 4, 7, 2, 1},
                {SlotMisroute::kUnwritten, 5, 9, -1, 0},
                {SlotMisroute::kCompact, 6, 11, 12, 0}};
  return e;
}

Evidence sample(Of<BoundEvidence>) {
  BoundEvidence e;
  OutputBound packed;
  packed.output = "y_packed";
  packed.stats.elements = 69632;
  packed.stats.outside = 3;
  packed.stats.beyond_tier = 2;
  packed.stats.nonfinite = 1;
  packed.stats.single_valued = 60000;
  packed.stats.max_abs_error = 0x1p-10;
  packed.stats.max_abs_row = 4;
  packed.stats.max_abs_col = 99;
  packed.stats.max_error_over_bound = 1.75;
  packed.stats.max_utilization = std::numeric_limits<double>::infinity();
  packed.stats.mean_signed_error = -1e-9;
  packed.stats.mean_signed_error_over_bound = 0.015625;
  packed.error_over_bound = histogram(OutputBound::kErrorOverBoundLog2Min, OutputBound::kErrorOverBoundLog2Max, 7);
  packed.outside = FailureGrid(100, 1000);
  packed.outside.counts.assign(static_cast<std::size_t>(packed.outside.cell_rows * packed.outside.cell_cols), 0);
  packed.outside.counts[5] = 2;
  packed.outside.counts[2047] = 1;
  OutputBound compact = packed;
  compact.output = "y_compact";
  compact.stats.outside = 0;
  compact.outside = FailureGrid(3, 5);  // nothing outside: no cells
  e.outputs = {packed, compact};
  e.weights = {"gate [0,2048): af4 exact: s*q + b exactly", "up [2048,4096): bf16 weights, exact"};
  e.ambiguous_weights = 2;
  e.accumulator = "f32-pairwise";
  e.u_eff = 0x1p-24;
  e.lambda = 10;
  e.round_to_nearest = false;
  e.k = 5120;
  e.elements = 139264;
  e.outside = 3;
  e.beyond_tier = 2;
  e.rows_outside = 2;
  e.rows_held = 40;
  e.rows_values = 3;
  e.rows_named = {4, 37};
  e.rows_elsewhere = true;
  e.first = BoundFailure{"y_packed", {4, 99, 1.5f, 1.25, 0.125, {1.0f, 1.375f}}, 5};
  e.output = DType::kF32;
  e.diagnosis = {{"as declared", "", TrialEffect::kMovesCentres, 2048, 310, 41.5},
                 {"dequant = output", "kv", TrialEffect::kMovesCentres, 2048, 2046, 0.0125, 2},
                 {"accumulator = matrix-unit", "", TrialEffect::kWidensBound, 2048, 2048, 38.0},
                 {"output_rounding = rz", "", TrialEffect::kMovesRounding, 2048, 1990, 41.5}};
  return e;
}

Evidence sample(Of<WalkEvidence>) {
  return WalkEvidence{"split:4",
                      {{"y_unpacked", 100, 0}, {"y_packed", 100, 3}},
                      200,
                      3,
                      {{"as declared", "", TrialEffect::kMovesCentres, 1536, 270},
                       {"dequant_op = sub-mul", "w4", TrialEffect::kMovesCentres, 1536, 1536}}};
}

Evidence sample(Of<BiasEvidence>) {
  return BiasEvidence{
      1e-6,
      false,
      8.5,
      {{"y_packed", 69632, 12,    -0.03, 0.5,
        0.25,       true,  69644, 7,     6,
        1,          3,     3,     88,    1234,
        16,         true,  true,  14.25, BiasValue{3, 1234, 12.5, -0.875, 0.625, 1.2265625, 1.2329101562500001}},
       {"y_compact", 5, 1, 0.1, 0, 2, false, 0, 0, 0, 0, -1, -1, -1, -1, 5, false, false, std::nullopt, std::nullopt}}};
}

Evidence sample(Of<SignatureEvidence>) {
  SignatureEvidence e;
  e.alpha = 1e-9;
  e.tile = 64;
  e.ranges_per_column = 159;
  e.candidates = 7860960;
  e.threshold = 8.79;
  e.significant = 2;
  e.significant_columns = 1;
  e.columns_as_unpacked = 32960;
  e.columns_tested = 32958;
  e.columns_screened = 16479;
  e.columns_untested = 3;
  e.screened_max = 4.75;
  e.strongest = {{"y_packed", 1234, 1088, 1152, 17, 41.5, 0.021},
                 {"y_unpacked", 88, 1024, 1280, -1, 9.1, -0.998, true}};
  e.others = {{"y_unpacked", 88, 1024, 1280, -1, 9.1, -0.998, true}};
  e.range_columns = 8;
  e.z.add(0.5);
  e.z.add(41.5);
  e.z.add(-1.0);
  e.zero_point = ZeroPointFinding{"y_unpacked", 1234, 17, 1088, 1152, 1.0021, 0.9993, 0.2051};
  e.fit =
      LocationFit{FitKind::kGroupOffset,
                  "y_packed",
                  5,
                  3,
                  1234,
                  17,
                  1088,
                  1152,
                  64,
                  0.0021,
                  0.998,
                  0.25,
                  true,
                  -1.0021,
                  0.5,
                  7,
                  true,
                  true,
                  300,
                  428,
                  2,
                  true,
                  0.1875,
                  2112,
                  {{5, 3, 0.0226, 2, 128, 192, -1, true, -1.0021, true, 2, 1.0177}, {12, 9, 0.998, -1, 0, 1024, 88}}};
  return e;
}

Evidence sample(Of<VarianceEvidence>) {
  return VarianceEvidence{1e-9,
                          "f32-rn",
                          {{"y_unpacked", 527360, 2, 3.25, 1.151, -25.5, 6.93, 527000, 410000, 116000, -14.1, 6.95},
                           {"y_packed", 4, 0, 0.001, 14.2, std::nullopt, 0, 0, 0, 0, std::nullopt, 0}},
                          {{"as declared", "", TrialEffect::kMovesCentres, 2048, 2048, 30.2},
                           {"x rounded to f16 before the kernel", "", TrialEffect::kMovesCentres, 2048, 2048, 0.0021}}};
}

Evidence sample(Of<QuantizeEvidence>) {
  return QuantizeEvidence{"int8", "rna", 32, 4096, 2, 3, 1, 0x1p-22, 1.5, 0.0125, 3, 119, 120, 121};
}
Evidence sample(Of<UntouchedEvidence>) { return UntouchedEvidence{4096, 3, true}; }

Evidence sample(Of<VacuityEvidence>) { return VacuityEvidence{4, 2, {"no selected rows", "no outputs"}}; }

Evidence sample(Of<WitnessEvidence>) {
  WitnessEvidence e;
  e.tokens = 64;
  e.vocab = 151936;
  e.error_source = "model: lm_head reference";
  e.certified = 60;
  e.near_tie = 1;
  e.tie = 1;
  e.unbounded = 1;
  e.failed = 1;
  e.smallest_margin = witness(3, true);
  e.first_failure = witness(8, false);
  e.margin = histogram(-30, 10, 3);
  e.margin_ulps = histogram(-1, 40, 4);
  e.logits_dtype = DType::kF16;
  e.tightest = {witness(3, true), witness(4, true), witness(5, true)};
  return e;
}

Evidence sample(Of<VerifyEvidence>) { return VerifyEvidence{42, 100, 41, "model", false}; }

Evidence sample(Of<LogitsEvidence>) {
  LogitsEvidence e;
  e.rows_a = 130;
  e.rows_b = 129;
  e.compared = 129;
  e.matched = 7;
  e.unmatched = 122;
  e.divergence_row = 7;
  e.prompts_equal = false;
  e.vocab = 151936;
  e.policy = "ulp:4";
  e.bit_identical_rows = 2;
  e.nonfinite_rows = 1;
  e.max_ulp = 1u << 30;
  e.max_ulp_row = 3;
  e.max_ulp_col = 11;
  e.max_ulp_a = -0.0f;
  e.max_ulp_b = 2e-3f;
  e.top1_agreement = 6.0 / 7;
  e.top1_agreement_stderr = 0.13;
  e.top5_overlap_mean = 0.9;
  e.top10_overlap_mean = 0.95;
  e.kl_mean = 1e-5;
  e.jsd_max = 2e-6;
  e.kl_ab = Distribution{false, 4e-5, 3e-5, 2e-5, 1e-5, 9e-6, 5e-6, 0};
  e.max_abs_diff = Distribution{false, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 1e-9};
  e.timing_seconds = 0.75;
  e.first_rows = {row_comparison(0), row_comparison(1)};
  e.first_failure_row = 3;
  e.failing_rows = 2;
  e.failing_elements = 40;
  e.element_policy = true;
  e.series.rows = 7;
  e.series.rows_per_point = 2;
  e.series.kl_max = {1e-6, std::numeric_limits<double>::infinity(), 0, 2e-3};
  e.series.max_abs = {0.5, 1.5, 0, 0.25};
  e.series.top1_agree = {2, 1, 2, 1};
  e.policy_source = "default: A's logits are f32, B's bf16";
  e.dtype_a = DType::kF32;
  e.dtype_b = DType::kBf16;
  Fork f;
  f.row = 3;
  f.position = 9;
  f.token_a = 4;
  f.token_b = 5;
  f.a = fork_side(4, 5);
  f.b = fork_side(5, 4);
  f.cls = ForkClass::kTie;
  f.why = "B's row holds tokens 4 and 5 as bit-identical maxima";
  e.forks = {f};
  return e;
}

Evidence sample(Of<TensorEvidence>) {
  return TensorEvidence{"abs:1e-3",
                        DType::kBf16,
                        {2, 16, 128},
                        "bf16 tensors: ulp needs f32",
                        true,
                        4096,
                        7,
                        0.0625,
                        reference::kUlpInfinite,
                        33};
}

Evidence sample(Of<ForkEvidence>) {
  ForkEvidence e;
  Fork& f = e.fork;
  f.row = 12;
  f.position = 140;
  f.token_a = 101;
  f.token_b = 202;
  f.a = fork_side(101, 202);
  f.b = fork_side(202, 101);
  f.delta_a = 1e-3;
  f.delta_b = 2e-3;
  f.env_a = 0.01;
  f.env_b = 0.02;
  f.has_envelope = true;
  f.envelope_source = "observed: |d| before the fork";
  f.before = BeforeFork{12, 3, 0.004, 0.001, 0.003};
  f.context = {5, 6, 7, 8};
  f.cls = ForkClass::kUnexplained;
  f.why = "the gap exceeds both envelopes";
  e.has_text = true;
  e.context_text = " the quick";
  e.text_a = " brown";
  e.text_b = " red";
  e.top_a_text = {" brown", " red", " fox"};
  e.top_b_text = {" red", " brown", " fox"};
  return e;
}

Evidence sample(Of<NoForkEvidence>) { return NoForkEvidence{10, 12, 10, false}; }

Evidence sample(Of<SweepEvidence>) {
  return SweepEvidence{50,  2,
                       40,  400,
                       6,   60,
                       5,   10,
                       100, {ErrorCode::kGuardCapExceeded, ErrorCode::kGuardNotPrefix},
                       3,   "identity/width-17"};
}

Evidence sample(Of<DemoDumpEvidence>) {
  return DemoDumpEvidence{"bad-walk.h5",          "FAIL",       30,
                          {"projections/a/walk"}, "walk-order", {CheckKind::kWalk, CheckKind::kBound}};
}

Evidence sample(Of<DemoCompareEvidence>) { return DemoCompareEvidence{{"logits-a.h5", "logits-b.h5"}, "ulp:4"}; }

Evidence sample(Of<DemoForkEvidence>) {
  return DemoForkEvidence{{"fork-a.h5", "fork-b.h5"}, "near-tie", "near-tie", "PASS"};
}

/// f(Of<T>{}) for every alternative T of Evidence, by index: a new alternative is visited too.
template <std::size_t I = 0>
void for_each_alternative(auto&& f) {
  if constexpr (I < std::variant_size_v<Evidence>) {
    f(Of<std::variant_alternative_t<I, Evidence>>{});
    for_each_alternative<I + 1>(f);
  }
}

/// Every alternative's sample, in variant order.
std::vector<Evidence> all_samples() {
  std::vector<Evidence> out;
  for_each_alternative([&](auto of) {
    static_assert(
        requires { sample(of); }, "an Evidence alternative without a sample in wire_test.cc");
    out.push_back(sample(of));
  });
  return out;
}

Json through_text(const Json& j) { return Json::parse(j.dump()); }

TEST(EvidenceWire, EveryAlternativeComesBackAsTheSameTypedValueAndBits) {
  std::set<std::string_view> names;
  for_each_alternative([&](auto of) {
    using T = typename decltype(of)::type;
    const Evidence original = sample(of);
    ASSERT_TRUE(std::holds_alternative<T>(original));
    SCOPED_TRACE(std::string(evidence_type_name(original)));
    if constexpr (!std::is_empty_v<T>) {
      EXPECT_FALSE(std::get<T>(original) == T{}) << "the sample is all defaults";
    }
    const Json wire = through_text(evidence_to_wire(original));
    EXPECT_EQ(wire.at("type"), std::string(evidence_type_name(original)));
    const Result<Evidence> back = evidence_from_wire(wire);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    ASSERT_TRUE(std::holds_alternative<T>(*back));
    EXPECT_TRUE(std::get<T>(*back) == std::get<T>(original));
    // == does not see a zero's sign or a NaN's payload: the wire form does.
    EXPECT_EQ(evidence_to_wire(*back).dump(), wire.dump());
    names.insert(evidence_type_name(original));
  });
  EXPECT_EQ(names.size(), std::variant_size_v<Evidence>) << "two alternatives share a wire name";
}

// ---- every member has its wire key --------------------------------------------------------------

/// Converts to anything: T{Any, Any, ...} compiles for as many Any as T has members (aggregates).
struct Any {
  template <typename T>
  operator T() const {  // NOLINT: implicit by design; only ever named in unevaluated contexts
    return T{};
  }
};

template <typename T, typename... A>
constexpr std::size_t member_count() {
  if constexpr (requires { T{A{}..., Any{}}; }) {
    return member_count<T, A..., Any>();
  } else {
    return sizeof...(A);
  }
}

TEST(EvidenceWire, EveryMemberOfEveryAggregateHasAWireKey) {
  // A member added to a struct but not to its table in evidence_wire.cc would not travel.
  for_each_alternative([&](auto of) {
    using T = typename decltype(of)::type;
    if constexpr (std::is_aggregate_v<T>) {
      const Json wire = evidence_to_wire(sample(of));
      EXPECT_EQ(wire.size() - 1, member_count<T>()) << evidence_type_name(sample(of));
    }
  });
  // The nested records, found in the samples' wire forms.
  const Json fork = evidence_to_wire(sample(Of<ForkEvidence>{})).at("fork");
  EXPECT_EQ(fork.size(), member_count<Fork>());
  EXPECT_EQ(fork.at("a").size(), member_count<ForkSide>());
  EXPECT_EQ(fork.at("a").at("witness").size(), member_count<Witness>());
  EXPECT_EQ(fork.at("a").at("top").at(0).size(), member_count<TopEntry>());
  EXPECT_EQ(fork.at("before").size(), member_count<BeforeFork>());
  const Json bound = evidence_to_wire(sample(Of<BoundEvidence>{}));
  EXPECT_EQ(bound.at("outputs").at(0).size(), member_count<OutputBound>());
  EXPECT_EQ(bound.at("first").size(), member_count<BoundFailure>());
  EXPECT_EQ(bound.at("first").at("element").size(), member_count<reference::ElementRecord>());
  EXPECT_EQ(bound.at("first").at("element").at("accept").size(), member_count<reference::Interval>());
  const Json logits = evidence_to_wire(sample(Of<LogitsEvidence>{}));
  EXPECT_EQ(logits.at("first_rows").at(0).size(), member_count<RowComparison>());
  EXPECT_EQ(logits.at("kl_ab").size(), member_count<Distribution>());
  EXPECT_EQ(logits.at("series").size(), member_count<PositionSeries>());
  EXPECT_EQ(evidence_to_wire(sample(Of<WalkEvidence>{})).at("outputs").at(0).size(),
            member_count<WalkEvidence::Output>());
  EXPECT_EQ(evidence_to_wire(sample(Of<BiasEvidence>{})).at("outputs").at(0).size(), member_count<BiasOutput>());
  EXPECT_EQ(evidence_to_wire(sample(Of<BiasEvidence>{})).at("outputs").at(0).at("worst").size(),
            member_count<BiasValue>());
  EXPECT_EQ(evidence_to_wire(sample(Of<SignatureEvidence>{})).at("strongest").at(0).size(),
            member_count<SignatureFinding>());
  EXPECT_EQ(evidence_to_wire(sample(Of<VarianceEvidence>{})).at("outputs").at(0).size(),
            member_count<VarianceOutput>());
  // Not aggregates (they have constructors): their members, counted by hand.
  EXPECT_EQ(bound.at("outputs").at(0).at("stats").size(), 12u);            // BoundFigures
  EXPECT_EQ(bound.at("outputs").at(0).at("error_over_bound").size(), 7u);  // Log2Histogram
  EXPECT_EQ(bound.at("outputs").at(0).at("outside").size(), 5u);           // FailureGrid
}

TEST(EvidenceWire, NonFiniteNumbersKeepTheirBits) {
  const float payload_f = std::bit_cast<float>(0xffc00123u);  // a negative NaN with a payload
  const double payload_d = std::bit_cast<double>(0x7ff8000000000abcull);
  BoundEvidence e = std::get<BoundEvidence>(sample(Of<BoundEvidence>{}));
  e.first->element.value = payload_f;
  e.first->element.accept.hi = std::numeric_limits<float>::infinity();
  e.first->element.accept.lo = -std::numeric_limits<float>::infinity();
  e.u_eff = payload_d;
  e.lambda = -0.0;
  const Json wire = through_text(evidence_to_wire(e));
  EXPECT_EQ(wire.at("first").at("element").at("value"), "nan:0xffc00123");
  EXPECT_EQ(wire.at("u_eff"), "nan:0x7ff8000000000abc");
  const Result<Evidence> back = evidence_from_wire(wire);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  const auto& b = std::get<BoundEvidence>(*back);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(b.first->element.value), 0xffc00123u);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(b.u_eff), 0x7ff8000000000abcull);
  EXPECT_TRUE(std::isinf(b.first->element.accept.hi) && b.first->element.accept.hi > 0);
  EXPECT_TRUE(std::isinf(b.first->element.accept.lo) && b.first->element.accept.lo < 0);
  EXPECT_TRUE(std::signbit(b.lambda));
}

// ---- a whole report, rendered four ways ---------------------------------------------------------

const std::string kHostile = "<b>'&\"\x1b[2J\xff\xfe\xef\xbf\xbe";

CheckResult check(const std::string& id, const std::string& subject, CheckKind kind, Verdict v, Evidence e) {
  CheckResult c;
  c.id = id;
  c.subject = subject;
  c.kind = kind;
  c.verdict = v;
  c.reason = id + ": " + std::string(verdict_name(v)) + " " + kHostile;
  c.evidence = std::move(e);
  if (v == Verdict::kFail) c.details = {"first detail " + kHostile, "second detail"};
  return c;
}

/// A report holding every alternative, in checks the renderers draw (projection subjects, the
/// sweep's three shapes, first failures that the stats lay out), with hostile strings.
Report every_evidence_report() {
  Report r;
  r.command = "check";
  r.inputs = {{"dump" + kHostile + ".h5", "0123456789abcdef0123456789abcdef"}};
  r.preamble = {"ncert check " + kHostile, "second line"};
  r.show_coverage = true;
  const std::string p = "projections/attn" + kHostile;
  for (const Evidence& e : all_samples()) {
    const std::string type(evidence_type_name(e));
    CheckKind kind = CheckKind::kSchema;
    std::string subject = "dump";
    if (type == "geometry" || type == "identity" || type == "bound" || type == "walk" || type == "bias" ||
        type == "untouched" || type == "vacuity" || type == "not-evaluated") {
      subject = p;
      kind = type == "not-evaluated" || type == "vacuity" ? CheckKind::kVacuity : *parse_check_kind(type);
    } else if (type == "witness" || type == "verify") {
      subject = "logits/greedy";
      kind = CheckKind::kWitness;
    } else if (type == "logits" || type == "tensor") {
      subject = "";
      kind = *parse_check_kind(type);
    } else if (type == "fork" || type == "no-fork") {
      subject = "forks/greedy";
      kind = CheckKind::kFork;
    }
    CheckResult c = check(subject.empty() ? type + "/x" : subject + "/" + type, subject, kind,
                          r.checks.size() % 3 == 0 ? Verdict::kFail : Verdict::kPass, e);
    if (type == "none") c.verdict = Verdict::kSkip;
    if (type == "identity" || type == "walk" || type == "untouched" || type == "bound") {
      c.first_failure = Location{"y_packed", 4, 99, 5, -1, -1};
    }
    if (type == "fork") {
      c.always_show_details = true;
      c.details = {"fork detail"};
    }
    if (type == "sweep") {
      for (CheckKind k : {CheckKind::kIdentity, CheckKind::kAlias, CheckKind::kGuard}) {
        CheckResult s = c;
        s.id = "sweep/" + std::string(check_kind_name(k));
        s.subject = "sweep";
        s.kind = k;
        r.checks.push_back(std::move(s));
      }
      continue;
    }
    r.checks.push_back(std::move(c));
  }
  // The evidence strings that reach the pages, hostile too (they come back repaired, which
  // every renderer shows the same way).
  for (CheckResult& c : r.checks) {
    if (auto* b = std::get_if<BoundEvidence>(&c.evidence)) {
      b->accumulator += kHostile;
      b->outputs[0].output += kHostile;
    } else if (auto* f = std::get_if<ForkEvidence>(&c.evidence)) {
      f->text_a += kHostile;
      f->top_b_text[1] += kHostile;
      f->fork.why += kHostile;
    } else if (auto* t = std::get_if<TensorEvidence>(&c.evidence)) {
      t->note += kHostile;
    }
  }
  r.stats["rows" + kHostile] = 3;
  r.stats["timing_total_seconds"] = 1.5;
  r.extra["datasets"] = Json::array({Json{{"path", kHostile}, {"rows", 4}}});
  return r;
}

Report through_the_wire(const Report& r) {
  const std::string text = report_to_wire(r).dump();
  Result<Report> back = report_from_wire(Json::parse(text));
  EXPECT_TRUE(back.ok()) << back.status().to_string();
  return back.ok() ? *back : Report{};
}

/// "" when the texts are equal, else where they first differ (pages are too long to print).
std::string difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const std::size_t from = i < 100 ? 0 : i - 100;
  return "byte " + std::to_string(i) + ":\n  " + a.substr(from, 200) + "\nvs\n  " + b.substr(from, 200);
}

void expect_same_renderings(const Report& original) {
  const Report back = through_the_wire(original);
  ASSERT_EQ(back.checks.size(), original.checks.size());
  EXPECT_EQ(difference(back.to_text(false), original.to_text(false)), "") << "text";
  EXPECT_EQ(difference(back.to_text(true), original.to_text(true)), "") << "text --quiet";
  EXPECT_EQ(difference(back.to_json().dump(2), original.to_json().dump(2)), "") << "JSON";
  EXPECT_EQ(difference(render_html(back), render_html(original)), "") << "HTML";
  EXPECT_EQ(difference(render_junit(back), render_junit(original)), "") << "JUnit";
}

TEST(ReportWire, EveryRendererGivesTheSameBytesAfterTheWire) {
  const Report r = every_evidence_report();
  expect_same_renderings(r);
  // The page draws what the evidence holds: each plot kind is there.
  const std::string html = render_html(r);
  for (const char* plot :
       {"plot bound-hist", "plot fail-grid", "plot margin-hist", "plot series kl", "class=\"fork\""}) {
    EXPECT_NE(html.find(plot), std::string::npos) << plot;
  }
}

TEST(ReportWire, ARefusedReportAndNonFiniteEvidenceGiveTheSameBytesToo) {
  Report r = every_evidence_report();
  for (CheckResult& c : r.checks) {
    if (auto* b = std::get_if<BoundEvidence>(&c.evidence)) {
      b->first->element.value = std::bit_cast<float>(0x7fc00001u);
      b->outputs[0].stats.max_error_over_bound = std::numeric_limits<double>::quiet_NaN();
    } else if (auto* l = std::get_if<LogitsEvidence>(&c.evidence)) {
      l->kl_mean = std::numeric_limits<double>::quiet_NaN();
      l->series.kl_max[2] = -std::numeric_limits<double>::quiet_NaN();
    }
  }
  expect_same_renderings(r);
  r.refuse(Status(ErrorCode::kHdf5, "dump.h5: truncated " + kHostile).with_detail("H5F: " + kHostile));
  expect_same_renderings(r);
}

TEST(ReportWire, ACampaignReportKeepsItsEntriesTyped) {
  // A campaign's report: entries with their own reports (one refused), checks under their ids.
  Report campaign;
  campaign.command = "campaign";
  campaign.add_entry("step-000", "check", every_evidence_report());
  Report refused = every_evidence_report();
  refused.refuse(Status(ErrorCode::kHdf5, "dump.h5: truncated"));
  campaign.add_entry("step-001", "check", refused);
  expect_same_renderings(campaign);
  const Report back = through_the_wire(campaign);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].id, "step-001");
  EXPECT_EQ(back.entries[1].command, "check");
  ASSERT_TRUE(back.entries[1].report.error.has_value());
  // (Its hostile strings come back repaired, as every renderer shows them: compare the JSON.)
  EXPECT_EQ(back.entries[1].report.to_json(), refused.to_json());
  EXPECT_EQ(back.first_check(1), every_evidence_report().checks.size());
  // The JSON's entries: each entry's own report, verdict and exit code, after the stats.
  const Json j = campaign.to_json();
  ASSERT_EQ(j.at("entries").size(), 2u);
  EXPECT_EQ(j.at("entries")[1].at("exit_code"), refused.exit_code());
  EXPECT_EQ(j.at("entries")[1].at("report"), refused.to_json());
  // A malformed entry is a clean error.
  Json w = report_to_wire(campaign);
  w["entries"][0].erase("report");
  EXPECT_FALSE(report_from_wire(w).ok());
  w["entries"] = "none";
  EXPECT_FALSE(report_from_wire(w).ok());
}

TEST(ReportWire, ChecksComeBackTypedAndEqual) {
  for (const Evidence& e : all_samples()) {
    CheckResult c = check("projections/a/x", "projections/a", CheckKind::kBound, Verdict::kFail, e);
    c.reason = "plain reason";  // valid UTF-8: the check itself comes back equal
    c.details = {"a", "b"};
    c.first_failure = Location{"y_packed", 1, 2, 3, 4, 5};
    c.always_show_details = true;
    const Result<CheckResult> back = check_from_wire(through_text(check_to_wire(c)));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_TRUE(*back == c) << evidence_type_name(e);
  }
  const Result<CheckResult> skip =
      check_from_wire(through_text(check_to_wire(skipped("logits/x/witness", "logits/x", CheckKind::kWitness, "no"))));
  ASSERT_TRUE(skip.ok());
  EXPECT_TRUE(std::holds_alternative<std::monostate>(skip->evidence));
  EXPECT_FALSE(skip->first_failure);
}

// ---- malformed wire JSON ------------------------------------------------------------------------

struct Breakage {
  const char* what;
  void (*apply)(Json&);
  const char* message;  ///< a part of the error's message
};

TEST(ReportWire, MalformedChecksAreCleanErrorsNamingTheMember) {
  CheckResult bound =
      check("projections/a/bound", "projections/a", CheckKind::kBound, Verdict::kFail, sample(Of<BoundEvidence>{}));
  CheckResult wit =
      check("logits/g/witness", "logits/g", CheckKind::kWitness, Verdict::kFail, sample(Of<WitnessEvidence>{}));
  CheckResult geo = check("projections/a/geometry", "projections/a", CheckKind::kGeometry, Verdict::kFail,
                          sample(Of<GeometryEvidence>{}));
  const Breakage bound_cases[] = {
      {"no evidence", [](Json& w) { w.erase("evidence"); }, "missing evidence"},
      {"evidence not an object", [](Json& w) { w["evidence"] = Json::array(); }, "evidence: not an object"},
      {"no type", [](Json& w) { w["evidence"].erase("type"); }, "evidence.type: missing"},
      {"unknown type", [](Json& w) { w["evidence"]["type"] = "rendered"; }, "unknown evidence type \"rendered\""},
      {"the old wire's stats",
       [](Json& w) {
         w["evidence"] = Json{{"type", "bound"}, {"stats", Json::object()}};
       },
       "evidence.outputs: missing"},
      {"missing member", [](Json& w) { w["evidence"].erase("lambda"); }, "evidence.lambda: missing"},
      {"unknown member", [](Json& w) { w["evidence"]["stats"] = 1; }, "evidence.stats: not a member"},
      {"text for a count", [](Json& w) { w["evidence"]["outputs"][0]["stats"]["elements"] = "many"; },
       "evidence.outputs[0].stats.elements: not an integer"},
      {"fraction for an index", [](Json& w) { w["evidence"]["first"]["slot"] = 1.5; },
       "evidence.first.slot: not an integer"},
      {"not an f32", [](Json& w) { w["evidence"]["first"]["element"]["value"] = 0.1; },
       "evidence.first.element.value: not an f32 value"},
      {"f32 overflow", [](Json& w) { w["evidence"]["first"]["element"]["accept"]["hi"] = 1e300; },
       "evidence.first.element.accept.hi: not an f32 value"},
      {"a NaN without its bits", [](Json& w) { w["evidence"]["u_eff"] = "nan"; }, "evidence.u_eff: not a number"},
      {"infinity's bits as a NaN", [](Json& w) { w["evidence"]["u_eff"] = "nan:0x7ff0000000000000"; },
       "evidence.u_eff: not a number"},
      {"unknown dtype", [](Json& w) { w["evidence"]["output"] = "f64"; }, "evidence.output: unknown name \"f64\""},
      {"unknown trial effect", [](Json& w) { w["evidence"]["diagnosis"][2]["effect"] = "widens"; },
       "evidence.diagnosis[2].effect: unknown name \"widens\""},
      {"list as object", [](Json& w) { w["evidence"]["outputs"] = Json::object(); }, "evidence.outputs: not a list"},
      {"histogram bins", [](Json& w) { w["evidence"]["outputs"][0]["error_over_bound"]["counts"].erase(0); },
       "evidence.outputs[0].error_over_bound: 39 counts for the 40 bins of its axis"},
      {"histogram axis", [](Json& w) { w["evidence"]["outputs"][0]["error_over_bound"]["log2_max"] = 1 << 30; },
       "evidence.outputs[0].error_over_bound: an axis"},
      {"grid cells", [](Json& w) { w["evidence"]["outputs"][0]["outside"]["counts"].erase(0); },
       "evidence.outputs[0].outside: 2047 counts for 2048 cells"},
      {"grid shape", [](Json& w) { w["evidence"]["outputs"][0]["outside"]["cell_rows"] = 1000; },
       "evidence.outputs[0].outside: cells 1000 x 64"},
      {"boolean as number", [](Json& w) { w["evidence"]["round_to_nearest"] = 1; },
       "evidence.round_to_nearest: not true or false"},
      {"location",
       [](Json& w) {
         w["first_failure"] = Json{{"object", "y"}};
       },
       "missing row"},
      {"kind", [](Json& w) { w["kind"] = "bogus"; }, "kind bogus"},
  };
  const Json bound_wire = through_text(check_to_wire(bound));
  for (const Breakage& b : bound_cases) {
    Json w = bound_wire;
    b.apply(w);
    const Result<CheckResult> r = check_from_wire(w);
    ASSERT_FALSE(r.ok()) << b.what;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << b.what;
    EXPECT_NE(r.status().message().find(b.message), std::string::npos) << b.what << ": " << r.status().message();
    EXPECT_EQ(r.status().message().rfind("not a wire check: ", 0), 0u) << r.status().message();
  }
  const Breakage other_cases[] = {
      {"token out of range", [](Json& w) { w["evidence"]["tightest"][1]["token"] = std::int64_t{1} << 40; },
       "evidence.tightest[1].token: integer out of range"},
      {"unknown class", [](Json& w) { w["evidence"]["tightest"][0]["class"] = "certain"; },
       "evidence.tightest[0].class: unknown name \"certain\""},
      {"optional as a list", [](Json& w) { w["evidence"]["first_failure"] = Json::array(); },
       "evidence.first_failure: not an object"},
  };
  const Json wit_wire = through_text(check_to_wire(wit));
  for (const Breakage& b : other_cases) {
    Json w = wit_wire;
    b.apply(w);
    const Result<CheckResult> r = check_from_wire(w);
    ASSERT_FALSE(r.ok()) << b.what;
    EXPECT_NE(r.status().message().find(b.message), std::string::npos) << b.what << ": " << r.status().message();
  }
  Json g = through_text(check_to_wire(geo));
  g["evidence"]["guard"] = 9999;
  const Result<CheckResult> bad_guard = check_from_wire(g);
  ASSERT_FALSE(bad_guard.ok());
  EXPECT_NE(bad_guard.status().message().find("evidence.guard: unknown error code 9999"), std::string::npos);
  // An unsigned value beyond every int64 for an int64 member.
  Json big = through_text(check_to_wire(geo));
  big["evidence"]["rows"] = std::numeric_limits<std::uint64_t>::max();
  EXPECT_FALSE(check_from_wire(big).ok());
}

TEST(ReportWire, MalformedReportsAreCleanErrors) {
  const Json good = through_text(report_to_wire(every_evidence_report()));
  ASSERT_TRUE(report_from_wire(good).ok());
  Json w = good;
  w["checks"][3]["evidence"]["type"] = 7;
  const Result<Report> r = report_from_wire(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("evidence.type: missing, or not a string"), std::string::npos);
  for (const char* key : {"command", "inputs", "checks", "stats", "preamble", "show_coverage"}) {
    Json x = good;
    x.erase(key);
    EXPECT_FALSE(report_from_wire(x).ok()) << key;
  }
  EXPECT_FALSE(report_from_wire(Json::array()).ok());
  EXPECT_FALSE(report_from_wire(Json("report")).ok());
}

}  // namespace
}  // namespace ncert::certify
