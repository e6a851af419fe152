// compare_rows against values computed independently here: every statistic in __float128
// (113-bit significand, libquadmath) straight from the definitions, so the cancellation the
// library's forms avoid costs the reference nothing at the tolerances checked. Also the
// vectorized exponential against std::exp, phi and psi against quad, and the careful path
// (NaN, +-Inf) and chunk borders (the fast path works in chunks of 512 columns).
#include <gtest/gtest.h>

#include <quadmath.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "certify/logits/detail/fast_exp.h"
#include "certify/logits/row_compare.h"
#include "reference/float_bits.h"

namespace ncert::certify {
namespace {

using Quad = __float128;

constexpr float kInfF = std::numeric_limits<float>::infinity();

struct QuadStats {
  double kl_ab = 0, kl_ba = 0, jsd = 0, dp_token = 0, p_token = 0, mean_abs = 0, rms_centered = 0;
};

/// Definitions, in quad: p = softmax(a), q = softmax(b); KL(P||Q) = sum p (log p - log q);
/// JSD = 1/2 sum p log(2p/(p+q)) + q log(2q/(p+q)); masked (-inf) entries have p = 0.
QuadStats quad_stats(const std::vector<float>& a, const std::vector<float>& b, std::int32_t token) {
  const std::size_t V = a.size();
  Quad ma = -1e300, mb = -1e300;
  for (std::size_t j = 0; j < V; ++j) {
    ma = std::max<Quad>(ma, a[j]);
    mb = std::max<Quad>(mb, b[j]);
  }
  Quad sa = 0, sb = 0;
  for (std::size_t j = 0; j < V; ++j) {
    if (a[j] != -kInfF) sa += expq(static_cast<Quad>(a[j]) - ma);
    if (b[j] != -kInfF) sb += expq(static_cast<Quad>(b[j]) - mb);
  }
  const Quad la = ma + logq(sa), lb = mb + logq(sb);
  Quad kab = 0, kba = 0, js = 0, sabs = 0, sd = 0;
  for (std::size_t j = 0; j < V; ++j) {
    const Quad lp = static_cast<Quad>(a[j]) - la, lq = static_cast<Quad>(b[j]) - lb;
    const Quad p = a[j] == -kInfF ? 0 : expq(lp), q = b[j] == -kInfF ? 0 : expq(lq);
    if (p > 0 && q > 0) {
      kab += p * (lp - lq);
      kba += q * (lq - lp);
    }
    const Quad m = (p + q) / 2;
    if (p > 0) js += p * logq(p / m) / 2;
    if (q > 0) js += q * logq(q / m) / 2;
    if (std::isfinite(a[j]) && std::isfinite(b[j])) {
      const Quad d = static_cast<Quad>(b[j]) - static_cast<Quad>(a[j]);
      sabs += fabsq(d);
      sd += d;
    }
  }
  const Quad mean = sd / V;
  Quad var = 0;
  for (std::size_t j = 0; j < V; ++j) {
    const Quad e = static_cast<Quad>(b[j]) - static_cast<Quad>(a[j]) - mean;
    var += e * e;
  }
  QuadStats s;
  s.kl_ab = static_cast<double>(kab);
  s.kl_ba = static_cast<double>(kba);
  s.jsd = static_cast<double>(js);
  s.mean_abs = static_cast<double>(sabs / V);
  s.rms_centered = static_cast<double>(sqrtq(var / V));
  if (token >= 0) {
    s.dp_token = static_cast<double>(expq(static_cast<Quad>(b[token]) - lb) - expq(static_cast<Quad>(a[token]) - la));
    s.p_token = static_cast<double>(expq(static_cast<Quad>(a[token]) - la));
  }
  return s;
}

std::vector<float> random_row(std::size_t V, std::uint64_t seed, float scale = 2.5f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> r(V);
  for (float& x : r) x = nd(rng);
  return r;
}

std::vector<float> perturb(const std::vector<float>& a, float noise, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> b = a;
  for (float& x : b) x += noise * nd(rng);
  return b;
}

RowComparison run(const std::vector<float>& a, const std::vector<float>& b, std::int32_t token = -1, double rel = 0) {
  CompareScratch sc;
  return compare_rows(a.data(), b.data(), static_cast<Index>(a.size()), token, rel, sc);
}

void expect_rel(double got, double want, double tol, const char* what) {
  if (want == 0) {
    EXPECT_LE(std::fabs(got), 1e-300) << what;
    return;
  }
  EXPECT_LE(std::fabs(got - want) / std::fabs(want), tol) << what << ": got " << got << " want " << want;
}

// ---- the exponential and the series -------------------------------------------------------------

TEST(FastExp, WithinFourTenthsOfAQuadrillionthOfStdExp) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> wide(-708.0, 0.0), narrow(-1.0, 0.0);
  double worst = 0;
  for (int i = 0; i < 400000; ++i) {
    const double x = i % 2 ? wide(rng) : narrow(rng);
    const double want = static_cast<double>(expq(static_cast<Quad>(x)));
    const double got = detail::exp_nonpositive(x);
    worst = std::max(worst, std::fabs(got - want) / want);
  }
  EXPECT_LT(worst, 4e-16);
  // Reduction boundaries (r = +-ln2/2) and the ends.
  for (int n = 0; n < 1020; ++n) {
    for (double off : {-0.5, 0.5}) {
      const double x = -(n + off) * 0.6931471805599453;
      if (x > 0 || x < -708) continue;
      const double want = static_cast<double>(expq(static_cast<Quad>(x)));
      EXPECT_LT(std::fabs(detail::exp_nonpositive(x) - want) / want, 4e-16) << x;
    }
  }
  EXPECT_EQ(detail::exp_nonpositive(0.0), 1.0);
  EXPECT_EQ(detail::exp_nonpositive(-709.0), 0.0);
  EXPECT_EQ(detail::exp_nonpositive(-std::numeric_limits<double>::infinity()), 0.0);
}

TEST(Series, PhiMatchesQuadEverywhere) {
  for (double x : {1e-300, -1e-300, 1e-12, -3e-9, 1e-5, -1e-4, 5e-3, -0.01, 0.099, -0.1, 0.3, -0.49, 0.5, -0.51, 1.0,
                   -2.0, 7.5, -30.0}) {
    const Quad xq = x;
    const double want = static_cast<double>(expm1q(xq) - xq);
    expect_rel(phi(x), want, 4e-16, "phi");
  }
  EXPECT_EQ(phi(0.0), 0.0);
}

TEST(Series, PsiMatchesQuad) {
  for (double t : {1e-200, 1e-8, -1e-4, 0.003, -0.02, 0.1, -0.25, 0.26, -0.5, 0.9, -0.999999}) {
    const Quad tq = t;
    const double want = static_cast<double>(((1 + tq) * log1pq(tq) + (1 - tq) * log1pq(-tq)) / 2);
    expect_rel(psi(t), want, 1e-15, "psi");
  }
  EXPECT_EQ(psi(1.0), std::log(2.0));
  EXPECT_EQ(psi(-1.0), std::log(2.0));
}

// ---- KL, JSD and the moments against quad ---------------------------------------------------------

struct Case {
  const char* name;
  float noise;
};

// The noise levels walk every branch: phi with 4, 7, 10 and 15 terms, psi with 2 and 4, and the
// general (log) path once |r| > 0.02 or |z| > 0.5. V = 151,936 + 37 is not a multiple of 512.
TEST(CompareRows, DivergencesMatchQuadAtEveryNoiseLevel) {
  const Case cases[] = {{"1e-7", 1e-7f}, {"1e-5", 1e-5f}, {"1e-3", 1e-3f}, {"0.03", 0.03f}, {"0.3", 0.3f}, {"3", 3.0f}};
  const std::vector<float> a = random_row(151936 + 37, 11);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<float> b = perturb(a, c.noise, 12);
    const RowComparison r = run(a, b, 1234);
    const QuadStats q = quad_stats(a, b, 1234);
    expect_rel(r.kl_ab, q.kl_ab, 1e-9, "KL(A||B)");
    expect_rel(r.kl_ba, q.kl_ba, 1e-9, "KL(B||A)");
    expect_rel(r.jsd, q.jsd, 1e-9, "JSD");
    // dp = p (e^r - 1): its error is p times that of r, a few 1e-16 (delta is a rounded log).
    EXPECT_NEAR(r.dp_token, q.dp_token, 1e-15 * q.p_token + 1e-9 * std::fabs(q.dp_token));
    expect_rel(r.mean_abs, q.mean_abs, 1e-12, "mean |d|");
    expect_rel(r.rms_centered, q.rms_centered, 1e-12, "rms");
    EXPECT_GT(r.kl_ab, 0);
    EXPECT_GT(r.jsd, 0);
  }
}

TEST(CompareRows, OneUlpApartStillHasAccurateTinyDivergences) {
  // A few logits one ulp up: KL ~ 1e-17, far below what a naive sum p (log p - log q) resolves.
  const std::vector<float> a = random_row(5000, 3);
  std::vector<float> b = a;
  for (std::size_t j : {7u, 600u, 4999u}) b[j] = std::nextafter(b[j], kInfF);
  const RowComparison r = run(a, b);
  const QuadStats q = quad_stats(a, b, -1);
  EXPECT_GT(q.kl_ab, 0);
  expect_rel(r.kl_ab, q.kl_ab, 1e-6, "KL(A||B)");
  expect_rel(r.kl_ba, q.kl_ba, 1e-6, "KL(B||A)");
  expect_rel(r.jsd, q.jsd, 1e-6, "JSD");
  EXPECT_EQ(r.max_ulp, 1u);
  EXPECT_EQ(r.first_diff, 7);
  EXPECT_FALSE(r.bit_identical);
}

TEST(CompareRows, IdenticalRowsAreExactlyZero) {
  const std::vector<float> a = random_row(3000, 5);
  const RowComparison r = run(a, a, 17);
  EXPECT_TRUE(r.bit_identical);
  EXPECT_EQ(r.first_diff, -1);
  EXPECT_EQ(r.max_abs, 0);
  EXPECT_EQ(r.max_ulp, 0u);
  EXPECT_EQ(r.kl_ab, 0);
  EXPECT_EQ(r.kl_ba, 0);
  EXPECT_EQ(r.jsd, 0);
  EXPECT_EQ(r.dp_token, 0);
  EXPECT_EQ(r.top5_overlap, 1.0);
  EXPECT_EQ(r.top10_overlap, 1.0);
  EXPECT_EQ(r.argmax_a, r.argmax_b);
}

TEST(CompareRows, ShiftedRowIsTheSameDistribution) {
  // Softmax is shift-invariant: b = a + 1 (exact in f32 for these magnitudes) has KL 0 up to
  // rounding, and the centred RMS of d is 0 while max |d| is 1.
  std::vector<float> a(2000), b(2000);
  for (std::size_t j = 0; j < a.size(); ++j) {
    a[j] = static_cast<float>(static_cast<int>(j % 97) - 48) * 0.125f;
    b[j] = a[j] + 1.0f;
  }
  const RowComparison r = run(a, b);
  EXPECT_EQ(r.max_abs, 1.0);
  EXPECT_EQ(r.rms_centered, 0.0);
  EXPECT_LT(r.kl_ab, 1e-15);
  EXPECT_LT(r.jsd, 1e-15);
}

// ---- where things are --------------------------------------------------------------------------

TEST(CompareRows, NamesTheColumnsOfItsMaxima) {
  std::vector<float> a(1500, 0.0f), b(1500, 0.0f);
  a[1023] = 5.0f;  // argmax A (and a tie at 1400 that must lose: lowest index wins)
  a[1400] = 5.0f;
  b[511] = 6.0f;   // argmax B, on the last column of the first chunk
  b[512] = 0.25f;  // the largest |d| apart from 511 and 1023
  const RowComparison r = run(a, b, 1023);
  EXPECT_EQ(r.argmax_a, 1023);
  EXPECT_EQ(r.argmax_b, 511);
  EXPECT_EQ(r.max_abs, 6.0);
  EXPECT_EQ(r.max_abs_col, 511);
  EXPECT_EQ(r.first_diff, 511);
  // Token 1023 has logit 0 in B; above it: 511 (6), 512 (0.25); equal and lower-id: 0..510,
  // 513..1022 (all 0): rank = 2 + 511 + 510 + 1.
  EXPECT_EQ(r.rank_in_b, 2 + 511 + 510 + 1);
  // The largest ULP distance is 0 -> 6 (zero to a normal number).
  EXPECT_EQ(r.max_ulp, reference::ulp_distance_f32(0.0f, 6.0f));
  EXPECT_EQ(r.max_ulp_col, 511);
}

TEST(CompareRows, TopKOverlapCountsSharedIds) {
  std::vector<float> a(4000), b(4000);
  for (std::size_t j = 0; j < a.size(); ++j) a[j] = b[j] = -static_cast<float>(j) * 1e-3f;
  // A's top 10 is ids 0..9. In B, push ids 2 and 7 down below everything: B's top 10 becomes
  // 0,1,3,4,5,6,8,9,10,11; top 5: A {0..4}, B {0,1,3,4,5} -> 4 shared.
  b[2] = -100.0f;
  b[7] = -100.0f;
  const RowComparison r = run(a, b);
  EXPECT_DOUBLE_EQ(r.top10_overlap, 0.8);
  EXPECT_DOUBLE_EQ(r.top5_overlap, 0.8);
  EXPECT_EQ(r.argmax_a, 0);
  EXPECT_EQ(r.argmax_b, 0);
}

TEST(CompareRows, ChunkBordersDoNotMoveAnything) {
  // The same single difference at every column near chunk borders is found exactly there.
  const std::vector<float> a = random_row(2049, 9);
  for (Index col : {0, 510, 511, 512, 513, 1023, 1024, 2047, 2048}) {
    std::vector<float> b = a;
    b[static_cast<std::size_t>(col)] += 0.5f;
    const RowComparison r = run(a, b);
    EXPECT_EQ(r.first_diff, col);
    EXPECT_EQ(r.max_abs_col, col);
    EXPECT_EQ(r.max_ulp_col, col);
    const QuadStats q = quad_stats(a, b, -1);
    expect_rel(r.kl_ab, q.kl_ab, 1e-9, "KL");
  }
}

TEST(CompareRows, RelativeExcessPicksTheWorstColumn) {
  std::vector<float> a(1000, 100.0f), b(1000, 100.0f);
  a[10] = 1.0f;
  b[10] = 1.5f;     // |d| 0.5 against max |x| 1.5: excess 0.5 - 0.1 * 1.5 = 0.35
  b[900] = 100.9f;  // |d| 0.9 against 100.9: 0.9 - 10.09 < 0
  const RowComparison r = run(a, b, -1, 0.1);
  EXPECT_EQ(r.max_abs_col, 900);
  EXPECT_EQ(r.max_excess_col, 10);
  EXPECT_NEAR(r.max_excess, 0.35, 1e-12);
}

// ---- the careful path: NaN, +Inf, masked -Inf ----------------------------------------------------

TEST(CompareRows, NanOrInfinityMakesProbabilitiesUndefined) {
  const std::vector<float> a = random_row(1000, 1);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInfF}) {
    std::vector<float> b = a;
    b[600] = bad;
    const RowComparison r = run(a, b, 3);
    EXPECT_TRUE(r.nonfinite);
    EXPECT_TRUE(std::isnan(r.kl_ab));
    EXPECT_TRUE(std::isnan(r.jsd));
    EXPECT_EQ(r.max_ulp, reference::kUlpInfinite);
    EXPECT_EQ(r.max_ulp_col, 600);
    EXPECT_TRUE(std::isinf(r.max_excess));
    EXPECT_EQ(r.max_excess_col, 600);
    EXPECT_EQ(r.max_abs, 0);  // the finite pairs are identical
  }
}

TEST(CompareRows, AMaskedRowKeepsTheValuesOfItsFarthestPair) {
  // A row with one masked (-Inf) entry takes the careful path; it showed "1 ulps apart (0 vs
  // 0)" there (a reviewer's), where the fast path shows both values.
  std::vector<float> a = random_row(200, 4), b = a;
  a[7] = b[7] = -kInfF;
  b[3] = std::nextafter(a[3], kInfF);
  const RowComparison r = run(a, b, 3);
  EXPECT_EQ(r.max_ulp, 1u);
  EXPECT_EQ(r.max_ulp_col, 3);
  EXPECT_EQ(r.max_ulp_a, a[3]);
  EXPECT_EQ(r.max_ulp_b, b[3]);
}

TEST(CompareRows, IdenticalNansAreNoDistanceForAnyElementTest) {
  // Both builds' NaN at one place: bitwise passes it; ulp:N read it "infinitely many ulps"
  // apart and abs:A an infinite excess (a reviewer's). A NaN against a number still is.
  std::vector<float> a = random_row(300, 5), b = a;
  a[40] = b[40] = std::numeric_limits<float>::quiet_NaN();
  for (ElementTest::Kind kind : {ElementTest::Kind::kBits, ElementTest::Kind::kUlp, ElementTest::Kind::kAbs}) {
    ElementTest t;
    t.kind = kind;
    t.ulp = 4;
    t.abs = 1;
    CompareScratch sc;
    const RowComparison r = compare_rows(a.data(), b.data(), 300, 3, t, sc);
    EXPECT_EQ(r.violations, 0) << static_cast<int>(kind);
    EXPECT_EQ(r.max_ulp, 0u);
  }
  b[40] = 1.0f;
  ElementTest t;
  t.kind = ElementTest::Kind::kUlp;
  t.ulp = 4;
  CompareScratch sc;
  const RowComparison r = compare_rows(a.data(), b.data(), 300, 3, t, sc);
  EXPECT_EQ(r.violations, 1);
  EXPECT_EQ(r.max_ulp, reference::kUlpInfinite);
}

// Pass 1 counts special values only in chunks whose largest exponent field is all ones: one
// value in the last, partial chunk of a long row, or in a middle one, must still be found.
TEST(CompareRows, ASpecialValueInAnyChunkIsFound) {
  const Index V = 151936 + 37;
  const std::vector<float> a = random_row(V, 21);
  const std::vector<float> b = perturb(a, 1e-3f, 22);
  for (const Index col : {Index{0}, Index{70000}, V - 1}) {
    SCOPED_TRACE(col);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInfF}) {
      std::vector<float> bb = b;
      bb[static_cast<std::size_t>(col)] = bad;
      const RowComparison r = run(a, bb, 3);
      EXPECT_TRUE(r.nonfinite);
      EXPECT_FALSE(r.masked);
      EXPECT_TRUE(std::isnan(r.kl_ab));
    }
    std::vector<float> am = a, bm = b;  // masked in both: a masked row, still finite divergences
    am[static_cast<std::size_t>(col)] = -kInfF;
    bm[static_cast<std::size_t>(col)] = -kInfF;
    const RowComparison m = run(am, bm, 3);
    EXPECT_TRUE(m.masked);
    EXPECT_FALSE(m.nonfinite);
    const QuadStats q = quad_stats(am, bm, 3);
    expect_rel(m.kl_ab, q.kl_ab, 1e-9, "KL(A||B)");
  }
  // And a row of finite values with the largest finite exponent is not special.
  std::vector<float> big = a;
  big[5] = std::numeric_limits<float>::max();
  const RowComparison f = run(big, big, 3);
  EXPECT_FALSE(f.nonfinite);
  EXPECT_FALSE(f.masked);
  EXPECT_EQ(f.kl_ab, 0);
}

TEST(CompareRows, MaskedVocabularyCarriesNoProbability) {
  std::vector<float> a = random_row(3000, 2);
  for (std::size_t j = 100; j < 3000; j += 7) a[j] = -kInfF;
  std::vector<float> b = perturb(a, 1e-3f, 4);  // -inf + noise stays -inf: same mask
  const RowComparison r = run(a, b, 5);
  EXPECT_TRUE(r.masked);
  EXPECT_FALSE(r.nonfinite);
  const QuadStats q = quad_stats(a, b, 5);
  expect_rel(r.kl_ab, q.kl_ab, 1e-9, "KL(A||B)");
  expect_rel(r.kl_ba, q.kl_ba, 1e-9, "KL(B||A)");
  expect_rel(r.jsd, q.jsd, 1e-9, "JSD");
  EXPECT_LT(r.max_ulp, reference::kUlpInfinite);
  // Unmask one entry in B only: A gives it probability 0, B does not, so KL(B||A) = inf while
  // KL(A||B) stays finite, and the JSD is still finite (bounded by log 2).
  std::vector<float> c = b;
  c[100] = 0.0f;
  const RowComparison m = run(a, c, 5);
  EXPECT_TRUE(std::isinf(m.kl_ba));
  EXPECT_TRUE(std::isfinite(m.kl_ab));
  EXPECT_TRUE(std::isfinite(m.jsd));
  EXPECT_EQ(m.max_ulp, reference::kUlpInfinite);
  EXPECT_EQ(m.max_ulp_col, 100);
}

}  // namespace
}  // namespace ncert::certify
