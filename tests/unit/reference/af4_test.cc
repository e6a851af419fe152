// AF4 decoding against hand-computed vectors: every variant x packing x scale type, negative
// scales, the exact / alg / kernel outputs of each dequant mode.
#include "reference/af4.h"

#include <gtest/gtest.h>

#include <bit>
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

// Zero-point, K = 4, one group of 4: q = 5 0 15 3, zp = 3, s = 0.1f (f32 0x3DCCCCCD).
// exact (q - zp)*s = 2s, -3s, 12s, 0 in f64; sub-mul fl32((q - zp)*s); fused fma(q, s, m) with
// m = fl32(-3s) = 0xBE99999A (rounded). Hand values (numpy, f64 then one f32 rounding):
// sub-mul fl32(2s) = 0x3E4CCCCD; fused fl32(5s + m) = 0x3E4CCCCC, one ulp below; at q = zp the
// fused weight is 3s + m = -7.45e-9 (the rounding error of 3s), not 0.
TEST(Af4, ZeroPointOrdersByHand) {
  const std::vector<std::uint8_t> codes = {0x05, 0x3F};  // u8-lsb: 5, 0 | 15, 3
  const float s = std::bit_cast<float>(0x3DCCCCCDu);
  const std::vector<std::uint8_t> zero_points = {3};
  Af4View v;
  v.layout.variant = Af4Variant::kZeroPoint;
  v.layout.packing = Af4Packing::kU8Lsb;
  v.layout.group_size = 4;
  v.layout.scale_dtype = DType::kF32;
  v.rows = 1;
  v.k = 4;
  v.codes = codes.data();
  v.scales = &s;
  v.zero_points = zero_points.data();
  std::vector<double> exact(4), alg(4);
  std::vector<float> kernel(4);
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data());
  const double sd = static_cast<double>(s);
  EXPECT_EQ(exact, (std::vector<double>{2 * sd, -3 * sd, 12 * sd, 0.0}));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kernel[0]), 0x3E4CCCCDu);  // fl32((q - zp)*s) for exact
  v.layout.dequant = Dequant::kFolded;
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data());
  EXPECT_EQ(alg, (std::vector<double>{8 * sd, 3 * sd, 18 * sd, 6 * sd}));  // |s q| + |s zp|
  v.layout.dequant = Dequant::kF32;
  v.layout.dequant_op = DequantOp::kSubMul;
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data());
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kernel[0]), 0x3E4CCCCDu);
  EXPECT_EQ(exact[0], static_cast<double>(kernel[0]));
  v.layout.dequant_op = DequantOp::kFused;
  af4_decode_row(v, 0, DType::kF32, exact.data(), alg.data(), kernel.data());
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kernel[0]), 0x3E4CCCCCu);
  EXPECT_EQ(exact[0], static_cast<double>(kernel[0]));
  EXPECT_EQ(kernel[3], static_cast<float>(3 * sd + static_cast<double>(std::bit_cast<float>(0xBE99999Au))));
  EXPECT_NE(kernel[3], 0.0f);
}

TEST(Af4, ZeroPointUnpackingAndRefusals) {
  // G = 3 zero points a row (1 2 3), packed like codes: u8-msb 0x12 0x30, u8-lsb 0x21 0x03,
  // u32-lsb 0x00000321; the unused fourth nibble must be 0.
  std::uint8_t out[3];
  const std::uint8_t msb[2] = {0x12, 0x30}, lsb[2] = {0x21, 0x03};
  const std::uint32_t word = 0x321u;
  std::uint8_t word_bytes[4];
  std::memcpy(word_bytes, &word, 4);
  for (const auto& [p, bytes] : {std::pair{ZeroPointPacking::kU8Msb, msb}, std::pair{ZeroPointPacking::kU8Lsb, lsb},
                                 std::pair{ZeroPointPacking::kU32Lsb, static_cast<const std::uint8_t*>(word_bytes)}}) {
    ASSERT_TRUE(unpack_zero_points(p, bytes, 1, 3, "zp", out).ok());
    EXPECT_EQ(out[0], 1);
    EXPECT_EQ(out[1], 2);
    EXPECT_EQ(out[2], 3);
  }
  EXPECT_EQ(zero_point_columns(ZeroPointPacking::kU8, 3), 3);
  EXPECT_EQ(zero_point_columns(ZeroPointPacking::kU8Msb, 3), 2);
  EXPECT_EQ(zero_point_columns(ZeroPointPacking::kU32Lsb, 9), 2);
  const std::uint8_t trailing[2] = {0x12, 0x35};
  Status s = unpack_zero_points(ZeroPointPacking::kU8Msb, trailing, 1, 3, "seg/zero_points", out);
  EXPECT_EQ(s.code(), ErrorCode::kAttributeInvalid);
  EXPECT_EQ(s.message(),
            "seg/zero_points: row 0, group 3: zero point 5 in an unused trailing nibble (past the row's 3 groups; it "
            "must be 0)");
  const std::uint8_t u8[4] = {0, 15, 4, 16};
  s = unpack_zero_points(ZeroPointPacking::kU8, u8, 2, 2, "z", out);
  EXPECT_EQ(s.message(), "z: row 1, group 1: zero point 16 is above 15 (a zero point is a 4-bit code, 0..15)");
  EXPECT_EQ(parse_zero_point_packing("u4").status().code(), ErrorCode::kAf4PackingUnknown);
  EXPECT_FALSE(dequant_op_fits(Af4Variant::kZeroPoint, DequantOp::kFma));
  EXPECT_FALSE(dequant_op_fits(Af4Variant::kAffine, DequantOp::kFused));
  EXPECT_TRUE(dequant_op_fits(Af4Variant::kCodebook, DequantOp::kEither));
  EXPECT_EQ(default_dequant_op(Af4Variant::kZeroPoint), DequantOp::kSubMul);
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
  EXPECT_EQ(*parse_dequant_op("fused"), DequantOp::kFused);  // zero-point's; schema.cc checks the fit
  EXPECT_EQ(*parse_af4_variant("zero-point"), Af4Variant::kZeroPoint);
  EXPECT_EQ(*parse_zero_point_packing("u8"), ZeroPointPacking::kU8);
  EXPECT_EQ(parse_dequant_op("fmadd").status().code(), ErrorCode::kDequantOpUnknown);
}

}  // namespace
}  // namespace ncert::reference
