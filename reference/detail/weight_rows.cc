#include "reference/detail/weight_rows.h"

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "reference/bounds.h"
#include "reference/detail/af4_kernel_weight.h"
#include "reference/detail/directed.h"
#include "reference/detail/directed_avx512.h"
#include "reference/float_bits.h"

namespace ncert::reference::detail {

namespace {

/// The charged magnitude as the f32 S GEMM's operand: rounded up to f32, subnormals raised.
inline float magnitude_of(double alg) { return f32_magnitude(f64_to_f32_up(alg)); }

/// bf16 and f32 rows: each weight is its own exact, kernel and charged value (|w|, exact in
/// f32), with no spread. Bit operations only, so the loop vectorizes (16 weights an iteration
/// with AVX-512): |w| with subnormals raised (bounds.h f32_magnitude), the finite test on the
/// exponent, and lane-wise sums (l1's order is free: the caller inflates it for any order).
/// A bf16 (its 16 bits) or an f32 weight as the bits of its f32 value.
inline std::uint32_t f32_bits_of(std::uint16_t bf16) { return std::uint32_t{bf16} << 16; }
inline std::uint32_t f32_bits_of(float f32) { return std::bit_cast<std::uint32_t>(f32); }

template <typename T>
WeightRowFacts decode_plain(const T* v, Index k, const WeightRowOut& out) {
  double l1 = 0;
  Index nonfinite = 0;
  std::uint32_t nonzero = 0;
  // Local restrict pointers: read through `out`, GCC re-loads them every iteration and
  // vectorizes the stores as scatters.
  // With no `exact` (segment_exact_is_kernel) the row's f64 values go to one row of scratch.
  thread_local std::vector<double> own_exact;
  if (!out.exact) own_exact.resize(static_cast<std::size_t>(k));
  double* __restrict exact = out.exact ? out.exact : own_exact.data();
  float* __restrict magnitude = out.magnitude;
#pragma omp simd reduction(+ : l1, nonfinite) reduction(| : nonzero)
  for (Index c = 0; c < k; ++c) {
    const std::uint32_t bits = f32_bits_of(v[c]);
    // Masks, not conditionals: GCC 12 does not if-convert the selects here, and a loop with
    // control flow is not vectorized.
    const std::uint32_t mag = bits & 0x7FFFFFFFu;
    const std::uint32_t finite = 0u - static_cast<std::uint32_t>(mag < 0x7F800000u);
    const std::uint32_t subnormal = 0u - static_cast<std::uint32_t>(mag - 1u < 0x007FFFFFu);
    exact[c] = static_cast<double>(std::bit_cast<float>(bits));
    magnitude[c] = std::bit_cast<float>((mag & ~subnormal) | (0x00800000u & subnormal));
    l1 += static_cast<double>(std::bit_cast<float>(mag & finite));  // non-finite: + 0
    nonfinite += static_cast<Index>(finite == 0);
    nonzero |= mag;  // NaN counts as nonzero, as `exact != 0` does
  }
  if (out.kernel) {
    // The weight's own bits, a signalling NaN quietened: what narrowing `exact` gives in the
    // default modes, and also in a process that flushes subnormal results to zero (FTZ),
    // where narrowing would turn a subnormal weight into 0. The walk's panels, from which y*
    // and S may take the exact weights and their magnitudes, must hold it as they are.
    float* __restrict kernel = out.kernel;
#pragma omp simd
    for (Index c = 0; c < k; ++c) {
      const std::uint32_t bits = f32_bits_of(v[c]);
      const std::uint32_t nan = 0u - static_cast<std::uint32_t>((bits & 0x7FFFFFFFu) > 0x7F800000u);
      kernel[c] = std::bit_cast<float>(bits | (nan & 0x00400000u));
    }
  }
  if (out.spread) {
    for (Index c = 0; c < k; ++c) out.spread[c] = 0;
  }
  WeightRowFacts facts;
  facts.l1 = l1;
  facts.nonfinite = nonfinite;
  facts.all_zero = nonzero == 0;
  facts.kernel_is_exact = out.kernel && nonfinite == 0;  // exact is the f32 value widened, kernel its bits
  if (nonfinite > 0) {
    for (Index c = 0; c < k; ++c) {
      if (!std::isfinite(exact[c])) {
        facts.first_nonfinite = c;
        break;
      }
    }
  }
  return facts;
}

/// The 16 possible weights of one AF4 group, decoded by af4_decode_row itself.
struct CodeTable {
  alignas(64) double exact[16];
  double alg[16];
  double spread[16];
  float kernel[16];
  float magnitude[16];
  double l1_term[16];  ///< alg where exact is finite, else 0 (the row 1-norm skips non-finite)
  std::uint32_t nonfinite_mask = 0, ambiguous_mask = 0, nonzero_mask = 0;  ///< bit q per code
};

#if defined(NCERT_DIRECTED_AVX512)
using avx512::kNan;
using avx512::kNanOrInf;
using avx512::narrow;
using avx512::round_bf16;
using avx512::round_f16;
using avx512::to_f32_directed;
using avx512::widen;

/// kernel_weight for codes first .. first + 7 (as f32 `qf` and as integers `qi`), held in f64 lanes;
/// a NaN weight, whose rounding to bf16 or f16 the helpers do not reproduce, sets `odd`.
inline __m512d kernel_weights(const Af4Layout& L, float s, float b, int zp, __m256 qf, __m256i qi, Index first,
                              bool fused, DType round_to, __mmask8& odd) {
  const __m256 sv = _mm256_set1_ps(s);
  __m256 w;
  if (L.variant == Af4Variant::kAffine) {
    w = fused ? _mm256_fmadd_ps(sv, qf, _mm256_set1_ps(b)) : _mm256_add_ps(_mm256_mul_ps(sv, qf), _mm256_set1_ps(b));
  } else if (L.variant == Af4Variant::kZeroPoint) {
    w = fused ? _mm256_fmadd_ps(qf, sv, _mm256_set1_ps(-(static_cast<float>(zp) * s)))
              : _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(qi, _mm256_set1_epi32(zp))), sv);
  } else {
    w = _mm256_mul_ps(_mm256_loadu_ps(L.table.data() + first), sv);
  }
  const __m512d wd = widen(w);
  odd |= _mm512_fpclass_pd_mask(wd, kNan);
  if (round_to == DType::kF32) return wd;
  return round_to == DType::kBf16 ? round_bf16(wd, false, odd) : round_f16(wd, false, odd);
}

/// fill_table's values for every mode but a single declared operation order (that path is
/// vectorized as written), eight codes a step: the same operations in the same order. False,
/// with the table unfinished, where a NaN kernel weight needs the scalar loops.
bool fill_table_vector(const Af4Layout& L, float s, float b, int zp, DType round_to, CodeTable& t) {
  const bool pinned = L.dequant == Dequant::kF32 || L.dequant == Dequant::kOutput;
  const bool folded = L.dequant == Dequant::kFolded;
  const __m512d sd = _mm512_set1_pd(s), bd = _mm512_set1_pd(b), abs_bd = _mm512_abs_pd(bd);
  const __m512d zero = _mm512_setzero_pd();
  std::uint32_t nonfinite = 0, ambiguous = 0, nonzero = 0;
  for (const int first : {0, 8}) {  // codes first .. first + 7
    const __m256i qi = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(first));
    const __m256 qf = _mm256_cvtepi32_ps(qi);
    const __m512d qd = _mm512_maskz_cvtepi32_pd(avx512::kAll8, qi);
    __m512d exact, alg, spread = zero;
    __m256 kernel;
    if (pinned) {  // dequant_op = either: the midpoint of both orders' weights, half their distance
      __mmask8 odd = 0;
      const __m512d w_fma = kernel_weights(L, s, b, zp, qf, qi, first, true, round_to, odd);
      const __m512d w_mul = kernel_weights(L, s, b, zp, qf, qi, first, false, round_to, odd);
      if (odd != 0) return false;
      const __m512d half = _mm512_set1_pd(0.5);
      exact = _mm512_mul_pd(half, _mm512_add_pd(w_fma, w_mul));
      spread = _mm512_mul_pd(half, _mm512_abs_pd(_mm512_sub_pd(w_mul, w_fma)));
      alg = _mm512_add_pd(_mm512_abs_pd(exact), spread);
      kernel = narrow(w_fma);
    } else if (L.variant == Af4Variant::kAffine) {
      const __m512d sq = _mm512_mul_pd(sd, qd);
      exact = _mm512_add_pd(sq, bd);
      alg = folded ? _mm512_add_pd(_mm512_abs_pd(sq), abs_bd) : _mm512_abs_pd(exact);
      kernel = _mm256_fmadd_ps(_mm256_set1_ps(s), qf, _mm256_set1_ps(b));
    } else if (L.variant == Af4Variant::kZeroPoint) {
      const __m256i q_zp = _mm256_sub_epi32(qi, _mm256_set1_epi32(zp));
      exact = _mm512_mul_pd(sd, _mm512_maskz_cvtepi32_pd(avx512::kAll8, q_zp));
      alg = folded ? _mm512_add_pd(_mm512_abs_pd(_mm512_mul_pd(sd, qd)),
                                   _mm512_abs_pd(_mm512_mul_pd(sd, _mm512_set1_pd(zp))))
                   : _mm512_abs_pd(exact);
      kernel = _mm256_mul_ps(_mm256_cvtepi32_ps(q_zp), _mm256_set1_ps(s));
    } else {
      const __m256 table = _mm256_loadu_ps(L.table.data() + first);
      exact = _mm512_mul_pd(widen(table), sd);
      alg = folded ? _mm512_add_pd(_mm512_abs_pd(exact), abs_bd) : _mm512_abs_pd(exact);
      kernel = _mm256_mul_ps(table, _mm256_set1_ps(s));
    }
    // The common tail: magnitude_of (f64_to_f32_up, then f32_magnitude's bits), the l1 term
    // and the masks.
    const __m256i abs_bits =
        _mm256_and_si256(_mm256_castps_si256(narrow(to_f32_directed<false>(alg))), _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i magnitude = avx512::f32_magnitude_bits(abs_bits);
    const auto finite = static_cast<__mmask8>(~_mm512_fpclass_pd_mask(exact, kNanOrInf));
    _mm512_storeu_pd(t.exact + first, exact);
    _mm512_storeu_pd(t.alg + first, alg);
    _mm512_storeu_pd(t.spread + first, spread);
    _mm256_storeu_ps(t.kernel + first, kernel);
    _mm256_storeu_ps(t.magnitude + first, _mm256_castsi256_ps(magnitude));
    _mm512_storeu_pd(t.l1_term + first, _mm512_maskz_mov_pd(finite, alg));
    nonfinite |= static_cast<std::uint32_t>(static_cast<__mmask8>(~finite)) << first;
    ambiguous |= static_cast<std::uint32_t>(_mm512_cmp_pd_mask(spread, zero, _CMP_NEQ_UQ)) << first;
    nonzero |= static_cast<std::uint32_t>(_mm512_cmp_pd_mask(exact, zero, _CMP_NEQ_UQ)) << first;
  }
  t.nonfinite_mask = nonfinite;
  t.ambiguous_mask = ambiguous;
  t.nonzero_mask = nonzero;
  return true;
}
#endif

/// af4_decode_row's values for the 16 codes of one group (reference/af4.cc, the same formulas
/// per code: they depend on the code, the group's scale and bias and the layout only).
/// tests/unit/reference/weight_rows_test.cc holds the two equal bit for bit for every variant,
/// packing, group size, scale type, dequantization, operation order and activation type.
void fill_table(const Af4View& v, Index row, Index group, DType activation, CodeTable& t) {
  const Af4Layout& L = v.layout;
  const bool affine = L.variant == Af4Variant::kAffine;
  const bool zero_point = L.variant == Af4Variant::kZeroPoint;
  const bool pinned = L.dequant == Dequant::kF32 || L.dequant == Dequant::kOutput;
  const DType round_to = L.dequant == Dequant::kOutput ? activation : DType::kF32;
  const float s = af4_scale(v, row, group);
  const float b = af4_bias(v, row, group);
  const int zp = af4_zero_point(v, row, group);
  const double sd = s;
  const double bd = b;
  // One loop per mode, each without branches inside, so the 16 codes are computed in vectors.
  if (pinned && (dequant_op_only_unfused(L.dequant_op) || dequant_op_only_fused(L.dequant_op))) {
    // A declared single op: both ends of the table's interval are the kernel's f32 weight w, so
    // exact = w, alg = |w|, no spread, and the charged magnitude is |w| itself, with no rounding
    // up from f64 (what the general path computes: this table, with that path's second weight
    // and its f64 magnitudes, was 24 % of check's CPU on a MatMulNBits dump with blocks of 32).
    // Everything in one pass over registers: reading back the doubles just stored stalled.
    const bool fused = dequant_op_only_fused(L.dequant_op);
    alignas(64) float w[16];
    if (L.variant == Af4Variant::kZeroPoint && !fused && round_to == DType::kF32) {
      // ONNX Runtime's MatMulNBits (sub-mul): a loop the compiler turns into one vector.
      for (int q = 0; q < 16; ++q) w[q] = static_cast<float>(q - zp) * s;
    } else {
      for (int q = 0; q < 16; ++q) w[q] = kernel_weight(L, s, b, zp, q, fused, round_to);
    }
    std::uint32_t nonfinite = 0, nonzero = 0;
#pragma omp simd reduction(| : nonfinite, nonzero)
    for (int q = 0; q < 16; ++q) {
      // Bit operations, as f32_magnitude: |w|, and the finite test on the exponent.
      const std::uint32_t mag = std::bit_cast<std::uint32_t>(w[q]) & 0x7FFFFFFFu;
      const float m = std::bit_cast<float>(mag);
      const std::uint32_t finite = 0u - static_cast<std::uint32_t>(mag < 0x7F800000u);
      t.exact[q] = w[q];
      t.alg[q] = m;
      t.kernel[q] = w[q];
      t.spread[q] = 0;
      t.magnitude[q] = f32_magnitude(m);
      t.l1_term[q] = std::bit_cast<float>(mag & finite);  // non-finite: + 0
      nonfinite |= (~finite & 1u) << q;
      nonzero |= static_cast<std::uint32_t>(mag != 0) << q;  // NaN counts as nonzero, as w != 0 does
    }
    t.nonfinite_mask = nonfinite;
    t.ambiguous_mask = 0;
    t.nonzero_mask = nonzero;
    return;
  }
#if defined(NCERT_DIRECTED_AVX512)
  // Every other mode eight codes a step: per group of 64 weights, the scalar loops below cost
  // twice the look-ups (`perf` of `ncert check` on 4-bit affine segments, 2026-12-05).
  if (fill_table_vector(L, s, b, zp, round_to, t)) return;
#endif
  if (pinned) {
    // dequant_op = either: the weight is one of the fused and the unfused order's; the table
    // holds their midpoint and half their distance (and the fused one as the kernel's weight,
    // which no walk uses: walk is a SKIP for `either`).
    for (int q = 0; q < 16; ++q) {
      const float w_fma = kernel_weight(L, s, b, zp, q, true, round_to);
      const float w_mul = kernel_weight(L, s, b, zp, q, false, round_to);
      const double mid = 0.5 * (static_cast<double>(w_fma) + static_cast<double>(w_mul));
      const double half = 0.5 * std::fabs(static_cast<double>(w_mul) - static_cast<double>(w_fma));
      t.exact[q] = mid;
      t.alg[q] = std::fabs(mid) + half;
      t.kernel[q] = w_fma;
      t.spread[q] = half;
    }
  } else if (affine) {
    const bool folded = L.dequant == Dequant::kFolded;
    for (int q = 0; q < 16; ++q) {
      const double sq = sd * q;
      const double w = sq + bd;
      t.exact[q] = w;
      t.alg[q] = std::fabs(w);
      t.kernel[q] = std::fma(s, static_cast<float>(q), b);
      t.spread[q] = 0;
    }
    if (folded) {
      for (int q = 0; q < 16; ++q) t.alg[q] = std::fabs(sd * q) + std::fabs(bd);
    }
  } else if (zero_point) {
    // (q - zp)*s: 24 + 4 significant bits, exact in f64.
    for (int q = 0; q < 16; ++q) {
      const double w = sd * (q - zp);
      t.exact[q] = w;
      t.alg[q] = folded_magnitude(L, sd, bd, zp, q, w);
      t.kernel[q] = exact_kernel_weight(L, s, b, zp, q);
      t.spread[q] = 0;
    }
  } else {
    const bool folded = L.dequant == Dequant::kFolded;
    for (int q = 0; q < 16; ++q) {
      const double sq = static_cast<double>(L.table[q]) * sd;
      t.exact[q] = sq;
      t.alg[q] = folded ? std::fabs(sq) + std::fabs(bd) : std::fabs(sq);
      t.kernel[q] = L.table[q] * s;
      t.spread[q] = 0;
    }
  }
  std::uint32_t nonfinite = 0, ambiguous = 0, nonzero = 0;
  for (int q = 0; q < 16; ++q) {
    const bool finite = std::isfinite(t.exact[q]);
    t.magnitude[q] = magnitude_of(t.alg[q]);
    t.l1_term[q] = finite ? t.alg[q] : 0.0;
    nonfinite |= static_cast<std::uint32_t>(!finite) << q;
    ambiguous |= static_cast<std::uint32_t>(t.spread[q] != 0) << q;
    nonzero |= static_cast<std::uint32_t>(t.exact[q] != 0.0) << q;
  }
  t.nonfinite_mask = nonfinite;
  t.ambiguous_mask = ambiguous;
  t.nonzero_mask = nonzero;
}

/// Element c's code from the row's bytes (af4_code's rule: the first of a byte's two elements
/// is its high nibble for u8-msb, its low nibble otherwise).
template <bool kHighFirst>
inline int code_at(const std::uint8_t* row_codes, Index c) {
  const std::uint8_t byte = row_codes[c / 2];
  const bool first = (c % 2) == 0;
  return (first == kHighFirst) ? (byte >> 4) : (byte & 0x0F);
}

/// Lane sums of a row's l1 (16 lanes, by column modulo 16; summed in a fixed order at the
/// end) and the codes a group holds (bit q).
struct RowAccumulator {
  alignas(64) double l1[16] = {};
  std::uint32_t present = 0;
};

#if defined(__AVX512F__) || defined(__AVX2__)
/// Codes c .. c + 15 of a row (c even) as 16 bytes, each 0-15: element c is the low nibble of
/// its byte (u32-lsb, u8-lsb) or the high one (u8-msb, kHighFirst).
template <bool kHighFirst>
inline __m128i sixteen_codes(const std::uint8_t* row_codes, Index c) {
  const __m128i low_nibble = _mm_set1_epi8(0x0F);
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row_codes + c / 2));
  const __m128i lo = _mm_and_si128(bytes, low_nibble);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibble);
  return kHighFirst ? _mm_unpacklo_epi8(hi, lo) : _mm_unpacklo_epi8(lo, hi);
}
#endif

/// Columns [c0, c1) of a row from the group's table: exact values, f32 magnitudes, l1 and the
/// codes present. Four columns an iteration.
template <bool kHighFirst>
void lookup_scalar(const std::uint8_t* row_codes, Index c0, Index c1, const CodeTable& t, double* exact,
                   float* magnitude, RowAccumulator& acc) {
  for (Index c = c0; c < c1; c += 4) {  // the group size is a multiple of 4 (checked by the caller)
    const int q0 = code_at<kHighFirst>(row_codes, c), q1 = code_at<kHighFirst>(row_codes, c + 1);
    const int q2 = code_at<kHighFirst>(row_codes, c + 2), q3 = code_at<kHighFirst>(row_codes, c + 3);
    exact[c] = t.exact[q0];
    exact[c + 1] = t.exact[q1];
    exact[c + 2] = t.exact[q2];
    exact[c + 3] = t.exact[q3];
    magnitude[c] = t.magnitude[q0];
    magnitude[c + 1] = t.magnitude[q1];
    magnitude[c + 2] = t.magnitude[q2];
    magnitude[c + 3] = t.magnitude[q3];
    acc.l1[0] += t.l1_term[q0];
    acc.l1[1] += t.l1_term[q1];
    acc.l1[2] += t.l1_term[q2];
    acc.l1[3] += t.l1_term[q3];
    acc.present |= (1u << q0) | (1u << q1) | (1u << q2) | (1u << q3);
  }
}

#if defined(__AVX512F__)
/// The same, 16 columns an iteration (c1 - c0 a multiple of 16): the 16-entry tables live in
/// registers (two for the f64 values, one for the f32 magnitudes) and each look-up is one
/// permute. 2.5x faster than the scalar loop at group size 64 (the table path's main cost).
template <bool kHighFirst>
void lookup_vector(const std::uint8_t* row_codes, Index c0, Index c1, const CodeTable& t, double* exact,
                   float* magnitude, float* kernel, RowAccumulator& acc) {
  const __m512d exact_lo = _mm512_loadu_pd(t.exact), exact_hi = _mm512_loadu_pd(t.exact + 8);
  const __m512d l1_lo = _mm512_loadu_pd(t.l1_term), l1_hi = _mm512_loadu_pd(t.l1_term + 8);
  const __m512 mag = _mm512_loadu_ps(t.magnitude);
  const __m512 kern = _mm512_loadu_ps(t.kernel);
  __m512d sum_a = _mm512_load_pd(acc.l1), sum_b = _mm512_load_pd(acc.l1 + 8);
  __m512i present = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi32(1);
  // All-lanes masks: the maskz forms take a zero source where the plain ones take
  // _mm512_undefined_*, which GCC 12 reports as maybe-uninitialized (fixed in GCC 13).
  constexpr __mmask16 kAll16 = 0xFFFF;
  constexpr __mmask8 kAll8 = 0xFF;
  for (Index c = c0; c < c1; c += 16) {
    const __m128i codes = sixteen_codes<kHighFirst>(row_codes, c);
    const __m512i q32 = _mm512_maskz_cvtepu8_epi32(kAll16, codes);
    const __m512i q_a = _mm512_maskz_cvtepu8_epi64(kAll8, codes);
    const __m512i q_b = _mm512_maskz_cvtepu8_epi64(kAll8, _mm_srli_si128(codes, 8));
    _mm512_storeu_ps(magnitude + c, _mm512_maskz_permutexvar_ps(kAll16, q32, mag));
    // The walk's weights, by the same permute (a scalar loop per weight cost about 2 % of a
    // 4-bit check's CPU).
    if (kernel) _mm512_storeu_ps(kernel + c, _mm512_maskz_permutexvar_ps(kAll16, q32, kern));
    _mm512_storeu_pd(exact + c, _mm512_maskz_permutex2var_pd(kAll8, exact_lo, q_a, exact_hi));
    _mm512_storeu_pd(exact + c + 8, _mm512_maskz_permutex2var_pd(kAll8, exact_lo, q_b, exact_hi));
    sum_a = _mm512_add_pd(sum_a, _mm512_maskz_permutex2var_pd(kAll8, l1_lo, q_a, l1_hi));
    sum_b = _mm512_add_pd(sum_b, _mm512_maskz_permutex2var_pd(kAll8, l1_lo, q_b, l1_hi));
    present = _mm512_or_si512(present, _mm512_maskz_sllv_epi32(kAll16, one, q32));
  }
  _mm512_store_pd(acc.l1, sum_a);
  _mm512_store_pd(acc.l1 + 8, sum_b);
  alignas(64) std::uint32_t lanes[16];
  _mm512_store_si512(lanes, present);
  for (const std::uint32_t lane : lanes) acc.present |= lane;
}

/// Floats 8h to 8h + 7 of v (the masked extract: GCC 12's plain one and _mm512_castps512_ps256
/// go through _mm512_undefined_*, which it reports as maybe-uninitialized).
template <int kHalf>
inline __m256 half(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0x0F, _mm512_castps_pd(v), kHalf));
}

/// ONNX Runtime's MatMulNBits order, (q - zp) * s in f32 (zero points, `dequant = f32`,
/// `dequant_op = sub-mul`): each weight straight from its code, 16 an iteration, with no table.
/// The same f32 product as fill_table's (the integer q - zp is exact in f32, then one rounding),
/// so the same exact values, magnitudes, kernel weights and l1 lanes as fill_table and
/// lookup_vector give; the table, built per group for 32 weights, was ~9 % of a 4-bit check's
/// CPU (M 32, K 5120, N 16480, blocks of 32). Sets `nonzero` / `nonfinite` when some weight is.
template <bool kHighFirst>
void decode_sub_mul_vector(const std::uint8_t* row_codes, Index c0, Index c1, float s, int zp, double* exact,
                           float* magnitude, float* kernel, RowAccumulator& acc, bool& nonzero, bool& nonfinite) {
  constexpr __mmask16 kAll16 = 0xFFFF;  // maskz forms throughout, as in lookup_vector (GCC 12)
  constexpr __mmask8 kAll8 = 0xFF;
  const __m512 scale = _mm512_set1_ps(s);
  const __m512i zero_point = _mm512_set1_epi32(zp);
  const __m512i abs_bits = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i inf_bits = _mm512_set1_epi32(0x7F800000);
  __m512d sum_a = _mm512_load_pd(acc.l1), sum_b = _mm512_load_pd(acc.l1 + 8);
  __mmask16 any_nonzero = 0, any_nonfinite = 0;
  for (Index c = c0; c < c1; c += 16) {
    const __m128i codes = sixteen_codes<kHighFirst>(row_codes, c);
    const __m512i q = _mm512_maskz_sub_epi32(kAll16, _mm512_maskz_cvtepu8_epi32(kAll16, codes), zero_point);
    const __m512 w = _mm512_maskz_mul_ps(kAll16, _mm512_maskz_cvtepi32_ps(kAll16, q), scale);
    // Bit operations, as f32_magnitude and decode_plain: |w|, subnormals raised, finite test.
    const __m512i mag = _mm512_maskz_and_epi32(kAll16, _mm512_castps_si512(w), abs_bits);
    const __mmask16 finite = _mm512_cmplt_epu32_mask(mag, inf_bits);
    if (magnitude) {  // none where S packs them from the kernel weights (reference/linear.cc)
      _mm512_storeu_si512(magnitude + c, avx512::f32_magnitude_bits(mag));
    }
    if (kernel) _mm512_storeu_ps(kernel + c, w);
    if (exact) {  // none where the kernel weights stand for them (segment_exact_is_kernel)
      _mm512_storeu_pd(exact + c, _mm512_maskz_cvtps_pd(kAll8, half<0>(w)));
      _mm512_storeu_pd(exact + c + 8, _mm512_maskz_cvtps_pd(kAll8, half<1>(w)));
    }
    const __m512 l1_term = _mm512_castsi512_ps(_mm512_maskz_mov_epi32(finite, mag));  // non-finite: + 0
    sum_a = _mm512_add_pd(sum_a, _mm512_maskz_cvtps_pd(kAll8, half<0>(l1_term)));
    sum_b = _mm512_add_pd(sum_b, _mm512_maskz_cvtps_pd(kAll8, half<1>(l1_term)));
    any_nonzero |= _mm512_test_epi32_mask(mag, mag);  // NaN counts as nonzero, as w != 0 does
    any_nonfinite |= static_cast<__mmask16>(~finite);
  }
  _mm512_store_pd(acc.l1, sum_a);
  _mm512_store_pd(acc.l1 + 8, sum_b);
  nonzero = any_nonzero != 0;
  nonfinite = any_nonfinite != 0;
}
#endif

#if defined(__AVX2__) && !defined(__AVX512F__)
/// The AVX2 form of decode_sub_mul_vector, for builds without AVX-512: each 16 columns as two
/// halves of 8, the same operations on each weight, and the same 16 l1 lanes (column c in lane
/// c mod 16, each lane summed in column order), so the same bits as the AVX-512 form, l1
/// included. The table path it replaces here took 26 % of a 4-bit check's CPU on an AVX2 AMD
/// EPYC (decode_groups 20 %, fill_table 6 %; M 32, K 5,120, N 16,480, blocks of 32).
template <bool kHighFirst>
void decode_sub_mul_vector(const std::uint8_t* row_codes, Index c0, Index c1, float s, int zp, double* exact,
                           float* magnitude, float* kernel, RowAccumulator& acc, bool& nonzero, bool& nonfinite) {
  const __m256 scale = _mm256_set1_ps(s);
  const __m256i zero_point = _mm256_set1_epi32(zp);
  const __m256i abs_bits = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf_bits = _mm256_set1_epi32(0x7F800000);
  const __m256i min_normal = _mm256_set1_epi32(0x00800000);
  const __m256i zero = _mm256_setzero_si256();
  __m256d sum[4];
  for (Index l = 0; l < 4; ++l) sum[l] = _mm256_load_pd(acc.l1 + 4 * l);
  __m256i any_nonzero = zero, any_nonfinite = zero;
  for (Index c = c0; c < c1; c += 16) {
    const __m128i codes = sixteen_codes<kHighFirst>(row_codes, c);
    for (Index h = 0; h < 2; ++h) {
      const Index ch = c + 8 * h;
      const __m128i part = h == 0 ? codes : _mm_srli_si128(codes, 8);
      const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(part), zero_point);
      const __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
      // |w| as bits, at most 0x7FFFFFFF: the signed compares order them as unsigned ones would.
      const __m256i mag = _mm256_and_si256(_mm256_castps_si256(w), abs_bits);
      const __m256i finite = _mm256_cmpgt_epi32(inf_bits, mag);
      if (magnitude) {  // f32_magnitude: nonzero subnormals raised to 2^-126
        const __m256i subnormal =
            _mm256_andnot_si256(_mm256_cmpeq_epi32(mag, zero), _mm256_cmpgt_epi32(min_normal, mag));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(magnitude + ch), _mm256_blendv_epi8(mag, min_normal, subnormal));
      }
      if (kernel) _mm256_storeu_ps(kernel + ch, w);
      if (exact) {
        _mm256_storeu_pd(exact + ch, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
        _mm256_storeu_pd(exact + ch + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
      }
      const __m256 l1_term = _mm256_castsi256_ps(_mm256_and_si256(mag, finite));  // non-finite: + 0
      sum[2 * h] = _mm256_add_pd(sum[2 * h], _mm256_cvtps_pd(_mm256_castps256_ps128(l1_term)));
      sum[2 * h + 1] = _mm256_add_pd(sum[2 * h + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(l1_term, 1)));
      any_nonzero = _mm256_or_si256(any_nonzero, mag);  // NaN counts as nonzero, as w != 0 does
      any_nonfinite = _mm256_or_si256(any_nonfinite, _mm256_andnot_si256(finite, _mm256_set1_epi32(-1)));
    }
  }
  for (Index l = 0; l < 4; ++l) _mm256_store_pd(acc.l1 + 4 * l, sum[l]);
  nonzero = _mm256_testz_si256(any_nonzero, any_nonzero) == 0;
  nonfinite = _mm256_testz_si256(any_nonfinite, any_nonfinite) == 0;
}
#endif

/// Whether decode_groups takes every group of the layout straight from its codes
/// (decode_sub_mul_vector, AVX-512 or AVX2): zero points, (q - zp) * s rounded once to f32,
/// groups of 16s.
bool takes_sub_mul(const Af4Layout& L, DType activation) {
#if defined(__AVX512F__) || defined(__AVX2__)
  const DType round_to = L.dequant == Dequant::kOutput ? activation : DType::kF32;
  return L.group_size % 16 == 0 && L.variant == Af4Variant::kZeroPoint &&
         (L.dequant == Dequant::kF32 || L.dequant == Dequant::kOutput) && dequant_op_only_unfused(L.dequant_op) &&
         round_to == DType::kF32;
#else
  (void)L;
  (void)activation;
  return false;
#endif
}

/// Whether decode_af4_groups (not decode_af4_direct) decodes the layout's rows.
bool takes_groups(const Af4Layout& L) { return L.group_size >= 16 && L.group_size % 4 == 0; }

template <bool kHighFirst>
WeightRowFacts decode_groups(const Af4View& v, Index row, DType activation, const WeightRowOut& out) {
  const Index k = v.k, gs = v.layout.group_size, groups = k / gs;
  const std::uint8_t* row_codes = v.codes + row * (k / 2);
  WeightRowFacts facts;
  facts.kernel_is_exact = out.kernel != nullptr;
  RowAccumulator acc;
  CodeTable t;
#if defined(__AVX512F__) || defined(__AVX2__)
  const bool sub_mul = takes_sub_mul(v.layout, activation);
#endif
  NCERT_ASSERT(out.exact || (out.kernel && takes_sub_mul(v.layout, activation)),
               "AF4 row decoded with no exact values");
  for (Index g = 0; g < groups; ++g) {
    const Index c0 = g * gs, c1 = c0 + gs;
#if defined(__AVX512F__) || defined(__AVX2__)
    if (sub_mul) {
      bool nonzero = false, nonfinite = false;
      decode_sub_mul_vector<kHighFirst>(row_codes, c0, c1, af4_scale(v, row, g), af4_zero_point(v, row, g), out.exact,
                                        out.magnitude, out.kernel, acc, nonzero, nonfinite);
      if (out.spread) {
        for (Index c = c0; c < c1; ++c) out.spread[c] = 0;
      }
      if (nonzero) facts.all_zero = false;
      // kernel_is_exact stays: each exact value is its kernel weight widened (cvtps_pd of it).
      if (nonfinite) {
        for (Index c = c0; c < c1; ++c) {
          const double w = out.exact ? out.exact[c] : static_cast<double>(out.kernel[c]);
          if (!std::isfinite(w) && facts.nonfinite++ == 0) facts.first_nonfinite = c;
        }
      }
      continue;
    }
#endif
    fill_table(v, row, g, activation, t);
    if (facts.kernel_is_exact) {
      // Each code's exact value its kernel weight widened (a NaN never: its bits need not agree).
      std::uint32_t differ = 0;
      for (int q = 0; q < 16; ++q) {
        differ |= static_cast<std::uint32_t>(std::bit_cast<std::uint64_t>(t.exact[q]) !=
                                             std::bit_cast<std::uint64_t>(static_cast<double>(t.kernel[q])));
      }
      facts.kernel_is_exact = differ == 0 && t.nonfinite_mask == 0;
    }
    acc.present = 0;
#if defined(__AVX512F__)
    const bool vector = gs % 16 == 0;
    if (vector) {
      lookup_vector<kHighFirst>(row_codes, c0, c1, t, out.exact, out.magnitude, out.kernel, acc);
    } else {
      lookup_scalar<kHighFirst>(row_codes, c0, c1, t, out.exact, out.magnitude, acc);
    }
#else
    constexpr bool vector = false;
    lookup_scalar<kHighFirst>(row_codes, c0, c1, t, out.exact, out.magnitude, acc);
#endif
    if (out.kernel && !vector) {
      for (Index c = c0; c < c1; ++c) out.kernel[c] = t.kernel[code_at<kHighFirst>(row_codes, c)];
    }
    if (out.spread) {
      for (Index c = c0; c < c1; ++c) out.spread[c] = t.spread[code_at<kHighFirst>(row_codes, c)];
    }
    if (acc.present & t.nonzero_mask) facts.all_zero = false;
    if (acc.present & (t.nonfinite_mask | t.ambiguous_mask)) {
      for (Index c = c0; c < c1; ++c) {
        const std::uint32_t bit = 1u << code_at<kHighFirst>(row_codes, c);
        if ((bit & t.nonfinite_mask) && facts.nonfinite++ == 0) facts.first_nonfinite = c;
        facts.ambiguous += (bit & t.ambiguous_mask) ? 1 : 0;
      }
    }
  }
  // A fixed pairwise order over the 16 lanes.
  for (int w = 8; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) acc.l1[l] += acc.l1[l + w];
  }
  facts.l1 = acc.l1[0];
  if (facts.nonfinite > 0) facts.kernel_is_exact = false;
  return facts;
}

}  // namespace

bool segment_exact_is_kernel(const WeightSegment& segment, DType activation) {
  switch (segment.format) {
    case WeightFormat::kF32:
    case WeightFormat::kBf16:
    case WeightFormat::kF16:
      return true;  // decode_plain: exact is the f32 value, the kernel weight its narrowing
    case WeightFormat::kAf4:
      return takes_groups(segment.af4.layout) && takes_sub_mul(segment.af4.layout, activation);
    case WeightFormat::kInt8:
    case WeightFormat::kE4m3:
    case WeightFormat::kE5m2:
      return false;
  }
  NCERT_UNREACHABLE("weight format");
}

bool segment_magnitudes_are_kernels(const WeightSegment& segment, DType activation) {
  return segment.format == WeightFormat::kAf4 && takes_groups(segment.af4.layout) &&
         takes_sub_mul(segment.af4.layout, activation);
}

bool segment_may_spread(const WeightSegment& segment) {
  if (segment.format != WeightFormat::kAf4) return false;
  const Af4Layout& L = segment.af4.layout;
  const bool pinned = L.dequant == Dequant::kF32 || L.dequant == Dequant::kOutput;
  return pinned && !detail::dequant_op_only_fused(L.dequant_op) && !detail::dequant_op_only_unfused(L.dequant_op);
}

WeightRowFacts WeightRowDecoder::decode(Index j, const WeightRowOut& out) {
  const WeightSegment& s = segment_of(weights_, j);
  const Index local = j - s.row_begin;
  const Index k = weights_.k;
  NCERT_ASSERT(out.magnitude || (out.kernel && segment_magnitudes_are_kernels(s, activation_)),
               "row decoded with no magnitudes");
  switch (s.format) {
    case WeightFormat::kAf4:
      return takes_groups(s.af4.layout) ? decode_af4_groups(s.af4, local, out) : decode_af4_direct(s.af4, local, out);
    case WeightFormat::kBf16: {
      return decode_plain(static_cast<const std::uint16_t*>(s.values) + local * k, k, out);
    }
    case WeightFormat::kF32: {
      return decode_plain(static_cast<const float*>(s.values) + local * k, k, out);
    }
    case WeightFormat::kInt8:
    case WeightFormat::kE4m3:
    case WeightFormat::kE5m2:
      NCERT_ASSERT(out.exact, "scaled row decoded with no exact values");
      return decode_scaled(s.scaled, local, out);
    case WeightFormat::kF16: {
      // Widened exactly to f32, then as an f32 row.
      widened_.resize(static_cast<std::size_t>(k));
      const auto* v = static_cast<const std::uint16_t*>(s.values) + local * k;
      for (Index c = 0; c < k; ++c) widened_[static_cast<std::size_t>(c)] = f16_to_f32(v[c]);
      return decode_plain(widened_.data(), k, out);
    }
  }
  NCERT_UNREACHABLE("weight format");
}

WeightRowFacts WeightRowDecoder::decode_af4_groups(const Af4View& v, Index row, const WeightRowOut& out) {
  return v.layout.packing == Af4Packing::kU8Msb ? decode_groups<true>(v, row, activation_, out)
                                                : decode_groups<false>(v, row, activation_, out);
}

WeightRowFacts WeightRowDecoder::decode_af4_direct(const Af4View& v, Index row, const WeightRowOut& out) {
  NCERT_ASSERT(out.exact, "AF4 row decoded with no exact values");
  const Index k = v.k;
  alg_.resize(static_cast<std::size_t>(k));
  spread_.resize(static_cast<std::size_t>(k));
  af4_decode_row(v, row, activation_, out.exact, alg_.data(), out.kernel, spread_.data());
  WeightRowFacts facts;
  for (Index c = 0; c < k; ++c) {
    out.magnitude[c] = magnitude_of(alg_[c]);
    if (out.spread) out.spread[c] = spread_[c];
    facts.ambiguous += spread_[c] != 0 ? 1 : 0;
    if (!std::isfinite(out.exact[c])) {
      if (facts.nonfinite++ == 0) facts.first_nonfinite = c;
    } else {
      facts.l1 += alg_[c];
    }
    if (out.exact[c] != 0.0) facts.all_zero = false;
  }
  return facts;
}

WeightRowFacts WeightRowDecoder::decode_scaled(const ScaledView& v, Index row, const WeightRowOut& out) {
  const Index k = v.k;
  alg_.resize(static_cast<std::size_t>(k));
  scaled_decode_row(v, row, activation_, out.exact, alg_.data(), out.kernel);
  WeightRowFacts facts;
  for (Index c = 0; c < k; ++c) {
    out.magnitude[c] = magnitude_of(alg_[c]);
    if (out.spread) out.spread[c] = 0;
    if (!std::isfinite(out.exact[c])) {
      if (facts.nonfinite++ == 0) facts.first_nonfinite = c;
    } else {
      facts.l1 += alg_[c];
    }
    if (out.exact[c] != 0.0) facts.all_zero = false;
  }
  return facts;
}

}  // namespace ncert::reference::detail
