// Internal: AVX-512 twins of the directed roundings and output roundings the reference's hot
// loops need (directed.h, float_bits.h), eight f64 lanes at a time, with the same IEEE
// operations in the same order (the build forbids FMA contraction): the per-element loop
// (element_bounds.cc) and the AF4 code tables (weight_rows.cc). Where a scalar function has a
// special case a helper does not reproduce, the helper sets the lane in `odd` and the caller
// recomputes it with the scalar code. tests/unit/reference/element_bounds_test.cc and
// weight_rows_test.cc hold the callers to the scalar code bit for bit.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__F16C__)
#include <immintrin.h>
#define NCERT_DIRECTED_AVX512 1

namespace ncert::reference::detail::avx512 {

constexpr int kNanOrInf = 0x01 | 0x08 | 0x10 | 0x80;  // _mm512_fpclass_pd_mask categories
constexpr int kZero = 0x02 | 0x04;
constexpr int kNan = 0x01 | 0x80;
constexpr int kNegativeOrSubnormal = 0x10 | 0x20 | 0x40;

// The maskz forms: the plain ones take _mm*_undefined_*, which GCC 12 reports as
// maybe-uninitialized (fixed in GCC 13).
constexpr __mmask8 kAll8 = 0xFF;
inline __m512d widen(__m256 v) { return _mm512_maskz_cvtps_pd(kAll8, v); }
inline __m256 narrow(__m512d v) { return _mm512_maskz_cvtpd_ps(kAll8, v); }

/// f32_magnitude (bounds.h) on the bits of |w| (sign cleared), 16 or 8 lanes: a nonzero
/// subnormal raised to the least normal, 0x00800000. A nonzero subnormal is a pattern whose
/// value minus 1 lies below 0x007FFFFF, unsigned (0 wraps to 0xFFFFFFFF).
inline __m512i f32_magnitude_bits(__m512i abs_bits) {
  constexpr __mmask16 kAll16 = 0xFFFF;
  const __mmask16 subnormal = _mm512_cmplt_epu32_mask(_mm512_maskz_sub_epi32(kAll16, abs_bits, _mm512_set1_epi32(1)),
                                                      _mm512_set1_epi32(0x007FFFFF));
  return _mm512_mask_mov_epi32(abs_bits, subnormal, _mm512_set1_epi32(0x00800000));
}
inline __m256i f32_magnitude_bits(__m256i abs_bits) {
  const __mmask8 subnormal =
      _mm256_cmplt_epu32_mask(_mm256_sub_epi32(abs_bits, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x007FFFFF));
  return _mm256_mask_mov_epi32(abs_bits, subnormal, _mm256_set1_epi32(0x00800000));
}

/// step_if: the bit pattern stepped by one toward -inf (kDown) or +inf where `step`.
template <bool kDown>
inline __m512d step_if(__m512d v, __mmask8 step) {
  const __m512i b = _mm512_castpd_si512(v);
  const __mmask8 negative = _mm512_movepi64_mask(b);
  const auto toward_zero = static_cast<__mmask8>(kDown ? ~negative : negative);
  const __m512i one = _mm512_set1_epi64(1);
  __m512i r = _mm512_mask_sub_epi64(b, static_cast<__mmask8>(step & toward_zero), b, one);
  r = _mm512_mask_add_epi64(r, static_cast<__mmask8>(step & ~toward_zero), r, one);
  return _mm512_castsi512_pd(r);
}
template <bool kDown>
inline __m256 step_if(__m256 v, __mmask8 step) {
  const __m256i b = _mm256_castps_si256(v);
  const __mmask8 negative = _mm256_movepi32_mask(b);
  const auto toward_zero = static_cast<__mmask8>(kDown ? ~negative : negative);
  const __m256i one = _mm256_set1_epi32(1);
  __m256i r = _mm256_mask_sub_epi32(b, static_cast<__mmask8>(step & toward_zero), b, one);
  r = _mm256_mask_add_epi32(r, static_cast<__mmask8>(step & ~toward_zero), r, one);
  return _mm256_castsi256_ps(r);
}

/// add_down / add_up: the sum stepped where TwoSum's error says it was rounded the wrong way.
/// The scalar's special cases (a sum that overflowed, is NaN or is 0) go to `odd`.
template <bool kDown>
inline __m512d add_directed(__m512d a, __m512d b, __mmask8& odd) {
  const __m512d s = _mm512_add_pd(a, b);
  const __m512d z = _mm512_sub_pd(s, a);
  const __m512d err = _mm512_add_pd(_mm512_sub_pd(a, _mm512_sub_pd(s, z)), _mm512_sub_pd(b, z));
  const __m512d zero = _mm512_setzero_pd();
  const __mmask8 inexact =
      kDown ? _mm512_cmp_pd_mask(err, zero, _CMP_LT_OQ) : _mm512_cmp_pd_mask(err, zero, _CMP_GT_OQ);
  odd |= _mm512_fpclass_pd_mask(s, kNanOrInf | kZero);
  return step_if<kDown>(s, inexact);
}

/// f64_to_f32_down / _up, widened back to f64 (exact).
template <bool kDown>
inline __m512d to_f32_directed(__m512d x) {
  const __m256 f = narrow(x);
  const __m512d back = widen(f);
  const __mmask8 step = kDown ? _mm512_cmp_pd_mask(back, x, _CMP_GT_OQ) : _mm512_cmp_pd_mask(back, x, _CMP_LT_OQ);
  return widen(step_if<kDown>(f, step));
}

/// round_to_type(v, bf16, toward_zero) of f32 values held in f64; NaN lanes go to `odd`.
inline __m512d round_bf16(__m512d v, bool toward_zero, __mmask8& odd) {
  odd |= _mm512_fpclass_pd_mask(v, kNan);
  __m256i u = _mm256_castps_si256(narrow(v));
  if (!toward_zero) {
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    u = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb));
  }
  u = _mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
  return widen(_mm256_castsi256_ps(u));
}

/// round_to_type(v, f16, toward_zero) by the F16C conversions (IEEE's roundings, as
/// f32_to_f16 and narrow_round's); NaN lanes, and under rz those beyond 65504, go to `odd`.
inline __m512d round_f16(__m512d v, bool toward_zero, __mmask8& odd) {
  odd |= _mm512_fpclass_pd_mask(v, kNan);
  const __m256 f = narrow(v);
  __m128i h;
  if (toward_zero) {
    odd |= _mm512_cmp_pd_mask(_mm512_abs_pd(v), _mm512_set1_pd(65504.0), _CMP_GT_OQ);
    h = _mm256_cvtps_ph(f, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  } else {
    h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  return widen(_mm256_cvtph_ps(h));
}

}  // namespace ncert::reference::detail::avx512
#endif
