// This header defines the one reference pass of a projection: the exact reference is evaluated
// block by block (reference/linear.h) and every engine output is compared with each block as it
// is produced, so the bound and walk checks read their values from one pass instead of
// evaluating the reference each. An optional hook sees every block too (an lm_head's logit
// intervals are collected that way, logits/lm_head.h).
#pragma once

#include <array>
#include <functional>

#include "certify/projection/projection_data.h"
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

/// Extra per-block consumer of the reference. Called concurrently for distinct blocks.
using BlockHook = std::function<void(const reference::ReferenceBlock&)>;

struct ReferencePass {
  reference::ReferenceSummary summary;
  std::array<reference::BoundStats, kEngineOutputs> bound;  ///< per EngineOutputId
  std::array<WalkTally, kEngineOutputs> walk;
  bool walk_emulated = false;
  double seconds = 0;          ///< wall time of the pass (comparisons included)
  double compare_seconds = 0;  ///< comparison work inside it, per thread (CPU time / threads)
};

/// Evaluates the reference once and compares every engine output with it. Requires
/// f.weights and (for packed outputs) f.rows to be ok and the problem to validate.
Result<ReferencePass> run_reference_pass(const ProjectionFacts& f, const reference::LinearProblem& problem,
                                         const reference::ReferenceOptions& options, const BlockHook& hook);

}  // namespace ncert::certify
