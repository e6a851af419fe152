// bias: the signed rounding residuals of a bf16 or f16 output declared round-to-nearest are centred.
// A correct kernel rounds each value to nearest, so over many values the residuals toward
// +|c| average zero; truncation, or any rounding that prefers one side, moves the mean by a
// good part of an ulp. The test is Azuma's inequality over the values of one output, each
// value's accumulation sized by the residual model's sigma (docs/error-bounds.md §6c; for a
// directed accumulator Hoeffding's over ranges that B bounds, §6a). For round-to-nearest
// accumulators each value is also tested on its own: a correct kernel stores it within half a
// spacing of its accumulated value, and that value within the accumulation's sub-Gaussian tail
// of the exact one, so a value stored at the other neighbour is seen even when one in a
// thousand is (the mean moves by 0.0005 ulp then, below any mean test's reach at 527,360
// values). The two parts share a false-alarm probability of at most 1e-9 per projection.
#include <algorithm>
#include <cmath>
#include <limits>

#include "certify/projection/checks.h"
#include "certify/projection/diagnosis.h"
#include "certify/report/format.h"

namespace ncert::certify {

namespace {

/// The whole projection's false-alarm probability, shared out over its outputs and both
/// directions.
constexpr double kAlpha = 1e-9;

/// The chance at most that `n` values spread at random over `held` rows all fall in one:
/// held (1 / held)^n.
double one_row_chance(Index n, Index held) {
  return std::exp(static_cast<double>(1 - n) * std::log(static_cast<double>(held)));
}

/// Whether an output's values beyond (two or more) lie in one row too often for chance
/// (kFewRowsChance, as the bound's row spread): a rounding fault moves values in every row, a
/// row's fault (its activations scaled by 1.001, say) only that row's, which under bf16
/// outputs moves them by less than a spacing, every one away from zero, and had read "a
/// rounding that is not to nearest". 5 values in one row of 8: 2.4e-4; 4: 2e-3, not read.
bool beyond_in_one_row(const BiasOutput& o) {
  const Index n = o.beyond + o.far;
  return n >= 2 && o.rows_held >= 2 && o.row_min >= 0 && o.row_min == o.row_max &&
         one_row_chance(n, o.rows_held) <= kFewRowsChance;
}

/// The rows each output holds, rows of zeros left out: they hold no rounding, so no value
/// beyond (28 zero rows of 32 had made 3 values in one of the 4 others look 1e-3 rare).
struct HeldRows {
  Index live = 0;      ///< y_unpacked's: the live rows of x
  Index selected = 0;  ///< the packed outputs': the live selected rows
};
HeldRows held_rows(const ProjectionFacts& f, const RowNorms& norms) {
  HeldRows h;
  for (std::size_t i = 0; i < f.slot_of_row.size(); ++i) {
    if (!norms.live(static_cast<Index>(i))) continue;
    ++h.live;
    h.selected += f.slot_of_row[i] >= 0 ? 1 : 0;
  }
  return h;
}

/// One output's tally as its evidence, before the mean test: its counts and spans, the rows it
/// holds (`rows_held`), and the one-row reading.
BiasOutput output_of(const BiasTally& t, EngineOutputId id, Index rows_held, const RowNorms& norms) {
  BiasOutput o;
  o.output = std::string(engine_output_name(id));
  o.values = t.values;
  o.excluded = t.excluded;
  o.tested = t.tested;
  o.beyond = t.beyond;
  o.beyond_toward_zero = t.beyond_toward_zero;
  o.far = t.far;
  o.row_min = t.row_min;
  o.row_max = t.row_max;
  o.col_min = t.col_min;
  o.col_max = t.col_max;
  o.rows_held = rows_held;
  o.one_row = beyond_in_one_row(o);
  o.row_dominates = o.one_row && norms.dominant(o.row_min);
  if (t.peak_z > -std::numeric_limits<double>::infinity()) o.peak_z = t.peak_z;
  o.worst = t.worst;
  return o;
}

/// The per-value part's finding of one output: its worst value, then how many lie beyond and
/// which way (docs/error-bounds.md §6a).
std::string beyond_text(const BiasOutput& o, double threshold) {
  const BiasValue& w = *o.worst;
  const Index n = o.beyond + o.far;
  std::string s =
      o.output + " row " + std::to_string(w.row) + " column " + std::to_string(w.col) + ": stored " +
      format_float(w.stored) + " against an exact " + format_float(w.exact) + ", " +
      format_short(std::fabs(w.residual_ulps)) + " ulp " + (w.residual_ulps < 0 ? "toward zero" : "away from zero") +
      " where a round-to-nearest output allows " + format_short(w.allowed_ulps) + " (its accumulation's tail at " +
      format_short(threshold) + " sigma; this value is " + format_short(w.z) + " sigma beyond its roundings); ";
  s += n == 1 ? "it is the only value beyond what rounding to nearest allows"
              : std::to_string(n) + " values lie beyond what rounding to nearest allows";
  // Values beyond in a single column point at that column's weights, not at the rounding; in
  // a single row, beyond chance, at that row.
  if (n > 1 && o.col_min == o.col_max) s += ", all in column " + std::to_string(o.col_min);
  if (o.one_row) {
    s += ", all in row " + std::to_string(o.row_min) + " (of the " + std::to_string(o.rows_held) + " rows " + o.output +
         " holds; at random at most " + format_short(one_row_chance(n, o.rows_held)) + ")";
    if (o.row_dominates) s += ", whose activations dominate the others'";
  }
  if (o.far > 0) {
    s += n == 1 ? ", by more than a spacing: a wrong value, not a wrong rounding"
                : ", " + std::to_string(o.far) +
                      " of them by more than a spacing: wrong values, not only a wrong rounding";
  } else if (o.one_row) {
    const bool toward = o.beyond_toward_zero == o.beyond, away = o.beyond_toward_zero == 0;
    s += toward ? ", every one toward zero"
         : away ? ", every one away from zero"
                : ", both ways (" + std::to_string(o.beyond_toward_zero) + " toward zero)";
    s += " and by less than a spacing: a fault of that row (its activations, or the path that computed it)";
    // Any mistake's rounding is largest in a row that dominates, and seen there first: a
    // truncating accumulator's values beyond lay in such a row alone (6 of a row of 4 holding
    // an activation of 5000), as do that row's own fault's (x 1.002: 99 values, away from zero).
    // A truncating accumulator shows first in a row whose products share a sign too, its sums
    // largest there without dominating activations (a review's 22-bit truncating accumulator,
    // row 1 of 4 positive: 11 values beyond in that row alone, read "not a rounding of every
    // value"): toward zero, truncation is named beside the row.
    s += !o.row_dominates && toward ? ", or truncation seen first in that row (its sums largest where its products "
                                      "share a sign)"
         : !o.row_dominates         ? ", not a rounding of every value"
         : toward                   ? ", or truncation seen first where that row's sums are largest"
         : away ? ", or a rounding that is not to nearest seen first where that row's sums are largest"
                : ", or a rounding fault seen first where that row's sums are largest";
  } else if (o.beyond_toward_zero == o.beyond && 100 * n < o.tested) {
    // An output rounding that truncates moves about half of all values beyond; a few of them
    // are those values' own (a part of the outputs truncated), or values wrong by less than a
    // spacing (one AF4 group's scale x 1.002 moved one value so, which read "truncation": a
    // review's).
    s += (n == 1 ? ", toward zero by less than a spacing" : ", every one toward zero and by less than a spacing") +
         std::string(": ") +
         (n == 1 ? "that value truncated, or wrong by less than a spacing"
                 : "those values truncated, or wrong by less than a spacing") +
         " (an output rounding that truncates would move about half the " + std::to_string(o.tested) +
         " values tested)";
  } else if (o.beyond_toward_zero == o.beyond) {
    s += n == 1 ? ", toward zero by less than a spacing: truncation"
                : ", every one toward zero and by less than a spacing: truncation";
  } else if (o.beyond_toward_zero == 0) {
    s += n == 1 ? ", away from zero by less than a spacing: a rounding that is not to nearest"
                : ", every one away from zero and by less than a spacing: a rounding that is not to nearest";
  } else if (o.col_min == o.col_max) {
    s += ", by less than a spacing and both ways (" + std::to_string(o.beyond_toward_zero) +
         " toward zero): that column's values are wrong by less than a spacing (its weights or arithmetic), not "
         "rounded wrongly";
  } else {
    s += " by less than a spacing (" + std::to_string(o.beyond_toward_zero) +
         " toward zero): values stored at a neighbour of their round-to-nearest value (a rounding that is not to "
         "nearest, or values wrong by less than a spacing)";
  }
  return s + " (false-alarm probability <= 1e-9)";
}

/// The failing check's reason: the per-value part's finding first, else the mean test's and
/// what it reads. Truncation moves values toward zero only: a mean away from zero is a rounding
/// away from zero, or a fault moving values outward (a dominant row's activations x 1.01).
std::string failure_reason(const std::string& value_failure, const std::string& mean_failure, bool mean_away) {
  if (!value_failure.empty()) return value_failure + (mean_failure.empty() ? "" : "; " + mean_failure);
  return mean_failure + (mean_away ? ": a rounding that is not to nearest (away from zero), or values a fault moved "
                                     "away from zero"
                                   : ": truncation, or a rounding that is not to nearest");
}

}  // namespace

std::optional<CheckResult> bias_check(const ProjectionFacts& f, const ReferencePass& pass,
                                      std::string_view failing_elsewhere) {
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
  // A walk stage rounding toward zero makes the accumulation directed (reference_pass.cc).
  e.nearest = info.accumulator.round_to_nearest && !pass.summary.biased_rounding;
  e.value_threshold = pass.bias_value_threshold;
  const bool per_value = e.value_threshold > 0;
  int outputs = 0;
  for (EngineOutputId id_o : kAllEngineOutputs) outputs += f.data.output(id_o).present;
  const RowNorms norms = row_norms(f);
  const HeldRows held = held_rows(f, norms);
  // Two-sided, over every output: Hoeffding's P(|T - E T| >= t) per side is
  // exp(-2 t^2 / sum R_i^2), so each side of each output gets alpha / (2 outputs), halved
  // where the per-value part takes the other half (reference_pass.cc).
  const double log_term = std::log(2.0 * std::max(outputs, 1) / (per_value ? kAlpha / 2 : kAlpha));
  std::string mean_failure, value_failure;
  bool mean_away = false;  // the failing mean's direction
  Index counted = 0;
  // Values beyond a spacing, and the others beyond the per-value threshold beside them, in
  // outputs another check fails on (a PASS had counted the 470 of the first and left the 37 of
  // the second unsaid, a review's).
  Index left_elsewhere = 0, left_beyond = 0;
  for (EngineOutputId id_o : kAllEngineOutputs) {
    if (!f.data.output(id_o).present) continue;
    const BiasTally& t = pass.bias[static_cast<std::size_t>(id_o)];
    BiasOutput o = output_of(t, id_o, id_o == EngineOutputId::kUnpacked ? held.live : held.selected, norms);
    if (o.far > 0 && !failing_elsewhere.empty()) {
      left_elsewhere += o.far;
      left_beyond += o.beyond;
    } else if (o.worst && value_failure.empty()) {
      value_failure = beyond_text(o, e.value_threshold);
      r.first_failure = Location{o.output, o.worst->row, o.worst->col};
    }
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
    if (excess > 0) {
      o.one_sided = true;
      if (mean_failure.empty()) {
        mean_away = o.mean_ulps > 0;
        mean_failure = o.output + ": systematic rounding residual " +
                       (o.mean_ulps < 0 ? "toward zero" : "away from zero") + ", mean " + format_short(o.mean_ulps) +
                       " ulp over " + std::to_string(t.values) + " values, beyond the limit " +
                       format_short(o.shift_ulps + o.limit_ulps) + " (false-alarm probability <= 1e-9)";
        if (value_failure.empty()) r.first_failure = Location{o.output};
      }
    }
    e.outputs.push_back(o);
  }
  if (counted == 0 && value_failure.empty()) {
    return skipped(id, subject, CheckKind::kBias,
                   e.nearest ? "no value has a centre and a bound tight enough to test (within 4 ulps)"
                             : "accumulator " + info.accumulator.name +
                                   (info.walk.declared ? " with k_walk " + info.walk.name : std::string()) +
                                   " has biased rounding errors and no value's bound is within a quarter ulp: the "
                                   "output rounding cannot be told from the accumulator's own bias");
  }
  if (!value_failure.empty() || !mean_failure.empty()) {
    r.verdict = Verdict::kFail;
    r.reason = failure_reason(value_failure, mean_failure, mean_away);
  } else {
    const BiasOutput& o = e.outputs.front().values > 0 ? e.outputs.front() : e.outputs.back();
    r.reason = "rounding residuals centred: " + o.output + " mean " + format_short(o.mean_ulps) + " ulp over " +
               std::to_string(o.values) + " values (limit " + format_short(o.shift_ulps + o.limit_ulps) + ")";
    if (per_value) {
      Index tested = 0, beyond = 0;
      std::optional<double> peak;
      for (const BiasOutput& x : e.outputs) {
        tested += x.tested;
        beyond += x.beyond + x.far;
        if (x.peak_z && (!peak || *x.peak_z > *peak)) peak = x.peak_z;
      }
      r.reason += beyond == 0
                      ? ", and each of " + std::to_string(tested) + " values"
                      : ", and " + std::to_string(tested - beyond) + " of " + std::to_string(tested) + " values";
      r.reason += " within " + format_short(e.value_threshold) + " sigma of its roundings";
      if (peak && beyond == 0) {
        r.reason += *peak > 0 ? " (the largest " + format_short(*peak) + ")"
                              : " (every one within the roundings bounded outright)";
      }
    }
    r.reason += " (false-alarm probability <= 1e-9)";
  }
  if (left_elsewhere > 0) {
    r.reason += "; " + std::to_string(left_elsewhere) + (left_elsewhere == 1 ? " value lies" : " values lie") +
                " more than a spacing beyond its rounding";
    if (left_beyond > 0) {
      r.reason +=
          ", and " + std::to_string(left_beyond) + " more beyond " + format_short(e.value_threshold) + " sigma of it";
    }
    r.reason += ": wrong values, not a rounding fault, left to " + std::string(failing_elsewhere);
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
