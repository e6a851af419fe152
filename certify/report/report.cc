#include "certify/report/report.h"

#include <algorithm>

namespace ncert::certify {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kSkip:
      return "SKIP";
    case Verdict::kNotApplicable:
      return "N/A";
  }
  return "?";
}

std::string_view witness_class_name(WitnessClass c) {
  switch (c) {
    case WitnessClass::kCertified:
      return "certified";
    case WitnessClass::kNearTie:
      return "near-tie";
    case WitnessClass::kTie:
      return "tie";
    case WitnessClass::kUnbounded:
      return "unbounded";
  }
  return "?";
}

std::string_view fork_class_name(ForkClass c) {
  switch (c) {
    case ForkClass::kTie:
      return "tie";
    case ForkClass::kNearTie:
      return "near-tie";
    case ForkClass::kUnexplained:
      return "unexplained";
    case ForkClass::kInvalid:
      return "invalid";
    case ForkClass::kUndetermined:
      return "undetermined";
  }
  return "?";
}

std::string_view trial_effect_name(TrialEffect e) {
  switch (e) {
    case TrialEffect::kMovesCentres:
      return "moves-centres";
    case TrialEffect::kWidensBound:
      return "widens-bound";
    case TrialEffect::kMovesRounding:
      return "moves-rounding";
    case TrialEffect::kLocatesFault:
      return "locates-fault";
  }
  return "?";
}

std::string_view fit_kind_name(FitKind k) {
  switch (k) {
    case FitKind::kRow:
      return "row";
    case FitKind::kRows:
      return "rows";
    case FitKind::kElement:
      return "element";
    case FitKind::kElements:
      return "elements";
    case FitKind::kColumnOffset:
      return "column-offset";
    case FitKind::kGroupOffset:
      return "group-offset";
    case FitKind::kGroupScale:
      return "group-scale";
    case FitKind::kColumnSwap:
      return "column-swap";
    case FitKind::kScaleBlock:
      return "scale-block";
    case FitKind::kRange:
      return "range";
  }
  return "?";
}

std::string_view slot_misroute_name(SlotMisroute m) {
  switch (m) {
    case SlotMisroute::kGathered:
      return "gathered";
    case SlotMisroute::kScattered:
      return "scattered";
    case SlotMisroute::kUnwritten:
      return "unwritten";
    case SlotMisroute::kCompact:
      return "compact";
  }
  return "?";
}

std::string_view ncert_version() { return NCERT_VERSION; }

CheckResult not_evaluated(std::string id, CheckKind kind, const std::string& why) {
  CheckResult r;
  r.id = std::move(id);
  r.kind = kind;
  r.verdict = Verdict::kFail;
  r.reason = "not evaluated: " + why;
  r.evidence = NotEvaluatedEvidence{};
  return r;
}

CheckResult skipped(std::string id, std::string subject, CheckKind kind, std::string why) {
  CheckResult r;
  r.id = std::move(id);
  r.subject = std::move(subject);
  r.kind = kind;
  r.verdict = Verdict::kSkip;
  r.reason = std::move(why);
  return r;
}

CheckResult not_applicable(std::string id, std::string subject, CheckKind kind, std::string why) {
  CheckResult r = skipped(std::move(id), std::move(subject), kind, std::move(why));
  r.verdict = Verdict::kNotApplicable;
  return r;
}

bool Requirement::covers(CheckKind k) const { return all || std::find(kinds.begin(), kinds.end(), k) != kinds.end(); }

std::string Requirement::text() const {
  if (all) return "all";
  std::string s;
  for (CheckKind k : kinds) {
    if (!s.empty()) s.push_back(',');
    s.append(check_kind_name(k));
  }
  return s;
}

Result<Requirement> parse_requirement(std::string_view s) {
  Requirement r;
  if (s == "all") {
    r.all = true;
    return r;
  }
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::string_view name = s.substr(pos, comma == std::string_view::npos ? s.size() - pos : comma - pos);
    const std::optional<CheckKind> k = parse_check_kind(name);
    if (name == "all") {
      // "all" already holds every kind: beside others it says nothing more, and is likely a slip.
      return Status(ErrorCode::kUsage, "\"all\" stands alone: it requires every kind, so give it without other kinds");
    }
    if (!k) {
      std::string known;
      for (CheckKind kind : kAllCheckKinds) {
        if (!known.empty()) known.append(", ");
        known.append(check_kind_name(kind));
      }
      // Built by append: GCC 12 warns falsely (-Wrestrict, bug 105329) on "..." + std::string&&.
      std::string what = "\"";
      what.append(name).append("\" is not \"all\" or a check kind (").append(known).append(")");
      return Status(ErrorCode::kUsage, what);
    }
    r.kinds.push_back(*k);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return r;
}

void Report::apply(const Requirement& requirement) {
  for (CheckResult& c : checks) {
    if (c.verdict != Verdict::kSkip || !requirement.covers(c.kind)) continue;
    c.verdict = Verdict::kFail;
    c.reason = "required by --require " + requirement.text() + " but skipped: " + c.reason;
  }
}

std::vector<CoverageRow> Report::coverage() const {
  // FAIL outranks PASS outranks SKIP outranks N/A: a subject's kind shows its worst outcome.
  auto rank = [](Verdict v) {
    switch (v) {
      case Verdict::kFail:
        return 3;
      case Verdict::kPass:
        return 2;
      case Verdict::kSkip:
        return 1;
      case Verdict::kNotApplicable:
        return 0;
    }
    return 0;
  };
  std::vector<CoverageRow> rows;
  for (const CheckResult& c : checks) {
    if (c.subject.empty()) continue;
    auto row = std::find_if(rows.begin(), rows.end(), [&](const CoverageRow& r) { return r.subject == c.subject; });
    if (row == rows.end()) row = rows.insert(rows.end(), CoverageRow{c.subject, {}});
    auto cell = std::find_if(row->kinds.begin(), row->kinds.end(), [&](const auto& kv) { return kv.first == c.kind; });
    if (cell == row->kinds.end())
      row->kinds.emplace_back(c.kind, c.verdict);
    else if (rank(c.verdict) > rank(cell->second))
      cell->second = c.verdict;
  }
  for (CoverageRow& row : rows) {
    std::sort(row.kinds.begin(), row.kinds.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return rows;
}

int Report::skipped_checks() const {
  int n = 0;
  for (const CheckResult& c : checks) n += c.verdict == Verdict::kSkip;
  return n;
}

int Report::expected_skips() const {
  int n = 0;
  for (const CheckResult& c : checks) n += c.expected_skip();
  return n;
}

int Report::not_applicable_checks() const {
  int n = 0;
  for (const CheckResult& c : checks) n += c.verdict == Verdict::kNotApplicable;
  return n;
}

int Report::failed_checks() const {
  int n = 0;
  for (const CheckResult& c : checks) n += c.failed();
  return n;
}

Verdict Report::verdict() const { return (error.has_value() || failed_checks() > 0) ? Verdict::kFail : Verdict::kPass; }

int Report::exit_code() const {
  if (error.has_value()) return exit_code_for(error->code());
  return verdict() == Verdict::kPass ? 0 : 1;
}

Report& Report::refuse(const Status& status) {
  error = status;
  CheckResult schema;
  schema.id = "schema";
  schema.subject = "dump";
  schema.kind = CheckKind::kSchema;
  schema.verdict = Verdict::kFail;
  schema.reason = status.message();
  checks.push_back(std::move(schema));
  return *this;
}

void Report::add_entry(std::string id, std::string entry_command, Report report) {
  for (const CheckResult& c : report.checks) {
    CheckResult flat = c;
    // An entry's refusal is its failing schema check; in the campaign's lines, where no
    // REFUSED line follows, it names the error and its code as that line would.
    if (report.error && c.kind == CheckKind::kSchema && c.reason == report.error->message()) {
      flat.reason = "input refused: " + report.error->to_string();
    }
    flat.id = id + "/" + c.id;
    flat.subject = id + "/" + c.subject;
    checks.push_back(std::move(flat));
  }
  entries.push_back(ReportEntry{std::move(id), std::move(entry_command), std::move(report)});
}

std::size_t Report::first_check(std::size_t entry) const {
  std::size_t first = 0;
  for (std::size_t i = 0; i < entry && i < entries.size(); ++i) first += entries[i].report.checks.size();
  return first;
}

}  // namespace ncert::certify
