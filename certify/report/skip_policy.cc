#include "certify/report/skip_policy.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "certify/report/json_keys.h"

namespace ncert::certify {

namespace {

using PolicyJson = nlohmann::ordered_json;

constexpr std::string_view kProjectionPrefix = "projections/";
constexpr int kPolicyVersion = 1;

/// Concatenation by append: GCC 12 warns falsely (-Wrestrict, bug 105329) on "..." + std::string&&.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p);
  return s;
}

Status invalid(const std::string& path, const std::string& where, const std::string& what) {
  return Status(ErrorCode::kSkipPolicyInvalid, path + ": " + where + ": " + what);
}

std::string known_kinds() {
  std::string known;
  for (CheckKind k : kAllCheckKinds) {
    if (!known.empty()) known.append(", ");
    known.append(check_kind_name(k));
  }
  return known;
}

Result<CheckKind> kind_of(const PolicyJson& v, const std::string& path, const std::string& where) {
  if (!v.is_string()) return invalid(path, where, v.dump() + " is not a check kind's name");
  const std::string name = v.get<std::string>();
  const std::optional<CheckKind> k = parse_check_kind(name);
  if (!k) return invalid(path, where, "\"" + name + "\" is not a check kind (" + known_kinds() + ")");
  return *k;
}

Result<std::string> text_of(const PolicyJson& v, const std::string& path, const std::string& where) {
  if (!v.is_string() || v.get<std::string>().empty())
    return invalid(path, where, v.dump() + " is not a non-empty text");
  return v.get<std::string>();
}

Result<SkipRule> rule_of(const PolicyJson& j, const std::string& path, const std::string& where) {
  if (!j.is_object()) return invalid(path, where, j.dump() + " is not an object {\"kind\": ..., \"why\": ...}");
  SkipRule r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string at = where + "." + it.key();
    if (it.key() == "kind") {
      NCERT_ASSIGN_OR_RETURN(r.kind, kind_of(it.value(), path, at));
    } else if (it.key() == "projection") {
      NCERT_ASSIGN_OR_RETURN(r.projection, text_of(it.value(), path, at));
    } else if (it.key() == "reason") {
      NCERT_ASSIGN_OR_RETURN(r.reason, text_of(it.value(), path, at));
    } else if (it.key() == "why") {
      NCERT_ASSIGN_OR_RETURN(r.why, text_of(it.value(), path, at));
    } else {
      return invalid(path, at, "unknown key (a rule takes kind, projection, reason and why)");
    }
  }
  // A rule without a matcher would silence every skip: the policy must say what it expects.
  if (!r.kind && r.projection.empty() && r.reason.empty()) {
    return invalid(path, where, "matches every check: give at least one of kind, projection and reason");
  }
  return r;
}

Result<std::vector<SkipRule>> rules_of(const PolicyJson& j, const std::string& path, const std::string& key) {
  if (!j.is_array()) return invalid(path, key, j.dump() + " is not a list of rules");
  std::vector<SkipRule> rules;
  for (std::size_t i = 0; i < j.size(); ++i) {
    NCERT_ASSIGN_OR_RETURN(SkipRule r, rule_of(j[i], path, key + "[" + std::to_string(i) + "]"));
    rules.push_back(std::move(r));
  }
  return rules;
}

Status read_required(const PolicyJson& j, const std::string& path, SkipPolicy& p) {
  if (j.is_string() && j.get<std::string>() == "all") {
    p.require_all = true;
    return Status();
  }
  if (!j.is_array()) return invalid(path, "required", j.dump() + " is not \"all\" or a list of check kinds");
  for (std::size_t i = 0; i < j.size(); ++i) {
    NCERT_ASSIGN_OR_RETURN(CheckKind k, kind_of(j[i], path, cat({"required[", std::to_string(i), "]"})));
    p.required.push_back(k);
  }
  return Status();
}

/// A rule that classes a skip of a required kind contradicts the policy's own required list.
Status refuse_required_rules(const SkipPolicy& p, const std::vector<SkipRule>& rules, const std::string& key) {
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].kind && p.requires_kind(*rules[i].kind)) {
      return invalid(p.path, key + "[" + std::to_string(i) + "].kind",
                     cat({"\"", check_kind_name(*rules[i].kind), "\" is also required"}));
    }
  }
  return Status();
}

std::optional<std::size_t> first_match(const std::vector<SkipRule>& rules, const CheckResult& c) {
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].matches(c)) return i;
  }
  return std::nullopt;
}

PolicyMatch match_of(const SkipPolicy& p, const std::vector<SkipRule>& rules, std::string_view list, std::size_t i) {
  std::string text(list);
  text += cat({"[", std::to_string(i), "] (", rules[i].text(), ")"});
  return PolicyMatch{p.path, i, std::move(text), rules[i].why};
}

}  // namespace

std::string policy_match_text(const CheckResult& c) {
  if (!c.policy_match) return std::string();
  const PolicyMatch& m = *c.policy_match;
  std::string s = c.verdict == Verdict::kNotApplicable ? "not applicable by policy " : "expected by policy ";
  s += m.policy + " " + m.rule_text;
  if (!m.why.empty()) s += ": " + m.why;
  return s;
}

bool glob_match(std::string_view glob, std::string_view name) {
  // Iterative wildcard matching with one backtrack point: linear in practice, no recursion on
  // names from the dump.
  std::size_t g = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == name[n])) {
      ++g;
      ++n;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = n;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

bool SkipRule::matches(const CheckResult& c) const {
  if (kind && *kind != c.kind) return false;
  if (!projection.empty()) {
    const std::string_view subject = c.subject;
    if (subject.substr(0, kProjectionPrefix.size()) != kProjectionPrefix) return false;
    if (!glob_match(projection, subject.substr(kProjectionPrefix.size()))) return false;
  }
  return reason.empty() || c.reason.find(reason) != std::string::npos;
}

std::string SkipRule::text() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (kind) add(cat({"kind ", check_kind_name(*kind)}));
  if (!projection.empty()) add(cat({"projection ", projection}));
  if (!reason.empty()) add(cat({"reason \"", reason, "\""}));
  return s;
}

bool SkipPolicy::requires_kind(CheckKind k) const {
  return require_all || std::find(required.begin(), required.end(), k) != required.end();
}

void SkipPolicy::apply(std::vector<CheckResult>& checks) const {
  for (CheckResult& c : checks) {
    if (c.verdict != Verdict::kSkip) continue;
    if (requires_kind(c.kind)) {
      c.verdict = Verdict::kFail;
      c.reason =
          cat({"required by policy ", path, " (required: ", check_kind_name(c.kind), ") but skipped: ", c.reason});
    } else if (const auto na = first_match(not_applicable, c)) {
      c.verdict = Verdict::kNotApplicable;
      c.policy_match = match_of(*this, not_applicable, "not_applicable", *na);
    } else if (const auto ex = first_match(expected_skips, c)) {
      c.policy_match = match_of(*this, expected_skips, "expected_skips", *ex);
    } else {
      c.verdict = Verdict::kFail;
      const std::string projection =
          c.subject.rfind(kProjectionPrefix, 0) == 0
              ? cat({", \"projection\": \"", std::string_view(c.subject).substr(kProjectionPrefix.size()), "\""})
              : std::string();
      c.reason = cat({"skipped, and no rule of policy ", path, " expects it (add {\"kind\": \"",
                      check_kind_name(c.kind), "\"", projection, "} to expected_skips if it is): ", c.reason});
    }
  }
}

Result<SkipPolicy> parse_skip_policy(std::string_view text, const std::string& path) {
  // A key given twice would be read as its last value (a review's {"kind": "walk", "kind":
  // "witness"} expected witness skips): refused, as the manifest refuses it.
  std::optional<DuplicateKey> duplicate;
  PolicyJson j;
  try {
    j = parse_watching_keys(std::string(text), &duplicate);
  } catch (const PolicyJson::exception& e) {
    return Status(ErrorCode::kSkipPolicyInvalid, path + ": not valid JSON (" + e.what() + ")");
  }
  if (duplicate) {
    // The policy's own spelling of a place: expected_skips[1].kind.
    std::string where;
    for (std::size_t i = 0; i < duplicate->where.size(); ++i) {
      where +=
          duplicate->is_index[i] ? "[" + duplicate->where[i] + "]" : (where.empty() ? "" : ".") + duplicate->where[i];
    }
    return invalid(
        path, where.empty() ? "top level" : where,
        cat({"gives the key \"", duplicate->key, "\" twice (JSON keeps only the last: give each key once)"}));
  }
  if (!j.is_object()) return invalid(path, "top level", "is not an object");
  SkipPolicy p;
  p.path = path;
  if (!j.contains("ncert_skip_policy")) {
    return invalid(path, "ncert_skip_policy",
                   cat({"missing (the format's version, ", std::to_string(kPolicyVersion), ")"}));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const PolicyJson& v = it.value();
    if (it.key() == "ncert_skip_policy") {
      if (!v.is_number_integer() || v.get<std::int64_t>() != kPolicyVersion) {
        return invalid(path, it.key(),
                       cat({v.dump(), " is not a version this ncert reads (", std::to_string(kPolicyVersion), ")"}));
      }
    } else if (it.key() == "required") {
      NCERT_RETURN_IF_ERROR(read_required(v, path, p));
    } else if (it.key() == "expected_skips") {
      NCERT_ASSIGN_OR_RETURN(p.expected_skips, rules_of(v, path, it.key()));
    } else if (it.key() == "not_applicable") {
      NCERT_ASSIGN_OR_RETURN(p.not_applicable, rules_of(v, path, it.key()));
    } else if (it.key() != "comment") {
      return invalid(path, it.key(),
                     "unknown key (a policy takes ncert_skip_policy, required, expected_skips, not_applicable and "
                     "comment)");
    }
  }
  NCERT_RETURN_IF_ERROR(refuse_required_rules(p, p.expected_skips, "expected_skips"));
  NCERT_RETURN_IF_ERROR(refuse_required_rules(p, p.not_applicable, "not_applicable"));
  return p;
}

Result<SkipPolicy> load_skip_policy(const std::string& path) {
  if (path.empty()) return Status(ErrorCode::kUsage, "an empty path names no file");
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) return Status(ErrorCode::kSkipPolicyInvalid, path + ": no such skip policy file");
  if (!std::filesystem::is_regular_file(st)) {
    // Never opened: a FIFO would block the read.
    return Status(
        ErrorCode::kSkipPolicyInvalid,
        path + ": not a regular file (" +
            (std::filesystem::is_directory(st) ? std::string("a directory") : std::string("a FIFO, socket or device")) +
            "); a skip policy is a JSON file");
  }
  // A policy lists a few rules: 16 MiB is far beyond any (a review's 4 GB sparse one took 65 s
  // and 12.6 GB of memory).
  constexpr std::uintmax_t kMaxPolicyBytes = std::uintmax_t{16} << 20;
  if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxPolicyBytes) {
    return Status(ErrorCode::kSkipPolicyInvalid, path + ": " + std::to_string(size) +
                                                     " bytes; a skip policy is at most " +
                                                     std::to_string(kMaxPolicyBytes >> 20) + " MiB");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return Status(ErrorCode::kSkipPolicyInvalid, path + ": the skip policy file could not be read");
  return parse_skip_policy(text.str(), path);
}

}  // namespace ncert::certify
