// variance: the residuals' energy is within what any order of the declared roundings allows
// (docs/error-bounds.md §6e). Under the mean-independent model each residual is a martingale
// R of increments bounded by u times the operand they round, with sum of squared bounds
// sigma^2 whatever the order; R^2 <= sigma^2 + 2 sum e_j S_{j-1}, and the cross sum is itself a
// martingale whose increments are bounded once every partial sum stays within lambda sigma. So
// sum (|r| - slack)_+^2 <= sum sigma^2 + 2 t lambda sqrt(sum sigma^4), except with probability
// exp(-t^2 / 2) + 2 n exp(-lambda^2 / 2). An accumulator that keeps p < 24 bits multiplies the
// energy of its rounding errors by 4^(24 - p).
#include <cmath>

#include "certify/projection/checks.h"
#include "certify/report/format.h"

namespace ncert::certify {

std::optional<CheckResult> variance_check(const ProjectionFacts& f, const ReferencePass& pass) {
  const ProjectionInfo& info = f.info();
  const std::string id = projection_check_id(info, CheckKind::kVariance);
  const std::string subject = "projections/" + info.name;
  if (const std::string why = residual_model_blocker(f, pass.summary.biased_rounding); !why.empty()) {
    return skipped(id, subject, CheckKind::kVariance, why);
  }
  Index outputs = 0;
  for (EngineOutputId o : kAllEngineOutputs) outputs += pass.variance[static_cast<std::size_t>(o)].values > 0;
  if (outputs == 0) {
    return skipped(id, subject, CheckKind::kVariance, "no output value has a residual to test (no finite value)");
  }
  // Each output gets alpha / outputs, half for the cross sum (t) and half for the partial sums
  // staying within lambda sigma (a union over the n values, both signs).
  const double a = kResidualAlpha / static_cast<double>(outputs);
  const double t = std::sqrt(2 * std::log(2 / a));
  CheckResult r = projection_check(info, CheckKind::kVariance);
  VarianceEvidence e;
  e.alpha = kResidualAlpha;
  e.accumulator = info.accumulator.name;
  std::string failure, best;
  double best_ratio = -1;
  for (EngineOutputId id_o : kAllEngineOutputs) {
    const VarianceTally& v = pass.variance[static_cast<std::size_t>(id_o)];
    if (v.values == 0) continue;
    VarianceOutput o;
    o.output = std::string(engine_output_name(id_o));
    o.values = v.values;
    const double lambda = std::sqrt(2 * std::log(4 * static_cast<double>(v.values) / a));
    o.ratio = v.var > 0 ? v.energy / v.var : (v.energy > 0 ? HUGE_VAL : 0.0);
    o.limit = v.var > 0 ? 1 + 2 * t * lambda * std::sqrt(v.var2) / v.var : 0.0;
    if (o.ratio > o.limit && failure.empty()) {
      r.verdict = Verdict::kFail;
      // The energy of rounding errors scales as u^2: a ratio rho means units sqrt(rho) times
      // the declared ones at least, i.e. log2(sqrt(rho)) bits fewer.
      const double bits = 0.5 * std::log2(o.ratio);
      failure = o.output + ": residual energy " + format_short(o.ratio) +
                "x the most any summation order of accumulator " + info.accumulator.name + " allows (limit " +
                format_short(o.limit) + "x, false-alarm probability <= 1e-9): the kernel rounds at least " +
                format_short(bits) + " bits coarser than declared (a narrower accumulator or lost bits)";
      r.first_failure = Location{o.output};
    }
    if (o.ratio > best_ratio) {
      best_ratio = o.ratio;
      best = o.output + " " + format_short(o.ratio) + "x (limit " + format_short(o.limit) + "x)";
    }
    e.outputs.push_back(o);
  }
  r.reason = failure.empty() ? "residual energy within what accumulator " + info.accumulator.name +
                                   " allows in any order: " + best + ", false-alarm probability <= 1e-9"
                             : failure;
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
