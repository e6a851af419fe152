#include "certify/cli/generated.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "certify/campaign/entry_options.h"
#include "certify/campaign/run_campaign.h"
#include "certify/cli/cli_common.h"
#include "certify/cli/generated_errors.h"
#include "certify/cli/generated_json.h"
#include "certify/commands/option_tables.h"
#include "certify/demo/demo.h"
#include "certify/io/schema_rules.h"

namespace ncert::cli {

namespace {

/// A table cell: '|' would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

/// One command's flags as docs/cli.md shows them.
template <class O>
std::string flags_markdown(const certify::OptionTable<O>& table) {
  std::ostringstream os;
  os << "| flag | meaning | values | default |\n|---|---|---|---|\n";
  for (const certify::OptionSpec<O>& s : table) {
    const std::optional<std::string> d = s.shown_default(O{});
    os << "| `" << s.synopsis() << "` | " << cell(s.help) << " | " << s.range_text() << " | "
       << (d ? "`" + cell(*d) + "`" : std::string()) << " |\n";
  }
  return os.str();
}

std::string_view type_name(certify::OptionType t) {
  switch (t) {
    case certify::OptionType::kFlag:
      return "true / false";
    case certify::OptionType::kNumber:
      return "number";
    case certify::OptionType::kInteger:
      return "whole number";
    case certify::OptionType::kText:
      return "string";
    case certify::OptionType::kTextList:
      return "list of strings";
  }
  return "?";
}

/// A manifest key: which commands take it, its type, range, default and meaning (the first
/// command's help: a shared key means the same everywhere).
struct KeyRow {
  std::vector<std::string> commands;
  std::string type, range, fallback, help;
};

template <class O>
void collect_keys(std::string_view command, const certify::OptionTable<O>& table, std::map<std::string, KeyRow>* rows,
                  std::vector<std::string>* order) {
  for (const certify::OptionSpec<O>& s : table) {
    if (s.key.empty()) continue;
    auto [it, fresh] = rows->try_emplace(s.key);
    KeyRow& row = it->second;
    row.commands.emplace_back(command);
    if (!fresh) continue;
    order->push_back(s.key);
    row.type = std::string(type_name(s.type)) + (s.nullable ? " or null" : "");
    if (s.type == certify::OptionType::kTextList) row.type = "list of `\"" + s.value_name + "\"` strings";
    row.range = s.range_text();
    const std::optional<std::string> d = s.shown_default(O{});
    row.fallback = d ? "`" + *d + "`" : std::string();
    row.help = s.help;
  }
}

/// docs/campaigns.md: every manifest key of every entry kind.
std::string manifest_keys_markdown() {
  std::map<std::string, KeyRow> rows;
  std::vector<std::string> order;
  collect_keys("check", certify::check_option_table(), &rows, &order);
  collect_keys("compare", certify::compare_option_table(), &rows, &order);
  collect_keys("forks", certify::forks_option_table(), &rows, &order);
  collect_keys("witness", certify::witness_option_table(), &rows, &order);
  collect_keys("verify", certify::verify_option_table(), &rows, &order);
  std::ostringstream os;
  os << "| key | entries | type | values | default | meaning |\n|---|---|---|---|---|---|\n";
  for (const std::string& key : order) {
    const KeyRow& r = rows.at(key);
    std::string commands;
    for (const std::string& c : r.commands) commands += (commands.empty() ? "" : ", ") + ("`" + c + "`");
    os << "| `" << key << "` | " << commands << " | " << r.type << " | " << r.range << " | " << r.fallback << " | "
       << cell(r.help) << " |\n";
  }
  return os.str();
}

/// docs/campaigns.md: each entry kind, its inputs and the keys it takes.
std::string entry_kinds_markdown() {
  struct Kind {
    certify::EntryKind kind;
    const char* name;
    const char* input;
  };
  constexpr Kind kKinds[] = {{certify::EntryKind::kCheck, "check", "a dump"},
                             {certify::EntryKind::kCompare, "compare", "`[A, B]`"},
                             {certify::EntryKind::kForks, "forks", "`[A, B]`"},
                             {certify::EntryKind::kWitness, "witness", "a dump"},
                             {certify::EntryKind::kVerify, "verify", "`[witness file, dump]`"}};
  std::ostringstream os;
  os << "| command | input | options |\n|---|---|---|\n";
  for (const Kind& k : kKinds) {
    std::string keys;
    for (const std::string& key : certify::entry_option_keys(k.kind)) {
      keys += (keys.empty() ? "" : ", ") + ("`" + key + "`");
    }
    os << "| `" << k.name << "` | " << k.input << " | " << keys << " |\n";
  }
  return os.str();
}

template <class O>
GeneratedPart cli_flags(const char* section, const certify::OptionTable<O>& (*table)()) {
  return GeneratedPart{"docs/cli.md", section, [table] { return flags_markdown(table()); }};
}

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The marker lines of section `name` in a file of this kind.
std::pair<std::string, std::string> markers(const std::string& path, const std::string& name) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".md") {
    return {"<!-- BEGIN generated: " + name + " (ncert-docgen write) -->", "<!-- END generated: " + name + " -->"};
  }
  return {"# BEGIN generated: " + name + " (ncert-docgen write)", "# END generated: " + name};
}

}  // namespace

const std::vector<GeneratedPart>& generated_parts() {
  static const std::vector<GeneratedPart> parts = {
      GeneratedPart{"docs/cli.md", "common-options", [] { return flags_markdown(common_option_table()); }},
      cli_flags("check-options", &certify::check_option_table),
      cli_flags("compare-options", &certify::compare_option_table),
      cli_flags("witness-options", &certify::witness_option_table),
      cli_flags("forks-options", &certify::forks_option_table),
      cli_flags("sweep-options", &certify::sweep_option_table),
      cli_flags("inspect-options", &certify::inspect_option_table),
      cli_flags("demo-options", &certify::demo_option_table),
      cli_flags("campaign-options", &certify::campaign_option_table),
      GeneratedPart{"docs/campaigns.md", "entry-kinds", entry_kinds_markdown},
      GeneratedPart{"docs/campaigns.md", "entry-options", manifest_keys_markdown},
      GeneratedPart{"python/ncert_dump/schema_rules.json", "", certify::schema_rules_json},
      GeneratedPart{"docs/error-codes.md", "error-codes", error_codes_markdown},
      GeneratedPart{"docs/report.schema.json", "/$defs/error/oneOf", error_pairs_json},
      GeneratedPart{"python/ncert_dump/errors.py", "error-codes", error_codes_python},
  };
  return parts;
}

Result<std::string> replace_section(const std::string& text, const std::string& path, const std::string& name,
                                    const std::string& body) {
  const auto [begin_marker, end_marker] = markers(path, name);
  const std::size_t begin = text.find(begin_marker + "\n");
  const std::size_t end = text.find(end_marker + "\n");
  const bool once = begin != std::string::npos && end != std::string::npos &&
                    text.find(begin_marker, begin + 1) == std::string::npos &&
                    text.find(end_marker, end + 1) == std::string::npos;
  if (!once || end < begin) {
    return Status(ErrorCode::kInvalidArgument, path + ": the generated section \"" + name + "\" needs the lines '" +
                                                   begin_marker + "' and '" + end_marker +
                                                   "', once each and in that order");
  }
  const std::size_t body_start = begin + begin_marker.size() + 1;
  return text.substr(0, body_start) + body + text.substr(end);
}

namespace {

/// A section named by a JSON pointer ("/$defs/error/oneOf") is a value of a JSON file.
bool is_json_pointer(const std::string& section) { return !section.empty() && section[0] == '/'; }

Result<std::string> replace_json_part(const std::string& text, const std::string& path, const std::string& pointer,
                                      const std::string& json) {
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(json, nullptr, false);
  NCERT_ASSERT(!value.is_discarded(), "a JSON part rendered text that is not JSON");
  std::optional<std::string> replaced = replace_json_value(text, pointer, value);
  if (!replaced) {
    return Status(ErrorCode::kInvalidArgument,
                  path + ": the generated value \"" + pointer + "\" needs the file to be JSON with a value there");
  }
  return *std::move(replaced);
}

Result<std::string> apply_part(const std::string& text, const GeneratedPart& part) {
  if (is_json_pointer(part.section)) return replace_json_part(text, part.path, part.section, part.render());
  return replace_section(text, part.path, part.section, part.render());
}

}  // namespace

Result<std::string> regenerate(const std::string& root, const std::string& path) {
  bool ok = false;
  std::string text = read_file((std::filesystem::path(root) / path).string(), &ok);
  if (!ok) return Status(ErrorCode::kIo, (std::filesystem::path(root) / path).string() + ": cannot read");
  for (const GeneratedPart& part : generated_parts()) {
    if (part.path != path) continue;
    if (part.section.empty()) {
      text = part.render();
      continue;
    }
    NCERT_ASSIGN_OR_RETURN(text, apply_part(text, part));
  }
  return text;
}

namespace {

std::vector<std::string> generated_paths() {
  std::vector<std::string> paths;
  std::set<std::string> seen;
  for (const GeneratedPart& part : generated_parts()) {
    if (seen.insert(part.path).second) paths.push_back(part.path);
  }
  return paths;
}

}  // namespace

Result<std::vector<std::string>> stale_parts(const std::string& root) {
  std::vector<std::string> stale;
  for (const std::string& path : generated_paths()) {
    bool ok = false;
    const std::string committed = read_file((std::filesystem::path(root) / path).string(), &ok);
    NCERT_ASSIGN_OR_RETURN(const std::string wanted, regenerate(root, path));
    if (committed == wanted) continue;
    // Name the sections that differ, so the message says which table is stale.
    for (const GeneratedPart& part : generated_parts()) {
      if (part.path != path) continue;
      if (part.section.empty()) {
        stale.push_back(path);
        continue;
      }
      auto only_this = apply_part(committed, part);
      if (only_this.ok() && *only_this != committed) stale.push_back(path + "#" + part.section);
    }
  }
  return stale;
}

Result<std::vector<std::string>> write_parts(const std::string& root) {
  std::vector<std::string> written;
  for (const std::string& path : generated_paths()) {
    bool ok = false;
    const std::string full = (std::filesystem::path(root) / path).string();
    const std::string committed = read_file(full, &ok);
    NCERT_ASSIGN_OR_RETURN(const std::string wanted, regenerate(root, path));
    if (committed == wanted) continue;
    std::ofstream out(full, std::ios::binary | std::ios::trunc);
    out << wanted;
    if (!out) return Status(ErrorCode::kIo, full + ": cannot write");
    written.push_back(path);
  }
  return written;
}

}  // namespace ncert::cli
