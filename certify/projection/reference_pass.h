// This header defines the one reference pass of a projection: the exact reference is evaluated
// block by block (reference/linear.h) and every engine output is compared with each block as it
// is produced, so the bound and walk checks read their values from one pass instead of
// evaluating the reference each. An optional hook sees every block too (an lm_head's logit
// intervals are collected that way, logits/lm_head.h).
#pragma once

#include <array>
#include <functional>

#include "certify/projection/projection_data.h"
#include "certify/report/evidence.h"
#include "reference/bound_stats.h"
#include "reference/linear.h"

namespace ncert::certify {

struct ProjectionFacts;

/// Bit-exact comparison of one engine output with the emulated K walk.
struct WalkTally {
  Index compared = 0;
  Index mismatches = 0;
  Index row = -1, col = -1;  ///< the first mismatch in (row, col) order
  std::uint32_t engine = 0, walk = 0;
  void add(Index r, Index c, std::uint32_t e, std::uint32_t w);
  void merge(const WalkTally& o);
};

/// The signed rounding residuals of one bf16 output, for the bias check (docs/error-bounds.md
/// §6a). Per value: s = sign(c) (z - c) / ulp(c), the engine's value z against the exact
/// centre c, in units of the bf16 spacing at c; its range under a correct round-to-nearest
/// output, 2 (h + beta) with beta = B / ulp(c) the accumulation error allowed and h the half
/// spacing at |c| + B in units of ulp(c); and the shift beta a directed accumulator may add.
struct BiasTally {
  Index values = 0;      ///< values in the statistic
  Index excluded = 0;    ///< values left out (zero or non-finite centre, bound too wide)
  double sum_s = 0;      ///< sum of s
  double sum_r2 = 0;     ///< sum of squared ranges
  double sum_shift = 0;  ///< sum of beta (directed accumulators only)
  void merge(const BiasTally& o);
};

/// Extra per-block consumer of the reference. Called concurrently for distinct blocks.
using BlockHook = std::function<void(const reference::ReferenceBlock&)>;

struct ReferencePass {
  reference::ReferenceSummary summary;
  std::array<reference::BoundStats, kEngineOutputs> bound;  ///< per EngineOutputId
  /// Per EngineOutputId: |y - y*| / B of every value, and where the values outside lie (the
  /// HTML report's plots; report/evidence.h).
  std::array<Log2Histogram, kEngineOutputs> error_over_bound;
  std::array<FailureGrid, kEngineOutputs> outside;
  std::array<WalkTally, kEngineOutputs> walk;
  std::array<BiasTally, kEngineOutputs> bias;  ///< bf16 outputs only
  bool walk_emulated = false;
  double seconds = 0;          ///< wall time of the pass (comparisons included)
  double compare_seconds = 0;  ///< comparison work inside it, per thread (CPU time / threads)
};

/// Evaluates the reference once and compares every engine output with it. Requires
/// f.weights and (for packed outputs) f.rows to be ok and the problem to validate.
Result<ReferencePass> run_reference_pass(const ProjectionFacts& f, const reference::LinearProblem& problem,
                                         const reference::ReferenceOptions& options, const BlockHook& hook);

}  // namespace ncert::certify
