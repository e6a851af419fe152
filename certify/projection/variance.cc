// variance: the residuals' energy is within what any order of the declared roundings allows
// (docs/error-bounds.md §6e). Under the mean-independent model every sum of a_e R_e, a_e fixed,
// is a martingale with sub-Gaussian scale sqrt(sum a_e^2 sigma_e^2) (Azuma). Averaging that over
// Gaussian a_e = sqrt(l) G_e / sigma_e gives E exp(l Q / 2) <= (1 - l)^(-n/2) for
// Q = sum R_e^2 / sigma_e^2: Q is dominated by a chi-square of n degrees, and the chi-square
// tail (Laurent and Massart 2000) gives P(Q >= n + 2 sqrt(n L) + 2 L) <= exp(-L). The statistic
// is Q with (|r| - slack)_+ <= |R| in place of R; an accumulator that keeps p < 24 bits
// multiplies the energy of its rounding errors by 4^(24 - p).
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
  for (EngineOutputId o : kAllEngineOutputs) {
    const VarianceTally& v = pass.variance[static_cast<std::size_t>(o)];
    outputs += v.values > 0 || v.beyond_exact > 0;
  }
  if (outputs == 0) {
    return skipped(id, subject, CheckKind::kVariance, "no output value has a residual to test (no finite value)");
  }
  // Each output gets alpha / outputs.
  const double log_term = std::log(static_cast<double>(outputs) / kResidualAlpha);
  CheckResult r = projection_check(info, CheckKind::kVariance);
  VarianceEvidence e;
  e.alpha = kResidualAlpha;
  e.accumulator = info.accumulator.name;
  std::string failure, best;
  double best_ratio = -1;
  for (EngineOutputId id_o : kAllEngineOutputs) {
    const VarianceTally& v = pass.variance[static_cast<std::size_t>(id_o)];
    if (v.values == 0 && v.beyond_exact == 0) continue;
    VarianceOutput o;
    o.output = std::string(engine_output_name(id_o));
    o.values = v.values + v.beyond_exact;
    const double n = static_cast<double>(std::max<Index>(v.values, 1));
    // A value with no rounding at all (sigma 0) that misses its centre is no rounding noise.
    o.ratio = v.beyond_exact > 0 ? HUGE_VAL : v.q / n;
    o.limit = 1 + 2 * std::sqrt(log_term / n) + 2 * log_term / n;
    if (o.ratio > o.limit && failure.empty()) {
      r.verdict = Verdict::kFail;
      // The energy of rounding errors scales as u^2: a ratio rho means units sqrt(rho) times
      // the declared ones at least, i.e. log2(sqrt(rho)) bits fewer.
      const double bits = 0.5 * std::log2(o.ratio);
      failure = o.output + ": residual energy " + format_short(o.ratio) +
                "x the most any summation order of accumulator " + info.accumulator.name +
                " allows, per value on average (limit " + format_short(o.limit) +
                "x, false-alarm probability <= 1e-9): the kernel rounds at least " + format_short(bits) +
                " bits coarser than declared (a narrower accumulator, lost bits, or an output rounding that is not to "
                "nearest)";
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
