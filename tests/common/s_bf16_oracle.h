// Test support: s_gemm_bf16's documented order (reference/detail/s_bf16.h) written from the
// header's words in plain f32 arithmetic, and the test that holds a path of s_gemm_bf16 to it
// bit for bit. Shared by tests/unit/reference/s_bound_test.cc (the build's own paths) and
// s_bf16_targets_test.cc (the portable path built for other vector widths). Compiled with
// -ffp-contract=off: every product and sum below rounds on its own.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reference/detail/s_bf16.h"

namespace ncert::testing {

inline float bf16_value(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

/// s_gemm_bf16's documented order in plain f32 arithmetic: chunks of 1,024, 16 lanes adding
/// (acc + odd product) + even product, the lanes' tree l + l+8, + l+4, + l+2, + l+1, chunk
/// sums into C. An oracle written from the header's words, not from either path.
inline void s_gemm_by_the_words(const std::uint16_t* a, Index m, const std::uint16_t* b, Index n, Index kp, float* c) {
  for (Index i = 0; i < m; ++i) {
    for (Index j = 0; j < n; ++j) {
      float total = 0;
      for (Index k0 = 0; k0 < kp; k0 += 1024) {
        float lane[16] = {};
        for (Index k = k0; k < std::min(kp, k0 + 1024); k += 32) {
          for (Index l = 0; l < 16; ++l) {
            const float odd = bf16_value(a[i * kp + k + 2 * l + 1]) * bf16_value(b[j * kp + k + 2 * l + 1]);
            const float even = bf16_value(a[i * kp + k + 2 * l]) * bf16_value(b[j * kp + k + 2 * l]);
            lane[l] = (lane[l] + odd) + even;
          }
        }
        float t[8], u[4];
        for (int l = 0; l < 8; ++l) t[l] = lane[l] + lane[l + 8];
        for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
        total += (u[0] + u[2]) + (u[1] + u[3]);
      }
      c[i * n + j] = total;
    }
  }
}

/// Elements of s_gemm_bf16(a, b) by `instruction` whose bits differ from the oracle's.
inline Index differ_from_the_words(const std::vector<std::uint16_t>& a, Index m, const std::vector<std::uint16_t>& b,
                                   Index n, Index kp, bool instruction, float* first = nullptr) {
  std::vector<float> got(static_cast<std::size_t>(m * n)), want(got.size());
  reference::detail::s_gemm_bf16(a.data(), m, b.data(), n, kp, got.data(), instruction);
  s_gemm_by_the_words(a.data(), m, b.data(), n, kp, want.data());
  if (first != nullptr) *first = got[0];
  Index differ = 0;
  for (std::size_t x = 0; x < got.size(); ++x) {
    differ += std::bit_cast<std::uint32_t>(got[x]) != std::bit_cast<std::uint32_t>(want[x]);
  }
  return differ;
}

/// s_gemm_bf16 by `instruction` against the oracle: tile edges, K below, at and across a chunk,
/// operands at the range's ends; and a check that the comparison can fail.
inline void expect_the_documented_order(bool instruction) {
  namespace detail = reference::detail;

  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> e(-20, 20);
  struct Shape {
    Index m, n, k;
  };
  // Tile edges (1-3 rows or columns left over, for the instruction's tiles of 4 and the
  // portable path's of 4 or 3), K below, at and across a chunk, and columns across the portable
  // path's 128-column panels.
  const std::vector<Shape> shapes = {{1, 1, 1},    {3, 5, 31},   {4, 4, 32},     {5, 7, 33},    {9, 6, 1000},
                                     {4, 8, 1024}, {6, 3, 1025}, {13, 17, 5120}, {5, 259, 1100}};
  SCOPED_TRACE(instruction ? "the instruction" : "portable");
  Index differ = 0, cases = 0;
  for (const Shape& s : shapes) {
    const Index kp = detail::bf16_padded(s.k);
    std::vector<float> am(static_cast<std::size_t>(s.m * s.k)), bm(static_cast<std::size_t>(s.n * s.k));
    for (float& v : am) v = static_cast<float>(std::exp2(e(rng)));
    for (float& v : bm) v = static_cast<float>(std::exp2(e(rng)));
    std::vector<std::uint16_t> a(static_cast<std::size_t>(s.m * kp)), b(static_cast<std::size_t>(s.n * kp));
    ASSERT_TRUE(detail::to_bf16_magnitudes(am.data(), s.m, s.k, true, a.data()));
    ASSERT_TRUE(detail::to_bf16_magnitudes(bm.data(), s.n, s.k, true, b.data()));
    differ += differ_from_the_words(a, s.m, b, s.n, kp, instruction);
    cases += s.m * s.n;
  }
  // Operands at both ends of the range, 2^-63 and just under 2^63: the smallest products are
  // 2^-126 (normal), the largest overflow to +inf, in both paths and the oracle alike.
  {
    std::uniform_int_distribution<int> end(0, 1);
    const Index m = 5, n = 6, k = 200, kp = detail::bf16_padded(k);
    std::vector<float> am(static_cast<std::size_t>(m * k)), bm(static_cast<std::size_t>(n * k));
    for (float& v : am) v = end(rng) ? 0x1p-63f : 0x1.fcp62f;
    for (float& v : bm) v = end(rng) ? 0x1p-63f : 0x1.fcp62f;
    std::vector<std::uint16_t> a(static_cast<std::size_t>(m * kp)), b(static_cast<std::size_t>(n * kp));
    ASSERT_TRUE(detail::to_bf16_magnitudes(am.data(), m, k, true, a.data()));
    ASSERT_TRUE(detail::to_bf16_magnitudes(bm.data(), n, k, true, b.data()));
    float first = 0;
    differ += differ_from_the_words(a, m, b, n, kp, instruction, &first);
    cases += m * n;
    EXPECT_TRUE(std::isinf(first)) << "a sum of 2^124-sized products overflows";
  }
  EXPECT_EQ(differ, 0) << "of " << cases << " elements";
  // The comparison can fail: another order (lanes summed left to right) changes bits here.
  std::vector<std::uint16_t> a(5120), b(5120);
  std::vector<float> am(5120), bm(5120);
  for (float& v : am) v = static_cast<float>(std::exp2(e(rng)));
  for (float& v : bm) v = static_cast<float>(std::exp2(e(rng)));
  ASSERT_TRUE(detail::to_bf16_magnitudes(am.data(), 1, 5120, true, a.data()));
  ASSERT_TRUE(detail::to_bf16_magnitudes(bm.data(), 1, 5120, true, b.data()));
  float computed = 0, sequential = 0;
  detail::s_gemm_bf16(a.data(), 1, b.data(), 1, 5120, &computed, instruction);
  for (Index k = 0; k < 5120; ++k) sequential += bf16_value(a[k]) * bf16_value(b[k]);
  EXPECT_NE(computed, sequential);
}

/// s_gemm_bf16_widened (B as f32 magnitudes) against to_bf16_magnitudes then s_gemm_bf16 on
/// the same values: the same bits, and the same refusals, for B rounded up or required exact,
/// K with and without a partial last step, across chunks and column panels, a value out of
/// range or (exact) not a bf16 number in the first or the last chunk.
inline void expect_the_f32_route_to_match() {
  namespace detail = reference::detail;
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> e(-20, 20);
  struct Shape {
    Index m, n, k;
  };
  for (const Shape& s :
       std::vector<Shape>{{1, 1, 1}, {2, 3, 63}, {5, 7, 33}, {4, 9, 1000}, {6, 131, 1025}, {3, 5, 2100}}) {
    const Index kp = detail::bf16_padded(s.k);
    std::vector<float> am(static_cast<std::size_t>(s.m * s.k)), bm(static_cast<std::size_t>(s.n * s.k));
    for (float& v : am) v = static_cast<float>(std::exp2(e(rng)));
    std::vector<std::uint16_t> a(static_cast<std::size_t>(s.m * kp)), b(static_cast<std::size_t>(s.n * kp));
    ASSERT_TRUE(detail::to_bf16_magnitudes(am.data(), s.m, s.k, true, a.data()));
    std::vector<float> a_wide(a.size());
    detail::widen_bf16_rows(a.data(), s.m, kp, a_wide.data());
    for (const bool round_up : {true, false}) {
      // Exact: every value a bf16 number; rounded up: any f32, a zero among them.
      for (float& v : bm) {
        const auto x = static_cast<float>(std::exp2(e(rng)));
        v = round_up ? x : bf16_value(static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16));
      }
      bm[bm.size() / 2] = 0;
      const std::vector<float> good = bm;
      // The values as they are, then one that cannot serve at the start or at the end of B.
      const float out_of_range = 0x1p70f, not_bf16 = 1.0f + 0x1p-20f;
      for (int variant = 0; variant < (round_up ? 3 : 5); ++variant) {
        bm = good;
        if (variant == 1) bm.front() = out_of_range;
        if (variant == 2) bm.back() = out_of_range;
        if (variant == 3) bm.front() = not_bf16;
        if (variant == 4) bm.back() = not_bf16;
        SCOPED_TRACE(::testing::Message() << "m " << s.m << " n " << s.n << " k " << s.k << " round_up " << round_up
                                          << " variant " << variant);
        const bool want_ok = detail::to_bf16_magnitudes(bm.data(), s.n, s.k, round_up, b.data());
        std::vector<float> want(static_cast<std::size_t>(s.m * s.n)), got(want.size());
        if (want_ok) detail::s_gemm_bf16(a.data(), s.m, b.data(), s.n, kp, want.data(), false);
        const bool got_ok = detail::s_gemm_bf16_widened(a_wide.data(), s.m, bm.data(), s.n, s.k, round_up, got.data());
        ASSERT_EQ(got_ok, want_ok);
        EXPECT_EQ(want_ok, variant == 0);
        if (want_ok) {
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
        }
      }
    }
  }
}

}  // namespace ncert::testing
