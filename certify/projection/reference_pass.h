// This header defines the one reference pass of a projection: the exact reference is evaluated
// block by block (reference/linear.h) and every engine output is compared with each block as it
// is produced, so the bound and walk checks read their values from one pass instead of
// evaluating the reference each. An optional hook sees every block too (an lm_head's logit
// intervals are collected that way, logits/lm_head.h).
#pragma once

#include <array>
#include <functional>
#include <limits>
#include <optional>

#include "certify/projection/projection_data.h"
#include "certify/projection/residual_tally.h"
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
  /// The rows and columns the mismatches span (-1: none): all in one column points at that
  /// column's weights, all in one row at that row's activations.
  Index row_min = -1, row_max = -1, col_min = -1, col_max = -1;
  void add(Index r, Index c, std::uint32_t e, std::uint32_t w);
  void merge(const WalkTally& o);
};

/// The signed rounding residuals of one bf16 output, for the bias check (docs/error-bounds.md
/// §6a). Per value: s = sign(c) (z - c) / ulp(c), the engine's value z against the exact
/// centre c, in units of the bf16 spacing at c; its range under a correct round-to-nearest
/// output, 2 (h + beta) with beta = B / ulp(c) the accumulation error allowed and h the half
/// spacing at |c| + B in units of ulp(c); and the shift beta a directed accumulator may add.
struct BiasTally {
  Index values = 0;    ///< values in the statistic
  Index excluded = 0;  ///< values left out (zero or non-finite centre, bound too wide)
  double sum_s = 0;    ///< sum of s
  double sum_r2 = 0;   ///< sum of squared ranges (directed accumulators)
  /// Round-to-nearest accumulators (docs/error-bounds.md §6c): the sum of each value's
  /// sub-Gaussian proxy, h^2 for its output rounding plus (sigma / ulp)^2 for its accumulation.
  double sum_proxy = 0;
  /// Directed accumulators: sum of beta; round-to-nearest ones: sum of slack / ulp.
  double sum_shift = 0;

  /// The per-value test (round-to-nearest accumulators, docs/error-bounds.md §6a): each value's
  /// |r| against what its roundings allow, the output's within half a spacing and the
  /// accumulation's sub-Gaussian tail at `threshold` sigma.
  Index tested = 0;
  Index beyond = 0;                  ///< values beyond, by at most one spacing more (a neighbour)
  Index beyond_toward_zero = 0;      ///< of `beyond`, those below the exact value in magnitude
  Index far = 0;                     ///< values beyond by more than a spacing
  Index row_min = -1, row_max = -1;  ///< the rows (of x) the values beyond lie in (-1: none)
  Index col_min = -1, col_max = -1;  ///< the columns the values beyond lie in (-1: none)
  /// The largest (|r| - the roundings bounded outright - slack) / sigma of a tested value (its
  /// margin to the threshold); -inf before any.
  double peak_z = -std::numeric_limits<double>::infinity();
  /// The value beyond by the most accumulation sigmas (the first in (row, col) order on ties).
  std::optional<BiasValue> worst;
  void add_beyond(const BiasValue& v, bool toward_zero, bool is_far);
  void keep_worst(const BiasValue& v);
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
  /// Per EngineOutputId, per row of x: whether any value of that row in the output lies outside
  /// B (empty where none does). Beyond 32 rows a grid cell holds several rows and cannot tell
  /// which (a wider accumulator's values in a BOS row at M 33 read "a fault of rows in those
  /// groups").
  std::array<std::vector<char>, kEngineOutputs> outside_rows;
  std::array<WalkTally, kEngineOutputs> walk;
  std::array<BiasTally, kEngineOutputs> bias;  ///< bf16 outputs only
  /// The residual tests (residual_tally.h), over the dyadic K ranges of `tile`-wide tiles.
  std::vector<SignatureTally> signature;  ///< per EngineOutputId
  std::array<VarianceTally, kEngineOutputs> variance;
  std::vector<TileRange> ranges;
  Index tile = 0;
  double signature_threshold = 0;
  /// The candidates signature_threshold is set for: every (output, column, dyadic range). The
  /// test runs fewer where a packed output's column repeats y_unpacked's, a column has one live
  /// row or its partial dots leave the range: the threshold is then conservative.
  double signature_planned = 0;
  Index signature_outputs = 0;  ///< outputs the candidates were counted over
  /// The bias test's per-value threshold in accumulation sigmas (0 where the residual model
  /// does not apply: no value was tested).
  double bias_value_threshold = 0;
  bool walk_emulated = false;
  double seconds = 0;          ///< wall time of the pass (comparisons included)
  double compare_seconds = 0;  ///< comparison work inside it, per thread (CPU time / threads)
};

/// The signature test's false-alarm probability per projection (as the bias test's).
inline constexpr double kResidualAlpha = 1e-9;

/// The most the output's own rounding moves a value of magnitude at most `a`: half a spacing
/// of a bf16 / f16 output there, one f32 rounding (in a's binade) of an f32 one. The residual
/// model's h (docs/error-bounds.md §6c).
double output_rounding_bound(double a, DType output);
/// The bias test's false-alarm probability per projection, half for its mean and half for its
/// per-value part.
inline constexpr double kBiasAlpha = 1e-9;

/// The narrowest K range of the signature test: the smallest weight group of the projection's
/// segments (AF4, scaled), or 64 columns without groups, at most K.
Index residual_tile(const reference::Weights& w);

/// Evaluates the reference once and compares every engine output with it. Requires
/// f.weights and (for packed outputs) f.rows to be ok and the problem to validate.
Result<ReferencePass> run_reference_pass(const ProjectionFacts& f, const reference::LinearProblem& problem,
                                         const reference::ReferenceOptions& options, const BlockHook& hook);

}  // namespace ncert::certify
