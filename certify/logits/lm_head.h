// This header defines the lm_head of a logits run, in one place for `check`, `witness` and
// `forks`: which projection produced a run's rows (role = "lm_head", logits_run = <run>),
// whether its outputs are the run's logits (rows bit-identical, bf16 outputs widened exactly), and
// its certified logit intervals: the reference's accepted interval of every logit, collected
// block by block while the reference runs, either inside `check`'s own pass of that projection
// (collector as a block hook) or by one standalone evaluation (evaluate_lm_head).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "certify/io/dump_reader.h"
#include "reference/linear.h"

namespace ncert::certify {

/// The lm_head projection of run `run` in the dump, or nullptr.
const ProjectionInfo* find_lm_head(const DumpModel& model, const std::string& run);

/// Where run `run` has no lm_head (find_lm_head found none): a projection that looks like it (role "lm_head" or a name
/// containing it, and a y_unpacked as wide as the run's vocabulary) but lacks the attributes
/// that tie it to the run, as advice naming them; "" otherwise.
std::string undeclared_lm_head_hint(const DumpModel& model, const LogitsRunInfo& run);

/// Why the lm_head's intervals cannot bound the run's logits rows without reading any row (no
/// y_unpacked to tie them to), or "" when they can once the rows are seen to match.
std::string lm_head_unusable(const ProjectionInfo& head);

/// True iff the logits row equals the lm_head's output row: f32 outputs bit for bit, bf16 outputs
/// widened exactly. `head_row` holds the output row's raw bytes (at least `vocab` elements).
bool lm_head_row_matches(const float* logits_row, const unsigned char* head_row, DType output, Index vocab);
/// The first differing token of a row pair, as text ("row 3 token 17: logits 0x... but the
/// lm_head output is 0x..."); "" when they match.
std::string lm_head_row_mismatch(const float* logits_row, const unsigned char* head_row, DType output, Index vocab,
                                 Index row);

/// Per-row summary of an lm_head's intervals: the emitted token's interval, the two largest
/// upper ends (to exclude the token itself: what could beat it) and the two largest lower ends
/// (what provably beats it, where one lies above its upper end).
struct RowIntervals {
  float token_lo = 0, token_hi = 0;
  float best_hi = -INFINITY;
  Index best_col = -1;
  float second_hi = -INFINITY;
  Index second_col = -1;
  float best_lo = -INFINITY;
  Index best_lo_col = -1;
  float second_lo = -INFINITY;
  Index second_lo_col = -1;
  bool token_seen = false;
};

/// Collects an lm_head's intervals while its reference is evaluated: per row the RowIntervals of
/// the emitted token, and the full interval of requested (row, column) cells. Thread-safe and
/// deterministic whatever the block order.
class LmHeadCollector {
 public:
  LmHeadCollector(std::vector<std::int32_t> tokens, std::vector<std::pair<Index, Index>> cells, int threads);
  void consume(const reference::ReferenceBlock& block);
  std::vector<RowIntervals> rows() const;
  /// One interval per requested cell, in the order given.
  const std::vector<reference::Interval>& cells() const { return cell_intervals_; }

 private:
  std::vector<std::int32_t> tokens_;
  std::vector<std::vector<RowIntervals>> per_thread_;
  std::vector<std::pair<Index, Index>> cells_;
  std::vector<reference::Interval> cell_intervals_;  ///< each written by the one block that owns its column
};

/// Evaluates the lm_head's reference once into `collector` (its walk is not emulated: only the
/// intervals are wanted). Returns "" when it did; else, with the collector untouched, the host
/// guard its weights fail (`check` fails the head's geometry for it; its run has no intervals).
Result<std::string> evaluate_lm_head(const DumpReader& reader, const ProjectionInfo& head, double lambda,
                                     LmHeadCollector& collector);

/// How large the error of each logit of a run may be.
struct LogitErrorModel {
  enum class Kind : std::uint8_t { kNone, kAbsolute, kLmHead } kind = Kind::kNone;
  double absolute = 0;
  std::string source = "none";  ///< "lm_head projection P", "--logit-error 0.01", "none"
  /// Without an lm_head: what would give the run one (undeclared_lm_head_hint), "" if unknown.
  std::string hint;
  std::string head_dataset;  ///< kLmHead: the y_unpacked the logits rows must equal
  DType head_output = DType::kF32;
  std::vector<RowIntervals> intervals;  ///< kLmHead: per row
};

/// --logit-error e as a model (kNone when absent).
LogitErrorModel absolute_error_model(std::optional<double> logit_error);
/// A model from intervals already collected (check's own pass of the lm_head).
LogitErrorModel lm_head_error_model(const ProjectionInfo& head, std::vector<RowIntervals> intervals);
/// "lm_head P could not be evaluated: <why>": the one wording of a head that exists but gives
/// its run no intervals (witness, forks and check alike).
std::string head_not_evaluated(const ProjectionInfo& head, std::string_view why);
/// A run whose lm_head could not be evaluated: --logit-error (or none) as the model, its source
/// saying why in parentheses, and `hint` saying what to correct.
LogitErrorModel unevaluated_head_model(std::optional<double> logit_error, const std::string& why, std::string hint);
/// The error model of a run: the lm_head's intervals (evaluating its reference) when the dump
/// has a usable one, else --logit-error, else none.
Result<LogitErrorModel> error_model_for(const DumpReader& reader, const LogitsRunInfo& run,
                                        std::optional<double> logit_error, double lambda);

}  // namespace ncert::certify
