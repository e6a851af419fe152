// This header defines wording forks: where two runs' token streams diverge, both emissions'
// witnesses and a class for the fork (the check behind `ncert forks A.h5 B.h5`).
//
// Runs pair as in `ncert compare`. Without --matched-history the fork is the first position
// whose emitted tokens differ (later rows have other histories); with it (B teacher-forced on
// A's tokens) every such position is a fork. At a fork where A emits a and B emits b:
//   - each side's own witness (its emission is its own row's maximum under the tie rule);
//   - the cross view: b's rank and logit in A's row, a's in B's; the gaps L_A[a] - L_A[b] and
//     L_B[b] - L_B[a], exact and in ulps; |d_x| = |L_A[x] - L_B[x]| at x = a and x = b;
//   - the envelope e_x, the largest disagreement between the two runs' values of logit x that
//     numerics allow: with an lm_head projection on both sides, the sum of the two reference
//     intervals' half-widths at x; else with --logit-error E, 2E; else the largest |d| observed
//     on the matched rows before the fork (none: e = 0).
// Classes (docs/error-bounds.md §8):
//   invalid      a side's emission is not its own row's maximum (or the row holds NaN / +Inf)
//   unexplained  |d_a| > e_a or |d_b| > e_b: the rows differ by more than numerics allow
//   tie          within the envelope, and a row holds a and b as bit-identical maxima
//   near-tie     within the envelope: since gap_A + gap_B = d_b - d_a, both gaps are then
//                within e_a + e_b too, and either order is numerically legitimate
// Verdict: PASS iff every fork is a tie or a near-tie; --require-identical fails on any fork
// and on streams of different lengths.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/logits/compare.h"
#include "certify/logits/vocab.h"
#include "certify/logits/witness.h"
#include "certify/report/report.h"
#include "reference/linear_spec.h"

namespace ncert::certify {

struct RunForks {
  std::string run_a, run_b;
  Index rows_a = 0, rows_b = 0;
  Index compared = 0;
  bool prompts_equal = true;
  bool teacher_forced = false;
  std::vector<Fork> forks;
};

struct ForksOptions {
  std::string a, b;
  ReaderOptions reader;
  std::vector<std::pair<std::string, std::string>> pairs;
  bool matched_history = false;
  std::optional<double> logit_error;
  double lambda = reference::kDefaultLambda;
  bool require_identical = false;
  Requirement require;                    ///< --require: skipped (undetermined) forks of these kinds fail
  std::optional<SkipPolicy> skip_policy;  ///< --policy: expected skips pass, unexpected ones fail
  std::string vocab_file;                 ///< "" for ids only
  Index context = 8;                      ///< shared-history tokens shown per fork
};

/// Finds and classifies the forks of one run pair.
Result<RunForks> find_forks(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b, const LogitsRunInfo& rb,
                            const ForksOptions& options);
/// The same from the pair's comparison already made (compare_runs with options.matched_history):
/// `compare --policy forks` classes the forks of the rows it compared, without reading them again.
Result<RunForks> find_forks(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b, const LogitsRunInfo& rb,
                            const RunComparison& comparison, const ForksOptions& options);

/// One check (kind "fork") per fork, or one for a pair without forks (class "none").
std::vector<CheckResult> fork_checks(const RunForks& r, const ForksOptions& options, const Vocabulary* vocab);

}  // namespace ncert::certify
