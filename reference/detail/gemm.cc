#include "reference/detail/gemm.h"

#include <Eigen/Core>
#include <cstddef>

namespace ncert::reference::detail {

namespace {

/// Eigen's packing buffers for one thread, kept from one GEMM to the next. Eigen allocates them
/// for every product (from the heap above 128 KiB; their size follows the cache sizes Eigen
/// reads at run time: 428 KiB for each f32 buffer at the reference's blocks here), and
/// glibc gives the pages back on free and maps fresh ones on the next call: every block
/// paid page faults for ~0.6 MiB. On the project's VM, where a page's first touch runs at
/// 0.3-5 GB/s, that made Eigen's f32 GEMM of a 128 x 5,120 x 128 block 3x slower (4.2 ms
/// against 1.35 ms) and the whole reference 1.25-1.3x slower (tools/bench/bench_reference).
template <typename T>
class PackingBuffers {
 public:
  PackingBuffers() = default;
  PackingBuffers(const PackingBuffers&) = delete;
  PackingBuffers& operator=(const PackingBuffers&) = delete;
  ~PackingBuffers() {
    Eigen::internal::aligned_free(a_);
    Eigen::internal::aligned_free(b_);
  }
  T* a(Index size) { return grown(a_, a_size_, size); }
  T* b(Index size) { return grown(b_, b_size_, size); }

 private:
  static T* grown(T*& p, Index& have, Index want) {
    if (want > have) {
      Eigen::internal::aligned_free(p);
      p = nullptr;  // nothing freed stays reachable if the allocation below throws
      have = 0;
      p = static_cast<T*>(Eigen::internal::aligned_malloc(static_cast<std::size_t>(want) * sizeof(T)));
      have = want;
    }
    return p;
  }
  T* a_ = nullptr;
  T* b_ = nullptr;
  Index a_size_ = 0, b_size_ = 0;
};

/// The blocking Eigen's product computes for this shape (the same kc, mc, nc: the same bits),
/// on this thread's kept buffers instead of fresh ones.
template <typename T>
class KeptBlocking : public Eigen::internal::gemm_blocking_space<Eigen::RowMajor, T, T, Eigen::Dynamic, Eigen::Dynamic,
                                                                 Eigen::Dynamic> {
 public:
  KeptBlocking(Index m, Index n, Index k, PackingBuffers<T>& buffers) : Base(m, n, k, 1, true) {
    this->m_blockA = buffers.a(this->mc() * this->kc());
    this->m_blockB = buffers.b(this->kc() * this->nc());
  }
  KeptBlocking(const KeptBlocking&) = delete;
  KeptBlocking& operator=(const KeptBlocking&) = delete;
  ~KeptBlocking() { this->m_blockA = this->m_blockB = nullptr; }  // the buffers' own, not the base's to free

 private:
  using Base =
      Eigen::internal::gemm_blocking_space<Eigen::RowMajor, T, T, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic>;
};

template <typename T>
void gemm_abt_impl(const T* a, Index m, Index k, const T* b, Index n, T* c) {
  using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMatrix> A(a, m, k);
  Eigen::Map<const RowMatrix> B(b, n, k);
  Eigen::Map<RowMatrix> C(c, m, n);
  // Every path below runs on the calling thread alone, with Eigen's blocking for one thread
  // (the GEMM is called serially; the coefficient-wise and GEMV products never parallelize):
  // the bits depend on the shape only, at any thread count.
  // `C.noalias() = A * B^T` takes Eigen's GEMM unless the shape is tiny (k + m + n below
  // EIGEN_GEMM_TO_COEFFBASED_THRESHOLD: a coefficient-wise product), a vector (one row or
  // column: GEMV) or empty; those keep Eigen's own evaluation. The GEMM itself is what Eigen's
  // product runs (generic_product_impl<..., GemmProduct>: zero C, then the serial
  // general_matrix_matrix_product on its blocking for the shape, alpha 1), with the packing
  // buffers kept; GemmTest.KeptBuffersGiveEigensOwnProductBitForBit holds it to Eigen's product.
  if (m <= 1 || n <= 1 || k == 0 || k + m + n < EIGEN_GEMM_TO_COEFFBASED_THRESHOLD) {
    C.noalias() = A * B.transpose();
    return;
  }
  thread_local PackingBuffers<T> buffers;
  KeptBlocking<T> blocking(m, n, k, buffers);
  C.setZero();
  Eigen::internal::general_matrix_matrix_product<Index, T, Eigen::RowMajor, false, T, Eigen::ColMajor, false,
                                                 Eigen::RowMajor, 1>::run(m, n, k, a, k, b, k, c, 1, n, T(1), blocking,
                                                                          nullptr);
}

}  // namespace

void gemm_abt(const double* a, Index m, Index k, const double* b, Index n, double* c) {
  gemm_abt_impl(a, m, k, b, n, c);
}

void gemm_abt(const float* a, Index m, Index k, const float* b, Index n, float* c) { gemm_abt_impl(a, m, k, b, n, c); }

}  // namespace ncert::reference::detail
