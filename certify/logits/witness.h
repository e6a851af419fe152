// This header defines raw target-maximum witnesses: for every emitted token of a logits run,
// proof from the raw f32 row that the token is the row's maximum under the run's tie rule
// (lowest id), its margin to the runner-up (in f64, and in ulps at the token's logit: of the
// logits' own type, and of f32 for the JSON's margin_ulps), the
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

#include "certify/io/dump_reader.h"
#include "certify/logits/lm_head.h"
#include "certify/report/report.h"

namespace ncert::certify {

/// The facts of one raw row that every witness needs (one scan).
struct RowScan {
  float max = 0;               ///< largest non-NaN value
  Index argmax = -1;           ///< lowest index holding it
  Index ties = 0;              ///< how many entries equal the maximum
  Index tie_second = -1;       ///< second-lowest index holding the maximum (ties >= 2)
  float runner_up = 0;         ///< the largest value below the maximum (-inf if none)
  Index runner_up_index = -1;  ///< lowest index holding it
  Index nan = 0, first_nan = -1;
  Index pos_inf = 0, first_pos_inf = -1;
};
RowScan scan_row(const float* row, Index vocab);

/// The witness of one row given the scan and the error model (lm_head.h). `row` holds the
/// logits widened to f32 from `logits_dtype`, the type its margin in ulps is counted in.
Witness witness_row(const float* row, Index vocab, const RowScan& scan, std::int32_t token,
                    const LogitErrorModel& model, Index row_index, DType logits_dtype = DType::kF32);

/// x in ulps of type t at the value `at` (the spacing of t's values at |at|): a margin or gap
/// read in the units of the values it separates.
double ulps_of_type(double x, float at, DType t);

/// The witnesses of one run, streamed row block by row block (memory O(block + T)).
struct RunWitnesses {
  std::string run;
  Index vocab = 0;
  DType logits_dtype = DType::kF32;  ///< the logits' stored type
  std::vector<Witness> witnesses;
  LogitErrorModel model;
  Index failed = 0;
  bool lm_head_mismatch = false;  ///< the logits rows differ from the lm_head's outputs
  std::string lm_head_mismatch_text;
};

/// Computes every witness of a run. With an lm_head model, also checks the logits rows equal
/// the lm_head's output rows (lm_head_row_matches). The logits rows read are offered to
/// the file's hash cursor, if given.
Result<RunWitnesses> witness_run(const DumpReader& reader, const LogitsRunInfo& run, LogitErrorModel model,
                                 FileHashCursor* hash = nullptr);

/// The run's checks: its witness check (every emission its row's maximum), and a SKIP
/// "logits/<run>/intervals" when no error model certifies the margins (no usable lm_head, no
/// --logit-error).
std::vector<CheckResult> witness_checks(const RunWitnesses& w);

}  // namespace ncert::certify
