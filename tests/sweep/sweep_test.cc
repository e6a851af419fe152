// The default sweep table meets its minimums and passes: >= 15,840 packed-vs-unpacked
// comparisons (identity cases and in-place alias cases, each counted under its own name),
// >= 252 alias cases, >= 12 guard cases covering every host guard; every key round-trips
// through the --case parser.
#include "packing/sweep.h"

#include <gtest/gtest.h>

#include <set>

namespace ncert::packing {
namespace {

TEST(Sweep, DefaultTableMeetsTheMinimumsAndPasses) {
  const auto cases = default_cases();
  const SweepSummary s = sweep_cases(cases);
  EXPECT_EQ(s.failed, 0) << s.first_failure_key << ": " << s.first_failure_reason;
  EXPECT_GE(s.identity_comparisons + s.alias_comparisons, 15840);
  EXPECT_GE(s.alias_cases, 252);
  // Every identity and alias case that selects a row compared it (the "empty" commit cases
  // select none); width-bucket rows are counted apart.
  Index identity_cases = 0, alias_cases = 0, empty_identity = 0, empty_alias = 0;
  for (const SweepCase& c : cases) {
    if (c.kind != CaseKind::kIdentity) continue;
    const bool empty = c.commit == "empty";
    (c.inplace ? alias_cases : identity_cases) += 1;
    (c.inplace ? empty_alias : empty_identity) += empty;
  }
  EXPECT_EQ(s.alias_cases, alias_cases);
  EXPECT_EQ(s.alias_comparisons, alias_cases - empty_alias);
  EXPECT_EQ(s.identity_comparisons, identity_cases - empty_identity);
  EXPECT_EQ(identity_cases + alias_cases + s.width_cases + s.guard_cases, s.cases);
  EXPECT_GT(s.width_rows, 0);
  EXPECT_GE(s.guard_cases, 12);
  std::set<ErrorCode> all;
  for (const auto& [name, code] : guard_names()) all.insert(code);
  EXPECT_EQ(s.guards_covered, all);
  // Every guard code of the 3xx band except the sweep's own canary detection is covered.
  for (int c = 300; c <= 316; ++c) EXPECT_TRUE(s.guards_covered.count(static_cast<ErrorCode>(c))) << c;
}

TEST(Sweep, TableCoversTheRequiredAxes) {
  std::set<Index> requests;
  std::set<std::string> commits, formats, walks;
  std::set<int> outputs, epilogues;
  bool wide_out = false, wide_in = false, inplace = false, residual_at_output = false;
  for (const SweepCase& c : default_cases()) {
    requests.insert(c.requests);
    commits.insert(c.commit);
    formats.insert(c.formats);
    walks.insert(c.walk);
    outputs.insert(static_cast<int>(c.output));
    epilogues.insert(static_cast<int>(c.epilogue));
    wide_out |= c.n == 16480 && c.n + c.out_pad == 16640;
    wide_in |= c.k == 16480 && c.k + c.in_pad == 16640;
    inplace |= c.inplace;
    residual_at_output |= c.at == reference::ResidualAt::kOutput;
  }
  EXPECT_EQ(requests.size(), 8u);
  EXPECT_EQ(commits.size(), 7u);
  EXPECT_EQ(formats.size(), 5u);
  EXPECT_GE(walks.size(), 6u);
  EXPECT_EQ(outputs.size(), 2u);
  EXPECT_EQ(epilogues.size(), 4u);
  EXPECT_TRUE(wide_out && wide_in && inplace && residual_at_output);
}

TEST(Sweep, KeysRoundTrip) {
  for (const SweepCase& c : default_cases()) {
    auto parsed = parse_case(c.key());
    ASSERT_TRUE(parsed.ok()) << c.key() << ": " << parsed.status().to_string();
    ASSERT_EQ(parsed->key(), c.key());
  }
  EXPECT_EQ(parse_case("pack(kind=identity)").status().code(), ErrorCode::kUsage);
  EXPECT_EQ(parse_case("gemm(x=1)").status().code(), ErrorCode::kUsage);
  SweepCase c;
  std::string key = c.key();
  key.replace(key.find("fmt=bf16"), 8, "fmt=q4k");
  EXPECT_EQ(parse_case(key).status().code(), ErrorCode::kUsage);
}

}  // namespace
}  // namespace ncert::packing
