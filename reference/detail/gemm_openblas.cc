// OpenBLAS's f64 GEMM, confined to this translation unit as Eigen is to gemm.cc. Its serial
// build (tools/cmake/NcertOpenBLAS.cmake): every call runs on its caller's thread, with no pool
// and no process-wide thread count; the reference calls it from each of its threads at once.
#include <cblas.h>

#include <climits>

#include "reference/detail/gemm.h"
#include "reference/status.h"

namespace ncert::reference::detail {

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
  NCERT_ASSERT(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "an f64 product too large for OpenBLAS's int sizes");
  const auto mi = static_cast<blasint>(m), ni = static_cast<blasint>(n), ki = static_cast<blasint>(k);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mi, ni, ki, 1.0, a, ki, b, ki, 0.0, c, ni);
}

}  // namespace ncert::reference::detail
