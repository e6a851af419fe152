// Logits through the library's commands: witnesses of fixture runs (lm_head-certified,
// --logit-error, planted bad emissions), the witness file and its re-verification against a
// modified dump, an lm_head whose outputs are not the logits, and `compare`: policies both ways,
// storage forms and block borders giving identical rows, pairing and refusals, histories that
// diverge, state tensors, and reports identical at 1 and 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "certify/commands/compare.h"
#include "certify/commands/forks.h"
#include "certify/commands/inspect.h"
#include "certify/commands/witness.h"
#include "certify/io/dump_reader.h"
#include "certify/logits/compare.h"
#include "fixtures/generator.h"
#include "fixtures/logits.h"
#include "tests/common/fixture_check.h"
#include "tests/common/h5_poke.h"
#include "tests/common/report_checks.h"
#include "tests/common/report_json.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::DumpPair;
using ncert::testing::evidence_of;
using ncert::testing::find_check;
using ncert::testing::poke_f32;
using ncert::testing::poke_i32;
using ncert::testing::scratch_file;
using ncert::testing::scratch_pair;
using ncert::testing::write_fixture;

/// A dump with one run of explicit rows (T x V) and emitted tokens.
fixtures::DumpSpec explicit_run(const std::string& run, Index T, Index V, std::vector<float> rows,
                                std::vector<std::int32_t> emitted) {
  fixtures::DumpSpec spec;
  spec.root.engine = "test";
  spec.root.build = "explicit";
  fixtures::LogitsSpec l;
  l.name = run;
  l.tokens = T;
  l.vocab = V;
  l.rows = std::move(rows);
  l.emitted = std::move(emitted);
  spec.logits.push_back(l);
  return spec;
}

/// T rows of V: row t has its maximum 2.0 at token (7 t) % V over a body of small values.
std::vector<float> clear_rows(Index T, Index V) {
  std::vector<float> rows(static_cast<std::size_t>(T * V));
  for (Index t = 0; t < T; ++t) {
    for (Index j = 0; j < V; ++j) rows[t * V + j] = 0.001f * static_cast<float>((j * 31 + t) % 97);
    rows[t * V + (7 * t) % V] = 2.0f;
  }
  return rows;
}

std::vector<std::int32_t> argmax_tokens(const std::vector<float>& rows, Index T, Index V) {
  std::vector<std::int32_t> out;
  for (Index t = 0; t < T; ++t) {
    Index best = 0;
    for (Index j = 1; j < V; ++j) {
      if (rows[t * V + j] > rows[t * V + best]) best = j;
    }
    out.push_back(static_cast<std::int32_t>(best));
  }
  return out;
}

Report witness(const std::string& dump, std::optional<double> logit_error = {}, const std::string& out = "") {
  WitnessOptions o;
  o.dump = dump;
  o.logit_error = logit_error;
  o.out = out;
  auto r = run_witness(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Report{};
}

// ---- witnesses ------------------------------------------------------------------------------------

TEST(Witness, LmHeadIntervalsCertifyTheTinyPreset) {
  const Report r = witness(write_fixture(fixtures::preset_tiny(), "tiny.h5"));
  ASSERT_EQ(r.checks.size(), 1u);
  const CheckResult& c = r.checks[0];
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.reason;
  EXPECT_NE(stats(c)["error_source"].get<std::string>().find("lm_head"), std::string::npos);
  EXPECT_EQ(stats(c)["failed"], 0);
  EXPECT_EQ(stats(c)["unbounded"], 0);
  EXPECT_GT(stats(c)["certified"].get<int>(), 0);
  // Every emitted token has its witness in the report.
  EXPECT_EQ(r.extra["witnesses"]["greedy"].size(), stats(c)["tokens"].get<std::size_t>());
}

TEST(Witness, WithoutAnErrorModelTheClassIsUnboundedNotAFailure) {
  const Index T = 6, V = 700;
  const auto rows = clear_rows(T, V);
  const Report r = witness(write_fixture(explicit_run("run", T, V, rows, argmax_tokens(rows, T, V)), "plain.h5"));
  const CheckResult* c = find_check(r, "logits/run/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  EXPECT_EQ(stats(*c)["unbounded"], T);
  EXPECT_EQ(stats(*c)["error_source"], "none");
}

TEST(Witness, AnLmHeadWithoutItsAttributesIsNamedWithTheOnesToAdd) {
  // The tiny preset's lm_head without role and logits_run: the run has no error model, and the
  // skip names the projection and both attributes instead of asking to dump what is there.
  const std::string path = write_fixture(fixtures::preset_tiny(), "undeclared_head.h5");
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_GE(H5Adelete_by_name(f, "/projections/lm_head_greedy", "role", H5P_DEFAULT), 0);
  EXPECT_GE(H5Adelete_by_name(f, "/projections/lm_head_greedy", "logits_run", H5P_DEFAULT), 0);
  H5Fclose(f);
  const Report r = witness(path);
  const CheckResult* c = find_check(r, "logits/greedy/intervals");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kSkip);
  EXPECT_NE(c->reason.find("projection lm_head_greedy has a y_unpacked as wide as the run's vocabulary (256) but is "
                           "not declared as its lm_head: give it role = \"lm_head\" and logits_run = \"greedy\""),
            std::string::npos)
      << c->reason;
  EXPECT_EQ(c->reason.find("dump the run's lm_head"), std::string::npos) << c->reason;
}

TEST(Witness, AnLmHeadWhoseLogitsRunIsEmptyIsRefused) {
  // "" names no run; read as absent, the run's witnesses went uncertified without a word.
  const std::string path = write_fixture(fixtures::preset_tiny(), "empty_logits_run.h5");
  ncert::testing::poke_attr_string(path, "/projections/lm_head_greedy", "logits_run", "");
  auto reader = certify::DumpReader::open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kMissingMember) << reader.status().to_string();
  EXPECT_NE(reader.status().message().find("logits_run = \"\" names no /logits run"), std::string::npos)
      << reader.status().to_string();
}

TEST(Witness, AnLmHeadFailingAHostGuardFailsItsGeometryNotTheDump) {
  // The lm_head is checked like any projection (a guard is its geometry's FAIL); its run then
  // has no error model. It was evaluated a second time for the run, and that refused the dump.
  const std::string path = write_fixture(fixtures::preset_tiny(), "head_guard.h5");
  ncert::testing::poke_attr_string(path, "/projections/lm_head_greedy", "k_walk", "split:7");
  const Report r = ncert::testing::check_dump(path);
  EXPECT_EQ(r.verdict(), Verdict::kFail) << r.to_text(true);
  const CheckResult* g = find_check(r, "projections/lm_head_greedy/geometry");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::kFail);
  EXPECT_NE(g->reason.find("guard-walk-split"), std::string::npos) << g->reason;
  // bound blames the walk's declaration, not the weights (a review read "the weights cannot be
  // evaluated" there).
  const CheckResult* b = find_check(r, "projections/lm_head_greedy/bound");
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->reason.find("the declared k_walk does not fit K (k_walk split:7:"), std::string::npos) << b->reason;
  EXPECT_EQ(b->reason.find("weights cannot"), std::string::npos) << b->reason;
  // The residual tests read the same reference: listed as not evaluated for the same reason,
  // not left out of the report.
  for (const char* kind : {"signature", "variance"}) {
    const CheckResult* c = find_check(r, std::string("projections/lm_head_greedy/") + kind);
    ASSERT_NE(c, nullptr) << kind;
    EXPECT_EQ(c->verdict, Verdict::kFail) << kind;
    EXPECT_EQ(c->reason.rfind("not evaluated: the declared k_walk does not fit K", 0), 0u) << c->reason;
  }
  const CheckResult* w = find_check(r, "logits/greedy/witness");
  ASSERT_NE(w, nullptr);
  EXPECT_NE(stats(*w)["error_source"].get<std::string>().find("lm_head lm_head_greedy could not be evaluated"),
            std::string::npos);
}

TEST(Witness, AnLmHeadFailingAHostGuardLeavesTheRunUnboundedInWitness) {
  // `witness` evaluates the lm_head alone, without check's geometry step: weights that fail a
  // host guard (here a walk that does not divide K) gave it no reference, which refused the
  // dump (or, for AF4 geometry, read past the arrays). The run is witnessed without intervals,
  // saying why.
  const std::string path = write_fixture(fixtures::preset_tiny(), "head_guard_witness.h5");
  ncert::testing::poke_attr_string(path, "/projections/lm_head_greedy", "k_walk", "split:7");
  const Report r = witness(path);
  const CheckResult* c = find_check(r, "logits/greedy/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  const std::string source = stats(*c)["error_source"].get<std::string>();
  EXPECT_NE(source.find("lm_head lm_head_greedy could not be evaluated: guard-walk-split"), std::string::npos)
      << source;
  EXPECT_EQ(stats(*c)["certified"], 0);
  const CheckResult* skip = find_check(r, "logits/greedy/intervals");
  ASSERT_NE(skip, nullptr);
  EXPECT_NE(skip->reason.find("correct lm_head lm_head_greedy's weights or declarations"), std::string::npos)
      << skip->reason;
}

TEST(Witness, ARunSelectedWithoutItsLmHeadIsStillBoundedByIt) {
  // --only names the run and not its lm_head (here "output", as other writers name it): the head
  // is not checked in this part, so the run evaluates it for its intervals, and logits that are
  // not its outputs still fail. Taking "checked but not evaluated" for "not checked" gave the run
  // no interval and passed it.
  const std::string path = write_fixture(fixtures::preset_tiny(), "head_only_run.h5");
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    EXPECT_GE(H5Lmove(f, "/projections/lm_head_greedy", f, "/projections/output", H5P_DEFAULT, H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  poke_f32(path, "/logits/greedy/logits", 2, 5, -1000.0f);
  CheckCommandOptions co;
  co.dump = path;
  co.only = "greedy";
  auto r = run_check(co);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(find_check(*r, "projections/output/geometry"), nullptr) << "the head is not selected";
  const CheckResult* w = find_check(*r, "logits/greedy/witness");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->verdict, Verdict::kFail) << w->reason;
  EXPECT_NE(w->reason.find("row 2 token 5"), std::string::npos) << w->reason;
  EXPECT_EQ(stats(*w)["error_source"].get<std::string>().find("could not be evaluated"), std::string::npos);
}

TEST(Witness, LogitErrorSplitsCertifiedFromNearTies) {
  const Index T = 4, V = 300;
  auto rows = clear_rows(T, V);
  // Row 2's maximum is only 1e-4 above its runner-up.
  rows[2 * V + 0] = 2.0f - 1e-4f;
  const auto tokens = argmax_tokens(rows, T, V);
  const std::string path = write_fixture(explicit_run("run", T, V, rows, tokens), "margins.h5");
  const Report r = witness(path, 1e-3);  // margin must exceed 2e-3 to be certified
  const CheckResult* c = find_check(r, "logits/run/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;  // a near-tie is not a failure
  EXPECT_EQ(stats(*c)["near_tie"], 1);
  EXPECT_EQ(stats(*c)["certified"], T - 1);
  EXPECT_EQ(stats(*c)["min_margin_position"], r.extra["witnesses"]["run"][2]["position"]);
}

TEST(Witness, AnEmissionThatIsNotTheMaximumFailsNamingRunPositionAndTokens) {
  const Index T = 5, V = 400;
  const auto rows = clear_rows(T, V);
  auto tokens = argmax_tokens(rows, T, V);
  tokens[3] = 11;  // row 3's maximum is at 21
  const Report r = witness(write_fixture(explicit_run("run", T, V, rows, tokens), "bad.h5"));
  const CheckResult* c = find_check(r, "logits/run/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_EQ(stats(*c)["failed"], 1);
  // Positions are prompt length (5) + row.
  const auto* e = evidence_of<WitnessEvidence>(c);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->first_failure.has_value());
  EXPECT_FALSE(e->first_failure->ok);
  EXPECT_EQ(e->first_failure->row, 3);
  EXPECT_EQ(e->first_failure->position, 8);
  EXPECT_EQ(e->first_failure->token, 11);
  ASSERT_TRUE(c->first_failure.has_value());
  EXPECT_EQ(c->first_failure->object, "logits/run");
  EXPECT_EQ(c->first_failure->row, 3);
  EXPECT_EQ(c->first_failure->position, 8);
  EXPECT_EQ(c->first_failure->token, 11);
  // Where the row's maximum really is has no typed form: only the failure's text names it.
  EXPECT_NE(c->reason.find("at token 21"), std::string::npos) << c->reason;
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(Witness, NanInARowFails) {
  const Index T = 3, V = 100;
  auto rows = clear_rows(T, V);
  const auto tokens = argmax_tokens(rows, T, V);
  rows[1 * V + 50] = std::numeric_limits<float>::quiet_NaN();
  const Report r = witness(write_fixture(explicit_run("run", T, V, rows, tokens), "nan.h5"));
  const CheckResult* c = find_check(r, "logits/run/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  const auto* e = evidence_of<WitnessEvidence>(c);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->first_failure.has_value());
  EXPECT_FALSE(e->first_failure->ok);
  EXPECT_EQ(e->first_failure->row, 1);
  EXPECT_EQ(e->failed, 1);
  // Where the NaN is has no typed form: only the failure's text names it.
  EXPECT_NE(c->reason.find("NaN, first at token 50"), std::string::npos) << c->reason;
}

TEST(Witness, LogitsThatAreNotTheLmHeadOutputFail) {
  const std::string path = write_fixture(fixtures::preset_tiny(), "head.h5");
  poke_f32(path, "/logits/greedy/logits", 2, 5, -1000.0f);
  const Report r = witness(path);
  const CheckResult* c = find_check(r, "logits/greedy/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  // Every emission is valid: the failure is the lm_head mismatch, which has no typed form.
  ASSERT_NE(evidence_of<WitnessEvidence>(c), nullptr);
  EXPECT_EQ(evidence_of<WitnessEvidence>(c)->failed, 0);
  EXPECT_NE(c->reason.find("row 2 token 5"), std::string::npos) << c->reason;
  // The emitted logit of row 3 raised 0.5 in the logits alone (a soft-cap or scaling after the
  // head): outside its interval, but the intervals bound the head's outputs, not this row. The
  // reason is the mismatch, not "the logit itself is wrong" (a reviewer's).
  const std::string again = write_fixture(fixtures::preset_tiny(), "head-raised.h5");
  const Index token = ncert::testing::read_i32(again, "/logits/greedy/tokens")[3];
  poke_f32(again, "/logits/greedy/logits", 3, token,
           ncert::testing::read_f32(again, "/logits/greedy/logits", 3, token) + 0.5f);
  const Report raised = witness(again);
  const CheckResult* d = find_check(raised, "logits/greedy/witness");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->verdict, Verdict::kFail);
  ASSERT_NE(evidence_of<WitnessEvidence>(d), nullptr);
  EXPECT_EQ(evidence_of<WitnessEvidence>(d)->failed, 0) << d->reason;
  EXPECT_NE(d->reason.find("the logits rows are not the lm_head's outputs (row 3 token " + std::to_string(token)),
            std::string::npos)
      << d->reason;
}

TEST(WitnessFile, VerifiesAndThenCatchesAModifiedRow) {
  const Index T = 6, V = 1000;
  const auto rows = clear_rows(T, V);
  const std::string dump = write_fixture(explicit_run("run", T, V, rows, argmax_tokens(rows, T, V)), "dump.h5");
  const std::string wfile = scratch_file("w.h5");
  std::filesystem::remove(wfile + ".json");
  Report made = witness(dump, 0.01, wfile);
  EXPECT_EQ(made.verdict(), Verdict::kPass);
  EXPECT_TRUE(std::filesystem::exists(wfile + ".json"));

  VerifyOptions v;
  v.witness_file = wfile;
  v.dump = dump;
  auto ok = run_witness_verify(v);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->verdict(), Verdict::kPass) << ok->to_text(true);
  ASSERT_NE(find_check(*ok, "logits/run/witness"), nullptr);
  EXPECT_EQ(evidence_of<VerifyEvidence>(find_check(*ok, "logits/run/witness"))->same_file, true);

  // One logit far from the maximum changes: the witness (token, margin) still holds, but the
  // row is no longer the one the witness was made from.
  poke_f32(dump, "/logits/run/logits", 4, 900, 0.5f);
  auto bad = run_witness_verify(v);
  ASSERT_TRUE(bad.ok());
  const CheckResult* c = find_check(*bad, "logits/run/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  const auto* ve = evidence_of<VerifyEvidence>(c);
  ASSERT_NE(ve, nullptr);
  EXPECT_EQ(ve->position, std::optional<std::int64_t>(9));
  EXPECT_EQ(ve->verified, 4);  // positions 5..8
  ASSERT_TRUE(c->first_failure.has_value());
  EXPECT_EQ(c->first_failure->position, 9);
  EXPECT_EQ(stats(*c)["position"], 9);
  // Which stored field differs has no typed form: only the reason names it.
  EXPECT_NE(c->reason.find("row hash differs"), std::string::npos) << c->reason;
  // The whole file is not the one witnessed either, and the reason says so.
  EXPECT_EQ(ve->same_file, false);
  EXPECT_NE(c->reason.find("the dump file is not the one witnessed (xxh3_128 "), std::string::npos) << c->reason;
  EXPECT_NE(c->reason.find("it was modified, or is another dump"), std::string::npos) << c->reason;

  // The witness file is never overwritten silently.
  WitnessOptions again;
  again.dump = dump;
  again.out = wfile;
  auto refused = run_witness(again);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kOutputExists);
}

TEST(WitnessFile, AFileRecordingAFailedEmissionVerifiesButCertifiesNothingThere) {
  // Row 3 emits 11 where its maximum is at 21: the witness file records it as failed (class
  // 255). Every stored witness matches the dump, and --verify said PASS (a reviewer's); it
  // fails now, naming the failed emission.
  const Index T = 5, V = 400;
  const auto rows = clear_rows(T, V);
  auto tokens = argmax_tokens(rows, T, V);
  tokens[3] = 11;
  const std::string dump = write_fixture(explicit_run("run", T, V, rows, tokens), "failed-emission.h5");
  const std::string wfile = scratch_file("failed-emission.witness.h5");
  std::filesystem::remove(wfile);
  std::filesystem::remove(wfile + ".json");
  EXPECT_EQ(witness(dump, 0.01, wfile).verdict(), Verdict::kFail);
  VerifyOptions v;
  v.witness_file = wfile;
  v.dump = dump;
  auto r = run_witness_verify(v);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const CheckResult* c = find_check(*r, "logits/run/witness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_NE(
      c->reason.find("all 5 stored witnesses match the dump, but 1 of them record a failed emission (position 8: "),
      std::string::npos)
      << c->reason;
  ASSERT_TRUE(c->first_failure.has_value());
  EXPECT_EQ(c->first_failure->position, 8);
}

TEST(WitnessFile, ValuesNcertNeverWritesAreRefusedNotReDerived) {
  // A review's: with logit_error = -1e30 every margin re-derived as "certified", and a file
  // claiming another tie rule or vocabulary verified "all 3 stored witnesses match".
  const Index T = 4, V = 1000;
  const auto rows = clear_rows(T, V);
  const std::string dump = write_fixture(explicit_run("run", T, V, rows, argmax_tokens(rows, T, V)), "wv.h5");
  const auto fresh_witness = [&](const std::string& name) {
    const std::string wfile = scratch_file(name);
    std::filesystem::remove(wfile);
    std::filesystem::remove(wfile + ".json");
    EXPECT_EQ(witness(dump, 0.01, wfile).verdict(), Verdict::kPass);
    return wfile;
  };
  const auto verify = [&](const std::string& wfile) {
    VerifyOptions v;
    v.witness_file = wfile;
    v.dump = dump;
    auto r = run_witness_verify(v);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : Report{};
  };
  EXPECT_EQ(verify(fresh_witness("wv-good.h5")).verdict(), Verdict::kPass);

  const std::string negative = fresh_witness("wv-negative.h5");
  ncert::testing::poke_attr_i64(negative, "/witness/run", "logit_error", -5);
  Report r = verify(negative);
  ASSERT_TRUE(r.error.has_value()) << r.to_text(true);
  EXPECT_EQ(r.error->code(), ErrorCode::kWitnessFileInvalid);
  EXPECT_NE(r.error->message().find("logit_error = -5"), std::string::npos) << r.error->message();

  const std::string highest = fresh_witness("wv-highest.h5");
  ncert::testing::poke_attr_string(highest, "/witness/run", "tie_break", "highest");
  r = verify(highest);
  ASSERT_TRUE(r.error.has_value()) << r.to_text(true);
  EXPECT_EQ(r.error->code(), ErrorCode::kWitnessFileInvalid);
  EXPECT_NE(r.error->message().find("tie_break \"highest\""), std::string::npos) << r.error->message();

  const std::string vocab = fresh_witness("wv-vocab.h5");
  ncert::testing::poke_attr_i64(vocab, "/witness/run", "vocab", 999);
  r = verify(vocab);
  const CheckResult* c = find_check(r, "logits/run/witness");
  ASSERT_NE(c, nullptr) << r.to_text(true);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_NE(c->reason.find("records a vocabulary of 999, the run has 1000"), std::string::npos) << c->reason;
}

TEST(WitnessFile, ADumpIsNotAWitnessFile) {
  const Index T = 2, V = 50;
  const auto rows = clear_rows(T, V);
  const std::string dump = write_fixture(explicit_run("run", T, V, rows, argmax_tokens(rows, T, V)), "d.h5");
  VerifyOptions v;
  v.witness_file = dump;
  v.dump = dump;
  auto r = run_witness_verify(v);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->error.has_value());
  EXPECT_EQ(r->error->code(), ErrorCode::kWitnessFileInvalid);
  EXPECT_EQ(r->exit_code(), 3);
}

// ---- compare ---------------------------------------------------------------------------------------

DumpPair pair(const std::string& tag, fixtures::LogitsPairSpec spec) {
  DumpPair p = scratch_pair(tag);
  const Status s = fixtures::write_logits_pair(p.a, p.b, spec, true);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return p;
}

fixtures::LogitsPairSpec small_pair(float noise, Index T = 40, Index V = 1000) {
  fixtures::LogitsPairSpec s;
  s.tokens = T;
  s.vocab = V;
  s.noise = noise;
  return s;
}

Report compare(const std::string& a, const std::string& b, const std::string& policy = "bitwise",
               CompareOptions o = {}) {
  o.a = a;
  o.b = b;
  auto p = parse_policy(policy);
  EXPECT_TRUE(p.ok()) << policy;
  o.policy = *p;
  auto r = run_compare(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Report{};
}

TEST(Compare, IdenticalRunsPassBitwise) {
  const DumpPair p = pair("same", small_pair(0.0f));
  const Report r = compare(p.a, p.b);
  const CheckResult* c = find_check(r, "logits/greedy");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  EXPECT_EQ(stats(*c)["bit_identical_rows"], 40);
  EXPECT_EQ(stats(*c)["kl_ab"]["max"], 0.0);
  EXPECT_EQ(stats(*c)["top1_agreement"], 1.0);
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].xxh3_128.size(), 32u);
}

TEST(Compare, EachPolicyHoldsOrFailsAtTheFirstRowThatBreaksIt) {
  // Noise 1e-3 against winners 0.1 to 6 above the body: argmax never flips.
  const DumpPair p = pair("noisy", small_pair(1e-3f));
  struct Case {
    std::string policy;
    bool pass;
    std::string reason;  // expected in a FAIL's reason
  };
  const Case cases[] = {
      {"bitwise", false, "row 0 col "},
      {"ulp:1", false, "> 1 ulps"},
      {"ulp:4000000000", true, ""},
      {"abs:0.01", true, ""},
      {"abs:1e-5", false, "row 0 col "},
      {"abs:1e-5,rel:0.01", false, "+ 0.01 max(|a|, |b|)"},
      {"abs:0.01,rel:0.5", true, ""},
      {"kl:1e-3", true, ""},
      {"kl:1e-12", false, "row 0: KL(A||B) = "},
      {"top1", true, ""},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.policy);
    const Report r = compare(p.a, p.b, k.policy);
    const CheckResult* c = find_check(r, "logits/greedy");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->verdict == Verdict::kPass, k.pass) << c->reason;
    if (!k.pass) {
      EXPECT_NE(c->reason.find(k.reason), std::string::npos) << c->reason;
      EXPECT_EQ(stats(*c)["first_failure_row"], 0);
    }
  }
}

TEST(Compare, Top1FailsWhereTheArgmaxMoves) {
  const Index T = 6, V = 300;
  auto ra = clear_rows(T, V);
  auto rb = ra;
  rb[4 * V + 100] = 3.0f;  // row 4's argmax moves from 28 to 100
  fixtures::DumpSpec sa = explicit_run("run", T, V, ra, argmax_tokens(ra, T, V));
  // B emits A's tokens (teacher-forced), so every row stays matched.
  fixtures::DumpSpec sb = explicit_run("run", T, V, rb, argmax_tokens(ra, T, V));
  const std::string a = write_fixture(sa, "a.h5"), b = write_fixture(sb, "b.h5");
  const Report r = compare(a, b, "top1");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  const auto* e = evidence_of<LogitsEvidence>(c);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->first_failure_row, 4);
  EXPECT_EQ(e->failing_rows, 1);
  ASSERT_GT(e->first_rows.size(), 4u);
  EXPECT_EQ(e->first_rows[4].argmax_a, 28);
  EXPECT_EQ(e->first_rows[4].argmax_b, 100);
  ASSERT_TRUE(c->first_failure.has_value());
  EXPECT_EQ(c->first_failure->row, 4);
}

TEST(Compare, AnUlpDistanceThroughZeroIsShownWithItsValues) {
  // Row 2 col 7: 1e-6 in A, -1e-6 in B: |d| = 2e-6, but about 1.3e9 f32 values lie between them
  // (every float of magnitude below 1e-6). Row 4 col 9: 1.5 vs 1.5 + 3 ulps.
  const Index T = 6, V = 64;
  auto ra = clear_rows(T, V);
  ra[2 * V + 7] = 1e-6f;
  auto rb = ra;
  rb[2 * V + 7] = -1e-6f;
  ra[4 * V + 9] = 1.5f;
  rb[4 * V + 9] = std::nextafter(std::nextafter(std::nextafter(1.5f, 2.0f), 2.0f), 2.0f);
  fixtures::DumpSpec sa = explicit_run("run", T, V, ra, argmax_tokens(ra, T, V));
  fixtures::DumpSpec sb = explicit_run("run", T, V, rb, argmax_tokens(ra, T, V));
  const std::string a = write_fixture(sa, "zero_a.h5"), b = write_fixture(sb, "zero_b.h5");
  const Report r = compare(a, b, "ulp:4");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  // How the reason words a distance through zero is what this test holds (its figures are
  // asserted typed below).
  EXPECT_NE(c->reason.find("row 2 col 7: 1e-06 vs -1e-06, opposite signs or a zero ("), std::string::npos) << c->reason;
  EXPECT_NE(c->reason.find("ulps counted through zero; |d| 2e-06) > 4 ulps"), std::string::npos) << c->reason;
  EXPECT_EQ(stats(*c)["failing_rows"], 1);  // row 4's 3 ulps are within the policy
  EXPECT_EQ(stats(*c)["max_ulp_at"]["row"], 2);
  EXPECT_EQ(stats(*c)["max_ulp_at"]["col"], 7);
  EXPECT_EQ(stats(*c)["max_ulp_at"]["across_zero"], true);
  EXPECT_EQ(stats(*c)["first_rows"][4]["max_ulp"], 3);
  EXPECT_EQ(stats(*c)["first_rows"][4]["max_ulp_across_zero"], false);

  const Report strict = compare(a, b, "ulp:2");  // now row 4 breaks it too, same-sign
  const CheckResult* s = find_check(strict, "logits/run");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(stats(*s)["failing_rows"], 2);
  bool through_zero_text = false;
  for (const std::string& d : s->details) through_zero_text |= d.find("counted through zero") != std::string::npos;
  EXPECT_TRUE(through_zero_text);  // the first failing row's details (row 2) name the crossing
}

TEST(Compare, CountsEveryRowAndElementThatBreaksThePolicy) {
  // Planted: row 1 has 3 elements moved by 1 ulp, row 3 one by 5 ulps, row 5 one by 0.5 and one
  // NaN (the careful path). Every count below is the planted one.
  const Index T = 6, V = 700;  // two 512-column chunks
  auto ra = clear_rows(T, V);
  auto rb = ra;
  auto bump = [&](Index t, Index j, int u) {
    float& x = rb[static_cast<std::size_t>(t * V + j)];
    for (int k = 0; k < u; ++k) x = std::nextafter(x, 1e9f);
  };
  bump(1, 3, 1);
  bump(1, 600, 1);
  bump(1, 601, 1);
  bump(3, 10, 5);
  rb[5 * V + 20] += 0.5f;
  rb[5 * V + 650] = std::numeric_limits<float>::quiet_NaN();
  fixtures::DumpSpec sa = explicit_run("run", T, V, ra, argmax_tokens(ra, T, V));
  fixtures::DumpSpec sb = explicit_run("run", T, V, rb, argmax_tokens(ra, T, V));
  const std::string a = write_fixture(sa, "count-a.h5"), b = write_fixture(sb, "count-b.h5");
  struct Case {
    std::string policy;
    Index rows, elements;
  };
  const Case cases[] = {{"bitwise", 3, 6}, {"ulp:1", 2, 3}, {"ulp:5", 1, 2}, {"abs:0.25", 1, 2}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.policy);
    const Report r = compare(a, b, k.policy);
    const CheckResult* c = find_check(r, "logits/run");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->verdict, Verdict::kFail);
    EXPECT_EQ(stats(*c)["failing_rows"], k.rows);
    EXPECT_EQ(stats(*c)["failing_elements"], k.elements);
    const auto* e = evidence_of<LogitsEvidence>(c);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->failing_rows, k.rows);
    EXPECT_EQ(e->matched, T);
    EXPECT_TRUE(e->element_policy);
    EXPECT_EQ(e->failing_elements, k.elements);
    EXPECT_EQ(e->vocab, V);
  }
  // Row policies count rows, not elements: only row 5 (NaN) has an undefined KL.
  const Report r = compare(a, b, "kl:1e-3");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(stats(*c).contains("failing_elements"));
}

TEST(Compare, StorageFormsAndBlockBordersGiveIdenticalRows) {
  // T = 150 rows of V = 1000: 64-row blocks (borders at 64 and 128), chunks of 7 rows, deflate.
  fixtures::LogitsPairSpec base = small_pair(1e-3f, 150, 1000);
  const DumpPair flat = pair("flat", base);
  fixtures::LogitsPairSpec chunked = base;
  chunked.storage.chunk_rows = 7;
  const DumpPair ch = pair("chunked", chunked);
  fixtures::LogitsPairSpec packed = chunked;
  packed.storage.deflate = 4;
  packed.storage.shuffle = true;
  const DumpPair df = pair("deflate", packed);

  auto rows_of = [](const DumpPair& p) {
    auto ra = DumpReader::open(p.a);
    auto rb = DumpReader::open(p.b);
    EXPECT_TRUE(ra.ok() && rb.ok());
    auto c = compare_runs(*ra, ra->model().logits[0], *rb, rb->model().logits[0], true, ElementTest{});
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? c->rows : std::vector<RowComparison>{};
  };
  const auto x = rows_of(flat), y = rows_of(ch), z = rows_of(df);
  ASSERT_EQ(x.size(), 150u);
  ASSERT_EQ(y.size(), 150u);
  ASSERT_EQ(z.size(), 150u);
  for (std::size_t t = 0; t < x.size(); ++t) {
    for (const auto* o : {&y[t], &z[t]}) {
      EXPECT_EQ(std::memcmp(&x[t].kl_ab, &o->kl_ab, sizeof(double)), 0) << t;
      EXPECT_EQ(x[t].max_abs, o->max_abs) << t;
      EXPECT_EQ(x[t].max_abs_col, o->max_abs_col) << t;
      EXPECT_EQ(x[t].jsd, o->jsd) << t;
      EXPECT_EQ(x[t].rank_in_b, o->rank_in_b) << t;
    }
    EXPECT_GT(x[t].kl_ab, 0) << t;  // every row really was compared
  }
  // Row 100 (inside the second block) against the same row compared alone.
  auto ra = DumpReader::open(flat.a);
  auto rb = DumpReader::open(flat.b);
  std::vector<float> a(1000), b(1000);
  ASSERT_TRUE(ra->read_rows("/logits/greedy/logits", 100, 1, a.data()).ok());
  ASSERT_TRUE(rb->read_rows("/logits/greedy/logits", 100, 1, b.data()).ok());
  CompareScratch sc;
  auto tokens = ra->read_i32("/logits/greedy/tokens");
  const RowComparison alone = compare_rows(a.data(), b.data(), 1000, (*tokens)[100], 0.0, sc);
  EXPECT_EQ(alone.kl_ab, x[100].kl_ab);
  EXPECT_EQ(alone.dp_token, x[100].dp_token);
}

TEST(Compare, RunsPairByNameOrExplicitly) {
  const Index T = 3, V = 64;
  const auto rows = clear_rows(T, V);
  const std::string a = write_fixture(explicit_run("alpha", T, V, rows, argmax_tokens(rows, T, V)), "a.h5");
  const std::string b = write_fixture(explicit_run("beta", T, V, rows, argmax_tokens(rows, T, V)), "b.h5");
  // Different names and no tensors: nothing to compare.
  Report r = compare(a, b);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code(), ErrorCode::kNoCommonRuns);
  EXPECT_EQ(r.exit_code(), 3);
  // The refusal says what each holds and how to pair them.
  const std::string said = r.error->message();
  EXPECT_NE(said.find(a + " holds logits runs alpha, no tensor"), std::string::npos) << said;
  EXPECT_NE(said.find(b + " holds logits runs beta, no tensor"), std::string::npos) << said;
  EXPECT_NE(said.find("--pair alpha:beta"), std::string::npos) << said;
  // --pair alpha:beta.
  CompareOptions o;
  o.pairs = {{"alpha", "beta"}};
  r = compare(a, b, "bitwise", o);
  const CheckResult* c = find_check(r, "logits/alpha:beta");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  // A pair naming a run that does not exist is a usage error.
  o.pairs = {{"alpha", "gamma"}};
  o.a = a;
  o.b = b;
  auto bad = run_compare(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kUsage);
}

TEST(Compare, RunNamesHoldingAColonPairTheOneWayTheirRunsExist) {
  // An HDF5 group name may hold ':': --pair step:1:step:2 was read as step : 1:step:2 only,
  // and such runs could not be paired at all.
  const Index T = 3, V = 64;
  const auto rows = clear_rows(T, V);
  const auto tokens = argmax_tokens(rows, T, V);
  const std::string a = write_fixture(explicit_run("step:1", T, V, rows, tokens), "colon_a.h5");
  const std::string b = write_fixture(explicit_run("step:2", T, V, rows, tokens), "colon_b.h5");
  CompareOptions o;
  o.pairs = {{"step", "1:step:2"}};  // as the command line parses --pair step:1:step:2
  Report r = compare(a, b, "bitwise", o);
  ASSERT_FALSE(r.error.has_value()) << r.error->to_string();
  const CheckResult* c = find_check(r, "logits/step:1:step:2");
  ASSERT_NE(c, nullptr) << r.to_text(true);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  // Two splits naming existing runs: refused as ambiguous, naming both readings.
  fixtures::DumpSpec sa = explicit_run("x", T, V, rows, tokens);
  fixtures::DumpSpec more_a = explicit_run("x:y", T, V, rows, tokens);
  sa.logits.push_back(more_a.logits.front());
  fixtures::DumpSpec sb = explicit_run("y:z", T, V, rows, tokens);
  fixtures::DumpSpec more_b = explicit_run("z", T, V, rows, tokens);
  sb.logits.push_back(more_b.logits.front());
  o.a = write_fixture(sa, "colon_ambiguous_a.h5");
  o.b = write_fixture(sb, "colon_ambiguous_b.h5");
  o.pairs = {{"x", "y:z"}};
  const auto bad = run_compare(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kUsage);
  EXPECT_NE(bad.status().message().find("--pair x:y:z is ambiguous: it reads as x : y:z and as x:y : z"),
            std::string::npos)
      << bad.status().message();
}

TEST(Compare, MismatchedVocabulariesAreRefused) {
  const auto ra = clear_rows(3, 64), rb = clear_rows(3, 65);
  const std::string a = write_fixture(explicit_run("run", 3, 64, ra, argmax_tokens(ra, 3, 64)), "a.h5");
  const std::string b = write_fixture(explicit_run("run", 3, 65, rb, argmax_tokens(rb, 3, 65)), "b.h5");
  const Report r = compare(a, b);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code(), ErrorCode::kVocabMismatch);
  // A refusal is a Status: its message naming both vocabularies is the contract.
  EXPECT_NE(r.error->message().find("vocab 64"), std::string::npos) << r.error->message();
  EXPECT_EQ(r.exit_code(), 3);
}

TEST(Compare, ARunOnOneSideOnlyFailsUnlessAllowed) {
  const Index T = 3, V = 64;
  const auto rows = clear_rows(T, V);
  fixtures::DumpSpec sa = explicit_run("run", T, V, rows, argmax_tokens(rows, T, V));
  fixtures::LogitsSpec extra = sa.logits[0];
  extra.name = "extra";
  sa.logits.push_back(extra);
  const std::string a = write_fixture(sa, "a.h5");
  const std::string b = write_fixture(explicit_run("run", T, V, rows, argmax_tokens(rows, T, V)), "b.h5");
  Report r = compare(a, b);
  const CheckResult* c = find_check(r, "logits/extra");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_EQ(r.verdict(), Verdict::kFail);
  CompareOptions o;
  o.allow_missing = true;
  r = compare(a, b, "bitwise", o);
  EXPECT_EQ(r.verdict(), Verdict::kPass);
  // A one-sided run carries no evidence: its reason saying the PASS is allowed is the contract.
  EXPECT_NE(find_check(r, "logits/extra")->reason.find("allowed by --allow-missing"), std::string::npos);
}

TEST(Compare, RowsAfterTheHistoriesDivergeAreUnmatched) {
  const Index T = 8, V = 200;
  const auto ra = clear_rows(T, V);
  auto rb = ra;
  auto tb = argmax_tokens(ra, T, V);
  // B emits a different token at row 3 (its row says so): rows 4.. have another history.
  rb[3 * V + 150] = 5.0f;
  tb[3] = 150;
  for (Index t = 4; t < T; ++t) rb[t * V + 1] += 0.5f;  // later rows differ (another context)
  const std::string a = write_fixture(explicit_run("run", T, V, ra, argmax_tokens(ra, T, V)), "a.h5");
  const std::string b = write_fixture(explicit_run("run", T, V, rb, tb), "b.h5");
  // Judged under abs:0.01, rows 0..2 agree; row 3 differs at token 150 and is still matched.
  Report r = compare(a, b, "top1");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(stats(*c)["matched"], 4);
  EXPECT_EQ(stats(*c)["divergence_row"], 4);
  EXPECT_EQ(stats(*c)["unmatched"], 4);
  EXPECT_EQ(c->verdict, Verdict::kFail);  // row 3's argmax moved
  const auto* e = evidence_of<LogitsEvidence>(c);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->failing_rows, 1);
  EXPECT_EQ(e->first_failure_row, 3);
  EXPECT_EQ(e->compared, T);
  EXPECT_EQ(e->matched, 4);
  EXPECT_EQ(e->unmatched, 4);
  EXPECT_EQ(e->divergence_row, 4);
  // Teacher-forced runs: every row is matched and judged.
  CompareOptions o;
  o.matched_history = true;
  r = compare(a, b, "abs:0.6", o);
  c = find_check(r, "logits/run");
  EXPECT_EQ(stats(*c)["matched"], T);
  EXPECT_EQ(c->verdict, Verdict::kFail);  // row 3: |d| = 5 - 0.001 * ...
  const auto* forced = evidence_of<LogitsEvidence>(c);
  ASSERT_NE(forced, nullptr);
  EXPECT_EQ(forced->first_failure_row, 3);
  ASSERT_GT(forced->first_rows.size(), 3u);
  EXPECT_EQ(forced->first_rows[3].max_excess_col, 150);
}

TEST(Compare, RowsOneRunHoldsBeyondTheOtherAreSaidNotCompared) {
  // B stops after 5 of A's 8 rows, its tokens and logits A's: the policy holds on 5 rows, and
  // the 3 A holds beyond them are said, not silently dropped (a reviewer's "holds on 20 matched
  // row(s)" of 32).
  const Index T = 8, V = 200;
  const auto ra = clear_rows(T, V);
  const auto ta = argmax_tokens(ra, T, V);
  const std::vector<float> rb(ra.begin(), ra.begin() + 5 * V);
  const std::vector<std::int32_t> tb(ta.begin(), ta.begin() + 5);
  const std::string a = write_fixture(explicit_run("run", T, V, ra, ta), "long.h5");
  const std::string b = write_fixture(explicit_run("run", 5, V, rb, tb), "short.h5");
  Report r = compare(a, b, "bitwise");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  EXPECT_NE(c->reason.find("holds on 5 matched row(s); A holds 8 rows, B 5: A's last 3 are not compared"),
            std::string::npos)
      << c->reason;
  r = compare(b, a, "bitwise");
  c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->reason.find("B holds 8 rows, A 5: B's last 3 are not compared"), std::string::npos) << c->reason;
}

TEST(Compare, RowsAfterADivergenceAreCountedInEachRunWhereTheirLengthsDiffer) {
  // A holds 8 rows, B 6; B emits another token at row 3, so rows 4.. have other histories: A's 4
  // and B's 2 are unmatched. The reason said "4 row(s) after the histories diverge", B's 2 unsaid.
  const Index T = 8, V = 200;
  const auto ra = clear_rows(T, V);
  std::vector<float> rb(ra.begin(), ra.begin() + 6 * V);
  auto tb = argmax_tokens(rb, 6, V);
  rb[3 * V + 150] = 5.0f;
  tb[3] = 150;
  const std::string a = write_fixture(explicit_run("run", T, V, ra, argmax_tokens(ra, T, V)), "a8.h5");
  const std::string b = write_fixture(explicit_run("run", 6, V, rb, tb), "b6.h5");
  Report r = compare(a, b, "abs:10");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  EXPECT_NE(c->reason.find("holds on 4 matched row(s), A's 4 and B's 2 row(s) unmatched after the histories "
                           "diverge at row 4"),
            std::string::npos)
      << c->reason;
  EXPECT_EQ(stats(*c)["unmatched"], 4);
  r = compare(a, b, "bitwise");
  c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail) << c->reason;
  EXPECT_NE(c->reason.find("; A's 4 and B's 2 row(s) after the histories diverge at row 4 are not compared"),
            std::string::npos)
      << c->reason;
}

TEST(Compare, NoMatchedRowStatesNoAgreement) {
  // The runs' prompts differ: no row is matched, so there is no top-1 agreement to state. The
  // report said 0 % (every row disagreeing), with a standard error of 0.
  const Index T = 4, V = 200;
  const auto rows = clear_rows(T, V);
  auto sa = explicit_run("run", T, V, rows, argmax_tokens(rows, T, V));
  auto sb = sa;
  sa.logits[0].write_prompt_tokens = sb.logits[0].write_prompt_tokens = false;  // the prompts decide
  sa.logits[0].prompt = "one prompt";
  sb.logits[0].prompt = "another prompt";
  const std::string a = write_fixture(sa, "a0.h5");
  const std::string b = write_fixture(sb, "b0.h5");
  const Report r = compare(a, b, "bitwise");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  const Json s = stats(*c);
  EXPECT_EQ(s["matched"], 0);
  for (const char* k :
       {"top1_agreement", "top1_agreement_stderr", "top5_overlap_mean", "top10_overlap_mean", "kl_mean"})
    EXPECT_EQ(s[k].dump(), "null") << k;  // NaN, which JSON writes as null
}

TEST(Compare, ARowWhoseKlIsNotANumberRanksAboveEveryOtherInTheDistribution) {
  // Rows 1 and 5 of 8 hold a NaN on both sides, so their KL is NaN. Sorted by <, a NaN is no
  // ordering (the JSON read p90 null, where its schema wants a number); it now ranks last and
  // reads "nan", and the other rows' percentiles are numbers, in order.
  const Index T = 8, V = 200;
  auto ra = clear_rows(T, V);
  for (Index t = 0; t < T; ++t) ra[t * V + 3] += 0.01f * static_cast<float>(t);
  auto rb = ra;
  for (Index t = 0; t < T; ++t) rb[t * V + 5] += 0.02f * static_cast<float>(t + 1);
  ra[1 * V + 9] = rb[1 * V + 9] = std::numeric_limits<float>::quiet_NaN();
  ra[5 * V + 9] = rb[5 * V + 9] = std::numeric_limits<float>::quiet_NaN();
  const auto tokens = argmax_tokens(clear_rows(T, V), T, V);
  const std::string a = write_fixture(explicit_run("run", T, V, ra, tokens), "nan-a.h5");
  const std::string b = write_fixture(explicit_run("run", T, V, rb, tokens), "nan-b.h5");
  const Report r = compare(a, b, "top1");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  const Json kl = stats(*c)["kl_ab"];
  EXPECT_EQ(kl["max"], "nan") << kl;
  EXPECT_EQ(kl["p99"], "nan") << kl;  // 2 of 8 rows: the 7th and 8th ranks
  ASSERT_TRUE(kl["p50"].is_number()) << kl;
  ASSERT_TRUE(kl["min"].is_number()) << kl;
  EXPECT_LE(kl["min"].get<double>(), kl["p50"].get<double>());
  EXPECT_GT(kl["p50"].get<double>(), 0);
  // kl_mean is over the six rows whose KL is a number.
  const auto* e = evidence_of<LogitsEvidence>(c);
  ASSERT_NE(e, nullptr);
  double sum = 0;
  int finite = 0;
  for (const RowComparison& x : e->first_rows) {
    if (std::isfinite(x.kl_ab)) {
      sum += x.kl_ab;
      ++finite;
    }
  }
  EXPECT_EQ(finite, 6);
  EXPECT_DOUBLE_EQ(e->kl_mean, sum / 6);
}

TEST(Compare, AKlFailureFromAMaskOnOneSideNamesThatEntry) {
  // A masks entries 50-59 of row 2; B forgot the mask there. KL(A||B) fails from those entries,
  // where every finite pair is equal: the reason named "largest |d| at col 0" (|d| 0 there).
  const Index T = 4, V = 200;
  auto ra = clear_rows(T, V);
  const auto rb = ra;
  for (Index j = 50; j < 60; ++j) ra[2 * V + j] = -std::numeric_limits<float>::infinity();
  const auto tokens = argmax_tokens(rb, T, V);
  const std::string a = write_fixture(explicit_run("run", T, V, ra, tokens), "masked.h5");
  const std::string b = write_fixture(explicit_run("run", T, V, rb, tokens), "unmasked.h5");
  const Report r = compare(a, b, "kl:1e-9");
  const CheckResult* c = find_check(r, "logits/run");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_NE(c->reason.find("row 2: KL(A||B) = "), std::string::npos) << c->reason;
  EXPECT_NE(c->reason.find("(an entry masked or not finite on one side only, first at col 50: -inf vs "),
            std::string::npos)
      << c->reason;
}

TEST(Forks, IntegerLogitsAreNotReadAsBf16Values) {
  // f32 logits that are whole numbers are every one a bf16 value, but say nothing of their
  // precision: read at bf16's spacing (0.5 at 200), two tokens each moved by 1 at the fork
  // passed as a near-tie (a review's). The rows before differ by 0.25 at most; 300 values a row,
  // more than the 256 the precision is read from.
  const Index T = 6, V = 300;
  std::vector<float> ra(static_cast<std::size_t>(T * V));
  for (Index t = 0; t < T; ++t) {
    for (Index j = 0; j < V; ++j) ra[t * V + j] = static_cast<float>((j * 37 + t * 11) % 101) - 50.0f;
    ra[t * V + t] = 200.0f;
  }
  ra[4 * V + 10] = 199.0f;
  auto rb = ra;
  rb[1 * V + 30] += 0.25f;
  rb[4 * V + 4] = 199.0f;
  rb[4 * V + 10] = 200.0f;
  const std::string a = write_fixture(explicit_run("run", T, V, ra, argmax_tokens(ra, T, V)), "int-a.h5");
  const std::string b = write_fixture(explicit_run("run", T, V, rb, argmax_tokens(rb, T, V)), "int-b.h5");
  ForksOptions o;
  o.a = a;
  o.b = b;
  auto r = run_forks(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const CheckResult* c = find_check(*r, "forks/run/9");  // prompt of 5
  ASSERT_NE(c, nullptr) << r->to_text(false);
  EXPECT_EQ(c->verdict, Verdict::kFail) << c->reason;
  EXPECT_NE(c->reason.find("unexplained"), std::string::npos) << c->reason;
}

TEST(Compare, TensorsFollowTheirComparePolicy) {
  auto dump = [&](const std::string& name, float delta, bool with_extra) {
    fixtures::DumpSpec spec;
    spec.root.engine = "test";
    fixtures::TensorSpec kv;
    kv.name = "kv_cache";
    kv.shape = {4, 3, 50};
    kv.compare = "abs:1e-3";
    kv.values.resize(600);
    for (std::size_t i = 0; i < kv.values.size(); ++i) kv.values[i] = 0.01f * static_cast<float>(i % 37);
    kv.values[317] += delta;
    spec.tensors.push_back(kv);
    if (with_extra) {
      fixtures::TensorSpec only;
      only.name = "only_here";
      only.shape = {5};
      spec.tensors.push_back(only);
    }
    return write_fixture(spec, name);
  };
  const std::string a = dump("a.h5", 0.0f, false);
  const std::string close = dump("close.h5", 5e-4f, false);
  const std::string far = dump("far.h5", 0.1f, true);
  Report r = compare(a, close);
  const CheckResult* c = find_check(r, "tensors/kv_cache");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kPass) << c->reason;
  EXPECT_EQ(stats(*c)["policy"], "abs:1e-3");
  // --tensor-policy bitwise overrides the attribute.
  CompareOptions o;
  o.tensor_policy = *parse_tensor_policy("bitwise");
  r = compare(a, close, "bitwise", o);
  c = find_check(r, "tensors/kv_cache");
  EXPECT_EQ(c->verdict, Verdict::kFail);
  const auto* te = evidence_of<TensorEvidence>(c);
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te->shape, (std::vector<Index>{4, 3, 50}));
  EXPECT_EQ(te->first_failure, 317);  // element [2, 0, 17]: 317 = 2*150 + 17
  ASSERT_TRUE(c->first_failure.has_value());
  EXPECT_EQ(c->first_failure->row, 317);
  // A larger difference breaks the attribute's policy; the extra tensor fails on its own.
  r = compare(a, far);
  EXPECT_EQ(find_check(r, "tensors/kv_cache")->verdict, Verdict::kFail);
  ASSERT_NE(find_check(r, "tensors/only_here"), nullptr);
  EXPECT_EQ(find_check(r, "tensors/only_here")->verdict, Verdict::kFail);
  // A compare attribute that is not a tensor policy is refused on either side, naming the file
  // (B's typo once passed unread under A's attribute), and the refusal offers tensor policies.
  for (const bool on_b : {false, true}) {
    const std::string typo = dump(on_b ? "typo-b.h5" : "typo-a.h5", 0.0f, false);
    ncert::testing::poke_attr_string(typo, "/tensors/kv_cache", "compare", "ulp4");
    const Report refused = on_b ? compare(a, typo) : compare(typo, a);
    ASSERT_TRUE(refused.error.has_value()) << on_b;
    EXPECT_EQ(refused.error->code(), ErrorCode::kPolicyInvalid);
    EXPECT_NE(refused.error->message().find(typo + ": /tensors/kv_cache: compare = \"ulp4\""), std::string::npos)
        << refused.error->message();
    EXPECT_NE(refused.error->message().find("(the tensor policies)"), std::string::npos) << refused.error->message();
    EXPECT_EQ(refused.error->message().find("kl:"), std::string::npos) << refused.error->message();
    // inspect, the "is my dump valid?" command, says the same before any compare is tried.
    InspectOptions io;
    io.dump = typo;
    auto inspected = run_inspect(io);
    ASSERT_TRUE(inspected.ok());
    ASSERT_TRUE(inspected->error.has_value());
    EXPECT_EQ(inspected->error->code(), ErrorCode::kPolicyInvalid);
    EXPECT_NE(inspected->error->message().find(typo + ": /tensors/kv_cache: compare = \"ulp4\""), std::string::npos)
        << inspected->error->message();
    ASSERT_EQ(inspected->checks.size(), 1u);
    EXPECT_EQ(inspected->checks[0].verdict, Verdict::kFail);
    EXPECT_EQ(inspected->stats["errors"], 1);
  }
  {
    // A valid attribute leaves inspect's verdict alone.
    InspectOptions io;
    io.dump = a;
    auto inspected = run_inspect(io);
    ASSERT_TRUE(inspected.ok());
    EXPECT_FALSE(inspected->error.has_value()) << inspected->error->message();
    EXPECT_EQ(inspected->checks[0].verdict, Verdict::kPass);
  }
  // Logits policies make no sense for tensors.
  EXPECT_FALSE(parse_tensor_policy("kl:1e-3").ok());
  EXPECT_FALSE(parse_tensor_policy("top1").ok());
  EXPECT_EQ(parse_policy("abs:x").status().code(), ErrorCode::kPolicyInvalid);
}

TEST(Compare, ReportsAreIdenticalAtOneAndTwoThreads) {
  const DumpPair p = pair("threads", small_pair(1e-3f, 90, 1500));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Json one = compare(p.a, p.b, "kl:1e-3").to_json();
  omp_set_num_threads(2);
  Json two = compare(p.a, p.b, "kl:1e-3").to_json();
  omp_set_num_threads(saved);
  for (Json* j : {&one, &two}) {
    (*j)["stats"].erase("timing_seconds");
    (*j)["stats"].erase("timing_gb_per_second");
    for (auto& c : (*j)["checks"]) c["stats"].erase("timing_seconds");
  }
  EXPECT_EQ(one.dump(), two.dump());
}

}  // namespace
}  // namespace ncert::certify
