#include "reference/detail/gemm.h"

#include <Eigen/Core>
#if defined(__AVX__)
#include <immintrin.h>
#endif
#include <algorithm>
#include <cstddef>
#include <vector>

#include "reference/bounds.h"
#include "reference/detail/directed_avx512.h"
#include "reference/large_block.h"
#include "reference/status.h"

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

/// This thread's packing buffers for Eigen's products of T (the f32 ones shared by S's GEMM from
/// rows and from the walk's panels).
template <typename T>
PackingBuffers<T>& kept_buffers() {
  thread_local PackingBuffers<T> buffers;
  return buffers;
}

/// Whether gemm_abt takes Eigen's GEMM for this shape (else a coefficient-wise product or a GEMV).
bool runs_gemm(Index m, Index k, Index n) {
  return !(m <= 1 || n <= 1 || k == 0 || k + m + n < EIGEN_GEMM_TO_COEFFBASED_THRESHOLD);
}

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
  if (!runs_gemm(m, k, n)) {
    C.noalias() = A * B.transpose();
    return;
  }
  KeptBlocking<T> blocking(m, n, k, kept_buffers<T>());
  C.setZero();
  Eigen::internal::general_matrix_matrix_product<Index, T, Eigen::RowMajor, false, T, Eigen::ColMajor, false,
                                                 Eigen::RowMajor, 1>::run(m, n, k, a, k, b, k, c, 1, n, T(1), blocking,
                                                                          nullptr);
}

// ---- activations packed once ------------------------------------------------------------------
//
// What general_matrix_matrix_product<..., RowMajor result>::run does for C = A B^T: it computes
// C^T = B A^T column-major, so its "lhs" is B (the weight rows, RowMajor) and its "rhs" is A^T
// (the activations, ColMajor), with kc along k, mc along B's rows, nc along A's rows. Its
// sequential loop (Eigen 3.4, GeneralMatrixMatrix.h):
//   for i2 in B's rows by mc:  for k2 in k by kc:  pack_lhs(B[i2.., k2..]);
//     for j2 in A's rows by nc:  pack_rhs(A^T[k2.., j2..]);  gebp(C^T[i2.., j2..], ...)
// The rhs panel of (k2, j2) holds the same values whatever i2 and B are, so it is packed once
// here; gebp then sees the same operands in the same order: the same bits.

using Traits = Eigen::internal::gebp_traits<double, double>;
using LhsMapper = Eigen::internal::const_blas_data_mapper<double, Index, Eigen::RowMajor>;
using RhsMapper = Eigen::internal::const_blas_data_mapper<double, Index, Eigen::ColMajor>;
using ResMapper = Eigen::internal::blas_data_mapper<double, Index, Eigen::ColMajor, Eigen::Unaligned, 1>;
using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, double, double, Eigen::Dynamic, Eigen::Dynamic,
                                                      Eigen::Dynamic>;

/// kc and nc of Eigen's blocking for the product of m x k activations with n weight rows.
/// kc and nc of a blocking for m activation rows.
std::pair<Index, Index> depth_and_column_blocks(const Blocking& blocking, Index m) {
  return {blocking.kc(), std::min(m, blocking.nc())};
}

std::pair<Index, Index> depth_and_column_blocks(Index m, Index k, Index n) {
  return depth_and_column_blocks(Blocking(m, n, k, 1, true), m);
}

}  // namespace

/// The activations as one blocking's products read them.
struct Packing {
  Index kc = 0, nc = 0;
  std::vector<Index> offset;  // of panel (k2 / kc, j2 / nc), row-major over k blocks
  LargeVector<double> data;   // mapped: huge pages where the system gives them
};

struct PackedActivations::Impl {
  Index m = 0, k = 0;
  Packing packing;
};

PackedActivations::PackedActivations(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PackedActivations::~PackedActivations() = default;

namespace {

Packing pack_for(const double* a, Index m, Index k, Index kc, Index nc) {
  Packing p;
  p.kc = kc;
  p.nc = nc;
  // Each panel starts on a 64-byte boundary, as Eigen's own packing buffer does (the buffer
  // itself does: large_block.h).
  constexpr Index kAlign = 8;
  Index total = 0;
  for (Index k2 = 0; k2 < k; k2 += kc) {
    for (Index j2 = 0; j2 < m; j2 += nc) {
      p.offset.push_back(total);
      total += (std::min(k2 + kc, k) - k2) * (std::min(j2 + nc, m) - j2);
      total = (total + kAlign - 1) / kAlign * kAlign;
    }
  }
  p.data.resize(static_cast<std::size_t>(total));
  Eigen::internal::gemm_pack_rhs<double, Index, RhsMapper, Traits::nr, Eigen::ColMajor> pack_rhs;
  const RhsMapper rhs(a, k);
  std::size_t panel = 0;
  for (Index k2 = 0; k2 < k; k2 += kc) {
    for (Index j2 = 0; j2 < m; j2 += nc, ++panel) {
      pack_rhs(p.data.data() + p.offset[panel], rhs.getSubMapper(k2, j2), std::min(k2 + kc, k) - k2,
               std::min(j2 + nc, m) - j2);
    }
  }
  return p;
}

}  // namespace

std::unique_ptr<PackedActivations> PackedActivations::pack(const double* a, Index m, Index k, Index block_rows) {
  if (!runs_gemm(m, k, block_rows)) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->m = m;
  impl->k = k;
  const std::pair<Index, Index> blocks = depth_and_column_blocks(m, k, block_rows);
  impl->packing = pack_for(a, m, k, blocks.first, blocks.second);
  return std::unique_ptr<PackedActivations>(new PackedActivations(std::move(impl)));
}

bool PackedActivations::covers(Index block_rows) const {
  const Impl& p = *impl_;
  return runs_gemm(p.m, p.k, block_rows) &&
         depth_and_column_blocks(p.m, p.k, block_rows) == std::pair<Index, Index>{p.packing.kc, p.packing.nc};
}

namespace {

/// This thread's f64 packing buffers for the products from packed activations, whichever way
/// their weight blocks are packed.
PackingBuffers<double>& packed_product_buffers() {
  thread_local PackingBuffers<double> buffers;
  return buffers;
}

/// The sequential loop of general_matrix_matrix_product (see above) for C = A B^T with A packed
/// and B's blocks packed by pack_b(block, i2, rows, k2, depth) as gemm_pack_lhs packs them.
template <typename PackB>
void gemm_packed(const PackedActivations::Impl& a, Index n, double* c, PackB&& pack_b) {
  const Index m = a.m, k = a.k;
  const Packing& p = a.packing;
  const Blocking blocking(m, n, k, 1, true);  // once here (the caller's checks made their own)
  const bool packed_alike = depth_and_column_blocks(blocking, m) == std::pair<Index, Index>{p.kc, p.nc};
  NCERT_ASSERT(runs_gemm(m, k, n) && packed_alike, "activations not packed for this product's blocking");
  const Index mc = std::min(n, blocking.mc());
  double* block_a = packed_product_buffers().a(mc * p.kc);
  Eigen::internal::gebp_kernel<double, double, Index, ResMapper, Traits::mr, Traits::nr, false, false> gebp;
  const ResMapper res(c, n, 1);
  std::fill(c, c + m * n, 0.0);
  for (Index i2 = 0; i2 < n; i2 += mc) {
    const Index actual_mc = std::min(i2 + mc, n) - i2;
    std::size_t panel = 0;
    for (Index k2 = 0; k2 < k; k2 += p.kc) {
      const Index actual_kc = std::min(k2 + p.kc, k) - k2;
      pack_b(block_a, i2, actual_mc, k2, actual_kc);
      for (Index j2 = 0; j2 < m; j2 += p.nc, ++panel) {
        const Index actual_nc = std::min(j2 + p.nc, m) - j2;
        gebp(res.getSubMapper(i2, j2), block_a, p.data.data() + p.offset[panel], actual_mc, actual_kc, actual_nc, 1.0);
      }
    }
  }
}

/// The rows of one of Eigen's f64 lhs register panels' packets (gebp_traits: 8 with AVX-512, 4
/// with AVX), when its blocks pack in panels of three packets, then two, then one; 0 otherwise.
/// A packet's rows lie in one walk panel (16 rows): the packet divides 16.
constexpr Index kPanelPacket =
    Traits::mr == 3 * Traits::LhsProgress && kTransposeRows % Traits::LhsProgress == 0 ? Traits::LhsProgress : 0;

/// kPacket floats widened into kPacket doubles.
template <Index kPacket>
inline void widen(const float* src, double* dst) {
#if defined(__AVX512F__)
  if constexpr (kPacket == 8) {
    _mm512_storeu_pd(dst, _mm512_cvtps_pd(_mm256_loadu_ps(src)));
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (kPacket == 4) {
    _mm256_storeu_pd(dst, _mm256_cvtps_pd(_mm_loadu_ps(src)));
    return;
  }
#endif
  for (Index r = 0; r < kPacket; ++r) dst[r] = src[r];
}

}  // namespace

void gemm_abt(const PackedActivations& a, const double* b, Index n, double* c) {
  Eigen::internal::gemm_pack_lhs<double, Index, LhsMapper, Traits::mr, Traits::LhsProgress,
                                 typename Traits::LhsPacket4Packing, Eigen::RowMajor>
      pack_lhs;
  const LhsMapper lhs(b, a.impl_->k);
  gemm_packed(*a.impl_, n, c, [&](double* block, Index i2, Index rows, Index k2, Index depth) {
    pack_lhs(block, lhs.getSubMapper(i2, k2), depth, rows);
  });
}

void pack_lhs_from_panels(const F32Panels& b, Index i0, Index rows, Index k0, Index depth, double* block) {
  NCERT_ASSERT(kPanelPacket > 0, "Eigen's f64 lhs panels are not of three packets, then two, then one here");
  constexpr Index kP = std::max<Index>(kPanelPacket, 1);  // 1 only where the assertion stops
  NCERT_ASSERT(rows % kP == 0 && i0 % kP == 0 && i0 + rows <= b.n && k0 + depth <= b.k, "panels packed out of range");
  // gemm_pack_lhs with Pack1 = mr = 3 packets, Pack2 = one: panels of mr rows while mr remain,
  // then of 2 packets, then of 1 (its half- and quarter-packet panels and single rows take
  // what a multiple of the packet never leaves).
  Index i = 0;
  double* out = block;
  for (const Index pack : {3 * kP, 2 * kP, kP}) {
    for (; i + pack <= rows; i += pack) {
      // Each packet of rows: kP consecutive floats a k step, in its 16-row panel or the tail
      // (whose width, a multiple of kP, keeps a packet within it).
      const float* src[3];
      Index step[3];
      for (Index g = 0; g < pack / kP; ++g) {
        const Index r = i0 + i + kP * g;
        step[g] = b.step(r);
        src[g] = b.row(r) + k0 * step[g];
      }
      for (Index kk = 0; kk < depth; ++kk) {
        for (Index g = 0; g < pack / kP; ++g) widen<kP>(src[g] + kk * step[g], out + kP * g);
        out += pack;
      }
    }
  }
}

bool packs_from_panels(const PackedActivations& a, const F32Panels& b) {
  constexpr Index kP = kPanelPacket;
  if constexpr (kP == 0) {
    return false;
  } else {
    if (b.n % kP != 0 || b.k != a.impl_->k || !a.covers(b.n)) return false;
    return std::min(b.n, Blocking(a.impl_->m, b.n, b.k, 1, true).mc()) % kP == 0;
  }
}

void gemm_abt(const PackedActivations& a, const F32Panels& b, double* c) {
  NCERT_ASSERT(packs_from_panels(a, b), "weights not packable from their panels");
  gemm_packed(*a.impl_, b.n, c, [&](double* block, Index i2, Index rows, Index k2, Index depth) {
    pack_lhs_from_panels(b, i2, rows, k2, depth, block);
  });
}

// ---- S's weight magnitudes packed from the walk's panels ----------------------------------------

namespace {

using TraitsF = Eigen::internal::gebp_traits<float, float>;
using RhsMapperF = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::ColMajor>;
using ResMapperF = Eigen::internal::blas_data_mapper<float, Index, Eigen::ColMajor, Eigen::Unaligned, 1>;
using BlockingF =
    Eigen::internal::gemm_blocking_space<Eigen::RowMajor, float, float, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic>;

/// The rows of one of Eigen's f32 lhs register panels' packets (16 with AVX-512, 8 with AVX),
/// when its blocks pack in panels of three packets, then two, then one; 0 otherwise.
constexpr Index kMagnitudePacket =
    TraitsF::mr == 3 * TraitsF::LhsProgress && kTransposeRows % TraitsF::LhsProgress == 0 ? TraitsF::LhsProgress : 0;

/// The charged magnitudes of kPacket floats (bounds.h f32_magnitude, in bit operations).
template <Index kPacket>
inline void magnitudes(const float* src, float* dst) {
#if defined(NCERT_DIRECTED_AVX512)
  if constexpr (kPacket == 16) {
    const __m512i mag = _mm512_and_si512(_mm512_loadu_si512(src), _mm512_set1_epi32(0x7FFFFFFF));
    _mm512_storeu_si512(dst, avx512::f32_magnitude_bits(mag));
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (kPacket == 8) {
    // |w|'s bits, nonzero ones raised to 2^-126's (0x00800000): the scalar loop below, which
    // GCC leaves unvectorized, was 6 % of a 4-bit check's CPU on an AVX2 EPYC (Zen 3).
    const __m256i mag =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i raised = _mm256_max_epu32(mag, _mm256_set1_epi32(0x00800000));
    const __m256i zero = _mm256_cmpeq_epi32(mag, _mm256_setzero_si256());
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_andnot_si256(zero, raised));
    return;
  }
#endif
  for (Index r = 0; r < kPacket; ++r) dst[r] = f32_magnitude(src[r]);
}

}  // namespace

void pack_lhs_magnitudes_from_panels(const F32Panels& b, Index i0, Index rows, Index k0, Index depth, float* block) {
  NCERT_ASSERT(kMagnitudePacket > 0, "Eigen's f32 lhs panels are not of three packets, then two, then one here");
  constexpr Index kP = std::max<Index>(kMagnitudePacket, 1);  // 1 only where the assertion stops
  NCERT_ASSERT(rows % kP == 0 && i0 % kP == 0 && i0 + rows <= b.n && k0 + depth <= b.k,
               "magnitudes packed out of range");
  // gemm_pack_lhs with Pack1 = mr = 3 packets, Pack2 = one: panels of 3 packets of rows while
  // they remain, then of 2, then of 1 (what a multiple of the packet never leaves: half-packet
  // panels, single rows).
  Index i = 0;
  float* out = block;
  for (const Index pack : {3 * kP, 2 * kP, kP}) {
    for (; i + pack <= rows; i += pack) {
      // Each packet of rows: kP consecutive floats a k step of its walk panel or the tail.
      const float* src[3];
      Index step[3];
      for (Index g = 0; g < pack / kP; ++g) {
        const Index r = i0 + i + kP * g;
        step[g] = b.step(r);
        src[g] = b.row(r) + k0 * step[g];
      }
      for (Index kk = 0; kk < depth; ++kk) {
        for (Index g = 0; g < pack / kP; ++g) magnitudes<kP>(src[g] + kk * step[g], out + kP * g);
        out += pack;
      }
    }
  }
}

bool magnitudes_pack_from_panels(Index m, const F32Panels& b) {
  constexpr Index kP = kMagnitudePacket;
  if constexpr (kP == 0) {
    return false;
  } else {
    if (b.n % kP != 0 || !runs_gemm(m, b.k, b.n)) return false;
    return std::min(b.n, BlockingF(m, b.n, b.k, 1, true).mc()) % kP == 0;
  }
}

void gemm_abt_magnitudes(const float* a, Index m, const F32Panels& b, float* c) {
  NCERT_ASSERT(magnitudes_pack_from_panels(m, b), "magnitudes not packable from their panels");
  const Index n = b.n, k = b.k;
  // What gemm_abt_impl's GEMM runs (general_matrix_matrix_product's sequential loop for a
  // row-major result, Eigen 3.4; see "activations packed once" above), on this thread's kept
  // buffers, with the lhs blocks packed from the panels: the same operands in the same order.
  KeptBlocking<float> blocking(m, n, k, kept_buffers<float>());
  const Index kc = blocking.kc();
  const Index mc = std::min(n, blocking.mc());
  const Index nc = std::min(m, blocking.nc());
  Eigen::internal::gemm_pack_rhs<float, Index, RhsMapperF, TraitsF::nr, Eigen::ColMajor> pack_rhs;
  Eigen::internal::gebp_kernel<float, float, Index, ResMapperF, TraitsF::mr, TraitsF::nr, false, false> gebp;
  const RhsMapperF rhs(a, k);
  const ResMapperF res(c, n, 1);
  float* const block_a = blocking.blockA();
  float* const block_b = blocking.blockB();
  // Eigen packs the rhs once when one block of it serves every block of lhs rows.
  const bool pack_rhs_once = mc != n && kc == k && nc == m;
  std::fill(c, c + m * n, 0.0f);
  for (Index i2 = 0; i2 < n; i2 += mc) {
    const Index actual_mc = std::min(i2 + mc, n) - i2;
    for (Index k2 = 0; k2 < k; k2 += kc) {
      const Index actual_kc = std::min(k2 + kc, k) - k2;
      pack_lhs_magnitudes_from_panels(b, i2, actual_mc, k2, actual_kc, block_a);
      for (Index j2 = 0; j2 < m; j2 += nc) {
        const Index actual_nc = std::min(j2 + nc, m) - j2;
        if (!pack_rhs_once || i2 == 0) pack_rhs(block_b, rhs.getSubMapper(k2, j2), actual_kc, actual_nc);
        gebp(res.getSubMapper(i2, j2), block_a, block_b, actual_mc, actual_kc, actual_nc, 1.0f);
      }
    }
  }
}

void gemm_abt(const double* a, Index m, Index k, const double* b, Index n, double* c) {
  gemm_abt_impl(a, m, k, b, n, c);
}

void gemm_abt(const float* a, Index m, Index k, const float* b, Index n, float* c) { gemm_abt_impl(a, m, k, b, n, c); }

}  // namespace ncert::reference::detail
