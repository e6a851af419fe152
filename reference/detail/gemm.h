// Internal: the reference's GEMMs (y* in f64, S in f32, the spread's D in f64), behind a
// plain-pointer interface so Eigen is confined to one translation unit.
#pragma once

#include "reference/dtype.h"

namespace ncert::reference::detail {

/// C[m x n] = A[m x k] * B[n x k]^T, all row-major and contiguous, f64. Runs on the calling
/// thread only (the caller parallelizes over blocks); the summation order depends only on the
/// shapes, so equal shapes give equal bits on any thread.
void gemm_abt(const double* a, Index m, Index k, const double* b, Index n, double* c);

/// The same in f32 (S = |x| |w| over magnitudes rounded up to f32; docs/error-bounds.md §1).
/// Each element is some summation tree of K products, each product rounded once or fused
/// into an add: at most K roundings on any product's path, whatever Eigen's blocking.
void gemm_abt(const float* a, Index m, Index k, const float* b, Index n, float* c);

}  // namespace ncert::reference::detail
