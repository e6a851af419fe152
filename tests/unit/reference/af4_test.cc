// AF4 decoding against hand-computed vectors: every variant x packing x scale type, negative
// scales, the exact / alg / kernel outputs of each dequant mode.
#include "reference/af4.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "reference/float_bits.h"

namespace ncert::reference {
namespace {

// Affine, K = 16, group_size = 8, codes q = 0..15 on row 0 and all 15 on row 1.
// Row 0: group 0 s = 0.5, b = -1  -> w = -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5
//        group 1 s = -0.25, b = 2 -> w = 0, -0.25, -0.5, -0.75, -1, -1.25, -1.5, -1.75
// Row 1: group 0 s = 1, b = 0 -> 15 ... ; group 1 s = 2, b = -30 -> 0 ...
const std::vector<double> kAffineRow0 = {-1, -0.5,  0,    0.5,   1,  1.5,   2,    2.5,
                                         0,  -0.25, -0.5, -0.75, -1, -1.25, -1.5, -1.75};
const std::vector<std::uint16_t> kAffineScales = {0x3F00 /*0.5*/, 0xBE80 /*-0.25*/, 0x3F80 /*1*/, 0x4000 /*2*/};
const std::vector<std::uint16_t> kAffineBiases = {0xBF80 /*-1*/, 0x4000 /*2*/, 0x0000 /*0*/, 0xC1F0 /*-30*/};

Af4View affine_view(Af4Packing packing, const std::vector<std::uint8_t>& codes) {
  Af4View v;
  v.layout.variant = Af4Variant::kAffine;
  v.layout.packing = packing;
  v.layout.group_size = 8;
  v.layout.scale_dtype = DType::kBf16;
  v.rows = 2;
  v.k = 16;
  v.codes = codes.data();
  v.scales = kAffineScales.data();
  v.biases = kAffineBiases.data();
  return v;
}

void expect_affine(const Af4View& v) {
  std::vector<double> exact(16);
  af4_decode_row(v, 0, DType::kBf16, exact.data(), nullptr, nullptr);
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(af4_code(v, 0, c), c) << c;
    EXPECT_EQ(exact[c], kAffineRow0[c]) << c;
  }
  af4_decode_row(v, 1, DType::kBf16, exact.data(), nullptr, nullptr);
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(af4_code(v, 1, c), 15);
    EXPECT_EQ(exact[c], c < 8 ? 15.0 : 0.0) << c;
  }
}

TEST(Af4, AffineU32LsbElementIInBits4i) {
  // word0 = 0x76543210 (element i in bits 4i..4i+3), word1 = 0xFEDCBA98, little-endian bytes.
  const std::uint32_t words[4] = {0x76543210u, 0xFEDCBA98u, 0xFFFFFFFFu, 0xFFFFFFFFu};
  std::vector<std::uint8_t> codes(16);
  std::memcpy(codes.data(), words, 16);  // the dataset's raw little-endian bytes
  expect_affine(affine_view(Af4Packing::kU32Lsb, codes));
}

TEST(Af4, AffineU8LsbFirstElementInLowNibble) {
  const std::vector<std::uint8_t> codes = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,
                                           0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  expect_affine(affine_view(Af4Packing::kU8Lsb, codes));
}

TEST(Af4, AffineU8MsbFirstElementInHighNibble) {
  const std::vector<std::uint8_t> codes = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF,
                                           0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  expect_affine(affine_view(Af4Packing::kU8Msb, codes));
}

TEST(Af4, CodebookNf4WithF16ScalesAndNegativeScale) {
  // K = 8, group 4; q = 0 7 15 1 | 14 8 3 12; s = 2 (f16 0x4000) then -0.5 (f16 0xB800).
  const std::vector<std::uint8_t> codes = {0x70, 0x1F, 0x8E, 0xC3};  // u8-lsb
  const std::vector<std::uint16_t> scales = {0x4000, 0xB800};
  Af4View v;
  v.layout.variant = Af4Variant::kCodebook;
  v.layout.codebook = Af4Codebook::kNf4;
  v.layout.table = builtin_codebook(Af4Codebook::kNf4);
  v.layout.packing = Af4Packing::kU8Lsb;
  v.layout.group_size = 4;
  v.layout.scale_dtype = DType::kF16;
  v.rows = 1;
  v.k = 8;
  v.codes = codes.data();
  v.scales = scales.data();
  const double want[8] = {-1.0 * 2,
                          0.0,
                          1.0 * 2,
                          -0.6961928009986877 * 2,
                          0.7229568362236023 * -0.5,
                          0.07958029955625534 * -0.5,
                          -0.39491748809814453 * -0.5,
                          0.44070982933044434 * -0.5};
  std::vector<double> exact(8), alg(8);
  std::vector<float> kernel(8);
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data());
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(exact[c], want[c]) << c;
    EXPECT_EQ(alg[c], std::fabs(want[c])) << c;
    EXPECT_EQ(kernel[c], static_cast<float>(want[c])) << c;  // exact in f32 here
  }
}

TEST(Af4, CodebookAf464WithF32ScalesU8Msb) {
  // q = 1, 15 with s = 3.0 (f32): w = f32(-0.69441008) * 3, 3.
  const std::vector<std::uint8_t> codes = {0x1F};
  const std::vector<float> scales = {3.0f};
  Af4View v;
  v.layout.variant = Af4Variant::kCodebook;
  v.layout.codebook = Af4Codebook::kAf4_64;
  v.layout.table = builtin_codebook(Af4Codebook::kAf4_64);
  v.layout.packing = Af4Packing::kU8Msb;
  v.layout.group_size = 2;
  v.layout.scale_dtype = DType::kF32;
  v.rows = 1;
  v.k = 2;
  v.codes = codes.data();
  v.scales = scales.data();
  std::vector<double> exact(2);
  af4_decode_row(v, 0, DType::kF32, exact.data(), nullptr, nullptr);
  EXPECT_EQ(f32_bits(builtin_codebook(Af4Codebook::kAf4_64)[1]), 0xbf31c4dcu);  // docs/formats.md "AF4"
  EXPECT_EQ(exact[0], static_cast<double>(f32_from_bits(0xbf31c4dcu)) * 3.0);
  EXPECT_EQ(exact[1], 3.0);
}

TEST(Af4, BuiltinCodebooksMatchFormatsMdHex) {
  const std::uint32_t nf4[16] = {0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f,
                                 0xbdba7871, 0x00000000, 0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a,
                                 0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000};
  const std::uint32_t af4[16] = {0xbf800000, 0xbf31c4dc, 0xbf032f19, 0xbebf54f7, 0xbe831c55, 0xbe196bab,
                                 0xbd4a2141, 0x00000000, 0x3d2f075f, 0x3e0472f9, 0x3e60e22a, 0x3ea22dee,
                                 0x3ed9ed55, 0x3f0e1203, 0x3f39685c, 0x3f800000};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(f32_bits(builtin_codebook(Af4Codebook::kNf4)[i]), nf4[i]) << i;
    EXPECT_EQ(f32_bits(builtin_codebook(Af4Codebook::kAf4_64)[i]), af4[i]) << i;
  }
}

TEST(Af4, CustomCodebookAndOddGroupCount) {
  // Custom table t[q] = q/8 - 1; K = 6, group 3 (K/group = 2 groups); u8-lsb; f32 scales.
  Af4View v;
  v.layout.variant = Af4Variant::kCodebook;
  v.layout.codebook = Af4Codebook::kCustom;
  for (int q = 0; q < 16; ++q) v.layout.table[q] = static_cast<float>(q) / 8.0f - 1.0f;
  v.layout.packing = Af4Packing::kU8Lsb;
  v.layout.group_size = 3;
  v.layout.scale_dtype = DType::kF32;
  const std::vector<std::uint8_t> codes = {0x80, 0xF4, 0x2C};  // q = 0 8 4 15 12 2
  const std::vector<float> scales = {4.0f, -8.0f};
  v.rows = 1;
  v.k = 6;
  v.codes = codes.data();
  v.scales = scales.data();
  std::vector<double> exact(6);
  af4_decode_row(v, 0, DType::kF32, exact.data(), nullptr, nullptr);
  const double want[6] = {-4.0, 0.0, -2.0, (15.0 / 8 - 1) * -8.0, (12.0 / 8 - 1) * -8.0, (2.0 / 8 - 1) * -8.0};
  for (int c = 0; c < 6; ++c) EXPECT_EQ(exact[c], want[c]) << c;
}

TEST(Af4, DequantModesChargeAndKernelValues) {
  // One group of 2: s = bf16(0.1) = 0.10009765625, b = 0; q = 3, 0 (u8-lsb byte 0x03).
  const std::vector<std::uint8_t> codes = {0x03};
  const std::vector<std::uint16_t> scales = {f32_to_bf16(0.1f)};
  const std::vector<std::uint16_t> biases = {0x0000};
  Af4View v;
  v.layout.variant = Af4Variant::kAffine;
  v.layout.packing = Af4Packing::kU8Lsb;
  v.layout.group_size = 2;
  v.layout.scale_dtype = DType::kBf16;
  v.rows = 1;
  v.k = 2;
  v.codes = codes.data();
  v.scales = scales.data();
  v.biases = biases.data();
  std::vector<double> exact(2), alg(2), spread(2);
  std::vector<float> kernel(2);
  // output: the kernel's weight is pinned, bf16(fl32(3 s)) = 0.30078125, and the reference
  // uses it exactly (no blanket charge: alg = |w|, no spread).
  v.layout.dequant = Dequant::kOutput;
  af4_decode_row(v, 0, DType::kBf16, exact.data(), alg.data(), kernel.data(), spread.data());
  EXPECT_EQ(exact[0], 0.30078125);
  EXPECT_EQ(alg[0], 0.30078125);
  EXPECT_EQ(kernel[0], 0.30078125f);
  EXPECT_EQ(spread[0], 0.0);
  // f32 activations: output rounds to f32, where 3 s = 0.30029296875 is exact.
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data(), spread.data());
  EXPECT_EQ(exact[0], 0.30029296875);
  EXPECT_EQ(kernel[0], 0.30029296875f);
  // exact: s q + b in f64, |w| charged; the walk's kernel weight is fma(s, q, b).
  v.layout.dequant = Dequant::kExact;
  af4_decode_row(v, 0, DType::kBf16, exact.data(), alg.data(), kernel.data(), spread.data());
  EXPECT_EQ(exact[0], 0.30029296875);
  EXPECT_EQ(kernel[0], 0.30029296875f);
}

TEST(Af4, EitherOrderChargesTheSpreadOfTheTwoKernelWeights) {
  // f32 scales: s = 1 + 2^-23 (24 significant bits), q = 3, b = -3: s*q = 3 + 3*2^-23 needs 25
  // bits, so multiply-then-add rounds it (to 3 + 2^-21) before adding b, giving 2^-21, while a
  // fused multiply-add keeps it: 3 * 2^-23. Their midpoint is charged exactly, their half-gap
  // as spread.
  const std::vector<std::uint8_t> codes = {0x03};
  const std::vector<float> scales = {1.0f + 0x1p-23f};
  const std::vector<float> biases = {-3.0f};
  Af4View v;
  v.layout.variant = Af4Variant::kAffine;
  v.layout.packing = Af4Packing::kU8Lsb;
  v.layout.group_size = 2;
  v.layout.scale_dtype = DType::kF32;
  v.layout.dequant = Dequant::kF32;
  v.rows = 1;
  v.k = 2;
  v.codes = codes.data();
  v.scales = scales.data();
  v.biases = biases.data();
  std::vector<double> exact(2), alg(2), spread(2);
  std::vector<float> kernel(2);
  const double fused = 3 * 0x1p-23, two_roundings = 0x1p-21;
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data(), spread.data());
  EXPECT_EQ(exact[0], 0.5 * (fused + two_roundings));
  EXPECT_EQ(spread[0], 0.5 * (two_roundings - fused));
  EXPECT_EQ(alg[0], two_roundings);  // |mid| + spread: the larger of the two
  v.layout.dequant_op = DequantOp::kMulAdd;
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data(), spread.data());
  EXPECT_EQ(exact[0], two_roundings);
  EXPECT_EQ(kernel[0], static_cast<float>(two_roundings));
  EXPECT_EQ(spread[0], 0.0);
  v.layout.dequant_op = DequantOp::kFma;
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data(), spread.data());
  EXPECT_EQ(exact[0], fused);
  EXPECT_EQ(kernel[0], static_cast<float>(fused));
}

TEST(Af4, ParseNames) {
  EXPECT_EQ(*parse_af4_packing("u8-msb"), Af4Packing::kU8Msb);
  EXPECT_EQ(parse_af4_packing("u4").status().code(), ErrorCode::kAf4PackingUnknown);
  EXPECT_EQ(*parse_dequant("folded"), Dequant::kFolded);
  EXPECT_EQ(parse_af4_variant("nf4").status().code(), ErrorCode::kAf4VariantUnknown);
  EXPECT_EQ(*parse_af4_codebook("af4-64"), Af4Codebook::kAf4_64);
  EXPECT_EQ(dequant_name(Dequant::kOutput), "output");
  EXPECT_EQ(*parse_dequant_op("mul-add"), DequantOp::kMulAdd);
  EXPECT_EQ(parse_dequant_op("fused").status().code(), ErrorCode::kDequantOpUnknown);
}

}  // namespace
}  // namespace ncert::reference
