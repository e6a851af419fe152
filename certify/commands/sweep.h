// This header defines the library entry point of `ncert sweep`: run the packing helper's
// default case table (or one case given by its repro key) and report per kind: identity
// (packed vs unpacked, bit for bit; width buckets), alias (in-place residual) and guard
// (every violation refused with its code, nothing touched). Top-level stats carry
// identity_comparisons, alias_cases, guard_cases and guards_covered (docs/cli.md).
#pragma once

#include <string>

#include "certify/report/report.h"
#include "packing/sweep.h"

namespace ncert::certify {

struct SweepOptions {
  std::string case_key;  ///< empty: the default table
  std::string filter;    ///< run only cases whose key contains this text
  /// The helper under test: the packing helper itself; self-tests hand in broken ones.
  packing::ExecuteFn helper = packing::execute;
};

/// kUsage for a malformed --case key or a filter that selects nothing.
Result<Report> run_sweep(const SweepOptions& options);

}  // namespace ncert::certify
