#include "reference/linear.h"

#include <omp.h>

#include <cmath>
#include <cstring>

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

  // Activations once: exact values, magnitudes, f32 values for the walk, row 1-norms.
  std::vector<double> x_exact(static_cast<std::size_t>(M * K)), x_abs(x_exact.size());
  std::vector<float> x_f32(static_cast<std::size_t>(M * K));
  std::vector<double> x_l1(static_cast<std::size_t>(M), 0.0);
  for (Index i = 0; i < M; ++i) {
    double l1 = 0;
    for (Index c = 0; c < K; ++c) {
      const float v = p.x.at(i, c);
      x_f32[i * K + c] = v;
      x_exact[i * K + c] = v;
      x_abs[i * K + c] = std::fabs(static_cast<double>(v));
      if (!std::isfinite(v)) {
        if (summary.nonfinite_x++ == 0) summary.first_nonfinite_x = i * K + c;
      } else {
        l1 += x_abs[i * K + c];
      }
      if (v != 0.0f) summary.all_zero_x = false;
    }
    x_l1[i] = l1 * (1.0 + 0x1p-40);  // generous cover of the f64 summation error
  }

  std::vector<ColumnModel> models;
  models.reserve(W.segments.size());
  for (const WeightSegment& seg : W.segments) models.push_back(column_model(seg, K, p.accumulator, p.x.dtype));
  auto model_of = [&](Index j) -> const ColumnModel& {
    for (std::size_t s = 0; s < W.segments.size(); ++s) {
      if (j >= W.segments[s].row_begin && j < W.segments[s].row_end) return models[s];
    }
    NCERT_UNREACHABLE("column outside every segment");
  };
  for (const ColumnModel& m : models) {
    if (std::isinf(gamma(m.k_eff, p.accumulator.u_eff))) summary.vacuous_bound = true;
  }

  std::vector<Index> nonfinite_w(static_cast<std::size_t>(nblocks), 0);
  std::vector<Index> first_bad_w(static_cast<std::size_t>(nblocks), -1);
  std::vector<char> zero_w(static_cast<std::size_t>(nblocks), 1);

#pragma omp parallel
  {
    BlockScratch t;
    const std::size_t cells = static_cast<std::size_t>(M * bc);
    t.w_exact.resize(static_cast<std::size_t>(bc * K));
    t.w_alg.resize(t.w_exact.size());
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
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < nblocks; ++b) {
      const Index j0 = b * bc;
      const Index j1 = std::min(N, j0 + bc);
      const Index w = j1 - j0;
      Index bad = 0, first_bad = -1;
      bool zero = true;
      for (Index jj = 0; jj < w; ++jj) {
        double* we = t.w_exact.data() + jj * K;
        double* wa = t.w_alg.data() + jj * K;
        decode_weight_row(W, j0 + jj, p.x.dtype, we, wa, walk ? t.kernel_row.data() : nullptr);
        double l1 = 0;
        for (Index c = 0; c < K; ++c) {
          if (!std::isfinite(we[c])) {
            if (bad++ == 0) first_bad = (j0 + jj) * K + c;
          } else {
            l1 += wa[c];
          }
          if (we[c] != 0.0) zero = false;
        }
        t.a_l1[jj] = l1 * (1.0 + 0x1p-40);
        if (walk) {
          for (Index c = 0; c < K; ++c) t.w_kernel[c * w + jj] = t.kernel_row[c];
        }
      }
      nonfinite_w[b] = bad;
      first_bad_w[b] = first_bad;
      zero_w[b] = zero;

      // Two f64 GEMMs on this thread (Eigen does not parallelize inside an active region),
      // with a shape that depends only on the block: bit-identical at any thread count.
      detail::gemm_abt(x_exact.data(), M, K, t.w_exact.data(), w, t.y.data());
      detail::gemm_abt(x_abs.data(), M, K, t.w_alg.data(), w, t.s.data());

      for (Index i = 0; i < M; ++i) {
        for (Index jj = 0; jj < w; ++jj) {
          const Index j = j0 + jj;
          const std::size_t e = static_cast<std::size_t>(i * w + jj);
          const double ys = t.y[e];
          const double su = inflate_s(t.s[e], K);
          t.s[e] = su;
          const ElementBound eb =
              element_bound(su, x_l1[i], t.a_l1[jj], model_of(j), p.accumulator, p.lambda, K);
          const float bias = has_bias(p.epilogue) ? p.bias.at(j) : 0.0f;
          const float res = has_residual(p.epilogue) ? p.residual.at(i, j) : 0.0f;
          t.bound[e] = eb.bound;
          t.tier[e] = eb.tier;
          t.center[e] = ys + static_cast<double>(bias) + static_cast<double>(res);
          t.accept[e] = propagate(ys, eb.bound, bias, res, p.epilogue, p.residual_at, p.output);
          t.expect[e] = propagate(ys, eb.tier, bias, res, p.epilogue, p.residual_at, p.output);
        }
      }
      if (walk) {
        for (Index i0 = 0; i0 < M; i0 += kWalkRows) {
          const Index nr = std::min(kWalkRows, M - i0);
          float* out = t.walk.data() + i0 * w;
          walk_rows_block(p.walk, x_f32.data() + i0 * K, nr, t.w_kernel.data(), K, w, out,
                          t.walk_scratch.data());
          for (Index i = i0; i < i0 + nr; ++i) {
            for (Index jj = 0; jj < w; ++jj) {
              const Index j = j0 + jj;
              const float bias = has_bias(p.epilogue) ? p.bias.at(j) : 0.0f;
              const float res = has_residual(p.epilogue) ? p.residual.at(i, j) : 0.0f;
              float& v = t.walk[static_cast<std::size_t>(i * w + jj)];
              v = epilogue_value(v, bias, res, p.epilogue, p.residual_at, p.output);
            }
          }
        }
      }

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

  for (Index b = 0; b < nblocks; ++b) {
    if (nonfinite_w[b] > 0 && summary.nonfinite_w == 0) summary.first_nonfinite_w = first_bad_w[b];
    summary.nonfinite_w += nonfinite_w[b];
    if (!zero_w[b]) summary.all_zero_w = false;
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
