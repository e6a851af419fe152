#include "reference/status.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace ncert {
namespace {

TEST(Status, EveryCodeHasAUniqueNameAndDescription) {
  std::set<std::string_view> names;
  for (ErrorCode c : all_error_codes()) {
    EXPECT_NE(error_name(c), "unknown-code");
    EXPECT_NE(error_description(c), "unknown code");
    EXPECT_TRUE(names.insert(error_name(c)).second) << error_name(c);
  }
  EXPECT_GT(all_error_codes().size(), 50u);
}

TEST(Status, ExitCodesFollowTheCliContract) {
  EXPECT_EQ(exit_code_for(ErrorCode::kUsage), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kFileNotFound), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kExternalLink), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kSchemaVersion), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kAccumulatorUnknown), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kInternal), 4);
}

TEST(Status, ResultCarriesValueOrStatus) {
  Result<int> ok = 3;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  Result<int> bad = Status(ErrorCode::kHdf5, "x");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kHdf5);
  Result<int> misuse = Status();
  EXPECT_EQ(misuse.status().code(), ErrorCode::kInternal);
  EXPECT_EQ(Status(ErrorCode::kGuardDuplicateRow, "row 3").to_string(), "error guard-duplicate-row (301): row 3");
}

// docs/error-codes.md must list every code by number and name (kept complete by this test).
TEST(Status, ErrorCodesDocIsComplete) {
  std::ifstream in(std::string(NCERT_SOURCE_DIR) + "/docs/error-codes.md");
  ASSERT_TRUE(in.good()) << "docs/error-codes.md missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (ErrorCode c : all_error_codes()) {
    const std::string row = "| " + std::to_string(static_cast<int>(c)) + " | `" + std::string(error_name(c)) + "` |";
    EXPECT_NE(doc.find(row), std::string::npos) << "missing row: " << row;
  }
}

}  // namespace
}  // namespace ncert
