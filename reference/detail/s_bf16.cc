#include "reference/detail/s_bf16.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "reference/status.h"

#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
#include <immintrin.h>
#endif

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

namespace {

constexpr Index kChunk = 1024;  // K per chunk (the sum's order depends on it: fixed)

/// Calls f(std::integral_constant<int, r>{}) for the r = 1 to 3 rows or columns left after the
/// tiles: the one dispatch of both dimensions' edges to their fixed-size tiles.
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

/// C += A B^T chunk by chunk over the whole block, in Kernel's tiles (Kernel::kTile square, its
/// chunk<rows, cols>() one tile over one chunk of K). The tile shape only decides which elements
/// are computed together: each element's order is the chunk's, so every shape gives the same
/// bits. A chunk of both operands (128 rows x 1,024 x 2 bytes each, 512 KB) stays in L2 while
/// every tile uses it; each element adds its chunks in order, the first into an exact 0.
template <typename Kernel>
void s_gemm(const std::uint16_t* a, Index m, const std::uint16_t* b, Index n, Index kp, float* c) {
  NCERT_ASSERT(kp % kBf16Pairs == 0, "s_gemm_bf16: K not padded to 32");
  constexpr int kTile = Kernel::kTile;
  std::fill(c, c + m * n, 0.0f);
  const auto tile_row = [&](auto rows, Index i, Index k0, Index k1) {
    constexpr int kRows = decltype(rows)::value;
    Index j = 0;
    for (; j + kTile <= n; j += kTile) {
      Kernel::template chunk<kRows, kTile>(a + i * kp, b + j * kp, kp, k0, k1, c + i * n + j, n);
    }
    with_remainder(n - j, [&](auto cols) {
      Kernel::template chunk<kRows, decltype(cols)::value>(a + i * kp, b + j * kp, kp, k0, k1, c + i * n + j, n);
    });
  };
  for (Index k0 = 0; k0 < kp; k0 += kChunk) {
    const Index k1 = std::min(kp, k0 + kChunk);
    Index i = 0;
    for (; i + kTile <= m; i += kTile) tile_row(std::integral_constant<int, kTile>{}, i, k0, k1);
    with_remainder(m - i, [&](auto rows) { tile_row(rows, i, k0, k1); });
  }
}

/// The same order in plain f32 arithmetic, for every CPU. A bf16 number widened to f32 is its
/// bits shifted up by 16, so 32 bit words holding the pairs (even value low, odd high) give the
/// even values as word << 16 and the odd ones as word & 0xFFFF0000. Every product of two bf16
/// numbers is exact in f32 (8 x 8 significant bits <= 24, and the operands' range keeps it
/// normal), so a fused multiply-add rounds exactly as the instruction's add does: this file is
/// compiled with -ffp-contract=fast (reference/CMakeLists.txt), and contracting or not gives the
/// same bits (the tests compare both paths and an oracle compiled without contraction).
struct Portable {
  // The 16 lanes as parts of the widest vector the target has (GCC keeps a 64-byte vector of a
  // target without AVX-512 in memory: 3.9x slower on AVX2). A lane's sum never meets another
  // lane's before the tree, so the parts run one after the other over the chunk (its operands
  // stay in L1, 1,024 x 2 bytes a row) and a tile's accumulators are one part's. 4 x 4 tiles on
  // AVX-512 (16 accumulators of 32 registers); 3 x 3 with 16 registers (9, and 3 widened
  // weights and an activation), where 2 x 2 widened one operand per multiply-add and ran 0.66x
  // Eigen's f32 GEMM on AVX2.
#if defined(__AVX512F__)
  static constexpr int kLanesPerPart = 16, kTile = 4;
#elif defined(__AVX__)
  static constexpr int kLanesPerPart = 8, kTile = 3;
#else
  static constexpr int kLanesPerPart = 4, kTile = 3;
#endif
  static constexpr int kParts = 16 / kLanesPerPart;
  using Floats = float __attribute__((vector_size(4 * kLanesPerPart)));
  using Words = std::uint32_t __attribute__((vector_size(4 * kLanesPerPart)));

  static Words load(const std::uint16_t* p) {
    Words w;
    std::memcpy(&w, p, sizeof w);
    return w;
  }
  static Floats odd(Words w) { return std::bit_cast<Floats>(w & 0xFFFF0000u); }
  static Floats even(Words w) { return std::bit_cast<Floats>(w << 16); }

  template <int kRows, int kCols>
  static void chunk(const std::uint16_t* a, const std::uint16_t* b, Index kp, Index k0, Index k1, float* c, Index ldc) {
    float lane[kRows][kCols][16];
    for (int part = 0; part < kParts; ++part) {
      Floats acc[kRows][kCols] = {};
      for (Index at = k0 + Index{2} * kLanesPerPart * part; at < k1; at += kBf16Pairs) {
        Words x[kRows], w[kCols];
        for (int r = 0; r < kRows; ++r) x[r] = load(a + r * kp + at);
        for (int col = 0; col < kCols; ++col) w[col] = load(b + col * kp + at);
        Floats wide[kCols];
        for (int col = 0; col < kCols; ++col) wide[col] = odd(w[col]);
        for (int r = 0; r < kRows; ++r) {
          const Floats x_odd = odd(x[r]);
          for (int col = 0; col < kCols; ++col) acc[r][col] += x_odd * wide[col];
        }
        for (int col = 0; col < kCols; ++col) wide[col] = even(w[col]);
        for (int r = 0; r < kRows; ++r) {
          const Floats x_even = even(x[r]);
          for (int col = 0; col < kCols; ++col) acc[r][col] += x_even * wide[col];
        }
      }
      for (int r = 0; r < kRows; ++r) {
        for (int col = 0; col < kCols; ++col) {
          for (int l = 0; l < kLanesPerPart; ++l) lane[r][col][part * kLanesPerPart + l] = acc[r][col][l];
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      for (int col = 0; col < kCols; ++col) c[r * ldc + col] += lanes_sum(lane[r][col]);
    }
  }

  /// The 16 lanes' sum in the fixed tree: l + l+8, + l+4, + l+2, + l+1.
  static float lanes_sum(const float (&lane)[16]) {
    float t[8], u[4];
    for (int l = 0; l < 8; ++l) t[l] = lane[l] + lane[l + 8];
    for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
    return (u[0] + u[2]) + (u[1] + u[3]);
  }
};

#if defined(__AVX512BF16__) && defined(__AVX512DQ__)

/// VDPBF16PS: 32 products into 16 lanes an instruction, (acc + odd) + even, rounded to nearest.
struct Instruction {
  static constexpr int kTile = 4;  // 16 accumulators and 8 operands: 24 of the 32 registers

  /// The 16 lanes' sum in the fixed tree: l + l+8, + l+4, + l+2, + l+1; Portable::lanes_sum's
  /// in registers. Storing the lanes and calling that one instead made this path 1.2x slower
  /// (bench_reference --s-block: 0.63-0.65 ms against 0.78-0.80 ms a block); both are held to
  /// the oracle's tree by the order tests.
  static float lanes_sum(__m512 v) {
    // Extracts, not casts, for the low halves: GCC 12's casts go through _mm512_undefined_*,
    // which it then reports as uninitialized (fixed in GCC 13).
    const __m256 t = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
    const __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 0), _mm256_extractf128_ps(t, 1));
    const __m128 w = _mm_add_ps(u, _mm_movehl_ps(u, u));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
  }

  template <int kRows, int kCols>
  static void chunk(const std::uint16_t* a, const std::uint16_t* b, Index kp, Index k0, Index k1, float* c, Index ldc) {
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
};

#endif

}  // namespace

void s_gemm_bf16(const std::uint16_t* a, Index m, const std::uint16_t* b, Index n, Index kp, float* c,
                 bool instruction) {
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
  if (instruction) return s_gemm<Instruction>(a, m, b, n, kp, c);
#else
  (void)instruction;
#endif
  s_gemm<Portable>(a, m, b, n, kp, c);
}

}  // namespace ncert::reference::detail
