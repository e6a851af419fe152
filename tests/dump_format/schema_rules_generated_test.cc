// python/ncert_dump/schema_rules.json is a generated part (certify/cli/generated.h): ncert-docgen
// renders it from the member rules, and a hand edit of any rule in it is reported stale, then
// rewritten to the table's text. (GeneratedDocs.TheSourceTreeIsUpToDate in tests/unit/cli fails
// while the committed file differs.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "certify/cli/generated.h"
#include "certify/io/schema_rules.h"
#include "tests/common/test_paths.h"

namespace ncert {
namespace {

constexpr const char* kJson = "python/ncert_dump/schema_rules.json";

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A scratch root holding a copy of every generated file of the source tree.
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

TEST(SchemaRulesGenerated, TheJsonIsAWholeGeneratedFile) {
  int found = 0;
  for (const cli::GeneratedPart& part : cli::generated_parts()) {
    if (part.path != kJson) continue;
    ++found;
    EXPECT_TRUE(part.section.empty());
    EXPECT_EQ(part.render(), certify::schema_rules_json());
  }
  EXPECT_EQ(found, 1);
  EXPECT_EQ(read(std::filesystem::path(NCERT_SOURCE_DIR) / kJson), certify::schema_rules_json())
      << "regenerate: build/release/certify/cli/ncert-docgen write .";
}

TEST(SchemaRulesGenerated, AHandEditedRuleIsStaleAndRewritten) {
  const std::filesystem::path root = copy_generated_files();
  ASSERT_TRUE(cli::stale_parts(root.string())->empty());
  // Lower k's minimum from 1 to 0 in the copy, as a hand edit of the Python side would.
  const std::filesystem::path json = root / kJson;
  std::string text = read(json);
  const std::size_t k = text.find(R"("container": "projection", "kind": "attribute", "name": "k",)");
  ASSERT_NE(k, std::string::npos);
  const std::size_t min = text.find(R"("min_value": 1,)", k);
  ASSERT_LT(min, text.find('\n', k));
  text.replace(min, std::string(R"("min_value": 1,)").size(), R"("min_value": 0,)");
  std::ofstream(json, std::ios::binary | std::ios::trunc) << text;

  auto stale = cli::stale_parts(root.string());
  ASSERT_TRUE(stale.ok()) << stale.status().to_string();
  EXPECT_EQ(*stale, std::vector<std::string>{kJson});
  auto written = cli::write_parts(root.string());
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, std::vector<std::string>{kJson});
  EXPECT_EQ(read(json), certify::schema_rules_json());
  EXPECT_TRUE(cli::stale_parts(root.string())->empty());
}

}  // namespace
}  // namespace ncert
