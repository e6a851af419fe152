// Test helper: a check's `stats` exactly as the JSON report renders them (the report is the
// contract the tests hold ncert to).
#pragma once

#include <string>
#include <vector>

#include "certify/report/report.h"

namespace ncert::certify {

inline Json stats(const CheckResult& c) { return check_json(c)["stats"]; }

/// A report's JSON without its wall-clock fields (docs/cli.md: reports are identical apart from
/// fields named timing_*), for comparing two runs of the same input.
inline Json without_timing(Json report) {
  std::vector<std::string> timing;
  for (auto it = report["stats"].begin(); it != report["stats"].end(); ++it) {
    if (it.key().rfind("timing_", 0) == 0) timing.push_back(it.key());
  }
  for (const std::string& k : timing) report["stats"].erase(k);
  return report;
}

}  // namespace ncert::certify
