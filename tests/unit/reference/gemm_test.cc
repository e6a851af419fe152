// reference/detail/gemm.cc runs the GEMM path of Eigen's product on packing buffers each
// thread keeps. The oracle is Eigen's own `C.noalias() = A * B^T` on the same operands: the same
// bits for every shape, the GEMM's and those Eigen evaluates otherwise (tiny, one row or one
// column), in f64 and f32, with buffers grown and reused across shapes, on two threads at once.
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Core>
#include <bit>
#include <cstdint>
#include <random>
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

}  // namespace
}  // namespace ncert::reference
