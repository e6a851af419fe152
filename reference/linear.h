// This header defines the exact reference of a projection Y = X W^T (+ epilogue): for every
// output element the exact-product value y*, the true upper bound S_alg, the deterministic
// bound B, the probabilistic tier T, the accepted intervals of the stored output for both, and
// (when the kernel declares a K walk) the bit-exact emulated output.
//
// How: y* is an f64 GEMM (Eigen) over blocks of output columns: every product x*w of bf16/f32
// operands is exact in f64 and the f64 accumulation error gamma_{K+2}(2^-53) S is added to B.
// S = sum |x| a is an f32 GEMM of the magnitudes rounded up to f32, made a true upper bound by
// (s_hat + K 2^-122)(1 + gamma_K(2^-24)): all its terms are non-negative, so any summation
// order's error is one-sided in that way (docs/error-bounds.md §1); a block whose f32 S
// overflows is recomputed in f64. The block decomposition is fixed (independent of the thread
// count) and each block's GEMMs run on one thread, so y*, S, B and everything derived are
// bit-identical at any thread count. Memory stays O(block), not O(N K): blocks are handed to
// a sink and dropped.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "reference/bounds.h"
#include "reference/linear_spec.h"

namespace ncert::reference {

/// One block of reference results: all M rows x output columns [col_begin, col_end).
/// Arrays are row-major with row stride width() (element (r, c) at r * width() + c - col_begin).
struct ReferenceBlock {
  Index index = 0;  ///< block number (blocks are ordered by col_begin)
  Index col_begin = 0;
  Index col_end = 0;
  Index rows = 0;
  const double* y_star = nullptr;    ///< exact-product dot product, before the epilogue
  const double* s = nullptr;         ///< S_alg, inflated to a true upper bound
  const double* bound = nullptr;     ///< B
  const double* tier = nullptr;      ///< T
  const double* center = nullptr;    ///< y* + bias + residual (statistics only)
  const Interval* accept = nullptr;  ///< accepted stored values under B
  const Interval* expect = nullptr;  ///< ... under T (probabilistic tier)
  const float* walk = nullptr;       ///< emulated k_walk output, or nullptr when not declared
  /// The residual model (docs/error-bounds.md §6c): sigma, the sub-Gaussian scale of the
  /// accumulated rounding error under mean-independent round-to-nearest errors (0 where the
  /// accumulator's errors are biased), and slack, B's deterministic part besides the rounding
  /// plus, for quantized segments, the dequantization roundings every row shares.
  const double* sigma = nullptr;
  const double* slack = nullptr;
  /// With ReferenceOptions::residual_tile: what column_tile_dots reads, the activations rounded
  /// to f32 and the block's exact weights (rows x k and width() x k, row-major; the weights are
  /// rounded to f32 only for the columns it is asked for). nullptr otherwise.
  const float* x_f32 = nullptr;
  const double* w_exact = nullptr;
  /// Where the block's exact weights are its kernel weights widened and were not stored
  /// (w_exact null): those kernel weights, in the walk's panels (detail/gemm.h F32Panels).
  const float* w_panels = nullptr;
  Index k = 0;
  Index tile = 0;   ///< K columns per tile (the last may be shorter)
  Index tiles = 0;  ///< ceil(K / tile)

  Index width() const { return col_end - col_begin; }
  Index at(Index r, Index c) const { return r * width() + (c - col_begin); }
};

/// Column c's partial dot products over the block's K tiles, tile t of row r at
/// out[t * rows + r] (tiles x rows floats): f32 sums in one fixed order, 8 lanes combined in a
/// fixed tree, so the same on every CPU and at any thread count. They weight the residual tests
/// (docs/error-bounds.md §6d) and bound nothing; the tests compute them only for the columns
/// their screen does not clear. Requires block.x_f32.
void column_tile_dots(const ReferenceBlock& block, Index c, float* out);

/// Receives blocks. consume() is called concurrently from worker threads, once per block, for
/// distinct blocks; implementations store per-block partial results indexed by block.index and
/// combine them in index order afterwards (so results do not depend on scheduling).
class ReferenceSink {
 public:
  virtual ~ReferenceSink() = default;
  virtual void consume(const ReferenceBlock& block) = 0;
};

/// The kernels that sum S from bf16 magnitudes (detail/s_bf16.h).
enum class Bf16SKernel : std::uint8_t {
  kFastest,      ///< the instruction where the build has it and this CPU runs it faster, else portable
  kInstruction,  ///< AVX512-BF16's VDPBF16PS where the build has it, else portable
  kPortable,     ///< fused f32 multiply-adds, as builds for CPUs without the instruction run
};

/// Each thread's block buffers, kept from one evaluate_reference call to the next that shares
/// them (ReferenceOptions::scratch): grown as needed, never zeroed again. For many calls on
/// problems of one shape, such as the declaration diagnosis's 10-15 trials on its sample,
/// each of which grew and zeroed its block's f64 and f32 weights afresh (7.8 MB a thread at
/// K 5,120; docs/performance.md, "Diagnosing a failure"). Held until destroyed; one call at a
/// time (a second call while one runs is a programming error, asserted).
class ReferenceScratch {
 public:
  ReferenceScratch();
  ~ReferenceScratch();
  ReferenceScratch(const ReferenceScratch&) = delete;
  ReferenceScratch& operator=(const ReferenceScratch&) = delete;
  struct Block;    ///< one thread's buffers for its blocks (linear.cc)
  struct Threads;  ///< every thread's
  Threads& threads() { return *threads_; }

 private:
  std::unique_ptr<Threads> threads_;
};

struct ReferenceOptions {
  Index block_cols = 128;    ///< output columns per block (fixed: part of the result's identity)
  bool emulate_walk = true;  ///< emulate the declared k_walk (ignored when none is declared)
  Index residual_tile = 0;   ///< > 0: hand each block its partial dots over K tiles this wide
  /// The residual tests' tile dots and tallies (certify's reference pass); off only to measure
  /// their cost side by side (tools/bench/bench_check).
  bool residual_tests = true;
  /// S from the magnitudes rounded up to bf16, in one fixed order (detail/s_bf16.h), where they
  /// allow; off: the f32 GEMM everywhere (to compare the two; docs/error-bounds.md §1).
  bool bf16_s = true;
  /// Which kernel sums that S. The same bits whichever, under rounding to nearest, the
  /// process's default (tested): the choice is speed only, and explicit only to show that and
  /// to time each (tools/bench/bench_reference).
  Bf16SKernel bf16_s_kernel = Bf16SKernel::kFastest;
  /// Block buffers to keep for the next call (nullptr: this call's own, released at its end).
  /// The results are the same either way.
  ReferenceScratch* scratch = nullptr;
};

/// Facts about the problem the checks report next to the per-element results.
struct ReferenceSummary {
  Index blocks = 0;
  Index nonfinite_x = 0;         ///< non-finite activations (the reference cannot certify them)
  Index nonfinite_w = 0;         ///< non-finite dequantized weights
  Index first_nonfinite_x = -1;  ///< flat index (row * K + col) of the first one
  Index first_nonfinite_w = -1;  ///< flat index (row of W * K + col)
  bool all_zero_x = true;        ///< every valid activation is +-0
  bool all_zero_w = true;        ///< every dequantized weight is +-0
  bool vacuous_bound = false;    ///< gamma_K(u_eff) undefined (K u_eff >= 1/2): B is +inf
  /// Some segment's accumulation does not round to nearest (a directed accumulator or promoted
  /// stage): its errors are biased, and ReferenceBlock::sigma is 0 there.
  bool biased_rounding = false;
  /// Weights whose two allowed kernel values (dequant_op = either) differ: B charges the spread,
  /// and no single K walk can be emulated.
  Index ambiguous_weights = 0;
  Index s_bf16_blocks = 0;  ///< blocks whose S came from bf16 magnitudes (the rest: the f32 GEMM)
};

/// Evaluates the reference block by block into `sink`. Errors: validate_problem()'s codes.
/// Whether some segment's accumulation rounds with a bias (a directed or truncating accumulator
/// or promoted stage): ReferenceSummary::biased_rounding, known before the reference runs (the
/// residual tests, which do not apply then, are not prepared).
bool rounds_with_bias(const LinearProblem& problem);

Result<ReferenceSummary> evaluate_reference(const LinearProblem& problem, ReferenceSink& sink,
                                            const ReferenceOptions& options = {});

/// Everything for every element, M x N row-major: for tests and small problems.
struct ReferenceResult {
  Index rows = 0;
  Index cols = 0;
  std::vector<double> y_star, s, bound, tier, center, sigma, slack;
  std::vector<Interval> accept, expect;
  std::vector<float> walk;  ///< empty when no walk is declared
  ReferenceSummary summary;
  Index at(Index r, Index c) const { return r * cols + c; }
};
Result<ReferenceResult> compute_reference(const LinearProblem& problem, const ReferenceOptions& options = {});

}  // namespace ncert::reference
