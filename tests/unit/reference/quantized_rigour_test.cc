// Dump format v2's new terms against independent arithmetic (docs/error-bounds.md §6b, §4):
// quantized activations ((q - zp) * s in place of x) and scaled int8 / FP8 weights (q * s on a
// grid of scale_rows x group_size), with f32 and f16 outputs. For each problem
//  - y* equals a long double oracle of sum (q - zp) s w (every product exact) within the f64
//    GEMM's own error, (K + 2) 2^-53 S;
//  - the outputs of every kernel such an engine may run lie inside the accepted intervals: an
//    integer kernel summing each group's code products and scaling the sum, kernels that
//    dequantize activations (and weights) to f32 first with separate or fused multiplies, and a
//    pairwise order; zero false failures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/bound_stats.h"
#include "reference/k_walk.h"
#include "reference/linear.h"
#include "reference/narrow_float.h"

namespace ncert::reference {
namespace {

struct Case {
  std::string name;
  Index m = 3, k = 256, n = 12;
  XQuantType quant = XQuantType::kInt8;
  Index group = 32;
  XQuantRounding rounding = XQuantRounding::kNearestEven;
  bool zero_points = false;
  DType output = DType::kF32;
  double x_mean = 0;
  std::uint64_t seed = 1;
};

/// Everything one problem owns, with the plain values the oracle and the engines read.
struct Owned {
  Case c;
  std::vector<float> x;             // M x K
  std::vector<std::uint8_t> codes;  // M x K quantized activations (raw bytes)
  std::vector<float> x_scales;      // M x K/group
  std::vector<std::uint8_t> x_zp;   // M x K/group (uint8 only)
  std::vector<double> x_tilde;      // (q - zp) * s, exact
  // Weights: rows [0, n/3) f32, [n/3, 2n/3) int8 per channel (f32 scales, exact),
  // [2n/3, n) e4m3 in 2 x 64 blocks (f16 scales, dequant f32).
  std::vector<float> w_f32;
  std::vector<std::uint8_t> w_int8, w_e4m3;
  std::vector<float> s_int8;
  std::vector<std::uint16_t> s_e4m3;  // f16 patterns
  Weights weights;
  LinearProblem problem;
};

double code_value(XQuantType t, std::uint8_t b) {
  if (t == XQuantType::kInt8) return static_cast<std::int8_t>(b);
  if (t == XQuantType::kUint8) return b;
  return narrow_decode(t == XQuantType::kE4m3 ? kE4m3Format : kE5m2Format, b);
}

std::unique_ptr<Owned> make(const Case& c) {
  auto o = std::make_unique<Owned>();
  o->c = c;
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<double> nd;
  const Index M = c.m, K = c.k, N = c.n, G = K / c.group;
  o->x.resize(M * K);
  for (auto& v : o->x) v = static_cast<float>(c.x_mean + nd(rng));
  o->codes.resize(M * K);
  o->x_scales.resize(M * G);
  o->x_tilde.resize(M * K);
  if (c.zero_points) o->x_zp.resize(M * G);
  const bool integer = c.quant == XQuantType::kInt8 || c.quant == XQuantType::kUint8;
  const double qmax = integer ? 127 : c.quant == XQuantType::kE4m3 ? 448 : 57344;
  for (Index r = 0; r < M; ++r) {
    for (Index g = 0; g < G; ++g) {
      float lo = 1e30f, hi = -1e30f;
      for (Index k = g * c.group; k < (g + 1) * c.group; ++k) {
        lo = std::min(lo, o->x[r * K + k]);
        hi = std::max(hi, o->x[r * K + k]);
      }
      // Symmetric: s = amax / qmax; asymmetric uint8: s = (hi - lo) / 255, zp = round(-lo / s).
      float s = static_cast<float>(std::max(std::fabs(lo), std::fabs(hi)) / qmax);
      double zp = 0;
      if (c.zero_points) {
        s = (std::max(hi, 0.0f) - std::min(lo, 0.0f)) / 255.0f;
        zp = std::clamp(std::nearbyint(-static_cast<double>(std::min(lo, 0.0f)) / s), 0.0, 255.0);
        o->x_zp[r * G + g] = static_cast<std::uint8_t>(zp);
      }
      o->x_scales[r * G + g] = s;
      for (Index k = g * c.group; k < (g + 1) * c.group; ++k) {
        const float t = o->x[r * K + k] * (1.0f / s);  // the engine's f32 quotient
        std::uint8_t b = 0;
        if (integer) {
          const double rt = c.rounding == XQuantRounding::kNearestEven ? std::nearbyint(t) : std::round(t);
          const double q =
              c.quant == XQuantType::kInt8 ? std::clamp(rt, -128.0, 127.0) : std::clamp(rt + zp, 0.0, 255.0);
          b = static_cast<std::uint8_t>(static_cast<int>(q) & 0xFF);
        } else {
          b = static_cast<std::uint8_t>(narrow_round(c.quant == XQuantType::kE4m3 ? kE4m3Format : kE5m2Format, t,
                                                     NarrowRounding::kNearestEven, NarrowOverflow::kSaturate));
        }
        o->codes[r * K + k] = b;
        o->x_tilde[r * K + k] = (code_value(c.quant, b) - zp) * static_cast<double>(s);
      }
    }
  }
  const Index third = N / 3;
  o->w_f32.resize(third * K);
  for (auto& v : o->w_f32) v = static_cast<float>(0.02 * nd(rng));
  o->w_int8.resize(third * K);
  o->s_int8.resize(third);
  for (Index r = 0; r < third; ++r) o->s_int8[r] = static_cast<float>(0.02 / 40 * (0.5 + std::fabs(nd(rng))));
  for (auto& b : o->w_int8)
    b = static_cast<std::uint8_t>(static_cast<int>(std::clamp(std::nearbyint(40 * nd(rng)), -127.0, 127.0)) & 0xFF);
  const Index rows_e = N - 2 * third, blocks = (rows_e + 1) / 2;
  o->w_e4m3.resize(rows_e * K);
  for (auto& b : o->w_e4m3) {
    b = static_cast<std::uint8_t>(
        narrow_round(kE4m3Format, 2 * nd(rng), NarrowRounding::kNearestEven, NarrowOverflow::kSaturate));
  }
  o->s_e4m3.resize(blocks * (K / 64));
  for (auto& s : o->s_e4m3) s = f32_to_f16(static_cast<float>(0.01 * (0.5 + std::fabs(nd(rng)))));

  Weights& W = o->weights;
  W.n = N;
  W.k = K;
  WeightSegment a;
  a.name = "f32";
  a.format = WeightFormat::kF32;
  a.row_begin = 0;
  a.row_end = third;
  a.values = o->w_f32.data();
  WeightSegment b;
  b.name = "int8";
  b.format = WeightFormat::kInt8;
  b.row_begin = third;
  b.row_end = 2 * third;
  b.scaled = {DType::kI8, o->w_int8.data(), DType::kF32, o->s_int8.data(), third, K, K, 1, Dequant::kExact};
  WeightSegment e;
  e.name = "e4m3";
  e.format = WeightFormat::kE4m3;
  e.row_begin = 2 * third;
  e.row_end = N;
  e.scaled = {DType::kE4m3, o->w_e4m3.data(), DType::kF16, o->s_e4m3.data(), rows_e, K, 64, 2, Dequant::kF32};
  W.segments = {a, b, e};

  LinearProblem& p = o->problem;
  p.x = {DType::kF32, o->x.data(), M, K, K};
  p.weights = &W;
  p.output = c.output;
  p.x_quant = {c.quant, c.rounding, c.group};
  p.x_quantized = {
      c.quant, K, c.group, o->codes.data(), DType::kF32, o->x_scales.data(), c.zero_points ? o->x_zp.data() : nullptr};
  return o;
}

/// The exact weight (oracle) and the kernel's f32 weight of W[j][k].
double exact_w(const Owned& o, Index j, Index k) {
  const Index third = o.c.n / 3, K = o.c.k;
  if (j < third) return o.w_f32[j * K + k];
  if (j < 2 * third)
    return static_cast<std::int8_t>(o.w_int8[(j - third) * K + k]) * static_cast<double>(o.s_int8[j - third]);
  const Index r = j - 2 * third;
  // dequant = f32: the kernel's weight is fl32(q * s), and that is what the reference holds it to.
  const float q = static_cast<float>(narrow_decode(kE4m3Format, o.w_e4m3[r * K + k]));
  return q * f16_to_f32(o.s_e4m3[(r / 2) * (K / 64) + k / 64]);
}
float kernel_w(const Owned& o, Index j, Index k) { return static_cast<float>(exact_w(o, j, k)); }

// The kernels an engine with quantized activations may run, each returning the f32 accumulator.
float dequantize_first(const Owned& o, Index i, Index j, bool fma) {
  float acc = 0;
  for (Index k = 0; k < o.c.k; ++k) {
    const float xt = static_cast<float>(o.x_tilde[i * o.c.k + k]);  // fl32((q - zp) * s)
    acc = fma ? std::fma(xt, kernel_w(o, j, k), acc) : acc + xt * kernel_w(o, j, k);
  }
  return acc;
}
float integer_groups(const Owned& o, Index i, Index j) {
  // Per group: sum (q - zp) * w in f32 (exact for integer codes and int8 weights up to 2^24),
  // then times the activation scale, then added to the total.
  float total = 0;
  const Index G = o.c.k / o.c.group;
  for (Index g = 0; g < G; ++g) {
    float inner = 0;
    const double zp = o.c.zero_points ? o.x_zp[i * G + g] : 0.0;
    for (Index k = g * o.c.group; k < (g + 1) * o.c.group; ++k) {
      const float q = static_cast<float>(code_value(o.c.quant, o.codes[i * o.c.k + k]) - zp);
      inner = std::fma(q, kernel_w(o, j, k), inner);
    }
    total = total + o.x_scales[i * G + g] * inner;
  }
  return total;
}
float pairwise_dequantized(const Owned& o, Index i, Index j) {
  std::vector<float> t(o.c.k);
  for (Index k = 0; k < o.c.k; ++k) t[k] = static_cast<float>(o.x_tilde[i * o.c.k + k]) * kernel_w(o, j, k);
  for (std::size_t width = 1; width < t.size(); width *= 2) {
    for (std::size_t a = 0; a + width < t.size(); a += 2 * width) t[a] = t[a] + t[a + width];
  }
  return t[0];
}

void expect_rigorous(const Case& c) {
  SCOPED_TRACE(c.name);
  auto o = make(c);
  auto ref = compute_reference(o->problem);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  for (Index i = 0; i < c.m; ++i) {
    for (Index j = 0; j < c.n; ++j) {
      long double oracle = 0;
      for (Index k = 0; k < c.k; ++k) oracle += static_cast<long double>(o->x_tilde[i * c.k + k]) * exact_w(*o, j, k);
      const Index e = ref->at(i, j);
      // The f64 GEMM's own error, which B charges as eps_ref (docs/error-bounds.md §1): (K + 2) 2^-53 S.
      EXPECT_LE(std::fabs(static_cast<double>(oracle) - ref->y_star[e]),
                static_cast<double>(c.k + 2) * std::ldexp(ref->s[e], -53) + 1e-300)
          << "y* of (" << i << ", " << j << ")";
      for (float acc : {dequantize_first(*o, i, j, false), dequantize_first(*o, i, j, true), integer_groups(*o, i, j),
                        pairwise_dequantized(*o, i, j)}) {
        const float z = round_to_type(acc, c.output, false);
        EXPECT_TRUE(contains(ref->accept[e], z))
            << "(" << i << ", " << j << ") value " << z << " outside [" << ref->accept[e].lo << ", "
            << ref->accept[e].hi << "], y* " << ref->y_star[e] << ", B " << ref->bound[e];
      }
    }
  }
}

TEST(QuantizedRigour, EveryQuantizerAndKernelLiesInsideTheInterval) {
  std::uint64_t seed = 3000;
  for (Index k : {64, 1024, 5120}) {
    for (double mean : {0.0, 0.7}) {
      expect_rigorous({"int8-g32-k" + std::to_string(k), 3, k, 12, XQuantType::kInt8, 32, XQuantRounding::kNearestEven,
                       false, DType::kF32, mean, seed++});
      expect_rigorous({"uint8-zp-token-rna-k" + std::to_string(k), 3, k, 12, XQuantType::kUint8, k,
                       XQuantRounding::kNearestAway, true, DType::kF16, mean, seed++});
      expect_rigorous({"e4m3-g64-k" + std::to_string(k), 3, k, 12, XQuantType::kE4m3, 64, XQuantRounding::kNearestEven,
                       false, DType::kBf16, mean, seed++});
      expect_rigorous({"e5m2-token-k" + std::to_string(k), 3, k, 12, XQuantType::kE5m2, k, XQuantRounding::kNearestEven,
                       false, DType::kF32, mean, seed++});
    }
  }
}

}  // namespace
}  // namespace ncert::reference
