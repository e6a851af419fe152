// This header defines the skip policy: a small JSON file a team writes once and keeps beside its
// CI configuration (`--policy FILE` on check, witness, forks and campaign; a campaign manifest's
// "skip_policy"), saying which check kinds are required, which SKIPs are expected and which
// checks do not apply to its engine (docs/cli.md "Skip policy"):
//
//   {"ncert_skip_policy": 1,
//    "required": ["bound", "identity"],
//    "expected_skips": [{"kind": "walk", "why": "a BLAS engine has no declared K walk"}],
//    "not_applicable": [{"kind": "bias", "projection": "lm_*", "why": "..."}]}
//
// A rule matches a check by any of kind, projection (a glob over the projection's name, * and ?)
// and reason (a substring of the check's reason); the fields it gives must all match. Under a
// policy every SKIP is classed: expected (a rule of expected_skips matches, the kind is not
// required; shown as an expected skip), not applicable (a rule of not_applicable matches: N/A),
// or unexpected (a FAIL whose reason says that no rule of the policy expects it). The policy is
// a typed value; its JSON is read only here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certify/report/check_result.h"
#include "reference/status.h"

namespace ncert::certify {

/// One rule of expected_skips or not_applicable: every field given must match.
struct SkipRule {
  std::optional<CheckKind> kind;
  std::string projection;  ///< glob over the projection's name ("" : any subject)
  std::string reason;      ///< substring of the check's reason ("" : any)
  std::string why;         ///< the team's words, shown beside each check it classes
  bool operator==(const SkipRule&) const = default;

  bool matches(const CheckResult& c) const;
  /// "kind walk, projection lm_*, reason \"y_before\"".
  std::string text() const;
};

struct SkipPolicy {
  std::string path;  ///< the file, as given (named in reports and in the FAILs it makes)
  bool require_all = false;
  std::vector<CheckKind> required;  ///< a SKIP of these kinds fails even where a rule matches
  std::vector<SkipRule> expected_skips;
  std::vector<SkipRule> not_applicable;
  bool operator==(const SkipPolicy&) const = default;

  bool requires_kind(CheckKind k) const;
  /// Classes every SKIP of `checks`: expected (policy_match set), N/A, or a FAIL naming the
  /// policy; a SKIP of a required kind fails whatever rule matches it.
  void apply(std::vector<CheckResult>& checks) const;
};

/// The line the reports show under a check a policy classed: "expected by policy ci/policy.json
/// expected_skips[0] (kind walk): <why>" or "not applicable by policy ...". "" without a match.
std::string policy_match_text(const CheckResult& c);

/// Whether `name` matches `glob` (`*` any run of characters, `?` one character).
bool glob_match(std::string_view glob, std::string_view name);

/// Reads a policy file: kSkipPolicyInvalid naming the file (missing or unreadable), or the file, the
/// key and the value for anything malformed (an unknown key, kind or field; an empty rule; a
/// rule that expects a skip of a required kind); kUsage for an empty path.
Result<SkipPolicy> load_skip_policy(const std::string& path);
/// The same from text already read (`path` only names it in messages).
Result<SkipPolicy> parse_skip_policy(std::string_view text, const std::string& path);

}  // namespace ncert::certify
