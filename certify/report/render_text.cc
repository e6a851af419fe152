// The human summary of a report: the preamble, one line per check (PASS/FAIL, id, reason),
// detail lines under failures (and under checks that always explain themselves), the verdict.
#include <algorithm>
#include <sstream>

#include "certify/report/printable.h"
#include "certify/report/report.h"

namespace ncert::certify {

namespace {

/// The coverage table: one line per subject, one column per check kind that any subject has.
std::string coverage_text(const std::vector<CoverageRow>& rows) {
  if (rows.empty()) return "";
  std::vector<CheckKind> columns;
  std::size_t width = 8;
  for (const CoverageRow& r : rows) {
    width = std::max(width, printable(r.subject).size());
    for (const auto& [k, v] : r.kinds) {
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
    }
  }
  std::sort(columns.begin(), columns.end());
  std::string out;
  auto end_line = [&](std::string line) {
    line.erase(line.find_last_not_of(' ') + 1);  // no trailing blanks
    out += line + "\n";
  };
  std::string head = "coverage" + std::string(width - 8 + 2, ' ');
  for (CheckKind k : columns) head += std::string(check_kind_name(k)) + "  ";
  end_line(head);
  for (const CoverageRow& r : rows) {
    const std::string subject = printable(r.subject);
    std::string line = subject + std::string(width - subject.size() + 2, ' ');
    for (CheckKind k : columns) {
      const auto cell = std::find_if(r.kinds.begin(), r.kinds.end(), [&](const auto& kv) { return kv.first == k; });
      const std::string text = cell == r.kinds.end() ? "-" : std::string(verdict_name(cell->second));
      line += text + std::string(check_kind_name(k).size() + 2 - text.size(), ' ');
    }
    end_line(line);
  }
  return out;
}

}  // namespace

std::string Report::to_text(bool only_failures) const {
  std::ostringstream os;
  if (!only_failures) {
    for (const std::string& l : preamble) os << printable(l) << "\n";
  }
  // Every string may carry bytes from the dump (object names, attribute values): printed
  // escaped, so no name can start a line of its own or reach the terminal as a control code.
  std::size_t width = 0;
  for (const CheckResult& c : checks) width = std::max(width, printable(c.id).size());
  width = std::min<std::size_t>(width, 56);
  for (const CheckResult& c : checks) {
    if (only_failures && !c.failed()) continue;
    // A refusal is said once, on the REFUSED line below (refuse() also records it as the
    // failing schema check, for the JSON and the coverage).
    if (error && c.kind == CheckKind::kSchema && c.reason == error->message()) continue;
    const std::string id = printable(c.id);
    os << verdict_name(c.verdict) << (c.expected_skip() ? " (expected)" : "") << "  " << id;
    if (id.size() < width) os << std::string(width - id.size(), ' ');
    os << "  " << printable(c.reason) << "\n";
    if (c.policy_match) os << "      " << printable(policy_match_text(c)) << "\n";
    if (c.failed() || c.always_show_details) {
      for (const std::string& d : c.details) os << "      " << printable(d) << "\n";
    }
  }
  if (error) os << "REFUSED  " << printable(error->to_string()) << "\n";
  if (show_coverage && !only_failures && !error) os << coverage_text(coverage());
  const int failed = failed_checks(), skipped = skipped_checks(), expected = expected_skips();
  const int inapplicable = not_applicable_checks();
  std::string skips = skipped > 0 ? ", " + std::to_string(skipped) + " skipped" : "";
  if (expected > 0) skips += " (" + std::to_string(expected) + " expected by policy)";
  if (inapplicable > 0) skips += ", " + std::to_string(inapplicable) + " not applicable";
  os << "verdict: " << verdict_name(verdict());
  if (error) {
    os << " (input refused, exit " << exit_code() << ")";
  } else if (failed > 0) {
    os << " (" << failed << " of " << checks.size() << " checks failed" << skips << ")";
  } else {
    const std::size_t passed = checks.size() - static_cast<std::size_t>(skipped + inapplicable);
    os << " (" << passed << (passed == 1 ? " check passed" : " checks passed") << skips << ")";
  }
  os << "\n";
  return os.str();
}

}  // namespace ncert::certify
