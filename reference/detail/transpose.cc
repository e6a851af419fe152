#include "reference/detail/transpose.h"

#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

namespace ncert::reference::detail {

namespace {

void transpose_scalar(const float* src, Index rows, Index k, Index c0, float* dst, Index dst_stride) {
  for (Index c = c0; c < k; ++c) {
    float* out = dst + c * dst_stride;
    for (Index r = 0; r < rows; ++r) out[r] = src[r * k + c];
  }
}

#if defined(__AVX512F__)
/// One 16 x 16 tile: rows v[0..15] in, columns out in v[0..15] (four rounds of shuffles, each
/// interleaving elements, then pairs, then 128-bit and 256-bit lanes).
inline void transpose_tile(__m512 (&v)[16]) {
  // All-lanes masks: the maskz forms take a zero source where the plain ones take
  // _mm512_undefined_ps, which GCC 12 reports as maybe-uninitialized (fixed in GCC 13).
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, v[i], v[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 1] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    v[i + 2] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 3] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int h = 0; h < 16; h += 8) {
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_maskz_shuffle_f32x4(kAll, v[h + i], v[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_maskz_shuffle_f32x4(kAll, v[h + i], v[h + i + 4], 0xDD);
    }
  }
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0x88);
    v[i + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0xDD);
  }
}
#elif defined(__AVX__)
/// One 8 x 8 tile: rows v[0..7] in, columns out in v[0..7] (elements, then pairs, then 128-bit
/// lanes interleaved).
inline void transpose_tile(__m256 (&v)[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    v[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) v[i] = t[i];
}
#endif

}  // namespace

void transpose_rows(const float* src, Index rows, Index k, float* dst, Index dst_stride) {
  Index c0 = 0;
#if defined(__AVX512F__)
  if (rows == kTransposeRows) {
    for (; c0 + 16 <= k; c0 += 16) {
      __m512 v[16];
      for (int r = 0; r < 16; ++r) v[r] = _mm512_loadu_ps(src + r * k + c0);
      transpose_tile(v);
      for (int c = 0; c < 16; ++c) _mm512_storeu_ps(dst + (c0 + c) * dst_stride, v[c]);
    }
  }
#elif defined(__AVX__)
  if (rows == kTransposeRows) {
    // 8 columns at a time: rows 0-7 and 8-15 as two 8 x 8 tiles, each column's halves.
    for (; c0 + 8 <= k; c0 += 8) {
      for (int h = 0; h < 16; h += 8) {
        __m256 v[8];
        for (int r = 0; r < 8; ++r) v[r] = _mm256_loadu_ps(src + (h + r) * k + c0);
        transpose_tile(v);
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(dst + (c0 + c) * dst_stride + h, v[c]);
      }
    }
  }
#endif
  transpose_scalar(src, rows, k, c0, dst, dst_stride);
}

}  // namespace ncert::reference::detail
