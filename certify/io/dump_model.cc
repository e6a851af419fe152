#include "certify/io/dump_model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace ncert::certify {

// ---- model helpers ------------------------------------------------------------------------

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous:
      return "contiguous";
    case Layout::kCompact:
      return "compact";
    case Layout::kChunked:
      return "chunked";
  }
  return "?";
}

Index DatasetInfo::row_elements() const {
  Index n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

const DatasetInfo* DumpModel::dataset(const std::string& path) const {
  auto it = std::lower_bound(datasets.begin(), datasets.end(), path,
                             [](const DatasetInfo& d, const std::string& p) { return d.path < p; });
  return (it != datasets.end() && it->path == path) ? &*it : nullptr;
}

const GroupInfo* DumpModel::group(const std::string& path) const {
  auto it = std::lower_bound(groups.begin(), groups.end(), path,
                             [](const GroupInfo& g, const std::string& p) { return g.path < p; });
  return (it != groups.end() && it->path == path) ? &*it : nullptr;
}

std::span<const DatasetInfo> DumpModel::datasets_under(const std::string& prefix) const {
  auto first = std::lower_bound(datasets.begin(), datasets.end(), prefix,
                                [](const DatasetInfo& d, const std::string& p) { return d.path < p; });
  auto last = first;
  while (last != datasets.end() && last->path.compare(0, prefix.size(), prefix) == 0) ++last;
  return {first, last};
}

bool DumpModel::refused() const { return !first_error().ok(); }

Status DumpModel::first_error() const { return certify::first_error(findings); }

Status first_error(std::span<const Finding> findings) {
  for (const Finding& f : findings) {
    if (f.severity == Severity::kError) return Status(f.code, f.path + ": " + f.message);
  }
  return Status();
}

std::string AttrValue::kind_name() const {
  switch (kind) {
    case Kind::kString:
      return "string";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kOther:
      return type_description;
  }
  return "?";
}

namespace {
std::string render_double(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  // Shortest form that round-trips: try fewer digits first.
  for (int p = 6; p <= 17; ++p) {
    char tmp[64];
    std::snprintf(tmp, sizeof tmp, "%.*g", p, d);
    if (std::strtod(tmp, nullptr) == d) return tmp;
  }
  return buf;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}
}  // namespace

std::string AttrValue::render() const {
  std::vector<std::string> parts;
  switch (kind) {
    case Kind::kString:
      for (const auto& s : strings) parts.push_back(quote(s));
      break;
    case Kind::kInt:
      for (auto v : ints) parts.push_back(std::to_string(v));
      break;
    case Kind::kFloat:
      for (double v : floats) parts.push_back(render_double(v));
      break;
    case Kind::kOther:
      return "<" + type_description + ">";
  }
  if (scalar && parts.size() == 1) return parts[0];
  std::string out = "[";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + "]";
}

std::optional<std::string> AttrValue::as_string() const {
  if (kind != Kind::kString || strings.size() != 1) return std::nullopt;
  return strings[0];
}

std::optional<double> AttrValue::as_number() const {
  if (kind == Kind::kInt && ints.size() == 1) return static_cast<double>(ints[0]);
  if (kind == Kind::kFloat && floats.size() == 1) return floats[0];
  return std::nullopt;
}

}  // namespace ncert::certify
