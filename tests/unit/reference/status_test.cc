#include "reference/status.h"

#include "reference/detail/error_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

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

std::string read_source(const std::string& path) {
  std::ifstream in(std::string(NCERT_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(in.good()) << path << " missing";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The table's rows as status.cc expands them.
constexpr detail::ErrorCodeRow kRows[] = {
#define NCERT_ERROR_CODE(enumerator, number, name, exit, description) {#enumerator, number, name, exit, description},
#include "reference/error_codes.h"
#undef NCERT_ERROR_CODE
};

TEST(ErrorTable, TheRealTableFollowsEveryRule) {
  const detail::ErrorTableProblem p = detail::error_table_problem(kRows);
  EXPECT_TRUE(p.what.empty()) << kRows[p.row].enumerator << ": " << p.what;
}

// Each rule, shown catching a planted row; the same table without the planted row passes.
TEST(ErrorTable, EachRuleCatchesAPlantedRow) {
  using Row = detail::ErrorCodeRow;
  const Row ok{"kOk", 0, "ok", 0, "no error"};
  const Row usage{"kUsage", 100, "usage", 2, "bad command-line flags or arguments"};
  const Row io{"kIo", 200, "io", 3, "the operating system failed a read, write, map or stat"};
  {
    const std::vector<Row> good = {ok, usage, io};
    EXPECT_EQ(detail::error_table_problem(good).what, "");
  }
  struct Case {
    const char* what;
    std::vector<Row> rows;
    std::size_t row;
  };
  const Case cases[] = {
      {"the table is empty", {}, 0},
      {"the first row is not kOk, 0, \"ok\", exit 0", {usage, io}, 0},
      {"the number is not above the previous row's", {ok, usage, {"kIo", 100, "io", 3, "x"}}, 2},
      {"the number is not above the previous row's", {ok, io, usage}, 2},
      {"the number is outside 100..999", {ok, {"kUsage", 99, "usage", 2, "x"}}, 1},
      {"the name is empty", {ok, usage, {"kIo", 200, "", 3, "x"}}, 2},
      {"the name is not its enumerator in kebab case", {ok, {"kUsage", 100, "usage-error", 2, "x"}}, 1},
      {"the name is not its enumerator in kebab case", {ok, {"kNotHdf5", 201, "nothdf5", 3, "x"}}, 1},
      {"the name is an earlier row's", {ok, usage, {"kUsage", 101, "usage", 2, "x"}}, 2},
      {"the exit code is not one docs/cli.md lists", {ok, {"kUsage", 100, "usage", 1, "x"}}, 1},
      {"the description is empty", {ok, {"kUsage", 100, "usage", 2, ""}}, 1},
      {"the description has a '|' or a line break", {ok, {"kUsage", 100, "usage", 2, "a | b"}}, 1},
  };
  for (const Case& c : cases) {
    const detail::ErrorTableProblem p = detail::error_table_problem(c.rows);
    EXPECT_EQ(p.what, c.what);
    EXPECT_EQ(p.row, c.row) << c.what;
  }
  EXPECT_TRUE(detail::is_kebab_name_of("kGuardAf4Geometry", "guard-af4-geometry"));
  EXPECT_TRUE(detail::is_kebab_name_of("kKWalkInvalid", "k-walk-invalid"));
  EXPECT_FALSE(detail::is_kebab_name_of("kKWalkInvalid", "kwalk-invalid"));
  EXPECT_FALSE(detail::is_kebab_name_of("Usage", "usage"));
}

// Counts and reads the rows of reference/error_codes.h as text, independently of the macro
// expansion, and holds the API to each: one code per row, no more, no fewer.
TEST(Status, EveryRowOfTheTableFileIsACode) {
  const std::string text = read_source("reference/error_codes.h");
  const std::regex row_re(R"re(\nNCERT_ERROR_CODE\((k\w+), (\d+), "([a-z0-9-]+)", (\d+),)re");
  std::size_t rows = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row_re); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const auto code = static_cast<ErrorCode>(std::stoi(m[2].str()));
    EXPECT_EQ(error_name(code), m[3].str()) << m[1].str();
    EXPECT_EQ(exit_code_for(code), std::stoi(m[4].str())) << m[1].str();
    if (code != ErrorCode::kOk) {
      EXPECT_EQ(all_error_codes().at(rows - 1), code) << m[1].str() << " is not in numeric order";
    }
    ++rows;
  }
  EXPECT_EQ(text.find("\nNCERT_ERROR_CODE("), text.find("\nNCERT_ERROR_CODE(kOk, 0,"));
  EXPECT_EQ(rows, all_error_codes().size() + 1);  // + kOk
}

// docs/cli.md's contract, stated here by band rather than read from the table.
TEST(Status, ExitCodesFollowTheCliContract) {
  EXPECT_EQ(exit_code_for(ErrorCode::kOk), 0);
  for (ErrorCode c : all_error_codes()) {
    const int n = static_cast<int>(c);
    int expected = 3;
    if (c == ErrorCode::kInterrupted) {
      expected = 130;
    } else if (c == ErrorCode::kReportWrite) {
      expected = 5;
    } else if (n < 200) {
      expected = c == ErrorCode::kFileNotFound || c == ErrorCode::kNotRegularFile ? 3 : 2;
    } else if (n >= 900) {
      expected = 4;
    }
    EXPECT_EQ(exit_code_for(c), expected) << error_name(c);
  }
  EXPECT_EQ(exit_code_for(ErrorCode::kUsage), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kFileNotFound), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kNotRegularFile), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kPathConflict), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kExternalLink), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kSchemaVersion), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kAccumulatorUnknown), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kInternal), 4);
  EXPECT_EQ(exit_code_for(static_cast<ErrorCode>(299)), 4);  // not a code: a bug
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
  EXPECT_EQ(Status(ErrorCode::kGuardDuplicateRow, "row 3").named_message(), "guard-duplicate-row: row 3");
  EXPECT_EQ(Status().named_message(), "ok");
}

// docs/error-codes.md lists every code by number and name (ncert-docgen writes its table; this
// reads the committed file, so a table edited out of step fails here as well).
TEST(Status, ErrorCodesDocIsComplete) {
  const std::string doc = read_source("docs/error-codes.md");
  for (ErrorCode c : all_error_codes()) {
    const std::string row = "| " + std::to_string(static_cast<int>(c)) + " | `" + std::string(error_name(c)) + "` |";
    EXPECT_NE(doc.find(row), std::string::npos) << "missing row: " << row;
  }
}

}  // namespace
}  // namespace ncert
