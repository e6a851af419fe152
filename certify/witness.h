// This header defines raw target-maximum witnesses: for every emitted token of a logits run,
// proof from the raw f32 row that the token is the row's maximum under the run's tie rule
// (lowest id), its margin to the runner-up (in f64 and in f32 ulps at the token's logit), the
// number of exact ties, the XXH3-128 of the row's bytes, and a class:
//   certified  the margin provably survives numeric error (lm_head reference intervals:
//              lo_t > max_{j != t} hi_j; or --logit-error e: margin > 2e)
//   near-tie   it does not (a legitimate fork point, not a failure)
//   tie        bit-identical maxima
//   unbounded  no error model (no lm_head projection, no --logit-error): reported, not a failure
// A NaN or +Inf in the row, an emitted token with logit -Inf or out of range, or a token that
// is not the maximum under the tie rule is a FAIL naming run, position, token, its logit and the
// true maximum.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "certify/dump_reader.h"
#include "certify/report.h"
#include "reference/linear.h"

namespace ncert::certify {

/// The facts of one raw row that every witness needs (one scan).
struct RowScan {
  float max = 0;              ///< largest non-NaN value
  Index argmax = -1;          ///< lowest index holding it
  Index ties = 0;             ///< how many entries equal the maximum
  Index tie_second = -1;      ///< second-lowest index holding the maximum (ties >= 2)
  float runner_up = 0;        ///< the largest value below the maximum (-inf if none)
  Index runner_up_index = -1; ///< lowest index holding it
  Index nan = 0, first_nan = -1;
  Index pos_inf = 0, first_pos_inf = -1;
};
RowScan scan_row(const float* row, Index vocab);

enum class WitnessClass : std::uint8_t { kCertified, kNearTie, kTie, kUnbounded };
std::string_view witness_class_name(WitnessClass c);

/// Per-row summary of an lm_head's reference intervals: the token's interval and the two
/// largest upper ends (to exclude the token itself).
struct RowIntervals {
  float token_lo = 0, token_hi = 0;
  float best_hi = -INFINITY;
  Index best_col = -1;
  float second_hi = -INFINITY;
  Index second_col = -1;
  bool token_seen = false;
};

/// How large the error of each logit may be.
struct LogitErrorModel {
  enum class Kind : std::uint8_t { kNone, kAbsolute, kLmHead } kind = Kind::kNone;
  double absolute = 0;
  std::string source = "none";          ///< "lm_head projection P", "--logit-error 0.01", "none"
  std::vector<RowIntervals> intervals;  ///< per row (lm_head)
};

struct Witness {
  Index row = 0;
  std::int64_t position = 0;
  std::int32_t token = 0;
  float logit = 0;
  std::int32_t runner_up = -1;
  float runner_up_logit = 0;
  double margin = 0;       ///< logit - runner_up_logit in f64 (exact for f32 operands within 2^29)
  double margin_ulps = 0;  ///< margin / ulp_f32(logit)
  std::int32_t ties = 0;
  WitnessClass cls = WitnessClass::kUnbounded;
  double certified_gap = 0;  ///< lo_t - max hi_j, or margin - 2e: > 0 iff certified
  std::string row_xxh3;      ///< canonical hex of the row's raw bytes
  bool ok = true;
  std::string failure;       ///< why the emission is not the row's maximum
};

/// The witness of one row given the scan and the model's view of it.
Witness witness_row(const float* row, Index vocab, const RowScan& scan, std::int32_t token,
                    const LogitErrorModel& model, Index row_index);

/// Collects an lm_head's per-row intervals while its reference is evaluated (thread-safe;
/// deterministic whatever the block order).
class LmHeadCollector {
 public:
  LmHeadCollector(std::vector<std::int32_t> tokens, int threads);
  void consume(const reference::ReferenceBlock& block);
  std::vector<RowIntervals> result() const;

 private:
  std::vector<std::int32_t> tokens_;
  std::vector<std::vector<RowIntervals>> per_thread_;
};

/// The witnesses of one run, streamed row block by row block (memory O(block + T)).
struct RunWitnesses {
  std::string run;
  Index vocab = 0;
  std::vector<Witness> witnesses;
  LogitErrorModel model;
  Index failed = 0;
  bool lm_head_mismatch = false;  ///< the logits rows differ from the lm_head's outputs
  std::string lm_head_mismatch_text;
};

/// Computes every witness of a run. With an lm_head model, also checks the logits rows equal
/// the lm_head projection's y_unpacked rows bit for bit. The logits rows read are offered to
/// the file's hash cursor, if given.
Result<RunWitnesses> witness_run(const DumpReader& reader, const LogitsRunInfo& run,
                                 LogitErrorModel model, FileHashCursor* hash = nullptr);

/// Builds the error model of a run: the lm_head projection's intervals (evaluating its
/// reference) when the dump has one, else --logit-error, else none.
Result<LogitErrorModel> error_model_for(const DumpReader& reader, const LogitsRunInfo& run,
                                        std::optional<double> logit_error, double lambda);

/// The run's check (kind "witness") for reports.
CheckResult witness_check(const RunWitnesses& w);

/// A witness as report JSON (failures carry only row, position, token and failure).
Json witness_json(const Witness& w);

/// The lm_head reference's accepted interval at chosen (row, column) cells of a run: what a
/// fork needs at its two tokens. Empty when the dump holds no f32 lm_head projection for the
/// run. Evaluates the whole reference (as error_model_for does) but keeps only those cells.
struct LmHeadCells {
  std::string projection;                  ///< its name
  std::string y_unpacked;                  ///< dataset path of its output rows (= logits rows)
  std::vector<reference::Interval> cells;  ///< one per requested cell, in order
};
Result<std::optional<LmHeadCells>> lm_head_cells(const DumpReader& reader, const LogitsRunInfo& run,
                                                 const std::vector<std::pair<Index, Index>>& cells,
                                                 double lambda);

}  // namespace ncert::certify
