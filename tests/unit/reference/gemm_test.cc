// reference/detail/gemm.cc runs the GEMM path of Eigen's product on packing buffers each
// thread keeps. The oracle is Eigen's own `C.noalias() = A * B^T` on the same operands: the same
// bits for every shape, the GEMM's and those Eigen evaluates otherwise (tiny, one row or one
// column), in f64 and f32, with buffers grown and reused across shapes, on two threads at once;
// and the same bits from activations packed once (PackedActivations) for every block width it
// covers, shared by two threads; weight blocks packed from the walk's f32 panels
// (pack_lhs_from_panels) hold the values Eigen's own packing of their f64 rows holds, in its
// places, and their products Eigen's bits; S's weight blocks packed from the panels' magnitudes
// (pack_lhs_magnitudes_from_panels) likewise, in f32.
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/detail/gemm.h"

namespace ncert::reference {
namespace {

struct Shape {
  Index m, k, n;
};

// Tiny (coefficient-wise: k + m + n below Eigen's threshold of 20, and at 19, 20 and 21 on
// either side of it), vectors (GEMV), the GEMM's with edges, the reference's block and its last,
// narrower block; large then small then large, so the kept buffers shrink in use and grow.
const std::vector<Shape> kShapes = {{2, 3, 4},       {5, 9, 5},        {2, 16, 2},     {2, 17, 2},       {1, 300, 64},
                                    {300, 64, 1},    {7, 96, 16},      {33, 1000, 65}, {128, 5120, 128}, {5, 7, 9},
                                    {128, 5120, 16}, {64, 16480, 128}, {3, 20, 2}};

/// Eigen's serial GEMM, as the reference runs it, for the oracle's products; restored after.
class SerialEigen {
 public:
  SerialEigen() : threads_(Eigen::nbThreads()) { Eigen::setNbThreads(1); }
  SerialEigen(const SerialEigen&) = delete;
  SerialEigen& operator=(const SerialEigen&) = delete;
  ~SerialEigen() { Eigen::setNbThreads(threads_); }

 private:
  int threads_;
};

template <typename T>
Index differing_elements(const Shape& s, std::mt19937_64& rng) {
  using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::normal_distribution<double> value(0, 1);
  RowMatrix a(s.m, s.k), b(s.n, s.k), eigen(s.m, s.n), ours(s.m, s.n);
  for (Index i = 0; i < a.size(); ++i) a.data()[i] = static_cast<T>(value(rng));
  for (Index i = 0; i < b.size(); ++i) b.data()[i] = static_cast<T>(value(rng));
  eigen.noalias() = a * b.transpose();
  detail::gemm_abt(a.data(), s.m, s.k, b.data(), s.n, ours.data());
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  Index differ = 0;
  for (Index i = 0; i < eigen.size(); ++i) {
    differ += std::bit_cast<Bits>(eigen.data()[i]) != std::bit_cast<Bits>(ours.data()[i]);
  }
  return differ;
}

TEST(GemmTest, KeptBuffersGiveEigensOwnProductBitForBit) {
  const SerialEigen serial;
  std::mt19937_64 rng(21);
  for (const Shape& s : kShapes) {
    EXPECT_EQ(differing_elements<double>(s, rng), 0) << "f64 " << s.m << " x " << s.k << " x " << s.n;
    EXPECT_EQ(differing_elements<float>(s, rng), 0) << "f32 " << s.m << " x " << s.k << " x " << s.n;
  }
}

TEST(GemmTest, TwoThreadsKeepTheirOwnBuffers) {
  const SerialEigen serial;
  Index differ[2] = {0, 0};
  int team = 0;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    if (t == 0) team = omp_get_num_threads();
    std::mt19937_64 rng(100 + static_cast<unsigned>(t));
    for (int round = 0; round < 3; ++round) {
      for (const Shape& s : kShapes)
        differ[t] += differing_elements<double>(s, rng) + differing_elements<float>(s, rng);
    }
  }
  ASSERT_EQ(team, 2) << "OpenMP gave one thread: nothing ran concurrently";
  EXPECT_EQ(differ[0], 0);
  EXPECT_EQ(differ[1], 0);
}

/// Rows x k activations packed for blocks of the first width, and weight blocks of each width
/// the packing covers (the first always): Eigen's product of each block and the product from the
/// packed activations; elements whose bits differ.
Index packed_differing_elements(Index m, Index k, std::initializer_list<Index> widths, std::mt19937_64& rng) {
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::normal_distribution<double> value(0, 1);
  RowMatrix a(m, k);
  for (Index i = 0; i < a.size(); ++i) a.data()[i] = value(rng);
  const auto packed = detail::PackedActivations::pack(a.data(), m, k, *widths.begin());
  EXPECT_TRUE(packed) << m << " x " << k;
  if (!packed) return -1;
  EXPECT_TRUE(packed->covers(*widths.begin()));
  Index differ = 0;
  for (const Index n : widths) {
    if (!packed->covers(n)) continue;
    RowMatrix b(n, k), eigen(m, n), ours(m, n);
    for (Index i = 0; i < b.size(); ++i) b.data()[i] = value(rng);
    eigen.noalias() = a * b.transpose();
    ours.setConstant(7.0);  // what was there must not leak into the product
    detail::gemm_abt(*packed, b.data(), n, ours.data());
    for (Index i = 0; i < eigen.size(); ++i) {
      differ += std::bit_cast<std::uint64_t>(eigen.data()[i]) != std::bit_cast<std::uint64_t>(ours.data()[i]);
    }
  }
  return differ;
}

TEST(GemmTest, ActivationsPackedOnceGiveEigensOwnProductBitForBit) {
  const SerialEigen serial;
  std::mt19937_64 rng(5);
  // The reference's blocks (128 wide, the last 96 or 16), edges that fill no register panel,
  // wide blocks; with this machine's caches (the next test forces small ones, so that every
  // dimension spans several blocks wherever it runs).
  EXPECT_EQ(packed_differing_elements(128, 5120, {128, 96, 16}, rng), 0);
  EXPECT_EQ(packed_differing_elements(33, 1000, {65, 128, 3}, rng), 0);
  EXPECT_EQ(packed_differing_elements(300, 2100, {128, 7}, rng), 0);
  EXPECT_EQ(packed_differing_elements(7, 96, {16, 2}, rng), 0);
  EXPECT_EQ(packed_differing_elements(64, 700, {1000}, rng), 0);
}

/// Eigen's blocking follows the cache sizes it reads at run time: set smaller ones for a test,
/// so that k, the weight rows and the activation rows each span several blocks on any machine.
class SmallCaches {
 public:
  SmallCaches() : l1_(Eigen::l1CacheSize()), l2_(Eigen::l2CacheSize()), l3_(Eigen::l3CacheSize()) {
    Eigen::setCpuCacheSizes(std::ptrdiff_t{16} << 10, std::ptrdiff_t{128} << 10, std::ptrdiff_t{1} << 20);
  }
  SmallCaches(const SmallCaches&) = delete;
  SmallCaches& operator=(const SmallCaches&) = delete;
  ~SmallCaches() { Eigen::setCpuCacheSizes(l1_, l2_, l3_); }

 private:
  std::ptrdiff_t l1_, l2_, l3_;
};

TEST(GemmTest, ActivationsPackedOnceGiveEigensBitsWhenEveryDimensionSpansBlocks) {
  const SerialEigen serial;
  const SmallCaches small;
  using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, double, double, Eigen::Dynamic, Eigen::Dynamic,
                                                        Eigen::Dynamic>;
  // kc along k, mc along the weight rows, nc along the activation rows (gemm.cc). No shape
  // splits all three at once; two shapes split each of them. Eigen's register panels and L1
  // share set the blocks too, so each shape is the first of a few that splits here: 20
  // activation rows span two blocks beside 20 weight rows with AVX-512 (nc 12) but beside 8
  // with AVX2 (nc 8), and 60 weight rows span blocks at k 200 with AVX-512 (mc 24) but only
  // at k 100 with AVX2 (mc 36), whose kc 104 there leaves them unsplit.
  Index deep_n = 0;  // weight rows beside which 20 activation rows and k 700 span blocks
  for (const Index n : {20, 8, 4}) {
    const Blocking deep(20, n, 700, 1, true);
    if (deep.kc() < 700 && deep.nc() < 20) {
      deep_n = n;
      break;
    }
  }
  ASSERT_GT(deep_n, 0) << "no shape splits k and the activation rows";
  Index wide_k = 0;  // the k at which 60 weight rows span blocks
  for (const Index k : {200, 100}) {
    const Blocking wide(20, 60, k, 1, true);
    if (wide.mc() < 60) {
      wide_k = k;
      break;
    }
  }
  ASSERT_GT(wide_k, 0) << "no shape splits the weight rows";
  std::mt19937_64 rng(17);
  EXPECT_EQ(packed_differing_elements(20, 700, {deep_n, deep_n / 2 + 3}, rng), 0);
  EXPECT_EQ(packed_differing_elements(20, wide_k, {60, 37}, rng), 0);
}

TEST(GemmTest, ShapesEigenDoesNotMultiplyByItsGemmAreNotPacked) {
  const std::vector<double> a(600, 1.0);
  EXPECT_FALSE(detail::PackedActivations::pack(a.data(), 1, 300, 64));  // one row: GEMV
  EXPECT_FALSE(detail::PackedActivations::pack(a.data(), 300, 2, 1));   // one column
  EXPECT_FALSE(detail::PackedActivations::pack(a.data(), 2, 3, 4));     // tiny: coefficient-wise
  const auto packed = detail::PackedActivations::pack(a.data(), 20, 30, 64);
  ASSERT_TRUE(packed);
  EXPECT_TRUE(packed->covers(64));
  EXPECT_FALSE(packed->covers(1));  // a last block of one row: a GEMV
}

TEST(GemmTest, AWidthEigenBlocksOtherwiseIsNotCovered) {
  const SmallCaches small;
  using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, double, double, Eigen::Dynamic, Eigen::Dynamic,
                                                        Eigen::Dynamic>;
  const Index m = 20, k = 700, n = 20;
  const Blocking first(m, n, k, 1, true);
  Index other = 0;  // the first width Eigen blocks with another kc or nc
  for (Index w = 2; w <= 200 && other == 0; ++w) {
    const Blocking b(m, w, k, 1, true);
    if (b.kc() != first.kc() || std::min(m, b.nc()) != std::min(m, first.nc())) other = w;
  }
  ASSERT_GT(other, 0);
  const std::vector<double> a(static_cast<std::size_t>(m * k), 0.5);
  const auto packed = detail::PackedActivations::pack(a.data(), m, k, n);
  ASSERT_TRUE(packed);
  EXPECT_TRUE(packed->covers(n));
  EXPECT_FALSE(packed->covers(other)) << other;
}

TEST(GemmTest, TwoThreadsShareOnePacking) {
  const SerialEigen serial;
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::mt19937_64 rng(9);
  std::normal_distribution<double> value(0, 1);
  const Index m = 64, k = 2000, n = 48;
  RowMatrix a(m, k);
  for (Index i = 0; i < a.size(); ++i) a.data()[i] = value(rng);
  const auto packed = detail::PackedActivations::pack(a.data(), m, k, n);
  ASSERT_TRUE(packed);
  std::vector<RowMatrix> b(8, RowMatrix(n, k)), eigen(8, RowMatrix(m, n));
  for (std::size_t i = 0; i < b.size(); ++i) {
    for (Index j = 0; j < b[i].size(); ++j) b[i].data()[j] = value(rng);
    eigen[i].noalias() = a * b[i].transpose();
  }
  Index differ = 0;
  int team = 0;
#pragma omp parallel num_threads(2) reduction(+ : differ)
  {
    if (omp_get_thread_num() == 0) team = omp_get_num_threads();
    RowMatrix ours(m, n);
#pragma omp for schedule(static, 1)
    for (std::size_t i = 0; i < b.size(); ++i) {
      detail::gemm_abt(*packed, b[i].data(), n, ours.data());
      for (Index j = 0; j < ours.size(); ++j) {
        differ += std::bit_cast<std::uint64_t>(eigen[i].data()[j]) != std::bit_cast<std::uint64_t>(ours.data()[j]);
      }
    }
  }
  ASSERT_EQ(team, 2) << "OpenMP gave one thread: nothing ran concurrently";
  EXPECT_EQ(differ, 0);
}

// ---- weight blocks packed from the walk's panels ------------------------------------------------

/// n rows of k floats in the walk's panel layout (gemm.h F32Panels), and the same values
/// row-major in f64; with NaN-free values of every binade the widening keeps.
struct PanelWeights {
  std::vector<float> panels;
  std::vector<double> rows;
  Index n, k;
  detail::F32Panels view() const { return {panels.data(), n, k}; }
};

PanelWeights panel_weights(Index n, Index k, std::mt19937_64& rng, int min_binade = -140, int max_binade = 100) {
  PanelWeights w{std::vector<float>(static_cast<std::size_t>(n * k)),
                 std::vector<double>(static_cast<std::size_t>(n * k)), n, k};
  std::normal_distribution<float> value(0, 1);
  std::uniform_int_distribution<int> binade(min_binade, max_binade);
  for (Index j = 0; j < n; ++j) {
    const Index p0 = j - j % 16, width = std::min<Index>(16, n - p0);
    for (Index c = 0; c < k; ++c) {
      const float v = std::ldexp(value(rng), binade(rng));  // subnormals among them
      w.panels[static_cast<std::size_t>(p0 * k + c * width + j - p0)] = v;
      w.rows[static_cast<std::size_t>(j * k + c)] = v;
    }
  }
  return w;
}

/// Eigen's product of `a` with w's rows against the product from its panels (activations
/// packed): elements whose bits differ.
Index panel_product_differences(const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>& a,
                                const detail::PackedActivations& packed, const PanelWeights& w) {
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMatrix> b(w.rows.data(), w.n, w.k);
  RowMatrix eigen(a.rows(), w.n), ours(a.rows(), w.n);
  eigen.noalias() = a * b.transpose();
  ours.setConstant(7.0);  // what was there must not leak into the product
  detail::gemm_abt(packed, w.view(), ours.data());
  Index differ = 0;
  for (Index i = 0; i < eigen.size(); ++i) {
    differ += std::bit_cast<std::uint64_t>(eigen.data()[i]) != std::bit_cast<std::uint64_t>(ours.data()[i]);
  }
  return differ;
}

/// The rows of a register packet of Eigen's lhs panels for T, where its blocks pack in panels
/// of three packets, then two, then one (f64: 8 with AVX-512, 4 with AVX; f32: 16, 8), else 0:
/// written out from gebp_traits, apart from gemm.cc's.
template <typename T>
constexpr Index panel_packet() {
  using Traits = Eigen::internal::gebp_traits<T, T>;
  return Traits::mr == 3 * Traits::LhsProgress && 16 % Traits::LhsProgress == 0 ? Index{Traits::LhsProgress} : 0;
}

TEST(GemmTest, PanelPacketsAreTheVectorUnitsOwn) {
  // What the panel routes run on: AVX-512 and AVX builds take them, with these packets.
#if defined(__AVX512F__)
  EXPECT_EQ(panel_packet<double>(), 8);
  EXPECT_EQ(panel_packet<float>(), 16);
#elif defined(__AVX__)
  EXPECT_EQ(panel_packet<double>(), 4);
  EXPECT_EQ(panel_packet<float>(), 8);
#else
  GTEST_SKIP() << "no AVX on this build";
#endif
}

TEST(GemmTest, PanelsPackAsEigenPacksTheirRows) {
  using Traits = Eigen::internal::gebp_traits<double, double>;
  constexpr Index kP = panel_packet<double>();
  if constexpr (kP == 0) {
    GTEST_SKIP() << "Eigen's f64 lhs panels are not of three packets, then two, then one on this build";
  } else {
    using LhsMapper = Eigen::internal::const_blas_data_mapper<double, Index, Eigen::RowMajor>;
    Eigen::internal::gemm_pack_lhs<double, Index, LhsMapper, Traits::mr, Traits::LhsProgress,
                                   typename Traits::LhsPacket4Packing, Eigen::RowMajor>
        pack_lhs;
    std::mt19937_64 rng(23);
    // Widths with every mix of 3-, 2- and 1-packet panels and a narrower last walk panel (with
    // packets of 8: 8 of 16 rows at 40, 136, 200; of 4: 4 or 12 at 20, 28, 68, 100); sub-blocks
    // starting anywhere a multiple of the packet, at any depth.
    for (const Index width : {1, 2, 3, 4, 5, 6, 7, 16, 17, 25}) {
      const Index n = width * kP;
      for (const Index k : {1, 7, 64, 301}) {
        const PanelWeights w = panel_weights(n, k, rng);
        const LhsMapper lhs(w.rows.data(), k);
        for (const Index i0 : {Index{0}, kP, n / (2 * kP) * kP}) {
          for (const Index k0 : {Index{0}, k / 3}) {
            const Index rows = (n - i0) / kP * kP, depth = k - k0;
            if (rows == 0 || depth == 0) continue;
            SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " rows " + std::to_string(i0) + "+" +
                         std::to_string(rows) + " k " + std::to_string(k0) + "+" + std::to_string(depth));
            // Aligned as Eigen's packing buffers are: gemm_pack_lhs stores whole aligned packets.
            std::vector<double, Eigen::aligned_allocator<double>> eigen(static_cast<std::size_t>(rows * depth), -1.0),
                ours(eigen.size(), -2.0);
            pack_lhs(eigen.data(), lhs.getSubMapper(i0, k0), depth, rows);
            detail::pack_lhs_from_panels(w.view(), i0, rows, k0, depth, ours.data());
            Index differ = 0;
            for (std::size_t e = 0; e < eigen.size(); ++e) {
              differ += std::bit_cast<std::uint64_t>(eigen[e]) != std::bit_cast<std::uint64_t>(ours[e]);
            }
            EXPECT_EQ(differ, 0);
          }
        }
      }
    }
  }
}

TEST(GemmTest, ProductsFromPanelsGiveEigensOwnProductBitForBit) {
  const SerialEigen serial;
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::mt19937_64 rng(29);
  std::normal_distribution<double> value(0, 1);
  Index products = 0;
  for (const auto& [m, k, n] : {Shape{32, 5120, 128}, Shape{33, 1000, 136}, Shape{7, 96, 16}, Shape{128, 700, 40}}) {
    RowMatrix a(m, k);
    for (Index i = 0; i < a.size(); ++i) a.data()[i] = value(rng);
    const auto packed = detail::PackedActivations::pack(a.data(), m, k, n);
    ASSERT_TRUE(packed);
    const PanelWeights w = panel_weights(n, k, rng);
    if (!detail::packs_from_panels(*packed, w.view())) continue;  // no panels: Eigen packs the rows
    EXPECT_EQ(panel_product_differences(a, *packed, w), 0) << m << " x " << k << " x " << n;
    ++products;
  }
  EXPECT_EQ(products, panel_packet<double>() > 0 ? 4 : 0);
  // Not a multiple of the packet's rows (18: of neither 4 nor 8): left to Eigen's packing.
  const std::vector<double> a(std::size_t{64} * 30, 1.0);
  const auto packed = detail::PackedActivations::pack(a.data(), 64, 30, 18);
  ASSERT_TRUE(packed);
  const std::vector<float> panels(std::size_t{18} * 30, 1.0f);
  EXPECT_FALSE(detail::packs_from_panels(*packed, {panels.data(), 18, 30}));
}

TEST(GemmTest, ProductsFromPanelsOverSeveralRowBlocksOrNone) {
  // Eigen's block of weight rows (mc) follows the caches it reads: with a 2 MiB L2 these shapes
  // take several blocks of rows (i2 > 0); with a 256 KiB one and small M K it takes 21 or 22
  // rows, a multiple of neither 4 nor 8, and the product must be left to Eigen's packing (it
  // once aborted on "panels packed out of range").
  const SerialEigen serial;
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, double, double, Eigen::Dynamic, Eigen::Dynamic,
                                                        Eigen::Dynamic>;
  const std::ptrdiff_t l1 = Eigen::l1CacheSize(), l2 = Eigen::l2CacheSize(), l3 = Eigen::l3CacheSize();
  std::mt19937_64 rng(31);
  std::normal_distribution<double> value(0, 1);
  constexpr Index kP = panel_packet<double>();
  Index several = 0;
  [[maybe_unused]] Index refused = 0;  // read on AVX-512 builds only
  for (const std::ptrdiff_t l2_size : {std::ptrdiff_t{2} << 20, std::ptrdiff_t{256} << 10}) {
    Eigen::setCpuCacheSizes(std::ptrdiff_t{32} << 10, l2_size, std::ptrdiff_t{8} << 20);
    for (const auto& [m, k, n] : {Shape{8, 256, 512}, Shape{4, 500, 1024}, Shape{32, 300, 1200}, Shape{2, 480, 128},
                                  Shape{8, 504, 128}, Shape{5, 480, 128}, Shape{2, 100, 64}, Shape{3, 60, 200}}) {
      SCOPED_TRACE("L2 " + std::to_string(l2_size) + ", " + std::to_string(m) + " x " + std::to_string(k) + " x " +
                   std::to_string(n));
      RowMatrix a(m, k);
      for (Index i = 0; i < a.size(); ++i) a.data()[i] = value(rng);
      const auto packed = detail::PackedActivations::pack(a.data(), m, k, n);
      ASSERT_TRUE(packed);
      const PanelWeights w = panel_weights(n, k, rng);
      const Index mc = std::min(n, Blocking(m, n, k, 1, true).mc());
      const bool panels = detail::packs_from_panels(*packed, w.view());
      EXPECT_EQ(panels, kP > 0 && mc % kP == 0) << "mc " << mc;
      if (!panels) {
        refused += kP > 0 && mc % kP != 0;
        continue;
      }
      several += mc < n;
      EXPECT_EQ(panel_product_differences(a, *packed, w), 0) << "mc " << mc;
    }
  }
  Eigen::setCpuCacheSizes(l1, l2, l3);
  if (kP > 0) {
    EXPECT_GT(several, 0) << "no product spanned several blocks of rows";
  }
  // With AVX alone Eigen rounds mc here to its 12-row panels (36 rows at M 2, K 100): never
  // off the packet of 4.
#if defined(__AVX512F__)
  EXPECT_GT(refused, 0) << "no blocking took a block of rows that is not a multiple of " << kP;
#endif
}

// ---- S's weight magnitudes packed from the walk's panels ------------------------------------------

/// The charged magnitudes (bounds.h f32_magnitude) of w's rows, row-major f32: the rows Eigen's
/// own S product packs.
std::vector<float> magnitude_rows(const PanelWeights& w) {
  std::vector<float> mag(w.rows.size());
  for (std::size_t e = 0; e < mag.size(); ++e) {
    std::uint32_t b = std::bit_cast<std::uint32_t>(static_cast<float>(w.rows[e])) & 0x7FFFFFFFu;
    if (b != 0 && b < 0x00800000u) b = 0x00800000u;  // written out: an oracle apart from bounds.h
    mag[e] = std::bit_cast<float>(b);
  }
  return mag;
}

/// Panel weights of binades -3 to 3, so that no product swamps another (a product left
/// unzeroed shows), with a negative zero, a subnormal or (rarely) an infinity planted in every
/// fifth row: magnitudes +0, 2^-126 and +inf.
PanelWeights signed_panel_weights(Index n, Index k, std::mt19937_64& rng) {
  PanelWeights w = panel_weights(n, k, rng, -3, 3);
  for (Index j = 0; j < n; j += 5) {
    const Index p0 = j - j % 16, width = std::min<Index>(16, n - p0), c = (j * 7) % k;
    const float v = j % 25 == 10 ? -INFINITY : (j % 2 == 0 ? -0.0f : -0x1p-130f);
    w.panels[static_cast<std::size_t>(p0 * k + c * width + j - p0)] = v;
    w.rows[static_cast<std::size_t>(j * k + c)] = v;
  }
  return w;
}

/// Eigen's f32 product of `a` with w's magnitude rows against the product from its panels:
/// elements whose bits differ.
Index magnitude_product_differences(const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>& a,
                                    const PanelWeights& w) {
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const std::vector<float> mag = magnitude_rows(w);
  const Eigen::Map<const RowMatrix> b(mag.data(), w.n, w.k);
  RowMatrix eigen(a.rows(), w.n), ours(a.rows(), w.n);
  eigen.noalias() = a * b.transpose();
  ours.setConstant(7.0f);  // what was there must not leak into the product
  detail::gemm_abt_magnitudes(a.data(), a.rows(), w.view(), ours.data());
  Index differ = 0;
  for (Index i = 0; i < eigen.size(); ++i) {
    differ += std::bit_cast<std::uint32_t>(eigen.data()[i]) != std::bit_cast<std::uint32_t>(ours.data()[i]);
  }
  return differ;
}

TEST(GemmTest, MagnitudesPackAsEigenPacksTheirRows) {
  using Traits = Eigen::internal::gebp_traits<float, float>;
  constexpr Index kP = panel_packet<float>();
  if constexpr (kP == 0) {
    GTEST_SKIP() << "Eigen's f32 lhs panels are not of three packets, then two, then one on this build";
  } else {
    using LhsMapper = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::RowMajor>;
    Eigen::internal::gemm_pack_lhs<float, Index, LhsMapper, Traits::mr, Traits::LhsProgress,
                                   typename Traits::LhsPacket4Packing, Eigen::RowMajor>
        pack_lhs;
    std::mt19937_64 rng(37);
    // Widths with every mix of 3-, 2- and 1-packet panels (and, with packets of 8, a narrower
    // last walk panel: 8 of 16 rows at 8, 24, 40, 72, 104); sub-blocks starting at any multiple
    // of the packet, at any depth.
    for (const Index width : {1, 2, 3, 4, 5, 6, 8, 9, 13}) {
      const Index n = width * kP;
      for (const Index k : {1, 7, 64, 301}) {
        const PanelWeights w = signed_panel_weights(n, k, rng);
        const std::vector<float> mag = magnitude_rows(w);
        const LhsMapper lhs(mag.data(), k);
        for (const Index i0 : {Index{0}, kP, n / (2 * kP) * kP}) {
          for (const Index k0 : {Index{0}, k / 3}) {
            const Index rows = (n - i0) / kP * kP, depth = k - k0;
            if (rows == 0 || depth == 0) continue;
            SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " rows " + std::to_string(i0) + "+" +
                         std::to_string(rows) + " k " + std::to_string(k0) + "+" + std::to_string(depth));
            std::vector<float, Eigen::aligned_allocator<float>> eigen(static_cast<std::size_t>(rows * depth), -1.0f),
                ours(eigen.size(), -2.0f);
            pack_lhs(eigen.data(), lhs.getSubMapper(i0, k0), depth, rows);
            detail::pack_lhs_magnitudes_from_panels(w.view(), i0, rows, k0, depth, ours.data());
            Index differ = 0;
            for (std::size_t e = 0; e < eigen.size(); ++e) {
              differ += std::bit_cast<std::uint32_t>(eigen[e]) != std::bit_cast<std::uint32_t>(ours[e]);
            }
            EXPECT_EQ(differ, 0);
          }
        }
      }
    }
  }
}

TEST(GemmTest, MagnitudeProductsFromPanelsGiveEigensOwnProductBitForBit) {
  // The reference's shapes, then, with a 2 MiB L2, shapes Eigen blocks in several blocks of
  // weight rows (i2 > 0) or depth (k2 > 0); with a 256 KiB L2 small ones whose block of rows is
  // not a multiple of 16, left to Eigen's packing.
  const SerialEigen serial;
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, float, float, Eigen::Dynamic, Eigen::Dynamic,
                                                        Eigen::Dynamic>;
  constexpr Index kP = panel_packet<float>();
  const std::ptrdiff_t l1 = Eigen::l1CacheSize(), l2 = Eigen::l2CacheSize(), l3 = Eigen::l3CacheSize();
  std::mt19937_64 rng(41);
  std::normal_distribution<float> value(0, 1);
  Index products = 0, several = 0, deep = 0;
  [[maybe_unused]] Index refused = 0;  // read on AVX-512 builds only
  const auto run = [&](const std::vector<Shape>& shapes) {
    for (const auto& [m, k, n] : shapes) {
      SCOPED_TRACE("L2 " + std::to_string(Eigen::l2CacheSize()) + ", " + std::to_string(m) + " x " + std::to_string(k) +
                   " x " + std::to_string(n));
      RowMatrix a(m, k);
      for (Index i = 0; i < a.size(); ++i) a.data()[i] = std::fabs(value(rng));
      const PanelWeights w = signed_panel_weights(n, k, rng);
      const Blocking blocking(m, n, k, 1, true);
      const Index mc = std::min(n, blocking.mc());
      const bool panels = detail::magnitudes_pack_from_panels(m, w.view());
      EXPECT_EQ(panels, kP > 0 && mc % kP == 0) << "mc " << mc;
      if (!panels) {
        refused += kP > 0 && mc % kP != 0;
        continue;
      }
      ++products;
      several += mc < n;
      deep += blocking.kc() < k;
      EXPECT_EQ(magnitude_product_differences(a, w), 0) << "mc " << mc << " kc " << blocking.kc();
    }
  };
  run({Shape{32, 5120, 128}, Shape{33, 1000, 144}, Shape{7, 96, 16}, Shape{128, 700, 48}, Shape{32, 5120, 96},
       Shape{33, 1000, 136}});
  for (const std::ptrdiff_t l2_size : {std::ptrdiff_t{2} << 20, std::ptrdiff_t{256} << 10}) {
    Eigen::setCpuCacheSizes(std::ptrdiff_t{32} << 10, l2_size, std::ptrdiff_t{8} << 20);
    run({Shape{8, 256, 1024}, Shape{4, 500, 2048}, Shape{32, 300, 1200}, Shape{2, 480, 128}, Shape{8, 504, 128},
         Shape{5, 480, 128}, Shape{64, 9000, 64}});
  }
  Eigen::setCpuCacheSizes(l1, l2, l3);
  // A width that is not a multiple of the packet (36: of neither 8 nor 16): left to Eigen's
  // packing.
  const std::vector<float> panels(std::size_t{36} * 30, 1.0f);
  EXPECT_FALSE(detail::magnitudes_pack_from_panels(64, {panels.data(), 36, 30}));
  if (kP > 0) {
    EXPECT_GE(products, 5);
    EXPECT_GT(several, 0) << "no product spanned several blocks of rows";
    EXPECT_GT(deep, 0) << "no product spanned several blocks of depth";
  }
  // With AVX alone Eigen rounds mc here to its 24-row panels (72 rows at M 8, K 256): never off
  // the packet of 8.
#if defined(__AVX512F__)
  EXPECT_GT(refused, 0) << "no blocking took a block of rows that is not a multiple of " << kP;
#endif
}

}  // namespace
}  // namespace ncert::reference
