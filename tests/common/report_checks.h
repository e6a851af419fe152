// Test support: a report's checks found by id, and the ids of those that FAIL (the integration
// tests' way to hold a report to the fault table's exact set of failing checks).
#pragma once

#include <set>
#include <string>

#include "certify/report/report.h"

namespace ncert::testing {

/// The check with this id, or nullptr.
inline const certify::CheckResult* find_check(const certify::Report& r, const std::string& id) {
  for (const certify::CheckResult& c : r.checks) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

/// The ids of the checks that FAIL.
inline std::set<std::string> failing_ids(const certify::Report& r) {
  std::set<std::string> out;
  for (const certify::CheckResult& c : r.checks) {
    if (c.verdict == certify::Verdict::kFail) out.insert(c.id);
  }
  return out;
}

}  // namespace ncert::testing
