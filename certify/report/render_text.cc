// The human summary of a report: the preamble, one line per check (PASS/FAIL, id, reason),
// detail lines under failures (and under checks that always explain themselves), the verdict.
#include <sstream>

#include "certify/report/report.h"

namespace ncert::certify {

std::string Report::to_text(bool only_failures) const {
  std::ostringstream os;
  if (!only_failures) {
    for (const std::string& l : preamble) os << l << "\n";
  }
  std::size_t width = 0;
  for (const CheckResult& c : checks) width = std::max(width, c.id.size());
  width = std::min<std::size_t>(width, 56);
  for (const CheckResult& c : checks) {
    if (only_failures && !c.failed()) continue;
    os << verdict_name(c.verdict) << "  " << c.id;
    if (c.id.size() < width) os << std::string(width - c.id.size(), ' ');
    os << "  " << c.reason << "\n";
    if (c.failed() || c.always_show_details) {
      for (const std::string& d : c.details) os << "      " << d << "\n";
    }
  }
  if (error) os << "REFUSED  " << error->to_string() << "\n";
  const int failed = failed_checks();
  os << "verdict: " << verdict_name(verdict());
  if (error) {
    os << " (input refused, exit " << exit_code() << ")";
  } else if (failed > 0) {
    os << " (" << failed << " of " << checks.size() << " checks failed)";
  } else {
    os << " (" << checks.size() << " checks passed)";
  }
  os << "\n";
  return os.str();
}

}  // namespace ncert::certify
