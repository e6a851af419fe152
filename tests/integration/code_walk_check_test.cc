// An integer kernel through `ncert check` (docs/dump-format.md §3.4 codes:<C>:<scaling>/<walk>):
// a W8A8 dump (int8 activations in groups of 32 with f16 scales, int8 weights per channel) whose
// outputs a kernel written here computes as ggml's AVX2 vec_dot does (sums of 4 products in 8
// lanes, fused with the scale product, halving at the end). Declared with that walk, it passes
// every check, `walk` bit for bit; the same kernel with one column's integer sums a unit off,
// which the bound lets through, fails `walk` naming that column; declared with the scalar loop's walk, the
// diagnosis names the kernel's; and an f32 walk with x_quant is a SKIP that names the code form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "certify/io/dump_builder.h"
#include "reference/float_bits.h"
#include "tests/common/fixture_check.h"
#include "tests/common/report_checks.h"

namespace ncert::certify {
namespace {

using ncert::testing::check_dump;
using ncert::testing::find_check;

constexpr Index kM = 8, kK = 256, kN = 24, kGroup = 32;

struct W8A8 {
  std::vector<std::int8_t> xq, wq;
  std::vector<std::uint16_t> xs;  // f16 [M, K/32]
  std::vector<float> ws, x, y;    // ws [N, 1]; x = code * scale exactly; y [M, N]

  W8A8() {
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int> s8(-127, 127);
    std::uniform_real_distribution<float> u(0.5f, 2.0f);
    for (Index i = 0; i < kM * kK; ++i) xq.push_back(static_cast<std::int8_t>(s8(rng)));
    for (Index i = 0; i < kN * kK; ++i) wq.push_back(static_cast<std::int8_t>(s8(rng)));
    for (Index i = 0; i < kM * (kK / kGroup); ++i) xs.push_back(reference::f32_to_f16(u(rng) * 0.01f));
    for (Index j = 0; j < kN; ++j) ws.push_back(u(rng) * 0.003f);
    for (Index i = 0; i < kM; ++i)
      for (Index c = 0; c < kK; ++c) x.push_back(static_cast<float>(xq[i * kK + c]) * x_scale(i, c));
  }
  float x_scale(Index i, Index c) const { return reference::f16_to_f32(xs[i * (kK / kGroup) + c / kGroup]); }

  /// ggml's AVX2 walk; in `bad_column` the first integer sum one unit off (the last bit of a
  /// narrow accumulator lost, say), which moves each of its values by about 1e-7 of them.
  void run(Index bad_column = -1, Index bad_row = -1) {
    y.assign(kM * kN, 0.0f);
    for (Index i = 0; i < kM; ++i) {
      for (Index j = 0; j < kN; ++j) {
        float lane[8] = {};
        const float sw = ws[j];
        for (Index b = 0; b < kK / kGroup; ++b) {
          const float d = sw * x_scale(i, b * kGroup);
          for (Index l = 0; l < 8; ++l) {
            std::int32_t q = 0;
            for (Index c = b * kGroup + 4 * l; c < b * kGroup + 4 * l + 4; ++c) q += xq[i * kK + c] * wq[j * kK + c];
            if ((j == bad_column || i == bad_row) && b == 0 && l == 0) q += 1;
            lane[l] = std::fma(d, static_cast<float>(q), lane[l]);
          }
        }
        for (Index width = 4; width >= 1; width /= 2)
          for (Index l = 0; l < width; ++l) lane[l] = lane[l] + lane[l + width];
        y[i * kN + j] = lane[0];
      }
    }
  }

  std::string write(const std::string& name, const std::string& walk) const {
    std::string path = (std::filesystem::temp_directory_path() / name).string();
    std::filesystem::remove(path);
    std::vector<std::int32_t> selector(kM);
    for (Index i = 0; i < kM; ++i) selector[i] = static_cast<std::int32_t>(i);
    Projection p{.name = "w8a8",
                 .k = kK,
                 .n = kN,
                 .accumulator = "f32-rn",
                 .output_dtype = DType::kF32,
                 .epilogue = reference::Epilogue::kNone};
    p.k_walk = walk;
    p.x_quant = reference::XQuantType::kInt8;
    p.x_quant_group = kGroup;
    p.x = DumpArray(DType::kF32, x, {kM, kK});
    p.x_quantized = DumpArray(DType::kI8, xq, {kM, kK});
    p.x_scales = DumpArray(DType::kF16, xs, {kM, kK / kGroup});
    p.weight.push_back({.name = "w",
                        .format = reference::WeightFormat::kInt8,
                        .row_begin = 0,
                        .row_end = kN,
                        .values = DumpArray(DType::kI8, wq, {kN, kK}),
                        .group_size = kK,
                        .dequant = reference::Dequant::kExact,
                        .scales = DumpArray(DType::kF32, ws, {kN, 1})});
    p.selector = DumpArray(DType::kI32, selector, {kM});
    p.y_unpacked = DumpArray(DType::kF32, y, {kM, kN});
    auto dump = DumpBuilder::create(path, {.engine = "w8a8-test", .build = "1"});
    EXPECT_TRUE(dump.ok()) << dump.status().message();
    const Status added = dump->add_projection(p);
    EXPECT_TRUE(added.ok()) << added.message();
    EXPECT_TRUE(dump->close().ok());
    return path;
  }
};

constexpr const char* kAvx2Walk = "codes:4:scale-product/lanes:8:halving:fma";

TEST(CodeWalkCheck, AnIntegerKernelPassesBitForBitAndASumTheBoundAllowsFailsTheWalk) {
  W8A8 d;
  d.run();
  const Report good = check_dump(d.write("codes-good.h5", kAvx2Walk));
  EXPECT_EQ(good.verdict(), Verdict::kPass) << good.to_text(true);
  const CheckResult* walk = find_check(good, "projections/w8a8/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kPass) << walk->reason;
  EXPECT_NE(walk->reason.find("all 192 engine values equal the emulated " + std::string(kAvx2Walk)), std::string::npos)
      << walk->reason;

  d.run(5);
  const Report bad = check_dump(d.write("codes-sum.h5", kAvx2Walk));
  EXPECT_EQ(find_check(bad, "projections/w8a8/bound")->verdict, Verdict::kPass);
  walk = find_check(bad, "projections/w8a8/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kFail);
  EXPECT_NE(walk->reason.find("all in column 5"), std::string::npos) << walk->reason;

  // One row's sums off: its activations, or a path the kernel takes for that row alone (ONNX
  // Runtime's W4A8 kernel sums the last row of an odd M in another order).
  d.run(-1, 3);
  walk = find_check(check_dump(d.write("codes-row.h5", kAvx2Walk)), "projections/w8a8/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kFail);
  EXPECT_NE(walk->reason.find("all in row 3: that row's activations are not those the kernel used, or the kernel "
                              "computed that row by another path"),
            std::string::npos)
      << walk->reason;
}

TEST(CodeWalkCheck, AWrongCodeWalkIsDiagnosedAndAnF32WalkIsASkipNamingTheForm) {
  W8A8 d;
  d.run();
  const Report scalar = check_dump(d.write("codes-scalar.h5", "codes:32:w-scale-first/seq"));
  const CheckResult* walk = find_check(scalar, "projections/w8a8/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kFail);
  EXPECT_NE(walk->reason.find("the data fits k_walk = codes:4:"), std::string::npos) << walk->reason;
  EXPECT_NE(walk->reason.find("/lanes:8:halving:fma"), std::string::npos) << walk->reason;

  const Report f32_walk = check_dump(d.write("codes-f32walk.h5", "lanes:8:halving:fma"));
  walk = find_check(f32_walk, "projections/w8a8/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kSkip);
  EXPECT_NE(walk->reason.find("codes:<C>:<scaling>/<walk>"), std::string::npos) << walk->reason;
  EXPECT_EQ(f32_walk.verdict(), Verdict::kPass);

  // C = 64 straddles two activation scales (groups of 32): a SKIP that says so.
  const Report wide = check_dump(d.write("codes-wide.h5", "codes:64:scale-product/seq"));
  walk = find_check(wide, "projections/w8a8/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kSkip);
  EXPECT_NE(walk->reason.find("x_quant_group 32 is not a multiple of C = 64"), std::string::npos) << walk->reason;
}

}  // namespace
}  // namespace ncert::certify
