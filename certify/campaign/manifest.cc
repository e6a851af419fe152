#include "certify/campaign/manifest.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "certify/campaign/entry_options.h"
#include "certify/io/hash.h"
#include "certify/io/input_file.h"
#include "certify/report/json_keys.h"

namespace ncert::certify {

namespace {

using Json = nlohmann::ordered_json;

/// An entry kind: its command's name and how many inputs it takes. The options each kind
/// accepts are its command's option table's manifest keys (entry_option_keys).
struct KindInfo {
  EntryKind kind;
  std::string_view name;
  int inputs;
};

constexpr KindInfo kKinds[] = {
    {EntryKind::kCheck, "check", 1},     {EntryKind::kCompare, "compare", 2}, {EntryKind::kForks, "forks", 2},
    {EntryKind::kWitness, "witness", 1}, {EntryKind::kVerify, "verify", 2},
};

Status usage(const std::string& path, const std::string& what) { return Status(ErrorCode::kUsage, path + ": " + what); }

bool accepts(const KindInfo& k, const std::string& key) {
  const std::vector<std::string> keys = entry_option_keys(k.kind);
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

/// The refusal of a repeated key, naming the entry by its id where it is in one.
Status duplicate_key_error(const std::string& path, const Json& j, const DuplicateKey& d) {
  std::string where = "the top level";
  const bool in_entry = d.where.size() >= 2 && d.where[0] == "entries" && !d.where[1].empty() &&
                        d.where[1].find_first_not_of("0123456789") == std::string::npos && d.where[1].size() < 10;
  if (in_entry) {
    const std::size_t i = std::stoul(d.where[1]);
    where = "entries[" + d.where[1] + "]";
    const Json& entries = j.value("entries", Json::array());
    if (entries.is_array() && i < entries.size() && entries[i].is_object() && entries[i].contains("id") &&
        entries[i]["id"].is_string()) {
      where = "entry " + entries[i]["id"].get<std::string>();
    }
    for (std::size_t k = 2; k < d.where.size(); ++k) where += " \"" + d.where[k] + "\"";
  } else if (!d.where.empty()) {
    where.clear();
    for (const std::string& w : d.where) where += (where.empty() ? "\"" : " \"") + w + "\"";
  }
  return usage(
      path, where + ": the key \"" + d.key + "\" is given twice (JSON keeps only the last value: give each key once)");
}

/// The manifest's bytes and their JSON.
Status read_manifest(const std::string& path, std::string* text, Json* j) {
  // A regular file only, opened without blocking: a FIFO named as the manifest is refused.
  auto in = InputFile::open(path);
  if (!in.ok()) {
    if (in.status().code() != ErrorCode::kFileNotFound) return in.status();
    return Status(ErrorCode::kFileNotFound, path + ": cannot read the manifest");
  }
  // 256 MiB holds a manifest of a million entries; a larger file is not one (a review's 4 GB
  // sparse manifest was read whole, 4.2 GB of memory).
  constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{256} << 20;
  if (in->size() > kMaxManifestBytes) {
    return usage(path, std::to_string(in->size()) + " bytes; a manifest is at most " +
                           std::to_string(kMaxManifestBytes >> 20) + " MiB");
  }
  NCERT_ASSIGN_OR_RETURN(*text, in->read_all());
  std::optional<DuplicateKey> duplicate;
  try {
    *j = parse_watching_keys(*text, &duplicate);
  } catch (const Json::exception& e) {
    return usage(path, std::string("not JSON: ") + e.what());
  }
  if (duplicate) return duplicate_key_error(path, *j, *duplicate);
  return Status();
}

/// Whether a string anywhere in `j` holds a NUL character ("\u0000" is valid JSON). No path,
/// id or option holds one: the C library would read a path only up to it, and certify
/// "good.h5" for "good.h5\u0000.bak".
bool holds_nul(const Json& j) {
  if (j.is_string()) return j.get_ref<const std::string&>().find('\0') != std::string::npos;
  for (auto it = j.begin(); j.is_structured() && it != j.end(); ++it) {
    if (j.is_object() && it.key().find('\0') != std::string::npos) return true;
    if (holds_nul(it.value())) return true;
  }
  return false;
}

Status nul_error(const std::string& path, const std::string& where, const std::string& key) {
  return usage(path, where + ": \"" + key + "\" holds a NUL character (\\u0000), which no path or option may contain");
}

/// The top level: known keys only, the format version, defaults that some command takes.
Status check_top_level(const std::string& path, const Json& j) {
  if (!j.is_object()) return usage(path, "expected a JSON object");
  static const std::set<std::string> kTop = {"ncert_campaign", "name", "defaults", "entries", "weights", "skip_policy"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kTop.count(it.key())) return usage(path, "unknown key \"" + it.key() + "\"");
    // The entries are checked one by one, naming the entry.
    if (it.key() != "entries" && holds_nul(it.value())) return nul_error(path, "the top level", it.key());
  }
  if (!j.contains("ncert_campaign") || j["ncert_campaign"] != 1) {
    return usage(path, "expected \"ncert_campaign\": 1 (the manifest format version)");
  }
  const Json defaults = j.value("defaults", Json::object());
  if (!defaults.is_object()) return usage(path, "\"defaults\" must be an object");
  for (auto it = defaults.begin(); it != defaults.end(); ++it) {
    const bool known =
        std::any_of(std::begin(kKinds), std::end(kKinds), [&](const KindInfo& k) { return accepts(k, it.key()); });
    if (!known) return usage(path, "defaults: unknown option \"" + it.key() + "\"");
  }
  if (!j.contains("entries") || !j["entries"].is_array() || j["entries"].empty()) {
    return usage(path, "\"entries\" must be a non-empty list");
  }
  // The campaign's name titles its reports (a number there was an internal error, exit 4).
  if (j.contains("name") && (!j["name"].is_string() || j["name"].get<std::string>().empty())) {
    return usage(path, "\"name\" must be a non-empty string, not " + j["name"].dump());
  }
  if (j.contains("weights") && (!j["weights"].is_string() || j["weights"].get<std::string>().empty())) {
    return usage(path, "\"weights\" must be the path of a weights dump");
  }
  if (j.contains("skip_policy") && (!j["skip_policy"].is_string() || j["skip_policy"].get<std::string>().empty())) {
    return usage(path, "\"skip_policy\" must be the path of a skip policy file");
  }
  return Status();
}

/// Reads entries: relative paths resolve against the manifest's folder.
struct EntryReader {
  const std::string& path;
  std::filesystem::path base;
  Json defaults;
  std::string weights;  ///< the campaign's weights dump: check entries without their own take it
  std::set<std::string> ids;
  std::string skip_policy;  ///< the campaign's skip policy: entries that take one and name none take it

  std::string resolve(const std::string& p) const {
    return std::filesystem::path(p).is_absolute() || base.empty() ? p : (base / p).string();
  }

  /// The one command entry `e` names.
  Result<const KindInfo*> kind_of(const Json& e, const std::string& where) const {
    const KindInfo* kind = nullptr;
    for (const KindInfo& k : kKinds) {
      if (!e.contains(std::string(k.name))) continue;
      if (kind) {
        return usage(path,
                     where + " names two commands (" + std::string(kind->name) + ", " + std::string(k.name) + ")");
      }
      kind = &k;
    }
    if (kind) return kind;
    std::string keys;
    for (const auto& [k, v] : e.items()) {
      if (k != "id") keys += (keys.empty() ? "" : ", ") + ("\"" + k + "\"");
    }
    return usage(path, where + " names no command (check, compare, forks, witness or verify)" +
                           (keys.empty() ? std::string() : "; its keys: " + keys));
  }

  Status read_inputs(const KindInfo& kind, const Json& given, const std::string& where, CampaignEntry* entry) const {
    if (kind.inputs == 1 && given.is_string()) {
      entry->inputs.push_back(resolve(given.get<std::string>()));
    } else if (kind.inputs == 2 && given.is_array() && given.size() == 2 && given[0].is_string() &&
               given[1].is_string()) {
      entry->inputs = {resolve(given[0].get<std::string>()), resolve(given[1].get<std::string>())};
    } else {
      return usage(path, where + ": \"" + std::string(kind.name) + "\" takes " +
                             (kind.inputs == 1 ? "a path" : "a list of two paths"));
    }
    // An empty path names no file (it read "file-not-found (103): : no such file" at run time).
    const bool empty = kind.inputs == 1 ? given.get<std::string>().empty()
                                        : given[0].get<std::string>().empty() || given[1].get<std::string>().empty();
    if (empty) return usage(path, where + ": \"" + std::string(kind.name) + "\": an empty path names no file");
    return Status();
  }

  Status read_id(const KindInfo& kind, const Json& e, std::size_t i, const std::string& where, CampaignEntry* entry) {
    if (e.contains("id") && !e["id"].is_string()) return usage(path, where + ": \"id\" must be a string");
    entry->id = e.value("id", std::string(kind.name) + "-" + std::to_string(i));
    if (entry->id.empty() || !ids.insert(entry->id).second) {
      return usage(path, where + ": id \"" + entry->id + "\" is empty or used twice");
    }
    // '#' separates an entry id from its work items ("<id>#unit:<projection>"); batches are
    // "#batch:...", which no id can then start.
    if (entry->id.find('#') != std::string::npos) {
      return usage(path, where + ": id \"" + entry->id + "\" may not contain '#'");
    }
    return Status();
  }

  /// The defaults this kind takes, then the entry's own options; paths among them resolved.
  Status read_options(const KindInfo& kind, const Json& e, CampaignEntry* entry) const {
    for (auto it = defaults.begin(); it != defaults.end(); ++it) {
      if (accepts(kind, it.key())) entry->options[it.key()] = it.value();
    }
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() == "id" || it.key() == kind.name) continue;
      if (!accepts(kind, it.key())) {
        return usage(path,
                     "entry " + entry->id + ": \"" + it.key() + "\" is not an option of " + std::string(kind.name));
      }
      entry->options[it.key()] = it.value();
    }
    Json& options = entry->options;
    if (entry->kind == EntryKind::kCheck) {
      if (options.contains("weights") && options["weights"].is_string()) {
        options["weights"] = resolve(options["weights"].get<std::string>());
      } else if (!options.contains("weights") && !weights.empty()) {
        options["weights"] = weights;
      }
    }
    if (entry->kind == EntryKind::kForks && options.contains("vocab") && options["vocab"].is_string()) {
      options["vocab"] = resolve(options["vocab"].get<std::string>());
    }
    // The campaign's skip policy reaches every entry that takes one and names none of its own.
    if (accepts(kind, "skip_policy")) {
      if (options.contains("skip_policy") && options["skip_policy"].is_string()) {
        options["skip_policy"] = resolve(options["skip_policy"].get<std::string>());
      } else if (!options.contains("skip_policy") && !skip_policy.empty()) {
        options["skip_policy"] = skip_policy;
      }
    }
    return Status();
  }

  Result<CampaignEntry> read(const Json& e, std::size_t i) {
    const std::string where = "entries[" + std::to_string(i) + "]";
    if (!e.is_object()) return usage(path, where + " must be an object");
    NCERT_ASSIGN_OR_RETURN(const KindInfo* kind, kind_of(e, where));
    CampaignEntry entry;
    entry.kind = kind->kind;
    NCERT_RETURN_IF_ERROR(read_inputs(*kind, e[std::string(kind->name)], where, &entry));
    if (e.contains("id") && holds_nul(e["id"])) return nul_error(path, where, "id");
    NCERT_RETURN_IF_ERROR(read_id(*kind, e, i, where, &entry));
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key().find('\0') != std::string::npos) {
        return usage(path, "entry " + entry.id + ": a key holds a NUL character (\\u0000): \"" + it.key() + "\"");
      }
      if (holds_nul(it.value())) return nul_error(path, "entry " + entry.id, it.key());
    }
    NCERT_RETURN_IF_ERROR(read_options(*kind, e, &entry));
    return entry;
  }
};

}  // namespace

std::string_view entry_kind_name(EntryKind k) {
  for (const KindInfo& i : kKinds) {
    if (i.kind == k) return i.name;
  }
  return "?";
}

std::vector<NamedPath> named_entry_files(const CampaignEntry& entry) {
  std::vector<NamedPath> files;
  for (const std::string& in : entry.inputs) files.push_back({"entry " + entry.id, in});
  // The skip policy is read too: a report written over it would lose it (a review's).
  for (const char* key : {"weights", "vocab", "skip_policy"}) {
    if (entry.options.contains(key) && entry.options[key].is_string()) {
      files.push_back({"entry " + entry.id + " " + key, entry.options[key].get<std::string>()});
    }
  }
  return files;
}

Result<Manifest> load_manifest(const std::string& path) {
  std::string text;
  Json j;
  NCERT_RETURN_IF_ERROR(read_manifest(path, &text, &j));
  NCERT_RETURN_IF_ERROR(check_top_level(path, j));
  Manifest m;
  m.path = path;
  m.xxh3_128 = xxh3_128_hex(text.data(), text.size());
  m.name = j.value("name", std::filesystem::path(path).stem().string());
  EntryReader reader{path, std::filesystem::path(path).parent_path(), j.value("defaults", Json::object()), {}, {}, {}};
  if (j.contains("weights")) reader.weights = reader.resolve(j["weights"].get<std::string>());
  if (j.contains("skip_policy")) reader.skip_policy = reader.resolve(j["skip_policy"].get<std::string>());
  for (std::size_t i = 0; i < j["entries"].size(); ++i) {
    NCERT_ASSIGN_OR_RETURN(CampaignEntry entry, reader.read(j["entries"][i], i));
    m.entries.push_back(std::move(entry));
  }
  return m;
}

}  // namespace ncert::certify
