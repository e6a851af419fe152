// This header defines the full-vocabulary F32 comparison of two logits runs, streamed row block
// by row block, and its check: runs pair by name (or explicitly), rows are "matched" while both
// runs share the same prompt and token history (always with --matched-history, for
// teacher-forced runs); later rows are reported as unmatched and never judged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/logits/policy.h"
#include "certify/logits/row_compare.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct RunForks;

/// Per-row results of one run pair (for forks and tests).
struct RunComparison {
  std::string run_a, run_b;
  Index vocab = 0;
  Index rows_a = 0, rows_b = 0;
  Index compared = 0;     ///< min(rows_a, rows_b)
  Index matched = 0;      ///< rows judged (shared history)
  Index divergence = -1;  ///< first row whose history differs (-1: none within `compared`)
  bool prompts_equal = true;
  std::vector<RowComparison> rows;  ///< `matched` entries (unmatched rows are not compared)
  std::vector<std::int32_t> tokens_a, tokens_b;
  DType dtype_a = DType::kF32, dtype_b = DType::kF32;  ///< the logits' stored types (rows are compared widened to f32)
  double seconds = 0;
};

/// Compares two runs row by row (memory O(block + T)). kVocabMismatch if the vocabularies
/// differ. The rows read are offered to the files' hash cursors, if given.
/// `test` counts the elements of each row that break an element-wise policy.
Result<RunComparison> compare_runs(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b,
                                   const LogitsRunInfo& rb, bool matched_history, const ElementTest& test,
                                   FileHashCursor* hash_a = nullptr, FileHashCursor* hash_b = nullptr);

/// The element test of a policy: bits, ulp:N and abs:A[,rel:R] count elements; kl and top1
/// judge rows and count none.
ElementTest element_test(const Policy& policy);

/// Runs of two dumps paired by name (runs on one side only listed as "logits/<name> (A only)"),
/// or the explicit pairs (kUsage if one names a run that does not exist).
struct RunPairing {
  std::vector<std::pair<const LogitsRunInfo*, const LogitsRunInfo*>> pairs;
  std::vector<std::string> one_sided;
};
Result<RunPairing> pair_runs(const DumpModel& a, const DumpModel& b,
                             const std::vector<std::pair<std::string, std::string>>& explicit_pairs,
                             const std::string& a_path, const std::string& b_path);
/// kNoCommonRuns for two dumps with nothing to pair: what each holds (its logits runs, and its
/// tensors when `with_tensors`) and how to pair runs of different names.
Status no_common_runs(const DumpModel& a, const DumpModel& b, const std::string& a_path, const std::string& b_path,
                      bool with_tensors);
/// kVocabMismatch (naming the run, both vocabularies and both files) if a pair's differ.
Status check_vocabularies(const RunPairing& pairing, const std::string& a_path, const std::string& b_path);

/// The nearest-rank percentile of sorted values (p in [0, 100]; 0 for none).
double nearest_rank(const std::vector<double>& sorted, double p);

/// The policy of a pair when --policy is not given: forks where the two runs' logits differ in
/// dtype (their values cannot be bit-identical, and their argmaxes may legitimately differ at a
/// tie of the coarser type), else bitwise; and why, for the report.
std::pair<Policy, std::string> default_policy(DType a, DType b);

/// Which of two runs holds no rows, where one does: "A's run holds no rows, B's 12", or "both
/// runs hold no rows". compare and forks fail such a pair alike.
std::string empty_run_text(Index rows_a, Index rows_b);

/// The verdict and statistics of one run pair under a policy (kind "logits"). `source` says why
/// the policy applies ("--policy" or default_policy's reason). The forks policy needs the pair's
/// forks (find_forks over the same comparison); the other policies ignore them.
CheckResult logits_check(const RunComparison& c, const Policy& policy, const std::string& source = "--policy",
                         const RunForks* forks = nullptr);

}  // namespace ncert::certify
