#include "reference/linear.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "reference/code_walk.h"
#include "reference/detail/activations.h"
#include "reference/detail/directed.h"
#include "reference/detail/element_bounds.h"
#include "reference/detail/gemm.h"
#include "reference/detail/s_bf16.h"
#include "reference/detail/transpose.h"
#include "reference/detail/weight_rows.h"
#include "reference/k_walk.h"
#include "reference/large_block.h"

namespace ncert::reference {

namespace {

using detail::abs_activations;
using detail::Activations;
using detail::prepare_activations;

}  // namespace

/// Each thread's buffers for its blocks; the block_cols x K ones (several MB each) in huge pages.
struct ReferenceScratch::Block {
  LargeVector<double> w_exact;        // block_cols x K: the weights y* multiplies by
  LargeVector<float> w_mag;           // block_cols x K: charged magnitudes rounded up to f32 (not
                                      // written for a block of BlockRoutes::no_magnitudes)
  LargeVector<double> w_spread;       // block_cols x K: half the gap between two allowed kernel
                                      // weights (only for blocks whose segments can have two)
  LargeVector<double> w_alg;          // block_cols x K: f64 magnitudes (only when the f32 S overflows)
  std::vector<double> d;              // M x block_cols: sum |x| spread, where any spread is nonzero
  std::vector<double> y;              // M x block_cols
  LargeVector<std::uint16_t> w_bf16;  // block_cols x bf16_padded(K): w_mag as bf16, for S by the instruction
  std::vector<float> s32;             // M x block_cols: S as the f32 GEMM or from bf16 magnitudes
  std::vector<double> s;              // M x block_cols: S inflated to a true upper bound
  LargeVector<float> w_kernel;        // the block's f32 weights for the walk, in 16-column panels
  std::vector<float> kernel_rows;     // kTransposeRows x K: rows waiting to be transposed
  std::vector<double> bound, tier, center, sigma, slack;
  std::vector<Interval> accept, expect;
  std::vector<float> walk, walk_scratch;
  std::vector<double> a_l1;
  std::vector<float> bias_row, residual_row;  // the block's bias, one row's residual (where the epilogue has them)
  std::vector<double> spread_row;             // one row's D made a true bound (where any spread)
  std::vector<double> s_row;                  // one row's S + |bias| (bias_at = start)
  std::vector<const BoundTerms*> terms;       // per column of the block
  std::vector<double> x_abs;                  // M x K: |x| in f64 when the problem has no shared copy
  Index s_bf16_blocks = 0;                    // blocks whose S came from bf16 magnitudes
  std::size_t weight_cells = 0;               // block_cols x K: the size of w_exact and w_mag
  std::size_t bf16_cells = 0;                 // block_cols x bf16_padded(K): w_bf16's (0: never needed)

  // w_exact, w_mag and w_bf16 are sized by the first block that writes them: a 4-bit block
  // whose y* and S come from the walk's panels writes none of them, and sized up front they
  // were 9 MB a thread at K 5,120 faulted in for nothing (~10 us a 4 KiB page on the EPYC VM:
  // a MatMulNBits check took 0.252 s against 0.268, docs/performance.md).
  double* exact() { return grown(w_exact, weight_cells); }
  float* magnitudes() { return grown(w_mag, weight_cells); }
  std::uint16_t* magnitudes_bf16() { return grown(w_bf16, bf16_cells); }

  template <typename T>
  static T* grown(LargeVector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

namespace {

using BlockScratch = ReferenceScratch::Block;

/// What a block learned about its weights (merged in block order afterwards).
struct BlockWeightFacts {
  Index nonfinite = 0;
  Index first_nonfinite = -1;
  bool all_zero = true;
  Index ambiguous = 0;           ///< weights whose two allowed kernel values differ (dequant_op = either)
  bool kernel_is_exact = false;  ///< every row's WeightRowFacts::kernel_is_exact (with the walk's weights)
};

/// Decodes the block's weight rows [j0, j0 + w): exact values and f32 charged magnitudes (rows
/// of K), the half-spreads when `spread`, their 1-norms, and the kernel's f32 weights
/// transposed for the walk.
/// With `no_exact` (every segment of the block segment_exact_is_kernel, and the walk's weights
/// asked for) the exact values are not stored: the walk's panels stand for them; with
/// `no_magnitudes` (segment_magnitudes_are_kernels) the magnitudes neither.
BlockWeightFacts decode_block(const LinearProblem& p, detail::WeightRowDecoder& decoder, Index j0, Index w, bool spread,
                              bool walk, bool no_exact, bool no_magnitudes, BlockScratch& t) {
  const Index K = p.weights->k;
  BlockWeightFacts facts;
  facts.kernel_is_exact = walk;
  for (Index jj = 0; jj < w; ++jj) {
    detail::WeightRowOut out;
    out.exact = no_exact ? nullptr : t.exact() + jj * K;
    out.magnitude = no_magnitudes ? nullptr : t.magnitudes() + jj * K;
    out.spread = spread ? t.w_spread.data() + jj * K : nullptr;
    out.kernel = walk ? t.kernel_rows.data() + (jj % detail::kTransposeRows) * K : nullptr;
    const detail::WeightRowFacts row = decoder.decode(j0 + jj, out);
    if (row.nonfinite > 0 && facts.nonfinite == 0) facts.first_nonfinite = (j0 + jj) * K + row.first_nonfinite;
    facts.nonfinite += row.nonfinite;
    facts.ambiguous += row.ambiguous;
    if (!row.all_zero) facts.all_zero = false;
    facts.kernel_is_exact = facts.kernel_is_exact && row.kernel_is_exact;
    t.a_l1[jj] = inflate_s(row.l1, K);
    if (walk && (jj % detail::kTransposeRows == detail::kTransposeRows - 1 || jj == w - 1)) {
      // Up to 16 rows at once, into their own panel of w_kernel (walk_rows_block's layout: K x
      // 16 consecutive floats), so each store fills 16 consecutive floats. One row at a time
      // stored a float per cache line, every line K times over, which was 17 % of check's CPU
      // on a MatMulNBits dump (M 32, K 5120, N 16480).
      static_assert(detail::kTransposeRows == 16, "a transpose fills one 16-column panel");
      const Index r0 = jj - jj % detail::kTransposeRows, rows = jj - r0 + 1;
      detail::transpose_rows(t.kernel_rows.data(), rows, K, t.w_kernel.data() + r0 * K, rows);
    }
  }
  return facts;
}

/// S for the block as a true upper bound in t.s: from bf16 magnitudes or the f32 GEMM, inflated
/// (docs/error-bounds.md §1), or, when that overflowed (an inf or a 0 * inf NaN anywhere in the block), the f64 GEMM
/// over the unrounded magnitudes inflated by its own error.
/// `from_panels` (BlockRoutes::s_from_panels): every column of the block lies in a segment whose
/// exact weights are its walk weights widened (segment_exact_is_kernel), so the charged
/// magnitudes are those of the walk's panels, and the f32 GEMM packs them from there. `no_magnitudes`: the block's
/// magnitudes were not stored (evaluate_reference), and S comes from the panels.
void block_s(const LinearProblem& p, const Activations& x, Index j0, Index w, const F32SumInflation& inflation,
             bool instruction, bool from_panels, bool no_magnitudes, BlockScratch& t) {
  const Index M = p.x.rows, K = p.weights->k;
  const Index cells = M * w;
  // S from bf16 magnitudes where the activations' exist and at most one operand was rounded
  // up: the block's weight magnitudes are bf16 numbers (bf16 weights), or the activations'
  // were (bf16 activations) and the weights' round up. S, and B, then grow by at most 2^-7;
  // rounding both could reach 2^-6 (docs/error-bounds.md §1).
  // The same bits by either kernel; the portable one takes the weights' f32 magnitudes as they
  // are, with no bf16 copy of the block.
  const detail::F32Panels panels{t.w_kernel.data(), w, K};
  bool from_bf16 = false;
  if (no_magnitudes) {
    NCERT_ASSERT(from_panels, "no magnitudes to take S from");
  } else if (!x.mag_bf16.empty() && instruction) {
    from_bf16 = detail::to_bf16_magnitudes(t.magnitudes(), w, K, x.mag_bf16_exact, t.magnitudes_bf16());
    if (from_bf16) {
      detail::s_gemm_bf16(x.mag_bf16.data(), M, t.magnitudes_bf16(), w, detail::bf16_padded(K), t.s32.data(), true);
    }
  } else if (!x.mag_bf16.empty()) {
    from_bf16 = detail::s_gemm_bf16_widened(x.mag_wide.data(), M, t.magnitudes(), w, K, x.mag_bf16_exact, t.s32.data());
  }
  if (from_bf16) {
    ++t.s_bf16_blocks;
  } else if (from_panels) {
    detail::gemm_abt_magnitudes(x.mag.data(), M, panels, t.s32.data());
  } else {
    detail::gemm_abt(x.mag.data(), M, K, t.magnitudes(), w, t.s32.data());
  }
  bool finite = true;
  for (Index e = 0; e < cells; ++e) finite &= std::isfinite(t.s32[e]);
  if (finite) {
    for (Index e = 0; e < cells; ++e) t.s[e] = inflation.up(t.s32[e]);
    return;
  }
  t.w_alg.resize(static_cast<std::size_t>(w * K));
  for (Index jj = 0; jj < w; ++jj) {
    decode_weight_row(*p.weights, j0 + jj, p.x.dtype, nullptr, t.w_alg.data() + jj * K, nullptr, nullptr);
  }
  detail::gemm_abt(abs_activations(x, t.x_abs), M, K, t.w_alg.data(), w, t.s.data());
  for (Index e = 0; e < cells; ++e) t.s[e] = inflate_s(t.s[e], K);
}

/// The bias and residual element (i, j) adds (0 where the epilogue has none).
std::pair<float, float> epilogue_operands(const LinearProblem& p, Index i, Index j) {
  return {has_bias(p.epilogue) ? p.bias.at(j) : 0.0f, has_residual(p.epilogue) ? p.residual.at(i, j) : 0.0f};
}

/// Per element of the block: B, T, the centre and both accepted intervals, from t.s (S as a
/// true bound) and, where `spread`, t.d (sum |x| spread, made a true bound here).
void block_bounds(const LinearProblem& p, const Activations& x, Index j0, Index w, bool spread, BlockScratch& t) {
  const Index M = p.x.rows, K = p.weights->k;
  detail::ElementBoundsIn in;
  in.a_l1 = t.a_l1.data();
  if (has_bias(p.epilogue)) {
    t.bias_row.resize(static_cast<std::size_t>(w));
    for (Index jj = 0; jj < w; ++jj) t.bias_row[static_cast<std::size_t>(jj)] = p.bias.at(j0 + jj);
    in.bias = t.bias_row.data();
  }
  if (has_residual(p.epilogue)) t.residual_row.resize(static_cast<std::size_t>(w));
  if (spread) t.spread_row.resize(static_cast<std::size_t>(w));
  for (Index i = 0; i < M; ++i) {
    const Index row = i * w;
    if (has_residual(p.epilogue)) {
      for (Index jj = 0; jj < w; ++jj) t.residual_row[static_cast<std::size_t>(jj)] = p.residual.at(i, j0 + jj);
      in.residual = t.residual_row.data();
    }
    if (spread) {
      // D from an f64 GEMM of non-negative terms, made a true bound.
      for (Index jj = 0; jj < w; ++jj) t.spread_row[static_cast<std::size_t>(jj)] = inflate_s(t.d[row + jj], K);
      in.spread = t.spread_row.data();
    }
    in.y = t.y.data() + row;
    in.s = t.s.data() + row;
    if (bias_in_sum(p)) {
      // The bias is a term of the sum (bias_at = start): S + |bias| as a true upper bound. The
      // f64 add rounds to nearest (down by at most 2^-53), the factor 1 + 2^-51 lifts it above
      // the exact sum after its own rounding. B, T, the slack and sigma all take it; the block's
      // S (ReferenceBlock::s) stays the products' own.
      t.s_row.resize(static_cast<std::size_t>(w));
      for (Index jj = 0; jj < w; ++jj) {
        const double b = std::fabs(static_cast<double>(t.bias_row[static_cast<std::size_t>(jj)]));
        t.s_row[static_cast<std::size_t>(jj)] = (t.s[row + jj] + b) * (1.0 + 0x1p-51);
      }
      in.s = t.s_row.data();
    }
    in.x_l1 = x.l1[static_cast<std::size_t>(i)];
    const detail::ElementBoundsOut out{t.bound.data() + row, t.tier.data() + row,   t.slack.data() + row,
                                       t.sigma.data() + row, t.center.data() + row, t.accept.data() + row,
                                       t.expect.data() + row};
    // Columns in runs of one weight segment, whose bound constants they share.
    for (Index begin = 0; begin < w;) {
      Index end = begin + 1;
      while (end < w && t.terms[end] == t.terms[begin]) ++end;
      detail::element_bounds_row(*t.terms[begin], p, in, begin, end, out);
      begin = end;
    }
  }
}

/// y*'s left operand: the activations packed once for a full block's product (else Eigen packs
/// them in each block's). A last block Eigen blocks otherwise (PackedActivations::covers)
/// multiplies the unpacked copy, which is given back where no block needs it.
std::unique_ptr<detail::PackedActivations> pack_for_y_star(Activations& x, Index M, Index K, Index N, Index bc) {
  auto packed = detail::PackedActivations::pack(x.exact.data(), M, K, std::min(bc, N));
  if (packed && (N % bc == 0 || packed->covers(N % bc))) LargeVector<double>().swap(x.exact);
  return packed;
}

/// `from_panels`: the block's exact weights are its walk weights widened (BlockWeightFacts::
/// kernel_is_exact), so Eigen's blocks of them may be packed from the walk's panels.
void block_y_star(const detail::PackedActivations* packed, const Activations& x, Index M, Index K, Index w,
                  bool from_panels, BlockScratch& t) {
  const detail::F32Panels panels{t.w_kernel.data(), w, K};
  if (packed && from_panels && detail::packs_from_panels(*packed, panels)) {
    detail::gemm_abt(*packed, panels, t.y.data());
  } else if (packed && packed->covers(w)) {
    detail::gemm_abt(*packed, t.exact(), w, t.y.data());
  } else {
    detail::gemm_abt(x.exact.data(), M, K, t.exact(), w, t.y.data());
  }
}

/// The declared K walk of every row over the block's columns, epilogue included.
void block_walk(const LinearProblem& p, const Activations& x, Index j0, Index w, BlockScratch& t) {
  const Index M = p.x.rows, K = p.weights->k;
  // Every row at once: walk_rows_block orders rows and weight panels for the caches.
  // bias_at = start: the walk adds the bias where the kernel does (k_walk.h), the epilogue not;
  // block_bounds has put the block's bias in t.bias_row.
  const float* start = nullptr;
  if (bias_in_sum(p)) {
    NCERT_ASSERT(t.bias_row.size() == static_cast<std::size_t>(w), "block_bounds fills the block's bias first");
    start = t.bias_row.data();
  }
  if (p.walk.codes()) {
    // An integer kernel: its terms are sums of code products, not products of x and the panels.
    code_walk_block(p, j0, w, t.walk.data(), start);
  } else {
    walk_rows_block(p.walk, x.f32.data(), M, t.w_kernel.data(), K, w, t.walk.data(), t.walk_scratch.data(), start);
  }
  for (Index i = 0; i < M; ++i) {
    for (Index jj = 0; jj < w; ++jj) {
      const Index j = j0 + jj;
      const auto [bias, res] = epilogue_operands(p, i, j);
      float& v = t.walk[static_cast<std::size_t>(i * w + jj)];
      v = epilogue_value(v, bias, res, p);
    }
  }
}

void size_scratch(BlockScratch& t, Index M, Index K, Index bc, bool spread, bool walk, bool bf16_copy) {
  const std::size_t cells = static_cast<std::size_t>(M * bc);
  t.weight_cells = static_cast<std::size_t>(bc * K);
  if (spread) {
    t.w_spread.resize(t.weight_cells);
    t.d.resize(cells);
  }
  t.y.resize(cells);
  t.s32.resize(cells);
  t.bf16_cells = bf16_copy ? static_cast<std::size_t>(bc * detail::bf16_padded(K)) : 0;
  t.s.resize(cells);
  t.bound.resize(cells);
  t.tier.resize(cells);
  t.center.resize(cells);
  t.sigma.resize(cells);
  t.slack.resize(cells);
  t.accept.resize(cells);
  t.expect.resize(cells);
  t.a_l1.resize(static_cast<std::size_t>(bc));
  t.terms.resize(static_cast<std::size_t>(bc));
  if (walk) {
    t.w_kernel.resize(static_cast<std::size_t>(K * bc));
    t.kernel_rows.resize(static_cast<std::size_t>(detail::kTransposeRows * K));
    t.walk.resize(cells);
    t.walk_scratch.resize(cells);
  }
}

}  // namespace

struct ReferenceScratch::Threads {
  std::vector<std::unique_ptr<BlockScratch>> per_thread;
  bool in_use = false;
};

ReferenceScratch::ReferenceScratch() : threads_(std::make_unique<Threads>()) {}
ReferenceScratch::~ReferenceScratch() = default;

namespace {

/// The kept scratch of a call that shares one, claimed for it (nullptr: none).
ReferenceScratch::Threads* claim_scratch(const ReferenceOptions& options) {
  if (options.scratch == nullptr) return nullptr;
  ReferenceScratch::Threads& kept = options.scratch->threads();
  NCERT_ASSERT(!kept.in_use, "one ReferenceScratch shared by two calls at once");
  kept.in_use = true;
  kept.per_thread.resize(std::max(kept.per_thread.size(), static_cast<std::size_t>(omp_get_max_threads())));
  return &kept;
}

/// The scratch block of this thread: the kept one where the call shares `kept`, readied for
/// this call (its |x| is the previous call's), else `local`.
BlockScratch& thread_scratch(ReferenceScratch::Threads* kept, BlockScratch& local) {
  const auto at = static_cast<std::size_t>(omp_get_thread_num());
  if (kept == nullptr || at >= kept->per_thread.size()) return local;
  std::unique_ptr<BlockScratch>& t = kept->per_thread[at];
  if (!t) t = std::make_unique<BlockScratch>();
  t->x_abs.clear();
  t->s_bf16_blocks = 0;
  return *t;
}

/// Per weight segment: the bound's constants and whether its weights can have two values.
struct SegmentModels {
  std::vector<BoundTerms> terms;
  std::vector<bool> may_spread;
  const Weights* weights = nullptr;
  std::size_t segment_of(Index j) const {
    for (std::size_t s = 0; s < weights->segments.size(); ++s) {
      if (j >= weights->segments[s].row_begin && j < weights->segments[s].row_end) return s;
    }
    NCERT_UNREACHABLE("column outside every segment");
  }
  std::vector<bool> exact_is_kernel;        ///< per segment: detail::segment_exact_is_kernel
  std::vector<bool> magnitudes_are_kernel;  ///< per segment: detail::segment_magnitudes_are_kernels
  /// Whether every column of [j0, j1) lies in a segment whose magnitudes are its kernel weights'.
  bool all_magnitudes_are_kernel(Index j0, Index j1) const {
    for (std::size_t s = 0; s < weights->segments.size(); ++s) {
      const WeightSegment& seg = weights->segments[s];
      if (!magnitudes_are_kernel[s] && seg.row_begin < j1 && seg.row_end > j0) return false;
    }
    return true;
  }
  /// Whether every column of [j0, j1) lies in a segment whose exact weights are its kernel's.
  bool all_exact_is_kernel(Index j0, Index j1) const {
    for (std::size_t s = 0; s < weights->segments.size(); ++s) {
      const WeightSegment& seg = weights->segments[s];
      if (!exact_is_kernel[s] && seg.row_begin < j1 && seg.row_end > j0) return false;
    }
    return true;
  }
  /// Whether any column of [j0, j1) lies in a segment whose weights can have two values.
  bool any_spread(Index j0, Index j1) const {
    for (std::size_t s = 0; s < weights->segments.size(); ++s) {
      const WeightSegment& seg = weights->segments[s];
      if (may_spread[s] && seg.row_begin < j1 && seg.row_end > j0) return true;
    }
    return false;
  }
};

/// Which operands a block takes from where, decided from its segments and shape alone (the
/// same on every thread).
struct BlockRoutes {
  bool spread = false;  ///< some column's weights can have two values
  /// y* from the walk's panels for a whole block of segments whose exact weights are their kernel
  /// weights: its f64 rows (5 MB at K 5,120) are then never stored, half of what decoding a
  /// 4-bit block writes.
  bool no_exact = false;
  bool s_from_panels = false;  ///< S's f32 GEMM packs the weights' magnitudes from the panels
  /// S from those panels with no magnitudes stored (2.6 MB a block at K 5,120) for a block of
  /// 4-bit sub-mul weights, unless the activations are bf16 numbers: S then comes from bf16
  /// magnitudes, the weights' rounded up. With other activations that route needs every weight
  /// to be a bf16 number, which (q - zp) s rarely is, and S from the f32 GEMM is typically the
  /// tighter anyway (no operand rounded up).
  bool no_magnitudes = false;
};

BlockRoutes block_routes(const SegmentModels& models, const Activations& x, const detail::PackedActivations* x_packed,
                         bool walk, Index M, Index j0, Index j1) {
  const Index K = models.weights->k;
  // The panels' shape only: where they are is not needed to decide.
  const detail::F32Panels panels{nullptr, j1 - j0, K};
  BlockRoutes r;
  r.spread = models.any_spread(j0, j1);
  const bool exact_is_kernel = walk && models.all_exact_is_kernel(j0, j1);
  r.no_exact = exact_is_kernel && x_packed && detail::packs_from_panels(*x_packed, panels);
  r.s_from_panels = exact_is_kernel && detail::magnitudes_pack_from_panels(M, panels);
  r.no_magnitudes =
      r.s_from_panels && !(!x.mag_bf16.empty() && x.mag_bf16_exact) && models.all_magnitudes_are_kernel(j0, j1);
  return r;
}

}  // namespace

bool rounds_with_bias(const LinearProblem& p) {
  const bool quantized_x = p.x_quant.type != XQuantType::kNone;
  return std::any_of(p.weights->segments.begin(), p.weights->segments.end(), [&](const WeightSegment& seg) {
    const ColumnModel m = column_model(seg, p.weights->k, p.walk, p.accumulator.u_eff, quantized_x);
    return !bound_terms(m, p.accumulator, p.lambda, p.weights->k).round_to_nearest;
  });
}

void column_tile_dots(const ReferenceBlock& block, Index c, float* out) {
  constexpr Index kLanes = 8;
  const Index K = block.k, tile = block.tile;
  // The column's weights rounded to f32: from its exact row, or, where that was not stored, its
  // kernel weights in the walk's panel (the same values: the exact ones are them widened).
  thread_local std::vector<float> column;
  column.resize(static_cast<std::size_t>(K));
  float* const w = column.data();
  const Index jj = c - block.col_begin;
  if (block.w_exact) {
    const double* exact = block.w_exact + jj * K;
    for (Index k = 0; k < K; ++k) w[k] = static_cast<float>(exact[k]);
  } else {
    const detail::F32Panels panels{block.w_panels, block.width(), K};
    const float* panel = panels.row(jj);
    const Index step = panels.step(jj);
    for (Index k = 0; k < K; ++k) w[k] = panel[k * step];
  }
  for (Index r = 0; r < block.rows; ++r) {
    const float* x = block.x_f32 + r * K;
    for (Index g = 0; g < block.tiles; ++g) {
      const Index k0 = g * tile, k1 = std::min(K, k0 + tile);
      float lane[kLanes] = {};
      Index k = k0;
      for (; k + kLanes <= k1; k += kLanes) {
        for (Index l = 0; l < kLanes; ++l) lane[l] += x[k + l] * w[k + l];
      }
      for (Index l = 0; k < k1; ++k, ++l) lane[l] += x[k] * w[k];
      out[g * block.rows + r] =
          ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    }
  }
}

namespace {

/// Each weight segment's bound constants and what its blocks may take from the walk's panels;
/// a segment whose bound is vacuous marks the summary.
SegmentModels segment_models(const LinearProblem& p, ReferenceSummary& summary) {
  const Weights& W = *p.weights;
  const Index K = W.k;
  SegmentModels models;
  models.weights = &W;
  for (const WeightSegment& seg : W.segments) {
    ColumnModel m = column_model(seg, K, p.walk, p.accumulator.u_eff, p.x_quant.type != XQuantType::kNone);
    if (bias_in_sum(p)) m = with_bias_term(m);
    models.terms.push_back(bound_terms(m, p.accumulator, p.lambda, K));
    if (seg.format == WeightFormat::kAf4 || is_scaled_format(seg.format)) {
      models.terms.back().shared_coef = 2 * std::max(p.accumulator.u_eff, 0x1p-24);
    }
    if (std::isinf(models.terms.back().gamma_acc)) summary.vacuous_bound = true;
    models.may_spread.push_back(detail::segment_may_spread(seg));
    models.exact_is_kernel.push_back(detail::segment_exact_is_kernel(seg, p.x.dtype));
    models.magnitudes_are_kernel.push_back(detail::segment_magnitudes_are_kernels(seg, p.x.dtype));
  }
  return models;
}

}  // namespace

Result<ReferenceSummary> evaluate_reference(const LinearProblem& p, ReferenceSink& sink,
                                            const ReferenceOptions& options) {
  NCERT_RETURN_IF_ERROR(validate_problem(p));
  if (options.block_cols < 1) return Status(ErrorCode::kInvalidArgument, "block_cols < 1");
  const Weights& W = *p.weights;
  const Index M = p.x.rows;
  const Index K = W.k;
  const Index N = W.n;
  const Index bc = options.block_cols;
  const Index nblocks = (N + bc - 1) / bc;
  const bool walk = p.walk.declared && options.emulate_walk;
  if (walk && p.walk.codes()) {
    // The codes, scales and formats a code walk reads (the check SKIPs such a walk first).
    if (std::string why = code_walk_unsupported(p); !why.empty()) {
      return Status(ErrorCode::kInvalidArgument, "k_walk " + p.walk.name + ": " + why);
    }
  }

  ReferenceSummary summary;
  summary.blocks = nblocks;
  summary.biased_rounding = rounds_with_bias(p);

  const SegmentModels models = segment_models(p, summary);
  const bool any_spread =
      std::find(models.may_spread.begin(), models.may_spread.end(), true) != models.may_spread.end();
  Activations x = prepare_activations(p, K, any_spread, summary);
  if (options.bf16_s) {
    x.mag_bf16.resize(static_cast<std::size_t>(M * detail::bf16_padded(K)));
    x.mag_bf16_exact = detail::to_bf16_magnitudes(x.mag.data(), M, K, false, x.mag_bf16.data());
    if (!x.mag_bf16_exact && !detail::to_bf16_magnitudes(x.mag.data(), M, K, true, x.mag_bf16.data())) {
      x.mag_bf16.clear();
    }
  }
  const F32SumInflation inflation = f32_sum_inflation(K);
  // Whether the instruction runs; on a build without it every request takes the portable path
  // (and its route with no bf16 copy of the weights).
  const bool instruction = detail::kSBf16Instruction &&
                           (options.bf16_s_kernel == Bf16SKernel::kInstruction ||
                            (options.bf16_s_kernel == Bf16SKernel::kFastest && detail::instruction_is_faster()));
  if (!x.mag_bf16.empty() && !instruction) {
    x.mag_wide.resize(x.mag_bf16.size());
    detail::widen_bf16_rows(x.mag_bf16.data(), M, detail::bf16_padded(K), x.mag_wide.data());
  }
  const std::unique_ptr<detail::PackedActivations> x_packed = pack_for_y_star(x, M, K, N, bc);
  std::vector<BlockWeightFacts> facts(static_cast<std::size_t>(nblocks));

  ReferenceScratch::Threads* kept = claim_scratch(options);
#pragma omp parallel
  {
    // Every block writes what it reads of its scratch: the blocks before it on the thread (and
    // with `kept` the calls before) left theirs there.
    BlockScratch local;
    BlockScratch& t = thread_scratch(kept, local);
    size_scratch(t, M, K, bc, any_spread, walk, !x.mag_bf16.empty() && instruction);
    detail::WeightRowDecoder decoder(W, p.x.dtype);
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < nblocks; ++b) {
      const Index j0 = b * bc;
      const Index j1 = std::min(N, j0 + bc);
      const Index w = j1 - j0;
      const BlockRoutes r = block_routes(models, x, x_packed.get(), walk, M, j0, j1);
      facts[static_cast<std::size_t>(b)] =
          decode_block(p, decoder, j0, w, r.spread, walk, r.no_exact, r.no_magnitudes, t);
      for (Index jj = 0; jj < w; ++jj) t.terms[jj] = &models.terms[models.segment_of(j0 + jj)];
      // The GEMMs run on this thread (Eigen does not parallelize inside an active region),
      // with shapes that depend only on the block: bit-identical at any thread count.
      const BlockWeightFacts& f = facts[static_cast<std::size_t>(b)];
      block_y_star(x_packed.get(), x, M, K, w, r.no_exact || f.kernel_is_exact, t);
      block_s(p, x, j0, w, inflation, instruction, r.s_from_panels, r.no_magnitudes, t);
      // A third GEMM only where two kernel weights are allowed and differ (AF4 affine with f32
      // scales and dequant_op = either): bf16 and f16 scales make s*q exact in f32, so both
      // orders agree and this costs nothing in the common case.
      NCERT_ASSERT(r.spread || f.ambiguous == 0, "two-valued weights in a segment that cannot have them");
      if (f.ambiguous > 0) detail::gemm_abt(abs_activations(x, t.x_abs), M, K, t.w_spread.data(), w, t.d.data());
      block_bounds(p, x, j0, w, f.ambiguous > 0, t);
      if (walk) block_walk(p, x, j0, w, t);

      ReferenceBlock block;
      block.index = b;
      block.col_begin = j0;
      block.col_end = j1;
      block.rows = M;
      // y and s are M x w, row-major with stride w.
      block.y_star = t.y.data();
      block.s = t.s.data();
      block.bound = t.bound.data();
      block.tier = t.tier.data();
      block.center = t.center.data();
      block.accept = t.accept.data();
      block.expect = t.expect.data();
      block.walk = walk ? t.walk.data() : nullptr;
      block.sigma = t.sigma.data();
      block.slack = t.slack.data();
      if (options.residual_tile > 0) {
        block.x_f32 = x.f32.data();
        block.w_exact = r.no_exact ? nullptr : t.exact();
        block.w_panels = r.no_exact ? t.w_kernel.data() : nullptr;
        block.k = K;
        block.tile = options.residual_tile;
        block.tiles = (K + options.residual_tile - 1) / options.residual_tile;
      }
      sink.consume(block);
    }
#pragma omp atomic
    summary.s_bf16_blocks += t.s_bf16_blocks;
  }
  if (kept) kept->in_use = false;

  for (const BlockWeightFacts& f : facts) {
    if (f.nonfinite > 0 && summary.nonfinite_w == 0) summary.first_nonfinite_w = f.first_nonfinite;
    summary.nonfinite_w += f.nonfinite;
    summary.ambiguous_weights += f.ambiguous;
    if (!f.all_zero) summary.all_zero_w = false;
  }
  return summary;
}

namespace {

class CollectSink final : public ReferenceSink {
 public:
  explicit CollectSink(ReferenceResult* r) : r_(r) {}
  void consume(const ReferenceBlock& b) override {
    const Index w = b.width();
    for (Index i = 0; i < b.rows; ++i) {
      for (Index c = b.col_begin; c < b.col_end; ++c) {
        const std::size_t dst = static_cast<std::size_t>(r_->at(i, c));
        const std::size_t src = static_cast<std::size_t>(i * w + (c - b.col_begin));
        r_->y_star[dst] = b.y_star[src];
        r_->s[dst] = b.s[src];
        r_->bound[dst] = b.bound[src];
        r_->tier[dst] = b.tier[src];
        r_->center[dst] = b.center[src];
        r_->sigma[dst] = b.sigma[src];
        r_->slack[dst] = b.slack[src];
        r_->accept[dst] = b.accept[src];
        r_->expect[dst] = b.expect[src];
        if (b.walk) r_->walk[dst] = b.walk[src];
      }
    }
  }

 private:
  ReferenceResult* r_;
};

}  // namespace

Result<ReferenceResult> compute_reference(const LinearProblem& problem, const ReferenceOptions& options) {
  NCERT_RETURN_IF_ERROR(validate_problem(problem));
  ReferenceResult r;
  r.rows = problem.x.rows;
  r.cols = problem.weights->n;
  const std::size_t n = static_cast<std::size_t>(r.rows * r.cols);
  r.y_star.resize(n);
  r.s.resize(n);
  r.bound.resize(n);
  r.tier.resize(n);
  r.center.resize(n);
  r.sigma.resize(n);
  r.slack.resize(n);
  r.accept.resize(n);
  r.expect.resize(n);
  if (problem.walk.declared && options.emulate_walk) r.walk.resize(n);
  CollectSink sink(&r);
  NCERT_ASSIGN_OR_RETURN(r.summary, evaluate_reference(problem, sink, options));
  return r;
}

}  // namespace ncert::reference
