#include "certify/campaign/manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "certify/io/hash.h"

namespace ncert::certify {

namespace {

using Json = nlohmann::ordered_json;

struct KindInfo {
  EntryKind kind;
  std::string_view name;
  int inputs;
  std::vector<std::string_view> options;  ///< the keys an entry of this kind may set
};

const std::vector<KindInfo>& kinds() {
  static const std::vector<KindInfo> k = {
      {EntryKind::kCheck,
       "check",
       1,
       {"strict", "allow_vacuous", "lambda", "logit_error", "only", "require", "weights"}},
      {EntryKind::kCompare, "compare", 2, {"policy", "tensor_policy", "matched_history", "allow_missing", "pairs"}},
      {EntryKind::kForks,
       "forks",
       2,
       {"pairs", "matched_history", "logit_error", "lambda", "require_identical", "require", "vocab", "context"}},
      {EntryKind::kWitness, "witness", 1, {"logit_error", "lambda", "only", "require"}},
      {EntryKind::kVerify, "verify", 2, {"lambda"}},
  };
  return k;
}

Status usage(const std::string& path, const std::string& what) { return Status(ErrorCode::kUsage, path + ": " + what); }

bool accepts(const KindInfo& k, const std::string& key) {
  return std::find(k.options.begin(), k.options.end(), key) != k.options.end();
}

}  // namespace

std::string_view entry_kind_name(EntryKind k) {
  for (const KindInfo& i : kinds()) {
    if (i.kind == k) return i.name;
  }
  return "?";
}

Result<Manifest> load_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::kFileNotFound, path + ": cannot read the manifest");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    return usage(path, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) return usage(path, "expected a JSON object");
  static const std::set<std::string> kTop = {"ncert_campaign", "name", "defaults", "entries", "weights"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kTop.count(it.key())) return usage(path, "unknown key \"" + it.key() + "\"");
  }
  if (!j.contains("ncert_campaign") || j["ncert_campaign"] != 1) {
    return usage(path, "expected \"ncert_campaign\": 1 (the manifest format version)");
  }
  Manifest m;
  m.path = path;
  m.xxh3_128 = xxh3_128_hex(text.data(), text.size());
  m.name = j.value("name", std::filesystem::path(path).stem().string());
  const Json defaults = j.value("defaults", Json::object());
  if (!defaults.is_object()) return usage(path, "\"defaults\" must be an object");
  for (auto it = defaults.begin(); it != defaults.end(); ++it) {
    const bool known =
        std::any_of(kinds().begin(), kinds().end(), [&](const KindInfo& k) { return accepts(k, it.key()); });
    if (!known) return usage(path, "defaults: unknown option \"" + it.key() + "\"");
  }
  if (!j.contains("entries") || !j["entries"].is_array() || j["entries"].empty()) {
    return usage(path, "\"entries\" must be a non-empty list");
  }
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  auto resolve = [&](const std::string& p) {
    return std::filesystem::path(p).is_absolute() || base.empty() ? p : (base / p).string();
  };
  // The campaign's weights dump: check entries without their own take it (docs/campaigns.md).
  std::string weights;
  if (j.contains("weights")) {
    if (!j["weights"].is_string() || j["weights"].get<std::string>().empty()) {
      return usage(path, "\"weights\" must be the path of a weights dump");
    }
    weights = resolve(j["weights"].get<std::string>());
  }
  std::set<std::string> ids;
  for (std::size_t i = 0; i < j["entries"].size(); ++i) {
    const Json& e = j["entries"][i];
    const std::string where = "entries[" + std::to_string(i) + "]";
    if (!e.is_object()) return usage(path, where + " must be an object");
    CampaignEntry entry;
    const KindInfo* kind = nullptr;
    for (const KindInfo& k : kinds()) {
      if (!e.contains(std::string(k.name))) continue;
      if (kind)
        return usage(path,
                     where + " names two commands (" + std::string(kind->name) + ", " + std::string(k.name) + ")");
      kind = &k;
    }
    if (!kind) {
      std::string keys;
      for (const auto& [k, v] : e.items()) {
        if (k == "id") continue;
        keys += (keys.empty() ? "" : ", ") + ("\"" + k + "\"");
      }
      return usage(path, where + " names no command (check, compare, forks, witness or verify)" +
                             (keys.empty() ? std::string() : "; its keys: " + keys));
    }
    entry.kind = kind->kind;
    const Json& given = e[std::string(kind->name)];
    if (kind->inputs == 1 && given.is_string()) {
      entry.inputs.push_back(resolve(given.get<std::string>()));
    } else if (kind->inputs == 2 && given.is_array() && given.size() == 2 && given[0].is_string() &&
               given[1].is_string()) {
      entry.inputs = {resolve(given[0].get<std::string>()), resolve(given[1].get<std::string>())};
    } else {
      return usage(path, where + ": \"" + std::string(kind->name) + "\" takes " +
                             (kind->inputs == 1 ? "a path" : "a list of two paths"));
    }
    if (e.contains("id") && !e["id"].is_string()) return usage(path, where + ": \"id\" must be a string");
    entry.id = e.value("id", std::string(kind->name) + "-" + std::to_string(i));
    if (entry.id.empty() || !ids.insert(entry.id).second) {
      return usage(path, where + ": id \"" + entry.id + "\" is empty or used twice");
    }
    // '#' separates an entry id from its work items ("<id>#unit:<projection>"); batches are
    // "#batch:...", which no id can then start.
    if (entry.id.find('#') != std::string::npos) {
      return usage(path, where + ": id \"" + entry.id + "\" may not contain '#'");
    }
    for (auto it = defaults.begin(); it != defaults.end(); ++it) {
      if (accepts(*kind, it.key())) entry.options[it.key()] = it.value();
    }
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() == "id" || it.key() == kind->name) continue;
      if (!accepts(*kind, it.key())) {
        return usage(path,
                     "entry " + entry.id + ": \"" + it.key() + "\" is not an option of " + std::string(kind->name));
      }
      entry.options[it.key()] = it.value();
    }
    if (entry.kind == EntryKind::kCheck) {
      if (entry.options.contains("weights") && entry.options["weights"].is_string()) {
        entry.options["weights"] = resolve(entry.options["weights"].get<std::string>());
      } else if (!entry.options.contains("weights") && !weights.empty()) {
        entry.options["weights"] = weights;
      }
    }
    if (entry.kind == EntryKind::kForks && entry.options.contains("vocab") && entry.options["vocab"].is_string()) {
      entry.options["vocab"] = resolve(entry.options["vocab"].get<std::string>());
    }
    m.entries.push_back(std::move(entry));
  }
  return m;
}

}  // namespace ncert::certify
