// This header defines the library entry point of `ncert compare A.h5 B.h5`: the full-vocabulary
// F32 comparison of matching /logits runs (logits/compare.h) and of /tensors by name
// (logits/tensor_compare.h), one check per run pair and per tensor.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/logits/policy.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct CompareOptions {
  std::string a;
  std::string b;
  ReaderOptions reader;
  std::vector<std::pair<std::string, std::string>> pairs;  ///< explicit run pairs (a:b)
  bool matched_history = false;
  /// --policy; without it each run pair takes default_policy (bitwise, or forks where the two
  /// runs' logits differ in dtype).
  std::optional<Policy> policy;
  std::optional<Policy> tensor_policy;  ///< overrides each tensor's "compare" attribute
  bool allow_missing = false;           ///< runs/tensors on one side only pass (reported)
};

/// Refusals (kVocabMismatch, kNoCommonRuns, unreadable dumps) are the report's `error`.
Result<Report> run_compare(const CompareOptions& options);

}  // namespace ncert::certify
