// The long tier (label "long", registered for NCERT_TEST_TIER ci and nightly; docs/testing.md):
// the realistic-size paths the fast tests cover only in miniature.
//  - `check` on the qwen-mixer preset (hidden 5120, in_proj 5120 -> 16480 of 16640, AF4/BF16/F32
//    segments, in-place residual): PASS, and a planted fault caught by the check meant for it;
//  - the packing sweep's whole table again under other seeds;
//  - logits at a real vocabulary (151,936): compare and witnesses, contiguous vs chunked+deflate;
//  - the residual tests' false alarms over legitimate dumps of many shapes, weight formats,
//    output types and engine summation orders (docs/error-bounds.md §6c-6e): none.
// ci runs one layer, two extra seeds and 64 rows; nightly four layers, eight seeds, 512 rows.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "certify/commands/check.h"
#include "certify/logits/compare.h"
#include "certify/logits/witness.h"
#include "fixtures/generator.h"
#include "fixtures/logits.h"
#include "packing/sweep.h"
#include "tests/common/test_paths.h"

namespace ncert {
namespace {

#ifdef NCERT_TIER_NIGHTLY
constexpr int kLayers = 4, kSeeds = 8;
constexpr Index kRows = 512;
constexpr int kLegitimateDumps = 240;
#else
constexpr int kLayers = 1, kSeeds = 2;
constexpr Index kRows = 64;
constexpr int kLegitimateDumps = 40;
#endif

using ncert::testing::scratch_file;

TEST(Long, QwenMixerPresetPassesAndAPlantedFaultIsCaught) {
  const std::string good = scratch_file("qwen-mixer.h5");
  ASSERT_TRUE(fixtures::write_dump(good, fixtures::preset_qwen_mixer(kLayers), {}, true).ok());
  certify::CheckCommandOptions o;
  o.dump = good;
  auto r = certify::run_check(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->verdict(), certify::Verdict::kPass) << r->to_text(true);
  std::filesystem::remove(good);

  const std::string bad = scratch_file("qwen-mixer-scale.h5");
  ASSERT_TRUE(fixtures::write_dump(bad, fixtures::preset_qwen_mixer(kLayers),
                                   {fixtures::Fault::kAf4ScaleTimes2, "layer00_in_proj"}, true)
                  .ok());
  o.dump = bad;
  r = certify::run_check(o);
  ASSERT_TRUE(r.ok());
  bool caught = false;
  for (const certify::CheckResult& c : r->checks) {
    if (c.verdict != certify::Verdict::kFail) continue;
    // The bound check is meant to catch it; the declared walk cannot match either. Nothing
    // outside the faulty projection may fail.
    EXPECT_EQ(c.id.rfind("projections/layer00_in_proj/", 0), 0u) << c.id << ": " << c.reason;
    caught = caught || c.id == "projections/layer00_in_proj/bound";
  }
  EXPECT_TRUE(caught);
  std::filesystem::remove(bad);
}

/// One legitimate projection of the false-alarm sweep: the i-th combination of shape, weight
/// format, output type and the engine's summation order (none declared).
fixtures::ProjectionSpec legitimate(int i) {
  static const Index kKs[] = {512, 1024, 2048, 4096, 5120};
  static const char* kOrders[] = {"split:8:fma", "pairwise", "lanes:16:halving:fma", "seq", "f64", "split:4"};
  static const DType kOutputs[] = {DType::kF32, DType::kBf16, DType::kF16};
  fixtures::ProjectionSpec p;
  p.name = "p";
  p.requests = 4 + i % 5;
  p.block_rows = 4;
  p.cap = 1 + i % 4;
  p.slots = p.requests * p.cap;
  p.k = kKs[i % 5];
  p.n = 192;
  p.output = kOutputs[(i / 5) % 3];
  p.x = p.output == DType::kF16 ? DType::kF16 : (i % 2 ? DType::kBf16 : DType::kF32);
  p.engine_order = kOrders[(i / 3) % 6];
  p.epilogue = i % 7 == 0 ? reference::Epilogue::kBias : reference::Epilogue::kNone;
  fixtures::SegmentSpec a;
  a.format = reference::WeightFormat::kAf4;
  a.rows = 64;
  a.af4.variant = static_cast<reference::Af4Variant>(i % 3);
  if (a.af4.variant == reference::Af4Variant::kCodebook) a.af4.codebook = reference::Af4Codebook::kNf4;
  if (a.af4.variant == reference::Af4Variant::kZeroPoint) {
    a.af4.dequant_op = i % 2 ? reference::DequantOp::kSubMul : reference::DequantOp::kFused;
  }
  a.af4.group_size = i % 4 == 0 ? 32 : 64;
  a.af4.scale_dtype = i % 2 ? DType::kBf16 : DType::kF32;
  a.af4.dequant = static_cast<reference::Dequant>(i % 3);  // exact, f32, output
  fixtures::SegmentSpec b;
  b.format = p.output == DType::kF16 ? reference::WeightFormat::kF16 : reference::WeightFormat::kBf16;
  b.rows = 64;
  fixtures::SegmentSpec c;
  c.format = reference::WeightFormat::kF32;
  c.rows = 64;
  p.segments = {a, b, c};
  p.seed = 1000 + static_cast<std::uint64_t>(i);
  return p;
}

TEST(Long, ResidualTestsRaiseNoFalseAlarmOnLegitimateDumps) {
  int checked = 0;
  for (int i = 0; i < kLegitimateDumps; ++i) {
    fixtures::DumpSpec d;
    d.projections.push_back(legitimate(i));
    const std::string path = scratch_file("legitimate.h5");
    const Status w = fixtures::write_dump(path, d, {}, true);
    if (!w.ok()) {  // a combination the generator does not support
      std::printf("combination %d not generated: %s\n", i, w.to_string().c_str());
      continue;
    }
    certify::CheckCommandOptions o;
    o.dump = path;
    auto r = certify::run_check(o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->verdict(), certify::Verdict::kPass) << "combination " << i << "\n" << r->to_text(true);
    ++checked;
  }
  // Most combinations are supported; a generator change that silently drops them would make
  // this test vacuous.
  EXPECT_GE(checked, kLegitimateDumps * 3 / 4);
}

TEST(Long, SweepPassesUnderOtherSeeds) {
  for (int s = 1; s <= kSeeds; ++s) {
    std::vector<packing::SweepCase> cases = packing::default_cases();
    for (packing::SweepCase& c : cases) c.seed += static_cast<std::uint64_t>(s) * 1000003;
    const packing::SweepSummary sum = packing::sweep_cases(cases);
    EXPECT_EQ(sum.failed, 0) << "seed offset " << s << ": " << sum.first_failure_key << ": "
                             << sum.first_failure_reason;
    EXPECT_EQ(sum.cases, static_cast<Index>(cases.size()));
  }
}

TEST(Long, LogitsAtARealVocabularyStreamTheSameInEveryStorageForm) {
  fixtures::LogitsPairSpec spec;
  spec.tokens = kRows;
  spec.vocab = 151936;
  spec.noise = 1e-3f;
  const std::string a = scratch_file("a.h5"), b = scratch_file("b.h5");
  const std::string ca = scratch_file("ca.h5"), cb = scratch_file("cb.h5");
  ASSERT_TRUE(fixtures::write_logits_pair(a, b, spec, true).ok());
  spec.storage.chunk_rows = 5;
  spec.storage.deflate = 1;
  spec.storage.shuffle = true;
  ASSERT_TRUE(fixtures::write_logits_pair(ca, cb, spec, true).ok());
  auto rows = [](const std::string& x, const std::string& y) {
    auto rx = certify::DumpReader::open(x);
    auto ry = certify::DumpReader::open(y);
    EXPECT_TRUE(rx.ok() && ry.ok());
    auto c =
        certify::compare_runs(*rx, rx->model().logits[0], *ry, ry->model().logits[0], true, certify::ElementTest{});
    EXPECT_TRUE(c.ok());
    auto w = certify::witness_run(*rx, rx->model().logits[0], {});
    EXPECT_TRUE(w.ok());
    EXPECT_EQ(w->failed, 0);
    return std::make_pair(c->rows, w->witnesses);
  };
  const auto [plain, wp] = rows(a, b);
  const auto [packed, wc] = rows(ca, cb);
  ASSERT_EQ(plain.size(), static_cast<std::size_t>(kRows));
  ASSERT_EQ(packed.size(), plain.size());
  for (std::size_t t = 0; t < plain.size(); ++t) {
    EXPECT_EQ(plain[t].kl_ab, packed[t].kl_ab) << t;
    EXPECT_EQ(plain[t].max_abs_col, packed[t].max_abs_col) << t;
    EXPECT_GT(plain[t].kl_ab, 0) << t;
    EXPECT_EQ(wp[t].row_xxh3, wc[t].row_xxh3) << t;
    EXPECT_EQ(wp[t].margin, wc[t].margin) << t;
  }
  for (const std::string& f : {a, b, ca, cb}) std::filesystem::remove(f);
}

}  // namespace
}  // namespace ncert
