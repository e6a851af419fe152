// This header defines `ncert compare A.h5 B.h5`: the full-vocabulary F32 comparison of matching
// /logits runs (paired by name, or --pair a:b) and of /tensors (by name), streamed row block by
// row block. Rows are "matched" while both runs share the same prompt and token history (always
// with --matched-history, for teacher-forced runs); later rows are reported as unmatched and
// never judged. Verdict policies: bitwise (default), ulp:N, abs:A[,rel:R], kl:X, top1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/dump_reader.h"
#include "certify/report.h"
#include "certify/row_compare.h"

namespace ncert::certify {

struct Policy {
  enum class Kind : std::uint8_t { kBitwise, kUlp, kAbs, kKl, kTop1 } kind = Kind::kBitwise;
  std::uint64_t ulp = 0;
  double abs = 0;
  double rel = 0;
  double kl = 0;
  std::string text = "bitwise";
};
/// "bitwise", "ulp:N", "abs:A", "abs:A,rel:R", "kl:X", "top1" (kPolicyInvalid otherwise).
Result<Policy> parse_policy(std::string_view s);
/// Tensor policies are bitwise, ulp:N or abs:A[,rel:R] (kl and top1 need logits).
Result<Policy> parse_tensor_policy(std::string_view s);

struct CompareOptions {
  std::string a;
  std::string b;
  ReaderOptions reader;
  std::vector<std::pair<std::string, std::string>> pairs;  ///< explicit run pairs (a:b)
  bool matched_history = false;
  Policy policy;
  std::optional<Policy> tensor_policy;  ///< overrides each tensor's "compare" attribute
  bool allow_missing = false;           ///< runs/tensors on one side only pass (reported)
};

/// Per-row results of one run pair (for forks and tests).
struct RunComparison {
  std::string run_a, run_b;
  Index vocab = 0;
  Index rows_a = 0, rows_b = 0;
  Index compared = 0;        ///< min(rows_a, rows_b)
  Index matched = 0;         ///< rows judged (shared history)
  Index divergence = -1;     ///< first row whose history differs (-1: none within `compared`)
  bool prompts_equal = true;
  std::vector<RowComparison> rows;  ///< `matched` entries (unmatched rows are not compared)
  std::vector<std::int32_t> tokens_a, tokens_b;
  double seconds = 0;
};

/// Compares two runs row by row (memory O(block + T)). kVocabMismatch if the vocabularies
/// differ. The rows read are offered to the files' hash cursors, if given.
Result<RunComparison> compare_runs(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b,
                                   const LogitsRunInfo& rb, bool matched_history, double rel,
                                   FileHashCursor* hash_a = nullptr, FileHashCursor* hash_b = nullptr);

/// Runs of two dumps paired by name (runs on one side only listed as "logits/<name> (A only)"),
/// or the explicit pairs (kUsage if one names a run that does not exist).
struct RunPairing {
  std::vector<std::pair<const LogitsRunInfo*, const LogitsRunInfo*>> pairs;
  std::vector<std::string> one_sided;
};
Result<RunPairing> pair_runs(const DumpModel& a, const DumpModel& b,
                             const std::vector<std::pair<std::string, std::string>>& explicit_pairs,
                             const std::string& a_path, const std::string& b_path);
/// kVocabMismatch (naming the run, both vocabularies and both files) if a pair's differ.
Status check_vocabularies(const RunPairing& pairing, const std::string& a_path, const std::string& b_path);

/// The verdict and statistics of one run pair under a policy (kind "logits").
CheckResult logits_check(const RunComparison& c, const Policy& policy);

/// Refusals (kVocabMismatch, kNoCommonRuns, unreadable dumps) are the report's `error`.
Result<Report> run_compare(const CompareOptions& options);

}  // namespace ncert::certify
