// Raw target-maximum witnesses on hand-made rows: known argmax and margin, exact ties and the
// tie rule, NaN / +Inf / masked -Inf, a token out of range, 1-ulp near-ties, and each error
// model's classes (none, --logit-error, lm_head intervals).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "certify/io/hash.h"
#include "certify/logits/witness.h"

namespace ncert::certify {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Witness witness(const std::vector<float>& row, std::int32_t token, const LogitErrorModel& model = {}) {
  const auto V = static_cast<Index>(row.size());
  return witness_row(row.data(), V, scan_row(row.data(), V), token, model, 0);
}

LogitErrorModel absolute(double e) {
  LogitErrorModel m;
  m.kind = LogitErrorModel::Kind::kAbsolute;
  m.absolute = e;
  return m;
}

TEST(ScanRow, FindsMaximumRunnerUpTiesAndSpecials) {
  std::vector<float> row(1000, -1.0f);
  row[700] = 3.0f;
  row[5] = 2.5f;
  row[900] = 2.5f;
  RowScan s = scan_row(row.data(), 1000);
  EXPECT_EQ(s.max, 3.0f);
  EXPECT_EQ(s.argmax, 700);
  EXPECT_EQ(s.ties, 1);
  EXPECT_EQ(s.runner_up, 2.5f);
  EXPECT_EQ(s.runner_up_index, 5);  // lowest id among equal runners-up
  EXPECT_EQ(s.nan, 0);

  row[999] = 3.0f;
  row[64] = std::numeric_limits<float>::quiet_NaN();
  row[65] = kInf;
  s = scan_row(row.data(), 1000);
  EXPECT_EQ(s.max, kInf);
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.first_nan, 64);
  EXPECT_EQ(s.pos_inf, 1);
  EXPECT_EQ(s.first_pos_inf, 65);
}

TEST(Witness, ProvesTheMaximumWithItsExactMargin) {
  std::vector<float> row(300, 0.0f);
  row[42] = 10.0f;
  row[250] = 9.75f;
  const Witness w = witness(row, 42);
  EXPECT_TRUE(w.ok) << w.failure;
  EXPECT_EQ(w.logit, 10.0f);
  EXPECT_EQ(w.runner_up, 250);
  EXPECT_EQ(w.runner_up_logit, 9.75f);
  EXPECT_EQ(w.margin, 0.25);
  EXPECT_EQ(w.margin_ulps, 0.25 / std::ldexp(1.0, 3 - 23));  // ulp(10) = 2^-20
  EXPECT_EQ(w.ties, 1);
  EXPECT_EQ(w.cls, WitnessClass::kUnbounded);  // no error model
  EXPECT_EQ(w.row_xxh3, xxh3_128_hex(row.data(), row.size() * 4));
}

TEST(Witness, OneUlpNearTieIsANearTieUnderAnyRealisticError) {
  std::vector<float> row(100, -5.0f);
  row[3] = 1.0f;
  row[4] = std::nextafter(1.0f, 0.0f);  // one ulp below (ulp below 1 is 2^-24)
  Witness w = witness(row, 3, absolute(1e-6));
  EXPECT_TRUE(w.ok);
  EXPECT_EQ(w.margin_ulps, 0.5);  // 2^-24 in ulps of 1.0 (2^-23)
  EXPECT_EQ(w.cls, WitnessClass::kNearTie);
  EXPECT_LT(w.certified_gap, 0);
  // With a (hypothetical) error below half the margin it is certified.
  w = witness(row, 3, absolute(2e-8));
  EXPECT_EQ(w.cls, WitnessClass::kCertified);
  EXPECT_GT(w.certified_gap, 0);
}

TEST(Witness, ExactTiesFollowTheLowestIdRule) {
  std::vector<float> row(100, 0.0f);
  row[10] = 4.0f;
  row[60] = 4.0f;
  Witness w = witness(row, 10, absolute(1e-3));
  EXPECT_TRUE(w.ok);
  EXPECT_EQ(w.cls, WitnessClass::kTie);
  EXPECT_EQ(w.ties, 2);
  EXPECT_EQ(w.runner_up, 60);
  EXPECT_EQ(w.margin, 0.0);
  // Emitting the higher id of a tie breaks tie_break = lowest. A failed witness says why only in
  // Witness::failure, so these tests hold its text (the report prints it as it is).
  w = witness(row, 60);
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.failure.find("tie_break = lowest picks token 10"), std::string::npos) << w.failure;
}

TEST(Witness, NotTheMaximumIsAFailureNamingTheTrueMaximum) {
  std::vector<float> row(100, 0.0f);
  row[7] = 2.0f;
  row[8] = 2.5f;
  const Witness w = witness(row, 7);
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.failure.find("token 7"), std::string::npos) << w.failure;
  EXPECT_NE(w.failure.find("is not the maximum"), std::string::npos) << w.failure;
  EXPECT_NE(w.failure.find("at token 8"), std::string::npos) << w.failure;
}

TEST(Witness, NanOrPlusInfinityAnywhereFails) {
  std::vector<float> row(100, 0.0f);
  row[1] = 1.0f;
  row[77] = std::numeric_limits<float>::quiet_NaN();
  Witness w = witness(row, 1);
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.failure.find("NaN, first at token 77"), std::string::npos) << w.failure;
  row[77] = kInf;
  w = witness(row, 77);  // even when the +Inf is the emitted token itself
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.failure.find("+Inf at token 77"), std::string::npos) << w.failure;
}

TEST(Witness, MaskedEntriesAreAllowedButAMaskedEmissionFails) {
  std::vector<float> row(100, -kInf);  // all masked but two
  row[20] = -3.0f;
  row[30] = -4.0f;
  Witness w = witness(row, 20);
  EXPECT_TRUE(w.ok) << w.failure;
  EXPECT_EQ(w.runner_up, 30);
  EXPECT_EQ(w.margin, 1.0);
  w = witness(row, 50);
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.failure.find("masked (-Inf)"), std::string::npos) << w.failure;
  // A single unmasked entry: the runner-up is a masked one, the margin infinite.
  std::vector<float> lone(10, -kInf);
  lone[4] = 0.0f;
  w = witness(lone, 4, absolute(1.0));
  EXPECT_TRUE(w.ok);
  EXPECT_TRUE(std::isinf(w.margin));
  EXPECT_EQ(w.cls, WitnessClass::kCertified);
}

TEST(Witness, TokenOutsideTheVocabularyFails) {
  const std::vector<float> row(16, 0.0f);
  for (std::int32_t t : {-1, 16, 1000}) {
    const Witness w = witness(row, t);
    EXPECT_FALSE(w.ok);
    EXPECT_NE(w.failure.find("outside the vocabulary [0, 16)"), std::string::npos) << w.failure;
  }
}

TEST(Witness, LmHeadIntervalsDecideCertification) {
  std::vector<float> row(50, 0.0f);
  row[9] = 1.0f;
  row[12] = 0.9f;
  LogitErrorModel m;
  m.kind = LogitErrorModel::Kind::kLmHead;
  m.intervals.resize(1);
  RowIntervals& iv = m.intervals[0];
  iv.token_lo = 0.99f;
  iv.token_hi = 1.01f;
  iv.best_hi = 1.01f;  // the token's own upper end is the largest; the best other is 12
  iv.best_col = 9;
  iv.second_hi = 0.91f;
  iv.second_col = 12;
  Witness w = witness(row, 9, m);
  EXPECT_EQ(w.cls, WitnessClass::kCertified);
  EXPECT_NEAR(w.certified_gap, 0.99 - 0.91, 1e-7);
  // Overlapping intervals: another token could be the true maximum.
  iv.second_hi = 0.995f;
  w = witness(row, 9, m);
  EXPECT_EQ(w.cls, WitnessClass::kNearTie);
  EXPECT_LT(w.certified_gap, 0);
  // The token is not the best upper end: compare against the best one.
  iv.best_hi = 1.2f;
  iv.best_col = 30;
  iv.second_hi = 1.01f;
  iv.second_col = 9;
  w = witness(row, 9, m);
  EXPECT_EQ(w.cls, WitnessClass::kNearTie);
  EXPECT_NEAR(w.certified_gap, 0.99 - 1.2, 1e-6);
}

TEST(Witness, LmHeadIntervalsThatRefuteTheEmissionFailItNotANearTie) {
  // A reviewer's lm_head with +0.5 planted on a runner-up emitted that token and read "1
  // near-tie": its logit lay outside its own interval. Either refutation fails the emission.
  std::vector<float> row(50, 0.0f);
  row[9] = 1.5f;
  row[12] = 0.9f;
  LogitErrorModel m;
  m.kind = LogitErrorModel::Kind::kLmHead;
  m.source = "lm_head projection head";
  m.intervals.resize(1);
  RowIntervals& iv = m.intervals[0];
  iv.token_seen = true;
  iv.token_lo = 0.99f;
  iv.token_hi = 1.01f;
  iv.best_hi = 1.2f;
  iv.best_col = 12;
  iv.second_hi = 1.01f;
  iv.second_col = 9;
  iv.best_lo = 0.99f;
  iv.best_lo_col = 9;
  iv.second_lo = 0.89f;
  iv.second_lo_col = 12;
  // The emitted logit outside its interval.
  Witness w = witness(row, 9, m);
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.failure.find("emitted token 9's logit 1.5 lies outside its reference interval [0.99, 1.01]"),
            std::string::npos)
      << w.failure;
  // Inside it, and no other token's lower end above its upper end: a near-tie, as before.
  row[9] = 1.0f;
  w = witness(row, 9, m);
  EXPECT_TRUE(w.ok) << w.failure;
  EXPECT_EQ(w.cls, WitnessClass::kNearTie);
  // Token 12's exact logit is at least 1.05, above 1.01: its dumped 0.9 is wrong, and the
  // emission with it.
  iv.best_lo = 1.05f;
  iv.best_lo_col = 12;
  iv.second_lo = 0.99f;
  iv.second_lo_col = 9;
  w = witness(row, 9, m);
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.failure.find("the reference refutes emitted token 9: token 12's exact logit is at least 1.05"),
            std::string::npos)
      << w.failure;
}

TEST(Witness, ARunWithNoEmissionCertifiesNothingAndFails) {
  // An engine that stopped before its first token: "0 emissions are their rows' maxima" passed
  // and the dump's vacuity counted the run (a reviewer's).
  RunWitnesses run;
  run.run = "greedy";
  run.vocab = 16;
  const std::vector<CheckResult> checks = witness_checks(run);
  ASSERT_FALSE(checks.empty());
  EXPECT_EQ(checks.front().verdict, Verdict::kFail);
  EXPECT_EQ(checks.front().reason,
            "run greedy holds no emission (tokens and logits have 0 rows): nothing is certified");
}

TEST(Witness, ClassNamesAreTheReportVocabulary) {
  EXPECT_EQ(witness_class_name(WitnessClass::kCertified), "certified");
  EXPECT_EQ(witness_class_name(WitnessClass::kNearTie), "near-tie");
  EXPECT_EQ(witness_class_name(WitnessClass::kTie), "tie");
  EXPECT_EQ(witness_class_name(WitnessClass::kUnbounded), "unbounded");
}

}  // namespace
}  // namespace ncert::certify
