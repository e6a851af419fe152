#include "certify/projection/reference_pass.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "certify/projection/checks.h"
#include "certify/report/progress.h"
#include "reference/bounds.h"
#include "reference/float_bits.h"

namespace ncert::certify {
namespace {

/// Widens [lo, hi] (lo = -1: empty) to cover [from, to]; min and max, so the same in any order
/// of adds and merges (any thread count).
void widen(Index& lo, Index& hi, Index from, Index to) {
  if (from < 0) return;
  lo = lo < 0 ? from : std::min(lo, from);
  hi = std::max(hi, to);
}

}  // namespace

void WalkTally::add(Index r, Index c, std::uint32_t e, std::uint32_t w) {
  ++compared;
  if (e == w) return;
  ++mismatches;
  widen(row_min, row_max, r, r);
  widen(col_min, col_max, c, c);
  if (row < 0 || r < row || (r == row && c < col)) {
    row = r;
    col = c;
    engine = e;
    walk = w;
  }
}

void WalkTally::merge(const WalkTally& o) {
  compared += o.compared;
  mismatches += o.mismatches;
  widen(row_min, row_max, o.row_min, o.row_max);
  widen(col_min, col_max, o.col_min, o.col_max);
  if (o.row >= 0 && (row < 0 || o.row < row || (o.row == row && o.col < col))) {
    row = o.row;
    col = o.col;
    engine = o.engine;
    walk = o.walk;
  }
}

double output_rounding_bound(double a, DType output) {
  if (output == DType::kBf16 || output == DType::kF16) return reference::spacing_of_type(a, output) / 2;
  // One f32 rounding to nearest of a value below a: half a spacing of a's binade at most.
  return 0x1p-24 * reference::noise_magnitude(a, true);
}

void BiasTally::merge(const BiasTally& o) {
  values += o.values;
  excluded += o.excluded;
  sum_s += o.sum_s;
  sum_r2 += o.sum_r2;
  sum_proxy += o.sum_proxy;
  sum_shift += o.sum_shift;
  tested += o.tested;
  beyond += o.beyond;
  beyond_toward_zero += o.beyond_toward_zero;
  far += o.far;
  widen(row_min, row_max, o.row_min, o.row_max);
  widen(col_min, col_max, o.col_min, o.col_max);
  peak_z = std::max(peak_z, o.peak_z);
  if (o.worst) keep_worst(*o.worst);
}

void BiasTally::keep_worst(const BiasValue& v) {
  // The most sigmas first, then (row, col) order: the same value at any thread count.
  if (!worst || v.z > worst->z ||
      (v.z == worst->z && (v.row < worst->row || (v.row == worst->row && v.col < worst->col)))) {
    worst = v;
  }
}

void BiasTally::add_beyond(const BiasValue& v, bool toward_zero, bool is_far) {
  widen(row_min, row_max, v.row, v.row);
  widen(col_min, col_max, v.col, v.col);
  if (is_far) {
    ++far;
  } else {
    ++beyond;
    beyond_toward_zero += toward_zero;
  }
  keep_worst(v);
}

Index residual_tile(const reference::Weights& w) {
  Index tile = 0;
  for (const reference::WeightSegment& seg : w.segments) {
    // A group as long as K (per-channel scales) fixes no range inside K: such a segment is
    // tiled as one without groups. Taking it as the tile left one range per column, the whole
    // dot product, and a dropped K block of per-channel int8 weights went unnamed (a review's).
    const Index g = segment_group_size(seg);
    if (g > 0 && g < w.k) tile = tile == 0 ? g : std::gcd(tile, g);
  }
  // 64 columns without groups: 80 tiles at K = 5120, about 160 ranges per column.
  if (tile == 0) tile = 64;
  return std::max<Index>(1, std::min(tile, w.k));
}

namespace {

/// Elements whose bound is wider than this many spacings carry too little information for the
/// ranges they would add (round-to-nearest accumulators); directed ones need a quarter, where
/// their own bias is bounded by the interval rather than modelled as centred.
constexpr double kMaxBetaDirected = 0.25;
/// Round-to-nearest accumulators (docs/error-bounds.md §6c): values whose accumulation noise
/// exceeds half a spacing add more to the proxy (1/4 + sigma^2) than their output rounding
/// does (at most 1/4), so they are left out.
constexpr double kMaxSigmaNearest = 0.5;

/// One value's contribution to the bias statistic. `acc_var` and `slack`: the value's
/// accumulation variance proxy and deterministic offset (round-to-nearest accumulators).
void add_residual(BiasTally& t, DType type, float z, double c, double b, bool nearest, double acc_var, double slack) {
  if (!std::isfinite(z) || !std::isfinite(c) || c == 0 || !std::isfinite(b)) {
    ++t.excluded;
    return;
  }
  const double a = std::fabs(c);
  const double ulp = reference::spacing_of_type(a, type);
  // The epilogue's f32 adds may move v by up to two f32 roundings (2^-23 |c|) beyond B.
  const double beta = (b + 0x1p-22 * a) / ulp;
  // Round to nearest: the value's accumulation noise, not B, decides what it costs; directed:
  // the shift B allows.
  const bool too_wide = nearest ? std::sqrt(acc_var) / ulp > kMaxSigmaNearest : beta > kMaxBetaDirected;
  if (too_wide) {
    ++t.excluded;
    return;
  }
  const double h = reference::spacing_of_type(a + b, type) / (2 * ulp);
  // Under a correct round-to-nearest output |s| <= h + beta; a value beyond that is outside its
  // interval (the bound check's failure), and is clipped so that a few wild values (a wrong row,
  // NaN-free garbage) cannot pose as a systematic bias. Clipping changes nothing under the null.
  const double half_range = h + beta;
  const double s = std::clamp((c > 0 ? 1.0 : -1.0) * (static_cast<double>(z) - c) / ulp, -half_range, half_range);
  const double range = 2 * half_range;
  ++t.values;
  t.sum_s += s;
  t.sum_r2 += range * range;
  if (nearest) {
    // docs/error-bounds.md §6c: the output rounding is within h and centred; the accumulation
    // is sub-Gaussian with proxy acc_var; B's slack is a fixed offset.
    t.sum_proxy += h * h + acc_var / (ulp * ulp);
    t.sum_shift += slack / ulp;
  } else {
    t.sum_shift += beta;
  }
}

/// The per-value part of the bias test (docs/error-bounds.md §6a): value (i, j) with residual
/// r = z - c against what a correct kernel's roundings allow it. `hard` bounds the roundings
/// that are bounded outright (the output's, the one before a residual added at the output
/// type, the epilogue's f32 adds) plus the slack; the accumulation is sub-Gaussian with scale
/// `sigma`, so beyond hard + threshold * sigma lies a value that a correct kernel stores with
/// probability at most 2 exp(-threshold^2 / 2).
void add_value(BiasTally& t, DType type, Index i, Index j, float z, double c, double b, double hard, double sigma,
               double threshold) {
  if (!std::isfinite(z) || !std::isfinite(c) || !std::isfinite(b) || !std::isfinite(hard) || !std::isfinite(sigma)) {
    return;
  }
  ++t.tested;
  const double r = static_cast<double>(z) - c;
  const double allowed = hard + threshold * sigma;
  if (sigma > 0) t.peak_z = std::max(t.peak_z, (std::fabs(r) - hard) / sigma);
  if (std::fabs(r) <= allowed) return;
  const double a = std::fabs(c);
  const double ulp = reference::spacing_of_type(a, type);
  // Truncation or a wrong rounding moves the stored value by less than one spacing of the
  // output type at |c| + B; a value beyond that is wrong by more than its rounding.
  const double spacing = reference::spacing_of_type(a + b, type);
  const double signed_r = c < 0 ? -r : r;
  const double z_score = sigma > 0 ? (std::fabs(r) - hard) / sigma : std::numeric_limits<double>::infinity();
  t.add_beyond(BiasValue{i, j, z_score, signed_r / ulp, allowed / ulp, z, c},
               signed_r<0, std::fabs(r)> allowed + spacing);
}

std::uint32_t walk_bits(float w, DType t) { return reference::bits_of_value(w, t); }

/// |z - c| / B of one value into the histogram (the same finite values BoundStats measures).
void add_error_over_bound(Log2Histogram& h, float z, double c, double b) {
  const double err = static_cast<double>(z) - c;
  if (!std::isfinite(z) || !std::isfinite(err)) {
    h.add(std::numeric_limits<double>::quiet_NaN());  // counted as `other`
  } else if (b > 0 && std::isfinite(b)) {
    h.add(std::fabs(err) / b);
  } else {
    h.add(err == 0 ? 0.0 : std::numeric_limits<double>::infinity());
  }
}

/// One block's share of a FailureGrid: the block's columns fall in cells [first_cell_col,
/// first_cell_col + span), so it holds only those (allocated on its first failure).
struct GridPart {
  Index first_cell_col = 0, span = 0;
  std::vector<Index> counts;  ///< cell_rows x span

  void add(const FailureGrid& g, const reference::ReferenceBlock& b, Index row, Index col) {
    if (counts.empty()) {
      first_cell_col = g.cell_col(b.col_begin);
      span = g.cell_col(b.col_end - 1) - first_cell_col + 1;
      counts.assign(static_cast<std::size_t>(g.cell_rows * span), 0);
    }
    ++counts[static_cast<std::size_t>(g.cell_row(row) * span + g.cell_col(col) - first_cell_col)];
  }
  void merge_into(FailureGrid& g) const {
    if (counts.empty()) return;
    if (g.counts.empty()) g.counts.assign(static_cast<std::size_t>(g.cell_rows * g.cell_cols), 0);
    for (Index r = 0; r < g.cell_rows; ++r) {
      for (Index c = 0; c < span; ++c) {
        g.counts[static_cast<std::size_t>(r * g.cell_cols + first_cell_col + c)] +=
            counts[static_cast<std::size_t>(r * span + c)];
      }
    }
  }
};

/// Compares every engine output with each reference block as it is produced. Each block's
/// partial results go to its own slot and are merged in block order, so the pass does not depend
/// on which thread computed which block.
class CompareSink final : public reference::ReferenceSink {
 public:
  struct Partial {
    std::array<reference::BoundStats, kEngineOutputs> bound;
    std::array<WalkTally, kEngineOutputs> walk;
    std::array<BiasTally, kEngineOutputs> bias;
    std::array<Log2Histogram, kEngineOutputs> error_over_bound;
    std::array<GridPart, kEngineOutputs> outside;
    std::array<std::vector<char>, kEngineOutputs> outside_rows;  ///< ReferencePass::outside_rows' share
    std::vector<SignatureTally> signature;                       ///< per output
    std::array<VarianceTally, kEngineOutputs> variance;
    double seconds = 0;
  };

  /// The roundings of element (i, j) after its accumulation, each bounded outright by a half
  /// width (docs/error-bounds.md §6c): the output rounding (half a spacing of a bf16 / f16
  /// output; one f32 rounding otherwise, which only over-counts where the accumulator's last
  /// rounding already is the output), one f32 rounding per epilogue add, and the rounding before
  /// a residual added at the output type.
  struct OutputRoundings {
    double output = 0;
    double add = 0;
    int adds = 0;
    double before_residual = 0;
    /// The residual model's variance proxy beyond the accumulation.
    double variance() const { return output * output + adds * add * add + before_residual * before_residual; }
  };

  OutputRoundings output_roundings(Index i, Index j, double y_star, double c, double b) const {
    const ProjectionInfo& info = f_.info();
    const double a = std::fabs(c) + b;
    OutputRoundings o;
    o.output = output_rounding_bound(a, info.output);
    const double bias = reference::has_bias(problem_.epilogue) ? std::fabs(problem_.bias.at(j)) : 0.0;
    const double res = reference::has_residual(problem_.epilogue) ? std::fabs(problem_.residual.at(i, j)) : 0.0;
    const double m = std::fabs(y_star) + b + bias + res;
    o.adds = static_cast<int>(reference::has_bias(problem_.epilogue)) +
             static_cast<int>(reference::has_residual(problem_.epilogue));
    o.add = 0x1p-24 * reference::noise_magnitude(m, true);
    o.before_residual = std::sqrt(rounding_before_residual_var(j, y_star, b));
    return o;
  }

  /// residual_at = output rounds the value to the output type before the residual is added
  /// (out = rnd(fl32(rnd(v) + r)), reference/k_walk.h): a second centred rounding of up to half
  /// a spacing of |v| in that type. Left out, a correct bf16 kernel's residual energy read 469x
  /// the limit (bias, signature and walk passed). Zero for other epilogues and f32 outputs
  /// (there rnd(v) = v).
  double rounding_before_residual_var(Index j, double y_star, double b) const {
    const ProjectionInfo& info = f_.info();
    if (!reference::has_residual(problem_.epilogue) || problem_.residual_at != reference::ResidualAt::kOutput ||
        (info.output != DType::kBf16 && info.output != DType::kF16)) {
      return 0;
    }
    const double bias = reference::has_bias(problem_.epilogue) ? std::fabs(problem_.bias.at(j)) : 0.0;
    const double h = reference::spacing_of_type(std::fabs(y_star) + b + bias, info.output) / 2;
    return h * h;
  }

  CompareSink(const ProjectionFacts& f, const reference::LinearProblem& problem, Index blocks, const BlockHook& hook,
              const std::vector<TileRange>& ranges, double threshold, double value_threshold)
      : f_(f),
        problem_(problem),
        hook_(hook),
        ranges_(ranges),
        threshold_(threshold),
        value_threshold_(value_threshold),
        biased_rounding_(reference::rounds_with_bias(problem)),
        grid(f.info().m, f.info().n),
        parts(static_cast<std::size_t>(blocks)) {
    for (Partial& p : parts) {
      for (Log2Histogram& h : p.error_over_bound) {
        h = Log2Histogram(OutputBound::kErrorOverBoundLog2Min, OutputBound::kErrorOverBoundLog2Max);
      }
      p.signature.resize(kEngineOutputs);
    }
  }

  void consume(const reference::ReferenceBlock& b) override {
    const auto t0 = std::chrono::steady_clock::now();
    Partial& part = parts[static_cast<std::size_t>(b.index)];
    const ProjectionInfo& info = f_.info();
    const DType t = info.output;
    const Index stride = info.out_stride;
    const bool narrow = t == DType::kBf16 || t == DType::kF16;  // the bias test's types
    // A declared walk stage that rounds toward zero (promote:P:p:rz) biases the accumulation as
    // a directed accumulator does (reference::rounds_with_bias): its errors are not centred, and
    // the directed model, bounded by B, applies (a review's promote:128:14:rz:fma walk, held bit
    // for bit, failed the centred mean test at -0.24 ulp).
    const bool nearest = info.accumulator.round_to_nearest && !biased_rounding_;
    // One per thread, reused block after block (its arrays are a few MB at 128 x 128).
    thread_local BlockSignatures sig_scratch;
    BlockSignatures* sig = b.x_f32 ? &sig_scratch : nullptr;
    if (sig) sig->reset(kEngineOutputs, b.rows, b.width());
    const EngineOutput& unpacked = f_.data.output(EngineOutputId::kUnpacked);
    // Per (packed output, block column): a value that differs from y_unpacked's bits.
    std::array<std::vector<char>, kEngineOutputs> differs;
    for (auto& d : differs) d.assign(static_cast<std::size_t>(b.width()), 0);
    // The roundings after an element's accumulation depend on the element, not on the output
    // holding it: worked out once per element of a row, for the first output that needs them.
    thread_local std::vector<OutputRoundings> row_after;
    thread_local std::vector<char> row_after_ready;
    row_after.resize(static_cast<std::size_t>(b.width()));
    for (Index i = 0; i < b.rows; ++i) {
      const Index slot = f_.slot_of_row[static_cast<std::size_t>(i)];
      row_after_ready.assign(static_cast<std::size_t>(b.width()), 0);
      for (EngineOutputId id : kAllEngineOutputs) {
        const EngineOutput& out = f_.data.output(id);
        // Packed outputs hold reference values only on selected rows.
        if (!out.present || (id != EngineOutputId::kUnpacked && slot < 0)) continue;
        const auto o = static_cast<std::size_t>(id);
        const Index src_row = id == EngineOutputId::kCompact ? slot : i;
        for (Index c = b.col_begin; c < b.col_end; ++c) {
          const Index e = b.at(i, c);
          const float z = out.value(t, stride, src_row, c);
          const Index outside_before = part.bound[o].outside();
          part.bound[o].add(i, c, z, b.center[e], b.bound[e], b.accept[e], b.expect[e]);
          add_error_over_bound(part.error_over_bound[o], z, b.center[e], b.bound[e]);
          const bool outside = part.bound[o].outside() != outside_before;
          if (outside) {
            part.outside[o].add(grid, b, i, c);
            std::vector<char>& rows = part.outside_rows[o];
            if (rows.empty()) rows.assign(static_cast<std::size_t>(b.rows), 0);
            rows[static_cast<std::size_t>(i)] = 1;
          }
          if (b.walk) part.walk[o].add(i, c, out.bits(t, stride, src_row, c), walk_bits(b.walk[e], t));
          if (sig && id != EngineOutputId::kUnpacked && unpacked.present &&
              out.bits(t, stride, src_row, c) != unpacked.bits(t, stride, i, c)) {
            differs[o][static_cast<std::size_t>(c - b.col_begin)] = 1;
          }
          const double r = static_cast<double>(z) - b.center[e];
          if (!std::isfinite(r) || !std::isfinite(b.sigma[e])) {
            if (narrow) add_residual(part.bias[o], t, z, b.center[e], b.bound[e], nearest, 0, 0);
            continue;
          }
          const auto jj = static_cast<std::size_t>(c - b.col_begin);
          if (!row_after_ready[jj]) {
            row_after[jj] = output_roundings(i, c, b.y_star[e], b.center[e], b.bound[e]);
            row_after_ready[jj] = 1;
          }
          const OutputRoundings& after = row_after[jj];
          const double var_acc = b.sigma[e] * b.sigma[e];
          // For the bias test a rounding before the residual's add is centred noise below the
          // output's rounding, as the accumulation's is.
          if (narrow) {
            add_residual(part.bias[o], t, z, b.center[e], b.bound[e], nearest,
                         var_acc + after.before_residual * after.before_residual, b.slack[e]);
            if (value_threshold_ > 0) {
              // The stored value may lie v's half spacing from v, and v beyond |c| + B by the
              // epilogue's two f32 roundings (2^-22 |c|): the half spacing is taken there.
              const double a_hi = (std::fabs(b.center[e]) + b.bound[e]) * (1 + 0x1p-22);
              const double hard =
                  reference::spacing_of_type(a_hi, t) / 2 + after.adds * after.add + after.before_residual + b.slack[e];
              add_value(part.bias[o], t, i, c, z, b.center[e], b.bound[e], hard, b.sigma[e], value_threshold_);
            }
          }
          const double var = var_acc + after.variance();
          VarianceSums& vt = outside ? part.variance[o].outside : part.variance[o].inside;
          const double excess = std::max(std::fabs(r) - b.slack[e], 0.0);
          if (var > 0) {
            ++vt.values;
            vt.q += excess * excess / var;
            if (b.center[e] != 0) {
              // Weights sign(c) / sigma are fixed by the data, not by the roundings.
              vt.add_lean(b.center[e] < 0 ? -r : r, std::sqrt(var), b.slack[e]);
            }
          } else if (excess > 0) {
            ++vt.beyond_exact;
          }
          if (sig) sig->set(static_cast<Index>(o), i, c - b.col_begin, r, var, b.slack[e]);
        }
      }
    }
    if (sig) {
      // A packed output's column equal to y_unpacked's on every row it holds adds nothing
      // y_unpacked's candidates (on all rows) do not test; the identity check pins its bits.
      if (unpacked.present) {
        for (EngineOutputId id : kAllEngineOutputs) {
          if (id == EngineOutputId::kUnpacked) continue;
          const auto o = static_cast<std::size_t>(id);
          for (Index jj = 0; jj < b.width(); ++jj) {
            if (!differs[o][static_cast<std::size_t>(jj)]) {
              sig->share(static_cast<Index>(o), jj, static_cast<Index>(EngineOutputId::kUnpacked));
            }
          }
        }
      }
      sig->finish(ranges_, b, threshold_, part.signature);
    }
    part.seconds += seconds_since(t0);
    if (hook_) hook_(b);
  }

  const ProjectionFacts& f_;
  const reference::LinearProblem& problem_;
  const BlockHook& hook_;
  const std::vector<TileRange>& ranges_;
  const double threshold_;
  const double value_threshold_;  ///< the bias test's per-value threshold (0: not tested)
  const bool biased_rounding_;    ///< reference::rounds_with_bias: the accumulation is directed
  const FailureGrid grid;         ///< the geometry of every output's grid (rows x n)
  std::vector<Partial> parts;
};

}  // namespace

Result<ReferencePass> run_reference_pass(const ProjectionFacts& f, const reference::LinearProblem& problem,
                                         const reference::ReferenceOptions& options, const BlockHook& hook) {
  const Index blocks = (f.info().n + options.block_cols - 1) / options.block_cols;
  // The signature test's candidates: every (output, column, dyadic range); Azuma's two-sided
  // tail 2 exp(-z^2 / 2) shared out over all of them (docs/error-bounds.md §6d).
  reference::ReferenceOptions ro = options;
  ro.residual_tile = residual_tile(*problem.weights);
  const Index tile = ro.residual_tile;
  // Where the residual model does not apply the signature test is a SKIP: no tile dots then.
  if (!options.residual_tests || !residual_model_blocker(f, reference::rounds_with_bias(problem)).empty()) {
    ro.residual_tile = 0;
  }
  const Index k = problem.weights->k;
  std::vector<TileRange> ranges = dyadic_ranges((k + tile - 1) / tile);
  Index outputs = 0;
  for (EngineOutputId id : kAllEngineOutputs) outputs += f.data.output(id).present;
  const double candidates = static_cast<double>(std::max<Index>(outputs, 1)) * static_cast<double>(f.info().n) *
                            static_cast<double>(ranges.size());
  const double threshold = std::sqrt(2 * std::log(2 * candidates / kResidualAlpha));
  // The bias test's per-value part, where the residual model applies: Azuma's two-sided tail
  // 2 exp(-t^2 / 2) shared out over every value of every output (at most rows x n each), with
  // half of the check's alpha (the mean test has the other half).
  double value_threshold = 0;
  if (options.residual_tests && f.info().accumulator.round_to_nearest &&
      residual_model_blocker(f, reference::rounds_with_bias(problem)).empty()) {
    const double values = static_cast<double>(std::max<Index>(outputs, 1)) * static_cast<double>(f.info().m) *
                          static_cast<double>(f.info().n);
    value_threshold = std::sqrt(2 * std::log(2 * values / (kBiasAlpha / 2)));
  }
  CompareSink sink(f, problem, blocks, hook, ranges, threshold, value_threshold);
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = reference::evaluate_reference(problem, sink, ro);
  if (!summary.ok()) return summary.status().with_context(f.info().path);
  ReferencePass pass;
  pass.seconds = seconds_since(t0);
  pass.summary = *summary;
  pass.walk_emulated = problem.walk.declared && options.emulate_walk;
  pass.signature.resize(kEngineOutputs);
  pass.ranges = std::move(ranges);
  pass.tile = tile;
  pass.signature_threshold = threshold;
  pass.signature_planned = candidates;
  pass.signature_outputs = outputs;
  pass.bias_value_threshold = value_threshold;
  double compare_cpu = 0;
  for (std::size_t o = 0; o < kEngineOutputs; ++o) {
    pass.error_over_bound[o] = Log2Histogram(OutputBound::kErrorOverBoundLog2Min, OutputBound::kErrorOverBoundLog2Max);
    pass.outside[o] = sink.grid;
  }
  for (const CompareSink::Partial& p : sink.parts) {
    for (std::size_t o = 0; o < kEngineOutputs; ++o) {
      pass.bound[o].merge(p.bound[o]);
      pass.walk[o].merge(p.walk[o]);
      pass.bias[o].merge(p.bias[o]);
      pass.signature[o].merge(p.signature[o]);
      pass.variance[o].merge(p.variance[o]);
      pass.error_over_bound[o].merge(p.error_over_bound[o]);
      p.outside[o].merge_into(pass.outside[o]);
      std::vector<char>& rows = pass.outside_rows[o];
      if (rows.empty()) rows = p.outside_rows[o];
      for (std::size_t i = 0; i < p.outside_rows[o].size(); ++i) rows[i] |= p.outside_rows[o][i];
    }
    compare_cpu += p.seconds;
  }
  pass.compare_seconds = compare_cpu / std::max(1, omp_get_max_threads());
  return pass;
}

}  // namespace ncert::certify
