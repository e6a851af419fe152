// Test support: a report's checks found by id, the ids of those that FAIL (the integration tests'
// way to hold a report to the fault table's exact set of failing checks), and a check's typed
// evidence (tests assert what a check found, not how its reason words it).
#pragma once

#include <set>
#include <string>
#include <variant>

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

/// The check's evidence as `E`, or nullptr when there is no check or it holds another kind's.
template <class E>
const E* evidence_of(const certify::CheckResult* c) {
  return c ? std::get_if<E>(&c->evidence) : nullptr;
}

}  // namespace ncert::testing
