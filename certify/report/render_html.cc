// The HTML report: the page shell, the verdict, the summary of its parts, inputs, coverage, each
// part's checks and evidence (failing parts first and open, the others collapsed), stats and extra
// members; the evidence sections are in detail/html_sections.cc, the plots in detail/html_svg.cc.
#include "certify/report/render_html.h"

#include <algorithm>

#include "certify/report/detail/html_markup.h"
#include "certify/report/detail/html_sections.h"

namespace ncert::certify {

namespace {

using detail::count_text;
using detail::id_markup;
using detail::markup;
using detail::markup_fixed;
using detail::verdict_badge;

// No external resource of any kind: the policy forbids every fetch, and the page needs none.
constexpr const char* kHead = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
)";

constexpr const char* kStyle = R"(<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1180px;padding:0 16px 40px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
h3{font-size:15px;margin:18px 0 6px}header.verdict{padding:14px 16px;margin:16px 0;border-radius:6px;color:#fff}
header.pass{background:#1a7f37}header.fail{background:#cf222e}header.verdict p{margin:4px 0 0}
table{border-collapse:collapse;margin:6px 0}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}caption{text-align:left;font-weight:600;padding:4px 0}
code{font-family:ui-monospace,monospace;font-size:12.5px;overflow-wrap:anywhere}
td.id{font-family:ui-monospace,monospace;font-size:12.5px;overflow-wrap:break-word}span.n{white-space:nowrap}
table.checks td.id{min-width:15em}table.summary td.num{text-align:right}td.worst{max-width:560px}.side-head{max-width:540px;font-weight:600;margin:8px 0 2px}
.badge{display:inline-block;min-width:36px;text-align:center;border-radius:4px;padding:0 5px;color:#fff;font-size:12px;font-weight:600}
.badge.pass{background:#1a7f37}.badge.fail{background:#cf222e}.badge.skip{background:#6e7781}.badge.na{background:#afb8c1}
td.cov.pass{background:#dafbe1}td.cov.fail{background:#ffebe9}td.cov.skip{background:#f6f8fa;color:#6e7781}
td.cov.na{color:#8c959f}.expected{font-size:11px;color:#57606a;border:1px solid #d0d7de;border-radius:4px;padding:0 4px}
p.policy{margin:2px 0 0;font-size:12px;color:#57606a}
.kind{display:inline-block;margin:0 6px 4px 0;padding:0 6px;border-radius:4px;font-size:12px}
.kind.pass{background:#dafbe1}.kind.fail{background:#ffebe9;color:#a40e26;font-weight:600}
.kind.skip{background:#eaeef2;color:#57606a}#only-failures:checked~* tr.check:not(.fail){display:none}
details.part{border:1px solid #d0d7de;border-radius:6px;padding:2px 14px;margin:10px 0}
details.part.fail{border-color:#cf222e}details.part>summary{cursor:pointer;padding:6px 0;font-weight:600}
details.part>summary .counts{font-weight:400;color:#57606a}
details pre{white-space:pre-wrap;margin:4px 0;font-size:12px}
section.subject,section.fork{border:1px solid #d0d7de;border-radius:6px;padding:4px 14px 10px;margin:12px 0}
figure{margin:8px 0}figcaption{font-size:12.5px;color:#57606a;max-width:1100px}svg.plot{display:block;background:#fff}
svg .axis,svg .frame{stroke:#8c959f;fill:none}svg .bar{fill:#0969da}svg .bar.over{fill:#d97706}
svg .bar.zero{fill:#8c959f}svg .bar.other{fill:#cf222e}svg .marker{stroke:#cf222e;stroke-dasharray:4 3}
svg .tick,svg .caption,svg .note{font:11px system-ui,sans-serif;fill:#57606a}
svg .line{fill:none;stroke:#0969da;stroke-width:1.4}svg .point{fill:#0969da}svg .inf{fill:#cf222e}
svg .grid-bg{fill:#f6f8fa;stroke:#d0d7de}svg .cell{fill:#cf222e}
svg.calm .marker{stroke:#57606a}svg.calm .bar.over{fill:#0969da}svg.calm .bar.other,svg.calm .inf{fill:#8c959f}.sides{display:flex;gap:16px;flex-wrap:wrap}
tr.own td{background:#ddf4ff}tr.other td{background:#fff8c5}.failure,.failures li{color:#a40e26}.note{color:#57606a}
.class{font-weight:600}footer{margin-top:32px;color:#57606a;font-size:12px}
</style></head><body>
)";

/// A JSON value as one line of text, valid UTF-8 (invalid bytes replaced), capped.
std::string json_text(const Json& j, std::size_t cap = 300) {
  std::string s = j.is_string() ? j.get<std::string>() : j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > cap) s = s.substr(0, cap) + "...";
  return markup(s);
}

std::string header(const Report& r) {
  const Verdict v = r.verdict();
  const int failed = r.failed_checks(), skipped = r.skipped_checks(), expected = r.expected_skips();
  const int inapplicable = r.not_applicable_checks();
  const auto total = static_cast<int>(r.checks.size());
  std::string summary;
  if (r.error)
    summary = "input refused: " + markup(r.error->to_string());
  else if (failed > 0)
    summary = std::to_string(failed) + " of " + std::to_string(total) + " checks failed";
  else
    summary = std::to_string(total - skipped - inapplicable) + " checks passed";
  if (skipped > 0) summary += ", " + std::to_string(skipped) + " skipped";
  if (expected > 0) summary += " (" + std::to_string(expected) + " expected by policy)";
  if (inapplicable > 0) summary += ", " + std::to_string(inapplicable) + " not applicable";
  return "<header id=\"verdict\" class=\"verdict " + std::string(v == Verdict::kPass ? "pass" : "fail") +
         "\" data-verdict=\"" + std::string(verdict_name(v)) + "\" data-checks=\"" + std::to_string(total) +
         "\" data-failed=\"" + std::to_string(failed) + "\" data-skipped=\"" + std::to_string(skipped) +
         "\" data-expected-skips=\"" + std::to_string(expected) + "\" data-not-applicable=\"" +
         std::to_string(inapplicable) + "\" data-refused=\"" + (r.error ? "true" : "false") + "\"><h1>ncert " +
         markup(r.command) + ": " + std::string(verdict_name(v)) + "</h1><p>" + summary + "</p></header>";
}

/// The inputs and their hashes, and the refusal when there is one.
std::string inputs_table(const Report& r) {
  std::string s = "<table class=\"inputs\"><tr><th>path</th><th>xxh3-128 of the file</th></tr>";
  for (const InputInfo& i : r.inputs) {
    s += "<tr><td class=\"id\">" + id_markup(i.path) + "</td><td><code>" + markup(i.xxh3_128) + "</code></td></tr>";
  }
  s += "</table>";
  if (r.error) {
    s += "<table class=\"facts error\"><caption>input refused</caption><tr><th>error</th><td>" +
         markup(error_name(r.error->code())) + " (" + std::to_string(static_cast<int>(r.error->code())) +
         ")</td></tr><tr><th>message</th><td>" + markup(r.error->message()) + "</td></tr>";
    if (!r.error->detail().empty()) s += "<tr><th>detail</th><td>" + markup(r.error->detail()) + "</td></tr>";
    s += "</table>";
  }
  return s;
}

/// The checks of a report, failing ones first (then in report order).
std::string checks_table(const Report& r) {
  constexpr std::size_t kMaxDetails = 40;
  std::vector<const CheckResult*> order;
  for (const CheckResult& c : r.checks) order.push_back(&c);
  std::stable_partition(order.begin(), order.end(), [](const CheckResult* c) { return c->failed(); });
  std::string s = "<table class=\"checks\"><tr><th></th><th>check</th><th>kind</th><th>reason</th></tr>";
  for (const CheckResult* cp : order) {
    const CheckResult& c = *cp;
    const std::string v(verdict_name(c.verdict));
    // An expected SKIP keeps its verdict and says so: row class and data-expected, a tag beside the
    // badge, and the policy rule under the reason.
    s += "<tr class=\"check " + detail::verdict_class(c.verdict) + (c.expected_skip() ? " expected" : "") +
         "\" data-verdict=\"" + v + "\" data-kind=\"" + markup(check_kind_name(c.kind)) + "\"" +
         (c.verdict == Verdict::kSkip ? std::string(" data-expected=\"") + (c.expected_skip() ? "true" : "false") + "\""
                                      : std::string()) +
         "><td>" + verdict_badge(c.verdict) + (c.expected_skip() ? " <span class=\"expected\">expected</span>" : "") +
         "</td><td class=\"id\">" + id_markup(c.id) + "</td><td>" + markup(check_kind_name(c.kind)) + "</td><td>" +
         markup(c.reason);
    if (c.policy_match) s += "<p class=\"policy\">" + markup(policy_match_text(c)) + "</p>";
    if (!c.details.empty()) {
      s += "<details" + std::string(c.failed() ? " open" : "") + "><summary>" + std::to_string(c.details.size()) +
           " detail line" + (c.details.size() == 1 ? "" : "s") + "</summary><pre>";
      for (std::size_t i = 0; i < std::min(c.details.size(), kMaxDetails); ++i) s += markup(c.details[i]) + "\n";
      if (c.details.size() > kMaxDetails) s += "... " + std::to_string(c.details.size() - kMaxDetails) + " more\n";
      s += "</pre></details>";
    }
    s += "</td></tr>";
  }
  return s + "</table>";
}

std::string coverage_table(const Report& r) {
  const std::vector<CoverageRow> rows = r.coverage();
  if (rows.empty()) return "";
  std::vector<CheckKind> columns;
  for (const CoverageRow& row : rows) {
    for (const auto& [k, v] : row.kinds) {
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
    }
  }
  std::sort(columns.begin(), columns.end());
  std::string s = "<table class=\"coverage\"><tr><th>subject</th>";
  for (CheckKind k : columns) s += "<th>" + markup(check_kind_name(k)) + "</th>";
  s += "</tr>";
  for (const CoverageRow& row : rows) {
    s += "<tr><td class=\"id\">" + id_markup(row.subject) + "</td>";
    for (CheckKind k : columns) {
      const auto cell = std::find_if(row.kinds.begin(), row.kinds.end(), [&](const auto& kv) { return kv.first == k; });
      if (cell == row.kinds.end()) {
        s += "<td class=\"cov none\">-</td>";
        continue;
      }
      s += "<td class=\"cov " + detail::verdict_class(cell->second) + "\">" + std::string(verdict_name(cell->second)) +
           "</td>";
    }
    s += "</tr>";
  }
  return s + "</table>";
}

// ---- parts: a campaign's entries, or a single command's subjects --------------------------------

/// One part of the page, summarized in one row and shown in one collapsible block: a campaign's
/// entry (its checks as the campaign lists them, its own inputs and refusal), or, in any other
/// report, one subject ("projections/attn_qkv", "logits/greedy"; a check without a subject is
/// its own part).
struct Part {
  std::string name;
  std::string command;  ///< the entry's command; "" for a subject
  Report view;          ///< the part's checks (and, for an entry, its inputs and refusal)
  bool entry = false;
};

std::vector<Part> parts_of(const Report& r) {
  std::vector<Part> parts;
  if (!r.entries.empty()) {
    for (std::size_t i = 0; i < r.entries.size(); ++i) {
      const ReportEntry& e = r.entries[i];
      Part p{e.id, e.command, Report{}, true};
      p.view.command = e.report.command;
      p.view.inputs = e.report.inputs;
      p.view.error = e.report.error;
      const std::size_t first = r.first_check(i);
      for (std::size_t k = first; k < first + e.report.checks.size() && k < r.checks.size(); ++k) {
        p.view.checks.push_back(r.checks[k]);
      }
      parts.push_back(std::move(p));
    }
    return parts;
  }
  for (const CheckResult& c : r.checks) {
    const std::string& name = c.subject.empty() ? c.id : c.subject;
    auto it = std::find_if(parts.begin(), parts.end(), [&](const Part& p) { return p.name == name; });
    if (it == parts.end()) {
      parts.push_back(Part{name, "", Report{}, false});
      parts.back().view.command = r.command;
      it = parts.end() - 1;
    }
    it->view.checks.push_back(c);
  }
  return parts;
}

/// FAIL when a check failed or the entry was refused; else PASS when a check passed, SKIP when one
/// was skipped, N/A when all are.
Verdict part_verdict(const Part& p) {
  if (p.view.verdict() == Verdict::kFail) return Verdict::kFail;
  Verdict v = Verdict::kNotApplicable;
  for (const CheckResult& c : p.view.checks) {
    if (c.verdict == Verdict::kPass) v = Verdict::kPass;
    if (c.verdict == Verdict::kSkip && v == Verdict::kNotApplicable) v = Verdict::kSkip;
  }
  return p.entry && v != Verdict::kSkip ? Verdict::kPass : v;
}

/// The check id as the part names it: the part's prefix ("step-000/", "projections/attn/") left out.
std::string short_id(const Part& p, const CheckResult& c) {
  const std::string prefix = p.name + "/";
  return c.id.rfind(prefix, 0) == 0 && c.id.size() > prefix.size() ? c.id.substr(prefix.size()) : c.id;
}

/// The part's worst finding: the refusal, its first failure, else its first skip no policy
/// expects, else its first expected skip; "" when everything passed.
std::string worst_finding(const Part& p) {
  constexpr std::size_t kMaxReason = 240;
  const auto line = [&](const CheckResult& c) {
    std::string reason = c.reason.size() > kMaxReason ? c.reason.substr(0, kMaxReason) + "..." : c.reason;
    return "<b>" + id_markup(short_id(p, c)) + "</b> " + markup(reason);
  };
  if (p.view.error) return "<b>refused</b> " + markup(p.view.error->named_message());
  for (const CheckResult& c : p.view.checks) {
    if (c.failed()) return line(c);
  }
  for (const CheckResult& c : p.view.checks) {
    if (c.verdict == Verdict::kSkip && !c.expected_skip()) return line(c);
  }
  for (const CheckResult& c : p.view.checks) {
    if (c.expected_skip()) return line(c) + " <span class=\"expected\">expected</span>";
  }
  return "";
}

std::string counts_text(const Report& view) {
  const int failed = view.failed_checks(), skipped = view.skipped_checks(), na = view.not_applicable_checks();
  const auto total = static_cast<int>(view.checks.size());
  std::string s = std::to_string(total) + (total == 1 ? " check: " : " checks: ") +
                  std::to_string(total - failed - skipped - na) + " passed";
  if (failed > 0) s += ", " + std::to_string(failed) + " failed";
  if (skipped > 0) s += ", " + std::to_string(skipped) + " skipped";
  if (view.expected_skips() > 0) s += " (" + std::to_string(view.expected_skips()) + " expected)";
  if (na > 0) s += ", " + std::to_string(na) + " not applicable";
  return s;
}

/// The parts' indices, failing parts first, each group in report order.
std::vector<std::size_t> failing_first(const std::vector<Part>& parts) {
  std::vector<std::size_t> order(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(),
                        [&](std::size_t i) { return part_verdict(parts[i]) == Verdict::kFail; });
  return order;
}

std::string summary(const Report& r, const std::vector<Part>& parts) {
  if (parts.empty()) return "";
  const bool entries = !r.entries.empty();
  std::string s =
      "<section id=\"summary\"><h2>Summary</h2><table class=\"summary\"><tr><th></th><th>" +
      std::string(entries ? "entry" : "subject") + "</th>" + (entries ? "<th>command</th>" : "") +
      "<th>checks</th><th>passed</th><th>failed</th><th>skipped</th><th>N/A</th><th>worst finding</th></tr>";
  for (std::size_t i : failing_first(parts)) {
    const Part& p = parts[i];
    const Verdict v = part_verdict(p);
    const int failed = p.view.failed_checks(), skipped = p.view.skipped_checks(), na = p.view.not_applicable_checks();
    const auto total = static_cast<int>(p.view.checks.size());
    const int expected = p.view.expected_skips();
    s += "<tr class=\"part " + detail::verdict_class(v) + "\" data-part=\"" + markup(p.name) + "\" data-verdict=\"" +
         std::string(verdict_name(v)) + "\"><td>" + verdict_badge(v) + "</td><td class=\"id\">" + id_markup(p.name) +
         "</td>" + (entries ? "<td>" + markup(p.command) + "</td>" : "") + "<td class=\"num\">" +
         std::to_string(total) + "</td><td class=\"num\">" + std::to_string(total - failed - skipped - na) +
         "</td><td class=\"num\">" + std::to_string(failed) + "</td><td class=\"num\">" + std::to_string(skipped) +
         (expected > 0 ? " (" + std::to_string(expected) + " expected)" : "") + "</td><td class=\"num\">" +
         std::to_string(na) + "</td><td class=\"worst\">" + worst_finding(p) + "</td></tr>";
  }
  return s + "</table></section>";
}

/// One part as a <details> block: open when it failed, collapsed otherwise. An entry shows its
/// own inputs and coverage; every part its checks (failures first) and evidence sections.
std::string part_block(const Part& p) {
  const Verdict v = part_verdict(p);
  const bool failed = v == Verdict::kFail;
  std::string s = "<details class=\"part " + detail::verdict_class(v) + "\" data-part=\"" + markup(p.name) +
                  "\" data-verdict=\"" + std::string(verdict_name(v)) + "\"" + (failed ? " open" : "") + "><summary>" +
                  verdict_badge(v) + " " + id_markup(p.name) +
                  (p.entry ? " <span class=\"counts\">(" + markup(p.command) + ")</span>" : "") +
                  " <span class=\"counts\">" + counts_text(p.view) + "</span></summary>";
  if (p.entry) s += inputs_table(p.view) + coverage_table(p.view);
  s += checks_table(p.view);
  s += detail::projection_sections(p.view);
  s += detail::witness_sections(p.view);
  s += detail::compare_sections(p.view);
  s += detail::fork_sections(p.view);
  return s + "</details>";
}

/// The parts: failing ones under "Failures", open, then the others collapsed, each group in
/// report order; the failures-only filter hides every passing row of both.
std::string parts_sections(const std::vector<Part>& parts) {
  if (parts.empty()) return "";
  std::string failing, passing;
  std::size_t passing_parts = 0;
  for (std::size_t i : failing_first(parts)) {
    if (part_verdict(parts[i]) == Verdict::kFail) {
      failing += part_block(parts[i]);
    } else {
      passing += part_block(parts[i]);
      ++passing_parts;
    }
  }
  std::string s = "<input type=\"checkbox\" id=\"only-failures\"><label for=\"only-failures\"> failures only</label>";
  if (!failing.empty()) s += "<section id=\"failures\"><h2>Failures</h2>" + failing + "</section>";
  if (!passing.empty()) {
    s += "<section id=\"passing\"><h2>Without failures</h2><p class=\"note\">" + std::to_string(passing_parts) +
         (passing_parts == 1 ? " part" : " parts") + ", collapsed: open one for its checks and plots</p>" + passing +
         "</section>";
  }
  return s;
}

/// An array of objects as a table (columns in order of first appearance), capped.
std::string json_table(const std::string& caption, const Json& list) {
  constexpr std::size_t kMaxRows = 200;
  std::vector<std::string> columns;
  for (const Json& e : list) {
    if (!e.is_object()) continue;
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (std::find(columns.begin(), columns.end(), it.key()) == columns.end()) columns.push_back(it.key());
    }
  }
  std::string s =
      "<table class=\"extra\"><caption>" + caption + " (" + count_text(static_cast<long long>(list.size())) +
      (list.size() > kMaxRows ? ", the first " + std::to_string(kMaxRows) + " shown" : "") + ")</caption><tr>";
  for (const std::string& c : columns) s += "<th>" + markup(c) + "</th>";
  s += "</tr>";
  std::size_t n = 0;
  for (const Json& e : list) {
    if (n++ == kMaxRows) break;
    s += "<tr>";
    if (!e.is_object()) {
      s += "<td colspan=\"" + std::to_string(std::max<std::size_t>(columns.size(), 1)) + "\">" + json_text(e) + "</td>";
    } else {
      for (const std::string& c : columns) s += "<td>" + (e.contains(c) ? json_text(e[c]) : "") + "</td>";
    }
    s += "</tr>";
  }
  return s + "</table>";
}

std::string stats_and_extra(const Report& r) {
  std::string s;
  if (!r.stats.empty()) {
    s += "<table id=\"stats\" class=\"facts\">";
    for (auto it = r.stats.begin(); it != r.stats.end(); ++it) {
      // Timings are the JSON's: without them the page is the same bytes for the same inputs.
      if (it.key().rfind("timing_", 0) == 0) continue;
      s += "<tr><th>" + markup(it.key()) + "</th><td>" + json_text(it.value()) + "</td></tr>";
    }
    s += "</table>";
  }
  for (auto it = r.extra.begin(); it != r.extra.end(); ++it) {
    const Json& v = it.value();
    if (v.is_array()) {
      s += json_table(markup(it.key()), v);
    } else if (v.is_object()) {
      for (auto sub = v.begin(); sub != v.end(); ++sub) {
        if (sub.value().is_array()) s += json_table(markup(it.key()) + ": " + markup(sub.key()), sub.value());
      }
    }
  }
  return s.empty() ? "" : "<section id=\"command-stats\"><h2>Command</h2>" + s + "</section>";
}

}  // namespace

std::string render_html(const Report& report) {
  const std::vector<Part> parts = parts_of(report);
  std::string page = kHead;
  page += "<title>ncert " + markup(report.command) + ": " + std::string(verdict_name(report.verdict())) + "</title>\n";
  page += kStyle;
  page += header(report);
  page += summary(report, parts);
  page += "<section id=\"inputs\"><h2>Inputs</h2>" + inputs_table(report) + "</section>";
  // A campaign's coverage is per entry (in each part); a single command's is one table here.
  if (report.entries.empty()) {
    const std::string coverage = coverage_table(report);
    if (!coverage.empty()) page += "<section id=\"coverage\"><h2>Coverage</h2>" + coverage + "</section>";
  }
  page += parts_sections(parts);
  page += stats_and_extra(report);
  page += "<footer>ncert " + markup_fixed(ncert_version()) + ", command " + markup(report.command) + "</footer>\n";
  page += "</body></html>\n";
  return page;
}

}  // namespace ncert::certify
