// This header defines the HTML report (`--html PATH`, docs/cli.md "HTML and JUnit reports"): one
// self-contained page that needs nothing outside itself. Its Content-Security-Policy is
// `default-src 'none'` with inline styles and data: images only, it holds no script, and its plots
// are inline SVG drawn from the checks' typed evidence (detail/html_sections.h). From the top: the
// verdict; a summary with one row per part (a campaign's entry, or a single command's subject:
// verdict, counts, worst finding), failing parts first; the inputs and their hashes (and a single
// command's coverage table); then every part as a <details> block, the failing ones open and
// first, the others collapsed, each with its checks (failures first; a failures-only filter that
// works without script) and its evidence sections; the command's stats and extra members (capped
// tables). Plots of checks that did not fail are drawn without alarm colours; ids wrap at '/'.
//
// Size: everything that grows with the data is capped (series at 512 points, failure maps at
// 32 x 64 cells, witness lists at 10, extra tables at 200 rows, detail lines at 40 per check),
// so a page depends on the number of checks, not on rows or vocabulary.
#pragma once

#include <string>

#include "certify/report/report.h"

namespace ncert::certify {

/// The page, as UTF-8 text. Every string that came from a dump is escaped (detail/html_markup.h).
std::string render_html(const Report& report);

}  // namespace ncert::certify
