// quantize: the engine's quantized activations are the declared quantization of x. Every code of
// x_quantized must be the declared rounding of x / s (+ zp) of its row and group, saturated to
// the code type (reference/x_quant.h); the products are then certified with those codes (the
// reference uses (q - zp) * s in place of x), so a wrong code or scale is caught here, where it
// happens, rather than only as outputs outside their intervals.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "certify/projection/checks.h"
#include "certify/report/format.h"
#include "reference/x_quant.h"

namespace ncert::certify {

std::optional<CheckResult> quantize_check(const ProjectionFacts& f) {
  const ProjectionInfo& info = f.info();
  const reference::XQuantizer& quantizer = info.x_quant;
  if (quantizer.type == reference::XQuantType::kNone) return std::nullopt;
  CheckResult r = projection_check(info, CheckKind::kQuantize);
  const reference::LinearProblem problem = f.data.problem(reference::kDefaultLambda);
  const reference::XQuantizedView& q = problem.x_quantized;
  QuantizeEvidence e;
  e.quantizer = std::string(reference::x_quant_name(quantizer.type));
  e.rounding = std::string(reference::x_quant_rounding_name(quantizer.rounding));
  e.group = quantizer.group;
  e.tolerance = reference::x_quant_tolerance(info.x_scales_dtype);
  if (quantizer.group < 1 || info.k % quantizer.group != 0) {
    r.verdict = Verdict::kFail;
    r.reason = "x_quant_group = " + std::to_string(quantizer.group) + " does not divide K = " + std::to_string(info.k) +
               " (guard 309)";
    r.evidence = e;
    return r;
  }
  std::string first;
  // Scales below their type's normal range allow more than e.tolerance: how many, and the most
  // (up to 1 at f16's smallest subnormal, where the check holds little more than the sign).
  Index widened = 0;
  double widest = e.tolerance;
  const Index groups = info.k / quantizer.group;
  for (Index row = 0; row < info.m; ++row) {
    for (Index g = 0; g < groups; ++g) {
      const double s = q.scale(row, g), zp = q.zero_point(row, g);
      // A scale below its storage type's normal range was rounded by more than u relative.
      const reference::XQuantSlack slack = reference::x_quant_slack(info.x_scales_dtype, s);
      const double tolerance = slack.tolerance;
      if (tolerance > e.tolerance) {
        ++widened;
        widest = std::max(widest, tolerance);
      }
      bool scale_counted = false;
      for (Index c = g * quantizer.group; c < (g + 1) * quantizer.group; ++c) {
        const double x = problem.x.at(row, c);
        if (!std::isfinite(x)) {
          if (e.excluded++ == 0) {
            e.nonfinite_row = row;
            e.nonfinite_col = c;
          }
          continue;
        }
        ++e.values;
        const reference::XQuantRange allowed = reference::x_quant_allowed(quantizer, x, s, zp, slack);
        const double found = q.code(row, c);
        if (!allowed.valid && !scale_counted) {
          ++e.bad_scales;
          scale_counted = true;
        }
        const bool ok = allowed.valid && found >= allowed.lowest && found <= allowed.highest;
        if (ok) continue;
        if (e.mismatched++ == 0) {
          e.x = x;
          e.scale = s;
          e.zero_point = zp;
          e.found = found;
          e.lowest = allowed.lowest;
          e.highest = allowed.highest;
          r.first_failure = Location{"x_quantized", row, c};
          first = "row " + std::to_string(row) + " col " + std::to_string(c) + ": x = " + format_short(x) + ", scale " +
                  format_short(s) + (q.zero_points ? ", zero point " + format_short(zp) : "") +
                  (allowed.valid ? ": code " + format_short(found) + ", the " + e.rounding + " rounding of x / s" +
                                       (q.zero_points ? " + zp" : "") + " allows " +
                                       (allowed.lowest == allowed.highest
                                            ? format_short(allowed.lowest)
                                            : format_short(allowed.lowest) + " .. " + format_short(allowed.highest)) +
                                       (tolerance > e.tolerance ? " (quotient slack " + format_short(tolerance) +
                                                                      ": a scale below its type's normal range)"
                                                                : std::string())
                                 : ": the scale is not positive and finite (0 only for a group whose |x| stays "
                                   "within the codes' reach of a scale its type stores as 0)");
        }
      }
    }
  }
  const std::string what =
      e.quantizer + " " + e.rounding + ", " +
      (quantizer.group == info.k ? std::string("per token") : "groups of " + std::to_string(quantizer.group));
  if (e.excluded > 0) {
    // The declared quantizers define codes of finite values only (x / s of an inf or NaN has no
    // rounding): the engine's codes there came from something else, and the reference, which
    // multiplies the codes, would certify products of an x that was never quantized. Without
    // x_quant the bound check fails such an x the same way.
    // first_failure stays the first mismatched code's, which the evidence's x .. highest describe.
    r.verdict = Verdict::kFail;
    r.reason = "x holds " + std::to_string(e.excluded) + " non-finite value(s), first at row " +
               std::to_string(e.nonfinite_row) + " col " + std::to_string(e.nonfinite_col) +
               ": no code is the declared quantization (" + what + ") of an infinite or NaN activation";
    if (e.mismatched > 0) {
      r.reason += "; and " + std::to_string(e.mismatched) + " of the " + std::to_string(e.values) +
                  " finite values' codes are not their declared quantization, first " + first;
    }
  } else if (e.mismatched > 0) {
    r.verdict = Verdict::kFail;
    r.reason = std::to_string(e.mismatched) + " of " + std::to_string(e.values) +
               " quantized activations are not the declared quantization of x (" + what + "); first " + first;
  } else {
    r.reason = "all " + std::to_string(e.values) + " quantized activations are the declared quantization of x (" +
               what + ", quotient slack " + format_short(e.tolerance) +
               (widened > 0 ? "; " + std::to_string(widened) + " scale" + (widened == 1 ? "" : "s") +
                                  " below their type's normal range allowed up to " + format_short(widest)
                            : std::string()) +
               ")";
  }
  r.evidence = e;
  return r;
}

}  // namespace ncert::certify
