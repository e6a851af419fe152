// Dump format v2 through `ncert check` (docs/dump-format.md §1, §3.6): f16 activations, outputs,
// biases and logits, and activations quantized before the products, each certified by every
// check that applies, and each planted fault failing the check meant for it beside its
// legitimate twin; and the version rule: version 1 and 2 files read, a version 2 member in a
// file that declares 1 refused, other versions refused.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "certify/commands/check.h"
#include "certify/commands/compare.h"
#include "certify/io/dump_reader.h"
#include "certify/io/dump_writer.h"
#include "reference/float_bits.h"
#include "tests/common/fixture_check.h"
#include "tests/common/format_v2_spec.h"
#include "tests/common/h5_poke.h"
#include "tests/common/report_checks.h"
#include "tests/common/report_json.h"

namespace ncert::certify {
namespace {

using fixtures::Fault;
using ncert::testing::check_dump;
using ncert::testing::f16_projection;
using ncert::testing::failing_ids;
using ncert::testing::find_check;
using ncert::testing::single_projection_dump;
using ncert::testing::write_fixture;
using ncert::testing::x_quant_projection;
using ncert::testing::XQuantCase;

Verdict verdict_of(const Report& r, const std::string& id) {
  const CheckResult* c = find_check(r, id);
  EXPECT_NE(c, nullptr) << id;
  return c ? c->verdict : Verdict::kSkip;
}

TEST(FormatV2, F16ActivationsOutputsAndBiasPassEveryCheck) {
  const std::string path = write_fixture(single_projection_dump(f16_projection()), "f16.h5");
  const Report r = check_dump(path);
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
  for (const char* kind : {"identity", "bound", "walk", "bias", "untouched"}) {
    EXPECT_EQ(verdict_of(r, std::string("projections/half/") + kind), Verdict::kPass) << kind;
  }
  auto reader = DumpReader::open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->model().schema_version, 2);
}

TEST(FormatV2, AnF16OutputTruncatedInBothPathsFailsBiasVarianceAndTheWalkOnly) {
  const fixtures::DumpSpec spec = single_projection_dump(f16_projection());
  const Report r = check_dump(write_fixture(spec, "f16-trunc.h5", Fault::kF16TruncationBoth));
  // Truncation errs by up to a whole f16 spacing where rne allows half: the residuals are
  // one-sided (bias) and their energy is 4/3 of what the model allows (variance, 1.22x).
  EXPECT_EQ(failing_ids(r),
            (std::set<std::string>{"projections/half/bias", "projections/half/variance", "projections/half/walk"}))
      << r.to_text(true);
  // Without a declared walk only the residual tests see it.
  fixtures::ProjectionSpec p = f16_projection();
  p.k_walk.clear();
  const Report bare = check_dump(write_fixture(single_projection_dump(p), "f16-trunc2.h5", Fault::kF16TruncationBoth));
  EXPECT_EQ(failing_ids(bare), (std::set<std::string>{"projections/half/bias", "projections/half/variance"}))
      << bare.to_text(true);
}

TEST(FormatV2, EveryQuantizerPassesAndItsWalkIsASkipThatSaysWhy) {
  const XQuantCase cases[] = {{"int8", 0, "", "seq"},  {"int8", 32, "rna", ""}, {"uint8", 16, "", ""},
                              {"uint8", 0, "rna", ""}, {"e4m3", 32, "", ""},    {"e5m2", 0, "", ""}};
  for (const XQuantCase& q : cases) {
    SCOPED_TRACE(q.type + "/" + std::to_string(q.group) + "/" + q.rounding);
    const Report r = check_dump(write_fixture(single_projection_dump(x_quant_projection(q)), "xq.h5"));
    EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
    EXPECT_EQ(verdict_of(r, "projections/w8a8/quantize"), Verdict::kPass);
    EXPECT_EQ(verdict_of(r, "projections/w8a8/bound"), Verdict::kPass);
    EXPECT_EQ(verdict_of(r, "projections/w8a8/identity"), Verdict::kPass);
    const CheckResult* walk = find_check(r, "projections/w8a8/walk");
    ASSERT_NE(walk, nullptr);
    EXPECT_EQ(walk->verdict, Verdict::kSkip);
    if (!q.k_walk.empty()) {
      EXPECT_NE(walk->reason.find("x_quant"), std::string::npos) << walk->reason;
    }
    const auto* e = ncert::testing::evidence_of<QuantizeEvidence>(find_check(r, "projections/w8a8/quantize"));
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->values, 8 * 128);
    EXPECT_EQ(e->mismatched, 0);
    EXPECT_EQ(e->quantizer, q.type);
  }
}

TEST(FormatV2, AWrongActivationScaleFailsQuantizeAndBound) {
  for (const char* type : {"int8", "uint8", "e4m3"}) {
    SCOPED_TRACE(type);
    const fixtures::DumpSpec spec = single_projection_dump(x_quant_projection({type, 32, "", ""}));
    const Report twin = check_dump(write_fixture(spec, "xq-twin.h5"));
    EXPECT_EQ(twin.verdict(), Verdict::kPass) << twin.to_text(true);
    const Report r = check_dump(write_fixture(spec, "xq-scale.h5", Fault::kXScaleWrong));
    // The residual tests read the products against the declared scale quantize has refused:
    // not evaluated, naming quantize, rather than a cause of their own.
    EXPECT_EQ(failing_ids(r), (std::set<std::string>{"projections/w8a8/quantize", "projections/w8a8/bound"}))
        << r.to_text(true);
    for (const char* kind : {"signature", "variance"}) {
      const CheckResult* c = find_check(r, std::string("projections/w8a8/") + kind);
      ASSERT_NE(c, nullptr) << kind;
      EXPECT_EQ(c->verdict, Verdict::kSkip) << c->reason;
      EXPECT_NE(c->reason.find("not evaluated: quantize finds"), std::string::npos) << c->reason;
    }
    const CheckResult* q = find_check(r, "projections/w8a8/quantize");
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(q->first_failure.has_value());
    EXPECT_EQ(q->first_failure->object, "x_quantized");
    EXPECT_EQ(q->first_failure->row, 0);
    EXPECT_LT(q->first_failure->col, 32);  // the group whose declared scale is wrong
    EXPECT_NE(q->reason.find("scale"), std::string::npos) << q->reason;
  }
}

TEST(FormatV2, AScaleThatIsNotFiniteIsNamedByBoundAsTheScaleNotX) {
  // x as stored is finite; the reference multiplies the codes by x_scales[2, 1], which is NaN
  // (or 3e38, beyond f32's range once times a code): bound said "x holds 32 non-finite
  // value(s)", naming an object that holds none, and with 3e38 printed "outside [nan, nan]"
  // (a review's).
  for (const float bad : {NAN, 3e38f}) {
    SCOPED_TRACE(bad);
    const std::string path =
        write_fixture(single_projection_dump(x_quant_projection({"int8", 32, "", ""})), "xq-scale-bad.h5");
    ncert::testing::poke_f32(path, "/projections/w8a8/x_scales", 2, 1, bad);
    const Report r = check_dump(path);
    EXPECT_EQ(r.verdict(), Verdict::kFail) << r.to_text(true);
    const CheckResult* b = find_check(r, "projections/w8a8/bound");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->verdict, Verdict::kFail) << b->reason;
    EXPECT_NE(b->reason.find("the quantized activations (x_quantized with x_scales) hold "), std::string::npos)
        << b->reason;
    EXPECT_NE(b->reason.find("first at row 2 col 3"), std::string::npos) << b->reason;
    EXPECT_NE(b->reason.find("(its scale x_scales[2, 1])"), std::string::npos) << b->reason;
    EXPECT_EQ(b->reason.find("nan"), std::string::npos) << b->reason;
    EXPECT_EQ(verdict_of(r, "projections/w8a8/quantize"), Verdict::kFail);
  }
}

TEST(FormatV2, ANonFiniteActivationFailsQuantize) {
  // No declared quantizer has a code for an inf or NaN x, and the reference multiplies the
  // codes, not x: quantize is the one check that reads x, so it fails (it had skipped such
  // values and passed, found by tools/fuzz/values.py).
  for (const char* type : {"int8", "uint8", "e4m3", "e5m2"}) {
    for (const float bad : {NAN, INFINITY, -INFINITY}) {
      SCOPED_TRACE(std::string(type) + " " + std::to_string(bad));
      const std::string path =
          write_fixture(single_projection_dump(x_quant_projection({type, 32, "", ""})), "xq-nonfinite.h5");
      ncert::testing::poke_f32(path, "/projections/w8a8/x", 1, 37, bad);
      const Report r = check_dump(path);
      EXPECT_EQ(r.verdict(), Verdict::kFail) << r.to_text(true);
      const CheckResult* q = find_check(r, "projections/w8a8/quantize");
      ASSERT_NE(q, nullptr);
      EXPECT_EQ(q->verdict, Verdict::kFail) << q->reason;
      EXPECT_NE(q->reason.find("1 non-finite value(s), first at row 1 col 37"), std::string::npos) << q->reason;
      // Every code is its finite x's: first_failure (whose x .. highest the evidence holds) is
      // the first mismatched code's, so here none; the non-finite x has its own members.
      EXPECT_FALSE(q->first_failure.has_value());
      const auto* e = ncert::testing::evidence_of<QuantizeEvidence>(q);
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(e->mismatched, 0);
      EXPECT_EQ(e->excluded, 1);
      EXPECT_EQ(e->nonfinite_row, 1);
      EXPECT_EQ(e->nonfinite_col, 37);
      const Json st = stats(*q);
      EXPECT_EQ(st["first_nonfinite"], (Json{{"row", 1}, {"col", 37}})) << st.dump();
      EXPECT_FALSE(st.contains("first")) << st.dump();
    }
  }
}

fixtures::ProjectionSpec scaled_projection() {
  // Three scaled segments: int8 per output channel (f32 scales, dequant f32), e4m3 in 2-D
  // blocks of 8 rows x 32 columns (f16 scales, exact), e5m2 per tensor (bf16 scales, output).
  fixtures::ProjectionSpec p;
  p.name = "fp8";
  p.k = 128;
  p.n = 48;
  p.x = DType::kBf16;
  p.output = DType::kF32;
  p.k_walk = "seq-fma";
  fixtures::SegmentSpec a, b, c;
  a.format = reference::WeightFormat::kInt8;
  a.rows = 16;
  a.af4.group_size = 128;
  a.af4.scale_dtype = DType::kF32;
  a.af4.dequant = reference::Dequant::kF32;
  b.format = reference::WeightFormat::kE4m3;
  b.rows = 20;  // blocks of 8 rows: the last block has 4
  b.scale_rows = 8;
  b.af4.group_size = 32;
  b.af4.scale_dtype = DType::kF16;
  b.af4.dequant = reference::Dequant::kExact;
  c.format = reference::WeightFormat::kE5m2;
  c.rows = 12;
  c.scale_rows = 12;
  c.af4.group_size = 128;
  c.af4.scale_dtype = DType::kBf16;
  c.af4.dequant = reference::Dequant::kOutput;
  p.segments = {a, b, c};
  p.seed = 61;
  return p;
}

TEST(FormatV2, ScaledInt8AndFp8WeightsPassEveryCheck) {
  const std::string path = write_fixture(single_projection_dump(scaled_projection()), "scaled.h5");
  const Report r = check_dump(path);
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
  for (const char* kind : {"identity", "bound", "walk", "untouched"}) {
    EXPECT_EQ(verdict_of(r, std::string("projections/fp8/") + kind), Verdict::kPass) << kind;
  }
  // One int8 row's declared scale is not the one the kernel used (1.0, about 2,000 times it):
  // bound and walk fail, identity holds (both paths used the same weights).
  ncert::testing::poke_f32(path, "/projections/fp8/weight/s0_int8/scales", 0, 0, 1.0f);
  const Report bad = check_dump(path);
  EXPECT_EQ(failing_ids(bad), (std::set<std::string>{"projections/fp8/bound", "projections/fp8/walk",
                                                     "projections/fp8/signature", "projections/fp8/variance"}))
      << bad.to_text(true);
}

TEST(FormatV2, AScaleGridThatDoesNotFitIsGeometryGuard309) {
  // group_size 48 does not divide K = 128: the dump reads, and the projection's geometry check
  // fails with guard 309 while the other projections' checks are unaffected.
  const std::string path = write_fixture(single_projection_dump(scaled_projection()), "scaled-grid.h5");
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const char* segment = "/projections/fp8/weight/s1_e4m3";
  ASSERT_GE(H5Adelete_by_name(f, segment, "group_size", H5P_DEFAULT), 0);
  const hid_t obj = H5Oopen(f, segment, H5P_DEFAULT);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, "group_size", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0);
  const std::int64_t bad = 48;
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &bad), 0);
  H5Aclose(a);
  H5Sclose(space);
  H5Oclose(obj);
  H5Fclose(f);
  const Report r = check_dump(path);
  const CheckResult* g = find_check(r, "projections/fp8/geometry");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::kFail);
  EXPECT_NE(g->reason.find("309"), std::string::npos) << g->reason;
  EXPECT_NE(g->reason.find("group_size 48"), std::string::npos) << g->reason;
}

TEST(FormatV2, AnActivationGroupThatDoesNotDivideKIsGeometryGuard309) {
  // x_quant_group 48 at K = 128: geometry fails with guard 309, as a weight group_size does (a
  // reviewer's: it read as a quantize FAIL while geometry passed).
  XQuantCase q;
  q.group = 32;
  const std::string path = write_fixture(single_projection_dump(x_quant_projection(q, "w8a8")), "xq-group.h5");
  ncert::testing::poke_attr_i64(path, "/projections/w8a8", "x_quant_group", 48);
  const Report r = check_dump(path);
  const CheckResult* g = find_check(r, "projections/w8a8/geometry");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::kFail);
  EXPECT_NE(g->reason.find("guard-af4-geometry (309): x_quant_group 48 does not divide K = 128"), std::string::npos)
      << g->reason;
}

TEST(FormatV2, RnaWithFp8ActivationsIsRefusedAsTheWriterRefusesIt) {
  // FP8 codes are always rne (§3.6): an rna was read, reported as "e4m3 rna" and never applied.
  XQuantCase q;
  q.type = "e4m3";
  q.group = 32;
  const std::string path = write_fixture(single_projection_dump(x_quant_projection(q, "fp8")), "xq-fp8-rna.h5");
  ncert::testing::poke_attr_string(path, "/projections/fp8", "x_quant_rounding", "rna");
  auto r = DumpReader::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kAttributeInvalid) << r.status().to_string();
  EXPECT_NE(r.status().message().find("x_quant_rounding = \"rna\" with x_quant = \"e4m3\""), std::string::npos)
      << r.status().to_string();
}

TEST(FormatV2, AButterflyLaneTreeIsEmulatedAndALaneLeftOutIsCaught) {
  // The AVX2 horizontal sum (fold the upper 128 bits, then hadd twice) over 8 FMA lanes, computed
  // by the fixture engine's own shuffle loop.
  fixtures::ProjectionSpec p = scaled_projection();
  p.name = "simd";
  p.segments = {};
  p.k_walk = "lanes:8:butterfly(4,1,2):fma";
  const fixtures::DumpSpec spec = single_projection_dump(p);
  const Report r = check_dump(write_fixture(spec, "butterfly.h5"));
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
  EXPECT_EQ(verdict_of(r, "projections/simd/walk"), Verdict::kPass);
  const Report bad = check_dump(write_fixture(spec, "butterfly-lane.h5", Fault::kLaneDropped));
  EXPECT_EQ(verdict_of(bad, "projections/simd/walk"), Verdict::kFail) << bad.to_text(true);
  EXPECT_EQ(verdict_of(bad, "projections/simd/identity"), Verdict::kPass);
}

// A dump written member by member (f16 logits, no projection), to hold the reader's version and
// type rules; returns its path.
std::string f16_logits_dump(const std::string& name, std::int64_t version, bool wrong_token) {
  const std::string path = ncert::testing::scratch_file(name);
  auto w = DumpWriter::create(path, true);
  EXPECT_TRUE(w.ok());
  RootInfo root;
  root.engine = "handwritten";
  root.build = "f16-logits";
  root.schema_version = version;
  EXPECT_TRUE(w->write_root(root).ok());
  constexpr Index kT = 6, kV = 300;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd;
  std::vector<std::uint16_t> logits(kT * kV);
  std::vector<std::int32_t> tokens(kT);
  for (Index t = 0; t < kT; ++t) {
    float best = -1e30f;
    for (Index v = 0; v < kV; ++v) {
      const std::uint16_t h = reference::f32_to_f16(4 * nd(rng));
      logits[static_cast<std::size_t>(t * kV + v)] = h;
      const float value = reference::f16_to_f32(h);
      if (value > best) {
        best = value;
        tokens[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(v);
      }
    }
  }
  if (wrong_token) tokens[2] = (tokens[2] + 1) % kV;
  EXPECT_TRUE(w->create_group("/logits").ok());
  EXPECT_TRUE(w->create_group("/logits/greedy").ok());
  EXPECT_TRUE(w->write_attr("/logits/greedy", "vocab", kV).ok());
  EXPECT_TRUE(w->write_dataset("/logits/greedy/tokens", DType::kI32, {kT}, tokens.data()).ok());
  EXPECT_TRUE(w->write_dataset("/logits/greedy/logits", DType::kF16, {kT, kV}, logits.data()).ok());
  EXPECT_TRUE(w->close().ok());
  return path;
}

TEST(FormatV2, F16LogitsAreWitnessedAsTheirExactF32Values) {
  const Report good = check_dump(f16_logits_dump("f16-logits.h5", 2, false));
  EXPECT_EQ(verdict_of(good, "logits/greedy/witness"), Verdict::kPass) << good.to_text(true);
  const Report bad = check_dump(f16_logits_dump("f16-logits-bad.h5", 2, true));
  EXPECT_EQ(verdict_of(bad, "logits/greedy/witness"), Verdict::kFail) << bad.to_text(true);
}

TEST(FormatV2, F16LogitsCompareAsTheirExactF32Values) {
  // Two identical f16 runs compare equal row for row; against a run that emitted another token
  // at row 2, only the rows up to the divergence are matched.
  CompareOptions same;
  same.a = f16_logits_dump("f16-cmp-a.h5", 2, false);
  same.b = f16_logits_dump("f16-cmp-b.h5", 2, false);
  auto r = run_compare(same);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->verdict(), Verdict::kPass) << r->to_text(true);
  const auto* e = ncert::testing::evidence_of<LogitsEvidence>(find_check(*r, "logits/greedy"));
  ASSERT_NE(e, nullptr) << r->to_text(true);
  EXPECT_EQ(e->matched, 6);
  EXPECT_EQ(e->bit_identical_rows, 6);
  EXPECT_EQ(e->vocab, 300);
  CompareOptions other = same;
  other.b = f16_logits_dump("f16-cmp-c.h5", 2, true);
  auto d = run_compare(other);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  const auto* f = ncert::testing::evidence_of<LogitsEvidence>(find_check(*d, "logits/greedy"));
  ASSERT_NE(f, nullptr) << d->to_text(true);
  EXPECT_EQ(f->matched, 3);
  EXPECT_EQ(f->divergence_row, 3);
}

TEST(FormatV2, AVersion2MemberInAVersion1FileIsRefusedNamingIt) {
  const std::string path = f16_logits_dump("f16-logits-v1.h5", 1, false);
  auto r = DumpReader::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kSchemaVersion);
  EXPECT_NE(r.status().message().find("/logits/greedy/logits"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("declare 2"), std::string::npos) << r.status().to_string();
  for (std::int64_t v : {0, 3}) {
    auto other = DumpReader::open(f16_logits_dump("f16-logits-v" + std::to_string(v) + ".h5", v, false));
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.status().code(), ErrorCode::kSchemaVersion);
  }
}

TEST(FormatV2, AVersion2AttributeIsNamedBeforeTheMembersItCallsFor) {
  // x_quant in a version 1 file read "missing dataset x_quantized", and variant = zero-point
  // "missing zero_points" (a review's): the version 2 attribute is the cause, named first.
  struct Case {
    std::string object, name, value, says;
  };
  for (const Case& c :
       {Case{"/projections/attn_qkv", "x_quant", "int8", "/projections/attn_qkv: x_quant is dump format version 2"},
        Case{"/projections/attn_qkv/weight/s0_af4", "variant", "zero-point",
             "variant = \"zero-point\" is dump format version 2"}}) {
    SCOPED_TRACE(c.name);
    const std::string path = write_fixture(fixtures::preset_tiny(), "v1-" + c.name + ".h5");
    ncert::testing::poke_attr_string(path, c.object, c.name, c.value);
    auto r = DumpReader::open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kSchemaVersion) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().to_string();
  }
}

TEST(FormatV2, VersionOneFixturesStayVersionOne) {
  // A dump without a v2 member declares 1, as every v1 reader expects.
  fixtures::ProjectionSpec p = f16_projection();
  p.x = p.output = p.bias = DType::kBf16;
  p.segments.clear();  // one bf16 segment
  const std::string path = write_fixture(single_projection_dump(p), "v1.h5");
  auto reader = DumpReader::open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->model().schema_version, 1);
}

}  // namespace
}  // namespace ncert::certify
