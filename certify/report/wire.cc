#include "certify/report/wire.h"

#include <cstdint>
#include <type_traits>
#include <utility>

#include "certify/report/evidence_wire.h"
#include "certify/report/printable.h"

namespace ncert::certify {

namespace {

Status bad(const std::string& what) { return Status(ErrorCode::kInvalidArgument, "not a wire check: " + what); }

/// j[key] as T, or a Status naming the key (integers only from JSON integers in T's range).
template <typename T>
Result<T> field(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return bad(std::string("missing ") + key);
  try {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const Json& v = j.at(key);
      const bool fits = v.is_number_unsigned()  ? std::in_range<T>(v.get<std::uint64_t>())
                        : v.is_number_integer() ? std::in_range<T>(v.get<std::int64_t>())
                                                : false;
      if (!fits) return bad(std::string("wrong type for ") + key);
    }
    return j.at(key).get<T>();
  } catch (const Json::exception&) {
    return bad(std::string("wrong type for ") + key);
  }
}

Result<Verdict> parse_verdict(const std::string& s) {
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kSkip, Verdict::kNotApplicable}) {
    if (verdict_name(v) == s) return v;
  }
  return bad("verdict " + s);
}

Json location_json(const Location& l) {
  return Json{{"object", l.object}, {"row", l.row},           {"col", l.col},
              {"slot", l.slot},     {"position", l.position}, {"token", l.token}};
}

Result<Location> location_from(const Json& j) {
  Location l;
  NCERT_ASSIGN_OR_RETURN(l.object, field<std::string>(j, "object"));
  NCERT_ASSIGN_OR_RETURN(l.row, field<Index>(j, "row"));
  NCERT_ASSIGN_OR_RETURN(l.col, field<Index>(j, "col"));
  NCERT_ASSIGN_OR_RETURN(l.slot, field<Index>(j, "slot"));
  NCERT_ASSIGN_OR_RETURN(l.position, field<std::int64_t>(j, "position"));
  NCERT_ASSIGN_OR_RETURN(l.token, field<std::int32_t>(j, "token"));
  return l;
}

}  // namespace

Json status_to_wire(const Status& s) {
  return Json{{"code", static_cast<int>(s.code())}, {"message", s.message()}, {"detail", s.detail()}};
}

Status status_from_wire(const Json& j, Status* out) {
  NCERT_ASSIGN_OR_RETURN(int code, field<int>(j, "code"));
  NCERT_ASSIGN_OR_RETURN(std::string message, field<std::string>(j, "message"));
  NCERT_ASSIGN_OR_RETURN(std::string detail, field<std::string>(j, "detail"));
  const auto c = static_cast<ErrorCode>(code);
  if (code == 0 || error_name(c) == "unknown-code") return bad("error code " + std::to_string(code));
  *out = Status(c, std::move(message)).with_detail(std::move(detail));
  return Status();
}

Json utf8_repaired(Json j) {
  if (j.is_string()) return valid_utf8(j.get_ref<const std::string&>());
  if (j.is_array()) {
    for (Json& e : j) e = utf8_repaired(std::move(e));
    return j;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[valid_utf8(it.key())] = utf8_repaired(std::move(it.value()));
    return out;
  }
  return j;
}

Json check_to_wire(const CheckResult& c) {
  Json w = Json{{"id", c.id},
                {"subject", c.subject},
                {"kind", std::string(check_kind_name(c.kind))},
                {"verdict", std::string(verdict_name(c.verdict))},
                {"reason", c.reason},
                {"details", c.details},
                {"always_show_details", c.always_show_details}};
  if (c.first_failure) w["first_failure"] = location_json(*c.first_failure);
  if (c.policy_match) {
    const PolicyMatch& m = *c.policy_match;
    w["policy_match"] = Json{{"policy", m.policy}, {"rule", m.rule}, {"rule_text", m.rule_text}, {"why", m.why}};
  }
  w["evidence"] = evidence_to_wire(c.evidence);
  return utf8_repaired(std::move(w));
}

Result<CheckResult> check_from_wire(const Json& w) {
  CheckResult c;
  NCERT_ASSIGN_OR_RETURN(c.id, field<std::string>(w, "id"));
  NCERT_ASSIGN_OR_RETURN(c.subject, field<std::string>(w, "subject"));
  NCERT_ASSIGN_OR_RETURN(std::string kind, field<std::string>(w, "kind"));
  const auto k = parse_check_kind(kind);
  if (!k) return bad("kind " + kind);
  c.kind = *k;
  NCERT_ASSIGN_OR_RETURN(std::string verdict, field<std::string>(w, "verdict"));
  NCERT_ASSIGN_OR_RETURN(c.verdict, parse_verdict(verdict));
  NCERT_ASSIGN_OR_RETURN(c.reason, field<std::string>(w, "reason"));
  NCERT_ASSIGN_OR_RETURN(c.details, field<std::vector<std::string>>(w, "details"));
  NCERT_ASSIGN_OR_RETURN(c.always_show_details, field<bool>(w, "always_show_details"));
  if (w.contains("first_failure")) {
    NCERT_ASSIGN_OR_RETURN(Location l, location_from(w.at("first_failure")));
    c.first_failure = std::move(l);
  }
  if (w.contains("policy_match")) {
    const Json& m = w.at("policy_match");
    PolicyMatch pm;
    NCERT_ASSIGN_OR_RETURN(pm.policy, field<std::string>(m, "policy"));
    NCERT_ASSIGN_OR_RETURN(pm.rule, field<std::size_t>(m, "rule"));
    NCERT_ASSIGN_OR_RETURN(pm.rule_text, field<std::string>(m, "rule_text"));
    NCERT_ASSIGN_OR_RETURN(pm.why, field<std::string>(m, "why"));
    c.policy_match = std::move(pm);
  }
  if (!w.contains("evidence")) return bad("missing evidence");
  Result<Evidence> evidence = evidence_from_wire(w.at("evidence"));
  if (!evidence.ok()) return bad(c.id + ": " + evidence.status().message());
  c.evidence = std::move(evidence).value();
  return c;
}

Json checks_to_wire(const std::vector<CheckResult>& checks) {
  Json a = Json::array();
  for (const CheckResult& c : checks) a.push_back(check_to_wire(c));
  return a;
}

Result<std::vector<CheckResult>> checks_from_wire(const Json& wire) {
  if (!wire.is_array()) return bad("checks are not a list");
  std::vector<CheckResult> out;
  for (const Json& w : wire) {
    NCERT_ASSIGN_OR_RETURN(CheckResult c, check_from_wire(w));
    out.push_back(std::move(c));
  }
  return out;
}

Json report_to_wire(const Report& r) {
  Json inputs = Json::array();
  for (const InputInfo& i : r.inputs) inputs.push_back(Json{{"path", i.path}, {"xxh3_128", i.xxh3_128}});
  Json w =
      Json{{"command", r.command}, {"inputs", inputs},       {"checks", checks_to_wire(r.checks)}, {"stats", r.stats},
           {"extra", r.extra},     {"preamble", r.preamble}, {"show_coverage", r.show_coverage}};
  if (r.error) w["error"] = status_to_wire(*r.error);
  // A campaign's entries, only when there are some: the reports of single commands (what a
  // campaign's items send and its journal keeps) stay as they were.
  if (!r.entries.empty()) {
    Json entries = Json::array();
    for (const ReportEntry& e : r.entries) {
      entries.push_back(Json{{"id", e.id}, {"command", e.command}, {"report", report_to_wire(e.report)}});
    }
    w["entries"] = std::move(entries);
  }
  return utf8_repaired(std::move(w));
}

Result<Report> report_from_wire(const Json& w) {
  Report r;
  NCERT_ASSIGN_OR_RETURN(r.command, field<std::string>(w, "command"));
  if (!w.contains("inputs") || !w.at("inputs").is_array()) return bad("missing inputs");
  for (const Json& i : w.at("inputs")) {
    InputInfo info;
    NCERT_ASSIGN_OR_RETURN(info.path, field<std::string>(i, "path"));
    NCERT_ASSIGN_OR_RETURN(info.xxh3_128, field<std::string>(i, "xxh3_128"));
    r.inputs.push_back(std::move(info));
  }
  if (!w.contains("checks")) return bad("missing checks");
  NCERT_ASSIGN_OR_RETURN(r.checks, checks_from_wire(w.at("checks")));
  if (!w.contains("stats") || !w.contains("extra")) return bad("missing stats or extra");
  r.stats = w.at("stats");
  r.extra = w.at("extra");
  NCERT_ASSIGN_OR_RETURN(r.preamble, field<std::vector<std::string>>(w, "preamble"));
  NCERT_ASSIGN_OR_RETURN(r.show_coverage, field<bool>(w, "show_coverage"));
  if (w.contains("error")) {
    Status s;
    NCERT_RETURN_IF_ERROR(status_from_wire(w.at("error"), &s));
    r.error = std::move(s);
  }
  if (w.contains("entries")) {
    if (!w.at("entries").is_array()) return bad("entries are not a list");
    for (const Json& e : w.at("entries")) {
      ReportEntry entry;
      NCERT_ASSIGN_OR_RETURN(entry.id, field<std::string>(e, "id"));
      NCERT_ASSIGN_OR_RETURN(entry.command, field<std::string>(e, "command"));
      if (!e.is_object() || !e.contains("report")) return bad("entry " + entry.id + ": missing report");
      NCERT_ASSIGN_OR_RETURN(entry.report, report_from_wire(e.at("report")));
      r.entries.push_back(std::move(entry));
    }
  }
  return r;
}

}  // namespace ncert::certify
