#include "reference/linear.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "reference/detail/gemm.h"
#include "reference/k_walk.h"

namespace ncert::reference {

namespace {

// Rows emulated together: each weight of the block is loaded once for 4 rows (the walk's
// order per element is unchanged).
constexpr Index kWalkRows = 4;

struct BlockScratch {
  std::vector<double> w_exact;  // block_cols x K
  std::vector<double> w_alg;    // block_cols x K
  std::vector<double> w_spread; // block_cols x K: half the gap between two allowed kernel weights
  std::vector<double> d;        // M x block_cols: sum |x| spread, where any spread is nonzero
  std::vector<double> y;        // M x block_cols
  std::vector<double> s;        // M x block_cols
  std::vector<float> w_kernel;   // K x block_cols (transposed) for the walk
  std::vector<float> kernel_row; // K
  std::vector<double> bound, tier, center, s_up;
  std::vector<Interval> accept, expect;
  std::vector<float> walk, walk_scratch;
  std::vector<double> a_l1;
  Index nonfinite_w = 0;
  Index first_nonfinite_w = -1;
  bool all_zero_w = true;
};

}  // namespace

namespace {

/// The activations once: exact values, magnitudes, f32 values for the walk, row 1-norms.
struct Activations {
  std::vector<double> exact, abs;
  std::vector<float> f32;
  std::vector<double> l1;
};

Activations prepare_activations(const LinearProblem& p, Index K, ReferenceSummary& summary) {
  const Index M = p.x.rows;
  Activations a;
  a.exact.resize(static_cast<std::size_t>(M * K));
  a.abs.resize(a.exact.size());
  a.f32.resize(a.exact.size());
  a.l1.assign(static_cast<std::size_t>(M), 0.0);
  for (Index i = 0; i < M; ++i) {
    double l1 = 0;
    for (Index c = 0; c < K; ++c) {
      const float v = p.x.at(i, c);
      a.f32[i * K + c] = v;
      a.exact[i * K + c] = v;
      a.abs[i * K + c] = std::fabs(static_cast<double>(v));
      if (!std::isfinite(v)) {
        if (summary.nonfinite_x++ == 0) summary.first_nonfinite_x = i * K + c;
      } else {
        l1 += a.abs[i * K + c];
      }
      if (v != 0.0f) summary.all_zero_x = false;
    }
    a.l1[i] = l1 * (1.0 + 0x1p-40);  // generous cover of the f64 summation error
  }
  return a;
}

/// What a block learned about its weights (merged in block order afterwards).
struct BlockWeightFacts {
  Index nonfinite = 0;
  Index first_nonfinite = -1;
  bool all_zero = true;
  Index ambiguous = 0;  ///< weights whose two allowed kernel values differ (dequant_op = either)
};

/// Decodes the block's weight rows [j0, j0 + w): exact values and charged magnitudes (rows of
/// K), their 1-norms, and the kernel's f32 weights transposed for the walk.
BlockWeightFacts decode_block(const LinearProblem& p, Index j0, Index w, bool walk, BlockScratch& t) {
  const Weights& W = *p.weights;
  const Index K = W.k;
  BlockWeightFacts facts;
  for (Index jj = 0; jj < w; ++jj) {
    double* we = t.w_exact.data() + jj * K;
    double* wa = t.w_alg.data() + jj * K;
    double* ws = t.w_spread.data() + jj * K;
    decode_weight_row(W, j0 + jj, p.x.dtype, we, wa, walk ? t.kernel_row.data() : nullptr, ws);
    double l1 = 0;
    for (Index c = 0; c < K; ++c) {
      facts.ambiguous += ws[c] != 0;
      if (!std::isfinite(we[c])) {
        if (facts.nonfinite++ == 0) facts.first_nonfinite = (j0 + jj) * K + c;
      } else {
        l1 += wa[c];
      }
      if (we[c] != 0.0) facts.all_zero = false;
    }
    t.a_l1[jj] = l1 * (1.0 + 0x1p-40);
    if (walk) {
      for (Index c = 0; c < K; ++c) t.w_kernel[c * w + jj] = t.kernel_row[c];
    }
  }
  return facts;
}

/// The bias and residual element (i, j) adds (0 where the epilogue has none).
std::pair<float, float> epilogue_operands(const LinearProblem& p, Index i, Index j) {
  return {has_bias(p.epilogue) ? p.bias.at(j) : 0.0f, has_residual(p.epilogue) ? p.residual.at(i, j) : 0.0f};
}

/// Per element of the block: S (and D) made true bounds, B, T, the centre and both accepted
/// intervals. `spread` says whether t.d holds sum |x| spread for this block.
void block_bounds(const LinearProblem& p, const Activations& x, Index j0, Index w, bool spread,
                  const std::function<const ColumnModel&(Index)>& model_of, BlockScratch& t) {
  const Index M = p.x.rows, K = p.weights->k;
  for (Index i = 0; i < M; ++i) {
    for (Index jj = 0; jj < w; ++jj) {
      const Index j = j0 + jj;
      const std::size_t e = static_cast<std::size_t>(i * w + jj);
      const double ys = t.y[e];
      const double su = inflate_s(t.s[e], K);
      t.s[e] = su;
      const double du = spread ? inflate_s(t.d[e], K) : 0.0;  // a GEMM of non-negative terms, like S
      const ElementBound eb = element_bound(su, du, x.l1[i], t.a_l1[jj], model_of(j), p.accumulator, p.lambda, K);
      const auto [bias, res] = epilogue_operands(p, i, j);
      t.bound[e] = eb.bound;
      t.tier[e] = eb.tier;
      t.center[e] = ys + static_cast<double>(bias) + static_cast<double>(res);
      t.accept[e] = propagate(ys, eb.bound, bias, res, p);
      t.expect[e] = propagate(ys, eb.tier, bias, res, p);
    }
  }
}

/// The declared K walk of every row over the block's columns, epilogue included.
void block_walk(const LinearProblem& p, const Activations& x, Index j0, Index w, BlockScratch& t) {
  const Index M = p.x.rows, K = p.weights->k;
  for (Index i0 = 0; i0 < M; i0 += kWalkRows) {
    const Index nr = std::min(kWalkRows, M - i0);
    float* out = t.walk.data() + i0 * w;
    walk_rows_block(p.walk, x.f32.data() + i0 * K, nr, t.w_kernel.data(), K, w, out, t.walk_scratch.data());
    for (Index i = i0; i < i0 + nr; ++i) {
      for (Index jj = 0; jj < w; ++jj) {
        const Index j = j0 + jj;
        const auto [bias, res] = epilogue_operands(p, i, j);
        float& v = t.walk[static_cast<std::size_t>(i * w + jj)];
        v = epilogue_value(v, bias, res, p);
      }
    }
  }
}

void size_scratch(BlockScratch& t, Index M, Index K, Index bc, bool walk) {
  const std::size_t cells = static_cast<std::size_t>(M * bc);
  t.w_exact.resize(static_cast<std::size_t>(bc * K));
  t.w_alg.resize(t.w_exact.size());
  t.w_spread.resize(t.w_exact.size());
  t.d.resize(cells);
  t.y.resize(cells);
  t.s.resize(cells);
  t.bound.resize(cells);
  t.tier.resize(cells);
  t.center.resize(cells);
  t.accept.resize(cells);
  t.expect.resize(cells);
  t.a_l1.resize(static_cast<std::size_t>(bc));
  if (walk) {
    t.w_kernel.resize(static_cast<std::size_t>(K * bc));
    t.kernel_row.resize(static_cast<std::size_t>(K));
    t.walk.resize(cells);
    t.walk_scratch.resize(static_cast<std::size_t>(kWalkRows * bc));
  }
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

  ReferenceSummary summary;
  summary.blocks = nblocks;
  const Activations x = prepare_activations(p, K, summary);

  std::vector<ColumnModel> models;
  models.reserve(W.segments.size());
  for (const WeightSegment& seg : W.segments) models.push_back(column_model(seg, K));
  const std::function<const ColumnModel&(Index)> model_of = [&](Index j) -> const ColumnModel& {
    for (std::size_t s = 0; s < W.segments.size(); ++s) {
      if (j >= W.segments[s].row_begin && j < W.segments[s].row_end) return models[s];
    }
    NCERT_UNREACHABLE("column outside every segment");
  };
  for (const ColumnModel& m : models) {
    if (std::isinf(gamma(m.k_eff, p.accumulator.u_eff))) summary.vacuous_bound = true;
  }
  std::vector<BlockWeightFacts> facts(static_cast<std::size_t>(nblocks));

#pragma omp parallel
  {
    BlockScratch t;
    size_scratch(t, M, K, bc, walk);
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < nblocks; ++b) {
      const Index j0 = b * bc;
      const Index j1 = std::min(N, j0 + bc);
      const Index w = j1 - j0;
      facts[static_cast<std::size_t>(b)] = decode_block(p, j0, w, walk, t);
      // Two f64 GEMMs on this thread (Eigen does not parallelize inside an active region),
      // with a shape that depends only on the block: bit-identical at any thread count.
      const BlockWeightFacts& f = facts[static_cast<std::size_t>(b)];
      detail::gemm_abt(x.exact.data(), M, K, t.w_exact.data(), w, t.y.data());
      detail::gemm_abt(x.abs.data(), M, K, t.w_alg.data(), w, t.s.data());
      // A third GEMM only where two kernel weights are allowed and differ (AF4 affine with f32
      // scales and dequant_op = either): bf16 and f16 scales make s*q exact in f32, so both
      // orders agree and this costs nothing in the common case.
      if (f.ambiguous > 0) detail::gemm_abt(x.abs.data(), M, K, t.w_spread.data(), w, t.d.data());
      block_bounds(p, x, j0, w, f.ambiguous > 0, model_of, t);
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
      sink.consume(block);
    }
  }

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

Result<ReferenceResult> compute_reference(const LinearProblem& problem,
                                          const ReferenceOptions& options) {
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
  r.accept.resize(n);
  r.expect.resize(n);
  if (problem.walk.declared && options.emulate_walk) r.walk.resize(n);
  CollectSink sink(&r);
  NCERT_ASSIGN_OR_RETURN(r.summary, evaluate_reference(problem, sink, options));
  return r;
}

}  // namespace ncert::reference
