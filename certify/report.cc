#include "certify/report.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "certify/hash.h"

namespace ncert::certify {

std::string_view verdict_name(Verdict v) { return v == Verdict::kPass ? "PASS" : "FAIL"; }

std::string_view ncert_version() { return NCERT_VERSION; }

InputHashes::InputHashes(const std::vector<std::string>& paths) : paths_(paths), cursors_(paths.size()) {
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (auto c = FileHashCursor::open(paths[i]); c.ok()) cursors_[i] = std::move(*c);
  }
}

FileHashCursor* InputHashes::cursor(std::size_t i) {
  return i < cursors_.size() && cursors_[i] ? &*cursors_[i] : nullptr;
}

std::vector<InputInfo> InputHashes::finish() {
  std::vector<InputInfo> out(paths_.size());
  const auto n = static_cast<std::ptrdiff_t>(paths_.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    out[k].path = paths_[k];
    if (!cursors_[k]) continue;
    if (auto h = cursors_[k]->finish(); h.ok()) out[k].xxh3_128 = *h;
  }
  cursors_.clear();
  return out;
}

std::vector<InputInfo> describe_inputs(const std::vector<std::string>& paths) { return InputHashes(paths).finish(); }

int Report::failed_checks() const {
  int n = 0;
  for (const CheckResult& c : checks) n += c.verdict == Verdict::kFail;
  return n;
}

Verdict Report::verdict() const {
  return (error.has_value() || failed_checks() > 0) ? Verdict::kFail : Verdict::kPass;
}

int Report::exit_code() const {
  if (error.has_value()) return exit_code_for(error->code());
  return verdict() == Verdict::kPass ? 0 : 1;
}

Report& Report::refuse(const Status& status) {
  error = status;
  checks.push_back({"schema", "schema", Verdict::kFail, status.message(), {}, {}});
  return *this;
}

Json Report::to_json() const {
  Json j = Json::object();
  j["tool"] = "ncert";
  j["version"] = std::string(ncert_version());
  j["command"] = command;
  Json in = Json::array();
  for (const InputInfo& i : inputs) in.push_back({{"path", i.path}, {"xxh3_128", i.xxh3_128}});
  j["inputs"] = in;
  j["verdict"] = std::string(verdict_name(verdict()));
  if (error) {
    j["error"] = {{"code", static_cast<int>(error->code())},
                  {"name", std::string(error_name(error->code()))},
                  {"message", error->message()}};
  }
  Json cs = Json::array();
  for (const CheckResult& c : checks) {
    Json cj = Json::object();
    cj["id"] = c.id;
    cj["kind"] = c.kind;
    cj["verdict"] = std::string(verdict_name(c.verdict));
    cj["reason"] = c.reason;
    cj["stats"] = c.stats;
    if (!c.details.empty()) cj["details"] = c.details;
    cs.push_back(std::move(cj));
  }
  j["checks"] = cs;
  j["stats"] = stats;
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

std::string Report::to_text(bool only_failures) const {
  std::ostringstream os;
  if (!only_failures) {
    for (const std::string& l : preamble) os << l << "\n";
  }
  std::size_t width = 0;
  for (const CheckResult& c : checks) width = std::max(width, c.id.size());
  width = std::min<std::size_t>(width, 56);
  for (const CheckResult& c : checks) {
    if (only_failures && c.verdict == Verdict::kPass) continue;
    os << verdict_name(c.verdict) << "  " << c.id;
    if (c.id.size() < width) os << std::string(width - c.id.size(), ' ');
    os << "  " << c.reason << "\n";
    if (c.verdict == Verdict::kFail || c.always_show_details) {
      for (const std::string& d : c.details) os << "      " << d << "\n";
    }
  }
  if (error) os << "REFUSED  " << error->to_string() << "\n";
  const int failed = failed_checks();
  os << "verdict: " << verdict_name(verdict());
  if (error) {
    os << " (input refused, exit " << exit_code() << ")";
  } else if (failed > 0) {
    os << " (" << failed << " of " << checks.size() << " checks failed)";
  } else {
    os << " (" << checks.size() << " checks passed)";
  }
  os << "\n";
  return os.str();
}

std::string format_f32(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int p = 6; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) return buf;
  }
  return buf;
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int p = 6; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return buf;
}

std::string format_short(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string hex_bits_f32(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", u);
  return buf;
}

std::string hex_bits_u16(std::uint16_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}

}  // namespace ncert::certify
