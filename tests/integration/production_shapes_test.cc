// Faults that hide at production shapes (issue: verdicts never vacuous, never wrong): each fault
// beside its legitimate twin, at K = 5120 with 8 requests x 4 rows in 32 slots, as the engines
// that found them run. At these shapes the deterministic interval is wider than a bf16 ulp of
// the output (K u Sum|x||w| ~ 1.0 against an ulp of ~0.3 at |y| ~ 70), so only what pins the
// computation down catches them: the exact dequantized weights (a 1.5x group scale) and the
// bias test (truncation in both paths). Also an explicit u below 2^-24 with f32 dequantization.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "certify/commands/check.h"
#include "fixtures/generator.h"
#include "tests/common/fixture_check.h"
#include "tests/common/report_checks.h"
#include "tests/common/report_json.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using fixtures::Fault;
using ncert::testing::check_dump;
using ncert::testing::failing_ids;
using ncert::testing::find_check;
using ncert::testing::write_fixture;
using reference::Af4Variant;
using reference::Dequant;
using reference::WeightFormat;

/// 8 requests x 4 rows into 32 slots, K = 5120, bf16 activations and output; N = 1024 (the
/// real 16480 adds time, not information: every output column is an independent test).
fixtures::ProjectionSpec production(const std::string& name, std::vector<fixtures::SegmentSpec> segments) {
  fixtures::ProjectionSpec p = fixtures::production_batch(name);
  for (const auto& s : segments) p.n += s.rows;
  p.out_pad = 16;
  p.segments = std::move(segments);
  p.output = DType::kBf16;
  return p;
}

fixtures::SegmentSpec af4(Index rows, Dequant dq) {
  fixtures::SegmentSpec s;
  s.format = WeightFormat::kAf4;
  s.rows = rows;
  s.af4.variant = Af4Variant::kAffine;
  s.af4.group_size = 64;
  s.af4.scale_dtype = DType::kBf16;
  s.af4.dequant = dq;
  return s;
}

fixtures::SegmentSpec bf16(Index rows) {
  fixtures::SegmentSpec s;
  s.format = WeightFormat::kBf16;
  s.rows = rows;
  return s;
}

TEST(ProductionShapes, Af4GroupScaleOneAndAHalfFailsTheBoundItsTwinPasses) {
  fixtures::DumpSpec d;
  d.projections.push_back(production("in_proj", {af4(512, Dequant::kOutput), bf16(512)}));
  const Report twin = check_dump(write_fixture(d, "prod-af4-twin.h5"));
  EXPECT_EQ(twin.verdict(), Verdict::kPass) << twin.to_text(true);
  const Report bad = check_dump(write_fixture(d, "prod-af4-x1.5.h5", Fault::kAf4ScaleTimes1_5));
  // The signature test finds the same group, and fits the size (docs/error-bounds.md §6d);
  // variance leaves the column's values outside B to bound and finds the rest rounding noise.
  EXPECT_EQ(failing_ids(bad), (std::set<std::string>{"projections/in_proj/bound", "projections/in_proj/signature"}))
      << bad.to_text(true);
  const CheckResult* b = find_check(bad, "projections/in_proj/bound");
  ASSERT_NE(b, nullptr);
  // Only column 0 (row 0 of the first AF4 segment, group 0) is wrong.
  EXPECT_EQ(b->first_failure->col, 0);
  // The weights were pinned down: no blanket dequantization slack, nothing ambiguous.
  // (BoundEvidence records which weights the reference used only as one sentence per segment.)
  const std::string af4_weights = stats(*b)["weights"][0].get<std::string>();
  EXPECT_NE(af4_weights.find("the kernel's own weights, exactly; no dequantization slack"), std::string::npos)
      << af4_weights;
  EXPECT_EQ(stats(*b)["ambiguous_weights"], 0);
}

TEST(ProductionShapes, Bf16TruncationInBothPathsFailsTheBiasCheckItsTwinPasses) {
  fixtures::DumpSpec d;
  d.projections.push_back(production("out_proj", {bf16(1024)}));
  const Report twin = check_dump(write_fixture(d, "prod-trunc-twin.h5"));
  EXPECT_EQ(twin.verdict(), Verdict::kPass) << twin.to_text(true);
  const Report bad = check_dump(write_fixture(d, "prod-trunc.h5", Fault::kBf16TruncationBoth));
  // Identity holds (both paths truncate alike) and every value lies inside its interval: the
  // residuals are all that shows it, one-sided (bias) and, with errors up to a whole spacing
  // where rne allows half, 4/3 of the energy the model allows (variance).
  EXPECT_EQ(failing_ids(bad), (std::set<std::string>{"projections/out_proj/bias", "projections/out_proj/variance"}))
      << bad.to_text(true);
  const CheckResult* b = find_check(bad, "projections/out_proj/bias");
  ASSERT_NE(b, nullptr);
  const Json st = stats(*b);
  for (const char* out : {"y_unpacked", "y_packed", "y_compact"}) {
    SCOPED_TRACE(out);
    const Json& o = st["outputs"][out];
    // Truncation moves every value toward zero: half an ulp on average, against a limit of
    // 0.14 ulp at the ~16,000 values of 32 x 1024 whose intervals are narrow enough to count.
    EXPECT_TRUE(o["one_sided"].get<bool>());
    EXPECT_GT(std::abs(o["mean_residual_ulps"].get<double>()), 0.2) << b->reason;
    EXPECT_LT(o["limit_ulps"].get<double>(), 0.2);
  }
}

TEST(ProductionShapes, AnExplicitUBelowF32RoundingWithF32DequantizationPasses) {
  // An engine accumulating in f64 (declared u = 2^-30) over f32-dequantized AF4 weights: the
  // f32 rounding of s*q+b is 2^-24 whatever u says, and the reference uses those exact f32
  // weights, so the tight accumulator bound holds. Its twin drops one K-tile in the packed path.
  fixtures::DumpSpec d;
  fixtures::ProjectionSpec p = production("f64_acc", {af4(256, Dequant::kF32), bf16(256)});
  p.output = DType::kF32;
  p.accumulator = "u=9.313225746154785e-10";  // 2^-30
  p.engine_order = "f64";
  d.projections.push_back(p);
  const Report good = check_dump(write_fixture(d, "prod-u30.h5"));
  EXPECT_EQ(good.verdict(), Verdict::kPass) << good.to_text(true);
  const Report bad = check_dump(write_fixture(d, "prod-u30-tile.h5", Fault::kDroppedKTilePacked));
  EXPECT_EQ(failing_ids(bad), (std::set<std::string>{"projections/f64_acc/identity", "projections/f64_acc/bound",
                                                     "projections/f64_acc/signature", "projections/f64_acc/variance"}))
      << bad.to_text(true);
}

}  // namespace
}  // namespace ncert::certify
