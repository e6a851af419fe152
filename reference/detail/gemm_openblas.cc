// OpenBLAS's f64 GEMM, confined to this translation unit as Eigen is to gemm.cc.
#include <cblas.h>

#include <climits>

#include "reference/detail/gemm.h"
#include "reference/status.h"

namespace ncert::reference::detail {

namespace {

/// Tells OpenBLAS to compute each call on its caller's thread: the reference calls it from every
/// thread of its own at once, one block each. Its own threads would split a block's columns
/// among them (its pthread build starts one a core), oversubscribe the cores the reference's
/// threads already fill, and change nothing in the bits. Checked at every call, not once: the
/// count is the process's, and a program around the reference (tools/bench/bench_reference's
/// OpenBLAS baseline) may set another between calls. Only lowered here, which starts no thread.
void use_the_callers_thread() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

}  // namespace

bool openblas_is_faster() {
#if defined(__AVX512F__)
  return false;
#else
  return true;
#endif
}

void gemm_abt_openblas(const double* a, Index m, Index k, const double* b, Index n, double* c) {
  // The shapes Eigen's product takes off its GEMM (one row or column, no depth, or too small to
  // block) take Eigen's product here too: OpenBLAS needs no such path, but one rule keeps tiny
  // products (the tests' and the diagnosis's samples) alike whichever GEMM a build takes.
  if (!runs_eigen_gemm(m, k, n)) {
    gemm_abt(a, m, k, b, n, c);
    return;
  }
  use_the_callers_thread();
  NCERT_ASSERT(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "an f64 product too large for OpenBLAS's int sizes");
  const auto mi = static_cast<blasint>(m), ni = static_cast<blasint>(n), ki = static_cast<blasint>(k);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mi, ni, ki, 1.0, a, ki, b, ki, 0.0, c, ni);
}

}  // namespace ncert::reference::detail
