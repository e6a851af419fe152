// The copies of the error-code table ncert-docgen writes (certify/cli/generated_errors.h) and the
// JSON parts they need (certify/cli/generated_json.h): a hand edit to any copy is reported stale
// and rewritten, the committed copies say what the C++ table says, and a JSON value is replaced
// without touching the rest of its file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "certify/cli/generated.h"
#include "certify/cli/generated_json.h"
#include "reference/status.h"
#include "tests/common/test_paths.h"

namespace ncert {
namespace {

using Json = nlohmann::ordered_json;

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

std::filesystem::path source(const std::string& path) { return std::filesystem::path(NCERT_SOURCE_DIR) / path; }

/// A copy of every generated file of the source tree in a scratch root, brought up to date, so
/// that a part stale in the tree itself (GeneratedDocs.TheSourceTreeIsUpToDate reports those)
/// cannot mask or add to the one a test plants.
std::filesystem::path fresh_generated_files() {
  const std::filesystem::path root = testing::scratch_dir();
  for (const cli::GeneratedPart& part : cli::generated_parts()) {
    const std::filesystem::path to = root / part.path;
    std::filesystem::create_directories(to.parent_path());
    std::filesystem::copy_file(source(part.path), to, std::filesystem::copy_options::overwrite_existing);
  }
  EXPECT_TRUE(cli::write_parts(root.string()).ok());
  return root;
}

// One planted hand edit per copy: the part is named stale (and nothing else is), write_parts
// restores the committed file, and the tree is clean again.
TEST(GeneratedErrors, AHandEditToEachCopyIsCaughtAndRewritten) {
  struct Case {
    std::string path, part, from, to;
  };
  const Case cases[] = {
      {"docs/error-codes.md", "docs/error-codes.md#error-codes", "| `guard-capacity` |", "| `guard-capacty` |"},
      {"docs/error-codes.md", "docs/error-codes.md#error-codes", "| 316 |", "| 319 |"},
      {"docs/report.schema.json", "docs/report.schema.json#/$defs/error/oneOf", "{\"const\": \"guard-capacity\"}",
       "{\"const\": \"guard-capacty\"}"},
      {"docs/report.schema.json", "docs/report.schema.json#/$defs/error/oneOf", "{\"const\": 316}", "{\"const\": 319}"},
      {"python/ncert_dump/errors.py", "python/ncert_dump/errors.py#error-codes", "\"guard-capacity\": 316,",
       "\"guard-capacty\": 316,"},
      {"python/ncert_dump/errors.py", "python/ncert_dump/errors.py#error-codes", "\"guard-capacity\": 316,\n", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + ": " + c.from);
    const std::filesystem::path root = fresh_generated_files();
    const std::string fresh = read(root / c.path);
    std::string text = fresh;
    const std::size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, c.from.size(), c.to);
    write(root / c.path, text);
    auto stale = cli::stale_parts(root.string());
    ASSERT_TRUE(stale.ok()) << stale.status().to_string();
    EXPECT_EQ(*stale, std::vector<std::string>{c.part});
    ASSERT_TRUE(cli::write_parts(root.string()).ok());
    EXPECT_EQ(read(root / c.path), fresh);
    EXPECT_TRUE(cli::stale_parts(root.string())->empty());
  }
}

// The schema's other text is the file's own: editing it is not a stale part, and a rewrite of the
// pairs keeps the edit.
TEST(GeneratedErrors, TheSchemaOutsideThePairsIsNotGenerated) {
  const std::filesystem::path root = fresh_generated_files();
  const std::filesystem::path schema = root / "docs/report.schema.json";
  std::string text = read(schema);
  const std::string title = "\"title\": \"ncert JSON report\"";
  ASSERT_NE(text.find(title), std::string::npos);
  text.replace(text.find(title), title.size(), "\"title\": \"ncert JSON report (edited)\"");
  text.replace(text.find("{\"const\": \"usage\"}"), 18, "{\"const\": \"usage!\"}");
  write(schema, text);
  auto stale = cli::stale_parts(root.string());
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(*stale, std::vector<std::string>{"docs/report.schema.json#/$defs/error/oneOf"});
  ASSERT_TRUE(cli::write_parts(root.string()).ok());
  const std::string rewritten = read(schema);
  EXPECT_NE(rewritten.find("(edited)"), std::string::npos);
  EXPECT_EQ(rewritten.find("usage!"), std::string::npos);
}

// The committed copies, read back on their own, hold exactly the C++ table: every code in
// order, with its name (and, in the schema, its exit code), and no other.
TEST(GeneratedErrors, TheCommittedCopiesAreTheCxxTable) {
  std::vector<std::pair<int, std::string>> table;
  for (ErrorCode c : all_error_codes()) table.emplace_back(static_cast<int>(c), std::string(error_name(c)));

  const std::string py = read(source("python/ncert_dump/errors.py"));
  const std::size_t begin = py.find("ERROR_CODES = {\n");
  ASSERT_NE(begin, std::string::npos);
  const std::string dict = py.substr(begin, py.find("}\n", begin) - begin);
  const std::regex entry(R"re(\n    "([a-z0-9-]+)": (\d+),)re");
  std::vector<std::pair<int, std::string>> python;
  for (auto it = std::sregex_iterator(dict.begin(), dict.end(), entry); it != std::sregex_iterator(); ++it) {
    python.emplace_back(std::stoi((*it)[2].str()), (*it)[1].str());
  }
  EXPECT_EQ(python, table);

  const Json schema = Json::parse(read(source("docs/report.schema.json")));
  std::vector<std::pair<int, std::string>> pairs;
  for (const Json& p : schema["$defs"]["error"]["oneOf"]) {
    const int code = p["properties"]["code"]["const"].get<int>();
    pairs.emplace_back(code, p["properties"]["name"]["const"].get<std::string>());
    const std::string description = p["description"].get<std::string>();
    EXPECT_EQ(description.rfind(std::string(error_description(static_cast<ErrorCode>(code))), 0), 0u) << description;
    EXPECT_NE(description.find("(exit "), std::string::npos) << description;
  }
  EXPECT_EQ(pairs, table);
}

TEST(JsonPart, FindsTheValueAtAPointer) {
  const std::string text = R"({"a": {"b/c": [1, {"d~e": "x}]"}], "f": true}, "g": 2})";
  auto span_text = [&](const char* pointer) {
    const auto span = cli::find_json_value(text, pointer);
    return span ? text.substr(span->begin, span->end - span->begin) : std::string("<none>");
  };
  EXPECT_EQ(span_text(""), text);
  EXPECT_EQ(span_text("/g"), "2");
  EXPECT_EQ(span_text("/a/f"), "true");
  EXPECT_EQ(span_text("/a/b~1c/0"), "1");
  EXPECT_EQ(span_text("/a/b~1c/1"), R"({"d~e": "x}]"})");
  EXPECT_EQ(span_text("/a/b~1c/1/d~0e"), R"("x}]")");
  EXPECT_EQ(span_text("/a/b~1c/2"), "<none>");
  EXPECT_EQ(span_text("/a/b~1c/x"), "<none>");
  EXPECT_EQ(span_text("/a/bc"), "<none>");
  EXPECT_EQ(span_text("/g/0"), "<none>");
  EXPECT_EQ(span_text("g"), "<none>");
  EXPECT_FALSE(cli::find_json_value(R"({"g": 2)", "/g"));  // not JSON
}

TEST(JsonPart, LaysOutLikeTheSchema) {
  const Json small = Json::parse(R"({"code": {"const": 100}, "name": {"const": "usage"}})");
  EXPECT_EQ(cli::format_json(small, 0, 0), R"({"code": {"const": 100}, "name": {"const": "usage"}})");
  // Too long for one line from column 70 of a 120-column file: one member per line.
  EXPECT_EQ(cli::format_json(small, 4, 70),
            "{\n      \"code\": {\"const\": 100},\n      \"name\": {\"const\": \"usage\"}\n    }");
  EXPECT_EQ(cli::format_json(Json::array(), 0, 200), "[]");
  EXPECT_EQ(cli::format_json(Json::parse(R"(["a\"b"])"), 0, 0), R"(["a\"b"])");
}

TEST(JsonPart, ReplacesOnlyTheValue) {
  const std::string text = "{\n  \"keep\":   [1,2],\n  \"x\": {\"y\": 1}\n}\n";
  const auto out = cli::replace_json_value(text, "/x/y", Json::parse(R"([3, 4])"));
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "{\n  \"keep\":   [1,2],\n  \"x\": {\"y\": [3, 4]}\n}\n");
  EXPECT_FALSE(cli::replace_json_value(text, "/missing", Json(1)));
}

}  // namespace
}  // namespace ncert
