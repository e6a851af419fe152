#include "certify/campaign/entry_options.h"

#include <cstdint>
#include <string>

#include "certify/report/format.h"

namespace ncert::certify {

namespace {

using Json = nlohmann::ordered_json;

Status bad(const CampaignEntry& e, const std::string& key, const std::string& what) {
  return Status(ErrorCode::kUsage, "entry " + e.id + ": option \"" + key + "\" " + what);
}

Status get_bool(const CampaignEntry& e, const char* key, bool* out) {
  if (!e.options.contains(key)) return Status();
  if (!e.options[key].is_boolean()) return bad(e, key, "must be true or false");
  *out = e.options[key].get<bool>();
  return Status();
}

Status get_number(const CampaignEntry& e, const char* key, double lo, double hi, double* out) {
  if (!e.options.contains(key)) return Status();
  const Json& v = e.options[key];
  if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi) {
    return bad(e, key, "must be a number from " + format_float(lo) + " to " + format_float(hi));
  }
  *out = v.get<double>();
  return Status();
}

/// A whole number in [lo, hi] (JSON integer; 4.5 or 1e3 is refused, as on the command line).
Status get_integer(const CampaignEntry& e, const char* key, std::int64_t lo, std::int64_t hi, Index* out) {
  if (!e.options.contains(key)) return Status();
  const Json& v = e.options[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
    return bad(e, key, "must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  *out = static_cast<Index>(v.get<std::int64_t>());
  return Status();
}

Status get_string(const CampaignEntry& e, const char* key, std::string* out) {
  if (!e.options.contains(key)) return Status();
  if (!e.options[key].is_string()) return bad(e, key, "must be a string");
  *out = e.options[key].get<std::string>();
  return Status();
}

/// logit_error: a number >= 0, or null for none.
Status get_logit_error(const CampaignEntry& e, std::optional<double>* out) {
  if (!e.options.contains("logit_error") || e.options["logit_error"].is_null()) return Status();
  double v = 0;
  NCERT_RETURN_IF_ERROR(get_number(e, "logit_error", 0, 1e30, &v));
  *out = v;
  return Status();
}

Status get_require(const CampaignEntry& e, Requirement* out) {
  std::string text;
  NCERT_RETURN_IF_ERROR(get_string(e, "require", &text));
  if (text.empty()) return Status();
  auto r = parse_requirement(text);
  if (!r.ok()) return bad(e, "require", r.status().message());
  *out = *r;
  return Status();
}

Status get_pairs(const CampaignEntry& e, std::vector<std::pair<std::string, std::string>>* out) {
  if (!e.options.contains("pairs")) return Status();
  const Json& v = e.options["pairs"];
  if (!v.is_array()) return bad(e, "pairs", "must be a list of \"a:b\" run pairs");
  for (const Json& p : v) {
    const std::string s = p.is_string() ? p.get<std::string>() : "";
    const auto colon = s.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) {
      return bad(e, "pairs", "must be a list of \"a:b\" run pairs, got " + p.dump());
    }
    out->emplace_back(s.substr(0, colon), s.substr(colon + 1));
  }
  return Status();
}

}  // namespace

Result<CheckCommandOptions> check_options(const CampaignEntry& e, const ReaderOptions& reader) {
  CheckCommandOptions o;
  o.dump = e.inputs[0];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(get_bool(e, "strict", &o.check.strict));
  NCERT_RETURN_IF_ERROR(get_bool(e, "allow_vacuous", &o.check.allow_vacuous));
  NCERT_RETURN_IF_ERROR(get_number(e, "lambda", 1, 1000, &o.check.lambda));
  NCERT_RETURN_IF_ERROR(get_logit_error(e, &o.logit_error));
  NCERT_RETURN_IF_ERROR(get_string(e, "only", &o.only));
  NCERT_RETURN_IF_ERROR(get_require(e, &o.require));
  NCERT_RETURN_IF_ERROR(get_string(e, "weights", &o.weights));
  return o;
}

Result<CompareOptions> compare_options(const CampaignEntry& e, const ReaderOptions& reader) {
  CompareOptions o;
  o.a = e.inputs[0];
  o.b = e.inputs[1];
  o.reader = reader;
  std::string policy = "bitwise", tensor_policy;
  NCERT_RETURN_IF_ERROR(get_string(e, "policy", &policy));
  auto p = parse_policy(policy);
  if (!p.ok()) return bad(e, "policy", p.status().message());
  o.policy = *p;
  NCERT_RETURN_IF_ERROR(get_string(e, "tensor_policy", &tensor_policy));
  if (!tensor_policy.empty()) {
    auto t = parse_tensor_policy(tensor_policy);
    if (!t.ok()) return bad(e, "tensor_policy", t.status().message());
    o.tensor_policy = *t;
  }
  NCERT_RETURN_IF_ERROR(get_bool(e, "matched_history", &o.matched_history));
  NCERT_RETURN_IF_ERROR(get_bool(e, "allow_missing", &o.allow_missing));
  NCERT_RETURN_IF_ERROR(get_pairs(e, &o.pairs));
  return o;
}

Result<ForksOptions> forks_options(const CampaignEntry& e, const ReaderOptions& reader) {
  ForksOptions o;
  o.a = e.inputs[0];
  o.b = e.inputs[1];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(get_pairs(e, &o.pairs));
  NCERT_RETURN_IF_ERROR(get_bool(e, "matched_history", &o.matched_history));
  NCERT_RETURN_IF_ERROR(get_logit_error(e, &o.logit_error));
  NCERT_RETURN_IF_ERROR(get_number(e, "lambda", 1, 1000, &o.lambda));
  NCERT_RETURN_IF_ERROR(get_bool(e, "require_identical", &o.require_identical));
  NCERT_RETURN_IF_ERROR(get_require(e, &o.require));
  NCERT_RETURN_IF_ERROR(get_string(e, "vocab", &o.vocab_file));
  NCERT_RETURN_IF_ERROR(get_integer(e, "context", 0, 4096, &o.context));
  return o;
}

Result<WitnessOptions> witness_options(const CampaignEntry& e, const ReaderOptions& reader) {
  WitnessOptions o;
  o.dump = e.inputs[0];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(get_logit_error(e, &o.logit_error));
  NCERT_RETURN_IF_ERROR(get_number(e, "lambda", 1, 1000, &o.lambda));
  NCERT_RETURN_IF_ERROR(get_string(e, "only", &o.only));
  NCERT_RETURN_IF_ERROR(get_require(e, &o.require));
  return o;
}

Result<VerifyOptions> verify_options(const CampaignEntry& e, const ReaderOptions& reader) {
  VerifyOptions o;
  o.witness_file = e.inputs[0];
  o.dump = e.inputs[1];
  o.reader = reader;
  NCERT_RETURN_IF_ERROR(get_number(e, "lambda", 1, 1000, &o.lambda));
  return o;
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
