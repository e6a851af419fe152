#include "certify/report/detail/html_sections.h"

#include <algorithm>
#include <cmath>

#include "certify/report/detail/html_markup.h"
#include "certify/report/detail/html_svg.h"
#include "certify/report/format.h"
#include "reference/float_bits.h"

namespace ncert::certify::detail {

namespace {

std::string td(const std::string& escaped) { return "<td>" + escaped + "</td>"; }
std::string th(const std::string& escaped) { return "<th>" + escaped + "</th>"; }
std::string num(double v) { return markup_fixed(short_text(v)); }
std::string exact(double v) { return markup_fixed(format_float(v)); }

/// A row's part of K (FittedRow): "k 32&#8211;63 (activation group 1)" or "the whole K".
std::string activation_part(const FittedRow& w) {
  if (w.group < 0) return "the whole K";
  return "k " + std::to_string(w.k_begin) + "&#8211;" + std::to_string(w.k_end - 1) + " (activation group " +
         std::to_string(w.group) + ")";
}

/// One row of a two-column table of facts.
std::string fact(const std::string& name, const std::string& escaped_value) {
  return "<tr><th>" + name + "</th><td>" + escaped_value + "</td></tr>";
}

/// The projections' subjects, those with a failing check first, each group in the order they
/// first appear: "projections/<name>", or "<entry>/projections/<name>" in a campaign's report (its
/// checks carry their entry's id).
std::vector<std::string> projection_subjects(const Report& report) {
  std::vector<std::string> out, failing;
  for (const CheckResult& c : report.checks) {
    if (c.subject.rfind("projections/", 0) != 0 && c.subject.find("/projections/") == std::string::npos) continue;
    if (std::find(out.begin(), out.end(), c.subject) == out.end()) out.push_back(c.subject);
    if (c.failed() && std::find(failing.begin(), failing.end(), c.subject) == failing.end()) {
      failing.push_back(c.subject);
    }
  }
  std::stable_partition(out.begin(), out.end(), [&](const std::string& subject) {
    return std::find(failing.begin(), failing.end(), subject) != failing.end();
  });
  return out;
}

/// The checks in report order, failing ones first.
std::vector<const CheckResult*> failures_first(const Report& report) {
  std::vector<const CheckResult*> out;
  for (const CheckResult& c : report.checks) out.push_back(&c);
  std::stable_partition(out.begin(), out.end(), [](const CheckResult* c) { return c->failed(); });
  return out;
}

/// The plot classes of a check or subject that did not fail: its markers, warning bars and
/// non-finite bins are drawn in neutral colours (render_html.cc's style), so a PASS page shows no
/// red. What counts as alarming is the verdict's to say, not the bins'.
const char* calm(bool failed) { return failed ? "" : " calm"; }

/// The worst verdict of a set of checks (FAIL over PASS over SKIP over N/A).
Verdict worst(const std::vector<const CheckResult*>& checks) {
  Verdict v = Verdict::kNotApplicable;
  for (const CheckResult* c : checks) {
    if (c->verdict == Verdict::kFail) return Verdict::kFail;
    if (c->verdict == Verdict::kPass) v = Verdict::kPass;
    if (c->verdict == Verdict::kSkip && v == Verdict::kNotApplicable) v = Verdict::kSkip;
  }
  return v;
}

// ---- projections ---------------------------------------------------------------------------

std::string bound_first_failure(const BoundFailure& f) {
  const reference::ElementRecord& e = f.element;
  const double beyond = e.value > e.accept.hi ? static_cast<double>(e.value) - e.accept.hi
                                              : static_cast<double>(e.accept.lo) - static_cast<double>(e.value);
  std::string s = "<table class=\"facts first-failure\"><caption>first value outside its interval</caption>";
  s += fact("output", markup(f.output));
  s += fact("element", "row " + std::to_string(e.row) + ", col " + std::to_string(e.col) +
                           (f.slot >= 0 ? ", slot " + std::to_string(f.slot) : std::string()));
  s += fact("engine value", exact(e.value) + " <code>" + hex_bits_f32(e.value) + "</code>");
  s += fact("reference y* (with bias, residual)", exact(e.center));
  s += fact("bound B", exact(e.bound));
  s += fact("accepted interval", "[" + exact(e.accept.lo) + ", " + exact(e.accept.hi) + "]");
  s +=
      fact("outside by", std::isfinite(beyond) ? num(beyond) + (e.bound > 0 ? " (" + num(beyond / e.bound) + " B)" : "")
                                               : markup_fixed(format_float(beyond)));
  return s + "</table>";
}

std::string bound_figures(const BoundEvidence& e, bool f32_output, bool failed) {
  std::string s = "<p class=\"facts\">accumulator <code>" + markup(e.accumulator) + "</code>, u<sub>eff</sub> " +
                  exact(e.u_eff) + ", K " + count_text(e.k) + ": " + count_text(e.elements) + " values, " +
                  count_text(e.outside) + " outside their intervals, " + count_text(e.beyond_tier) +
                  " beyond the probabilistic tier</p>";
  for (const OutputBound& o : e.outputs) {
    const std::string name = markup(o.output);
    HistogramPlot plot;
    // Appended, not "..." + std::string&&: GCC 12 warns falsely on that (-Wrestrict, bug 105329).
    plot.css_class = "bound-hist";
    plot.css_class += calm(failed);
    plot.attributes = "data-output=\"" + name + "\"";
    plot.caption = "|y &#8722; y*| / B of " + name;
    plot.marker_log2 = 0;
    plot.marker_label = "B";
    plot.zero_label = "0";
    plot.other_label = "no finite ratio";
    // A bf16 output's rounding (up to half a bf16 ulp) dwarfs a tight B, so values far above B
    // are correct there: its warning colour is on the share of the interval instead.
    plot.warn_from_marker = f32_output;
    s +=
        "<figure class=\"bound\">" + svg_histogram(o.error_over_bound, plot) + "<figcaption>" + name + ": " +
        count_text(o.stats.elements) + " values; max |y &#8722; y*| / B " + num(o.stats.max_error_over_bound) +
        ", max share of the accepted interval " +
        (o.stats.utilization_note().empty() ? num(o.stats.max_utilization) : markup(o.stats.utilization_note())) +
        ", " + count_text(o.stats.single_valued) + " pinned to a single value, " + count_text(o.stats.outside) +
        " outside" +
        (f32_output ? "" : " (bf16 output: its rounding is part of |y &#8722; y*|, so ratios above 1 can lie inside)") +
        "</figcaption></figure>";
    if (!o.outside.counts.empty()) {
      s += "<figure class=\"grid\">" + svg_failure_grid(o.outside, "data-output=\"" + name + "\"") + "<figcaption>" +
           name + ": where the " + count_text(o.stats.outside) + " values outside their intervals lie (" +
           std::to_string(o.outside.cell_rows) + " &#215; " + std::to_string(o.outside.cell_cols) + " cells of " +
           count_text(o.outside.rows) + " rows &#215; " + count_text(o.outside.cols) +
           " columns)</figcaption></figure>";
    }
  }
  if (e.first) s += bound_first_failure(*e.first);
  return s;
}

/// The location fit of a failing signature test, one sentence (the check's reason words it too).
/// A row fit's other reading where it fits almost as well (FittedRow::alike).
std::string alike_note(const FittedRow& w) {
  if (!w.alike) return "";
  return w.offset ? " (a scale of " + format_scale(w.alike_value) + "&#215; fits almost as well)"
                  : " (a zero point change of " + num(w.alike_value) + " steps fits almost as well)";
}

/// A fit's row with its slot: a packed output's row names its slot too; y_compact's rows are its
/// slots.
std::string fit_row_name(const LocationFit& t, Index r, Index slot) {
  if (slot >= 0 && t.output == "y_compact") return "slot " + std::to_string(slot) + " (row " + std::to_string(r) + ")";
  return "row " + std::to_string(r) + (slot >= 0 ? " (slot " + std::to_string(slot) + ")" : "");
}

/// " (that scale explains 99 % of the row's energy)"; nothing for a pooled fit, whose shares
/// fit_paragraph gives.
std::string explains(const LocationFit& t, const std::string& fits, bool plural) {
  if (t.pooled) return "";
  return " (" + fits + (plural ? " explain " : " explains ") + num(100 * t.scale_explained) + " % of the " +
         (plural ? "rows'" : "row's") + " energy)";
}

/// A row fit (FitKind::kRow) after its row's name: the scale or offset its outputs fit.
std::string row_fit_text(const LocationFit& t, const std::string& row) {
  std::string what = t.pooled ? row + ", pooled over " + std::to_string(t.columns) +
                                    " columns (the strongest significant ones left out): "
                              : row + " alone, over " + std::to_string(t.columns + 1) + " columns tested: ";
  if (!t.pooled && t.scale_explained < 0.9) {
    what += "its outputs fit no scale of their exact values (the best explains " + num(100 * t.scale_explained) +
            " % of the row's energy)";
    return what;
  }
  if (t.offset) {
    what += "its zero points over " + activation_part(t.rows.front()) + " moved by " + num(t.steps) +
            " steps, its activations by " + num(t.value) + alike_note(t.rows.front()) +
            explains(t, "that change", false);
    return what;
  }
  what += "its outputs fit " + format_scale(t.value) + "&#215; " +
          (t.group < 0 ? std::string("their exact values")
                       : "the exact contribution of k " + std::to_string(t.k_begin) + "&#8211;" +
                             std::to_string(t.k_end - 1) + " (activation group " + std::to_string(t.group) + ")") +
          alike_note(t.rows.front()) + explains(t, "that scale", false);
  return what;
}

/// A rows fit (FitKind::kRows): each row with its slot and the scale or offset it fits.
std::string rows_fit_text(const LocationFit& t) {
  // Each row with its slot and the scale its outputs fit; each its part where they differ or
  // where a zero point stands beside a scale.
  const bool any_offset = std::any_of(t.rows.begin(), t.rows.end(), [](const FittedRow& w) { return w.offset; });
  const bool one_part = !any_offset && std::all_of(t.rows.begin(), t.rows.end(),
                                                   [&](const FittedRow& w) { return w.group == t.rows.front().group; });
  std::string list;
  for (std::size_t j = 0; j < t.rows.size(); ++j) {
    const FittedRow& w = t.rows[j];
    if (j > 0) list += j + 1 == t.rows.size() ? " and " : ", ";
    if (w.offset) {
      list += fit_row_name(t, w.row, w.slot) + " moved by " + num(w.value) + " (" + num(w.steps) +
              " zero point steps) over " + activation_part(w) + alike_note(w);
      continue;
    }
    list += fit_row_name(t, w.row, w.slot) + " " + format_scale(w.value) + "&#215;";
    // Each row's own part where they differ.
    if (!one_part) {
      list += w.group < 0 ? " of its whole dot product"
                          : " of k " + std::to_string(w.k_begin) + "&#8211;" + std::to_string(w.k_end - 1);
    }
    list += alike_note(w);
  }
  std::string what = std::to_string(t.rows.size()) +
                     (t.pooled ? " rows, pooled over " + std::to_string(t.columns) +
                                     " columns (the strongest significant ones left out): "
                               : " rows alone, over " + std::to_string(t.columns + 1) + " columns tested: ");
  if (!t.pooled && t.scale_explained < 0.9) {
    what += "their outputs fit no scale of their exact values (the best explains " + num(100 * t.scale_explained) +
            " % of the rows' energy)";
    return what;
  }
  if (any_offset) {
    what += "their activations over one part of K fit a scale or a zero point change: " + list +
            explains(t, "those fits", true);
    return what;
  }
  what += "their outputs fit scales of " +
          (!one_part     ? std::string("parts of their exact values")
           : t.group < 0 ? std::string("their exact values")
                         : "the exact contribution of k " + std::to_string(t.k_begin) + "&#8211;" +
                               std::to_string(t.k_end - 1) + " (activation group " + std::to_string(t.group) + ")") +
          ": " + list + explains(t, "those scales", true);
  return what;
}

std::string fit_paragraph(const LocationFit& t) {
  const std::string shares =
      t.pooled ? (t.rows.size() == 1 ? " (the row's fit explains " + num(100 * t.explained) + " %"
                                     : " (each row's fit explains " + num(100 * t.explained) + " % or more") +
                     " of its residual energy there, " + "where rounding noise reaches " + num(100 * t.chance_share) +
                     " % with probability 1e-9 over " + std::to_string(t.fits) + " fits; the best other row " +
                     num(100 * t.alternative_explained) + " %)"
               : " (" + num(100 * t.explained) + " % of the residual energy; the best alternative " +
                     num(100 * t.alternative_explained) + " %)";
  const std::string row = fit_row_name(t, t.row, t.slot);
  std::string what;
  switch (t.kind) {
    case FitKind::kRow:
      what = row_fit_text(t, row);
      break;
    case FitKind::kRows:
      what = rows_fit_text(t);
      break;
    case FitKind::kElement:
      what = row + " of column " + std::to_string(t.col) + " alone: off by " + exact(t.value) +
             " (the row stands out in no more of " + std::to_string(t.columns) +
             " other columns tested than rows of noise do)";
      break;
    case FitKind::kElements:
      what = std::to_string(t.rows.size()) + " values alone: ";
      for (std::size_t j = 0; j < t.rows.size(); ++j) {
        const FittedRow& w = t.rows[j];
        if (j > 0) what += j + 1 == t.rows.size() ? " and " : ", ";
        what += fit_row_name(t, w.row, w.slot) + " of column " + std::to_string(w.col) + " off by " + exact(w.value);
      }
      what += " (their rows stand out in no more of " + std::to_string(t.columns) +
              " other columns tested than rows of noise do)";
      break;
    case FitKind::kColumnOffset:
      what = "column " + std::to_string(t.col) + ": every row's output off by " + exact(t.value) +
             " (a wrong bias, or an offset where none is declared)";
      break;
    case FitKind::kGroupOffset:
      what = "column " + std::to_string(t.col) + ", group " + std::to_string(t.group) + " (k " +
             std::to_string(t.k_begin) + "&#8211;" + std::to_string(t.k_end - 1) + "): its weights off by " +
             exact(t.value);
      // An affine group whose scale fits alike: its bias, its scale or both.
      if (t.scale_explained > 0) {
        return "<p class=\"fit\">" + markup(t.output) + " " + what + " (its bias: " + num(100 * t.explained) +
               " % of the residual energy), or its scale off (" + num(100 * t.scale_explained) +
               " %), or both (the best other place " + num(100 * t.alternative_explained) + " %)</p>";
      }
      break;
    case FitKind::kGroupScale:
      what = "column " + std::to_string(t.col) + ", affine group " + std::to_string(t.group) + " (k " +
             std::to_string(t.k_begin) + "&#8211;" + std::to_string(t.k_end - 1) + "): its scale " + num(t.value) +
             "&#215; the dumped one";
      break;
    case FitKind::kColumnSwap:
      what = "column " + std::to_string(t.col) + " holds column " + std::to_string(t.other_col) + "'s exact " +
             (t.with_epilogue ? "outputs" : "dot products") + " (fitted " + num(t.value) + "&#215;)" +
             (t.exchanged ? ", and column " + std::to_string(t.other_col) + " holds its: the two exchanged" : "");
      break;
    case FitKind::kScaleBlock:
      what = "columns " + std::to_string(t.col_begin) + "&#8211;" + std::to_string(t.col_end - 1) +
             (t.group >= 0 ? ", group " + std::to_string(t.group) : std::string()) + " (k " +
             std::to_string(t.k_begin) + "&#8211;" + std::to_string(t.k_end - 1) + "): the scale they share (scales[" +
             std::to_string(t.scale_row) + ", " + std::to_string(std::max<Index>(t.group, 0)) + "]) " + num(t.value) +
             "&#215; the dumped one, over " + std::to_string(t.columns) + " of them fitted";
      break;
    case FitKind::kRange:
      what = "k " + std::to_string(t.k_begin) + "&#8211;" + std::to_string(t.k_end - 1) +
             (t.value < 1 ? " missing" : " counted twice") + " in each of the " + std::to_string(t.columns) +
             " columns fitted (" + num(t.value) + "&#215; that range's exact contribution)";
      break;
  }
  return "<p class=\"fit\">" + markup(t.output) + " " + what + shares + "</p>";
}

/// The signature test's z of every candidate against its threshold, and the strongest ones.
std::string signature_figures(const SignatureEvidence& e, bool failed) {
  HistogramPlot plot;
  plot.css_class = "signature-hist";
  plot.css_class += calm(failed);
  plot.caption = "z of every (output, column, K range) candidate computed, and the bound of each column screened";
  plot.marker_log2 = static_cast<int>(std::floor(std::log2(std::max(e.threshold, 1.0))));
  plot.marker_label = "threshold " + num(e.threshold);
  plot.zero_label = "&#8804; 0";
  plot.other_label = "no rounding";
  std::string s = "<figure class=\"signature\">" + svg_histogram(e.z, plot) +
                  "<figcaption>signature: " + count_text(e.candidates) + " candidates over K ranges from " +
                  count_text(e.tile) + " columns wide, " + count_text(e.significant) + " (in " +
                  count_text(e.significant_columns) + " output columns) beyond the threshold " + num(e.threshold) +
                  " (false-alarm probability &#8804; 1e-9; the marked bin holds it)</figcaption></figure>";
  if (e.zero_point) {
    const ZeroPointFinding& z = *e.zero_point;
    s += "<p class=\"zero-point\">" + markup(z.output) + " column " + std::to_string(z.col) + ", group " +
         std::to_string(z.group) + " (k " + std::to_string(z.k_begin) + "&#8211;" + std::to_string(z.k_end - 1) +
         "): the residuals fit that group's zero point " + (z.shift > 0 ? "+" : "") + num(std::round(z.shift)) +
         " (fitted " + num(z.shift) + "), which explains " + num(100 * z.explained) +
         " % of the column's residual energy (the best alternative, a scale or an offset: " +
         num(100 * z.alternative_explained) + " %)</p>";
  }
  if (e.fit) s += fit_paragraph(*e.fit);
  if (e.strongest.empty()) return s;
  s += "<table class=\"signature\"><tr><th>output</th><th>column</th><th>k</th><th>z</th><th>fit</th></tr>";
  for (const SignatureFinding& f : e.strongest) {
    s += "<tr><td>" + markup(f.output) + "</td><td>" + std::to_string(f.col) + "</td><td>" + std::to_string(f.k_begin) +
         "&#8211;" + std::to_string(f.k_end - 1) +
         (f.group >= 0 ? " (group " + std::to_string(f.group) + ")" : std::string()) + "</td><td>" + num(f.z) +
         "</td><td>" + num(1 + f.fit) + "&#215;</td></tr>";
  }
  return s + "</table>";
}

std::string projection_section(const Report& report, const std::string& subject) {
  std::vector<const CheckResult*> checks;
  for (const CheckResult& c : report.checks) {
    if (c.subject == subject) checks.push_back(&c);
  }
  std::string s = "<section class=\"subject projection\" data-subject=\"" + markup(subject) + "\"><h3>" +
                  id_markup(subject) + " " + verdict_badge(worst(checks)) + "</h3><p class=\"kinds\">";
  for (const CheckResult* c : checks) {
    s += "<span class=\"kind " + verdict_class(c->verdict) + "\" title=\"" + markup(c->reason) + "\">" +
         markup(c->id.substr(std::min(c->id.size(), subject.size() + 1))) + " " +
         std::string(verdict_name(c->verdict)) + "</span> ";
  }
  s += "</p>";
  std::string failures;
  for (const CheckResult* c : checks) {
    if (c->failed()) failures += "<li><b>" + markup(check_kind_name(c->kind)) + "</b> " + markup(c->reason) + "</li>";
  }
  if (!failures.empty()) s += "<ul class=\"failures\">" + failures + "</ul>";
  bool plotted = false;
  for (const CheckResult* c : checks) {
    const auto* bound = std::get_if<BoundEvidence>(&c->evidence);
    if (!bound || bound->outputs.empty()) continue;
    s += bound_figures(*bound, bound->output == DType::kF32, c->failed());
    plotted = true;
  }
  for (const CheckResult* c : checks) {
    if (const auto* sig = std::get_if<SignatureEvidence>(&c->evidence)) s += signature_figures(*sig, c->failed());
  }
  if (!plotted) s += "<p class=\"note\">no bound evidence: the reference did not run for this projection</p>";
  return s + "</section>";
}

// ---- witnesses ----------------------------------------------------------------------------

std::string witness_section(const CheckResult& c, const WitnessEvidence& e) {
  std::string s = "<section class=\"subject witnesses\" data-subject=\"" + markup(c.subject) + "\"><h3>" +
                  id_markup(c.id) + " " + verdict_badge(c.verdict) + "</h3>";
  s += "<table class=\"facts classes\">" +
       fact("emissions", count_text(e.tokens) + " (vocabulary " + count_text(e.vocab) + ")") +
       fact("error model", markup(e.error_source)) + fact("certified", count_text(e.certified)) +
       fact("near-tie", count_text(e.near_tie)) + fact("tie", count_text(e.tie)) +
       fact("unbounded", count_text(e.unbounded)) + fact("failed", count_text(e.failed)) + "</table>";
  HistogramPlot abs_plot;
  abs_plot.css_class = "margin-hist";
  abs_plot.css_class += calm(c.failed());
  abs_plot.attributes = "data-unit=\"logit\"";
  abs_plot.caption = "margin over the runner-up (logit units)";
  abs_plot.zero_label = "tie";
  abs_plot.other_label = "not finite";
  HistogramPlot ulp_plot = abs_plot;
  ulp_plot.attributes = "data-unit=\"ulp\"";
  ulp_plot.caption =
      "margin over the runner-up (" + std::string(dtype_name(e.logits_dtype)) + " ulps of the emitted logit)";
  s += "<figure>" + svg_histogram(e.margin, abs_plot) + "</figure><figure>" + svg_histogram(e.margin_ulps, ulp_plot) +
       "</figure>";
  if (!e.tightest.empty()) {
    s += "<table class=\"tightest\"><caption>the tightest emissions</caption><tr>" + th("position") + th("token") +
         th("logit") + th("runner-up") + th("margin") + th(std::string(dtype_name(e.logits_dtype)) + " ulps") +
         th("class") + "</tr>";
    for (const Witness& w : e.tightest) {
      s += "<tr>" + td(std::to_string(w.position)) + td(std::to_string(w.token)) +
           td(markup_fixed(format_f32(w.logit))) +
           td(std::to_string(w.runner_up) + " (" + markup_fixed(format_f32(w.runner_up_logit)) + ")") +
           td(num(w.margin)) + td(num(w.margin_dtype_ulps)) + td(markup(witness_class_name(w.cls))) + "</tr>";
    }
    s += "</table>";
  }
  if (e.first_failure) {
    s += "<p class=\"failure\">first failure: position " + std::to_string(e.first_failure->position) + ", token " +
         std::to_string(e.first_failure->token) + ": " + markup(e.first_failure->failure) + "</p>";
  }
  return s + "</section>";
}

// ---- compare ------------------------------------------------------------------------------

std::string percentile_row(const std::string& name, const Distribution& d) {
  if (d.empty) return "<tr><th>" + name + "</th><td colspan=\"7\">no rows</td></tr>";
  return "<tr><th>" + name + "</th>" + td(num(d.min)) + td(num(d.p50)) + td(num(d.p90)) + td(num(d.p95)) +
         td(num(d.p99)) + td(num(d.p999)) + td(num(d.max)) + "</tr>";
}

std::string logits_section(const CheckResult& c, const LogitsEvidence& e) {
  std::string s = "<section class=\"subject logits\" data-check=\"" + markup(c.id) + "\"><h3>" + id_markup(c.id) + " " +
                  verdict_badge(c.verdict) + "</h3><p class=\"reason\">" + markup(c.reason) + "</p>";
  s += "<table class=\"facts\">" +
       fact("policy", "<code>" + markup(e.policy) + "</code>" +
                          (e.policy_source.empty() ? std::string() : " (" + markup(e.policy_source) + ")")) +
       fact("rows",
            count_text(e.matched) + " matched of " + count_text(e.compared) + " compared (A " + count_text(e.rows_a) +
                ", B " + count_text(e.rows_b) + ")" +
                (e.divergence_row >= 0 ? "; histories diverge at row " + std::to_string(e.divergence_row) : "")) +
       fact("bit-identical rows", count_text(e.bit_identical_rows)) +
       (e.matched > 0
            ? fact("top-1 agreement",
                   num(100 * e.top1_agreement) + " % (&#177; " + num(100 * e.top1_agreement_stderr) + ")") +
                  fact("top-5 / top-10 overlap", num(e.top5_overlap_mean) + " / " + num(e.top10_overlap_mean)) +
                  fact("KL(A||B) mean, JSD max", num(e.kl_mean) + ", " + num(e.jsd_max))
            : fact("agreement", "none to state: no matched rows")) +
       (e.dtype_a != e.dtype_b
            ? fact("largest difference", e.max_ulp_row >= 0
                                             ? "row " + std::to_string(e.max_ulp_row) + " col " +
                                                   std::to_string(e.max_ulp_col) + ": " + num(e.max_ulp_a) + " (" +
                                                   markup(dtype_name(e.dtype_a)) + ") vs " + num(e.max_ulp_b) + " (" +
                                                   markup(dtype_name(e.dtype_b)) + "), |d| " +
                                                   num(std::fabs(static_cast<double>(e.max_ulp_b) - e.max_ulp_a)) +
                                                   ", relative " + num(relative_difference(e.max_ulp_a, e.max_ulp_b))
                                             : std::string("none"))
            : std::string()) +
       (e.dtype_a != e.dtype_b
            ? std::string()
            : fact("max ulps",
                   (e.max_ulp == reference::kUlpInfinite ? std::string("inf")
                                                         : count_text(static_cast<long long>(e.max_ulp))) +
                       (e.max_ulp_row >= 0 && ulps_cross_zero(e.max_ulp_a, e.max_ulp_b)
                            ? " counted through zero (row " + std::to_string(e.max_ulp_row) + " col " +
                                  std::to_string(e.max_ulp_col) + ": " + num(e.max_ulp_a) + " vs " + num(e.max_ulp_b) +
                                  ", opposite signs or a zero: not a measure of closeness)"
                            : std::string()))) +
       fact("failing", count_text(e.failing_rows) + " rows" +
                           (e.element_policy ? ", " + count_text(e.failing_elements) + " elements" : "")) +
       "</table>";
  const PositionSeries& ps = e.series;
  if (ps.rows > 0) {
    std::vector<std::pair<Index, std::string>> markers;
    if (e.first_failure_row >= 0)
      markers.emplace_back(e.first_failure_row, "first failure, row " + std::to_string(e.first_failure_row));
    const std::string per =
        ps.rows_per_point > 1 ? " (largest of every " + std::to_string(ps.rows_per_point) + " rows)" : "";
    const std::string quiet(calm(c.failed()));
    SeriesPlot kl{"kl" + quiet, "data-series=\"kl\"", "KL(A||B) per position" + per, true, markers};
    SeriesPlot dmax{"max-abs" + quiet, "data-series=\"max_abs\"", "max |d| per position" + per, true, markers};
    SeriesPlot top1{"top1" + quiet, "data-series=\"top1\"",
                    "top-1 agreement per position" +
                        (ps.rows_per_point > 1 ? " (share of every " + std::to_string(ps.rows_per_point) + " rows)"
                                               : std::string()),
                    false, markers};
    std::vector<double> agree;
    for (std::size_t i = 0; i < ps.top1_agree.size(); ++i) {
      agree.push_back(static_cast<double>(ps.top1_agree[i]) /
                      static_cast<double>(std::max<Index>(ps.group_rows(i), 1)));
    }
    s += "<figure>" + svg_series(ps.kl_max, ps.rows, ps.rows_per_point, kl) + "</figure><figure>" +
         svg_series(ps.max_abs, ps.rows, ps.rows_per_point, dmax) + "</figure><figure>" +
         svg_series(agree, ps.rows, ps.rows_per_point, top1) + "</figure>";
  }
  s += "<table class=\"percentiles\"><caption>per-row figures over the matched rows</caption><tr>" + th("") +
       th("min") + th("p50") + th("p90") + th("p95") + th("p99") + th("p99.9") + th("max") + "</tr>" +
       percentile_row("KL(A||B)", e.kl_ab) + percentile_row("max |d|", e.max_abs_diff) + "</table>";
  if (!c.details.empty()) {
    // The first lines only: they name the failing row in full (the checks table holds up to 40).
    constexpr std::size_t kLines = 8;
    s += "<ul class=\"details\">";
    for (std::size_t i = 0; i < std::min(kLines, c.details.size()); ++i) s += "<li>" + markup(c.details[i]) + "</li>";
    s += "</ul>";
  }
  return s + "</section>";
}

std::string tensor_table(const Report& report) {
  std::string rows;
  for (const CheckResult& c : report.checks) {
    const auto* t = std::get_if<TensorEvidence>(&c.evidence);
    if (!t) continue;
    std::string shape;
    for (Index d : t->shape) shape += (shape.empty() ? "" : " &#215; ") + std::to_string(d);
    rows +=
        "<tr class=\"" + verdict_class(c.verdict) + "\">" + td(verdict_badge(c.verdict)) + "<td class=\"id\">" +
        id_markup(c.id) + "</td>" + td("<code>" + markup(t->policy) + "</code>") + td(markup(dtype_name(t->dtype))) +
        td(shape) +
        (t->compared
             ? td(count_text(t->elements)) + td(count_text(t->violations)) + td(num(t->max_abs_diff)) +
                   td(t->max_ulp == reference::kUlpInfinite ? "inf" : count_text(static_cast<long long>(t->max_ulp)))
             : "<td colspan=\"4\">not compared: " + markup(t->note) + "</td>") +
        "</tr>";
  }
  if (rows.empty()) return "";
  return "<section class=\"tensors\"><h3>tensors</h3><table class=\"tensors\"><tr>" + th("") + th("check") +
         th("policy") + th("dtype") + th("shape") + th("elements") + th("violations") + th("max |d|") + th("max ulps") +
         "</tr>" + rows + "</table></section>";
}

// ---- forks --------------------------------------------------------------------------------

std::string top_table(const char* side, const ForkSide& s, const std::vector<std::string>& text, std::int32_t own,
                      std::int32_t other) {
  // Margins and gaps in ulps of the run's own logits type (bf16 values are 2^16 f32 ulps apart).
  const std::string unit = std::string(dtype_name(s.witness.logits_dtype)) + " ulps";
  std::string t = "<div class=\"side\"><p class=\"side-head\">run " + std::string(side) + ": emits " +
                  std::to_string(own) + " (margin " + num(s.witness.margin) + ", " + num(s.witness.margin_dtype_ulps) +
                  " " + unit + "); the other run's " + std::to_string(other) + " ranks " +
                  std::to_string(s.other_rank) + ", gap " + num(s.gap) + " (" + num(s.gap_dtype_ulps) + " " + unit +
                  ")</p><table class=\"topk side-" + side + "\"><tr>" + th("rank") + th("token") +
                  (text.empty() ? "" : th("text")) + th("logit") + th("gap") + "</tr>";
  for (std::size_t i = 0; i < s.top.size(); ++i) {
    const TopEntry& e = s.top[i];
    const std::string css = e.token == own ? " class=\"own\"" : e.token == other ? " class=\"other\"" : "";
    t += "<tr" + css + ">" + td(std::to_string(i + 1)) + td(std::to_string(e.token)) +
         (text.empty() ? "" : td("<code>" + markup(i < text.size() ? text[i] : "") + "</code>")) +
         td(markup_fixed(format_f32(e.logit))) + td(num(e.gap)) + "</tr>";
  }
  return t + "</table></div>";
}

std::string fork_section(const CheckResult& c, const ForkEvidence& e) {
  const Fork& f = e.fork;
  const std::string cls = markup(fork_class_name(f.cls));
  std::string s = "<section class=\"fork\" data-check=\"" + markup(c.id) + "\" data-class=\"" + cls + "\"><h3>" +
                  id_markup(c.id) + " " + verdict_badge(c.verdict) + " <span class=\"class\">" + cls + "</span></h3>";
  s += "<p>position " + std::to_string(f.position) + " (row " + std::to_string(f.row) + "): A emits " +
       std::to_string(f.token_a) + (e.has_text ? " <code>" + markup(e.text_a) + "</code>" : "") + ", B emits " +
       std::to_string(f.token_b) + (e.has_text ? " <code>" + markup(e.text_b) + "</code>" : "") + "</p>";
  std::string ids;
  for (std::int32_t t : f.context) {
    if (!ids.empty()) ids += ' ';
    ids += std::to_string(t);
  }
  s += "<p class=\"context\">after " + (e.has_text ? "<code>" + markup(e.context_text) + "</code> " : std::string()) +
       "[" + ids + "]</p>";
  s += "<div class=\"sides\">" + top_table("A", f.a, e.top_a_text, f.token_a, f.token_b) +
       top_table("B", f.b, e.top_b_text, f.token_b, f.token_a) + "</div>";
  const auto within = [&](double d, double env) {
    return !f.has_envelope ? std::string("no envelope") : d <= env ? std::string("within") : std::string("beyond");
  };
  s += "<p class=\"envelope-source\">envelope: " + markup(f.envelope_source) + "</p><table class=\"envelope\"><tr>" +
       th("token") + th("|d| = |L<sub>A</sub> &#8722; L<sub>B</sub>|") + th("envelope") + th("") + "</tr><tr>" +
       td(std::to_string(f.token_a)) + td(num(f.delta_a)) + td(num(f.env_a)) + td(within(f.delta_a, f.env_a)) +
       "</tr><tr>" + td(std::to_string(f.token_b)) + td(num(f.delta_b)) + td(num(f.env_b)) +
       td(within(f.delta_b, f.env_b)) + "</tr></table>";
  s += "<p>before the fork: " + count_text(f.before.rows) + " matched rows, " + count_text(f.before.bit_identical) +
       " bit-identical; max |d| " + num(f.before.max_abs) + ", per-row max |d| p50 " + num(f.before.p50) + ", p99 " +
       num(f.before.p99) + "</p><p class=\"why\">" + markup(f.why) + "</p>";
  return s + "</section>";
}

}  // namespace

std::string verdict_class(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kSkip:
      return "skip";
    case Verdict::kNotApplicable:
      return "na";
  }
  return "skip";
}

std::string verdict_badge(Verdict v) {
  return "<span class=\"badge " + verdict_class(v) + "\">" + std::string(verdict_name(v)) + "</span>";
}

std::string projection_sections(const Report& report) {
  std::string s;
  for (const std::string& subject : projection_subjects(report)) s += projection_section(report, subject);
  return s;
}

std::string witness_sections(const Report& report) {
  std::string s;
  for (const CheckResult* c : failures_first(report)) {
    if (const auto* e = std::get_if<WitnessEvidence>(&c->evidence)) s += witness_section(*c, *e);
  }
  return s;
}

std::string compare_sections(const Report& report) {
  std::string s;
  for (const CheckResult* c : failures_first(report)) {
    if (const auto* e = std::get_if<LogitsEvidence>(&c->evidence)) s += logits_section(*c, *e);
  }
  return s + tensor_table(report);
}

std::string fork_sections(const Report& report) {
  std::string s;
  for (const CheckResult* c : failures_first(report)) {
    if (const auto* e = std::get_if<ForkEvidence>(&c->evidence)) {
      s += fork_section(*c, *e);
    } else if (std::holds_alternative<NoForkEvidence>(c->evidence)) {
      s += "<section class=\"fork\" data-check=\"" + markup(c->id) + "\" data-class=\"none\"><h3>" + id_markup(c->id) +
           " " + verdict_badge(c->verdict) + "</h3><p>" + markup(c->reason) + "</p></section>";
    }
  }
  return s;
}

}  // namespace ncert::certify::detail
