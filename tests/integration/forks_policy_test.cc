// `compare --policy forks` against `forks`: one verdict on every logits pair the other tests
// use (planted forks of every class, teacher-forced runs, runs of different lengths, lm_head
// pairs, noisy and identical builds, cross-dtype builds), the default policy for runs whose
// logits differ in dtype, and the units of margins and differences across dtypes.
#include <gtest/gtest.h>

#include "certify/commands/compare.h"
#include "certify/commands/forks.h"
#include "certify/commands/witness.h"
#include "fixtures/generator.h"
#include "fixtures/logits.h"
#include "tests/common/h5_poke.h"
#include "tests/common/report_checks.h"
#include "tests/common/report_json.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using fixtures::ForkKind;
using ncert::testing::DumpPair;
using ncert::testing::evidence_of;
using ncert::testing::find_check;
using ncert::testing::scratch_file;
using ncert::testing::scratch_pair;

struct NamedPair {
  std::string name;
  DumpPair files;
  bool matched_history = false;
};

DumpPair planted_pair(const std::string& tag, std::vector<fixtures::ForkPlant> plants, bool forced = false,
                      DType dtype_b = DType::kF32, Index tokens_b = 24) {
  DumpPair p = scratch_pair("fp-" + tag);
  fixtures::ForkPairSpec s;
  s.forks = std::move(plants);
  s.teacher_forced = forced;
  s.dtype_b = dtype_b;
  s.tokens_b = tokens_b;
  const Status st = fixtures::write_fork_pair(p.a, p.b, s, true);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return p;
}

Report compare_with(const NamedPair& p, std::optional<std::string> policy) {
  CompareOptions o;
  o.a = p.files.a;
  o.b = p.files.b;
  o.matched_history = p.matched_history;
  if (policy) o.policy = *parse_policy(*policy);
  auto r = run_compare(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Report{};
}

Report forks_of(const NamedPair& p) {
  ForksOptions o;
  o.a = p.files.a;
  o.b = p.files.b;
  o.matched_history = p.matched_history;
  auto r = run_forks(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Report{};
}

/// A copy: the reports are temporaries.
CheckResult logits_check_of(const Report& r) {
  for (const CheckResult& c : r.checks) {
    if (c.kind == CheckKind::kLogits) return c;
  }
  ADD_FAILURE() << "no logits check";
  return CheckResult{};
}

/// Every pair the logits and forks tests build, and the cross-dtype builds of this file.
std::vector<NamedPair> every_pair() {
  std::vector<NamedPair> out;
  out.push_back({"identical", planted_pair("none", {})});
  out.push_back({"ulp flip", planted_pair("ulp", {{9, ForkKind::kUlpFlip}})});
  out.push_back({"exact tie", planted_pair("tie", {{9, ForkKind::kExactTie}})});
  out.push_back({"exact tie early", planted_pair("tie2", {{2, ForkKind::kExactTie}})});
  out.push_back({"unexplained", planted_pair("unexpl", {{9, ForkKind::kUnexplained}})});
  out.push_back({"invalid", planted_pair("invalid", {{9, ForkKind::kInvalid}})});
  out.push_back({"undetermined", planted_pair("first", {{0, ForkKind::kUlpFlip}})});
  out.push_back({"free running", planted_pair("free", {{5, ForkKind::kUlpFlip}, {15, ForkKind::kUnexplained}})});
  const std::vector<fixtures::ForkPlant> forced = {
      {3, ForkKind::kUlpFlip}, {8, ForkKind::kExactTie}, {14, ForkKind::kUnexplained}, {20, ForkKind::kInvalid}};
  out.push_back({"teacher-forced", planted_pair("forced", forced, true), true});
  out.push_back({"teacher-forced, free", planted_pair("forced", forced, true), false});
  out.push_back({"explained teacher-forced",
                 planted_pair("forced-ok", {{3, ForkKind::kUlpFlip}, {8, ForkKind::kExactTie}}, true), true});
  out.push_back({"B stops early", planted_pair("short", {}, false, DType::kF32, 20)});
  out.push_back({"bf16 tie", planted_pair("bf16-tie", {{9, ForkKind::kTypeTie}}, false, DType::kBf16)});
  out.push_back({"f16 tie", planted_pair("f16-tie", {{9, ForkKind::kTypeTie}}, false, DType::kF16)});
  out.push_back({"bf16 unexplained", planted_pair("bf16-far", {{9, ForkKind::kUnexplained}}, false, DType::kBf16)});
  out.push_back({"bf16 tie first row", planted_pair("bf16-first", {{0, ForkKind::kTypeTie}}, false, DType::kBf16)});
  out.push_back({"bf16 no fork", planted_pair("bf16-none", {}, false, DType::kBf16)});
  for (const float noise : {0.0f, 1e-3f}) {
    fixtures::LogitsPairSpec s;
    s.tokens = 40;
    s.vocab = 1000;
    s.noise = noise;
    DumpPair p = scratch_pair(noise > 0 ? "fp-noisy" : "fp-same");
    EXPECT_TRUE(fixtures::write_logits_pair(p.a, p.b, s, true).ok());
    out.push_back({noise > 0 ? "noisy builds" : "identical builds", p});
  }
  for (const float hidden_noise : {0.0f, 0.05f}) {
    fixtures::LmHeadForkSpec s;
    s.hidden_noise = hidden_noise;
    const std::string tag = hidden_noise > 0 ? "body" : "same";
    DumpPair p{scratch_file("fp-head-" + tag + "-a.h5"), scratch_file("fp-head-" + tag + "-b.h5")};
    EXPECT_TRUE(fixtures::write_lm_head_fork_pair(p.a, p.b, s, true).ok());
    out.push_back({"lm_head pair, " + tag + " hidden state", p});
  }
  {
    // The tiny preset against itself with B emitting row 3's runner-up (an invalid emission
    // with the lm_head intervals as envelope), teacher-forced.
    DumpPair p{scratch_file("fp-tiny-a.h5"), scratch_file("fp-tiny-b.h5")};
    EXPECT_TRUE(fixtures::write_dump(p.a, fixtures::preset_tiny(), {}, true).ok());
    EXPECT_TRUE(fixtures::write_dump(p.b, fixtures::preset_tiny(), {}, true).ok());
    out.push_back({"tiny preset with itself", p, true});
    std::vector<std::int32_t> t;
    DumpPair q{scratch_file("fp-tiny-c.h5"), p.b};
    EXPECT_TRUE(fixtures::write_dump(q.a, fixtures::preset_tiny(), {}, true).ok());
    {
      auto reader = DumpReader::open(q.b);
      EXPECT_TRUE(reader.ok());
      t = *reader->read_i32("/logits/greedy/tokens");
      const Index V = reader->model().logits[0].vocab;
      std::vector<float> row(static_cast<std::size_t>(V));
      EXPECT_TRUE(reader->read_rows("/logits/greedy/logits", 3, 1, row.data()).ok());
      t[3] = static_cast<std::int32_t>(scan_row(row.data(), V).runner_up_index);
    }
    ncert::testing::poke_i32(q.b, "/logits/greedy/tokens", t);
    out.push_back({"tiny preset, invalid emission", q, true});
  }
  return out;
}

TEST(ForksPolicy, CompareAndForksGiveOneVerdictOnEveryPair) {
  // compare --policy forks passes exactly where every check of `forks` passes, and classes the
  // same forks the same way (it calls the same code on the same rows). An undetermined fork is a
  // SKIP in `forks` and a FAIL here: a verdict policy does not leave a divergence unjudged.
  int passes = 0, fails = 0;
  for (const NamedPair& p : every_pair()) {
    SCOPED_TRACE(p.name);
    const Report cmp = compare_with(p, "forks");
    const Report frk = forks_of(p);
    const CheckResult c = logits_check_of(cmp);
    bool forks_pass = true;
    std::vector<std::string> classes;
    for (const CheckResult& f : frk.checks) {
      if (f.kind != CheckKind::kFork) continue;
      forks_pass = forks_pass && f.verdict == Verdict::kPass;
      if (const auto* e = evidence_of<ForkEvidence>(&f)) classes.emplace_back(fork_class_name(e->fork.cls));
    }
    EXPECT_EQ(c.verdict == Verdict::kPass, forks_pass) << c.reason;
    EXPECT_EQ(cmp.exit_code() == 0, forks_pass) << c.reason;
    const auto* e = evidence_of<LogitsEvidence>(&c);
    ASSERT_NE(e, nullptr);
    std::vector<std::string> seen;
    for (const Fork& f : e->forks) seen.emplace_back(fork_class_name(f.cls));
    EXPECT_EQ(seen, classes);
    (forks_pass ? passes : fails) += 1;
  }
  // Both directions are exercised.
  EXPECT_GE(passes, 8);
  EXPECT_GE(fails, 6);
}

TEST(ForksPolicy, ABf16TieIsExplainedAndIsTheDefaultAcrossDtypes) {
  // A (f32) emits b, one f32 ulp above a; B (bf16) holds both at the same bf16 value and emits
  // the lower id a. top1 fails on it, forks calls it a tie, and the default policy for an f32
  // and a bf16 run is forks.
  const NamedPair p{"bf16 tie", planted_pair("bf16-tie", {{9, ForkKind::kTypeTie}}, false, DType::kBf16)};
  const CheckResult top1 = logits_check_of(compare_with(p, "top1"));
  EXPECT_EQ(top1.verdict, Verdict::kFail);
  EXPECT_NE(top1.reason.find("row 9: argmax"), std::string::npos) << top1.reason;
  const Report explicit_forks = compare_with(p, "forks");
  const CheckResult c = logits_check_of(explicit_forks);
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.reason;
  EXPECT_NE(c.reason.find("1 fork(s), 1 tie"), std::string::npos) << c.reason;
  EXPECT_EQ(stats(c)["policy_source"], "--policy");
  EXPECT_EQ(stats(c)["forks"][0]["class"], "tie");
  EXPECT_EQ(stats(c)["logits_dtypes"], Json::array({"f32", "bf16"}));
  const Report by_default = compare_with(p, std::nullopt);
  const CheckResult d = logits_check_of(by_default);
  EXPECT_EQ(d.verdict, Verdict::kPass) << d.reason;
  EXPECT_EQ(stats(d)["policy"], "forks");
  EXPECT_EQ(stats(d)["policy_source"].get<std::string>().rfind("default: A's logits are f32, B's bf16", 0), 0u);
  EXPECT_EQ(by_default.exit_code(), 0);
  // An explicit --policy always wins: bitwise fails every cross-dtype pair.
  EXPECT_EQ(logits_check_of(compare_with(p, "bitwise")).verdict, Verdict::kFail);
  // Runs of one dtype keep bitwise as their default.
  const NamedPair same{"f32 tie", planted_pair("tie", {{9, ForkKind::kExactTie}})};
  const CheckResult s = logits_check_of(compare_with(same, std::nullopt));
  EXPECT_EQ(stats(s)["policy"], "bitwise");
  EXPECT_EQ(stats(s)["policy_source"], "default: both runs' logits are f32");
  EXPECT_EQ(s.verdict, Verdict::kFail);
}

TEST(ForksPolicy, ARealDivergenceFails) {
  // B (bf16) raises b 1.5 above A's value: beyond anything the rows before the fork showed.
  const NamedPair p{"bf16 far", planted_pair("bf16-far", {{9, ForkKind::kUnexplained}}, false, DType::kBf16)};
  const Report r = compare_with(p, std::nullopt);
  const CheckResult c = logits_check_of(r);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.reason.find("row 9 (position 15)"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("unexplained"), std::string::npos) << c.reason;
  EXPECT_EQ(stats(c)["forks"][0]["class"], "unexplained");
  EXPECT_EQ(stats(c)["first_failure_row"], 9);
  EXPECT_EQ(r.exit_code(), 1);
  // A fork with no envelope (the first row: nothing measured before it) is not passed.
  const NamedPair first{"first", planted_pair("bf16-first", {{0, ForkKind::kTypeTie}}, false, DType::kBf16)};
  const CheckResult u = logits_check_of(compare_with(first, std::nullopt));
  EXPECT_EQ(u.verdict, Verdict::kFail);
  EXPECT_NE(u.reason.find("undetermined"), std::string::npos) << u.reason;
}

TEST(ForksPolicy, TensorsDoNotTakeTheForksPolicy) {
  EXPECT_EQ(parse_tensor_policy("forks").status().code(), ErrorCode::kPolicyInvalid);
  EXPECT_TRUE(parse_policy("forks").ok());
  EXPECT_EQ(parse_policy("forks:1").status().code(), ErrorCode::kPolicyInvalid);
}

TEST(LogitsUnits, Bf16MarginsAreInBf16Ulps) {
  // B's logits are bf16: a margin of m is m / 2^(e-7) bf16 ulps at a logit in [2^e, 2^(e+1)),
  // 2^16 times fewer than f32 ulps (which the JSON's margin_ulps keeps).
  const DumpPair p = planted_pair("bf16-none", {}, false, DType::kBf16);
  WitnessOptions o;
  o.dump = p.b;
  auto r = run_witness(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const CheckResult* c = find_check(*r, "logits/greedy/witness");
  ASSERT_NE(c, nullptr);
  const Json s = stats(*c);
  EXPECT_EQ(s["logits_dtype"], "bf16");
  EXPECT_DOUBLE_EQ(s["min_margin_ulps"].get<double>(), 65536 * s["min_margin_dtype_ulps"].get<double>());
  EXPECT_GE(s["min_margin_dtype_ulps"].get<double>(), 1.0);  // distinct bf16 values are >= 1 bf16 ulp apart
  EXPECT_NE(c->reason.find(" bf16 ulps) at position"), std::string::npos) << c->reason;
  const auto* e = evidence_of<WitnessEvidence>(c);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->logits_dtype, DType::kBf16);
  // The histogram counts bf16 ulps: nothing of 2^16 and above (f32 ulps would all be there).
  Index high = e->margin_ulps.above;
  for (std::size_t i = 0; i < e->margin_ulps.counts.size(); ++i) {
    if (e->margin_ulps.log2_min + static_cast<int>(i) >= 16) high += e->margin_ulps.counts[i];
  }
  EXPECT_EQ(high, 0);
  // The f32 run of the same pair is counted in f32 ulps, as before.
  o.dump = p.a;
  auto ra = run_witness(o);
  ASSERT_TRUE(ra.ok());
  const Json sa = stats(*find_check(*ra, "logits/greedy/witness"));
  EXPECT_EQ(sa["logits_dtype"], "f32");
  EXPECT_EQ(sa["min_margin_ulps"], sa["min_margin_dtype_ulps"]);
}

TEST(LogitsUnits, ForkGapsAreInEachRowsOwnUlps) {
  // A bf16 tie: A's gap is one f32 ulp, B's is 0; forks prints "1 f32 ulps" and "0 bf16 ulps".
  const NamedPair p{"bf16 tie", planted_pair("bf16-tie", {{9, ForkKind::kTypeTie}}, false, DType::kBf16)};
  const Report r = forks_of(p);
  const CheckResult* f = nullptr;
  for (const CheckResult& c : r.checks) {
    if (c.kind == CheckKind::kFork) f = &c;
  }
  ASSERT_NE(f, nullptr);
  const Json s = stats(*f);
  EXPECT_EQ(s["class"], "tie") << f->reason;
  EXPECT_EQ(s["gap_a_dtype_ulps"], 1.0);
  EXPECT_EQ(s["gap_b_dtype_ulps"], 0.0);
  EXPECT_EQ(s["witness_b"]["logits_dtype"], "bf16");
  std::string details;
  for (const std::string& d : f->details) details += d + "\n";
  EXPECT_NE(details.find("1 f32 ulps)"), std::string::npos) << details;
  EXPECT_NE(details.find("0 bf16 ulps)"), std::string::npos) << details;
}

TEST(LogitsUnits, CrossDtypeDifferencesAreAbsoluteAndRelativeNotUlpCounts) {
  // f32 against bf16 under bitwise: every row differs; the failing row's detail gives |d| and
  // the relative difference where the values lie farthest apart, never an f32 ulp count.
  const NamedPair p{"bf16 none", planted_pair("bf16-none", {}, false, DType::kBf16)};
  const CheckResult c = logits_check_of(compare_with(p, "bitwise"));
  ASSERT_EQ(c.verdict, Verdict::kFail);
  ASSERT_FALSE(c.details.empty());
  EXPECT_EQ(c.details[0].find("ulps apart"), std::string::npos) << c.details[0];
  EXPECT_EQ(c.details[0].find("counted through zero"), std::string::npos) << c.details[0];
  EXPECT_NE(c.details[0].find("relative "), std::string::npos) << c.details[0];
  const Json at = stats(c)["max_ulp_at"];
  EXPECT_GT(at["abs_diff"].get<double>(), 0);
  // B is A plus N(0, 1e-4), rounded to bf16: |d| stays near the noise, while the relative
  // difference of a value near zero can reach 1 or 2 (opposite signs): both are given.
  EXPECT_LT(at["abs_diff"].get<double>(), 0.05);
  EXPECT_GT(at["rel_diff"].get<double>(), 0);
  EXPECT_LE(at["rel_diff"].get<double>(), 2);
  // An ulp:N policy across dtypes fails saying why an f32 ulp count cannot judge the pair, with
  // |d| and the relative difference, and names the policies that can.
  const CheckResult u = logits_check_of(compare_with(p, "ulp:4"));
  ASSERT_EQ(u.verdict, Verdict::kFail);
  EXPECT_EQ(u.reason.find("ulps apart"), std::string::npos) << u.reason;
  EXPECT_NE(u.reason.find("|d| "), std::string::npos) << u.reason;
  EXPECT_NE(u.reason.find("cannot compare f32 with bf16 logits: use the forks policy"), std::string::npos) << u.reason;
  // Within one dtype the ulp count stays.
  const NamedPair f32{"noisy", planted_pair("ulp", {{9, ForkKind::kUlpFlip}})};
  const CheckResult g = logits_check_of(compare_with(f32, "bitwise"));
  ASSERT_FALSE(g.details.empty());
  EXPECT_NE(g.details[0].find("ulp"), std::string::npos) << g.details[0];
}

}  // namespace
}  // namespace ncert::certify
