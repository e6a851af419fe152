#include "certify/campaign/entry_options.h"

#include <cstdint>
#include <string>

#include "certify/commands/option_tables.h"
#include "certify/report/format.h"

namespace ncert::certify {

namespace {

using Json = nlohmann::ordered_json;

Status bad(const CampaignEntry& e, const std::string& key, const std::string& what) {
  return Status(ErrorCode::kUsage, "entry " + e.id + ": option \"" + key + "\" " + what);
}

/// A manifest value as the option's type takes it, with the range checked as on the command
/// line (a whole number for integers: 4.5 or 1e3 is refused). nullopt for null where allowed.
template <class O>
Result<std::optional<OptionValue>> manifest_value(const CampaignEntry& e, const OptionSpec<O>& spec, const Json& v) {
  if (v.is_null() && spec.nullable) return std::optional<OptionValue>();
  switch (spec.type) {
    case OptionType::kFlag:
      if (!v.is_boolean()) return bad(e, spec.key, "must be true or false");
      return std::optional<OptionValue>(v.get<bool>());
    case OptionType::kNumber:
      if (!v.is_number() || v.get<double>() < spec.lo || v.get<double>() > spec.hi) {
        return bad(e, spec.key, "must be a number from " + format_float(spec.lo) + " to " + format_float(spec.hi));
      }
      return std::optional<OptionValue>(v.get<double>());
    case OptionType::kInteger: {
      const auto lo = static_cast<std::int64_t>(spec.lo), hi = static_cast<std::int64_t>(spec.hi);
      if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
        return bad(e, spec.key, "must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
      }
      return std::optional<OptionValue>(v.get<std::int64_t>());
    }
    case OptionType::kText:
      if (!v.is_string()) return bad(e, spec.key, "must be a string");
      return std::optional<OptionValue>(v.get<std::string>());
    case OptionType::kTextList: {
      std::vector<std::string> texts;
      const std::string want = "must be a list of \"" + spec.value_name + "\" strings";
      if (!v.is_array()) return bad(e, spec.key, want);
      for (const Json& item : v) {
        if (!item.is_string()) return bad(e, spec.key, want + ", got " + item.dump());
        texts.push_back(item.get<std::string>());
      }
      return std::optional<OptionValue>(std::move(texts));
    }
  }
  return bad(e, spec.key, "has an unknown type");
}

/// Applies every option of entry `e` through its command's table (load_manifest has already
/// refused keys the command does not take).
template <class O>
Status apply_entry_options(const CampaignEntry& e, const OptionTable<O>& table, O* out) {
  for (auto it = e.options.begin(); it != e.options.end(); ++it) {
    const OptionSpec<O>* spec = find_by_key(table, it.key());
    if (spec == nullptr) return bad(e, it.key(), "is not an option of this command");
    NCERT_ASSIGN_OR_RETURN(std::optional<OptionValue> value, manifest_value(e, *spec, it.value()));
    if (!value) continue;
    if (Status s = spec->set(*out, *value); !s.ok()) {
      // A bad skip policy file keeps its own code (skip-policy-invalid); every other refusal of
      // an option's value is a usage error of the manifest.
      if (s.code() == ErrorCode::kSkipPolicyInvalid)
        return Status(s.code(), "entry " + e.id + ": option \"" + it.key() + "\": " + s.message());
      return bad(e, it.key(), s.message());
    }
  }
  return Status();
}

}  // namespace

Result<CheckCommandOptions> check_options(const CampaignEntry& e, const ReaderOptions& reader) {
  CheckCommandOptions o;
  o.dump = e.inputs[0];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(apply_entry_options(e, check_option_table(), &o));
  return o;
}

Result<CompareOptions> compare_options(const CampaignEntry& e, const ReaderOptions& reader) {
  CompareOptions o;
  o.a = e.inputs[0];
  o.b = e.inputs[1];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(apply_entry_options(e, compare_option_table(), &o));
  return o;
}

Result<ForksOptions> forks_options(const CampaignEntry& e, const ReaderOptions& reader) {
  ForksOptions o;
  o.a = e.inputs[0];
  o.b = e.inputs[1];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(apply_entry_options(e, forks_option_table(), &o));
  return o;
}

Result<WitnessOptions> witness_options(const CampaignEntry& e, const ReaderOptions& reader) {
  WitnessOptions o;
  o.dump = e.inputs[0];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(apply_entry_options(e, witness_option_table(), &o));
  return o;
}

Result<VerifyOptions> verify_options(const CampaignEntry& e, const ReaderOptions& reader) {
  VerifyOptions o;
  o.witness_file = e.inputs[0];
  o.dump = e.inputs[1];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(apply_entry_options(e, verify_option_table(), &o));
  return o;
}

std::vector<std::string> entry_option_keys(EntryKind kind) {
  std::vector<std::string> keys;
  auto collect = [&](const auto& table) {
    for (const auto& spec : table) {
      if (!spec.key.empty()) keys.push_back(spec.key);
    }
  };
  switch (kind) {
    case EntryKind::kCheck:
      collect(check_option_table());
      break;
    case EntryKind::kCompare:
      collect(compare_option_table());
      break;
    case EntryKind::kForks:
      collect(forks_option_table());
      break;
    case EntryKind::kWitness:
      collect(witness_option_table());
      break;
    case EntryKind::kVerify:
      collect(verify_option_table());
      break;
  }
  return keys;
}

Status validate_entries(const Manifest& m) {
  const ReaderOptions reader;
  for (const CampaignEntry& e : m.entries) {
    Status s;
    switch (e.kind) {
      case EntryKind::kCheck:
        s = check_options(e, reader).status();
        break;
      case EntryKind::kCompare:
        s = compare_options(e, reader).status();
        break;
      case EntryKind::kForks:
        s = forks_options(e, reader).status();
        break;
      case EntryKind::kWitness:
        s = witness_options(e, reader).status();
        break;
      case EntryKind::kVerify:
        s = verify_options(e, reader).status();
        break;
    }
    if (!s.ok()) return Status(s.code(), m.path + ": " + s.message());
  }
  return Status();
}

}  // namespace ncert::certify
