// An integer kernel's walk (k_walk = codes:<C>:<scaling>/<walk>, reference/code_walk.h):
//  - the form parses to its chunk, scaling and f32 walk; malformed ones are k-walk-invalid; the
//    split guard counts the K / C sums;
//  - the emulation equals kernels written here from docs/dump-format.md §3.4, each its own code
//    (no call into k_walk.cc): ggml's AVX2 vec_dot (sums of 4 products in 8 lanes, fused with
//    the scale product, halving at the end), ggml's scalar loop (a block's sum times d_w, then
//    d_x), and an int32 GEMM over uint8 activations with zero points that scales once (its sums
//    past 2^24, so converting them to f32 rounds);
//  - the kernel's faults the bound lets through change the emulated values: a 16-bit accumulator
//    (maddubs' saturating pair sums) and one group's scale 0.2 % off;
//  - a problem without integer codes on both sides says why it cannot take the walk.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/code_walk.h"
#include "reference/float_bits.h"
#include "reference/linear.h"
#include "reference/linear_spec.h"

namespace ncert::reference {
namespace {

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

TEST(CodeWalkParse, TheFormDescribesItsChunkScalingAndWalk) {
  auto w = parse_k_walk("codes:4:scale-product/lanes:8:halving:fma");
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->codes());
  EXPECT_EQ(w->code_chunk, 4);
  EXPECT_EQ(w->code_scaling, CodeScaling::kScaleProduct);
  EXPECT_EQ(w->inner, KWalkInner::kLanes);
  EXPECT_EQ(w->lanes, 8);
  EXPECT_EQ(w->lane_tree, KWalkTree::kHalving);
  EXPECT_TRUE(w->fma);
  EXPECT_EQ(w->name, "codes:4:scale-product/lanes:8:halving:fma");
  EXPECT_EQ(w->terms(4096), 1024);
  w = parse_k_walk("codes:32:w-scale-first/seq");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->code_scaling, CodeScaling::kWScaleFirst);
  EXPECT_TRUE(w->plain());
  w = parse_k_walk("codes:16:x-scale-first/splitk:4:pairs/seq-fma");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->code_scaling, CodeScaling::kXScaleFirst);
  EXPECT_EQ(w->parts, 4);
  // K = 256: 16 sums of 16, in 4 parts; K = 128 makes 8 sums, not cut by 3; K = 100 is not
  // a multiple of 16.
  EXPECT_TRUE(w->divides(256));
  w = parse_k_walk("codes:16:x-scale-first/split:3");
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->divides(128));
  EXPECT_EQ(walk_split_message(*w, 128),
            "k_walk codes:16:x-scale-first/split:3: K = 128 makes 8 code sums of 16, not a multiple of 3");
  EXPECT_FALSE(w->divides(100));
  EXPECT_EQ(walk_split_message(*w, 100), "k_walk codes:16:x-scale-first/split:3: K = 100 is not a multiple of C = 16");
  EXPECT_FALSE(parse_k_walk("seq")->codes());
  for (const char* s : {"codes:", "codes:4", "codes:4:scale-product", "codes:4:scale-product/",
                        "codes:0:scale-product/seq", "codes:4:scales/seq", "codes:4:scale-product:x/seq",
                        "codes:-4:scale-product/seq", "codes:4:scale-product/lanes:3:halving",
                        "codes:4:scale-product/codes:4:scale-product/seq", "codes:4:w-scale-first/split:0",
                        "codes:x:w-scale-first/seq", "codes:4:scale-product/once:fma", "once", "splitk:2:seq/once"}) {
    SCOPED_TRACE(s);
    const auto bad = parse_k_walk(s);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), ErrorCode::kKWalkInvalid);
    EXPECT_NE(bad.status().message().find("codes:<C>:<scaling>/<walk>"), std::string::npos);
  }
}

/// A W8A8 / W4A8 problem: int8 activations in groups of 32 with f16 scales (ggml's Q8_0), or
/// uint8 per row with zero points and an f32 scale; weights int8 per channel (f32 scales) or AF4
/// zero-point codes in groups of 32 with f16 scales (ggml's Q4_0: zero points 8).
struct IntProblem {
  Index m = 4, k = 256, n = 8;
  bool uint8_x = false;  ///< uint8 per row with zero points, else int8 in groups of 32
  bool af4_w = true;     ///< AF4 zero-point groups of 32, else int8 per channel
  bool skew = false;     ///< int8 weights 60..127 and zero points 0..7: sums past 2^24 at K 4,096
  std::vector<std::uint8_t> xq, x_zp;
  std::vector<std::uint16_t> xs16;
  std::vector<float> xs32, x;
  std::vector<std::uint8_t> w_codes, w_zp;  // AF4: k/2 bytes a row, u8-lsb; zero points per group
  std::vector<std::uint16_t> ws16;
  std::vector<std::int8_t> w_int8;
  std::vector<float> ws32;
  Weights weights;
  LinearProblem problem;

  Index x_group() const { return uint8_x ? k : 32; }
  int x_code(Index i, Index c) const {
    return uint8_x ? xq[i * k + c] - x_zp[i] : static_cast<std::int8_t>(xq[i * k + c]);
  }
  float x_scale(Index i, Index c) const { return uint8_x ? xs32[i] : f16_to_f32(xs16[i * (k / 32) + c / 32]); }
  int w_code(Index j, Index c) const {
    if (!af4_w) return w_int8[j * k + c];
    const std::uint8_t byte = w_codes[j * (k / 2) + c / 2];
    return ((c % 2) == 0 ? byte & 0x0F : byte >> 4) - w_zp[j * (k / 32) + c / 32];
  }
  float w_scale(Index j, Index c) const { return af4_w ? f16_to_f32(ws16[j * (k / 32) + c / 32]) : ws32[j]; }

  void build(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> s8(-127, 127), u8(0, 255), u4(0, 15);
    std::uniform_real_distribution<float> scale(0.5f, 2.0f);
    xq.resize(m * k);
    for (auto& b : xq) b = static_cast<std::uint8_t>(uint8_x ? u8(rng) : s8(rng) & 0xFF);
    if (uint8_x) {
      x_zp.resize(m);
      for (auto& z : x_zp) z = static_cast<std::uint8_t>(skew ? u8(rng) % 8 : u8(rng) / 2 + 64);
      xs32.resize(m);
      for (auto& s : xs32) s = scale(rng) * 0.01f;
    } else {
      xs16.resize(m * (k / 32));
      for (auto& s : xs16) s = f32_to_f16(scale(rng) * 0.01f);
    }
    x.resize(m * k);  // the activations as dumped: the codes' values exactly (quantize is not tested here)
    for (Index i = 0; i < m; ++i)
      for (Index c = 0; c < k; ++c) x[i * k + c] = static_cast<float>(x_code(i, c)) * x_scale(i, c);
    if (af4_w) {
      w_codes.resize(n * k / 2);
      for (auto& b : w_codes) b = static_cast<std::uint8_t>(u4(rng) | (u4(rng) << 4));
      w_zp.assign(n * (k / 32), 8);
      ws16.resize(n * (k / 32));
      for (auto& s : ws16) s = f32_to_f16(scale(rng) * 0.02f);
    } else {
      w_int8.resize(n * k);
      for (auto& v : w_int8) v = static_cast<std::int8_t>(skew ? 60 + u8(rng) % 68 : s8(rng));
      ws32.resize(n);
      for (auto& s : ws32) s = scale(rng) * 0.003f;
    }
    WeightSegment seg;
    seg.name = "w";
    seg.row_begin = 0;
    seg.row_end = n;
    if (af4_w) {
      seg.format = WeightFormat::kAf4;
      seg.af4.layout.variant = Af4Variant::kZeroPoint;
      seg.af4.layout.packing = Af4Packing::kU8Lsb;
      seg.af4.layout.group_size = 32;
      seg.af4.layout.scale_dtype = DType::kF16;
      seg.af4.layout.dequant = Dequant::kExact;
      seg.af4.layout.dequant_op = DequantOp::kSubMul;
      seg.af4.rows = n;
      seg.af4.k = k;
      seg.af4.codes = w_codes.data();
      seg.af4.scales = ws16.data();
      seg.af4.zero_points = w_zp.data();
    } else {
      seg.format = WeightFormat::kInt8;
      seg.scaled = {DType::kI8, w_int8.data(), DType::kF32, ws32.data(), n, k, k, 1, Dequant::kExact};
    }
    weights.n = n;
    weights.k = k;
    weights.segments = {seg};
    problem.x = {DType::kF32, x.data(), m, k, k};
    problem.weights = &weights;
    problem.x_quant = {uint8_x ? XQuantType::kUint8 : XQuantType::kInt8, XQuantRounding::kNearestEven, x_group()};
    problem.x_quantized = {problem.x_quant.type,
                           k,
                           x_group(),
                           xq.data(),
                           uint8_x ? DType::kF32 : DType::kF16,
                           uint8_x ? static_cast<const void*>(xs32.data()) : static_cast<const void*>(xs16.data()),
                           uint8_x ? x_zp.data() : nullptr};
  }

  /// The emulated walk of every element, row-major M x N.
  std::vector<float> emulated(const std::string& walk) {
    problem.walk = *parse_k_walk(walk);
    EXPECT_EQ(code_walk_unsupported(problem), "");
    auto r = compute_reference(problem);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->walk : std::vector<float>{};
  }
};

/// ggml's AVX2 ggml_vec_dot_q4_0_q8_0 / q8_0_q8_0: per block of 32, d = fl32(d_w * d_x); maddubs
/// + madd leave 8 int32 lanes, lane l the sum of elements 4l..4l+3; acc_l = fma(d, fl32(Q), acc_l);
/// then hsum_float_8 (upper 128 bits onto the lower, then movehl, then movehdup: halving).
/// `saturate16`: maddubs' int16 pair sums saturate (u8 x s8 products past 32,767).
float avx2_like(const IntProblem& p, Index i, Index j, bool saturate16 = false, Index bad_group = -1) {
  float acc[8] = {};
  for (Index b = 0; b < p.k / 32; ++b) {
    float sw = p.w_scale(j, b * 32);
    if (b == bad_group) sw = sw * 1.002f;
    const float d = sw * p.x_scale(i, b * 32);
    for (Index l = 0; l < 8; ++l) {
      std::int32_t q = 0;
      for (Index e = 0; e < 4; e += 2) {
        const Index c = b * 32 + 4 * l + e;
        std::int32_t pair = p.x_code(i, c) * p.w_code(j, c) + p.x_code(i, c + 1) * p.w_code(j, c + 1);
        if (saturate16) {
          // maddubs multiplies the raw u8 codes; the zero point's share, zp * sum(w), is taken
          // off after (exact): only the raw pair saturates.
          const std::int32_t zp = p.uint8_x ? p.x_zp[i] : 0;
          const std::int32_t ws = p.w_code(j, c) + p.w_code(j, c + 1);
          pair = std::clamp(pair + zp * ws, -32768, 32767) - zp * ws;
        }
        q += pair;
      }
      acc[l] = std::fma(d, static_cast<float>(q), acc[l]);
    }
  }
  for (Index width = 4; width >= 1; width /= 2)
    for (Index l = 0; l < width; ++l) acc[l] = acc[l] + acc[l + width];
  return acc[0];
}

/// ggml's scalar loop: sumi over a block, then sumf += sumi * d_w * d_x (left to right, not fused).
float scalar_like(const IntProblem& p, Index i, Index j) {
  float sumf = 0;
  for (Index b = 0; b < p.k / 32; ++b) {
    std::int32_t sumi = 0;
    for (Index c = b * 32; c < (b + 1) * 32; ++c) sumi += p.x_code(i, c) * p.w_code(j, c);
    const float t = static_cast<float>(sumi) * p.w_scale(j, b * 32);
    sumf = sumf + t * p.x_scale(i, b * 32);
  }
  return sumf;
}

/// An int32 GEMM that scales once (MLAS's and oneDNN's u8s8 kernels): y = fl32(Q) * fl32(s_x s_w).
float gemm_like(const IntProblem& p, Index i, Index j) {
  std::int64_t q = 0;
  for (Index c = 0; c < p.k; ++c) q += static_cast<std::int64_t>(p.x_code(i, c)) * p.w_code(j, c);
  const float scale = p.x_scale(i, 0) * p.w_scale(j, 0);
  return static_cast<float>(q) * scale;
}

TEST(CodeWalk, EqualsGgmlsAvx2AndScalarLoopsBitForBit) {
  for (const bool af4 : {true, false}) {
    SCOPED_TRACE(af4 ? "Q4_0 x Q8_0" : "int8 x Q8_0");
    IntProblem p;
    p.af4_w = af4;
    p.build(af4 ? 3 : 4);
    const std::vector<float> avx2 = p.emulated("codes:4:scale-product/lanes:8:halving:fma");
    const std::vector<float> scalar = p.emulated("codes:32:w-scale-first/seq");
    ASSERT_EQ(avx2.size(), static_cast<std::size_t>(p.m * p.n));
    Index differ = 0;
    for (Index i = 0; i < p.m; ++i) {
      for (Index j = 0; j < p.n; ++j) {
        EXPECT_EQ(bits(avx2[i * p.n + j]), bits(avx2_like(p, i, j))) << i << "," << j;
        EXPECT_EQ(bits(scalar[i * p.n + j]), bits(scalar_like(p, i, j))) << i << "," << j;
        differ += bits(avx2_like(p, i, j)) != bits(scalar_like(p, i, j)) ? 1 : 0;
      }
    }
    // The two orders round differently: the test tells them apart.
    EXPECT_GT(differ, 0);
  }
}

TEST(CodeWalk, EqualsAnInt32GemmWhoseSumsRoundToF32) {
  IntProblem p;
  p.uint8_x = true;
  p.af4_w = false;
  p.skew = true;
  p.k = 4096;
  p.build(5);
  const std::vector<float> once = p.emulated("codes:4096:scale-product/once");
  Index past = 0;
  for (Index i = 0; i < p.m; ++i) {
    for (Index j = 0; j < p.n; ++j) {
      EXPECT_EQ(bits(once[i * p.n + j]), bits(gemm_like(p, i, j))) << i << "," << j;
      std::int64_t q = 0;
      for (Index c = 0; c < p.k; ++c) q += static_cast<std::int64_t>(p.x_code(i, c)) * p.w_code(j, c);
      past += std::llabs(q) > (std::int64_t{1} << 24) && static_cast<std::int64_t>(static_cast<float>(q)) != q ? 1 : 0;
    }
  }
  // At least one sum lost bits in its conversion, as the kernel's did.
  EXPECT_GT(past, 0);
}

TEST(CodeWalk, AWholeKSumScaledOnceKeepsTheSignOfItsZero) {
  // An int32 GEMM's output stage is one multiply, no f32 accumulator: a zero sum under a
  // negative scale is -0 (a review's padding row), declared `once`; `seq` starts from +0 and
  // gives +0 there, as ggml's scalar loop over one block does (sumf = 0; sumf += ...).
  IntProblem p;
  p.uint8_x = true;
  p.af4_w = false;
  p.k = 64;
  p.build(9);
  for (Index c = 0; c < p.k; ++c) p.xq[c] = p.x_zp[0];  // row 0: every code its zero point
  for (Index c = 0; c < p.k; ++c) p.x[c] = 0.0f;
  p.ws32[1] = -p.ws32[1];
  const std::vector<float> once = p.emulated("codes:64:scale-product/once");
  EXPECT_EQ(bits(once[1]), 0x80000000u);  // row 0, column 1
  EXPECT_EQ(bits(once[1]), bits(gemm_like(p, 0, 1)));
  EXPECT_EQ(bits(once[0]), 0u);
  for (Index i = 0; i < p.m; ++i)
    for (Index j = 0; j < p.n; ++j) EXPECT_EQ(bits(once[i * p.n + j]), bits(gemm_like(p, i, j))) << i << "," << j;
  const std::vector<float> seq = p.emulated("codes:64:scale-product/seq");
  EXPECT_EQ(bits(seq[1]), 0u);  // 0 + -0
  EXPECT_FALSE(parse_k_walk("codes:32:scale-product/once")->divides(64));
  EXPECT_EQ(walk_split_message(*parse_k_walk("codes:32:scale-product/once"), 64),
            "k_walk codes:32:scale-product/once: K = 64 makes 2 code sums of 32, where once scales a single sum "
            "(C = K)");
}

TEST(CodeWalk, FaultsTheBoundLetsThroughChangeTheEmulatedValues) {
  // uint8-range products: x codes up to 255 against int8 weights, so maddubs' pairs saturate.
  IntProblem p;
  p.uint8_x = true;
  p.af4_w = false;
  p.build(6);
  p.problem.x_quant.group = 32;  // groups of 32 for the AVX2 walk's chunks; the per-row scale repeats
  std::vector<float> xs(p.m * (p.k / 32));
  std::vector<std::uint8_t> zps(p.m * (p.k / 32));
  for (Index i = 0; i < p.m; ++i)
    for (Index g = 0; g < p.k / 32; ++g) xs[i * (p.k / 32) + g] = p.xs32[i], zps[i * (p.k / 32) + g] = p.x_zp[i];
  p.problem.x_quantized.group = 32;
  p.problem.x_quantized.scales = xs.data();
  p.problem.x_quantized.zero_points = zps.data();
  const std::vector<float> walk = p.emulated("codes:4:scale-product/lanes:8:halving:fma");
  Index saturated = 0, scaled = 0;
  for (Index i = 0; i < p.m; ++i) {
    for (Index j = 0; j < p.n; ++j) {
      ASSERT_EQ(bits(walk[i * p.n + j]), bits(avx2_like(p, i, j)));
      saturated += bits(walk[i * p.n + j]) != bits(avx2_like(p, i, j, true)) ? 1 : 0;
      scaled += bits(walk[i * p.n + j]) != bits(avx2_like(p, i, j, false, 3)) ? 1 : 0;
    }
  }
  EXPECT_GT(saturated, p.m * p.n / 2);
  EXPECT_GT(scaled, p.m * p.n / 2);
}

TEST(CodeWalk, SaysWhyAProblemCannotTakeIt) {
  IntProblem p;
  p.build(7);
  p.problem.walk = *parse_k_walk("codes:64:scale-product/seq");
  EXPECT_EQ(code_walk_unsupported(p.problem),
            "x_quant_group 32 is not a multiple of C = 64: a chunk would straddle two activation scales");
  p.problem.walk = *parse_k_walk("codes:4:scale-product/seq");
  p.weights.segments[0].af4.layout.dequant = Dequant::kF32;
  EXPECT_EQ(code_walk_unsupported(p.problem),
            "segment w declares dequant = f32, where a kernel that multiplies codes multiplies them as they are: "
            "declare dequant = exact");
  p.weights.segments[0].af4.layout.dequant = Dequant::kExact;
  p.weights.segments[0].af4.layout.variant = Af4Variant::kAffine;
  EXPECT_EQ(code_walk_unsupported(p.problem),
            "segment w is af4 without zero points: a code walk needs integer weight codes (int8, or AF4 variant = "
            "zero-point)");
  p.weights.segments[0].af4.layout.variant = Af4Variant::kZeroPoint;
  p.problem.x_quant.type = XQuantType::kNone;
  EXPECT_EQ(code_walk_unsupported(p.problem),
            "x_quant is not declared: a code walk sums integer activation codes (x_quant = int8 or uint8)");
}

}  // namespace
}  // namespace ncert::reference
