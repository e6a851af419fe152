#include "certify/commands/sweep.h"

#include <chrono>
#include <optional>

namespace ncert::certify {

namespace {

std::string repro(const std::string& key) { return "repro: ncert sweep --case \"" + key + "\""; }

/// The one case of --case, or the default table's cases whose keys contain --filter.
Result<std::vector<packing::SweepCase>> select_cases(const SweepOptions& options) {
  std::vector<packing::SweepCase> cases;
  if (!options.case_key.empty()) {
    NCERT_ASSIGN_OR_RETURN(packing::SweepCase c, packing::parse_case(options.case_key));
    cases.push_back(c);
  } else {
    for (const packing::SweepCase& c : packing::default_cases()) {
      if (options.filter.empty() || c.key().find(options.filter) != std::string::npos) cases.push_back(c);
    }
    if (cases.empty()) {
      return Status(ErrorCode::kUsage, "--filter \"" + options.filter + "\" selects no sweep case");
    }
  }
  return cases;
}

// Each case belongs to one check kind: guard cases plant a violation, in-place residual cases
// exercise the alias rule, everything else (width buckets included) the identity.
CheckKind kind_of(const packing::SweepCase& c) {
  if (!c.guard.empty()) return CheckKind::kGuard;
  return c.inplace ? CheckKind::kAlias : CheckKind::kIdentity;
}

/// The sweep's checks, one per kind with cases: PASS with `pass_reason`, or FAIL counting the
/// failed cases, with the repro key of the first failure when it is of this kind.
class SweepChecks {
 public:
  SweepChecks(const std::vector<packing::SweepCase>& cases, const packing::SweepSummary& s, Report& report)
      : s_(s), report_(report) {
    if (s.first_failure >= 0) first_kind_ = kind_of(cases[static_cast<std::size_t>(s.first_failure)]);
  }

  void add(CheckKind kind, Index total, Index failed, const std::string& pass_reason, SweepEvidence e) {
    if (total == 0) return;
    CheckResult r;
    r.id = "sweep/" + std::string(check_kind_name(kind));
    r.kind = kind;
    r.verdict = failed == 0 ? Verdict::kPass : Verdict::kFail;
    e.cases = total;
    e.failed = failed;
    if (failed == 0) {
      r.reason = pass_reason;
    } else {
      r.reason = std::to_string(failed) + " of " + std::to_string(total) + " case(s) failed";
      if (first_kind_ == kind) {
        r.reason += "; first: " + s_.first_failure_reason;
        r.details.push_back(repro(s_.first_failure_key));
        e.first_failure_key = s_.first_failure_key;
      }
    }
    r.evidence = std::move(e);
    report_.checks.push_back(std::move(r));
  }

 private:
  const packing::SweepSummary& s_;
  Report& report_;
  std::optional<CheckKind> first_kind_;
};

/// The identity, alias and guard checks, in that order.
void add_sweep_checks(const std::vector<packing::SweepCase>& cases, const packing::SweepSummary& s, Report& report) {
  Index identity_cases = 0, alias_cases = 0, guard_cases = 0;
  for (const auto& c : cases) {
    switch (kind_of(c)) {
      case CheckKind::kGuard:
        ++guard_cases;
        break;
      case CheckKind::kAlias:
        ++alias_cases;
        break;
      default:
        ++identity_cases;
        break;
    }
  }
  SweepChecks checks(cases, s, report);
  SweepEvidence identity;
  identity.identity_comparisons = s.identity_comparisons;
  identity.rows_compared = s.rows_compared;
  identity.width_cases = s.width_cases;
  identity.width_rows = s.width_rows;
  checks.add(CheckKind::kIdentity, identity_cases, s.failed_identity + s.failed_width,
             std::to_string(s.identity_comparisons) + " packed-vs-unpacked cases bit-identical over " +
                 std::to_string(s.rows_compared) + " selected rows, padding, unselected rows and canaries intact; " +
                 std::to_string(s.width_cases) + " width-bucket cases identical at 512 and 8192 over " +
                 std::to_string(s.width_rows) + " rows",
             identity);
  SweepEvidence alias;
  alias.alias_cases = s.alias_cases;
  alias.alias_comparisons = s.alias_comparisons;
  alias.alias_rows = s.alias_rows;
  checks.add(CheckKind::kAlias, alias_cases, s.failed_alias,
             std::to_string(s.alias_comparisons) + " in-place residual cases bit-identical to the unpacked path over " +
                 std::to_string(s.alias_rows) + " selected rows",
             alias);
  SweepEvidence guard;
  guard.guards_covered.assign(s.guards_covered.begin(), s.guards_covered.end());
  guard.fallbacks = s.fallbacks;
  checks.add(CheckKind::kGuard, guard_cases, s.failed_guard,
             std::to_string(guard_cases) + " planted violations refused with the expected code, no byte touched; " +
                 std::to_string(s.guards_covered.size()) + " distinct guards; " + std::to_string(s.fallbacks) +
                 " unsupported plans fell back to the unpacked path",
             guard);
}

/// The report's top-level stats (docs/cli.md).
void add_sweep_stats(const packing::SweepSummary& s, double seconds, Report& report) {
  Json covered = Json::array();
  for (ErrorCode code : s.guards_covered) covered.push_back(std::string(error_name(code)));

  report.stats["cases"] = s.cases;
  report.stats["passed"] = s.passed;
  report.stats["failed"] = s.failed;
  report.stats["identity_comparisons"] = s.identity_comparisons;
  report.stats["rows_compared"] = s.rows_compared;
  report.stats["alias_cases"] = s.alias_cases;
  report.stats["alias_comparisons"] = s.alias_comparisons;
  report.stats["alias_rows"] = s.alias_rows;
  report.stats["width_cases"] = s.width_cases;
  report.stats["width_rows"] = s.width_rows;
  report.stats["guard_cases"] = s.guard_cases;
  report.stats["guards_covered"] = s.guards_covered.size();
  report.stats["guard_codes"] = covered;
  report.stats["timing_seconds"] = seconds;
  if (s.first_failure >= 0) report.stats["first_failure_key"] = s.first_failure_key;
}

}  // namespace

Result<Report> run_sweep(const SweepOptions& options) {
  NCERT_ASSIGN_OR_RETURN(std::vector<packing::SweepCase> cases, select_cases(options));
  const auto t0 = std::chrono::steady_clock::now();
  const packing::SweepSummary s = packing::sweep_cases(cases, options.helper);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Report report;
  report.command = "sweep";
  report.preamble.push_back("ncert sweep: " + std::to_string(s.cases) + " case(s) of the packing helper" +
                            (options.case_key.empty() ? "" : " (single case)"));
  add_sweep_checks(cases, s, report);
  add_sweep_stats(s, seconds, report);
  return report;
}

}  // namespace ncert::certify
