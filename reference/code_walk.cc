#include "reference/code_walk.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "reference/k_walk.h"

namespace ncert::reference {

// Compiled with -ffp-contract=off (tools/cmake), as k_walk.cc: fl32(s_w * s_x) and fl32(Q * s)
// are each one rounding, never fused with what follows.

namespace {

/// One side's integer codes (q - zp, at most 255 in magnitude: int16 holds them and their
/// products, 65,025, sum in int32 over up to 32,768 of them) and the scale of each chunk.
struct CodeRow {
  std::vector<std::int16_t> q;
  std::vector<float> s;
};

/// chunk_sums for a chunk known at compile time (ggml's 4 and 32 among them): the compiler unrolls
/// each run and vectorizes across runs, about 4x the general loop's speed at C = 4.
template <Index kChunk>
void fixed_chunk_sums(const std::int16_t* x, const std::int16_t* w, Index k, float* out) {
  for (Index t = 0; t < k / kChunk; ++t) {
    std::int32_t sum = 0;
    for (Index c = 0; c < kChunk; ++c) {
      sum += static_cast<std::int32_t>(x[t * kChunk + c]) * static_cast<std::int32_t>(w[t * kChunk + c]);
    }
    out[t] = static_cast<float>(sum);  // |sum| <= 32 * 65,025 < 2^24: exact
  }
}

/// Each run of `chunk` code products summed exactly, as f32 (one rounding: cvtdq2ps's, to nearest
/// even; exact below 2^24). Chunks of 1-32 take fixed_chunk_sums; others put the products through
/// `products` first (the compiler vectorizes that loop: pmaddwd's operands), and sum runs of up to
/// 32,768 of them in int32 (at most 2,130,739,200 < 2^31), longer ones such runs in int64.
void chunk_sums(const std::int16_t* x, const std::int16_t* w, Index k, Index chunk, std::int32_t* products,
                float* out) {
  switch (chunk) {
    case 1:
      return fixed_chunk_sums<1>(x, w, k, out);
    case 2:
      return fixed_chunk_sums<2>(x, w, k, out);
    case 4:
      return fixed_chunk_sums<4>(x, w, k, out);
    case 8:
      return fixed_chunk_sums<8>(x, w, k, out);
    case 16:
      return fixed_chunk_sums<16>(x, w, k, out);
    case 32:
      return fixed_chunk_sums<32>(x, w, k, out);
    default:
      break;
  }
  for (Index c = 0; c < k; ++c) products[c] = static_cast<std::int32_t>(x[c]) * static_cast<std::int32_t>(w[c]);
  constexpr Index kRun = 32768;
  for (Index t = 0; t < k / chunk; ++t) {
    const std::int32_t* p = products + t * chunk;
    std::int64_t total = 0;
    for (Index c0 = 0; c0 < chunk; c0 += kRun) {
      const Index end = std::min(chunk, c0 + kRun);
      std::int32_t run = 0;
      for (Index c = c0; c < end; ++c) run += p[c];
      total += run;
    }
    // |total| < 2^53: exact in f64, then rounded once to f32.
    out[t] = static_cast<float>(static_cast<double>(total));
  }
}

/// Weight row j's codes and chunk scales: int8 codes (zero point 0) or AF4 zero-point codes less
/// their group's zero point.
void weight_codes(const Weights& W, Index j, Index chunk, CodeRow& out) {
  const WeightSegment& seg = segment_of(W, j);
  const Index r = j - seg.row_begin;
  const Index K = W.k;
  for (Index t = 0; t < K / chunk; ++t) {
    const Index c0 = t * chunk;
    out.s[static_cast<std::size_t>(t)] = seg.format == WeightFormat::kAf4
                                             ? af4_scale(seg.af4, r, c0 / seg.af4.layout.group_size)
                                             : seg.scaled.scale(r, c0);
  }
  if (seg.format == WeightFormat::kAf4) {
    const Index gs = seg.af4.layout.group_size;
    for (Index c = 0; c < K; ++c) {
      out.q[static_cast<std::size_t>(c)] =
          static_cast<std::int16_t>(af4_code(seg.af4, r, c) - af4_zero_point(seg.af4, r, c / gs));
    }
  } else {
    for (Index c = 0; c < K; ++c) out.q[static_cast<std::size_t>(c)] = static_cast<std::int16_t>(seg.scaled.code(r, c));
  }
}

std::string why_segment(const WeightSegment& seg, Index chunk) {
  const std::string name = "segment " + seg.name;
  if (seg.format == WeightFormat::kInt8) {
    if (seg.scaled.dequant != Dequant::kExact) {
      return name + " declares dequant = " + std::string(dequant_name(seg.scaled.dequant)) +
             ", where a kernel that multiplies codes multiplies them as they are: declare dequant = exact";
    }
    if (seg.scaled.group_size % chunk != 0) {
      return name + "'s group_size " + std::to_string(seg.scaled.group_size) +
             " is not a multiple of C = " + std::to_string(chunk) + ": a chunk would straddle two of its scales";
    }
    return "";
  }
  if (seg.format == WeightFormat::kAf4 && seg.af4.layout.variant == Af4Variant::kZeroPoint) {
    if (seg.af4.layout.dequant != Dequant::kExact) {
      return name + " declares dequant = " + std::string(dequant_name(seg.af4.layout.dequant)) +
             ", where a kernel that multiplies codes multiplies them as they are: declare dequant = exact";
    }
    if (seg.af4.layout.group_size % chunk != 0) {
      return name + "'s group_size " + std::to_string(seg.af4.layout.group_size) +
             " is not a multiple of C = " + std::to_string(chunk) + ": a chunk would straddle two of its scales";
    }
    return "";
  }
  return name + " is " + std::string(weight_format_name(seg.format)) +
         (seg.format == WeightFormat::kAf4 ? " without zero points" : "") +
         ": a code walk needs integer weight codes (int8, or AF4 variant = zero-point)";
}

}  // namespace

std::string code_walk_unsupported(const LinearProblem& p) {
  const Index chunk = p.walk.code_chunk;
  if (!x_quant_integer(p.x_quant.type)) {
    return p.x_quant.type == XQuantType::kNone
               ? std::string(
                     "x_quant is not declared: a code walk sums integer activation codes (x_quant = int8 or "
                     "uint8)")
               : "x_quant = " + std::string(x_quant_name(p.x_quant.type)) +
                     ": a code walk sums integer activation codes (x_quant = int8 or uint8)";
  }
  if (p.x_quant.group % chunk != 0) {
    return "x_quant_group " + std::to_string(p.x_quant.group) + " is not a multiple of C = " + std::to_string(chunk) +
           ": a chunk would straddle two activation scales";
  }
  for (const WeightSegment& seg : p.weights->segments) {
    if (std::string why = why_segment(seg, chunk); !why.empty()) return why;
  }
  return "";
}

void code_walk_block(const LinearProblem& p, Index j0, Index width, float* out, const float* start) {
  const KWalk& walk = p.walk;
  const XQuantizedView& xq = p.x_quantized;
  const Index M = p.x.rows, K = p.weights->k, chunk = walk.code_chunk, terms = K / chunk;
  std::vector<CodeRow> x(static_cast<std::size_t>(M));
  for (Index i = 0; i < M; ++i) {
    CodeRow& row = x[static_cast<std::size_t>(i)];
    row.q.resize(static_cast<std::size_t>(K));
    row.s.resize(static_cast<std::size_t>(terms));
    for (Index c = 0; c < K; ++c) {
      row.q[static_cast<std::size_t>(c)] = static_cast<std::int16_t>(xq.code(i, c) - xq.zero_point(i, c / xq.group));
    }
    // A stored scale (f32, f16 or bf16) is an f32 value exactly.
    for (Index t = 0; t < terms; ++t)
      row.s[static_cast<std::size_t>(t)] = static_cast<float>(xq.scale(i, t * chunk / xq.group));
  }
  CodeRow w{std::vector<std::int16_t>(static_cast<std::size_t>(K)),
            std::vector<float>(static_cast<std::size_t>(terms))};
  std::vector<float> a(static_cast<std::size_t>(terms)), b(static_cast<std::size_t>(terms)),
      sums(static_cast<std::size_t>(terms));
  std::vector<std::int32_t> products(static_cast<std::size_t>(K));
  for (Index jj = 0; jj < width; ++jj) {
    weight_codes(*p.weights, j0 + jj, chunk, w);
    for (Index i = 0; i < M; ++i) {
      const CodeRow& xr = x[static_cast<std::size_t>(i)];
      chunk_sums(xr.q.data(), w.q.data(), K, chunk, products.data(), sums.data());
      for (Index t = 0; t < terms; ++t) {
        const auto st = static_cast<std::size_t>(t);
        const float q = sums[st];
        switch (walk.code_scaling) {
          case CodeScaling::kScaleProduct:
            a[st] = w.s[st] * xr.s[st];
            b[st] = q;
            break;
          case CodeScaling::kWScaleFirst:
            a[st] = q * w.s[st];
            b[st] = xr.s[st];
            break;
          case CodeScaling::kXScaleFirst:
            a[st] = q * xr.s[st];
            b[st] = w.s[st];
            break;
        }
      }
      if (walk.code_once) {
        // The kernel scales its whole-K sum once (an int32 GEMM's output stage) and accumulates
        // nothing in f32: the product is the value, a zero keeping its sign (Q = 0 under a
        // negative scale is -0, where seq's 0 + -0 is +0); a bias the output held is added to it.
        const float v = a[0] * b[0];
        out[i * width + jj] = start != nullptr ? v + start[jj] : v;
      } else {
        out[i * width + jj] = walk_dot(walk, a.data(), b.data(), terms, start != nullptr ? start + jj : nullptr);
      }
    }
  }
}

}  // namespace ncert::reference
