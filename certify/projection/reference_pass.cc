#include "certify/projection/reference_pass.h"

#include <omp.h>

#include <chrono>
#include <vector>

#include "certify/projection/checks.h"
#include "reference/float_bits.h"

namespace ncert::certify {

void WalkTally::add(Index r, Index c, std::uint32_t e, std::uint32_t w) {
  ++compared;
  if (e == w) return;
  ++mismatches;
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
  if (o.row >= 0 && (row < 0 || o.row < row || (o.row == row && o.col < col))) {
    row = o.row;
    col = o.col;
    engine = o.engine;
    walk = o.walk;
  }
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::uint32_t walk_bits(float w, DType t) {
  return t == DType::kF32 ? reference::f32_bits(w) : reference::f32_to_bf16(w);
}

/// Compares every engine output with each reference block as it is produced. Each block's
/// partial results go to its own slot and are merged in block order, so the pass does not depend
/// on which thread computed which block.
class CompareSink final : public reference::ReferenceSink {
 public:
  struct Partial {
    std::array<reference::BoundStats, kEngineOutputs> bound;
    std::array<WalkTally, kEngineOutputs> walk;
    double seconds = 0;
  };

  CompareSink(const ProjectionFacts& f, Index blocks, const BlockHook& hook)
      : f_(f), hook_(hook), parts(static_cast<std::size_t>(blocks)) {}

  void consume(const reference::ReferenceBlock& b) override {
    const auto t0 = std::chrono::steady_clock::now();
    Partial& part = parts[static_cast<std::size_t>(b.index)];
    const ProjectionInfo& info = f_.info();
    const DType t = info.output;
    const Index stride = info.out_stride;
    for (Index i = 0; i < b.rows; ++i) {
      const Index slot = f_.slot_of_row[static_cast<std::size_t>(i)];
      for (EngineOutputId id : kAllEngineOutputs) {
        const EngineOutput& out = f_.data.output(id);
        // Packed outputs hold reference values only on selected rows.
        if (!out.present || (id != EngineOutputId::kUnpacked && slot < 0)) continue;
        const auto o = static_cast<std::size_t>(id);
        const Index src_row = id == EngineOutputId::kCompact ? slot : i;
        for (Index c = b.col_begin; c < b.col_end; ++c) {
          const Index e = b.at(i, c);
          const float z = out.value(t, stride, src_row, c);
          part.bound[o].add(i, c, z, b.center[e], b.bound[e], b.accept[e], b.expect[e]);
          if (b.walk) part.walk[o].add(i, c, out.bits(t, stride, src_row, c), walk_bits(b.walk[e], t));
        }
      }
    }
    part.seconds += seconds_since(t0);
    if (hook_) hook_(b);
  }

  const ProjectionFacts& f_;
  const BlockHook& hook_;
  std::vector<Partial> parts;
};

}  // namespace

Result<ReferencePass> run_reference_pass(const ProjectionFacts& f, const reference::LinearProblem& problem,
                                         const reference::ReferenceOptions& options, const BlockHook& hook) {
  const Index blocks = (f.info().n + options.block_cols - 1) / options.block_cols;
  CompareSink sink(f, blocks, hook);
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = reference::evaluate_reference(problem, sink, options);
  if (!summary.ok()) return summary.status().with_context(f.info().path);
  ReferencePass pass;
  pass.seconds = seconds_since(t0);
  pass.summary = *summary;
  pass.walk_emulated = problem.walk.declared && options.emulate_walk;
  double compare_cpu = 0;
  for (const CompareSink::Partial& p : sink.parts) {
    for (std::size_t o = 0; o < kEngineOutputs; ++o) {
      pass.bound[o].merge(p.bound[o]);
      pass.walk[o].merge(p.walk[o]);
    }
    compare_cpu += p.seconds;
  }
  pass.compare_seconds = compare_cpu / std::max(1, omp_get_max_threads());
  return pass;
}

}  // namespace ncert::certify
