// This header defines CheckResult, what one check answers: its id, its kind (a CheckKind), a
// verdict (PASS, FAIL, SKIP when it could not run, N/A when the dump's format gives it nothing to
// check), the skip policy rule that classed a SKIP or an N/A (skip_policy.h), a one-line reason, where its first
// failure is, the typed evidence of its kind (report/evidence.h), and detail lines for the human
// summary. Everything is a typed value; text and JSON are made only by the renderers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certify/report/evidence.h"
#include "reference/check_kind.h"

namespace ncert::certify {

enum class Verdict : std::uint8_t {
  kPass,  ///< the check ran and holds
  kFail,  ///< the check ran and found a fault (or could not be evaluated where it must be)
  kSkip,  ///< the check could not run on this input; the reason names what would enable it
  /// The check does not apply: what it compares is absent by the format's design (the packed-path
  /// checks of a projection dumped with y_unpacked only) or a skip policy's not_applicable rule
  /// says so. Neither a failure nor a skip: --require and a policy's required kinds ignore it.
  kNotApplicable,
};
std::string_view verdict_name(Verdict v);  ///< "PASS", "FAIL", "SKIP", "N/A"

/// The skip policy rule that classed a check: a SKIP its expected_skips rule expects, or an N/A
/// its not_applicable rule declares (skip_policy.h). Carried for the reports, never re-parsed.
struct PolicyMatch {
  std::string policy;     ///< the policy file, as given
  std::size_t rule = 0;   ///< index in expected_skips (a SKIP) or not_applicable (an N/A)
  std::string rule_text;  ///< the rule as written: "expected_skips[0] (kind walk, projection lm_*)"
  std::string why;        ///< the rule's own words ("" when it gave none)
  bool operator==(const PolicyMatch&) const = default;
};

/// Where a check's first failure is: the object (an output dataset, a run) and the element or
/// position. Unused coordinates are -1.
struct Location {
  std::string object;  ///< "y_packed", "logits/greedy", "/tensors/kv", ...
  Index row = -1;
  Index col = -1;
  Index slot = -1;             ///< physical slot, for packed outputs
  std::int64_t position = -1;  ///< sequence position, for logits
  std::int32_t token = -1;
  bool operator==(const Location&) const = default;
};

struct CheckResult {
  std::string id;  ///< "projections/gdn_in/identity", "logits/greedy/witness", ...
  /// What the check is about ("projections/gdn_in", "logits/greedy", "dump"): the row of the
  /// coverage table.
  std::string subject;
  CheckKind kind = CheckKind::kSchema;
  Verdict verdict = Verdict::kPass;
  std::string reason;  ///< one line: what passed, the first failure, or why it was skipped
  std::optional<Location> first_failure;
  Evidence evidence;
  /// Set on a SKIP a policy expects and on an N/A a policy declares; empty on an N/A the format
  /// makes (its reason says why) and on a SKIP no policy classed.
  std::optional<PolicyMatch> policy_match;
  std::vector<std::string> details;  ///< extra lines for the human summary
  bool always_show_details = false;  ///< print details on PASS too (forks explain themselves)

  bool failed() const { return verdict == Verdict::kFail; }
  /// A SKIP that a skip policy expects (shown as such; never a failure).
  bool expected_skip() const { return verdict == Verdict::kSkip && policy_match.has_value(); }
  bool operator==(const CheckResult&) const = default;
};

/// A check of `kind` whose prerequisite failed: FAIL "not evaluated: <why>".
CheckResult not_evaluated(std::string id, CheckKind kind, const std::string& why);
/// A check of `kind` that could not run on this input: SKIP, the reason naming what would
/// enable it.
CheckResult skipped(std::string id, std::string subject, CheckKind kind, std::string why);
/// A check of `kind` that the dump's format makes inapplicable: N/A, the reason saying why.
CheckResult not_applicable(std::string id, std::string subject, CheckKind kind, std::string why);

}  // namespace ncert::certify
