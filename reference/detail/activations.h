// The activations of one projection, prepared once for every block of the reference: exact
// values, f32 magnitudes for S, upper bounds of the row 1-norms (linear.cc's blocks read them).
#pragma once

#include <cstdint>
#include <vector>

#include "reference/large_block.h"
#include "reference/linear.h"

namespace ncert::reference::detail {

/// The activations once: exact values (f64 for y*, f32 for the walk), magnitudes (f32 for the
/// S GEMM; f64 only for the spread's GEMM, when a segment can have two-valued weights), upper
/// bounds of the row 1-norms.
struct Activations {
  // Mapped (large_block.h), so that once packed for y* (detail::PackedActivations) its pages go
  // back to the system at once.
  LargeVector<double> exact;
  std::vector<double> abs;
  std::vector<float> f32, mag;
  std::vector<double> l1;
  // mag rounded up to bf16 (M x bf16_padded(K)) for S from bf16 magnitudes; empty where it
  // cannot serve. mag_bf16_exact: no magnitude needed rounding (bf16 activations).
  LargeVector<std::uint16_t> mag_bf16;  // aligned rows for the S kernels
  bool mag_bf16_exact = false;
  // mag_bf16 widened for the portable S kernel (detail::widen_bf16_rows), where it runs.
  LargeVector<float> mag_wide;
};

/// The activations of p (its quantized ones where x_quant is declared), counting non-finite and
/// zero ones into `summary`; `with_abs`: also |x| in f64 (a segment with two-valued weights).
Activations prepare_activations(const LinearProblem& p, Index K, bool with_abs, ReferenceSummary& summary);

/// |x| in f64 for the spread's GEMM and the f64 fallback of S: the shared copy when the problem
/// has one, else built once per thread on first use (only a block whose f32 S overflows).
const double* abs_activations(const Activations& x, std::vector<double>& own);

}  // namespace ncert::reference::detail
