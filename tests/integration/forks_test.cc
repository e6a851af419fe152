// `forks` on generated pairs with planted divergences: identical runs (no fork), a 1-ulp flip
// (near-tie), an exact tie broken differently (tie), a row pushed far beyond the noise
// (unexplained), an emission that is not its row's maximum (invalid), teacher-forced runs with
// several forks, runs of different lengths; plus the envelope sources and --require-identical.
#include <gtest/gtest.h>

#include <fstream>

#include "certify/commands/forks.h"
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
using ncert::testing::scratch_file;
using ncert::testing::scratch_pair;

DumpPair fork_pair(const std::string& tag, fixtures::ForkPairSpec spec) {
  DumpPair p = scratch_pair(tag);
  const Status s = fixtures::write_fork_pair(p.a, p.b, spec, true);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return p;
}

fixtures::ForkPairSpec planted(std::vector<fixtures::ForkPlant> forks, bool teacher_forced = false) {
  fixtures::ForkPairSpec s;
  s.forks = std::move(forks);
  s.teacher_forced = teacher_forced;
  return s;
}

Report forks(const DumpPair& p, ForksOptions o = {}) {
  o.a = p.a;
  o.b = p.b;
  auto r = run_forks(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Report{};
}

std::vector<const CheckResult*> fork_results(const Report& r) {
  std::vector<const CheckResult*> out;
  for (const CheckResult& c : r.checks) {
    if (c.kind == CheckKind::kFork) out.push_back(&c);
  }
  return out;
}

TEST(Forks, IdenticalStreamsHaveNoFork) {
  const Report r = forks(fork_pair("same", planted({})));
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->verdict, Verdict::kPass);
  EXPECT_EQ(stats(*f[0])["class"], "none");
  EXPECT_EQ(stats(*f[0])["forks"], 0);
  const auto* e = evidence_of<NoForkEvidence>(f[0]);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->rows_a, 24);
  EXPECT_EQ(e->rows_b, 24);
  EXPECT_EQ(e->compared, 24);
  EXPECT_EQ(r.stats["forks"], 0);
  EXPECT_EQ(r.exit_code(), 0);
}

TEST(Forks, OneUlpFlipIsANearTieTheNoiseExplains) {
  const Report r = forks(fork_pair("ulp", planted({{9, ForkKind::kUlpFlip}})));
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  const Json s = stats(*f[0]);
  EXPECT_EQ(s["class"], "near-tie") << f[0]->reason;
  EXPECT_EQ(f[0]->verdict, Verdict::kPass);
  EXPECT_EQ(s["row"], 9);
  EXPECT_EQ(s["position"], 15);  // prompt of 6
  EXPECT_EQ(s["gap_a_ulps"], 1.0);
  EXPECT_EQ(s["gap_b_ulps"], 1.0);
  EXPECT_EQ(s["rank_of_b_in_a"], 2);
  EXPECT_EQ(s["rank_of_a_in_b"], 2);
  // The envelope comes from the 9 matched rows before the fork (noise 1e-4).
  EXPECT_NE(s["envelope"]["source"].get<std::string>().find("observed"), std::string::npos);
  EXPECT_EQ(s["before"]["rows"], 9);
  EXPECT_GT(s["envelope"]["at_a"].get<double>(), 1e-4);
  EXPECT_LT(s["envelope"]["at_a"].get<double>(), 1e-3);
  EXPECT_EQ(s["witness_a"]["margin_ulps"], 1.0);
  EXPECT_EQ(s["top5_a"].size(), 5u);
  EXPECT_EQ(s["top5_a"][0]["token"], s["token_a"]);
  EXPECT_EQ(s["top5_b"][0]["token"], s["token_b"]);
  EXPECT_EQ(s["context"].size(), 8u);
  EXPECT_FALSE(f[0]->details.empty());
  EXPECT_TRUE(f[0]->always_show_details);
}

TEST(Forks, ExactTieBrokenDifferentlyIsATie) {
  const Report r = forks(fork_pair("tie", planted({{4, ForkKind::kExactTie}})));
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "tie") << f[0]->reason;
  EXPECT_EQ(f[0]->verdict, Verdict::kPass);
  EXPECT_EQ(stats(*f[0])["gap_a"], 0.0);
  EXPECT_EQ(stats(*f[0])["witness_a"]["class"], "tie");
  EXPECT_LT(stats(*f[0])["token_a"].get<int>(), stats(*f[0])["token_b"].get<int>());
}

TEST(Forks, ARowPushedBeyondTheNoiseIsUnexplained) {
  const Report r = forks(fork_pair("far", planted({{12, ForkKind::kUnexplained}})));
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "unexplained") << f[0]->reason;
  EXPECT_EQ(f[0]->verdict, Verdict::kFail);
  EXPECT_NEAR(stats(*f[0])["delta_at_b"].get<double>(), 1.5, 1e-3);
  const auto* e = evidence_of<ForkEvidence>(f[0]);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->fork.cls, ForkClass::kUnexplained);
  EXPECT_TRUE(e->fork.has_envelope);
  EXPECT_GT(e->fork.delta_b, e->fork.env_b);  // beyond the envelope
  ASSERT_TRUE(f[0]->first_failure.has_value());
  EXPECT_EQ(f[0]->first_failure->row, 12);
  EXPECT_EQ(r.exit_code(), 1);
  // A generous --logit-error explains it (each run may be 0.8 off: envelope 1.6).
  ForksOptions o;
  o.logit_error = 0.8;
  const Report r2 = forks(fork_pair("far2", planted({{12, ForkKind::kUnexplained}})), o);
  const auto g = fork_results(r2);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(stats(*g[0])["class"], "near-tie") << g[0]->reason;
  EXPECT_NE(stats(*g[0])["envelope"]["source"].get<std::string>().find("--logit-error"), std::string::npos);
  EXPECT_DOUBLE_EQ(stats(*g[0])["envelope"]["at_b"].get<double>(), 1.6);
}

/// B is A's f32 logits rounded to bf16 with no other noise (stored as bf16, or widened to f32),
/// `kind` planted at row 9: its one fork, in the fork check's evidence.
const ForkEvidence* bf16_export_fork(const std::string& tag, ForkKind kind, Report& r, bool stored_f32 = false) {
  fixtures::ForkPairSpec spec = planted({{9, kind}});
  spec.noise = 0;
  spec.dtype_b = DType::kBf16;
  spec.b_stored_f32 = stored_f32;
  r = forks(fork_pair(tag, spec));
  const auto f = fork_results(r);
  EXPECT_EQ(f.size(), 1u);
  return f.size() == 1 ? evidence_of<ForkEvidence>(f[0]) : nullptr;
}

TEST(Forks, TheObservedEnvelopeGrowsWithTheForksOwnRounding) {
  // B is A's f32 logits rounded to bf16 (no other noise). At the fork, a binade above every
  // row before it, A holds b 0.4 bf16 spacings above a and B ties them: |d| at b is 0.4
  // spacings there, more than the half spacing the rows before measured at their values. It
  // was read "unexplained" ("beyond the envelope 0.03124", a reviewer's); the envelope is now
  // the larger of that and half a spacing of each run's type at the fork's values.
  Report r;
  const ForkEvidence* e = bf16_export_fork("rounded-tie", ForkKind::kRoundedTie, r);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->fork.cls, ForkClass::kTie) << e->fork.why;
  EXPECT_EQ(r.verdict(), Verdict::kPass);
  // At A's token (b), which B's rounding moved: beyond what the rows before measured.
  EXPECT_GT(e->fork.delta_a, e->fork.before.max_abs);
  EXPECT_LE(e->fork.delta_a, e->fork.env_a);
  EXPECT_NE(e->fork.envelope_source.find("or half a spacing of each run's logits at the fork's values where that is "
                                         "larger"),
            std::string::npos)
      << e->fork.envelope_source;
}

TEST(Forks, TheRoundingAllowanceHidesNoValueMovedBeyondItsRounding) {
  // B's bf16 value of A's second token one spacing above where rounding puts it: 0.7 spacings
  // from A's, which rounding alone cannot reach. Added to what the rows before measured, the
  // allowance passed it (a reviewer's); the larger of the two does not.
  Report r;
  const ForkEvidence* e = bf16_export_fork("rounded-fault", ForkKind::kRoundedFault, r);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->fork.cls, ForkClass::kUnexplained) << e->fork.why;
  EXPECT_EQ(r.verdict(), Verdict::kFail);
}

TEST(Forks, Bf16LogitsStoredAsF32AreAllowedTheirBf16Rounding) {
  // An engine widening its bf16 outputs to f32 (the format allows it): the same rounded tie as
  // above, B's values bf16 in an f32 dataset. Read at f32's spacing it was "unexplained".
  Report r;
  const ForkEvidence* e = bf16_export_fork("rounded-tie-f32", ForkKind::kRoundedTie, r, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->fork.cls, ForkClass::kTie) << e->fork.why;
}

TEST(Forks, ARunWithNoRowsHasNoTokensToCompareAndFails) {
  // "token streams identical over the 0 common tokens" passed where compare's forks policy
  // fails "no matched rows to judge" (a reviewer's): the same verdict now.
  RunForks r;
  r.run_a = r.run_b = "greedy";
  r.rows_b = 12;
  const std::vector<CheckResult> c = fork_checks(r, ForksOptions{}, nullptr);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].verdict, Verdict::kFail);
  EXPECT_EQ(c[0].reason, "no tokens to compare: A's run holds no rows, B's 12");
}

TEST(Forks, AnEmissionThatIsNotItsRowsMaximumIsInvalid) {
  const Report r = forks(fork_pair("invalid", planted({{6, ForkKind::kInvalid}})));
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "invalid") << f[0]->reason;
  EXPECT_EQ(f[0]->verdict, Verdict::kFail);
  const auto* e = evidence_of<ForkEvidence>(f[0]);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->fork.cls, ForkClass::kInvalid);
  EXPECT_TRUE(e->fork.a.witness.ok);
  EXPECT_FALSE(e->fork.b.witness.ok);  // B's emission is not its own row's maximum
  EXPECT_TRUE(stats(*f[0])["witness_b"].contains("failure"));
}

TEST(Forks, FreeRunningPairsStopAtTheFirstFork) {
  // The second plant is ignored by the generator too: B's rows after row 5 are another context.
  const Report r = forks(fork_pair("free", planted({{5, ForkKind::kUlpFlip}, {15, ForkKind::kUnexplained}})));
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["row"], 5);
}

TEST(Forks, TeacherForcedRunsReportEveryFork) {
  const DumpPair p = fork_pair(
      "forced",
      planted(
          {{3, ForkKind::kUlpFlip}, {8, ForkKind::kExactTie}, {14, ForkKind::kUnexplained}, {20, ForkKind::kInvalid}},
          true));
  ForksOptions o;
  o.matched_history = true;
  const Report r = forks(p, o);
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 4u);
  const char* want[] = {"near-tie", "tie", "unexplained", "invalid"};
  const int rows[] = {3, 8, 14, 20};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(stats(*f[static_cast<std::size_t>(k)])["row"], rows[k]);
    EXPECT_EQ(stats(*f[static_cast<std::size_t>(k)])["class"], want[k]) << f[static_cast<std::size_t>(k)]->reason;
  }
  // The envelope of the fork at 14 ignores the earlier fork rows (3, 8): 12 matched rows.
  EXPECT_EQ(stats(*f[2])["before"]["rows"], 12);
  EXPECT_EQ(r.stats["classes"]["near-tie"], 1);
  EXPECT_EQ(r.stats["classes"]["invalid"], 1);
  EXPECT_EQ(r.verdict(), Verdict::kFail);
  // Without --matched-history only the first fork counts.
  EXPECT_EQ(fork_results(forks(p)).size(), 1u);
}

TEST(Forks, RequireIdenticalFailsOnAnyFork) {
  ForksOptions o;
  o.require_identical = true;
  const Report r = forks(fork_pair("strict", planted({{2, ForkKind::kExactTie}})), o);
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "tie");
  EXPECT_EQ(f[0]->verdict, Verdict::kFail);
  // A tie is explained; that --require-identical failed it is only in the reason.
  EXPECT_NE(f[0]->reason.find("--require-identical"), std::string::npos);
}

TEST(Forks, RunsOfDifferentLengthsAreNotAFork) {
  fixtures::ForkPairSpec s = planted({});
  s.tokens_b = 20;
  const DumpPair p = fork_pair("short", s);
  const Report r = forks(p);
  auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->verdict, Verdict::kPass);
  const auto* e = evidence_of<NoForkEvidence>(f[0]);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->rows_a, 24);
  EXPECT_EQ(e->rows_b, 20);  // B stops 4 tokens earlier
  EXPECT_EQ(e->compared, 20);
  ForksOptions o;
  o.require_identical = true;
  const Report strict = forks(p, o);
  f = fork_results(strict);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->verdict, Verdict::kFail);
}

TEST(Forks, AForkWithNoEnvelopeIsUndeterminedNotUnexplained) {
  // At the first row nothing was measured before the fork, and no lm_head or --logit-error
  // bounds the runs: the fork is undetermined (SKIP), and the reason names what would decide it.
  const DumpPair p = fork_pair("first", planted({{0, ForkKind::kUlpFlip}}));
  const Report r = forks(p);
  auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "undetermined");
  EXPECT_EQ(f[0]->verdict, Verdict::kSkip);
  EXPECT_EQ(r.verdict(), Verdict::kPass);
  const auto* e = evidence_of<ForkEvidence>(f[0]);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->fork.cls, ForkClass::kUndetermined);
  EXPECT_FALSE(e->fork.has_envelope);
  // A SKIP's reason naming what would decide it is the contract.
  EXPECT_NE(f[0]->reason.find("--logit-error"), std::string::npos) << f[0]->reason;
  EXPECT_NE(stats(*f[0])["envelope"]["source"].get<std::string>().find("none"), std::string::npos);
  EXPECT_EQ(r.stats["classes"]["undetermined"], 1);
  // --logit-error decides it; --require fork turns the skip into a failure.
  ForksOptions o;
  o.logit_error = 1e-3;
  const Report decided = forks(p, o);
  f = fork_results(decided);
  EXPECT_EQ(stats(*f[0])["class"], "near-tie");
  ForksOptions req;
  req.require = *parse_requirement("fork");
  EXPECT_EQ(forks(p, req).verdict(), Verdict::kFail);
}

TEST(Forks, BitIdenticalRowsBeforeTheForkMeasureNoEnvelope) {
  // Two builds identical bit for bit on rows 0-5 that flip a 1-ulp near-tie at row 6: the
  // matched rows measured no disagreement, so nothing says a one-ulp difference is beyond what
  // numerics allow. It was called unexplained "beyond the envelope 0"; it is undetermined.
  fixtures::ForkPairSpec spec = planted({{6, ForkKind::kUlpFlip}});
  spec.noise = 0;
  const DumpPair p = fork_pair("identical-before", spec);
  const Report r = forks(p);
  auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "undetermined") << f[0]->reason;
  EXPECT_EQ(f[0]->verdict, Verdict::kSkip);
  const std::string src = stats(*f[0])["envelope"]["source"].get<std::string>();
  EXPECT_EQ(src.rfind("none:", 0), 0u) << src;
  EXPECT_NE(src.find("bit-identical"), std::string::npos) << src;
  EXPECT_NE(f[0]->reason.find("--logit-error"), std::string::npos) << f[0]->reason;
  // --logit-error decides it.
  ForksOptions o;
  o.logit_error = 1e-3;
  EXPECT_EQ(stats(*fork_results(forks(p, o))[0])["class"], "near-tie");
}

TEST(Forks, DifferentHiddenStatesUseTheObservedEnvelopeNotTheLmHeadIntervals) {
  // Both dumps carry their f32 lm_heads, but B's model body fed a different hidden state: each
  // lm_head's interval certifies its own run, not the distance between them (~0.3 here against
  // intervals of ~2e-4). The matched rows before the fork disagree as much: a numeric near-tie.
  const std::string a = scratch_file("body-a.h5"), b = scratch_file("body-b.h5");
  fixtures::LmHeadForkSpec spec;
  spec.hidden_noise = 0.05f;
  ASSERT_TRUE(fixtures::write_lm_head_fork_pair(a, b, spec, true).ok());
  const Report r = forks({a, b});
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "near-tie") << f[0]->reason;
  const std::string src = stats(*f[0])["envelope"]["source"];
  EXPECT_EQ(src.rfind("observed", 0), 0u) << src;
  EXPECT_NE(src.find("inputs differ at row 8"), std::string::npos) << src;
  EXPECT_GT(stats(*f[0])["delta_at_a"].get<double>(), 0.1);
  // --logit-error overrides every other source, and too small a one calls the fork unexplained.
  ForksOptions o;
  o.logit_error = 1e-4;
  const Report overridden = forks({a, b}, o);
  const auto g = fork_results(overridden);
  EXPECT_EQ(stats(*g[0])["class"], "unexplained");
  EXPECT_EQ(stats(*g[0])["envelope"]["source"].get<std::string>().rfind("--logit-error", 0), 0u);
}

TEST(Forks, TheSameHiddenStateUsesBothRunsLmHeadIntervals) {
  // The same hidden states and weights, two accumulation orders: the runs' exact logits are the
  // same, so the sum of both certified intervals bounds |L_A - L_B| rigorously.
  const std::string a = scratch_file("same-a.h5"), b = scratch_file("same-b.h5");
  ASSERT_TRUE(fixtures::write_lm_head_fork_pair(a, b, fixtures::LmHeadForkSpec{}, true).ok());
  const Report r = forks({a, b});
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(stats(*f[0])["class"], "unexplained") << f[0]->reason;
  EXPECT_EQ(f[0]->verdict, Verdict::kPass);
  const std::string src = stats(*f[0])["envelope"]["source"];
  EXPECT_EQ(src.rfind("certified: lm_head intervals of both runs", 0), 0u) << src;
}

/// Two copies of the tiny preset (logits computed by its lm_head) in which B emits its row 3's
/// runner-up: one invalid fork at position 3.
void runner_up_fork_pair(const std::string& a, const std::string& b) {
  ASSERT_TRUE(fixtures::write_dump(a, fixtures::preset_tiny(), {}, true).ok());
  ASSERT_TRUE(fixtures::write_dump(b, fixtures::preset_tiny(), {}, true).ok());
  std::vector<std::int32_t> t;
  {
    auto reader = DumpReader::open(b);  // closed before the file is modified
    ASSERT_TRUE(reader.ok());
    t = *reader->read_i32("/logits/greedy/tokens");
    const Index V = reader->model().logits[0].vocab;
    std::vector<float> row(static_cast<std::size_t>(V));
    ASSERT_TRUE(reader->read_rows("/logits/greedy/logits", 3, 1, row.data()).ok());
    t[3] = static_cast<std::int32_t>(scan_row(row.data(), V).runner_up_index);
  }
  ncert::testing::poke_i32(b, "/logits/greedy/tokens", t);
}

TEST(Forks, LmHeadIntervalsAreTheEnvelopeWhenBothDumpsHaveOne) {
  // B emits its row 3's runner-up, an invalid emission, which still shows the lm_head envelope
  // at the fork.
  const std::string a = scratch_file("head-a.h5"), b = scratch_file("head-b.h5");
  ASSERT_NO_FATAL_FAILURE(runner_up_fork_pair(a, b));
  ForksOptions o;
  o.matched_history = true;
  const Report r = forks({a, b}, o);
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(stats(*f[0])["class"], "invalid");
  const std::string src = stats(*f[0])["envelope"]["source"];
  EXPECT_EQ(src.rfind("certified: lm_head intervals of both runs", 0), 0u) << src;
  EXPECT_GT(stats(*f[0])["envelope"]["at_a"].get<double>(), 0);
  EXPECT_LT(stats(*f[0])["envelope"]["at_a"].get<double>(), 1.0);
}

TEST(Forks, AnLmHeadFailingAHostGuardGivesNoEnvelopeAndSaysWhy) {
  // forks evaluates each lm_head alone, without check's geometry step: weights failing a host
  // guard (a walk that does not divide K here; an AF4 group that does not divide K read past
  // its arrays) refused the pair. The fork is judged without those intervals, saying why.
  const std::string a = scratch_file("guard-a.h5"), b = scratch_file("guard-b.h5");
  ASSERT_NO_FATAL_FAILURE(runner_up_fork_pair(a, b));
  for (const std::string& path : {a, b}) {
    ncert::testing::poke_attr_string(path, "/projections/lm_head_greedy", "k_walk", "split:7");
  }
  ForksOptions o;
  o.matched_history = true;
  const Report r = forks({a, b}, o);
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  const std::string src = stats(*f[0])["envelope"]["source"];
  EXPECT_EQ(src.find("certified:"), std::string::npos) << src;
  EXPECT_NE(src.find("lm_head lm_head_greedy could not be evaluated: guard-walk-split"), std::string::npos) << src;
}

TEST(Forks, VocabularyTextAppearsBesideIds) {
  const DumpPair p = fork_pair("text", planted({{9, ForkKind::kUlpFlip}}));
  // A byte-level BPE vocabulary of 2000 tokens: "t<i>" with "Ġ" (a space) in front of even ids.
  const std::string path = scratch_file("tokenizer.json");
  {
    std::ofstream out(path);
    out << R"({"model": {"type": "BPE", "vocab": {)";
    for (int i = 0; i < 2000; ++i) out << (i ? "," : "") << "\"" << (i % 2 ? "" : "\u0120") << "t" << i << "\": " << i;
    out << R"(}}, "decoder": {"type": "ByteLevel"}})";
  }
  ForksOptions o;
  o.vocab_file = path;
  const Report r = forks(p, o);
  const auto f = fork_results(r);
  ASSERT_EQ(f.size(), 1u);
  const int ta = stats(*f[0])["token_a"];
  EXPECT_EQ(stats(*f[0])["text_a"], std::string("\"") + (ta % 2 ? "" : " ") + "t" + std::to_string(ta) + "\"");
  EXPECT_NE(f[0]->reason.find(std::to_string(ta) + " \""), std::string::npos) << f[0]->reason;
  // A vocabulary file that is not one is refused, naming the file.
  {
    std::ofstream out(path);
    out << R"({"not": "a tokenizer"})";
  }
  const Report bad = forks(p, o);
  ASSERT_TRUE(bad.error.has_value());
  EXPECT_EQ(bad.error->code(), ErrorCode::kVocabFileInvalid);
  // A refusal is a Status: its message naming what a vocabulary file must be is the contract.
  EXPECT_NE(bad.error->message().find("tokenizer.json"), std::string::npos);
  EXPECT_EQ(bad.exit_code(), 3);
}

}  // namespace
}  // namespace ncert::certify
