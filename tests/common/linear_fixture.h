// Owned random projection problems for reference and packing tests: activations (bf16/f32),
// weights in AF4 / BF16 / F32 segments, bias, residual; plus an independent "engine" that
// evaluates any summation order from the raw parameters (never from ncert's decoder).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "reference/float_bits.h"
#include "reference/k_walk.h"
#include "reference/linear_spec.h"

namespace ncert::testing {

using reference::Af4Layout;
using reference::WeightFormat;

struct SegmentSpec {
  WeightFormat format = WeightFormat::kBf16;
  Index rows = 0;
  Af4Layout af4;  ///< for AF4 segments (packing, variant, group size, dequant, scale dtype)
};

/// An AF4 segment of `rows` rows (the other layout members at their defaults).
inline SegmentSpec af4_segment(Index rows, reference::Dequant dq, DType scale, Index group = 64,
                               reference::DequantOp op = reference::DequantOp::kFma) {
  SegmentSpec s;
  s.format = WeightFormat::kAf4;
  s.rows = rows;
  s.af4.group_size = group;
  s.af4.scale_dtype = scale;
  s.af4.dequant = dq;
  s.af4.dequant_op = op;
  return s;
}

/// Parameters of one AF4 segment kept in plain form, so tests can compute weights without
/// ncert's decoder.
struct Af4Plain {
  std::vector<int> q;        // rows x K codes
  std::vector<float> scale;  // rows x groups (values, already rounded to scale dtype)
  std::vector<float> bias;   // rows x groups
};

struct OwnedProblem {
  Index m = 0, k = 0, n = 0;
  DType x_dtype = DType::kBf16;
  std::vector<float> x_values;        // M x K exact activation values
  std::vector<std::uint16_t> x_bf16;  // storage when bf16
  std::vector<float> x_f32;           // storage when f32
  std::vector<std::vector<std::uint16_t>> u16_store;
  std::vector<std::vector<float>> f32_store;
  std::vector<std::vector<std::uint8_t>> byte_store;
  std::vector<Af4Plain> af4_plain;  // parallel to weights.segments (empty for non-AF4)
  reference::Weights weights;
  std::vector<float> bias;
  std::vector<float> residual;  // M x N
  reference::LinearProblem problem;

  /// The exact weight value the reference must use for W[j][c].
  double exact_weight(Index j, Index c) const {
    for (std::size_t s = 0; s < weights.segments.size(); ++s) {
      const auto& seg = weights.segments[s];
      if (j < seg.row_begin || j >= seg.row_end) continue;
      const Index r = j - seg.row_begin;
      if (seg.format == WeightFormat::kBf16) {
        return reference::bf16_to_f32(u16_store_of(s)[r * k + c]);
      }
      if (seg.format == WeightFormat::kF32) return f32_store_of(s)[r * k + c];
      const Af4Plain& a = af4_plain[s];
      const Index g = c / seg.af4.layout.group_size;
      const Index groups = k / seg.af4.layout.group_size;
      const int q = a.q[r * k + c];
      const double sc = a.scale[r * groups + g];
      if (seg.af4.layout.variant == reference::Af4Variant::kAffine) {
        return sc * q + static_cast<double>(a.bias[r * groups + g]);
      }
      return static_cast<double>(seg.af4.layout.table[q]) * sc;
    }
    return 0;
  }

  const std::vector<std::uint16_t>& u16_store_of(std::size_t s) const { return u16_store[seg_slot[s]]; }
  const std::vector<float>& f32_store_of(std::size_t s) const { return f32_store[seg_slot[s]]; }
  std::vector<std::size_t> seg_slot;
};

inline float random_scale_value(std::mt19937_64& rng, DType t, float magnitude) {
  std::normal_distribution<float> n(0.0f, magnitude);
  float v = n(rng);
  if (t == DType::kBf16) return reference::round_to_bf16(v);
  if (t == DType::kF16) return reference::f16_to_f32(reference::f32_to_f16(v));
  return v;
}

inline void store_scale(std::vector<std::uint8_t>& bytes, DType t, float v) {
  if (t == DType::kF32) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + 4);
    return;
  }
  const std::uint16_t h = t == DType::kBf16 ? reference::f32_to_bf16(v) : reference::f32_to_f16(v);
  bytes.push_back(static_cast<std::uint8_t>(h & 0xFF));
  bytes.push_back(static_cast<std::uint8_t>(h >> 8));
}

/// One bf16 segment of 16 rows. Built by a function, not a braced list: GCC 12 at -O3 with line
/// coverage read the list's backing array as maybe uninitialized where a test's function
/// default-constructs ProblemOptions (a false positive, an error under -Werror).
inline std::vector<SegmentSpec> one_bf16_segment() {
  std::vector<SegmentSpec> segments(1);
  segments[0].format = WeightFormat::kBf16;
  segments[0].rows = 16;
  return segments;
}

struct ProblemOptions {
  Index m = 4, k = 64;
  std::vector<SegmentSpec> segments = one_bf16_segment();
  DType x_dtype = DType::kBf16;
  float x_mean = 0.0f;
  float w_mean = 0.0f;
  bool positive = false;  // all-positive data (worst case for biased accumulators)
  reference::Epilogue epilogue = reference::Epilogue::kNone;
  reference::ResidualAt residual_at = reference::ResidualAt::kF32;
  reference::BiasAt bias_at = reference::BiasAt::kEnd;
  DType output = DType::kF32;
  DType bias_dtype = DType::kF32;
  std::string accumulator = "f32-rn";
  std::string walk;  // empty: none
  std::uint64_t seed = 1;
};

inline std::unique_ptr<OwnedProblem> make_problem(const ProblemOptions& o) {
  auto p = std::make_unique<OwnedProblem>();
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> xn(o.x_mean, 1.0f), wn(o.w_mean, 0.02f);
  p->m = o.m;
  p->k = o.k;
  p->x_dtype = o.x_dtype;
  p->x_values.resize(static_cast<std::size_t>(o.m * o.k));
  for (auto& v : p->x_values) {
    float f = xn(rng);
    if (o.positive) f = std::fabs(f);
    v = o.x_dtype == DType::kBf16 ? reference::round_to_bf16(f) : f;
  }
  if (o.x_dtype == DType::kBf16) {
    for (float v : p->x_values) p->x_bf16.push_back(reference::f32_to_bf16(v));
  } else {
    p->x_f32 = p->x_values;
  }
  Index row = 0;
  p->weights.k = o.k;
  for (const SegmentSpec& spec : o.segments) {
    reference::WeightSegment seg;
    seg.name = "s" + std::to_string(p->weights.segments.size());
    seg.format = spec.format;
    seg.row_begin = row;
    seg.row_end = row + spec.rows;
    row += spec.rows;
    Af4Plain plain;
    if (spec.format == WeightFormat::kBf16) {
      std::vector<std::uint16_t> v(static_cast<std::size_t>(spec.rows * o.k));
      for (auto& b : v) {
        float f = wn(rng);
        if (o.positive) f = std::fabs(f);
        b = reference::f32_to_bf16(f);
      }
      p->seg_slot.push_back(p->u16_store.size());
      p->u16_store.push_back(std::move(v));
    } else if (spec.format == WeightFormat::kF32) {
      std::vector<float> v(static_cast<std::size_t>(spec.rows * o.k));
      for (auto& f : v) {
        f = wn(rng);
        if (o.positive) f = std::fabs(f);
      }
      p->seg_slot.push_back(p->f32_store.size());
      p->f32_store.push_back(std::move(v));
    } else {
      const Af4Layout& L = spec.af4;
      const Index groups = o.k / L.group_size;
      std::uniform_int_distribution<int> qd(0, 15);
      plain.q.resize(static_cast<std::size_t>(spec.rows * o.k));
      for (auto& q : plain.q) q = qd(rng);
      std::vector<std::uint8_t> scales, biases;
      for (Index i = 0; i < spec.rows * groups; ++i) {
        float s = random_scale_value(rng, L.scale_dtype, 0.01f);
        float b = random_scale_value(rng, L.scale_dtype, 0.05f);
        if (o.positive) {
          s = std::fabs(s);
          b = std::fabs(b);
        }
        plain.scale.push_back(s);
        plain.bias.push_back(L.variant == reference::Af4Variant::kAffine ? b : 0.0f);
        store_scale(scales, L.scale_dtype, s);
        store_scale(biases, L.scale_dtype, b);
      }
      // Pack the codes (independently of ncert's decoder).
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(spec.rows * o.k / 2));
      for (Index r = 0; r < spec.rows; ++r) {
        for (Index c = 0; c < o.k; c += 2) {
          const int a = plain.q[r * o.k + c], b2 = plain.q[r * o.k + c + 1];
          const bool msb = L.packing == reference::Af4Packing::kU8Msb;
          codes[(r * o.k + c) / 2] = static_cast<std::uint8_t>(msb ? (a << 4) | b2 : (b2 << 4) | a);
        }
      }
      // Zero points (one per group, 0..15) are drawn for zero-point segments only, so that the
      // other layouts' draws stay as they were.
      std::vector<std::uint8_t> zero_points;
      if (L.variant == reference::Af4Variant::kZeroPoint) {
        for (Index i = 0; i < spec.rows * groups; ++i) zero_points.push_back(static_cast<std::uint8_t>(qd(rng)));
      }
      seg.af4.layout = L;
      if (L.variant == reference::Af4Variant::kCodebook && L.codebook != reference::Af4Codebook::kCustom) {
        seg.af4.layout.table = reference::builtin_codebook(L.codebook);
      }
      seg.af4.rows = spec.rows;
      seg.af4.k = o.k;
      p->seg_slot.push_back(p->byte_store.size());
      p->byte_store.push_back(std::move(codes));
      p->byte_store.push_back(std::move(scales));
      p->byte_store.push_back(std::move(biases));
      p->byte_store.push_back(std::move(zero_points));
    }
    p->weights.segments.push_back(seg);
    p->af4_plain.push_back(std::move(plain));
  }
  p->n = row;
  p->weights.n = row;
  // Wire pointers now that storage no longer moves.
  for (std::size_t s = 0; s < p->weights.segments.size(); ++s) {
    auto& seg = p->weights.segments[s];
    if (seg.format == WeightFormat::kBf16) seg.values = p->u16_store[p->seg_slot[s]].data();
    if (seg.format == WeightFormat::kF32) seg.values = p->f32_store[p->seg_slot[s]].data();
    if (seg.format == WeightFormat::kAf4) {
      const std::size_t base = p->seg_slot[s];
      seg.af4.codes = p->byte_store[base].data();
      seg.af4.scales = p->byte_store[base + 1].data();
      seg.af4.biases = p->byte_store[base + 2].data();
      if (seg.af4.layout.variant == reference::Af4Variant::kZeroPoint)
        seg.af4.zero_points = p->byte_store[base + 3].data();
    }
  }
  std::normal_distribution<float> bn(0.0f, 0.5f);
  p->bias.resize(static_cast<std::size_t>(p->n));
  for (auto& b : p->bias) b = o.bias_dtype == DType::kBf16 ? reference::round_to_bf16(bn(rng)) : bn(rng);
  p->residual.resize(static_cast<std::size_t>(p->m * p->n));
  for (auto& r : p->residual) r = reference::round_to_output(bn(rng), o.output);

  reference::LinearProblem& lp = p->problem;
  lp.x.dtype = o.x_dtype;
  lp.x.data = o.x_dtype == DType::kBf16 ? static_cast<const void*>(p->x_bf16.data())
                                        : static_cast<const void*>(p->x_f32.data());
  lp.x.rows = o.m;
  lp.x.cols = o.k;
  lp.x.stride = o.k;
  lp.weights = &p->weights;
  lp.accumulator = *reference::parse_accumulator(o.accumulator);
  lp.epilogue = o.epilogue;
  lp.residual_at = o.residual_at;
  lp.bias_at = o.bias_at;
  lp.output = o.output;
  if (reference::has_bias(o.epilogue)) lp.bias = {DType::kF32, p->bias.data(), p->n};
  if (reference::has_residual(o.epilogue)) lp.residual = {DType::kF32, p->residual.data(), p->m, p->n, p->n};
  if (!o.walk.empty()) lp.walk = *reference::parse_k_walk(o.walk);
  return p;
}

}  // namespace ncert::testing
