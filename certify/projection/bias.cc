// bias: the signed rounding residuals of a bf16 or f16 output declared round-to-nearest are centred.
// A correct kernel rounds each value to nearest, so over many values the residuals toward
// +|c| average zero; truncation, or any rounding that prefers one side, moves the mean by a
// good part of an ulp. The test is Azuma's inequality over the values of one output, each
// value's accumulation sized by the residual model's sigma (docs/error-bounds.md §6c; for a
// directed accumulator Hoeffding's over ranges that B bounds, §6a), with a false-alarm
// probability of at most 1e-9 per projection.
#include <cmath>

#include "certify/projection/checks.h"
#include "certify/report/format.h"

namespace ncert::certify {

namespace {

/// The whole projection's false-alarm probability, shared out over its outputs and both
/// directions.
constexpr double kAlpha = 1e-9;

}  // namespace

std::optional<CheckResult> bias_check(const ProjectionFacts& f, const ReferencePass& pass) {
  const ProjectionInfo& info = f.info();
  // An f32 output is the accumulator's own last rounding: there is no output rounding to test.
  if (info.output != DType::kBf16 && info.output != DType::kF16) return std::nullopt;
  const std::string id = projection_check_id(info, CheckKind::kBias);
  const std::string subject = "projections/" + info.name;
  if (info.output_rounding != reference::OutputRounding::kNearestEven) {
    return skipped(id, subject, CheckKind::kBias,
                   "output_rounding = " + std::string(reference::output_rounding_name(info.output_rounding)) +
                       ": residuals are centred only under round-to-nearest (declare rne to test them)");
  }
  CheckResult r = projection_check(info, CheckKind::kBias);
  BiasEvidence e;
  e.alpha = kAlpha;
  e.nearest = info.accumulator.round_to_nearest;
  int outputs = 0;
  for (EngineOutputId id_o : kAllEngineOutputs) outputs += f.data.output(id_o).present;
  // Two-sided, over every output: Hoeffding's P(|T - E T| >= t) per side is
  // exp(-2 t^2 / sum R_i^2), so each side of each output gets alpha / (2 outputs).
  const double log_term = std::log(2.0 * std::max(outputs, 1) / kAlpha);
  std::string failure;
  Index counted = 0;
  for (EngineOutputId id_o : kAllEngineOutputs) {
    if (!f.data.output(id_o).present) continue;
    const BiasTally& t = pass.bias[static_cast<std::size_t>(id_o)];
    BiasOutput o;
    o.output = std::string(engine_output_name(id_o));
    o.values = t.values;
    o.excluded = t.excluded;
    if (t.values == 0) {
      e.outputs.push_back(o);
      continue;
    }
    counted += t.values;
    const double n = static_cast<double>(t.values);
    o.mean_ulps = t.sum_s / n;
    o.shift_ulps = t.sum_shift / n;
    // Round to nearest (docs/error-bounds.md §6c): Azuma over sub-Gaussian values of proxy
    // h^2 + (sigma / ulp)^2, the accumulation sized by the residual model's sigma instead of B;
    // P(|T| >= x) <= exp(-x^2 / (2 sum proxy)) per side. Directed (§6a): Hoeffding over
    // the ranges 2 (h + beta), which B bounds.
    o.limit_ulps = e.nearest ? std::sqrt(2 * log_term * t.sum_proxy) / n : std::sqrt(log_term * t.sum_r2 / 2) / n;
    const double excess = std::fabs(o.mean_ulps) - o.shift_ulps - o.limit_ulps;
    if (excess > 0 && failure.empty()) {
      o.one_sided = true;
      r.verdict = Verdict::kFail;
      failure = o.output + ": systematic rounding residual " + (o.mean_ulps < 0 ? "toward zero" : "away from zero") +
                ", mean " + format_short(o.mean_ulps) + " ulp over " + std::to_string(t.values) +
                " values, beyond the limit " + format_short(o.shift_ulps + o.limit_ulps) +
                " (false-alarm probability <= 1e-9): truncation, or a rounding that is not to nearest";
      r.first_failure = Location{o.output};
    } else if (excess > 0) {
      o.one_sided = true;
    }
    e.outputs.push_back(o);
  }
  if (counted == 0) {
    return skipped(id, subject, CheckKind::kBias,
                   e.nearest ? "no value has a centre and a bound tight enough to test (within 4 ulps)"
                             : "accumulator " + info.accumulator.name +
                                   " has biased rounding errors and no value's bound is within a quarter ulp: the "
                                   "output rounding cannot be told from the accumulator's own bias");
  }
  if (r.verdict != Verdict::kFail) {
    const BiasOutput& o = e.outputs.front().values > 0 ? e.outputs.front() : e.outputs.back();
    r.reason = "rounding residuals centred: " + o.output + " mean " + format_short(o.mean_ulps) + " ulp over " +
               std::to_string(o.values) + " values (limit " + format_short(o.shift_ulps + o.limit_ulps) +
               ", false-alarm probability <= 1e-9)";
  } else {
    r.reason = failure;
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
