#include "reference/detail/s_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "reference/status.h"

namespace ncert::reference::detail {

namespace {

// bf16 bit patterns of the operand range: 2^-63 (biased exponent 64) and 2^63 (190).
constexpr std::uint16_t kLowest = 64 << 7;
constexpr std::uint16_t kBeyond = 190 << 7;

/// One row: nonzero when some value is out of range or (!kRoundUp) not a bf16 number. No branch
/// per element, so GCC vectorizes it (16 values an instruction on AVX-512); with the `&&` of a
/// first version it did not, and converting the block's weights cost as much as the kernel.
template <bool kRoundUp>
std::uint32_t convert_row(const float* src, Index k, std::uint16_t* dst) {
  std::uint32_t bad = 0;
  for (Index c = 0; c < k; ++c) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(src[c]);
    const std::uint32_t low = u & 0xFFFFu;
    std::uint32_t h = u >> 16;
    if constexpr (kRoundUp) {
      h += static_cast<std::uint32_t>(low != 0);  // carries into the exponent
    } else {
      bad |= low;
    }
    // Out of [kLowest, kBeyond) unless zero (one unsigned comparison for both ends).
    bad |= static_cast<std::uint32_t>(u != 0) & static_cast<std::uint32_t>(h - kLowest >= kBeyond - kLowest);
    dst[c] = static_cast<std::uint16_t>(h);
  }
  return bad;
}

}  // namespace

bool to_bf16_magnitudes(const float* mag, Index rows, Index k, bool round_up, std::uint16_t* out) {
  const Index kp = bf16_padded(k);
  for (Index r = 0; r < rows; ++r) {
    std::uint16_t* dst = out + r * kp;
    const std::uint32_t bad =
        round_up ? convert_row<true>(mag + r * k, k, dst) : convert_row<false>(mag + r * k, k, dst);
    if (bad != 0) return false;
    std::fill(dst + k, dst + kp, std::uint16_t{0});
  }
  return true;
}

#if defined(__AVX512BF16__) && defined(__AVX512DQ__)

namespace {

constexpr Index kChunk = 1024;  // K per chunk (the sum's order depends on it: fixed)

/// The 16 lanes' sum in the fixed tree of s_gemm_bf16: l + l+8, + l+4, + l+2, + l+1.
inline float lanes_sum(__m512 v) {
  // Extracts, not casts, for the low halves: GCC 12's casts go through _mm512_undefined_*, which
  // it then reports as uninitialized (fixed in GCC 13).
  const __m256 t = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  const __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 0), _mm256_extractf128_ps(t, 1));
  const __m128 w = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
}

/// C's kRows x kCols tile += its sums over one chunk of K ([k0, k1), a multiple of 32 long): a 4 x 4
/// tile holds 16 accumulators and 8 operands, 24 of the 32 vector registers.
template <int kRows, int kCols>
void tile_chunk(const std::uint16_t* a, const std::uint16_t* b, Index kp, Index k0, Index k1, float* c, Index ldc) {
  __m512 acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r) {
    for (int col = 0; col < kCols; ++col) acc[r][col] = _mm512_setzero_ps();
  }
  for (Index k = k0; k < k1; k += kBf16Pairs) {
    __m512bh x_pairs[kRows], w_pairs[kCols];
    for (int r = 0; r < kRows; ++r) x_pairs[r] = (__m512bh)_mm512_loadu_si512(a + r * kp + k);
    for (int col = 0; col < kCols; ++col) w_pairs[col] = (__m512bh)_mm512_loadu_si512(b + col * kp + k);
    for (int r = 0; r < kRows; ++r) {
      for (int col = 0; col < kCols; ++col) acc[r][col] = _mm512_dpbf16_ps(acc[r][col], x_pairs[r], w_pairs[col]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int col = 0; col < kCols; ++col) c[r * ldc + col] += lanes_sum(acc[r][col]);
  }
}

/// Calls f(std::integral_constant<int, r>{}) for the r = 1 to 3 rows or columns left after the
/// tiles of 4: the one dispatch of both dimensions' edges to their fixed-size tiles.
template <typename F>
void with_remainder(Index r, F&& f) {
  switch (r) {
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    default:
      break;
  }
}

template <int kRows>
void tile_row(const std::uint16_t* a, const std::uint16_t* b, Index n, Index kp, Index k0, Index k1, float* c) {
  Index j = 0;
  for (; j + 4 <= n; j += 4) tile_chunk<kRows, 4>(a, b + j * kp, kp, k0, k1, c + j, n);
  with_remainder(n - j,
                 [&](auto cols) { tile_chunk<kRows, decltype(cols)::value>(a, b + j * kp, kp, k0, k1, c + j, n); });
}

}  // namespace

void s_gemm_bf16(const std::uint16_t* a, Index m, const std::uint16_t* b, Index n, Index kp, float* c) {
  NCERT_ASSERT(kp % kBf16Pairs == 0, "s_gemm_bf16: K not padded to 32");
  std::fill(c, c + m * n, 0.0f);
  // Chunk by chunk over the whole block: a chunk of both operands (128 rows x 1,024 x 2 bytes
  // each, 512 KB) stays in L2 while every tile uses it. Each element still adds its chunks in
  // order, the first into an exact 0.
  for (Index k0 = 0; k0 < kp; k0 += kChunk) {
    const Index k1 = std::min(kp, k0 + kChunk);
    Index i = 0;
    for (; i + 4 <= m; i += 4) tile_row<4>(a + i * kp, b, n, kp, k0, k1, c + i * n);
    with_remainder(m - i, [&](auto rows) { tile_row<decltype(rows)::value>(a + i * kp, b, n, kp, k0, k1, c + i * n); });
  }
}

#else

void s_gemm_bf16(const std::uint16_t*, Index, const std::uint16_t*, Index, Index, float*) {
  NCERT_ASSERT(false, "s_gemm_bf16: this build has no AVX512-BF16 kernel (kSBf16Kernel is false)");
}

#endif

}  // namespace ncert::reference::detail
