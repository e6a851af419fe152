// The option tables are the one source of every option: the command line and a campaign
// manifest set the same fields from them with the same ranges, their defaults come from the
// options structs, and the generated docs are what the tables say (the planted edits below
// must be caught).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "certify/campaign/entry_options.h"
#include "certify/cli/app.h"
#include "certify/cli/generated.h"
#include "certify/commands/option_tables.h"
#include "tests/common/test_paths.h"

namespace ncert {
namespace {

using certify::CampaignEntry;
using certify::EntryKind;
using Json = nlohmann::ordered_json;

/// Parses `ncert <args>` with the real command line and runs nothing: the chosen command's
/// options are captured through its action by parsing only (CLI11 throws on a usage error).
void parse(std::vector<std::string> args) {
  CLI::App app{"ncert"};
  cli::Action action;
  cli::build_app(app, action);
  std::reverse(args.begin(), args.end());
  app.parse(args);
}

CampaignEntry entry(EntryKind kind, Json options) {
  CampaignEntry e;
  e.id = "e";
  e.kind = kind;
  e.inputs = {"a.h5", "b.h5"};
  e.options = std::move(options);
  return e;
}

TEST(OptionTables, FlagsAndKeysAreUniquePerCommandAndNeverShadowTheCommonOnes) {
  std::set<std::string> common;
  for (const auto& s : cli::common_option_table()) EXPECT_TRUE(common.insert(s.flag).second) << s.flag;
  auto check = [&](const auto& table) {
    std::set<std::string> flags, keys;
    for (const auto& s : table) {
      EXPECT_TRUE(flags.insert(s.flag).second) << s.flag;
      EXPECT_FALSE(common.count(s.flag)) << s.flag;
      EXPECT_FALSE(s.help.empty()) << s.flag;
      if (!s.key.empty()) {
        EXPECT_TRUE(keys.insert(s.key).second) << s.key;
      }
    }
  };
  check(certify::check_option_table());
  check(certify::compare_option_table());
  check(certify::forks_option_table());
  check(certify::witness_option_table());
  check(certify::verify_option_table());
  check(certify::inspect_option_table());
  check(certify::sweep_option_table());
}

TEST(OptionTables, DefaultsAreReadFromTheOptionsStructs) {
  const auto* lambda = certify::find_by_key(certify::check_option_table(), "lambda");
  ASSERT_NE(lambda, nullptr);
  EXPECT_EQ(lambda->shown_default(certify::CheckCommandOptions{}), "10");
  EXPECT_EQ(lambda->described(),
            "The probabilistic tier multiplier of reference bounds (docs/error-bounds.md §3) (1–1000; default 10)");
  const auto* context = certify::find_by_key(certify::forks_option_table(), "context");
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(context->shown_default(certify::ForksOptions{}), "8");
  const auto* policy = certify::find_by_key(certify::compare_option_table(), "policy");
  ASSERT_NE(policy, nullptr);
  // No single default: bitwise, or forks for runs whose logits differ in dtype (the help says so).
  EXPECT_EQ(policy->shown_default(certify::CompareOptions{}), std::nullopt);
  EXPECT_NE(policy->described().find("default: bitwise, or forks where"), std::string::npos);
  const auto* logit_error = certify::find_by_key(certify::check_option_table(), "logit_error");
  ASSERT_NE(logit_error, nullptr);
  EXPECT_TRUE(logit_error->nullable);
  EXPECT_EQ(logit_error->shown_default(certify::CheckCommandOptions{}), std::nullopt);
}

TEST(OptionTables, ManifestEntriesSetTheFieldsTheFlagsSet) {
  auto check = certify::check_options(entry(EntryKind::kCheck, Json{{"strict", true},
                                                                    {"allow_vacuous", true},
                                                                    {"lambda", 20},
                                                                    {"logit_error", 0.5},
                                                                    {"only", "attn"},
                                                                    {"require", "walk,untouched"},
                                                                    {"weights", "w.h5"}}),
                                      {});
  ASSERT_TRUE(check.ok()) << check.status().to_string();
  EXPECT_TRUE(check->check.strict);
  EXPECT_TRUE(check->check.allow_vacuous);
  EXPECT_EQ(check->check.lambda, 20);
  EXPECT_EQ(check->logit_error, 0.5);
  EXPECT_EQ(check->only, "attn");
  EXPECT_EQ(check->require.text(), "walk,untouched");
  EXPECT_EQ(check->weights, "w.h5");

  auto forks = certify::forks_options(
      entry(EntryKind::kForks, Json{{"pairs", {"g:h"}}, {"context", 3}, {"logit_error", nullptr}}), {});
  ASSERT_TRUE(forks.ok()) << forks.status().to_string();
  ASSERT_EQ(forks->pairs.size(), 1u);
  EXPECT_EQ(forks->pairs[0], std::make_pair(std::string("g"), std::string("h")));
  EXPECT_EQ(forks->context, 3);
  EXPECT_FALSE(forks->logit_error.has_value());

  auto compare = certify::compare_options(
      entry(EntryKind::kCompare, Json{{"policy", "ulp:4"}, {"tensor_policy", "abs:1e-3"}}), {});
  ASSERT_TRUE(compare.ok()) << compare.status().to_string();
  ASSERT_TRUE(compare->policy.has_value());  // unset, each run pair takes its default
  EXPECT_EQ(compare->policy->kind, certify::Policy::Kind::kUlp);
  EXPECT_EQ(compare->policy->ulp, 4u);
  ASSERT_TRUE(compare->tensor_policy.has_value());
  EXPECT_EQ(compare->tensor_policy->kind, certify::Policy::Kind::kAbs);
}

TEST(OptionTables, ManifestValuesOutsideTheFlagsRangesAreRefusedNamingTheOption) {
  struct Case {
    EntryKind kind;
    Json options;
    std::string message;
  };
  const Case cases[] = {
      {EntryKind::kCheck, Json{{"lambda", 0.5}}, "entry e: option \"lambda\" must be a number from 1 to 1000"},
      {EntryKind::kForks, Json{{"context", 4.5}}, "entry e: option \"context\" must be a whole number from 0 to 4096"},
      {EntryKind::kForks, Json{{"context", 4097}}, "entry e: option \"context\" must be a whole number from 0 to 4096"},
      {EntryKind::kCheck, Json{{"strict", 1}}, "entry e: option \"strict\" must be true or false"},
      {EntryKind::kCheck, Json{{"require", "walks"}}, "entry e: option \"require\" "},
      {EntryKind::kCompare, Json{{"pairs", {"nocolon"}}}, "entry e: option \"pairs\" expected a:b, got nocolon"},
      {EntryKind::kCompare, Json{{"pairs", "a:b"}}, "entry e: option \"pairs\" must be a list of \"a:b\" strings"},
      {EntryKind::kCompare, Json{{"policy", "close"}}, "entry e: option \"policy\" "},
  };
  for (const Case& c : cases) {
    const Status s = certify::validate_entries(certify::Manifest{"m.json", "m", "", {entry(c.kind, c.options)}});
    EXPECT_EQ(s.code(), ErrorCode::kUsage) << c.options.dump();
    EXPECT_EQ(s.message().rfind("m.json: " + c.message, 0), 0u) << s.message();
  }
}

TEST(OptionTables, TheCommandLineRefusesWhatTheManifestRefuses) {
  EXPECT_NO_THROW(parse({"check", "d.h5", "--lambda", "20", "--require", "walk", "--weights", "w.h5"}));
  EXPECT_THROW(parse({"check", "d.h5", "--lambda", "0.5"}), CLI::ValidationError);
  EXPECT_THROW(parse({"forks", "a.h5", "b.h5", "--context", "4097"}), CLI::ValidationError);
  EXPECT_THROW(parse({"forks", "a.h5", "b.h5", "--context", "4.5"}), CLI::ParseError);
  EXPECT_THROW(parse({"check", "d.h5", "--require", "walks"}), CLI::ValidationError);
  EXPECT_THROW(parse({"compare", "a.h5", "b.h5", "--pair", "nocolon"}), CLI::ValidationError);
  EXPECT_THROW(parse({"compare", "a.h5", "b.h5", "--policy", "close"}), CLI::ValidationError);
  EXPECT_THROW(parse({"check", "d.h5", "--threads", "0"}), CLI::ValidationError);
}

TEST(OptionTables, HelpShowsRangeAndDefaultFromTheTable) {
  CLI::App app{"ncert"};
  cli::Action action;
  cli::build_app(app, action);
  const std::string help = app.get_subcommand("check")->help();
  EXPECT_NE(help.find("(1–1000; default 10)"), std::string::npos) << help;
  const std::string man = cli::man_page(app);
  EXPECT_NE(man.find("default 10"), std::string::npos);
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A copy of the generated files of the source tree in a scratch root.
std::filesystem::path copy_generated_files() {
  const std::filesystem::path root = testing::scratch_dir();
  for (const cli::GeneratedPart& part : cli::generated_parts()) {
    const std::filesystem::path to = root / part.path;
    std::filesystem::create_directories(to.parent_path());
    std::filesystem::copy_file(std::filesystem::path(NCERT_SOURCE_DIR) / part.path, to,
                               std::filesystem::copy_options::overwrite_existing);
  }
  return root;
}

TEST(GeneratedDocs, TheSourceTreeIsUpToDate) {
  auto stale = cli::stale_parts(NCERT_SOURCE_DIR);
  ASSERT_TRUE(stale.ok()) << stale.status().to_string();
  EXPECT_TRUE(stale->empty()) << "stale: " << (stale->empty() ? "" : stale->front())
                              << " (regenerate: build/release/certify/cli/ncert-docgen write .)";
}

TEST(GeneratedDocs, AHandEditedRowIsCaughtAndRewritten) {
  const std::filesystem::path root = copy_generated_files();
  const std::filesystem::path cli_md = root / "docs/cli.md";
  std::string text = read(cli_md);
  const std::size_t row = text.find("| `--lambda X` |");
  ASSERT_NE(row, std::string::npos);
  text.replace(text.find("| `10` |", row), 8, "| `12` |");
  std::ofstream(cli_md, std::ios::binary | std::ios::trunc) << text;
  auto stale = cli::stale_parts(root.string());
  ASSERT_TRUE(stale.ok());
  ASSERT_EQ(stale->size(), 1u);
  EXPECT_EQ(stale->front(), "docs/cli.md#check-options");
  ASSERT_TRUE(cli::write_parts(root.string()).ok());
  EXPECT_EQ(read(cli_md), read(std::filesystem::path(NCERT_SOURCE_DIR) / "docs/cli.md"));
  EXPECT_TRUE(cli::stale_parts(root.string())->empty());
}

TEST(GeneratedDocs, MissingOrRepeatedMarkersAreAnError) {
  const std::string begin = "<!-- BEGIN generated: x (ncert-docgen write) -->\n";
  const std::string end = "<!-- END generated: x -->\n";
  auto ok = cli::replace_section("a\n" + begin + "old\n" + end + "b\n", "f.md", "x", "new\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "a\n" + begin + "new\n" + end + "b\n");
  EXPECT_EQ(cli::replace_section("a\n" + begin + "b\n", "f.md", "x", "").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(cli::replace_section(end + begin, "f.md", "x", "").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(cli::replace_section(begin + end + begin + end, "f.md", "x", "").status().code(),
            ErrorCode::kInvalidArgument);
  auto py = cli::replace_section("# BEGIN generated: x (ncert-docgen write)\n# END generated: x\n", "f.py", "x", "y\n");
  ASSERT_TRUE(py.ok());
  EXPECT_EQ(*py, "# BEGIN generated: x (ncert-docgen write)\ny\n# END generated: x\n");
}

}  // namespace
}  // namespace ncert
