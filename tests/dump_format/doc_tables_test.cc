// docs/dump-format.md and the schema checker's member rules (certify/io/schema_rules.h) are one
// table: every "Members of `<container>`" table of the page must list exactly the code's rules
// for that container, in the same order, with the same kind, presence, dtype, shape and "if
// absent" cells. Either side drifting fails here, naming the row and the cell. A second test
// keeps the page's section numbers honest: every "dump-format.md §N" cited in the repository
// must be a section of the page.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/schema_rules.h"

namespace ncert::certify {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string doc_text() { return read_file(std::filesystem::path(NCERT_SOURCE_DIR) / "docs" / "dump-format.md"); }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

/// The cells of a markdown table row; a '|' inside backticks belongs to its cell.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool code = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == '`') code = !code;
    if (ch == '|' && !code) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(trim(cur));
  // "| a | b |" splits into "", "a", "b", "": drop the outer empties.
  if (!out.empty() && out.front().empty()) out.erase(out.begin());
  if (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

const std::vector<std::string> kHeader = {"member", "kind", "presence", "dtype", "shape", "if absent", "meaning"};

struct DocTable {
  std::string container;  ///< as the heading names it: "/projections/<name>"
  int line = 0;           ///< of the heading
  std::vector<std::vector<std::string>> rows;
};

// Plain string scanning rather than std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized
// inside libstdc++ under the sanitize preset's -O2 -Werror, and these three shapes are simple.

/// "## ... Members of `/projections/<name>`" -> "/projections/<name>".
std::optional<std::string> members_heading(const std::string& line) {
  if (line.empty() || line[0] != '#') return std::nullopt;
  const std::size_t hashes = line.find_first_not_of('#');
  if (hashes == std::string::npos || line[hashes] != ' ') return std::nullopt;
  const std::string marker = "Members of `";
  const std::size_t at = line.find(marker, hashes);
  if (at == std::string::npos) return std::nullopt;
  const std::size_t open = at + marker.size();
  const std::size_t close = line.find('`', open);
  if (close == std::string::npos || close == open) return std::nullopt;
  if (line.find_first_not_of(" \t", close + 1) != std::string::npos) return std::nullopt;
  return line.substr(open, close - open);
}

/// "## 4. Weight segments" -> {4, "Weight segments"}.
std::optional<std::pair<int, std::string>> numbered_section(const std::string& line) {
  if (line.rfind("## ", 0) != 0) return std::nullopt;
  std::size_t i = 3;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i == 3 || line.compare(i, 2, ". ") != 0) return std::nullopt;
  return std::pair{std::stoi(line.substr(3, i - 3)), line.substr(i + 2)};
}

/// Every N in "dump-format.md §N" in a text.
std::vector<int> cited_sections(const std::string& text) {
  const std::string marker = "dump-format.md §";
  std::vector<int> out;
  for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
    std::size_t i = at + marker.size();
    const std::size_t digits = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i > digits) out.push_back(std::stoi(text.substr(digits, i - digits)));
  }
  return out;
}

/// Every table that follows a "Members of `<container>`" heading.
std::vector<DocTable> member_tables(const std::string& text) {
  std::vector<DocTable> tables;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  enum { kOutside, kAwaitTable, kInHeader, kInRows } state = kOutside;
  while (std::getline(in, line)) {
    ++number;
    if (const auto container = members_heading(line)) {
      tables.push_back({*container, number, {}});
      state = kAwaitTable;
      continue;
    }
    if (state == kAwaitTable && line.rfind("|", 0) == 0) {
      EXPECT_EQ(cells(line), kHeader) << "line " << number << ": the member table's header";
      state = kInHeader;
    } else if (state == kInHeader) {
      state = kInRows;  // the |---| separator
    } else if (state == kInRows) {
      if (line.rfind("|", 0) != 0) {
        state = kOutside;
        continue;
      }
      tables.back().rows.push_back(cells(line));
    }
  }
  return tables;
}

TEST(DumpFormatDoc, MemberTablesEqualTheCheckersRules) {
  const std::vector<DocTable> tables = member_tables(doc_text());
  std::map<std::string, const DocTable*> by_container;
  for (const DocTable& t : tables) {
    EXPECT_TRUE(by_container.emplace(t.container, &t).second) << "two member tables for " << t.container;
  }
  std::set<std::string> known;
  for (Container c : kAllContainers) {
    const std::string path(container_path(c));
    known.insert(path);
    const auto it = by_container.find(path);
    if (it == by_container.end()) {
      ADD_FAILURE() << "docs/dump-format.md has no \"Members of `" << path << "`\" table";
      continue;
    }
    const DocTable& t = *it->second;
    std::vector<const MemberRule*> rules;
    for (const MemberRule& r : member_rules()) {
      if (r.container == c) rules.push_back(&r);
    }
    const std::size_t n = std::max(rules.size(), t.rows.size());
    for (std::size_t i = 0; i < n; ++i) {
      const std::string where =
          path + " row " + std::to_string(i + 1) + " (table at line " + std::to_string(t.line) + ")";
      if (i >= rules.size()) {
        ADD_FAILURE() << where << ": the page lists " << t.rows[i].front() << ", which the code has no rule for";
        continue;
      }
      const RuleRow want = rule_row(*rules[i]);
      if (i >= t.rows.size()) {
        ADD_FAILURE() << where << ": the code has a rule for " << want.member << ", which the page does not list";
        continue;
      }
      const std::vector<std::string>& got = t.rows[i];
      ASSERT_EQ(got.size(), kHeader.size()) << where << ": " << got.size() << " cells";
      EXPECT_EQ(got[0], want.member) << where << ": member";
      EXPECT_EQ(got[1], want.kind) << where << " " << want.member << ": kind";
      EXPECT_EQ(got[2], want.presence) << where << " " << want.member << ": presence";
      EXPECT_EQ(got[3], want.dtype) << where << " " << want.member << ": dtype";
      EXPECT_EQ(got[4], want.shape) << where << " " << want.member << ": shape";
      EXPECT_EQ(got[5], want.absent) << where << " " << want.member << ": if absent";
      EXPECT_FALSE(got[6].empty()) << where << " " << want.member << ": meaning";
    }
  }
  for (const DocTable& t : tables) {
    EXPECT_TRUE(known.count(t.container))
        << "line " << t.line << ": a member table for " << t.container << ", which is no container of the code";
  }
}

// The rendering the page is compared with must itself say what the checker does: spot checks
// of rows whose cells are derived (codes, defaults, conditions) against the checker's inputs.
TEST(DumpFormatDoc, RuleRowsRenderTheCheckersInputs) {
  const RuleRow x = rule_row(member_rule(Container::kProjection, MemberKind::kDataset, "x"));
  EXPECT_EQ(x.shape, "[M, in_stride]");
  EXPECT_EQ(x.absent, "refused 223 (missing-member)");
  const RuleRow bias = rule_row(member_rule(Container::kProjection, MemberKind::kDataset, "bias"));
  EXPECT_EQ(bias.presence, "required if `epilogue` has a bias");
  EXPECT_EQ(bias.shape, "[N]");
  const RuleRow schema = rule_row(member_rule(Container::kRoot, MemberKind::kAttribute, "ncert_schema"));
  EXPECT_EQ(schema.absent, "refused 227 (schema-unknown)");
  const RuleRow packed = rule_row(member_rule(Container::kProjection, MemberKind::kDataset, "y_packed"));
  EXPECT_EQ(packed.absent, "SKIP `identity`, `untouched`");
  const MemberRule& tokens = member_rule(Container::kLogitsRun, MemberKind::kDataset, "tokens");
  EXPECT_EQ(allowed_dtypes(tokens, TypeContext{}), std::vector<DType>{DType::kI32});
  ShapeSymbols s;
  s.t = 5;
  EXPECT_EQ(expected_shape(tokens, s), std::vector<Index>{5});
  // The AF4 column counts are the geometry guard's (309), not the open-time schema's.
  const MemberRule& codes = member_rule(Container::kSegment, MemberKind::kDataset, "codes");
  s.rows = 4;
  s.k = 64;
  EXPECT_EQ(expected_shape(codes, s), (std::vector<Index>{4, -1}));
  RuleContext affine;
  affine.format = reference::WeightFormat::kAf4;
  EXPECT_TRUE(rule_applies(member_rule(Container::kSegment, MemberKind::kDataset, "biases").when, affine));
  EXPECT_FALSE(rule_applies(member_rule(Container::kSegment, MemberKind::kDataset, "codebook").when, affine));
  EXPECT_FALSE(rule_applies(member_rule(Container::kSegment, MemberKind::kDataset, "values").when, affine));
}

TEST(DumpFormatDoc, EverySectionTheRepositoryCitesExists) {
  std::map<int, std::string> sections;  // number -> title
  {
    std::istringstream in(doc_text());
    std::string line;
    while (std::getline(in, line)) {
      if (const auto section = numbered_section(line)) sections[section->first] = section->second;
    }
  }
  // Code comments cite these numbers for these topics ("docs/dump-format.md §4" next to the AF4
  // codecs, §8 next to output_rounding and dequant_op): a renumbered page must fail here.
  const std::map<int, std::string> topics = {{1, "Conventions"},      {2, "root"},        {3, "Projections"},
                                             {4, "Weight segments"},  {5, "Logits runs"}, {6, "State tensors"},
                                             {7, "Refused on sight"}, {8, "Semantics"}};
  for (const auto& [n, word] : topics) {
    EXPECT_NE(sections[n].find(word), std::string::npos)
        << "§" << n << " is \"" << sections[n] << "\", not about " << word;
  }
  const std::filesystem::path root(NCERT_SOURCE_DIR);
  int citations = 0;
  for (const char* dir : {"certify", "reference", "packing", "fixtures", "python", "tests", "docs", "tools"}) {
    if (!std::filesystem::exists(root / dir)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cc" && ext != ".py" && ext != ".md") continue;
      const std::string text = read_file(e.path());
      for (const int n : cited_sections(text)) {
        ++citations;
        EXPECT_TRUE(sections.count(n)) << e.path().lexically_relative(root).string() << " cites dump-format.md §" << n
                                       << ", which the page does not have";
      }
    }
  }
  EXPECT_GT(citations, 10);  // the code cites the page's sections (§1-§8) in about 20 places
}

}  // namespace
}  // namespace ncert::certify
