#include "reference/detail/element_bounds.h"

#include <cmath>
#include <cstdint>

#include "reference/detail/directed_avx512.h"
#include "reference/detail/interval.h"

namespace ncert::reference::detail {

void element_bounds_one(const BoundTerms& terms, const ProjectionArithmetic& a, const ElementBoundsIn& in, Index e,
                        const ElementBoundsOut& out) {
  const double ys = in.y[e];
  const double s = in.s[e];
  const ElementBound eb = element_bound(terms, s, in.spread ? in.spread[e] : 0.0, in.x_l1, in.a_l1[e]);
  const float bias = in.bias ? in.bias[e] : 0.0f;
  const float res = in.residual ? in.residual[e] : 0.0f;
  out.bound[e] = eb.bound;
  out.tier[e] = eb.tier;
  out.slack[e] = eb.slack + terms.shared_coef * s;
  // Every operand the kernel rounds (a product, a partial sum in any order, a group's scaled
  // sum) is at most max(P, N) <= (S + |y*|) / 2 in exact arithmetic (P and N the sums of the
  // positive and negative products), and the computed ones differ by at most B; where they are
  // the dot product's own terms, only the binade that bound reaches counts.
  out.sigma[e] = terms.noise_coef * noise_magnitude((s + std::fabs(ys)) / 2 + eb.bound, terms.noise_in_binades);
  out.center[e] = ys + static_cast<double>(bias) + static_cast<double>(res);
  out.accept[e] = propagate_interval(ys, eb.bound, bias, res, a);
  out.expect[e] = propagate_interval(ys, eb.tier, bias, res, a);
}

bool element_bounds_vectorized(const ProjectionArithmetic& a) {
#if defined(NCERT_DIRECTED_AVX512)
  // The output types round_out knows (the vector one would take any other type for f32, where
  // the scalar one rounds it as f16): f32, and bf16 / f16 with a pinned rounding.
  // A bias in the sum (bias_at = start) joins the centre before the f32 range rule
  // (propagate_interval): the scalar code's alone, a rare declaration.
  const bool narrow_type = a.output == DType::kBf16 || a.output == DType::kF16;
  if (bias_in_sum(a)) return false;
  return a.output == DType::kF32 || (narrow_type && a.output_rounding != OutputRounding::kAny);
#else
  (void)a;
  return false;
#endif
}

#if defined(NCERT_DIRECTED_AVX512)
namespace avx512 {
namespace {

// Eight elements a step: each helper is its scalar twin written lane-wise; `odd` collects the
// lanes that element_bounds_one then recomputes whole.

/// f32_cover: lanes whose lo or hi lies beyond kF32RoundsToInf go to `odd` (the scalar code
/// knows whether the accumulator rounds them to infinity).
inline void f32_cover(__m512d& lo, __m512d& hi, __mmask8& odd) {
  odd |= _mm512_cmp_pd_mask(lo, _mm512_set1_pd(kF32RoundsToInf), _CMP_GE_OQ);
  odd |= _mm512_cmp_pd_mask(hi, _mm512_set1_pd(-kF32RoundsToInf), _CMP_LE_OQ);
  lo = to_f32_directed<true>(lo);
  hi = to_f32_directed<false>(hi);
}

/// add_into_f32: [lo, hi] + c rounded outward into f32.
inline void add_into_f32(__m512d& lo, __m512d& hi, __m512d c, __mmask8& odd) {
  lo = add_directed<true>(lo, c, odd);
  hi = add_directed<false>(hi, c, odd);
  f32_cover(lo, hi, odd);
}

/// round_out for f32, bf16 and f16 outputs (rne, rz).
inline void round_out(__m512d& lo, __m512d& hi, const ProjectionArithmetic& a, __mmask8& odd) {
  f32_cover(lo, hi, odd);
  const bool rz = a.output_rounding == OutputRounding::kTowardZero;
  if (a.output == DType::kBf16) {
    lo = round_bf16(lo, rz, odd);
    hi = round_bf16(hi, rz, odd);
  } else if (a.output == DType::kF16) {
    lo = round_f16(lo, rz, odd);
    hi = round_f16(hi, rz, odd);
  }
}

struct LoHi {
  __m256 lo, hi;
};

/// propagate_interval of [y - b, y + b].
inline LoHi propagate(__m512d y, __m512d b, __m512d bias, __m512d res, const ProjectionArithmetic& a, __mmask8& odd) {
  __m512d lo = add_directed<true>(y, _mm512_xor_pd(b, _mm512_set1_pd(-0.0)), odd);  // -b
  __m512d hi = add_directed<false>(y, b, odd);
  // The accumulator's own result past f32's range, on either side: the scalar code's.
  odd |= _mm512_cmp_pd_mask(_mm512_abs_pd(lo), _mm512_set1_pd(kF32RoundsToInf), _CMP_GE_OQ);
  odd |= _mm512_cmp_pd_mask(_mm512_abs_pd(hi), _mm512_set1_pd(kF32RoundsToInf), _CMP_GE_OQ);
  if (has_bias(a.epilogue)) add_into_f32(lo, hi, bias, odd);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kF32) add_into_f32(lo, hi, res, odd);
  round_out(lo, hi, a, odd);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kOutput) {
    add_into_f32(lo, hi, res, odd);
    round_out(lo, hi, a, odd);
  }
  return {narrow(lo), narrow(hi)};
}

/// Eight Interval {lo, hi} from 8 lo and 8 hi values.
inline void store_intervals(Interval* to, LoHi v) {
  const __m256 low = _mm256_unpacklo_ps(v.lo, v.hi);   // lo0 hi0 lo1 hi1 | lo4 hi4 lo5 hi5
  const __m256 high = _mm256_unpackhi_ps(v.lo, v.hi);  // lo2 hi2 lo3 hi3 | lo6 hi6 lo7 hi7
  auto* f = reinterpret_cast<float*>(to);
  _mm256_storeu_ps(f, _mm256_permute2f128_ps(low, high, 0x20));
  _mm256_storeu_ps(f + 8, _mm256_permute2f128_ps(low, high, 0x31));
}

/// noise_magnitude(m, true): 2^floor(log2 m) is m with its fraction bits cleared, for m
/// positive and normal, +0 and +inf; NaN, negative and subnormal m go to `odd`.
inline __m512d binade_of(__m512d m, __mmask8& odd) {
  odd |= _mm512_fpclass_pd_mask(m, kNan | kNegativeOrSubnormal);
  const __m512i exponent = _mm512_set1_epi64(static_cast<long long>(0xFFF0000000000000ull));
  return _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(m), exponent));
}

/// Eight elements from e: element_bound, the slack, sigma, the centre and both intervals.
void eight(const BoundTerms& t, const ProjectionArithmetic& a, const ElementBoundsIn& in, Index e,
           const ElementBoundsOut& out, __mmask8& odd) {
  const __m512d ys = _mm512_loadu_pd(in.y + e);
  const __m512d s = _mm512_loadu_pd(in.s + e);
  const __m512d du = in.spread ? _mm512_loadu_pd(in.spread + e) : _mm512_setzero_pd();
  const __m512d slack_factor = _mm512_set1_pd(1.0 + 0x1p-50);  // element_bound's kSlack
  // element_bound, operation for operation.
  const __m512d eps_ref = _mm512_mul_pd(_mm512_set1_pd(t.eps_coef), s);
  const __m512d two_l1 =
      _mm512_mul_pd(_mm512_set1_pd(2.0), _mm512_add_pd(_mm512_set1_pd(in.x_l1), _mm512_loadu_pd(in.a_l1 + e)));
  const __m512d eta = _mm512_mul_pd(_mm512_set1_pd(0x1p-126), _mm512_add_pd(_mm512_set1_pd(t.eta_base), two_l1));
  const auto sum_with = [&](__m512d first) {
    return _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(first, du), eps_ref), eta);
  };
  const __m512d bound = _mm512_mul_pd(sum_with(_mm512_mul_pd(_mm512_set1_pd(t.gamma_acc), s)), slack_factor);
  const __m512d slack = _mm512_mul_pd(_mm512_add_pd(_mm512_add_pd(du, eps_ref), eta), slack_factor);
  __m512d tier;
  if (t.round_to_nearest) {
    tier = _mm512_mul_pd(sum_with(_mm512_mul_pd(_mm512_set1_pd(t.tier_coef), s)), slack_factor);
    tier = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(tier, bound, _CMP_GT_OQ), tier, bound);
  } else {
    tier = _mm512_mul_pd(_mm512_set1_pd(0.5), bound);
  }
  _mm512_storeu_pd(out.bound + e, bound);
  _mm512_storeu_pd(out.tier + e, tier);
  _mm512_storeu_pd(out.slack + e, _mm512_add_pd(slack, _mm512_mul_pd(_mm512_set1_pd(t.shared_coef), s)));
  // (s + |y*|) / 2: halving is exact scaling, the same value as the division.
  const __m512d m = _mm512_add_pd(_mm512_mul_pd(_mm512_add_pd(s, _mm512_abs_pd(ys)), _mm512_set1_pd(0.5)), bound);
  const __m512d scale = t.noise_in_binades ? binade_of(m, odd) : m;
  _mm512_storeu_pd(out.sigma + e, _mm512_mul_pd(_mm512_set1_pd(t.noise_coef), scale));
  const __m512d bias = in.bias ? widen(_mm256_loadu_ps(in.bias + e)) : _mm512_setzero_pd();
  const __m512d res = in.residual ? widen(_mm256_loadu_ps(in.residual + e)) : _mm512_setzero_pd();
  _mm512_storeu_pd(out.center + e, _mm512_add_pd(_mm512_add_pd(ys, bias), res));
  static_assert(sizeof(Interval) == 2 * sizeof(float), "Interval is {lo, hi} of f32");
  store_intervals(out.accept + e, propagate(ys, bound, bias, res, a, odd));
  store_intervals(out.expect + e, propagate(ys, tier, bias, res, a, odd));
}

}  // namespace
}  // namespace avx512
#endif

void element_bounds_row(const BoundTerms& terms, const ProjectionArithmetic& a, const ElementBoundsIn& in, Index begin,
                        Index end, const ElementBoundsOut& out) {
  Index e = begin;
#if defined(NCERT_DIRECTED_AVX512)
  if (element_bounds_vectorized(a)) {
    for (; e + 8 <= end; e += 8) {
      __mmask8 odd = 0;
      avx512::eight(terms, a, in, e, out, odd);
      for (unsigned lanes = odd; lanes != 0; lanes &= lanes - 1) {
        element_bounds_one(terms, a, in, e + __builtin_ctz(lanes), out);
      }
    }
  }
#endif
  for (; e < end; ++e) element_bounds_one(terms, a, in, e, out);
}

}  // namespace ncert::reference::detail
