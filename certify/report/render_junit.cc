#include "certify/report/render_junit.h"

#include <sstream>

#include "certify/report/detail/html_markup.h"
#include "certify/report/printable.h"

namespace ncert::certify {

namespace {

using detail::markup;
using detail::markup_fixed;

/// The same JSON with every string and key valid UTF-8 (invalid bytes as \xNN text, as in the
/// JSON report), so that a name from a corrupt dump cannot stop the writer.
Json utf8_repaired(const Json& j) {
  if (j.is_string()) return valid_utf8(j.get_ref<const std::string&>());
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& e : j) out.push_back(utf8_repaired(e));
    return out;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[valid_utf8(it.key())] = utf8_repaired(it.value());
    return out;
  }
  return j;
}

/// Lines of element text: each line made printable and escaped, joined by real newlines.
std::string text_lines(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (!first) out.push_back('\n');
    first = false;
    out += markup(line);
  }
  return out;
}

/// "projections/attn_qkv" -> "projections.attn_qkv".
std::string dotted(std::string s) {
  for (char& c : s) {
    if (c == '/') c = '.';
  }
  return s;
}

/// The classname and name of a check's testcase.
/// A campaign's checks carry their entry's id before both id and subject (Report::add_entry):
/// a check without a subject has the subject "ENTRY/", and a dump's own checks read "g/schema"
/// of subject "g/dump". Each is named as its command names it, the entry's id before
/// (a review's "cmp." / "cmp/logits/greedy" and "g.dump" / "g/schema").
std::pair<std::string, std::string> testcase_names(const CheckResult& c) {
  const std::string kind(check_kind_name(c.kind));
  const std::string_view subject = c.subject;
  if (!subject.empty() && subject.back() != '/') {
    if (c.id.size() > subject.size() + 1 && c.id.compare(0, subject.size(), subject) == 0 &&
        c.id[subject.size()] == '/') {
      return {dotted(c.subject), c.id.substr(subject.size() + 1)};
    }
    // The folders id and subject share (a campaign entry's id) are the classname's alone.
    std::size_t shared = 0;
    for (std::size_t i = 0; i < c.id.size() && i < subject.size() && c.id[i] == subject[i]; ++i) {
      if (c.id[i] == '/') shared = i + 1;
    }
    const std::string rest = c.id.substr(shared);
    return {dotted(c.subject), c.id == c.subject ? kind : rest};
  }
  return {dotted(c.id), kind};
}

/// The check that Report::refuse() added for the report's error, or -1.
std::ptrdiff_t refusal_index(const Report& r) {
  if (!r.error) return -1;
  for (std::size_t i = r.checks.size(); i-- > 0;) {
    const CheckResult& c = r.checks[i];
    if (c.kind == CheckKind::kSchema && c.id == "schema" && c.failed() && c.reason == r.error->message()) {
      return static_cast<std::ptrdiff_t>(i);
    }
  }
  return -1;
}

/// `j` without its timing_* members, at any depth: a check's stats hold its run time (compare's
/// timing_seconds), and the page must be the same bytes for the same inputs at any thread
/// count, as the HTML is (a review's two runs differed in that line alone).
Json without_timings(Json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (it.key().rfind("timing_", 0) == 0) {
        it = j.erase(it);
      } else {
        *it = without_timings(std::move(*it));
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (Json& v : j) v = without_timings(std::move(v));
  }
  return j;
}

std::string evidence_text(const CheckResult& c) {
  std::string text = c.reason + "\n";
  for (const std::string& d : c.details) text += d + "\n";
  text += "stats: " + utf8_repaired(without_timings(check_json(c)["stats"])).dump(2) + "\n";
  return text;
}

std::string error_element(const Status& error) {
  std::string body = error.to_string();
  if (!error.detail().empty()) body += "\ndetail: " + error.detail();
  return "      <error message=\"" + markup(error.message()) + "\" type=\"" + markup_fixed(error_name(error.code())) +
         "\">" + text_lines(body) + "</error>\n";
}

}  // namespace

std::string render_junit(const Report& r) {
  const std::ptrdiff_t refusal = refusal_index(r);
  const bool lone_error = r.error && refusal < 0;  // an error without its check (not written by ncert)
  const int errors = r.error ? 1 : 0;
  const int failures = r.failed_checks() - (refusal >= 0 ? 1 : 0);
  const int tests = static_cast<int>(r.checks.size()) + (lone_error ? 1 : 0);
  const std::string suite = "ncert " + markup(r.command);
  const std::string counts = " tests=\"" + std::to_string(tests) + "\" failures=\"" + std::to_string(failures) +
                             "\" errors=\"" + std::to_string(errors) + "\"";
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"" + suite + "\"" + counts + ">\n";
  x += "  <testsuite name=\"" + suite + "\"" + counts + " skipped=\"" +
       std::to_string(r.skipped_checks() + r.not_applicable_checks()) + "\">\n";
  x += "    <properties>\n";
  const auto property = [&](const std::string& name, const std::string& escaped_value) {
    x += "      <property name=\"" + name + "\" value=\"" + escaped_value + "\"/>\n";
  };
  property("ncert.version", markup_fixed(ncert_version()));
  property("ncert.command", markup(r.command));
  property("ncert.verdict", std::string(verdict_name(r.verdict())));
  property("ncert.skipped.expected", std::to_string(r.expected_skips()));
  property("ncert.skipped.unexpected", std::to_string(r.skipped_checks() - r.expected_skips()));
  property("ncert.not_applicable", std::to_string(r.not_applicable_checks()));
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    const std::string n = "input." + std::to_string(i + 1);
    property(n + ".path", markup(r.inputs[i].path));
    property(n + ".xxh3_128", markup(r.inputs[i].xxh3_128));
  }
  x += "    </properties>\n";
  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    const CheckResult& c = r.checks[i];
    const auto [classname, name] = testcase_names(c);
    x += "    <testcase classname=\"" + markup(classname) + "\" name=\"" + markup(name) + "\">\n";
    if (static_cast<std::ptrdiff_t>(i) == refusal) {
      x += error_element(*r.error);
    } else if (c.verdict == Verdict::kSkip || c.verdict == Verdict::kNotApplicable) {
      // JUnit has one kind of skip: its type says which this is (expected by a policy rule,
      // unexpected, or not applicable), and the message carries the rule.
      const std::string type = c.verdict == Verdict::kNotApplicable ? "not-applicable"
                               : c.expected_skip()                  ? "expected"
                                                                    : "unexpected";
      const std::string rule = c.policy_match ? "; " + policy_match_text(c) : std::string();
      x += "      <skipped type=\"" + type + "\" message=\"" + markup(c.reason + rule) + "\"/>\n";
    } else if (c.failed()) {
      x += "      <failure message=\"" + markup(c.reason) + "\" type=\"" + markup_fixed(check_kind_name(c.kind)) +
           "\">" + text_lines(evidence_text(c)) + "</failure>\n";
    } else {
      x += "      <system-out>" + markup(c.reason) + "</system-out>\n";
    }
    x += "    </testcase>\n";
  }
  if (lone_error) {
    x += "    <testcase classname=\"dump\" name=\"input\">\n" + error_element(*r.error) + "    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

}  // namespace ncert::certify
