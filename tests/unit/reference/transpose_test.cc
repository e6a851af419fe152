// The walk's transposition (reference/detail/transpose.h) against the definition, element by
// element: every row count up to 16 (16 takes the register tiles where the build has AVX-512 or AVX),
// widths that are and are not multiples of the tile, a destination wider than the rows, and
// nothing outside the rows written.
#include "reference/detail/transpose.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

namespace ncert::reference::detail {
namespace {

TEST(Transpose, EveryRowCountAndWidthMatchesTheDefinition) {
  constexpr float kUntouched = -7.5f;
  for (Index rows = 1; rows <= kTransposeRows; ++rows) {
    for (Index k : {1, 15, 16, 17, 31, 48, 130}) {
      const Index stride = rows + 3;
      std::vector<float> src(static_cast<std::size_t>(rows * k));
      for (std::size_t e = 0; e < src.size(); ++e) {
        // Distinct bit patterns, NaN payloads and negative zero included: a copy keeps bits.
        src[e] = std::bit_cast<float>(static_cast<std::uint32_t>(0x7FC00000u + e * 2654435761u % 4096u));
        if (e % 5 == 1) src[e] = static_cast<float>(e) * 0.25f;
        if (e % 7 == 2) src[e] = -0.0f;
      }
      std::vector<float> dst(static_cast<std::size_t>(k * stride), kUntouched);
      transpose_rows(src.data(), rows, k, dst.data(), stride);
      for (Index c = 0; c < k; ++c) {
        for (Index r = 0; r < stride; ++r) {
          const float got = dst[static_cast<std::size_t>(c * stride + r)];
          const float want = r < rows ? src[static_cast<std::size_t>(r * k + c)] : kUntouched;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
              << "rows " << rows << " k " << k << " column " << c << " row " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ncert::reference::detail
