#include "reference/detail/s_bf16.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/large_block.h"
#include "reference/status.h"

#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
#include <immintrin.h>
#endif

namespace ncert::reference::detail {

namespace {

// bf16 bit patterns of the operand range: 2^-63 (biased exponent 64) and 2^63 (190).
constexpr std::uint16_t kLowest = 64 << 7;
constexpr std::uint16_t kBeyond = 190 << 7;

/// The bf16 bits of a magnitude's bits `u`, rounded up when kRoundUp; `bad` gets nonzero bits
/// when it cannot serve: out of range, or (!kRoundUp) not a bf16 number. The one rule of both
/// operand forms (to_bf16_magnitudes, s_gemm_bf16_widened). No branch, so that GCC vectorizes
/// the loops around it (16 values an instruction on AVX-512); with the `&&` of a first version
/// it did not, and converting the block's weights cost as much as the kernel.
template <bool kRoundUp>
inline std::uint32_t bf16_bits(std::uint32_t u, std::uint32_t& bad) {
  const std::uint32_t low = u & 0xFFFFu;
  std::uint32_t h = u >> 16;
  if constexpr (kRoundUp) {
    h += static_cast<std::uint32_t>(low != 0);  // carries into the exponent
  } else {
    bad |= low;
  }
  // Out of [kLowest, kBeyond) unless zero (one unsigned comparison for both ends).
  bad |= static_cast<std::uint32_t>(u != 0) & static_cast<std::uint32_t>(h - kLowest >= kBeyond - kLowest);
  return h;
}

/// One row: nonzero when some value cannot serve.
template <bool kRoundUp>
std::uint32_t convert_row(const float* src, Index k, std::uint16_t* dst) {
  std::uint32_t bad = 0;
  for (Index c = 0; c < k; ++c) {
    dst[c] = static_cast<std::uint16_t>(bf16_bits<kRoundUp>(std::bit_cast<std::uint32_t>(src[c]), bad));
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

/// Calls f(std::integral_constant<int, r>{}) for r = 1 to kMax (nothing for 0): the one dispatch
/// of both dimensions' edges to their fixed-size tiles.
template <int kMax, typename F>
void with_count(Index r, F&& f) {
  if constexpr (kMax > 0) {
    if (r == kMax) return f(std::integral_constant<int, kMax>{});
    with_count<kMax - 1>(r, std::forward<F>(f));
  }
}

/// The 16 lanes' sum in the fixed tree: l + l+8, + l+4, + l+2, + l+1.
float lanes_sum(const float (&lane)[16]) {
  float t[8], u[4];
  for (int l = 0; l < 8; ++l) t[l] = lane[l] + lane[l + 8];
  for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

/// The same tree over one vector of the 16 lanes (a GCC/clang vector of 16 floats, __m512
/// included), in registers: storing the lanes and summing them from memory made the
/// instruction's path 1.2x slower and the portable one 1.12x (a tile sums its lanes every 32
/// steps, at each chunk's end).
template <typename V>
float vector_lanes_sum(V v) {
  using Half = float __attribute__((vector_size(32)));
  using Quarter = float __attribute__((vector_size(16)));
  const Half t = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Quarter u = __builtin_shufflevector(t, t, 0, 1, 2, 3) + __builtin_shufflevector(t, t, 4, 5, 6, 7);
  return (u[0] + u[2]) + (u[1] + u[3]);
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
    with_count<kTile - 1>(n - j, [&](auto cols) {
      Kernel::template chunk<kRows, decltype(cols)::value>(a + i * kp, b + j * kp, kp, k0, k1, c + i * n + j, n);
    });
  };
  for (Index k0 = 0; k0 < kp; k0 += kChunk) {
    const Index k1 = std::min(kp, k0 + kChunk);
    Index i = 0;
    for (; i + kTile <= m; i += kTile) tile_row(std::integral_constant<int, kTile>{}, i, k0, k1);
    with_count<kTile - 1>(m - i, [&](auto rows) { tile_row(rows, i, k0, k1); });
  }
}

/// The same order in plain f32 arithmetic, for every CPU. A bf16 number widened to f32 is its
/// bits shifted up by 16, so 32 bit words holding the pairs (even value low, odd high) give the
/// even values as word << 16 and the odd ones as word & 0xFFFF0000. Every product of two bf16
/// numbers is exact in f32 (8 x 8 significant bits <= 24, and the operands' range keeps it
/// normal), so a fused multiply-add rounds exactly as the instruction's add does: this file is
/// compiled with -ffp-contract=fast (reference/CMakeLists.txt), and contracting or not gives the
/// same bits (the tests compare both paths and an oracle compiled without contraction).
///
/// Both operands are widened once per chunk into buffers aligned to the vector, each 32-pair
/// step of a row as its 16 odd values then its 16 even values, so the kernel is loads and fused
/// multiply-adds only, two per 32 products. On one core of a Xeon (Sapphire Rapids class),
/// against Eigen's f32 GEMM: widening inside the kernel (a shift and a mask per operand vector,
/// for every tile) ran 0.61-0.63x; widened once into unaligned rows (every load split across
/// two cache lines) 0.63x, into aligned ones 0.85x, and with the lanes summed in registers
/// 0.93-0.97x, 1.3-1.4x the instruction's speed there (bench_reference --s-block;
/// docs/performance.md).
struct Portable {
  // The 16 lanes as parts of the widest vector the target has (GCC keeps a 64-byte vector of a
  // target without AVX-512 in memory: 3.9x slower on AVX2). A lane's sum never meets another
  // lane's before the tree, so the parts run one after the other over the chunk. 4 x 4 tiles
  // on AVX-512 (16 accumulators, 4 + 1 operands, of 32 registers; 8 x 2 and 6 x 2 measured no
  // faster, 2 x 8 slower); 4 x 3 with AVX2's 16 registers (12 accumulators, 3 + 1 operands:
  // 0.95x Eigen's f32 GEMM built alike, where 3 x 3 ran 0.86x, 3 x 4 0.66x).
#if defined(__AVX512F__)
  static constexpr int kLanesPerPart = 16, kRows = 4, kCols = 4;
#elif defined(__AVX__)
  static constexpr int kLanesPerPart = 8, kRows = 4, kCols = 3;
#else
  static constexpr int kLanesPerPart = 4, kRows = 3, kCols = 3;
#endif
  static constexpr int kParts = 16 / kLanesPerPart;
  /// Columns widened at a time: 512 KB of one chunk's f32 operands, which the tiles then read
  /// from L2 (the reference's blocks are 128 wide: one panel).
  static constexpr Index kPanelCols = 128;
  using Floats = float __attribute__((vector_size(4 * kLanesPerPart)));
  using Words = std::uint32_t __attribute__((vector_size(4 * kLanesPerPart)));

  static Floats load(const float* p) {
    Floats v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  /// One row's pairs [0, len) of bf16 bits widened into `dst`, each 32-pair step as its 16 odd
  /// values, then its 16 even, in f32.
  static void widen_row(const std::uint16_t* src, Index len, float* dst) {
    for (Index at = 0; at < len; at += kBf16Pairs) {
      for (Index off = 0; off < 16; off += kLanesPerPart) {  // part by part
        Words w;
        std::memcpy(&w, src + at + 2 * off, sizeof w);
        const Floats odd = std::bit_cast<Floats>(w & 0xFFFF0000u), even = std::bit_cast<Floats>(w << 16);
        std::memcpy(dst + at + off, &odd, sizeof odd);
        std::memcpy(dst + at + 16 + off, &even, sizeof even);
      }
    }
  }

  /// The same from f32 magnitudes, `avail` of them real (zeros after), each turned into bf16 by
  /// bf16_bits: nonzero when one cannot serve.
  template <bool kRoundUp>
  static std::uint32_t widen_row(const float* src, Index avail, Index len, float* dst) {
    std::uint32_t bad = 0;
    for (Index at = 0; at < len; at += kBf16Pairs) {
      float tail[kBf16Pairs] = {};
      const float* step = src + at;
      if (at + kBf16Pairs > avail) {  // the row's last, partial step: zero padded
        std::copy(src + std::min(at, avail), src + avail, tail);
        step = tail;
      }
      for (Index l = 0; l < 16; ++l) {
        const std::uint32_t odd = bf16_bits<kRoundUp>(std::bit_cast<std::uint32_t>(step[2 * l + 1]), bad);
        const std::uint32_t even = bf16_bits<kRoundUp>(std::bit_cast<std::uint32_t>(step[2 * l]), bad);
        dst[at + l] = std::bit_cast<float>(odd << 16);
        dst[at + 16 + l] = std::bit_cast<float>(even << 16);
      }
    }
    return bad;
  }

  /// One tile over one widened chunk of `len` pairs, C += the chunk's sums: R rows of `a` (row
  /// stride lda), C columns of `b` (row stride len). Part by part, each lane adds its odd
  /// product, then its even one, step after step.
  template <int R, int C>
  static void tile(const float* a, Index lda, const float* b, Index len, float* c, Index ldc) {
    float lane[R][C][16];
    for (int part = 0; part < kParts; ++part) {
      const Index off = Index{kLanesPerPart} * part;
      Floats acc[R][C] = {};
      for (Index at = off; at < len; at += kBf16Pairs) {
        Floats w[C];
        for (int col = 0; col < C; ++col) w[col] = load(b + col * len + at);
        for (int r = 0; r < R; ++r) {
          const Floats x = load(a + r * lda + at);
          for (int col = 0; col < C; ++col) acc[r][col] += x * w[col];
        }
        for (int col = 0; col < C; ++col) w[col] = load(b + col * len + at + 16);
        for (int r = 0; r < R; ++r) {
          const Floats x = load(a + r * lda + at + 16);
          for (int col = 0; col < C; ++col) acc[r][col] += x * w[col];
        }
      }
      if constexpr (kParts == 1) {
        for (int r = 0; r < R; ++r) {
          for (int col = 0; col < C; ++col) c[r * ldc + col] += vector_lanes_sum(acc[r][col]);
        }
        return;
      }
      for (int r = 0; r < R; ++r) {
        for (int col = 0; col < C; ++col) {
          for (int l = 0; l < kLanesPerPart; ++l) lane[r][col][off + l] = acc[r][col][l];
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int col = 0; col < C; ++col) c[r * ldc + col] += lanes_sum(lane[r][col]);
    }
  }

  /// C = A B^T from `a_wide` (m rows of kp, widened) and B widened a chunk of a panel of
  /// columns at a time by widen_b(j0, cols, k0, k1, dst), which returns false when B cannot
  /// serve (then so does this, C unspecified).
  template <typename WidenB>
  static bool gemm(const float* a_wide, Index m, Index n, Index kp, float* c, WidenB&& widen_b) {
    NCERT_ASSERT(kp % kBf16Pairs == 0, "s_gemm_bf16: K not padded to 32");
    // Kept from call to call, as gemm.cc keeps Eigen's, and 64-byte aligned (LargeVector).
    thread_local LargeVector<float> wb;
    std::fill(c, c + m * n, 0.0f);
    for (Index k0 = 0; k0 < kp; k0 += kChunk) {
      const Index k1 = std::min(kp, k0 + kChunk), len = k1 - k0;
      for (Index j0 = 0; j0 < n; j0 += kPanelCols) {
        const Index cols = std::min(kPanelCols, n - j0);
        wb.resize(static_cast<std::size_t>(cols * len));
        if (!widen_b(j0, cols, k0, k1, wb.data())) return false;
        for (Index i = 0; i < m; i += kRows) {
          with_count<kRows>(std::min<Index>(kRows, m - i), [&](auto r) {
            constexpr int kR = decltype(r)::value;
            const float* const ai = a_wide + i * kp + k0;
            float* const ci = c + i * n + j0;
            Index j = 0;
            for (; j + kCols <= cols; j += kCols) tile<kR, kCols>(ai, kp, wb.data() + j * len, len, ci + j, n);
            with_count<kCols - 1>(cols - j, [&](auto rest) {
              tile<kR, decltype(rest)::value>(ai, kp, wb.data() + j * len, len, ci + j, n);
            });
          });
        }
      }
    }
    return true;
  }

  /// Both operands as bf16 bits (to_bf16_magnitudes').
  static void gemm(const std::uint16_t* a, Index m, const std::uint16_t* b, Index n, Index kp, float* c) {
    thread_local LargeVector<float> wa;
    wa.resize(static_cast<std::size_t>(m * kp));
    widen_bf16_rows(a, m, kp, wa.data());
    gemm(wa.data(), m, n, kp, c, [&](Index j0, Index cols, Index k0, Index k1, float* dst) {
      for (Index r = 0; r < cols; ++r) widen_row(b + (j0 + r) * kp + k0, k1 - k0, dst + r * (k1 - k0));
      return true;
    });
  }
};

#if defined(__AVX512BF16__) && defined(__AVX512DQ__)

/// VDPBF16PS: 32 products into 16 lanes an instruction, (acc + odd) + even, rounded to nearest.
struct Instruction {
  static constexpr int kTile = 4;  // 16 accumulators and 8 operands: 24 of the 32 registers

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
      for (int col = 0; col < kCols; ++col) c[r * ldc + col] += vector_lanes_sum(acc[r][col]);
    }
  }
};

#endif

}  // namespace

bool instruction_is_faster() {
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
  static const bool amd = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0;
  }();
  return amd;
#else
  return false;
#endif
}

void widen_bf16_rows(const std::uint16_t* a, Index m, Index kp, float* out) {
  for (Index r = 0; r < m; ++r) Portable::widen_row(a + r * kp, kp, out + r * kp);
}

namespace {

template <bool kRoundUp>
bool s_gemm_widened(const float* a_wide, Index m, const float* b_mag, Index n, Index k, float* c) {
  return Portable::gemm(a_wide, m, n, bf16_padded(k), c, [&](Index j0, Index cols, Index k0, Index k1, float* dst) {
    // k0 < k: k0 is a multiple of 1,024 below bf16_padded(k), which is below k + 32.
    const Index avail = std::min(k, k1) - k0, len = k1 - k0;
    // Row by row, so that weights that cannot serve (AF4 magnitudes under f32 activations are
    // rarely bf16 numbers) cost one row's conversion, not a panel's: converting 128 x 1,024
    // before giving up was 2 % of check's CPU on a MatMulNBits dump (M 32, K 5,120, N 16,480).
    for (Index r = 0; r < cols; ++r) {
      if (Portable::widen_row<kRoundUp>(b_mag + (j0 + r) * k + k0, avail, len, dst + r * len) != 0) return false;
    }
    return true;
  });
}

}  // namespace

bool s_gemm_bf16_widened(const float* a_wide, Index m, const float* b_mag, Index n, Index k, bool round_up, float* c) {
  return round_up ? s_gemm_widened<true>(a_wide, m, b_mag, n, k, c) : s_gemm_widened<false>(a_wide, m, b_mag, n, k, c);
}

void s_gemm_bf16(const std::uint16_t* a, Index m, const std::uint16_t* b, Index n, Index kp, float* c,
                 bool instruction) {
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
  if (instruction) return s_gemm<Instruction>(a, m, b, n, kp, c);
#else
  (void)instruction;
#endif
  Portable::gemm(a, m, b, n, kp, c);
}

}  // namespace ncert::reference::detail
