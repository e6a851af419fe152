#include "certify/logits/row_compare.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "certify/logits/detail/fast_exp.h"
#include "certify/logits/detail/row_compare_paths.h"
#include "certify/logits/detail/simd_max.h"
#include "reference/float_bits.h"

// Layout of the fast path (rows without NaN, +-Inf): three passes over chunks of 512 columns,
// each chunk's data in L1 while it is worked on.
//   1  f32: row maxima (and per-chunk maxima), ULP maxima, the token's rank in B, whether a
//      chunk holds a special value; f64: each chunk's largest and smallest d = b - a, from
//      which every later "max |d - c| over the chunk" is read instead of computed by a pass
//   2  f64: exp(a - max a), exp(b - max b) into scratch, softmax sums, |d| sums
//   3  f64: KL(P||Q), KL(Q||P) through phi, JSD through psi(tanh(r/2)), the centred variance
// Two passes that did nothing but find such maxima (before 2 and before 3) were 15 % of
// compare's CPU on a Xeon (2 x 2048 rows of 151,936: 0.86 -> 0.79 s with them gone).
// Argmax, top-k and the column of each maximum are then found by scanning only the chunks
// whose maximum can hold them. This file may contract a*b+c into FMA (CMakeLists.txt): it
// computes statistics, not emulated bits, and stays deterministic for a given binary.

namespace ncert::certify {

namespace {

using detail::kInf;
using detail::kPosInfF;
using detail::tanh_half_small;

constexpr Index kChunk = 512;
constexpr std::uint32_t kExpMask = 0x7F800000u;  // an f32's exponent field: all ones for inf and NaN

/// The distance in ulps of x and y, in 32-bit lanes: the bit patterns become keys in the
/// floats' order (both zeros 2^31, negatives mirrored below it), which lie in [1, 2^32 - 1], so
/// |kx - ky| fits an unsigned 32-bit integer exactly (at most 2^32 - 2).
inline std::uint32_t ulps32(float x, float y) {
  const std::uint32_t ux = std::bit_cast<std::uint32_t>(x), uy = std::bit_cast<std::uint32_t>(y);
  const std::uint32_t kx = (ux & 0x80000000u) ? 0x80000000u - (ux & 0x7FFFFFFFu) : 0x80000000u + ux;
  const std::uint32_t ky = (uy & 0x80000000u) ? 0x80000000u - (uy & 0x7FFFFFFFu) : 0x80000000u + uy;
  return kx > ky ? kx - ky : ky - kx;  // biased keys: same order, same differences
}

// ---- series ------------------------------------------------------------------------------------

inline constexpr double kPhiCoef[] = {1.0 / 2,
                                      1.0 / 6,
                                      1.0 / 24,
                                      1.0 / 120,
                                      1.0 / 720,
                                      1.0 / 5040,
                                      1.0 / 40320,
                                      1.0 / 362880,
                                      1.0 / 3628800,
                                      1.0 / 39916800,
                                      1.0 / 479001600,
                                      1.0 / 6227020800.0,
                                      1.0 / 87178291200.0,
                                      1.0 / 1307674368000.0,
                                      1.0 / 20922789888000.0};  // 1/2! .. 1/16!
inline constexpr double kPsiCoef[] = {1.0 / 2,   1.0 / 12,  1.0 / 30,  1.0 / 56,  1.0 / 90,  1.0 / 132,
                                      1.0 / 182, 1.0 / 240, 1.0 / 306, 1.0 / 380, 1.0 / 462, 1.0 / 552};

// phi(x) = expm1(x) - x = sum_{k>=2} x^k / k!, N terms; psi(t) = sum_{n>=1} t^(2n)/(2n(2n-1)).
// Horner with the degree fixed at compile time, so the calling loops vectorize.
// T is double or Lanes (below): the same Horner steps, one element or eight at once.
template <int N, typename T = double>
inline T phi_fixed(T x) {
  T p = T{} + kPhiCoef[N - 1];  // T{} + c: c in every lane
  for (int i = N - 2; i >= 0; --i) p = p * x + kPhiCoef[i];
  return p * x * x;
}

template <int N, typename T = double>
inline T psi_fixed(T t) {
  const T u = t * t;
  T p = T{} + kPsiCoef[N - 1];
  for (int i = N - 2; i >= 0; --i) p = p * u + kPsiCoef[i];
  return p * u;
}

// Terms of phi for |x| <= m such that the first omitted term, relative to x^2/2, is
// 2 m^n / (n+2)! < 2^-55 = 2.8e-17:
//   m = 1e-4: n = 4 (2.8e-19);  1e-2: n = 7 (5.5e-20);  0.1: n = 10 (4.2e-19);  0.5: n = 15 (1.7e-19).
int phi_terms(double m) {
  if (m <= 1e-4) return 4;
  if (m <= 1e-2) return 7;
  if (m <= 0.1) return 10;
  return 15;
}

// Terms of psi in t^2 for |t| <= m: the first omitted term relative to t^2/2 is
// 2 m^(2n) / ((2n+2)(2n+1)) < 2^-55:  m = 1e-4: n = 2;  1e-2: n = 4;  0.1: n = 8;  0.25: n = 12.
int psi_terms(double m) {
  if (m <= 1e-4) return 2;
  if (m <= 1e-2) return 4;
  if (m <= 0.1) return 8;
  return 12;
}

// Explicit lanes: kLanes independent accumulators per sum, added in a fixed order at the end,
// as one vector of eight doubles (GCC and clang vector extensions: one zmm register with
// AVX-512, two ymm with AVX2; the lanes and their order are the same either way). Measured per
// row pair (V = 151,936, AVX-512): the fused pass 3 under `omp simd reduction` kept its
// per-lane arrays in memory (1.7 ms in all, against 0.56 ms with lanes); a lane array of
// doubles that GCC 12's SLP vectorizer turned into vector code ran in ymm halves (pass 3 was
// 32 % of compare's time on a Xeon, 2026-12-04); the vector type puts it in whole zmm
// registers. Pass 2 is the other way round (0.69 ms with lanes, 0.56 ms with `omp simd`).
constexpr int kLanes = 8;
using Lanes = double __attribute__((vector_size(kLanes * sizeof(double))));
using LanesF = float __attribute__((vector_size(kLanes * sizeof(float))));

inline double lane_sum(const Lanes& s) { return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); }

/// Eight consecutive elements (no alignment needed).
inline Lanes load_lanes(const double* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline Lanes load_lanes(const float* p) {
  LanesF v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, Lanes);
}

// ---- pass 2 kernel -----------------------------------------------------------------------------

struct Pass2Sums {
  double sa = 0, sb = 0, ca = 0, cb = 0, s1 = 0, s2 = 0;
};

/// One chunk of pass 2. N > 0: exp(b - mb) = exp(a - ma) * exp(z), z = d - (mb - ma), with
/// exp(z) = 1 + z + phi_N(z) (phi_terms' truncation rule for the chunk's max |z|); N = 0: the
/// full exponential.
template <int N>
void pass2_chunk(const float* a, const float* b, Index n, double dma, double dmb, double* pa, double* pb,
                 Pass2Sums& out) {
  double sa = 0, sb = 0, ca = 0, cb = 0, s1 = 0, s2 = 0;
  const double shift = dmb - dma;
#pragma omp simd reduction(+ : sa, sb, ca, cb, s1, s2)
  for (Index i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    const double d = y - x;
    const double ad = std::fabs(d);
    const double ea = detail::exp_nonpositive(x - dma);
    double eb;
    if constexpr (N > 0) {
      const double z = d - shift;
      // Written so that z = 0 gives eb == ea exactly, contracted or not (identical rows then
      // have identical sums and exactly zero divergences).
      eb = ea + ea * (z + phi_fixed<N>(z));
    } else {
      eb = detail::exp_nonpositive(y - dmb);
    }
    pa[i] = ea;
    pb[i] = eb;
    sa += ea;
    sb += eb;
    ca += ea * d;
    cb += eb * d;
    s1 += ad;
    s2 += d;
  }
  out = Pass2Sums{sa, sb, ca, cb, s1, s2};
}

void pass2_by_terms(double mz, const float* a, const float* b, Index n, double dma, double dmb, double* pa, double* pb,
                    Pass2Sums& out) {
  if (mz > 0.1)
    pass2_chunk<0>(a, b, n, dma, dmb, pa, pb, out);
  else if (mz > 1e-2)
    pass2_chunk<10>(a, b, n, dma, dmb, pa, pb, out);
  else if (mz > 1e-4)
    pass2_chunk<7>(a, b, n, dma, dmb, pa, pb, out);
  else
    pass2_chunk<4>(a, b, n, dma, dmb, pa, pb, out);
}

/// max_j |d_j| - rel max(|a_j|, |b_j|) over one chunk (abs,rel policies only).
double excess_chunk(const float* a, const float* b, Index n, double rel) {
  double me = -kInf;
#pragma omp simd reduction(max : me)
  for (Index i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    const double ex = std::fabs(y - x) - rel * std::max(std::fabs(x), std::fabs(y));
    me = ex > me ? ex : me;
  }
  return me;
}

// ---- pass 3 kernels ----------------------------------------------------------------------------

struct Pass3Args {
  const float* a;
  const float* b;
  Index n;
  const double* ea;  // exp(a - ma), exp(b - mb) from pass 2
  const double* eb;
  double cp, cq, delta, ia, ib, mean;
};

struct Pass3Sums {
  double kl_p = 0, kl_q = 0, js = 0;  // sum ea phi(d - c_p), sum eb phi(c_q - d), sum (p + q) psi(t)
  double var = 0;                     // sum (d - mean)^2
};

/// Both series apply to the whole chunk: one vectorized loop.
template <int NPhi, int NPsi>
void pass3_fused(const Pass3Args& x, Pass3Sums& out) {
  Lanes s1 = {}, s2 = {}, s3 = {}, s4 = {};
  Index i = 0;
  for (; i + kLanes <= x.n; i += kLanes) {
    const Lanes d = load_lanes(x.b + i) - load_lanes(x.a + i);
    const Lanes ea = load_lanes(x.ea + i), eb = load_lanes(x.eb + i);
    s1 += ea * phi_fixed<NPhi>(d - x.cp);
    s2 += eb * phi_fixed<NPhi>(x.cq - d);
    s3 += (ea * x.ia + eb * x.ib) * psi_fixed<NPsi>(tanh_half_small(d - x.delta));
    s4 += (d - x.mean) * (d - x.mean);
  }
  for (int l = 0; i < x.n; ++i, ++l) {
    const double d = static_cast<double>(x.b[i]) - static_cast<double>(x.a[i]);
    s1[l] += x.ea[i] * phi_fixed<NPhi>(d - x.cp);
    s2[l] += x.eb[i] * phi_fixed<NPhi>(x.cq - d);
    s3[l] += (x.ea[i] * x.ia + x.eb[i] * x.ib) * psi_fixed<NPsi>(tanh_half_small(d - x.delta));
    s4[l] += (d - x.mean) * (d - x.mean);
  }
  out = Pass3Sums{lane_sum(s1), lane_sum(s2), lane_sum(s3), lane_sum(s4)};
}

template <int NPhi>
void pass3_fused_psi(int psi_n, const Pass3Args& x, Pass3Sums& out) {
  if (psi_n <= 2)
    pass3_fused<NPhi, 2>(x, out);
  else
    pass3_fused<NPhi, 4>(x, out);
}

/// Dispatch on the term counts phi_terms and psi_terms chose (psi: 2 or 4 for |t| <= 0.01).
void pass3_series(int phi_n, int psi_n, const Pass3Args& x, Pass3Sums& out) {
  switch (phi_n) {
    case 4:
      pass3_fused_psi<4>(psi_n, x, out);
      break;
    case 7:
      pass3_fused_psi<7>(psi_n, x, out);
      break;
    case 10:
      pass3_fused_psi<10>(psi_n, x, out);
      break;
    default:
      pass3_fused_psi<15>(psi_n, x, out);
      break;
  }
}

/// A chunk where a series does not cover every element (large differences): element by element,
/// phi and psi pick series or logs; t = (q - p) / (q + p) loses nothing once |r| > 0.02.
void pass3_general(const Pass3Args& x, Pass3Sums& out) {
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (Index i = 0; i < x.n; ++i) {
    const double d = static_cast<double>(x.b[i]) - static_cast<double>(x.a[i]);
    s4 += (d - x.mean) * (d - x.mean);
    s1 += x.ea[i] * phi(d - x.cp);
    s2 += x.eb[i] * phi(x.cq - d);
    const double p = x.ea[i] * x.ia, q = x.eb[i] * x.ib;
    const double rr = d - x.delta;
    const double t = std::fabs(rr) <= 0.02 ? tanh_half_small(rr) : (q - p) / (q + p);
    s3 += (p + q) * psi(t);
  }
  out = Pass3Sums{s1, s2, s3, s4};
}

// ---- small searches ------------------------------------------------------------------------------

/// First j in [begin, end) with pred(j).
template <typename Pred>
Index find_in(Index begin, Index end, Pred pred) {
  for (Index j = begin; j < end; ++j) {
    if (pred(j)) return j;
  }
  return -1;
}

/// Top-k (k <= 10) indices of a row by value descending, index ascending, looking only at the
/// chunks whose maximum reaches the k-th largest chunk maximum (the top-k elements all lie in
/// those chunks: each of them is >= the k-th largest element >= the k-th largest chunk max).
void top_k(const float* row, Index n, const std::vector<float>& chunk_max, int k, std::array<Index, 10>& out) {
  std::vector<float> sorted = chunk_max;
  const std::size_t kk = std::min<std::size_t>(static_cast<std::size_t>(k), sorted.size());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(kk - 1), sorted.end(),
                   std::greater<float>());
  const float threshold = sorted[kk - 1];
  std::array<float, 10> v;
  v.fill(-std::numeric_limits<float>::infinity());
  out.fill(-1);
  int filled = 0;
  for (std::size_t c = 0; c < chunk_max.size(); ++c) {
    if (chunk_max[c] < threshold) continue;
    const Index end = std::min<Index>(n, static_cast<Index>(c + 1) * kChunk);
    for (Index j = static_cast<Index>(c) * kChunk; j < end; ++j) {
      const float x = row[j];
      if (filled == k && !(x > v[k - 1])) continue;  // equal values keep the lower index
      int pos = filled < k ? filled : k - 1;
      while (pos > 0 && x > v[pos - 1]) {
        v[pos] = v[pos - 1];
        out[pos] = out[pos - 1];
        --pos;
      }
      v[pos] = x;
      out[pos] = j;
      if (filled < k) ++filled;
    }
  }
}

double overlap(const std::array<Index, 10>& x, const std::array<Index, 10>& y, int k) {
  int hit = 0;
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) hit += x[i] >= 0 && x[i] == y[j];
  }
  return static_cast<double>(hit) / k;
}

/// The first column of the first chunk whose per-chunk value equals `target`.
template <typename Pred>
Index locate(const std::vector<double>& chunk_vals, double target, Index n, Pred pred) {
  for (std::size_t c = 0; c < chunk_vals.size(); ++c) {
    if (chunk_vals[c] != target) continue;
    const Index j =
        find_in(static_cast<Index>(c) * kChunk, std::min<Index>(n, static_cast<Index>(c + 1) * kChunk), pred);
    if (j >= 0) return j;
  }
  return -1;
}

}  // namespace

double phi(double x) { return std::fabs(x) <= 0.5 ? phi_fixed<15>(x) : std::expm1(x) - x; }

double psi(double t) {
  if (std::fabs(t) <= 0.25) return psi_fixed<12>(t);
  if (t >= 1.0 || t <= -1.0) return std::log(2.0);
  return 0.5 * ((1 + t) * std::log1p(t) + (1 - t) * std::log1p(-t));
}

namespace {

/// Pass 1 over f32 lanes: row and chunk maxima, special values, ULP maxima per chunk and the
/// token's rank in B.
struct RowMaxima {
  float ma = -kPosInfF, mb = -kPosInfF;
  std::vector<float> cmax_a, cmax_b;
  std::vector<double> c_ulp;
  /// Per chunk, the largest and smallest d = b - a (in f64, as every pass computes it): every maximum
  /// of |d - c| over a chunk that passes 2 and 3 need is max(|dmax - c|, |dmin - c|), exactly
  /// (rounding is monotonic), so no pass reads the chunk only to find one.
  std::vector<double> c_dmax, c_dmin;
  std::int32_t special = 0, masked = 0;
  Index above = 0;       ///< entries of B ranked above the token
  Index violations = 0;  ///< elements differing in bits, or more than test.ulp ulps apart
};

RowMaxima pass1(const float* a, const float* b, Index V, std::int32_t token, const ElementTest& test) {
  RowMaxima m;
  const Index nchunks = (V + kChunk - 1) / kChunk;
  m.cmax_a.resize(static_cast<std::size_t>(nchunks));
  m.cmax_b.resize(static_cast<std::size_t>(nchunks));
  m.c_ulp.resize(static_cast<std::size_t>(nchunks));
  m.c_dmax.resize(static_cast<std::size_t>(nchunks));
  m.c_dmin.resize(static_cast<std::size_t>(nchunks));
  const float bt = (token >= 0 && token < V) ? b[token] : 0.0f;
  const bool bits_test = test.kind == ElementTest::Kind::kBits, ulp_test = test.kind == ElementTest::Kind::kUlp;
  // An ulp limit beyond 32 bits (kUlpInfinite) is never exceeded by a 32-bit distance.
  const std::uint32_t ulp_limit = static_cast<std::uint32_t>(std::min<std::uint64_t>(test.ulp, 0xFFFFFFFFu));
  for (Index c = 0; c < nchunks; ++c) {
    const Index j0 = c * kChunk, n = std::min(kChunk, V - j0);
    float xa = -kPosInfF, xb = -kPosInfF;
    std::int32_t sp = 0, mk = 0, ab = 0, nv = 0;
    std::uint32_t mu = 0, ef = 0;
    double dx = -kInf, dn = kInf;
    // The common case, finite rows, in as few operations as it needs: the largest exponent field
    // says whether the chunk holds a non-finite value (all ones), and only then are NaN, +inf
    // and -inf counted; only the bits and ulp policies count violations.
#pragma omp simd reduction(max : xa, xb, mu, ef, dx) reduction(min : dn)
    for (Index i = 0; i < n; ++i) {
      const float x = a[j0 + i], y = b[j0 + i];
      xa = x > xa ? x : xa;
      xb = y > xb ? y : xb;
      const double d = static_cast<double>(y) - static_cast<double>(x);
      dx = d > dx ? d : dx;
      dn = d < dn ? d : dn;
      const std::uint32_t e =
          std::max(std::bit_cast<std::uint32_t>(x) & kExpMask, std::bit_cast<std::uint32_t>(y) & kExpMask);
      ef = e > ef ? e : ef;
      const std::uint32_t u = ulps32(x, y);
      mu = u > mu ? u : mu;
    }
    if (ef == kExpMask) {
#pragma omp simd reduction(+ : sp, mk)
      for (Index i = 0; i < n; ++i) {
        const float x = a[j0 + i], y = b[j0 + i];
        sp += (x != x ? 1 : 0) + (y != y ? 1 : 0) + (x == kPosInfF ? 1 : 0) + (y == kPosInfF ? 1 : 0);
        mk += (x == -kPosInfF ? 1 : 0) + (y == -kPosInfF ? 1 : 0);
      }
    }
    if (bits_test || ulp_test) {
#pragma omp simd reduction(+ : nv)
      for (Index i = 0; i < n; ++i) {
        const float x = a[j0 + i], y = b[j0 + i];
        nv += (bits_test && std::bit_cast<std::uint32_t>(x) != std::bit_cast<std::uint32_t>(y)) ||
                      (ulp_test && ulps32(x, y) > ulp_limit)
                  ? 1
                  : 0;
      }
    }
    m.violations += nv;
    // The token's rank in B: values above b[token], and equal values at lower ids.
    if (j0 + n <= token) {
#pragma omp simd reduction(+ : ab)
      for (Index i = 0; i < n; ++i) ab += b[j0 + i] >= bt ? 1 : 0;
    } else if (j0 >= token) {
#pragma omp simd reduction(+ : ab)
      for (Index i = 0; i < n; ++i) ab += b[j0 + i] > bt ? 1 : 0;
    } else {
      for (Index i = 0; i < n; ++i) ab += (b[j0 + i] > bt || (b[j0 + i] == bt && j0 + i < token)) ? 1 : 0;
    }
    m.cmax_a[static_cast<std::size_t>(c)] = detail::simd_max_result(xa, a + j0, n);
    m.cmax_b[static_cast<std::size_t>(c)] = detail::simd_max_result(xb, b + j0, n);
    m.c_ulp[static_cast<std::size_t>(c)] = mu;
    m.c_dmax[static_cast<std::size_t>(c)] = dx;
    m.c_dmin[static_cast<std::size_t>(c)] = dn;
    m.ma = std::max(m.ma, xa);
    m.mb = std::max(m.mb, xb);
    m.special += sp;
    m.masked += mk;
    m.above += ab;
  }
  return m;
}

/// max |d - c| over chunk `c` of the row pair, from pass 1's extremes of d: the same value a
/// pass over the chunk computes, since d - c rounds monotonically in d.
double max_abs_offset(const RowMaxima& m, Index c, double center) {
  const auto k = static_cast<std::size_t>(c);
  return std::max(std::fabs(m.c_dmax[k] - center), std::fabs(m.c_dmin[k] - center));
}

/// What pass 2 sums for pass 3: the softmax sums and first moments of d.
struct SoftmaxSums {
  double sa = 0, sb = 0, ca = 0, cb = 0, mean = 0;
};

/// Pass 2 in f64: exp(a - max a), exp(b - max b) into scratch, softmax sums, |d| sums and
/// maxima, the relative excess, and where each maximum is.
/// Elements whose |d| - rel max(|a|, |b|) exceeds abs (the abs:A[,rel:R] policy).
Index count_excess(const float* a, const float* b, Index n, double abs, double rel) {
  Index k = 0;
#pragma omp simd reduction(+ : k)
  for (Index i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    k += std::fabs(y - x) - rel * std::max(std::fabs(x), std::fabs(y)) > abs ? 1 : 0;
  }
  return k;
}

SoftmaxSums pass2(const float* a, const float* b, Index V, const ElementTest& test, const RowMaxima& m,
                  CompareScratch& sc, RowComparison& r) {
  const double rel = test.rel;
  const Index nchunks = static_cast<Index>(m.cmax_a.size());
  sc.ea.resize(static_cast<std::size_t>(V));
  sc.eb.resize(static_cast<std::size_t>(V));
  std::vector<double> c_abs(static_cast<std::size_t>(nchunks)), c_exc(static_cast<std::size_t>(nchunks));
  const double dma = m.ma, dmb = m.mb;
  SoftmaxSums s;
  double sabs = 0, sd = 0;
  for (Index c = 0; c < nchunks; ++c) {
    const Index j0 = c * kChunk, n = std::min(kChunk, V - j0);
    // exp(b - mb) = exp(a - ma) * exp(z), z = d - (mb - ma): for similar rows z is tiny and
    // exp(z) = 1 + z + phi(z) is a short series (phi_terms' truncation rule); chunks where it
    // is not take the full exponential.
    const double mz = max_abs_offset(m, c, dmb - dma);
    Pass2Sums t;
    pass2_by_terms(mz, a + j0, b + j0, n, dma, dmb, sc.ea.data() + j0, sc.eb.data() + j0, t);
    c_abs[static_cast<std::size_t>(c)] = max_abs_offset(m, c, 0.0);  // max |d|
    // With no relative term the excess is |d| itself.
    c_exc[static_cast<std::size_t>(c)] =
        rel > 0 ? excess_chunk(a + j0, b + j0, n, rel) : c_abs[static_cast<std::size_t>(c)];
    if (test.kind == ElementTest::Kind::kAbs) r.violations += count_excess(a + j0, b + j0, n, test.abs, rel);
    s.sa += t.sa;
    s.sb += t.sb;
    s.ca += t.ca;
    s.cb += t.cb;
    sabs += t.s1;
    sd += t.s2;
  }
  r.max_abs = *std::max_element(c_abs.begin(), c_abs.end());
  r.max_ulp = static_cast<std::uint64_t>(*std::max_element(m.c_ulp.begin(), m.c_ulp.end()));
  r.max_excess = *std::max_element(c_exc.begin(), c_exc.end());
  r.mean_abs = sabs / static_cast<double>(V);
  s.mean = sd / static_cast<double>(V);
  auto absd = [&](Index j) { return std::fabs(static_cast<double>(b[j]) - static_cast<double>(a[j])); };
  r.max_abs_col = locate(c_abs, r.max_abs, V, [&](Index j) { return absd(j) == r.max_abs; });
  if (r.max_ulp > 0) {
    r.max_ulp_col =
        locate(m.c_ulp, static_cast<double>(r.max_ulp), V, [&](Index j) { return ulps32(a[j], b[j]) == r.max_ulp; });
    if (r.max_ulp_col >= 0) {
      r.max_ulp_a = a[r.max_ulp_col];
      r.max_ulp_b = b[r.max_ulp_col];
    }
  }
  r.max_excess_col = rel > 0 ? locate(c_exc, r.max_excess, V,
                                      [&](Index j) {
                                        return absd(j) - rel * std::max(std::fabs(static_cast<double>(a[j])),
                                                                        std::fabs(static_cast<double>(b[j]))) ==
                                               r.max_excess;
                                      })
                             : r.max_abs_col;
  return s;
}

/// Pass 3: KL both ways, JSD and the centred variance. c_p = E_p[d], c_q = E_q[d];
/// KL(P||Q) = log1p(E_p[phi(d - c_p)]), KL(Q||P) = log1p(E_q[phi(c_q - d)]): every summand >= 0,
/// no cancellation (docs/error-bounds.md §7). JSD = 1/2 sum (p + q) psi(tanh(r/2)) with
/// r = log q - log p = d - delta, where delta = (mb - ma) + log(SB / SA) is known from pass 2,
/// so one pass does all three.
void pass3(const float* a, const float* b, Index V, std::int32_t token, const RowMaxima& m, const SoftmaxSums& s,
           const CompareScratch& sc, RowComparison& r) {
  const Index nchunks = static_cast<Index>(m.cmax_a.size());
  const double cp = s.ca / s.sa, cq = s.cb / s.sb;
  const double delta = (static_cast<double>(m.mb) - static_cast<double>(m.ma)) + std::log(s.sb / s.sa);
  const double ia = 1.0 / s.sa, ib = 1.0 / s.sb;
  double sum_p = 0, sum_q = 0, var = 0, js = 0;
  for (Index c = 0; c < nchunks; ++c) {
    const Index j0 = c * kChunk, n = std::min(kChunk, V - j0);
    // The phi arguments' and the log-ratio's largest magnitudes choose the series.
    const double m_kl = std::max(max_abs_offset(m, c, cp), max_abs_offset(m, c, cq));
    const double m_js = max_abs_offset(m, c, delta);
    Pass3Sums t;
    const Pass3Args x{a + j0, b + j0, n, sc.ea.data() + j0, sc.eb.data() + j0, cp, cq, delta, ia, ib, s.mean};
    if (m_kl <= 0.5 && m_js <= 0.02)
      pass3_series(phi_terms(m_kl), psi_terms(0.5 * m_js), x, t);
    else
      pass3_general(x, t);
    var += t.var;
    sum_p += t.kl_p;
    sum_q += t.kl_q;
    js += t.js;
  }
  r.rms_centered = std::sqrt(var / static_cast<double>(V));
  r.kl_ab = std::log1p(sum_p / s.sa);
  r.kl_ba = std::log1p(sum_q / s.sb);
  r.jsd = 0.5 * js;
  // q - p = p expm1(r): no cancellation when the two are close.
  if (token >= 0 && token < V) {
    r.dp_token =
        sc.ea[static_cast<std::size_t>(token)] * ia * std::expm1((static_cast<double>(b[token]) - a[token]) - delta);
  }
}

}  // namespace

RowComparison compare_rows(const float* a, const float* b, Index V, std::int32_t token, const ElementTest& test,
                           CompareScratch& sc) {
  RowComparison r;
  const RowMaxima m = pass1(a, b, V, token, test);
  if (test.kind != ElementTest::Kind::kAbs) r.violations = m.violations;
  const Index nchunks = static_cast<Index>(m.cmax_a.size());
  if (token >= 0 && token < V) r.rank_in_b = m.above + 1;
  // Bit patterns on purpose: -0 and +0, and NaNs of different payloads, are not bit-identical.
  // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
  r.bit_identical = std::memcmp(a, b, static_cast<std::size_t>(V) * 4) == 0;
  if (!r.bit_identical) {
    r.first_diff = find_in(
        0, V, [&](Index j) { return std::bit_cast<std::uint32_t>(a[j]) != std::bit_cast<std::uint32_t>(b[j]); });
  }
  auto first_of = [&](const float* row, const std::vector<float>& cmax, float mx) {
    for (Index c = 0; c < nchunks; ++c) {
      if (cmax[static_cast<std::size_t>(c)] == mx) {
        const Index j = find_in(c * kChunk, std::min(V, (c + 1) * kChunk), [&](Index i) { return row[i] == mx; });
        if (j >= 0) return j;
      }
    }
    return Index{-1};
  };
  r.argmax_a = first_of(a, m.cmax_a, m.ma);
  r.argmax_b = first_of(b, m.cmax_b, m.mb);
  r.nonfinite = m.special > 0;
  r.masked = m.masked > 0;
  if (r.nonfinite || r.masked) {
    detail::careful_path(a, b, V, token, test, m.ma, m.mb, r);
  } else {
    const SoftmaxSums s = pass2(a, b, V, test, m, sc, r);
    pass3(a, b, V, token, m, s, sc, r);
  }
  // ---- top-k overlaps (only the chunks that can hold a top-10 element are read) ----
  std::array<Index, 10> ta, tb;
  top_k(a, V, m.cmax_a, 10, ta);
  top_k(b, V, m.cmax_b, 10, tb);
  r.top10_overlap = overlap(ta, tb, 10);
  r.top5_overlap = overlap(ta, tb, 5);
  return r;
}

}  // namespace ncert::certify
