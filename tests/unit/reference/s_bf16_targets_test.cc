// The portable path of s_gemm_bf16 as builds for other CPUs compile it: this file and
// reference/detail/s_bf16.cc are built once per x86-64 level (tests/unit/CMakeLists.txt:
// x86-64-v2's 16-byte vectors, x86-64-v3's 32-byte AVX2, x86-64-v4's AVX-512 without BF16),
// each into its own test executable whose suite name says which. Each must sum in the
// documented order bit for bit, as the release build's paths do (s_bound_test.cc), so a build
// for any of these CPUs computes the same S and B. A CPU without the level skips with the
// reason (nothing of the level's code has run before the check).
#include <gtest/gtest.h>

#include "reference/detail/s_bf16.h"
#include "tests/common/s_bf16_oracle.h"

#ifndef NCERT_S_BF16_SUITE
#error "built by tests/unit/CMakeLists.txt with the suite's name and the level's features"
#endif

namespace ncert::reference {
namespace {

/// Whether this CPU runs the code the level's -march allows.
bool cpu_has_the_level() {
  __builtin_cpu_init();
#if defined(__AVX512F__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#elif defined(__AVX2__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#else
  return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
#endif
}

#define NCERT_S_BF16_TEST(suite, name) TEST(suite, name)

NCERT_S_BF16_TEST(NCERT_S_BF16_SUITE, PortablePathSumsInTheDocumentedOrderBitForBit) {
  static_assert(!detail::kSBf16Instruction, "built for a level without AVX512-BF16");
  if (!cpu_has_the_level()) GTEST_SKIP() << "this CPU lacks the x86-64 level the test is built for";
  testing::expect_the_documented_order(false);
}

NCERT_S_BF16_TEST(NCERT_S_BF16_SUITE, WeightsFromF32MagnitudesGiveTheBitsOfTheirBf16Copy) {
  if (!cpu_has_the_level()) GTEST_SKIP() << "this CPU lacks the x86-64 level the test is built for";
  testing::expect_the_f32_route_to_match();
}

}  // namespace
}  // namespace ncert::reference
