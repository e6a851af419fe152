// Internal: the two f64 GEMMs of the reference, behind a plain-pointer interface so Eigen is
// confined to one translation unit.
#pragma once

#include "reference/dtype.h"

namespace ncert::reference::detail {

/// C[m x n] = A[m x k] * B[n x k]^T, all row-major and contiguous, f64. Runs on the calling
/// thread only (the caller parallelizes over blocks); the summation order depends only on the
/// shapes, so equal shapes give equal bits on any thread.
void gemm_abt(const double* a, Index m, Index k, const double* b, Index n, double* c);

}  // namespace ncert::reference::detail
