// The careful path of the row comparison: rows holding NaN, +-Inf or masked (-Inf) vocabulary,
// in scalar code with the fast path's cancellation-free forms (docs/error-bounds.md §7).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "certify/logits/detail/row_compare_paths.h"
#include "reference/float_bits.h"

namespace ncert::certify::detail {

namespace {

/// The element-wise statistics over the finite pairs (max |d|, max ulps, max excess, mean |d|,
/// centred RMS) and the elements breaking the element test.
void careful_elements(const float* a, const float* b, Index V, const ElementTest& test, RowComparison& r) {
  const double rel = test.rel;
  r.max_abs = 0;
  r.max_ulp = 0;
  double s_abs = 0, s_d = 0;
  Index finite_pairs = 0;
  Index broken = 0;  // elements breaking a bits or ulp test
  for (Index j = 0; j < V; ++j) {
    // The same bits are no distance, a NaN's included: bitwise passes two builds' identical NaNs,
    // and ulp:N read them "infinitely many ulps" apart (a reviewer's).
    const bool same = std::bit_cast<std::uint32_t>(a[j]) == std::bit_cast<std::uint32_t>(b[j]);
    const std::uint64_t u = same ? 0 : reference::ulp_distance_f32(a[j], b[j]);
    if (test.kind == ElementTest::Kind::kBits) broken += same ? 0 : 1;
    if (test.kind == ElementTest::Kind::kUlp) broken += u > test.ulp ? 1 : 0;
    if (u > r.max_ulp) {
      r.max_ulp = u;
      r.max_ulp_col = j;
      // The two values, as the fast path keeps them ("0 vs 0" was shown for every row with a
      // masked entry).
      r.max_ulp_a = a[j];
      r.max_ulp_b = b[j];
    }
    if (!std::isfinite(a[j]) || !std::isfinite(b[j])) continue;
    const double d = static_cast<double>(b[j]) - a[j];
    if (std::fabs(d) > r.max_abs || r.max_abs_col < 0) {
      r.max_abs = std::fabs(d);
      r.max_abs_col = j;
    }
    const double ex =
        std::fabs(d) - rel * std::max(std::fabs(static_cast<double>(a[j])), std::fabs(static_cast<double>(b[j])));
    if (ex > r.max_excess || r.max_excess_col < 0) {
      r.max_excess = ex;
      r.max_excess_col = j;
    }
    s_abs += std::fabs(d);
    s_d += d;
    ++finite_pairs;
  }
  // A differing infinity or NaN is an excess no tolerance covers.
  Index excess = 0;
  for (Index j = 0; j < V; ++j) {
    const bool differ_nonfinite = (!std::isfinite(a[j]) || !std::isfinite(b[j])) &&
                                  std::bit_cast<std::uint32_t>(a[j]) != std::bit_cast<std::uint32_t>(b[j]);
    if (differ_nonfinite && r.max_excess != kInf) {
      r.max_excess = kInf;
      r.max_excess_col = j;
    }
    if (test.kind == ElementTest::Kind::kAbs) {
      const double d = std::fabs(static_cast<double>(b[j]) - a[j]);
      excess +=
          differ_nonfinite ||
          (std::isfinite(d) &&
           d - rel * std::max(std::fabs(static_cast<double>(a[j])), std::fabs(static_cast<double>(b[j]))) > test.abs);
    }
  }
  r.violations = test.kind == ElementTest::Kind::kAbs ? excess : broken;
  r.mean_abs = finite_pairs ? s_abs / static_cast<double>(finite_pairs) : 0;
  const double mean = finite_pairs ? s_d / static_cast<double>(finite_pairs) : 0;
  double var = 0;
  for (Index j = 0; j < V; ++j) {
    if (std::isfinite(a[j]) && std::isfinite(b[j])) {
      const double e = (static_cast<double>(b[j]) - a[j]) - mean;
      var += e * e;
    }
  }
  r.rms_centered = finite_pairs ? std::sqrt(var / static_cast<double>(finite_pairs)) : 0;
}

/// KL(A||B), KL(B||A), JSD and dp of the emitted token over the unmasked entries of two rows
/// holding no NaN or +-Inf, neither fully masked.
void careful_divergences(const float* a, const float* b, Index V, std::int32_t token, float ma, float mb,
                         RowComparison& r) {
  // Masked (-Inf) entries carry probability 0. The fast path's forms, in scalar code over the
  // unmasked entries: with the same mask on both sides they are exact in the same sense; where
  // the masks differ, a direction with an entry masked on one side only is infinite and the
  // other is summed directly (rare: differing masks are themselves a finding).
  bool same_mask = true;
  double SA = 0, SB = 0, CA = 0, CB = 0;
  for (Index j = 0; j < V; ++j) {
    const bool fa = a[j] != -kPosInfF, fb = b[j] != -kPosInfF;
    same_mask = same_mask && fa == fb;
    const double ea = fa ? std::exp(static_cast<double>(a[j]) - ma) : 0.0;
    const double eb = fb ? std::exp(static_cast<double>(b[j]) - mb) : 0.0;
    SA += ea;
    SB += eb;
    if (fa && fb) {
      const double d = static_cast<double>(b[j]) - static_cast<double>(a[j]);
      CA += ea * d;
      CB += eb * d;
    }
  }
  const double delta = (static_cast<double>(mb) - ma) + std::log(SB / SA);  // r = d - delta
  const double cp = CA / SA, cq = CB / SB;
  double kab = 0, kba = 0, js = 0;
  for (Index j = 0; j < V; ++j) {
    const bool fa = a[j] != -kPosInfF, fb = b[j] != -kPosInfF;
    if (!fa && !fb) continue;
    const double p = fa ? std::exp(static_cast<double>(a[j]) - ma) / SA : 0.0;
    const double q = fb ? std::exp(static_cast<double>(b[j]) - mb) / SB : 0.0;
    if (!(fa && fb)) {
      if (fa)
        kab = kInf;
      else
        kba = kInf;
      js += (p + q) * std::log(2.0);  // psi(+-1)
      continue;
    }
    const double d = static_cast<double>(b[j]) - static_cast<double>(a[j]);
    const double rr = d - delta;
    if (same_mask) {
      kab += p * phi(d - cp);
      kba += q * phi(cq - d);
    } else {
      kab -= p * rr;
      kba += q * rr;
    }
    const double t = std::fabs(rr) <= 0.02 ? tanh_half_small(rr) : (q - p) / (q + p);
    js += (p + q) * psi(t);
  }
  if (same_mask) {
    r.kl_ab = std::log1p(kab);
    r.kl_ba = std::log1p(kba);
  } else {
    r.kl_ab = std::isinf(kab) ? kab : std::max(0.0, kab);
    r.kl_ba = std::isinf(kba) ? kba : std::max(0.0, kba);
  }
  r.jsd = 0.5 * js;
  if (token >= 0 && token < V) {
    const bool fa = a[token] != -kPosInfF, fb = b[token] != -kPosInfF;
    const double p = fa ? std::exp(static_cast<double>(a[token]) - ma) / SA : 0.0;
    const double q = fb ? std::exp(static_cast<double>(b[token]) - mb) / SB : 0.0;
    // q - p = p expm1(r): no cancellation when the two are close.
    r.dp_token = fa && fb ? p * std::expm1((static_cast<double>(b[token]) - a[token]) - delta) : q - p;
  }
}

}  // namespace

void careful_path(const float* a, const float* b, Index V, std::int32_t token, const ElementTest& test, float ma,
                  float mb, RowComparison& r) {
  careful_elements(a, b, V, test, r);
  if (r.nonfinite) {
    r.kl_ab = r.kl_ba = r.jsd = r.dp_token = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  if (ma == -kPosInfF || mb == -kPosInfF) {
    // A fully masked row has no distribution.
    r.kl_ab = r.kl_ba = r.jsd = r.dp_token = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  careful_divergences(a, b, V, token, ma, mb, r);
}

}  // namespace ncert::certify::detail
