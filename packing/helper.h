// This header defines the CPU reference of the engine-side packing helper:
//  - LinearKernel: the "unchanged linear kernel", f32 weights decoded once (shared by every
//    width instance and call), run on any buffer of rows with the declared K walk (seq-fma when
//    none is declared), bit-exact with reference::walk_dot;
//  - gather / scatter that touch only valid columns of selected rows (padding columns and
//    unselected rows are never written; in-place residual is read before it is overwritten);
//  - execute(): validate, then the packed path; an unsupported plan falls back to the unpacked
//    path; any other guard violation returns its code without touching a byte.
#pragma once

#include <memory>
#include <vector>

#include "packing/pack_plan.h"
#include "reference/status.h"

namespace ncert::packing {

class LinearKernel {
 public:
  /// Decodes the weights' kernel values once (reference::decode_weight_row `kernel` output).
  /// The walk's split must divide K (kGuardWalkSplit).
  static Result<std::shared_ptr<const LinearKernel>> create(const reference::Weights& weights, DType activation,
                                                            const reference::KWalk& walk);
  Index k() const { return k_; }
  Index n() const { return n_; }
  const reference::KWalk& walk() const { return walk_; }
  /// acc[r * acc_stride + j] = walk(x row r, w_j) for r < rows, j < N; only those cells written.
  /// `start`: null, or the N biases the output holds before the kernel adds into it (bias_at =
  /// start; reference/k_walk.h), then part of acc.
  void run(const void* x, DType x_dtype, Index x_stride, Index rows, float* acc, Index acc_stride,
           const float* start = nullptr) const;

 private:
  Index k_ = 0;
  Index n_ = 0;
  reference::KWalk walk_;
  std::vector<float> wt_;  ///< per block of kBlock columns: K x width, transposed
};

/// Copies the valid columns [0, K) of each selected row into its compact slot.
void gather(const PackPlan& plan, const void* x, void* compact_in);

/// Writes epilogue(acc) of each selected row's slot into the output, valid columns only.
void scatter(const PackPlan& plan, const float* compact_out, const void* bias, const void* residual, void* out);

/// All M rows through the kernel and the epilogue, valid columns only.
void run_unpacked(const PackPlan& plan, const LinearKernel& kernel, const HostBuffers& b);

/// Gather, kernel on the P compact rows, scatter. Assumes validate() passed.
void run_packed(const PackPlan& plan, const LinearKernel& kernel, const HostBuffers& b);

enum class PathTaken { kPacked, kUnpacked };

/// validate(); packed path if valid; unpacked path if the only objection is kGuardUnsupported
/// (and the unpacked path's own buffer checks pass); otherwise the guard's Status, with no byte
/// of any buffer touched.
Result<PathTaken> execute(const PackPlan& plan, const LinearKernel& kernel, const HostBuffers& b);

}  // namespace ncert::packing
