#include "reference/detail/gemm.h"

#include <omp.h>

#include <Eigen/Core>

#include "reference/status.h"

namespace ncert::reference::detail {

namespace {

template <typename T>
void gemm_abt_impl(const T* a, Index m, Index k, const T* b, Index n, T* c) {
  using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMatrix> A(a, m, k);
  Eigen::Map<const RowMatrix> B(b, n, k);
  Eigen::Map<RowMatrix> C(c, m, n);
  // Eigen runs its GEMM serially inside an active parallel region of > 1 threads, or when the
  // OpenMP team limit is 1; in either case its blocking is computed for one thread, which is
  // what makes the reference bit-identical at any thread count. Guard the assumption.
  NCERT_ASSERT(omp_get_num_threads() > 1 || Eigen::nbThreads() == 1,
               "reference GEMM would run Eigen's own parallel path (Eigen::setNbThreads > 1 "
               "with a single-thread team); results would depend on the thread count");
  C.noalias() = A * B.transpose();
}

}  // namespace

void gemm_abt(const double* a, Index m, Index k, const double* b, Index n, double* c) {
  gemm_abt_impl(a, m, k, b, n, c);
}

void gemm_abt(const float* a, Index m, Index k, const float* b, Index n, float* c) { gemm_abt_impl(a, m, k, b, n, c); }

}  // namespace ncert::reference::detail
