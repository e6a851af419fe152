// This header defines the evidence sections of the HTML report (render_html.h), one function
// per kind of evidence, each reading the typed evidence of the checks of the report it is given
// (render_html.cc hands it one part of the page: a campaign's entry, or one subject):
//   projections  per projection (subject "projections/<name>", or "<entry>/projections/<name>"
//                in a campaign): the checks by kind, |y - y*| / B histograms per output, the
//                map of values outside their intervals, the bound's first failure in full
//   witnesses    per run: the classes, the margin distributions (absolute and in ulps), the
//                tightest emissions
//   compare      per run pair: KL(A||B), max |d| and top-1 agreement along the run, the
//                percentiles table; per tensor: its comparison
//   forks        per fork: both runs' top-5 side by side (decoded text with --vocab), the
//                envelope, the class
// Each returns its <section>s, those of failing checks (subjects) first, or "" when the report
// holds no such evidence. The plots of a check that did not fail carry the class "calm" (no red,
// no warning colour). Every string from a dump goes through markup() (html_markup.h).
#pragma once

#include <string>

#include "certify/report/report.h"

namespace ncert::certify::detail {

/// "pass", "fail" or "skip": the CSS class of a verdict.
std::string verdict_class(Verdict v);
/// <span class="badge pass|fail|skip">PASS</span>
std::string verdict_badge(Verdict v);

std::string projection_sections(const Report& report);
std::string witness_sections(const Report& report);
std::string compare_sections(const Report& report);
std::string fork_sections(const Report& report);

}  // namespace ncert::certify::detail
