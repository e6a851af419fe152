// DumpBuilder (certify/io/dump_builder.h) both ways: a dump holding every kind of member, built
// from the typed structs, reads back through DumpReader with no finding and `ncert check` passes
// it; each kind of wrong input is refused before anything is written, with the code the reader
// gives the same file; the version is the least one that describes the file; a refused or
// abandoned dump leaves no file, and an existing file is kept unless overwrite is asked.
//
// Every weight and activation is a small integer (or a half or quarter of one), so every
// product and sum is exact in f32: the outputs computed here by a seq walk in double are the
// engine's bits under any order, and the bound, walk and identity checks must pass.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "certify/commands/check.h"
#include "certify/io/dump_builder.h"
#include "certify/io/dump_reader.h"
#include "reference/float_bits.h"

namespace ncert::certify {
namespace {

namespace fs = std::filesystem;
using reference::Af4Packing;
using reference::Af4Variant;
using reference::WeightFormat;

std::string scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("ncert_dump_builder_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  fs::remove(p);
  return p.string();
}

/// Files in the folder of `path` other than the dumps themselves: temporary names left behind.
int leftovers(const std::string& path) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path())) {
    if (e.path().filename().string().ends_with(".partial")) ++n;
  }
  return n;
}

// ---- the attention projection: K = 8, N = 16 in eight segments of two rows, one per kind ----

constexpr Index kK = 8, kInStride = 10, kN = 16, kOutStride = 18, kM = 4, kSlots = 4;

/// Everything one projection's arrays point at (DumpArray views do not own).
struct AttnData {
  std::vector<float> x, bias, residual;
  std::vector<double> w;  // [N, K], the real weights every segment encodes
  // segment storage
  std::vector<float> f32_values;
  std::vector<std::uint16_t> bf16_values, f16_values, affine_scales, affine_biases, zp_scales;
  std::vector<std::uint32_t> affine_codes;
  std::vector<std::uint8_t> codebook_codes, zp_codes, zero_points, e4m3_values;
  std::vector<float> codebook_scales, codebook_table, int8_scales, e4m3_scales;
  std::vector<std::int8_t> int8_values;
  std::vector<std::int32_t> selector = {0, 1, 2, -1}, commit_counts = {2, 1};
  std::vector<float> y_unpacked, y_packed, y_compact, y_before;
};

int code_at(Index r, Index k) { return static_cast<int>((3 * r + 5 * k) % 16); }

AttnData attn_data() {
  AttnData d;
  d.w.assign(kN * kK, 0.0);
  for (Index m = 0; m < kM; ++m) {
    for (Index k = 0; k < kInStride; ++k) d.x.push_back(k < kK ? static_cast<float>((m + 2 * k) % 5 - 2) : 99.0f);
  }
  auto set_w = [&](Index row, Index k, double v) { d.w[row * kK + k] = v; };
  for (Index r = 0; r < 2; ++r) {
    for (Index k = 0; k < kK; ++k) {
      const auto v = static_cast<float>((r + k) % 7 - 3);
      d.f32_values.push_back(v);  // rows 0-1: f32
      set_w(r, k, v);
      d.bf16_values.push_back(reference::f32_to_bf16(v + 1));  // rows 2-3: bf16
      set_w(2 + r, k, v + 1);
      d.f16_values.push_back(reference::f32_to_f16(v - 1));  // rows 4-5: f16
      set_w(4 + r, k, v - 1);
      d.int8_values.push_back(static_cast<std::int8_t>(v));  // rows 12-13: int8, scale 0.5
      set_w(12 + r, k, v * 0.5);
    }
  }
  // rows 6-7: AF4 affine, u32-lsb, scale 1 and bias -8 (bf16 0x3F80, 0xC100): w = q - 8.
  for (Index r = 0; r < 2; ++r) {
    std::uint32_t word = 0;
    for (Index k = 0; k < kK; ++k) {
      word |= static_cast<std::uint32_t>(code_at(6 + r, k)) << (4 * k);
      set_w(6 + r, k, code_at(6 + r, k) - 8);
    }
    d.affine_codes.push_back(word);
    d.affine_scales.push_back(0x3F80);
    d.affine_biases.push_back(0xC100);
  }
  // rows 8-9: AF4 custom codebook table[q] = q - 8, u8-msb (even k in the high nibble),
  // group_size 4, f32 scales 0.5: w = (q - 8) * 0.5.
  for (int q = 0; q < 16; ++q) d.codebook_table.push_back(static_cast<float>(q - 8));
  for (Index r = 0; r < 2; ++r) {
    for (Index k = 0; k < kK; k += 2) {
      d.codebook_codes.push_back(static_cast<std::uint8_t>(code_at(8 + r, k) << 4 | code_at(8 + r, k + 1)));
    }
    for (Index k = 0; k < kK; ++k) set_w(8 + r, k, (code_at(8 + r, k) - 8) * 0.5);
    d.codebook_scales.insert(d.codebook_scales.end(), {0.5f, 0.5f});
  }
  // rows 10-11: AF4 zero-point, u8-lsb (even k in the low nibble), group_size 4, zero points
  // 7 and 9 one per byte, f16 scales 0.25 (0x3400): w = (q - zp) * 0.25.
  for (Index r = 0; r < 2; ++r) {
    for (Index k = 0; k < kK; k += 2) {
      d.zp_codes.push_back(static_cast<std::uint8_t>(code_at(10 + r, k) | code_at(10 + r, k + 1) << 4));
    }
    d.zero_points.insert(d.zero_points.end(), {7, 9});
    d.zp_scales.insert(d.zp_scales.end(), {0x3400, 0x3400});
    for (Index k = 0; k < kK; ++k) set_w(10 + r, k, (code_at(10 + r, k) - (k < 4 ? 7 : 9)) * 0.25);
  }
  // rows 12-13: int8, group_size 4, scale_rows 2: one row of two scales, 0.5 each (set above).
  d.int8_scales = {0.5f, 0.5f};
  // rows 14-15: e4m3 codes of -1, 0, 1, 2 (0xB8, 0x00, 0x38, 0x40: bias 7, three mantissa
  // bits), one scale 2 for the whole segment (group_size K, scale_rows 2).
  const std::uint8_t e4m3[4] = {0xB8, 0x00, 0x38, 0x40};
  const double e4m3_value[4] = {-1, 0, 1, 2};
  for (Index r = 0; r < 2; ++r) {
    for (Index k = 0; k < kK; ++k) {
      const auto i = static_cast<std::size_t>((r + k) % 4);
      d.e4m3_values.push_back(e4m3[i]);
      set_w(14 + r, k, e4m3_value[i] * 2);
    }
  }
  d.e4m3_scales = {2.0f};
  for (Index j = 0; j < kN; ++j) d.bias.push_back(static_cast<float>(j % 3 - 1));
  for (Index i = 0; i < kM * kOutStride; ++i) d.residual.push_back(static_cast<float>(i % 4));
  // The engine: seq walk in f32 (exact here), then + bias, + residual, f32 output.
  auto row = [&](Index m, float* out) {
    for (Index j = 0; j < kN; ++j) {
      float acc = 0.0f;
      for (Index k = 0; k < kK; ++k) acc += d.x[m * kInStride + k] * static_cast<float>(d.w[j * kK + k]);
      out[j] = acc + d.bias[j] + d.residual[m * kOutStride + j];
    }
  };
  d.y_unpacked.assign(kM * kOutStride, 0.0f);
  for (Index m = 0; m < kM; ++m) row(m, &d.y_unpacked[m * kOutStride]);
  d.y_before = d.residual;  // the residual is added in place
  d.y_packed = d.y_before;
  d.y_compact.assign(kSlots * kOutStride, 0.0f);
  for (Index p = 0; p < kSlots; ++p) {
    if (d.selector[p] < 0) continue;
    row(d.selector[p], &d.y_compact[p * kOutStride]);
    for (Index j = 0; j < kN; ++j) d.y_packed[d.selector[p] * kOutStride + j] = d.y_compact[p * kOutStride + j];
  }
  return d;
}

/// The version 1 part of the projection: f32, bf16 and AF4 affine and codebook segments.
Projection attn_v1(const AttnData& d) {
  Projection p{.name = "attn",
               .k = kK,
               .n = 8,
               .in_stride = kInStride,
               .out_stride = kOutStride,
               .accumulator = "f32-rn",
               .output_dtype = DType::kF32,
               .epilogue = reference::Epilogue::kBiasResidual,
               .residual_at = reference::ResidualAt::kF32,
               .output_rounding = reference::OutputRounding::kNearestEven,
               .k_walk = "seq",
               .layer = 0,
               .role = "attention",
               .requests = 2,
               .block_rows = 2,
               .cap = 2};
  p.x = DumpArray(DType::kF32, d.x, {kM, kInStride});
  p.weight.push_back({.name = "s0_f32",
                      .format = WeightFormat::kF32,
                      .row_begin = 0,
                      .row_end = 2,
                      .values = DumpArray(DType::kF32, d.f32_values, {2, kK})});
  p.weight.push_back({.name = "s1_bf16",
                      .format = WeightFormat::kBf16,
                      .row_begin = 2,
                      .row_end = 4,
                      .values = DumpArray(DType::kBf16, d.bf16_values, {2, kK})});
  WeightSegment affine{.name = "s3_affine", .format = WeightFormat::kAf4, .row_begin = 4, .row_end = 6};
  affine.group_size = kK;
  affine.variant = Af4Variant::kAffine;
  affine.packing = Af4Packing::kU32Lsb;
  affine.dequant = reference::Dequant::kExact;
  affine.dequant_op = reference::DequantOp::kEither;
  affine.codes = DumpArray(DType::kU32, d.affine_codes, {2, 1});
  affine.scales = DumpArray(DType::kBf16, d.affine_scales, {2, 1});
  affine.biases = DumpArray(DType::kBf16, d.affine_biases, {2, 1});
  p.weight.push_back(affine);
  WeightSegment codebook{.name = "s4_codebook", .format = WeightFormat::kAf4, .row_begin = 6, .row_end = 8};
  codebook.group_size = 4;
  codebook.variant = Af4Variant::kCodebook;
  codebook.codebook = reference::Af4Codebook::kCustom;
  codebook.packing = Af4Packing::kU8Msb;
  codebook.codes = DumpArray(DType::kU8, d.codebook_codes, {2, 4});
  codebook.scales = DumpArray(DType::kF32, d.codebook_scales, {2, 2});
  codebook.codebook_table = DumpArray(DType::kF32, d.codebook_table, {16});
  p.weight.push_back(codebook);
  return p;
}

/// The outputs of a projection over rows [0, n) of the attention weights, in its own layout.
struct Outputs {
  std::vector<float> bias, y_unpacked, y_packed, y_compact, y_before, residual;
};

/// The attention data re-laid for N = n output columns (the first n rows of W, in the order
/// the segments are given); the v1 projection takes rows 0-3 and 6-9 as its rows 0-7.
Outputs outputs_for(const AttnData& d, const std::vector<Index>& w_rows) {
  Outputs o;
  const auto n = static_cast<Index>(w_rows.size());
  for (Index j = 0; j < n; ++j) o.bias.push_back(d.bias[w_rows[j]]);
  for (Index i = 0; i < kM * kOutStride; ++i) o.residual.push_back(static_cast<float>(i % 4));
  auto row = [&](Index m, float* out) {
    for (Index j = 0; j < n; ++j) {
      double acc = 0.0;  // exact: every term and partial sum is a small multiple of 1/8
      for (Index k = 0; k < kK; ++k) acc += d.x[m * kInStride + k] * d.w[w_rows[j] * kK + k];
      out[j] = static_cast<float>(acc + o.bias[j] + o.residual[m * kOutStride + j]);
    }
  };
  o.y_unpacked.assign(kM * kOutStride, 0.0f);
  for (Index m = 0; m < kM; ++m) row(m, &o.y_unpacked[m * kOutStride]);
  o.y_before = o.residual;
  o.y_packed = o.y_before;
  o.y_compact.assign(kSlots * kOutStride, 0.0f);
  for (Index p = 0; p < kSlots; ++p) {
    if (d.selector[p] < 0) continue;
    row(d.selector[p], &o.y_compact[p * kOutStride]);
    for (Index j = 0; j < n; ++j) o.y_packed[d.selector[p] * kOutStride + j] = o.y_compact[p * kOutStride + j];
  }
  return o;
}

void set_outputs(Projection& p, const AttnData& d, const Outputs& o, Index n) {
  p.n = n;
  p.bias = DumpArray(DType::kF32, o.bias, {n});
  p.residual = DumpArray(DType::kF32, o.residual, {kM, kOutStride});
  p.selector = DumpArray(DType::kI32, d.selector, {kSlots});
  p.commit_counts = DumpArray(DType::kI32, d.commit_counts, {2});
  p.y_unpacked = DumpArray(DType::kF32, o.y_unpacked, {kM, kOutStride});
  p.y_packed = DumpArray(DType::kF32, o.y_packed, {kM, kOutStride});
  p.y_compact = DumpArray(DType::kF32, o.y_compact, {kSlots, kOutStride});
  p.y_before = DumpArray(DType::kF32, o.y_before, {kM, kOutStride});
}

// ---- the W8A8 projection: int8 activations with zero points times int8 weights ----

struct W8a8Data {
  std::vector<float> x, x_scales, w_scales, y;
  std::vector<std::int8_t> x_codes, x_zero_points, w;
  std::vector<std::int32_t> selector = {0, 1};
};

/// x = (q - 1) * 0.5 exactly, so q = x / 0.5 + 1 is the code any rounding gives (§3.6).
W8a8Data w8a8_data() {
  W8a8Data d;
  for (Index m = 0; m < 2; ++m) {
    for (Index k = 0; k < kK; ++k) {
      const auto q = static_cast<std::int8_t>((m * 3 + k) % 9 - 4);
      d.x_codes.push_back(q);
      d.x.push_back(static_cast<float>((q - 1) * 0.5));
    }
    d.x_scales.insert(d.x_scales.end(), {0.5f, 0.5f});
    d.x_zero_points.insert(d.x_zero_points.end(), {1, 1});
  }
  for (Index r = 0; r < 2; ++r) {
    for (Index k = 0; k < kK; ++k) d.w.push_back(static_cast<std::int8_t>((r + 2 * k) % 5 - 2));
    d.w_scales.push_back(1.0f);
  }
  for (Index m = 0; m < 2; ++m) {
    for (Index j = 0; j < 2; ++j) {
      double acc = 0.0;
      for (Index k = 0; k < kK; ++k) acc += double{d.x[m * kK + k]} * d.w[j * kK + k];
      d.y.push_back(static_cast<float>(acc));
    }
  }
  return d;
}

Projection w8a8(const W8a8Data& d) {
  Projection p{.name = "w8a8",
               .k = kK,
               .n = 2,
               .accumulator = "f32-rn",
               .output_dtype = DType::kF32,
               .epilogue = reference::Epilogue::kNone};
  p.x_quant = reference::XQuantType::kInt8;
  p.x_quant_group = 4;
  p.x_quant_rounding = reference::XQuantRounding::kNearestEven;
  p.x = DumpArray(DType::kF32, d.x, {2, kK});
  p.x_quantized = DumpArray(DType::kI8, d.x_codes, {2, kK});
  p.x_scales = DumpArray(DType::kF32, d.x_scales, {2, 2});
  p.x_zero_points = DumpArray(DType::kI8, d.x_zero_points, {2, 2});
  WeightSegment s{.name = "w", .format = WeightFormat::kInt8, .row_begin = 0, .row_end = 2};
  s.values = DumpArray(DType::kI8, d.w, {2, kK});
  s.group_size = kK;
  s.scales = DumpArray(DType::kF32, d.w_scales, {2, 1});
  p.weight.push_back(s);
  p.selector = DumpArray(DType::kI32, d.selector, {2});
  p.y_unpacked = DumpArray(DType::kF32, d.y, {2, 2});
  return p;
}

// ---- the lm_head and its greedy run: T = 3 tokens over a vocabulary of 5 ----

struct HeadData {
  std::vector<float> x, w, logits;
  std::vector<std::int32_t> selector = {0, 1, 2}, tokens, prompt_tokens = {11, 12};
  std::vector<std::int64_t> positions = {2, 3, 4};
};

HeadData head_data() {
  HeadData d;
  for (Index i = 0; i < 3 * 4; ++i) d.x.push_back(static_cast<float>(i % 3 - 1));
  for (Index i = 0; i < 5 * 4; ++i) d.w.push_back(static_cast<float>((7 * i) % 5 - 2));
  for (Index t = 0; t < 3; ++t) {
    Index best = 0;
    for (Index v = 0; v < 5; ++v) {
      float acc = 0.0f;
      for (Index k = 0; k < 4; ++k) acc += d.x[t * 4 + k] * d.w[v * 4 + k];
      d.logits.push_back(acc);
      if (acc > d.logits[t * 5 + best]) best = v;
    }
    d.tokens.push_back(static_cast<std::int32_t>(best));
  }
  return d;
}

Projection lm_head(const HeadData& d) {
  Projection p{.name = "lm_head",
               .k = 4,
               .n = 5,
               .accumulator = "f32-rn",
               .output_dtype = DType::kF32,
               .epilogue = reference::Epilogue::kNone,
               .k_walk = "seq-fma",
               .role = "lm_head",
               .logits_run = "greedy"};
  p.x = DumpArray(DType::kF32, d.x, {3, 4});
  p.weight.push_back({.name = "vocab",
                      .format = WeightFormat::kF32,
                      .row_begin = 0,
                      .row_end = 5,
                      .values = DumpArray(DType::kF32, d.w, {5, 4})});
  p.selector = DumpArray(DType::kI32, d.selector, {3});
  p.y_unpacked = DumpArray(DType::kF32, d.logits, {3, 5});
  return p;
}

LogitsRun greedy(const HeadData& d) {
  return {.name = "greedy",
          .vocab = 5,
          .tie_break = "lowest",
          .prompt = "two tokens",
          .tokens = DumpArray(DType::kI32, d.tokens, {3}),
          .logits = DumpArray(DType::kF32, d.logits, {3, 5}),
          .positions = DumpArray(DType::kI64, d.positions, {3}),
          .prompt_tokens = DumpArray(DType::kI32, d.prompt_tokens, {2})};
}

void expect_clean_pass(const std::string& path, std::int64_t version) {
  auto reader = DumpReader::survey(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  for (const Finding& f : reader->model().findings) ADD_FAILURE() << f.path << ": " << f.message;
  EXPECT_EQ(reader->model().schema_version, version);
  CheckCommandOptions co;
  co.dump = path;
  auto report = run_check(co);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->error.has_value()) << report->error->to_string();
  EXPECT_EQ(report->verdict(), Verdict::kPass) << report->to_text(false);
  EXPECT_EQ(report->failed_checks(), 0);
}

// ---- the good dumps ----

TEST(DumpBuilder, EveryKindOfMemberReadsBackAndPasses) {
  const std::string path = scratch("every_member.h5");
  const AttnData d = attn_data();
  const W8a8Data q = w8a8_data();
  const HeadData h = head_data();
  // The whole attention projection: all eight segments, rows 0..15 in segment order.
  Projection attn = attn_v1(d);
  attn.weight[2].row_begin = 6, attn.weight[2].row_end = 8;   // affine: rows 6-7
  attn.weight[3].row_begin = 8, attn.weight[3].row_end = 10;  // codebook: rows 8-9
  attn.weight.insert(attn.weight.begin() + 2, {.name = "s2_f16",
                                               .format = WeightFormat::kF16,
                                               .row_begin = 4,
                                               .row_end = 6,
                                               .values = DumpArray(DType::kF16, d.f16_values, {2, kK})});
  WeightSegment zp{.name = "s5_zero_point", .format = WeightFormat::kAf4, .row_begin = 10, .row_end = 12};
  zp.group_size = 4;
  zp.variant = Af4Variant::kZeroPoint;
  zp.packing = Af4Packing::kU8Lsb;
  zp.zero_point_packing = reference::ZeroPointPacking::kU8;
  zp.dequant = reference::Dequant::kF32;
  zp.dequant_op = reference::DequantOp::kSubMul;
  zp.codes = DumpArray(DType::kU8, d.zp_codes, {2, 4});
  zp.scales = DumpArray(DType::kF16, d.zp_scales, {2, 2});
  zp.zero_points = DumpArray(DType::kU8, d.zero_points, {2, 2});
  attn.weight.push_back(zp);
  WeightSegment i8{.name = "s6_int8", .format = WeightFormat::kInt8, .row_begin = 12, .row_end = 14};
  i8.values = DumpArray(DType::kI8, d.int8_values, {2, kK});
  i8.group_size = 4;
  i8.scale_rows = 2;
  i8.dequant = reference::Dequant::kExact;
  i8.scales = DumpArray(DType::kF32, d.int8_scales, {1, 2});
  attn.weight.push_back(i8);
  WeightSegment fp8{.name = "s7_e4m3", .format = WeightFormat::kE4m3, .row_begin = 14, .row_end = 16};
  fp8.values = DumpArray(DType::kE4m3, d.e4m3_values, {2, kK});
  fp8.group_size = kK;
  fp8.scale_rows = 2;
  fp8.scales = DumpArray(DType::kF32, d.e4m3_scales, {1, 1});
  attn.weight.push_back(fp8);
  std::vector<Index> all_rows;
  for (Index j = 0; j < kN; ++j) all_rows.push_back(j);
  const Outputs o = outputs_for(d, all_rows);
  set_outputs(attn, d, o, kN);
  ASSERT_EQ(o.y_unpacked, d.y_unpacked);  // the f32 seq walk and the exact sum agree

  // A bf16 copy of the greedy logits (exact: small integers), and two state tensors.
  std::vector<std::uint16_t> logits_bf16;
  for (float v : h.logits) logits_bf16.push_back(reference::f32_to_bf16(v));
  const std::vector<float> cache = {1.0f, -2.0f, 0.5f, 4.0f, 0.0f, 3.0f};
  const std::vector<std::uint8_t> fp8_state = {0x38, 0x40, 0xB8, 0x00};
  const std::vector<float> scalar = {42.0f};

  auto b = DumpBuilder::create(path, {.engine = "builder-test", .build = "unit", .model = "toy", .device = "cpu"});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->schema_version(), 1);
  ASSERT_TRUE(b->add_projection(lm_head(h)).ok());  // before its run: checked when the run comes
  ASSERT_TRUE(b->add_projection(attn).ok()) << b->add_projection(attn).to_string();
  EXPECT_EQ(b->schema_version(), 2);
  EXPECT_EQ(b->version_2_reason(), "/projections/attn/weight/s2_f16: format = \"f16\"");
  const Status sq = b->add_projection(w8a8(q));
  ASSERT_TRUE(sq.ok()) << sq.to_string();
  ASSERT_TRUE(b->add_logits_run(greedy(h)).ok());
  const Status sb = b->add_logits_run({.name = "greedy_bf16",
                                       .vocab = 5,
                                       .tokens = DumpArray(DType::kI32, h.tokens, {3}),
                                       .logits = DumpArray(DType::kBf16, logits_bf16, {3, 5})});
  ASSERT_TRUE(sb.ok()) << sb.to_string();
  ASSERT_TRUE(
      b->add_tensor({.name = "layer0/k_cache", .values = DumpArray(DType::kF32, cache, {2, 3}), .compare = "ulp:1"})
          .ok());
  ASSERT_TRUE(b->add_tensor({.name = "layer0/fp8_state", .values = DumpArray(DType::kE4m3, fp8_state, {4})}).ok());
  ASSERT_TRUE(b->add_tensor({.name = "step", .values = DumpArray(DType::kF32, scalar, {})}).ok());
  EXPECT_FALSE(fs::exists(path)) << "the dump appears only at close()";
  const Status closed = b->close();
  ASSERT_TRUE(closed.ok()) << closed.to_string();
  EXPECT_EQ(leftovers(path), 0);
  expect_clean_pass(path, 2);

  auto reader = DumpReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const DumpModel& model = reader->model();
  ASSERT_EQ(model.projections.size(), 3u);
  EXPECT_EQ(model.logits.size(), 2u);
  EXPECT_EQ(model.tensors.size(), 3u);
  EXPECT_EQ(model.engine, "builder-test");
  auto y = reader->read_f32("/projections/attn/y_packed");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*y, o.y_packed);
  // Which checks ran: every projection check the members enable, and quantize on w8a8.
  CheckCommandOptions co;
  co.dump = path;
  auto report = run_check(co);
  ASSERT_TRUE(report.ok());
  std::set<std::string> passed;
  for (const CheckResult& c : report->checks) {
    if (c.verdict == Verdict::kPass) passed.insert(c.id);
  }
  for (const char* id :
       {"projections/attn/identity", "projections/attn/untouched", "projections/attn/bound", "projections/attn/walk",
        "projections/w8a8/quantize", "projections/w8a8/bound", "projections/lm_head/walk", "logits/greedy/witness"}) {
    EXPECT_TRUE(passed.count(id)) << id << "\n" << report->to_text(false);
  }
}

// ---- versions ----

/// A version 1 dump: the attention projection's f32, bf16, affine and codebook segments.
struct V1 {
  AttnData d = attn_data();
  Outputs o = outputs_for(d, {0, 1, 2, 3, 6, 7, 8, 9});
  Projection p = [this] {
    Projection q = attn_v1(d);
    set_outputs(q, d, o, 8);
    return q;
  }();
};

TEST(DumpBuilder, VersionIsOneUntilAVersionTwoMemberOrValueIsAdded) {
  V1 v1;
  const std::string path = scratch("v1.h5");
  {
    auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->add_projection(v1.p).ok()) << b->add_projection(v1.p).to_string();
    const std::vector<std::int32_t> tokens = {1};
    const std::vector<float> logits = {0.0f, 1.0f};
    ASSERT_TRUE(b->add_logits_run({.name = "r",
                                   .vocab = 2,
                                   .tokens = DumpArray(DType::kI32, tokens, {1}),
                                   .logits = DumpArray(DType::kF32, logits, {1, 2})})
                    .ok());
    const std::vector<std::uint16_t> f16_state = {0x3C00};  // an f16 tensor is version 1 (§6.1)
    ASSERT_TRUE(b->add_tensor({.name = "t", .values = DumpArray(DType::kF16, f16_state, {1})}).ok());
    EXPECT_EQ(b->schema_version(), 1);
    EXPECT_EQ(b->version_2_reason(), "");
    ASSERT_TRUE(b->close().ok());
  }
  expect_clean_pass(path, 1);

  // Each version 2 feature alone makes the file declare 2, naming it.
  const std::vector<std::uint16_t> x_f16 = [&] {
    std::vector<std::uint16_t> out;
    for (float v : v1.d.x) out.push_back(reference::f32_to_f16(v));
    return out;
  }();
  const std::vector<std::uint16_t> logits_f16 = {0x0000, 0x3C00};
  const std::vector<std::uint8_t> e5m2_state = {0x3C};
  struct Case {
    std::string what;
    std::function<Status(DumpBuilder&)> add;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"f16 x",
       [&](DumpBuilder& b) {
         Projection p = v1.p;
         p.x = DumpArray(DType::kF16, x_f16, {kM, kInStride});
         return b.add_projection(p);
       },
       "/projections/attn/x: an f16 x"},
      {"lanes walk",
       [&](DumpBuilder& b) {
         Projection p = v1.p;
         p.k_walk = "lanes:4:halving:fma";
         return b.add_projection(p);
       },
       "/projections/attn: k_walk = \"lanes:4:halving:fma\""},
      {"f16 logits",
       [&](DumpBuilder& b) {
         const std::vector<std::int32_t> tokens = {1};
         return b.add_logits_run({.name = "r",
                                  .vocab = 2,
                                  .tokens = DumpArray(DType::kI32, tokens, {1}),
                                  .logits = DumpArray(DType::kF16, logits_f16, {1, 2})});
       },
       "/logits/r/logits: f16 logits"},
      {"e5m2 tensor",
       [&](DumpBuilder& b) { return b.add_tensor({.name = "s", .values = DumpArray(DType::kE5m2, e5m2_state, {1})}); },
       "/tensors/s: an e5m2 tensor"},
  };
  for (const Case& c : cases) {
    const std::string p2 = scratch("v2.h5");
    auto b = DumpBuilder::create(p2, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    const Status s = c.add(*b);
    ASSERT_TRUE(s.ok()) << c.what << ": " << s.to_string();
    EXPECT_EQ(b->schema_version(), 2) << c.what;
    EXPECT_EQ(b->version_2_reason(), c.reason) << c.what;
    ASSERT_TRUE(b->close().ok());
    auto reader = DumpReader::open(p2);
    ASSERT_TRUE(reader.ok()) << c.what << ": " << reader.status().to_string();
    EXPECT_EQ(reader->model().schema_version, 2) << c.what;
  }
}

// ---- refusals: each with the reader's code, nothing written, the builder still usable ----

struct Refusal {
  std::string what;
  std::function<void(Projection&)> spoil;
  ErrorCode code;
  std::string says;  ///< a piece of the message: the path, the member, the value
};

TEST(DumpBuilder, EachWrongProjectionIsRefusedWithTheReadersCode) {
  V1 v1;
  const std::vector<std::int32_t> wide_x(kM * kInStride, 1);
  const std::vector<float> short_x(kM * 9, 1.0f);
  const std::vector<std::uint16_t> bf16_y(kM * kOutStride, 0);
  const std::vector<float> float_patterns(2 * kK, 1.0f);
  using E = ErrorCode;
  const std::vector<Refusal> refusals = {
      {"no x", [](Projection& p) { p.x = {}; }, E::kMissingMember, "/projections/attn: missing dataset \"x\""},
      {"no accumulator", [](Projection& p) { p.accumulator.clear(); }, E::kMissingAttribute,
       "missing attribute \"accumulator\""},
      {"no k", [](Projection& p) { p.k.reset(); }, E::kMissingAttribute, "missing attribute \"k\""},
      {"k = 0", [](Projection& p) { p.k = 0; }, E::kAttributeInvalid, "attribute \"k\" = 0 is below 1"},
      {"i32 x",
       [&](Projection& p) {
         p.x = DumpArray(DType::kI32, wide_x, {kM, kInStride});
       },
       E::kDatatypeRefused, "/projections/attn/x: dtype i32 where f32 or bf16 or f16 is required"},
      {"x narrower than in_stride",
       [&](Projection& p) {
         p.x = DumpArray(DType::kF32, short_x, {kM, 9});
       },
       E::kShapeMismatch,
       "/projections/attn/x: shape [4, 9] but the attributes require [*, 10] (in_stride: attribute in_stride, k when "
       "absent)"},
      {"float elements declared bf16",
       [&](Projection& p) {
         p.weight[1].values = DumpArray(DType::kBf16, float_patterns, {2, kK});
       },
       E::kInvalidArgument, "/projections/attn/weight/s1_bf16/values: float elements declared bf16"},
      {"f32 values in a bf16 segment",
       [&](Projection& p) {
         p.weight[1].values = DumpArray(DType::kF32, float_patterns, {2, kK});
       },
       E::kDatatypeRefused, "s1_bf16/values: dtype f32 where bf16 is required"},
      {"bf16 output where f32 is declared",
       [&](Projection& p) {
         p.y_packed = DumpArray(DType::kBf16, bf16_y, {kM, kOutStride});
       },
       E::kDatatypeRefused, "/projections/attn/y_packed: dtype bf16 where f32 is required"},
      {"accumulator", [](Projection& p) { p.accumulator = "f64"; }, E::kAccumulatorUnknown, "accumulator \"f64\""},
      {"k_walk", [](Projection& p) { p.k_walk = "lanes:3:halving"; }, E::kKWalkInvalid, "lanes:3:halving"},
      {"epilogue", [](Projection& p) { p.epilogue = static_cast<reference::Epilogue>(9); }, E::kEpilogueUnknown,
       "epilogue \"?\" is not one of none, bias, residual, bias+residual"},
      {"output_dtype", [](Projection& p) { p.output_dtype = DType::kI8; }, E::kOutputDtypeUnknown,
       "output_dtype \"i8\" is not one of f32, bf16, f16"},
      {"output_rounding", [](Projection& p) { p.output_rounding = static_cast<reference::OutputRounding>(7); },
       E::kOutputRoundingUnknown, "output_rounding"},
      {"x_quant", [](Projection& p) { p.x_quant = static_cast<reference::XQuantType>(9); }, E::kXQuantUnknown,
       "x_quant"},
      {"weights_xxh3", [](Projection& p) { p.weights_xxh3 = "ABC"; }, E::kAttributeInvalid, "weights_xxh3 = \"ABC\""},
      {"requests x block_rows", [](Projection& p) { p.block_rows = 3; }, E::kShapeMismatch,
       "4 rows but requests x block_rows = 2 x 3 = 6"},
      {"no weight", [](Projection& p) { p.weight.clear(); }, E::kMissingMember, "missing group \"weight\""},
      {"bias without a bias epilogue", [](Projection& p) { p.epilogue = reference::Epilogue::kResidual; },
       E::kInvalidArgument, "/projections/attn/bias: given, but it is read only when epilogue-has-bias holds"},
      {"x_quant_group without x_quant", [](Projection& p) { p.x_quant_group = 4; }, E::kInvalidArgument,
       "attribute \"x_quant_group\" given"},
      {"format", [](Projection& p) { p.weight[0].format = static_cast<WeightFormat>(20); }, E::kFormatUnknown,
       "/projections/attn/weight/s0_f32: format \"?\""},
      {"row_end <= row_begin", [](Projection& p) { p.weight[0].row_end = 0; }, E::kAttributeInvalid,
       "row_end 0 <= row_begin 0"},
      {"variant", [](Projection& p) { p.weight[2].variant = static_cast<Af4Variant>(9); }, E::kAf4VariantUnknown,
       "AF4 variant"},
      {"no codebook", [](Projection& p) { p.weight[3].codebook.reset(); }, E::kMissingAttribute,
       "s4_codebook: missing attribute \"codebook\""},
      {"codebook", [](Projection& p) { p.weight[3].codebook = reference::Af4Codebook::kNone; }, E::kAf4CodebookUnknown,
       "AF4 codebook"},
      {"packing", [](Projection& p) { p.weight[2].packing = static_cast<Af4Packing>(9); }, E::kAf4PackingUnknown,
       "AF4 packing"},
      {"dequant", [](Projection& p) { p.weight[2].dequant = static_cast<reference::Dequant>(9); },
       E::kAf4DequantUnknown, "AF4 dequant"},
      {"dequant_op of another variant", [](Projection& p) { p.weight[2].dequant_op = reference::DequantOp::kSubMul; },
       E::kDequantOpUnknown, "applies to variant zero-point only"},
      {"no biases", [](Projection& p) { p.weight[2].biases = {}; }, E::kMissingMember,
       "s3_affine: missing dataset \"biases\""},
      {"u8 codes for u32-lsb", [&](Projection& p) { p.weight[2].codes = p.weight[3].codes; }, E::kDatatypeRefused,
       "s3_affine/codes: dtype u8 where u32 is required"},
      {"biases unlike scales",
       [&](Projection& p) {
         p.weight[2].biases = DumpArray(DType::kF32, float_patterns, {2, 1});
       },
       E::kInvalidArgument, "holds 2 elements but 16 were given"},
  };
  for (const Refusal& r : refusals) {
    const std::string path = scratch("refused.h5");
    auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    Projection p = v1.p;
    r.spoil(p);
    const Status s = b->add_projection(p);
    EXPECT_EQ(s.code(), r.code) << r.what << ": " << s.to_string();
    EXPECT_NE(s.message().find(r.says), std::string::npos) << r.what << ": " << s.to_string();
    // Nothing of it was written, and the builder still writes a clean dump.
    ASSERT_TRUE(b->add_projection(v1.p).ok()) << r.what;
    ASSERT_TRUE(b->close().ok()) << r.what;
    auto reader = DumpReader::survey(path);
    ASSERT_TRUE(reader.ok());
    EXPECT_TRUE(reader->model().findings.empty()) << r.what << ": " << reader->model().findings.front().message;
    EXPECT_EQ(reader->model().projections.size(), 1u) << r.what;
  }
}

TEST(DumpBuilder, WrongRunsAndTensorsAreRefusedWithTheReadersCode) {
  const std::string path = scratch("runs.h5");
  auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
  ASSERT_TRUE(b.ok());
  const std::vector<std::int32_t> tokens = {1, 0};
  const std::vector<std::int64_t> tokens64 = {1, 0};
  const std::vector<float> logits = {0, 1, 0, 1, 0, 0};
  const LogitsRun good{.name = "r",
                       .vocab = 3,
                       .tokens = DumpArray(DType::kI32, tokens, {2}),
                       .logits = DumpArray(DType::kF32, logits, {2, 3})};
  LogitsRun r = good;
  r.vocab.reset();
  EXPECT_EQ(b->add_logits_run(r).code(), ErrorCode::kMissingAttribute);
  r = good;
  r.tokens = DumpArray(DType::kI64, tokens64, {2});
  EXPECT_EQ(b->add_logits_run(r).code(), ErrorCode::kDatatypeRefused);
  r = good;
  r.vocab = 2;
  Status s = b->add_logits_run(r);
  EXPECT_EQ(s.code(), ErrorCode::kShapeMismatch) << s.to_string();
  EXPECT_NE(s.message().find("/logits/r/logits: shape [2, 3] but the attributes require [2, 2]"), std::string::npos);
  r = good;
  r.tie_break = "highest";
  s = b->add_logits_run(r);
  EXPECT_EQ(s.code(), ErrorCode::kAttributeInvalid);
  EXPECT_NE(s.message().find("tie_break = \"highest\"; only \"lowest\" is defined"), std::string::npos);
  r = good;
  r.logits = {};
  EXPECT_EQ(b->add_logits_run(r).code(), ErrorCode::kMissingMember);
  EXPECT_EQ(b->add_tensor({.name = "i", .values = DumpArray(DType::kI32, tokens, {2})}).code(),
            ErrorCode::kDatatypeRefused);
  EXPECT_EQ(b->add_tensor({.name = "a//b", .values = DumpArray(DType::kF32, logits, {6})}).code(),
            ErrorCode::kInvalidArgument);
  ASSERT_TRUE(b->add_logits_run(good).ok());
  EXPECT_EQ(b->add_logits_run(good).code(), ErrorCode::kInvalidArgument);  // the same name twice
  ASSERT_TRUE(b->add_tensor({.name = "a/b", .values = DumpArray(DType::kF32, logits, {6})}).ok());
  EXPECT_EQ(b->add_tensor({.name = "a", .values = DumpArray(DType::kF32, logits, {6})}).code(),
            ErrorCode::kInvalidArgument);  // would be a dataset where a group is
  ASSERT_TRUE(b->close().ok());
  expect_clean_pass(path, 1);
}

TEST(DumpBuilder, AnLmHeadWithoutItsRunOrOfTheWrongShapeIsRefused) {
  const HeadData h = head_data();
  const std::string path = scratch("lm_head.h5");
  {
    auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->add_projection(lm_head(h)).ok());
    const Status s = b->close();
    EXPECT_EQ(s.code(), ErrorCode::kMissingMember) << s.to_string();
    EXPECT_NE(s.message().find("logits_run = \"greedy\" names no /logits run"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(leftovers(path), 0);
  auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
  ASSERT_TRUE(b.ok());
  LogitsRun run = greedy(h);
  run.vocab = 4;
  std::vector<float> narrow(3 * 4, 0.0f);
  run.logits = DumpArray(DType::kF32, narrow, {3, 4});
  ASSERT_TRUE(b->add_logits_run(run).ok());
  const Status s = b->add_projection(lm_head(h));
  EXPECT_EQ(s.code(), ErrorCode::kShapeMismatch) << s.to_string();
  EXPECT_NE(s.message().find("3 x 5 outputs but the run has 3 tokens x vocab 4"), std::string::npos);
}

// ---- the reader, given the same fault, says the same ----

/// Replaces attribute `name` of `object` by a string or an integer, or deletes the link
/// `object/name` (value nullopt with as_link), with the plain HDF5 API: a fault the builder
/// would not write.
void rewrite(const std::string& file, const std::string& object, const std::string& name,
             const std::optional<std::string>& text, std::optional<std::int64_t> number = std::nullopt,
             bool as_link = false) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  if (as_link) {
    EXPECT_GE(H5Ldelete(f, (object + "/" + name).c_str(), H5P_DEFAULT), 0);
    H5Fclose(f);
    return;
  }
  const hid_t o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
  ASSERT_GE(o, 0);
  if (H5Aexists(o, name.c_str()) > 0) H5Adelete(o, name.c_str());
  const hid_t space = H5Screate(H5S_SCALAR);
  if (text) {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    const hid_t a = H5Acreate2(o, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char* value = text->c_str();
    EXPECT_GE(H5Awrite(a, type, &value), 0);
    H5Aclose(a);
    H5Tclose(type);
  } else {
    const hid_t a = H5Acreate2(o, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &*number), 0);
    H5Aclose(a);
  }
  H5Sclose(space);
  H5Oclose(o);
  H5Fclose(f);
}

TEST(DumpBuilder, TheReaderRefusesTheSameFaultWithTheSameStatus) {
  V1 v1;
  struct Same {
    std::string what;
    std::function<void(Projection&)> spoil;
    std::string object, member;
    std::optional<std::string> text;
    std::optional<std::int64_t> number;
    bool as_link = false;
  };
  const std::string attn = "/projections/attn";
  const std::vector<Same> cases = {
      {"accumulator", [](Projection& p) { p.accumulator = "f64"; }, attn, "accumulator", "f64", {}},
      {"k_walk", [](Projection& p) { p.k_walk = "lanes:3:halving"; }, attn, "k_walk", "lanes:3:halving", {}},
      {"epilogue", [](Projection& p) { p.epilogue = static_cast<reference::Epilogue>(9); }, attn, "epilogue", "?", {}},
      {"output_dtype", [](Projection& p) { p.output_dtype = DType::kI8; }, attn, "output_dtype", "i8", {}},
      {"k = 0", [](Projection& p) { p.k = 0; }, attn, "k", std::nullopt, 0},
      {"k = 2^33", [](Projection& p) { p.k = Index{1} << 33; }, attn, "k", std::nullopt, std::int64_t{1} << 33},
      {"format",
       [](Projection& p) { p.weight[0].format = static_cast<WeightFormat>(20); },
       attn + "/weight/s0_f32",
       "format",
       "?",
       {}},
      {"dequant_op",
       [](Projection& p) { p.weight[2].dequant_op = reference::DequantOp::kSubMul; },
       attn + "/weight/s3_affine",
       "dequant_op",
       "sub-mul",
       {}},
      {"no x", [](Projection& p) { p.x = {}; }, attn, "x", std::nullopt, {}, true},
      {"no biases",
       [](Projection& p) { p.weight[2].biases = {}; },
       attn + "/weight/s3_affine",
       "biases",
       std::nullopt,
       {},
       true},
  };
  for (const Same& c : cases) {
    const std::string path = scratch("same.h5");
    auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    Projection p = v1.p;
    c.spoil(p);
    const Status by_builder = b->add_projection(p);
    ASSERT_TRUE(b->add_projection(v1.p).ok());
    ASSERT_TRUE(b->close().ok());
    rewrite(path, c.object, c.member, c.text, c.number, c.as_link);
    auto read = DumpReader::open(path);
    ASSERT_FALSE(read.ok()) << c.what;
    EXPECT_EQ(by_builder.code(), read.status().code()) << c.what;
    EXPECT_EQ(by_builder.message(), read.status().message()) << c.what;
  }
}

TEST(DumpBuilder, AnLmHeadOfAnEmptyRunNameIsRefusedAsTheReaderRefusesIt) {
  // logits_run = "" names no run; read as absent, the run's witnesses went uncertified. The
  // builder wrote it; the reader refuses it (223), and now the builder does, in the same words.
  const HeadData h = head_data();
  const std::string path = scratch("lm_head_empty_run.h5");
  Projection empty = lm_head(h);
  empty.logits_run = "";
  Status by_builder;
  {
    auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    by_builder = b->add_projection(empty);
    EXPECT_EQ(by_builder.code(), ErrorCode::kMissingMember) << by_builder.to_string();
    EXPECT_NE(by_builder.message().find("logits_run = \"\" names no /logits run"), std::string::npos)
        << by_builder.to_string();
    ASSERT_TRUE(b->add_logits_run(greedy(h)).ok());
    ASSERT_TRUE(b->add_projection(lm_head(h)).ok());
    ASSERT_TRUE(b->close().ok());
  }
  rewrite(path, "/projections/lm_head", "logits_run", std::string());
  auto read = DumpReader::open(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), by_builder.code());
  EXPECT_EQ(read.status().message(), by_builder.message());
}

// ---- the file: appears only whole, never replaces one unless asked ----

TEST(DumpBuilder, NoHalfWrittenFileAndNoSilentOverwrite) {
  V1 v1;
  const std::string path = scratch("kept.h5");
  {
    auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->add_projection(v1.p).ok());
  }  // destroyed without close(): nothing appears
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(leftovers(path), 0);
  {
    auto b = DumpBuilder::create(path, {.engine = "first", .build = "b"});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->add_projection(v1.p).ok());
    ASSERT_TRUE(b->close().ok());
  }
  EXPECT_EQ(DumpBuilder::create(path, {.engine = "second", .build = "b"}).status().code(), ErrorCode::kOutputExists);
  EXPECT_EQ(DumpBuilder::create(path, {.engine = "", .build = "b", .overwrite = true}).status().code(),
            ErrorCode::kInvalidArgument);
  {
    // A file that appears between create() and close() is not replaced either.
    const std::string late = scratch("late.h5");
    auto b = DumpBuilder::create(late, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->add_projection(v1.p).ok());
    fs::copy_file(path, late);
    EXPECT_EQ(b->close().code(), ErrorCode::kOutputExists);
    EXPECT_EQ(DumpReader::open(late)->model().engine, "first");
    EXPECT_EQ(leftovers(late), 0);
  }
  {
    auto b = DumpBuilder::create(path, {.engine = "second", .build = "b", .overwrite = true});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->add_projection(v1.p).ok());
    EXPECT_EQ(DumpReader::open(path)->model().engine, "first");  // replaced only at close()
    ASSERT_TRUE(b->close().ok());
    EXPECT_EQ(b->add_projection(v1.p).code(), ErrorCode::kInvalidArgument);  // closed
  }
  EXPECT_EQ(DumpReader::open(path)->model().engine, "second");
  // A directory, or a path whose directory is missing, is refused at create(), naming the path
  // given (an outside engine's wrote every projection before close() said so, or named the
  // temporary file).
  const std::string dir = fs::path(path).parent_path().string();
  const Status is_dir = DumpBuilder::create(dir, {.engine = "e", .build = "b", .overwrite = true}).status();
  EXPECT_EQ(is_dir.code(), ErrorCode::kInvalidArgument) << is_dir.to_string();
  EXPECT_NE(is_dir.message().find("is a directory"), std::string::npos) << is_dir.to_string();
  const std::string orphan = dir + "/no-such-dir/d.h5";
  const Status missing = DumpBuilder::create(orphan, {.engine = "e", .build = "b"}).status();
  EXPECT_EQ(missing.message(), orphan + ": " + dir + "/no-such-dir: the directory does not exist")
      << missing.to_string();
}

TEST(DumpBuilder, AProjectionOfNoRowsIsLeftOutWithANote) {
  // An expert no token was routed to: checked before as "block_rows 0", "no activations x"
  // beside an x, and counted by the dump's vacuity (an outside engine's). The reader notes it
  // and leaves it out; the rest of the dump is read as ever.
  V1 v1;
  const std::string path = scratch("zero-rows.h5");
  {
    auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->add_projection(v1.p).ok());
    ASSERT_TRUE(b->close().ok());
  }
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, "/projections/attn/x", H5P_DEFAULT), 0);
    const hsize_t dims[2] = {0, static_cast<hsize_t>(kInStride)};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t ds = H5Dcreate2(f, "/projections/attn/x", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(f);
  }
  const auto r = DumpReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->model().projections.empty());
  int noted = 0;
  for (const Finding& f : r->model().findings) {
    noted += f.severity == Severity::kNote && f.path == "/projections/attn/x" &&
             f.message == "0 rows: nothing to certify; the projection is left out";
  }
  EXPECT_EQ(noted, 1);
  EXPECT_EQ(r->model().projections_without_rows, 1);
  // The dump's vacuity names it: "holds no projection" read as if it were not in the file.
  CheckCommandOptions co;
  co.dump = path;
  auto report = run_check(co);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const CheckResult& vacuity = report->checks.back();
  EXPECT_EQ(vacuity.verdict, Verdict::kFail);
  EXPECT_NE(vacuity.reason.find("holds no projection with rows (1 of 0 rows left out) and no logits run"),
            std::string::npos)
      << vacuity.reason;
}

TEST(DumpBuilder, AMovedFromBuilderRefusesWhatItIsAsked) {
  // An engine's use after std::move crashed (and left the moved-to builder's temporary file,
  // which the crash kept from being removed).
  V1 v1;
  const std::string path = scratch("moved.h5");
  auto made = DumpBuilder::create(path, {.engine = "e", .build = "b"});
  ASSERT_TRUE(made.ok());
  DumpBuilder a = std::move(made).value();
  DumpBuilder b = std::move(a);
  // NOLINTBEGIN(bugprone-use-after-move): the use after the move is what this test makes
  EXPECT_EQ(a.add_projection(v1.p).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(a.close().message().find("was moved from"), std::string::npos);
  EXPECT_EQ(a.schema_version(), 1);
  EXPECT_TRUE(a.version_2_reason().empty());
  a.abort();
  // NOLINTEND(bugprone-use-after-move)
  ASSERT_TRUE(b.add_projection(v1.p).ok());
  ASSERT_TRUE(b.close().ok());
  EXPECT_TRUE(DumpReader::open(path).ok());
  EXPECT_EQ(leftovers(path), 0);
}

}  // namespace
}  // namespace ncert::certify
