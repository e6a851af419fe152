// reference/detail/gemm_openblas.cc: y*'s f64 product through OpenBLAS. The oracle is the
// product summed in long double (64-bit significand), and the rigorous bound on any f64
// summation order, gamma_K(2^-53) sum |a| |b|: every element within it, for every shape the
// reference makes (its blocks, their narrower last one, the diagnosis's small samples); Eigen's
// own product for the shapes it does not block, bit for bit; and the same bits from two threads
// calling at once, three rounds each, as alone (the serial build's lock around its buffers).
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "reference/detail/gemm.h"

namespace ncert::reference {
namespace {

struct Shape {
  Index m, k, n;
};

// Tiny (k + m + n below Eigen's threshold of 20), vectors, blocked products with edges, the
// reference's block and its narrower last one, and the 4-bit check's 32 activation rows.
const std::vector<Shape> kShapes = {{2, 3, 4},       {5, 9, 5},      {1, 300, 64},     {300, 64, 1},
                                    {7, 96, 16},     {33, 1000, 65}, {128, 5120, 128}, {128, 5120, 16},
                                    {32, 5120, 128}, {3, 20, 2},     {7, 1000, 32}};

struct Operands {
  std::vector<double> a, b;
};

Operands random_operands(const Shape& s, std::mt19937_64& rng) {
  std::normal_distribution<double> value(0, 1);
  Operands o{std::vector<double>(static_cast<std::size_t>(s.m * s.k)),
             std::vector<double>(static_cast<std::size_t>(s.n * s.k))};
  for (double& v : o.a) v = value(rng);
  for (double& v : o.b) v = value(rng);
  return o;
}

std::vector<double> openblas_product(const Shape& s, const Operands& o) {
  std::vector<double> c(static_cast<std::size_t>(s.m * s.n), 7.0);  // beta 0: nothing may leak in
  detail::gemm_abt_openblas(o.a.data(), s.m, s.k, o.b.data(), s.n, c.data());
  return c;
}

bool same_bits(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::bit_cast<std::uint64_t>(x[i]) != std::bit_cast<std::uint64_t>(y[i])) return false;
  }
  return true;
}

TEST(GemmOpenBlasTest, EveryElementIsTheProductWithinAnyOrdersF64Rounding) {
  std::mt19937_64 rng(31);
  Index differ_from_eigen = 0;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.m << " x " << s.k << " x " << s.n);
    const Operands o = random_operands(s, rng);
    const std::vector<double> c = openblas_product(s, o);
    std::vector<double> eigen(c.size());
    detail::gemm_abt(o.a.data(), s.m, s.k, o.b.data(), s.n, eigen.data());
    const double gamma = static_cast<double>(s.k) * 0x1p-53 / (1 - static_cast<double>(s.k) * 0x1p-53);
    for (Index i = 0; i < s.m; ++i) {
      for (Index j = 0; j < s.n; ++j) {
        long double exact = 0, magnitude = 0;
        for (Index q = 0; q < s.k; ++q) {
          const long double p = static_cast<long double>(o.a[i * s.k + q]) * o.b[j * s.k + q];
          exact += p;
          magnitude += std::fabs(p);
        }
        // The long double sum's own error, gamma_K(2^-64) of the magnitudes, is 2^11 smaller:
        // one more gamma covers it.
        const double limit = 1.01 * gamma * static_cast<double>(magnitude);
        const double c_ij = c[static_cast<std::size_t>(i * s.n + j)];
        ASSERT_LE(std::fabs(static_cast<long double>(c_ij) - exact), limit) << "element " << i << ", " << j;
        differ_from_eigen += std::bit_cast<std::uint64_t>(c_ij) !=
                             std::bit_cast<std::uint64_t>(eigen[static_cast<std::size_t>(i * s.n + j)]);
      }
    }
  }
  // Another GEMM ran: random f64 operands round differently in another order (at K 5,120 most
  // elements do). Were OpenBLAS never called, every element would be Eigen's.
  EXPECT_GT(differ_from_eigen, 1000);
}

TEST(GemmOpenBlasTest, ShapesEigenDoesNotBlockTakeEigensProductBitForBit) {
  std::mt19937_64 rng(32);
  Index checked = 0;
  for (const Shape& s : kShapes) {
    if (detail::runs_eigen_gemm(s.m, s.k, s.n)) continue;
    ++checked;
    const Operands o = random_operands(s, rng);
    std::vector<double> eigen(static_cast<std::size_t>(s.m * s.n));
    detail::gemm_abt(o.a.data(), s.m, s.k, o.b.data(), s.n, eigen.data());
    EXPECT_TRUE(same_bits(openblas_product(s, o), eigen)) << s.m << " x " << s.k << " x " << s.n;
  }
  EXPECT_EQ(checked, 4);  // {2,3,4}, {5,9,5} (tiny), {1,300,64}, {300,64,1} (vectors)
}

TEST(GemmOpenBlasTest, SameBitsOnTwoThreadsAtOnce) {
  std::mt19937_64 rng(33);
  std::vector<Operands> operands;
  std::vector<std::vector<double>> serial;
  for (const Shape& s : kShapes) {
    operands.push_back(random_operands(s, rng));
    serial.push_back(openblas_product(s, operands.back()));
  }
  Index differ[2] = {0, 0};
  int team = 0;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    if (t == 0) team = omp_get_num_threads();
    for (int round = 0; round < 3; ++round) {
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        differ[t] += !same_bits(openblas_product(kShapes[i], operands[i]), serial[i]);
      }
    }
  }
  ASSERT_EQ(team, 2) << "OpenMP gave one thread: nothing ran concurrently";
  EXPECT_EQ(differ[0], 0);
  EXPECT_EQ(differ[1], 0);
}

}  // namespace
}  // namespace ncert::reference
