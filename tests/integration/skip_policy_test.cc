// The skip policy (docs/cli.md "Skip policy") in both directions: a SKIP the policy expects passes
// and is marked expected in every report format, a SKIP it does not expect fails naming the
// policy, a required kind fails whatever rule matches it, a policy's not_applicable rule makes an
// N/A; the packed-path checks of a projection dumped with y_unpacked only are N/A with or without
// a policy; and a bad policy file is refused with skip-policy-invalid (107), naming the file, the
// key and the value.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "certify/commands/check.h"
#include "certify/commands/option_tables.h"
#include "certify/report/render_html.h"
#include "certify/report/render_junit.h"
#include "certify/report/skip_policy.h"
#include "certify/report/wire.h"
#include "fixtures/generator.h"
#include "tests/common/fixture_check.h"
#include "tests/common/report_checks.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::find_check;
using ncert::testing::scratch_file;
using ncert::testing::write_fixture;

std::string write_policy(const std::string& name, const std::string& text) {
  const std::string path = scratch_file(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

SkipPolicy policy_of(const std::string& name, const std::string& text) {
  Result<SkipPolicy> p = load_skip_policy(write_policy(name, text));
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? *p : SkipPolicy{};
}

Report check_with(const std::string& dump, std::optional<SkipPolicy> policy, const std::string& only = "mlp_up") {
  CheckCommandOptions o;
  o.dump = dump;
  o.only = only;  // the one projection whose skips the tests count
  o.skip_policy = std::move(policy);
  Result<Report> r = run_check(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Report{};
}

/// preset_tiny with mlp_up (no k_walk: its walk is a SKIP) dumped with y_unpacked only and no
/// request geometry, as an lm_head computed without packing is.
std::string unpacked_only_dump() {
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  fixtures::ProjectionSpec& p = spec.projections[1];
  EXPECT_EQ(p.name, "mlp_up");
  p.write_packed = false;
  p.write_compact = false;
  p.write_geometry = false;
  p.write_commit_counts = false;
  return write_fixture(spec, "unpacked-only.h5");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SkipPolicy, UnpackedOnlyProjectionsPackedChecksAreNotApplicableWithoutAPolicy) {
  const std::string dump = unpacked_only_dump();
  const Report r = check_with(dump, std::nullopt);
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(false);
  for (const std::string id : {"identity", "untouched", "request-guards"}) {
    const CheckResult* c = find_check(r, "projections/mlp_up/" + id);
    ASSERT_NE(c, nullptr) << id;
    EXPECT_EQ(c->verdict, Verdict::kNotApplicable) << id << ": " << c->reason;
    EXPECT_EQ(c->reason.rfind("dumped with y_unpacked only: ", 0), 0u) << c->reason;
    EXPECT_FALSE(c->policy_match.has_value());
  }
  // The walk (and the residual tests of its matrix-unit accumulator) are no format matter: SKIPs,
  // unexpected without a policy.
  EXPECT_EQ(find_check(r, "projections/mlp_up/walk")->verdict, Verdict::kSkip);
  EXPECT_EQ(find_check(r, "projections/mlp_up/signature")->verdict, Verdict::kSkip);
  EXPECT_EQ(r.skipped_checks(), 3);
  EXPECT_EQ(r.not_applicable_checks(), 3);
  // --require identity does not turn an N/A into a FAIL; it still fails a real SKIP of identity.
  Report required = r;
  required.apply(*parse_requirement("identity,untouched,geometry"));
  EXPECT_EQ(required.verdict(), Verdict::kPass);
  // Shown as N/A everywhere: text, JSON, coverage, JUnit.
  const std::string text = r.to_text(false);
  EXPECT_NE(text.find("N/A  projections/mlp_up/identity"), std::string::npos) << text;
  EXPECT_NE(text.find("3 skipped, 3 not applicable"), std::string::npos) << text;
  const Json j = r.to_json();
  for (const Json& c : j["checks"]) {
    if (c["id"] == "projections/mlp_up/untouched") {
      EXPECT_EQ(c["verdict"], "N/A");
    }
  }
  const std::string junit = render_junit(r);
  EXPECT_EQ(count(junit, "<skipped type=\"not-applicable\""), 3u) << junit;
  EXPECT_EQ(count(junit, "<skipped type=\"unexpected\""), 3u) << junit;
  // A projection with its packed outputs still SKIPs what it lacks (twin: y_before missing).
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  spec.projections[0].write_before = false;
  const Report twin = check_with(write_fixture(spec, "no-before-policy.h5"), std::nullopt, "attn_qkv");
  ASSERT_NE(find_check(twin, "projections/attn_qkv/untouched"), nullptr);
  EXPECT_EQ(find_check(twin, "projections/attn_qkv/untouched")->verdict, Verdict::kSkip);
}

TEST(SkipPolicy, AnExpectedSkipPassesAndIsMarkedInEveryFormat) {
  const std::string dump = unpacked_only_dump();
  const SkipPolicy policy = policy_of("expect-walk.json", R"({"ncert_skip_policy": 1,
      "required": ["bound"],
      "expected_skips": [{"kind": "walk", "projection": "mlp_*", "why": "a BLAS engine declares no K walk"},
                         {"reason": "round-to-nearest accumulation only", "why": "a matrix-unit accumulator"}]})");
  const Report r = check_with(dump, policy);
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(false);
  EXPECT_EQ(r.exit_code(), 0);
  const CheckResult* walk = find_check(r, "projections/mlp_up/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kSkip);
  ASSERT_TRUE(walk->expected_skip());
  EXPECT_EQ(walk->policy_match->rule, 0u);
  EXPECT_EQ(walk->policy_match->rule_text, "expected_skips[0] (kind walk, projection mlp_*)");
  EXPECT_EQ(r.expected_skips(), 3);
  const CheckResult* sig = find_check(r, "projections/mlp_up/signature");
  ASSERT_TRUE(sig->expected_skip());
  EXPECT_EQ(sig->policy_match->rule_text, "expected_skips[1] (reason \"round-to-nearest accumulation only\")");

  const std::string text = r.to_text(false);
  EXPECT_NE(text.find("SKIP (expected)  projections/mlp_up/walk"), std::string::npos) << text;
  EXPECT_NE(text.find("expected by policy " + policy.path +
                      " expected_skips[0] (kind walk, projection mlp_*): a BLAS engine declares no K walk"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("3 skipped (3 expected by policy)"), std::string::npos) << text;
  const Json j = r.to_json();
  bool seen = false;
  for (const Json& c : j["checks"]) {
    if (c["id"] != "projections/mlp_up/walk") continue;
    seen = true;
    EXPECT_EQ(c["verdict"], "SKIP");
    EXPECT_EQ(c["policy_rule"]["policy"], policy.path);
    EXPECT_EQ(c["policy_rule"]["rule"], "expected_skips[0] (kind walk, projection mlp_*)");
    EXPECT_EQ(c["policy_rule"]["why"], "a BLAS engine declares no K walk");
  }
  EXPECT_TRUE(seen);
  const std::string junit = render_junit(r);
  EXPECT_EQ(count(junit, "<skipped type=\"expected\""), 3u) << junit;
  EXPECT_EQ(count(junit, "<skipped type=\"unexpected\""), 0u) << junit;
  EXPECT_NE(junit.find("<property name=\"ncert.skipped.expected\" value=\"3\"/>"), std::string::npos) << junit;
  const std::string html = render_html(r);
  EXPECT_EQ(count(html, "data-expected=\"true\""), 3u);
  EXPECT_NE(html.find("<span class=\"expected\">expected</span>"), std::string::npos);
  // The classification travels between processes (a campaign's units) unchanged.
  Result<CheckResult> back = check_from_wire(check_to_wire(*walk));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *walk);
  const CheckResult* na = find_check(r, "projections/mlp_up/identity");
  Result<CheckResult> na_back = check_from_wire(check_to_wire(*na));
  ASSERT_TRUE(na_back.ok());
  EXPECT_EQ(na_back->verdict, Verdict::kNotApplicable);
}

TEST(SkipPolicy, AnUnexpectedSkipFailsNamingThePolicy) {
  const std::string dump = unpacked_only_dump();
  // The policy expects walk skips of attention projections only: mlp_up's is unexpected.
  const SkipPolicy policy = policy_of("expect-attn-walk.json", R"({"ncert_skip_policy": 1,
      "expected_skips": [{"kind": "walk", "projection": "attn_*"}, {"reason": "round-to-nearest accumulation only"}]})");
  const Report r = check_with(dump, policy);
  EXPECT_EQ(r.verdict(), Verdict::kFail);
  EXPECT_EQ(r.exit_code(), 1);
  const CheckResult* walk = find_check(r, "projections/mlp_up/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kFail);
  EXPECT_EQ(
      walk->reason.rfind("skipped, and no rule of policy " + policy.path +
                             " expects it (add {\"kind\": \"walk\", \"projection\": \"mlp_up\"} to expected_skips",
                         0),
      0u)
      << walk->reason;
  EXPECT_NE(walk->reason.find("no k_walk declared"), std::string::npos) << walk->reason;
  // The format's N/A are not skips: the policy does not fail them.
  EXPECT_EQ(find_check(r, "projections/mlp_up/identity")->verdict, Verdict::kNotApplicable);
  EXPECT_EQ(r.failed_checks(), 1) << r.to_text(true);
  const std::string junit = render_junit(r);
  EXPECT_NE(junit.find("<failure message=\"skipped, and no rule of policy"), std::string::npos) << junit;
}

TEST(SkipPolicy, ARequiredKindFailsWhateverRuleMatchesIt) {
  const std::string dump = unpacked_only_dump();
  const SkipPolicy policy = policy_of("require-walk.json", R"({"ncert_skip_policy": 1, "required": ["walk"],
      "expected_skips": [{"projection": "mlp_up"}]})");
  const Report r = check_with(dump, policy);
  const CheckResult* walk = find_check(r, "projections/mlp_up/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kFail);
  EXPECT_EQ(walk->reason.rfind("required by policy " + policy.path + " (required: walk) but skipped: ", 0), 0u)
      << walk->reason;
}

TEST(SkipPolicy, ANotApplicableRuleMakesAnNA) {
  const std::string dump = unpacked_only_dump();
  const SkipPolicy policy = policy_of("na-walk.json", R"({"ncert_skip_policy": 1,
      "not_applicable": [{"kind": "walk", "reason": "no k_walk declared", "why": "cuBLAS picks its own order"}],
      "expected_skips": [{"reason": "round-to-nearest accumulation only"}]})");
  const Report r = check_with(dump, policy);
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(false);
  const CheckResult* walk = find_check(r, "projections/mlp_up/walk");
  EXPECT_EQ(walk->verdict, Verdict::kNotApplicable);
  ASSERT_TRUE(walk->policy_match.has_value());
  EXPECT_EQ(walk->policy_match->rule_text, "not_applicable[0] (kind walk, reason \"no k_walk declared\")");
  EXPECT_EQ(r.skipped_checks(), 2);
  EXPECT_EQ(r.not_applicable_checks(), 4);
  EXPECT_NE(r.to_text(false).find("not applicable by policy " + policy.path), std::string::npos);
}

TEST(SkipPolicy, GlobsMatchWholeNames) {
  EXPECT_TRUE(glob_match("lm_*", "lm_head_greedy"));
  EXPECT_TRUE(glob_match("*_q?", "mlp_up_q4"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(glob_match("lm_*", "attn_lm_head"));
  EXPECT_FALSE(glob_match("mlp_up", "mlp_up2"));
  EXPECT_FALSE(glob_match("*_q?", "mlp_up_q41"));
}

void expect_refused(const std::string& name, const std::string& text, const std::string& says) {
  const std::string path = write_policy(name, text);
  Result<SkipPolicy> p = load_skip_policy(path);
  ASSERT_FALSE(p.ok()) << name;
  EXPECT_EQ(p.status().code(), ErrorCode::kSkipPolicyInvalid) << name;
  EXPECT_EQ(exit_code_for(p.status().code()), 2);
  EXPECT_EQ(p.status().message(), path + ": " + says) << name;
}

TEST(SkipPolicy, ABadPolicyFileIsRefusedNamingFileKeyAndValue) {
  expect_refused("bad-json.json", "{\"ncert_skip_policy\": 1,",
                 "not valid JSON ([json.exception.parse_error.101] parse error at line 1, column 25: syntax error "
                 "while parsing object key - unexpected end of input; expected string literal)");
  expect_refused("nul.json", std::string("{\"ncert_skip_policy\": 1}\0{", 26),
                 "not valid JSON ([json.exception.other_error.501] a NUL byte at offset 24: a JSON file holds text "
                 "only)");
  expect_refused("no-version.json", "{\"required\": \"all\"}", "ncert_skip_policy: missing (the format's version, 1)");
  expect_refused("version-2.json", "{\"ncert_skip_policy\": 2}",
                 "ncert_skip_policy: 2 is not a version this ncert reads (1)");
  expect_refused(
      "bad-kind.json", R"({"ncert_skip_policy": 1, "expected_skips": [{"kind": "bias"}, {"kind": "wlak"}]})",
      "expected_skips[1].kind: \"wlak\" is not a check kind (schema, geometry, identity, bound, walk, "
      "untouched, bias, signature, variance, quantize, vacuity, witness, logits, tensor, fork, guard, alias)");
  expect_refused("bad-key.json", R"({"ncert_skip_policy": 1, "expected_skip": []})",
                 "expected_skip: unknown key (a policy takes ncert_skip_policy, required, expected_skips, "
                 "not_applicable and comment)");
  expect_refused("bad-rule-key.json", R"({"ncert_skip_policy": 1, "not_applicable": [{"kind": "walk", "glob": "x"}]})",
                 "not_applicable[0].glob: unknown key (a rule takes kind, projection, reason and why)");
  expect_refused("empty-rule.json", R"({"ncert_skip_policy": 1, "expected_skips": [{"why": "everything"}]})",
                 "expected_skips[0]: matches every check: give at least one of kind, projection and reason");
  expect_refused("required-expected.json",
                 R"({"ncert_skip_policy": 1, "required": ["walk"], "expected_skips": [{"kind": "walk"}]})",
                 "expected_skips[0].kind: \"walk\" is also required");
  expect_refused("bad-required.json", R"({"ncert_skip_policy": 1, "required": "some"})",
                 "required: \"some\" is not \"all\" or a list of check kinds");
  // A key given twice is read as its last value by JSON libraries: refused, as in manifests.
  expect_refused("twice.json", R"({"ncert_skip_policy": 1, "expected_skips": [{"kind": "walk", "kind": "witness"}]})",
                 "expected_skips[0]: gives the key \"kind\" twice (JSON keeps only the last: give each key once)");
  expect_refused("twice-top.json", R"({"ncert_skip_policy": 1, "required": [], "required": "all"})",
                 "top level: gives the key \"required\" twice (JSON keeps only the last: give each key once)");
  expect_refused("empty-projection.json", R"({"ncert_skip_policy": 1, "expected_skips": [{"projection": ""}]})",
                 "expected_skips[0].projection: \"\" is not a non-empty text");
  // A missing file is the same refusal, naming it.
  const std::string missing = scratch_file("no-such-policy.json");
  std::remove(missing.c_str());
  Result<SkipPolicy> p = load_skip_policy(missing);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kSkipPolicyInvalid);
  EXPECT_EQ(p.status().message(), missing + ": no such skip policy file");
  // A directory or a FIFO is there but is no file: said so (a FIFO never opened, so never waited on).
  const std::string dir = scratch_file("policy-dir");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(load_skip_policy(dir).status().message(),
            dir + ": not a regular file (a directory); a skip policy is a JSON file");
  const std::string fifo = scratch_file("policy.fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(load_skip_policy(fifo).status().message(),
            fifo + ": not a regular file (a FIFO, socket or device); a skip policy is a JSON file");
  EXPECT_EQ(load_skip_policy(fifo).status().code(), ErrorCode::kSkipPolicyInvalid);
  std::remove(fifo.c_str());
  // Through the option table (the command line and a campaign manifest's skip_policy) the code is
  // kept, not turned into a plain usage error.
  const auto& table = check_option_table();
  const auto* spec = find_by_key(table, "skip_policy");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->flag, "policy");
  CheckCommandOptions o;
  EXPECT_EQ(spec->set(o, OptionValue(missing)).code(), ErrorCode::kSkipPolicyInvalid);
  const std::string good = write_policy("good.json", R"({"ncert_skip_policy": 1, "required": "all"})");
  EXPECT_TRUE(spec->set(o, OptionValue(good)).ok());
  ASSERT_TRUE(o.skip_policy.has_value());
  EXPECT_TRUE(o.skip_policy->require_all);
}

}  // namespace
}  // namespace ncert::certify
