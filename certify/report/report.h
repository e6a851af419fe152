// This header defines the report every ncert command produces: the inputs with their content
// hashes, one CheckResult per check and the command's top-level stats, rendered as a concise
// human summary (render_text.cc) or as the JSON report of docs/cli.md (render_json.cc). An input
// the tool refused is carried as `error`. Reports are deterministic: only fields named timing_*
// may differ between identical runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certify/io/hash.h"
#include "certify/report/check_result.h"
#include "certify/report/skip_policy.h"
#include "reference/status.h"

namespace ncert::certify {

using Json = nlohmann::ordered_json;

/// --require: which check kinds may not be skipped (a SKIP of one of them is a FAIL).
struct Requirement {
  bool all = false;
  std::vector<CheckKind> kinds;
  bool covers(CheckKind k) const;
  std::string text() const;  ///< "all" or "untouched,walk"
};
/// "all", or a comma-separated list of check kinds (kUsage naming an unknown kind).
Result<Requirement> parse_requirement(std::string_view s);

/// One row of the coverage table: what ran for one subject, by check kind (the worst verdict
/// where a kind has several checks).
struct CoverageRow {
  std::string subject;
  std::vector<std::pair<CheckKind, Verdict>> kinds;  ///< in CheckKind order
};

struct ReportEntry;

struct Report {
  std::string command;
  std::vector<InputInfo> inputs;
  std::vector<CheckResult> checks;
  /// The command's summary figures. Commands assemble it as JSON directly: nothing but the
  /// renderers reads it (checks travel typed, as CheckResult).
  Json stats = Json::object();
  Json extra = Json::object();        ///< command-specific top-level members (inspect: datasets)
  std::optional<Status> error;        ///< set when an input was refused (exit 3)
  std::vector<std::string> preamble;  ///< lines printed before the checks (human summary)
  /// Files the command writes itself beside its reports (witness --out and its summary) that
  /// could not be written: printed as errors, and a PASS exits 5 as for a report not written;
  /// the verdict stands (they are not rendered into the reports).
  std::vector<Status> output_errors;
  /// A campaign's entries (add_entry), each with its own command's report, typed: the JSON's
  /// top-level `entries` and the HTML page's summary and per-entry parts are drawn from them.
  /// Empty for every other command.
  std::vector<ReportEntry> entries;

  bool show_coverage = false;  ///< print the coverage table in the human summary (check)

  /// FAIL when any check failed or an input was refused.
  Verdict verdict() const;
  int failed_checks() const;
  int skipped_checks() const;         ///< every SKIP, expected ones included
  int expected_skips() const;         ///< the SKIPs a skip policy expects
  int not_applicable_checks() const;  ///< N/A: by the format, or by a policy's not_applicable
  /// Turns every SKIP of a required kind into a FAIL that says so.
  void apply(const Requirement& requirement);
  /// Classes every SKIP under a skip policy (skip_policy.h): expected, N/A, or a FAIL.
  void apply(const SkipPolicy& policy) { policy.apply(checks); }
  /// The coverage table: one row per subject, in the order subjects first appear.
  std::vector<CoverageRow> coverage() const;
  /// The JSON report (docs/cli.md "JSON report").
  Json to_json() const;
  /// The human summary: preamble, one line per check (details under failures), verdict line.
  /// `only_failures` prints only failing checks (for --quiet).
  std::string to_text(bool only_failures) const;
  /// The process exit code: 0 pass, 1 fail, or the error's code (docs/cli.md).
  int exit_code() const;
  /// Records a refused input: `error`, and a failing "schema" check carrying its message.
  Report& refuse(const Status& status);
  /// Appends a campaign entry: its report kept whole in `entries`, and its checks to this
  /// report's list with id and subject under the entry's id ("step-000/projections/attn/bound").
  /// Entry i's checks are therefore checks[first_check(i), first_check(i) + its size).
  void add_entry(std::string id, std::string entry_command, Report report);
  /// Where entry i's checks begin in `checks`.
  std::size_t first_check(std::size_t entry) const;
};

/// One entry of a campaign's report: the manifest entry's id and command ("check", "compare",
/// "forks", "witness", "verify") and the report its own command writes.
struct ReportEntry {
  std::string id;
  std::string command;
  Report report;
};

/// The ncert version string ("0.1.0").
std::string_view ncert_version();

/// The JSON of one check as it appears in the report's `checks` list.
Json check_json(const CheckResult& c);

/// The JSON of one witness (report `witnesses` lists and fork evidence).
Json witness_json(const Witness& w);

}  // namespace ncert::certify
