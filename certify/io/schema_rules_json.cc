// The member rules (schema_rules.cc) as the JSON the Python writer loads: the table itself, plus
// what the checker derives from it in code and the writer needs as data (conditions as
// conjunctions, the dtype a context-dependent type rule resolves to, which shape symbols are
// known when a file is opened, AF4 codes per stored element). Hand-written JSON with a fixed key
// order, one rule per line, so that a changed rule is a one-line diff of the generated file.
#include <string>

#include "certify/io/dump_reader.h"
#include "certify/io/schema_rules.h"

namespace ncert::certify {

namespace {

constexpr Dim kAllDims[] = {Dim::kM,
                            Dim::kK,
                            Dim::kN,
                            Dim::kP,
                            Dim::kR,
                            Dim::kInStride,
                            Dim::kOutStride,
                            Dim::kRows,
                            Dim::kCodeColumns,
                            Dim::kScaleColumns,
                            Dim::kScaleRows,
                            Dim::kZeroPointColumns,
                            Dim::kXScaleColumns,
                            Dim::kT,
                            Dim::kV,
                            Dim::kP0,
                            Dim::k16};

// An AF4 code is 4 bits (reference/af4.h): a stored element of b bytes holds 8b/4 codes.
constexpr int kAf4CodeBits = 4;

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[(ch >> 4) & 0xf];
      out += kHex[ch & 0xf];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

template <typename Range, typename Name>
std::string list(const Range& items, Name name) {
  std::string out = "[";
  for (const auto& item : items) out += (out.size() > 1 ? ", " : "") + quoted(name(item));
  return out + "]";
}
std::string names(const std::vector<std::string_view>& items) {
  return list(items, [](std::string_view s) { return s; });
}
std::string dtype_names(const std::vector<DType>& items) {
  return list(items, [](DType t) { return dtype_name(t); });
}

std::string_view type_name(TypeRule t) {
  switch (t) {
    case TypeRule::kString:
      return "string";
    case TypeRule::kInt:
      return "int";
    case TypeRule::kDTypes:
      return "dtypes";
    case TypeRule::kOutputDtype:
      return "output_dtype";
    case TypeRule::kFormatDtype:
      return "format";
    case TypeRule::kCodesByPacking:
      return "codes_by_packing";
    case TypeRule::kAsScales:
      return "as_scales";
    case TypeRule::kZeroPointsByPacking:
      return "zero_points_by_packing";
    case TypeRule::kXQuantDtype:
      return "x_quant";
    case TypeRule::kGroup:
      return "group";
  }
  return "";
}

std::string_view shape_name(ShapeKind s) {
  switch (s) {
    case ShapeKind::kScalar:
      return "scalar";
    case ShapeKind::kGroup:
      return "group";
    case ShapeKind::kAnyRank:
      return "any_rank";
    case ShapeKind::kDims:
      return "dims";
  }
  return "";
}

std::string_view absent_name(Absent a) {
  switch (a) {
    case Absent::kRefused:
      return "refused";
    case Absent::kSkip:
      return "skip";
    case Absent::kDefault:
      return "default";
    case Absent::kNone:
      return "none";
  }
  return "";
}

const ValueSet& values_of(Container c, std::string_view attribute) {
  return member_rule(c, MemberKind::kAttribute, attribute).values;
}

/// {"of": <what the type depends on>, "map": {<its value>: [<dtypes>], ...}}, by evaluating
/// allowed_dtypes over every value; "null" for a rule whose dtypes do not depend on a context.
std::string dtype_by(const MemberRule& rule) {
  std::string of;
  std::vector<std::pair<std::string_view, TypeContext>> cases;
  switch (rule.type) {
    case TypeRule::kOutputDtype:
      of = "output_dtype";
      for (std::string_view name : values_of(Container::kProjection, "output_dtype").names) {
        TypeContext c;
        c.output = *parse_dtype(name);
        cases.emplace_back(name, c);
      }
      break;
    case TypeRule::kFormatDtype:
      of = "format";
      for (const auto& [attribute, formats] : when_condition(rule.when)) {
        if (attribute != "format") continue;
        for (std::string_view name : formats) {
          TypeContext c;
          c.format = *reference::parse_weight_format(name);
          cases.emplace_back(name, c);
        }
      }
      break;
    case TypeRule::kCodesByPacking:
      of = "packing";
      for (std::string_view name : values_of(Container::kSegment, "packing").names) {
        TypeContext c;
        c.packing = *reference::parse_af4_packing(name);
        cases.emplace_back(name, c);
      }
      break;
    case TypeRule::kAsScales:
      of = "scales";
      for (DType t : member_rule(Container::kSegment, MemberKind::kDataset, "scales").dtypes) {
        TypeContext c;
        c.scales = t;
        cases.emplace_back(dtype_name(t), c);
      }
      break;
    case TypeRule::kZeroPointsByPacking:
      of = "zero_point_packing";
      for (std::string_view name : values_of(Container::kSegment, "zero_point_packing").names) {
        TypeContext c;
        c.zero_point_packing = *reference::parse_zero_point_packing(name);
        cases.emplace_back(name, c);
      }
      break;
    case TypeRule::kXQuantDtype:
      of = "x_quant";
      for (std::string_view name : values_of(Container::kProjection, "x_quant").names) {
        TypeContext c;
        c.x_quant = *reference::parse_x_quant(name);
        if (!rule_applies(rule.when, RuleContext{.x_quant = c.x_quant})) continue;
        cases.emplace_back(name, c);
      }
      break;
    case TypeRule::kString:
    case TypeRule::kInt:
    case TypeRule::kDTypes:
    case TypeRule::kGroup:
      return "null";
  }
  std::string map;
  for (const auto& [name, context] : cases) {
    map += (map.empty() ? "" : ", ") + quoted(name) + ": " + dtype_names(allowed_dtypes(rule, context));
  }
  return "{\"of\": " + quoted(of) + ", \"map\": {" + map + "}}";
}

std::string condition(When w) {
  std::string out;
  for (const auto& [attribute, values] : when_condition(w)) {
    out += (out.empty() ? "" : ", ") + quoted(attribute) + ": " + names(values);
  }
  return "{" + out + "}";
}

std::string value_set(const ValueSet& v) {
  if (v.names.empty()) return "null";
  return "{\"names\": " + names(v.names) + ", \"refused\": " + quoted(error_name(v.refused)) +
         ", \"what\": " + quoted(v.what) + "}";
}

std::string member_line(const MemberRule& r) {
  std::string s = "{\"container\": " + quoted(container_name(r.container));
  s += ", \"kind\": " + quoted(member_kind_name(r.kind));
  s += ", \"name\": " + quoted(r.name);
  s += ", \"required\": " + std::string(r.required ? "true" : "false");
  s += ", \"when\": " + quoted(when_name(r.when));
  s += ", \"if\": " + condition(r.when);
  s += ", \"type\": " + quoted(type_name(r.type));
  s += ", \"min_value\": " +
       (r.type == TypeRule::kInt && r.min_value != INT64_MIN ? std::to_string(r.min_value) : std::string("null"));
  s += ", \"values\": " + value_set(r.values);
  s += ", \"dtypes\": " + dtype_names(r.dtypes);
  s += ", \"dtype_by\": " + dtype_by(r);
  s += ", \"shape\": " + quoted(shape_name(r.shape));
  s += ", \"dims\": " + list(r.dims, dim_name);
  s += ", \"absent\": " + quoted(absent_name(r.absent));
  s += ", \"refused\": " + (r.absent == Absent::kRefused ? quoted(error_name(r.refused)) : std::string("null"));
  s += ", \"skips\": " + names(r.skips);
  s += ", \"default\": " + (r.absent == Absent::kDefault ? quoted(r.default_value) : std::string("null"));
  return s + "}";
}

/// "known": the checker resolves it from the container when the file is opened; "any": never at
/// open time (a guard or the member itself decides); a number: a fixed extent.
std::string dim_status(Dim d) {
  MemberRule probe;
  probe.dims = {d};
  const Index unknown = expected_shape(probe, ShapeSymbols{})[0];
  if (unknown >= 0) return std::to_string(unknown);
  ShapeSymbols all;
  all.m = all.k = all.n = all.p = all.r = all.in_stride = all.out_stride = all.rows = 1;
  all.scale_columns = all.scale_rows = all.zero_point_columns = all.x_scale_columns = all.t = all.v = 1;
  return expected_shape(probe, all)[0] < 0 ? "\"any\"" : "\"known\"";
}

}  // namespace

std::string schema_rules_json() {
  std::string s = "{\n";
  s += "  \"generated_by\": " +
       quoted(
           "ncert-docgen from the member rules of certify/io/schema_rules.cc (schema_rules_json); do not edit: "
           "change the table there and run `ncert-docgen write`") +
       ",\n";
  s += "  \"schema\": " + quoted(ReaderOptions{}.schema) + ",\n";
  s += "  \"version\": " + std::to_string(kDumpFormatVersion) + ",\n";
  std::string dims;
  for (Dim d : kAllDims) dims += (dims.empty() ? "" : ", ") + quoted(dim_name(d)) + ": " + dim_status(d);
  s += "  \"dims\": {" + dims + "},\n";
  std::string origins;
  for (Dim d : kAllDims) {
    if (!dim_origin(d).empty())
      origins += (origins.empty() ? "" : ", ") + quoted(dim_name(d)) + ": " + quoted(dim_origin(d));
  }
  s += "  \"dim_origins\": {" + origins + "},\n";
  std::string per_element;
  const MemberRule& codes = member_rule(Container::kSegment, MemberKind::kDataset, "codes");
  for (std::string_view name : values_of(Container::kSegment, "packing").names) {
    TypeContext c;
    c.packing = *reference::parse_af4_packing(name);
    const int bits = 8 * dtype_size(allowed_dtypes(codes, c).front());
    per_element += (per_element.empty() ? "" : ", ") + quoted(name) + ": " + std::to_string(bits / kAf4CodeBits);
  }
  s += "  \"af4_codes_per_element\": {" + per_element + "},\n";
  // Zero points: one per byte for u8, else packed like codes (4 bits each).
  std::string zero_points;
  const MemberRule& zp = member_rule(Container::kSegment, MemberKind::kDataset, "zero_points");
  for (std::string_view name : values_of(Container::kSegment, "zero_point_packing").names) {
    TypeContext c;
    c.zero_point_packing = *reference::parse_zero_point_packing(name);
    const int bits = 8 * dtype_size(allowed_dtypes(zp, c).front());
    const int per = c.zero_point_packing == reference::ZeroPointPacking::kU8 ? 1 : bits / kAf4CodeBits;
    zero_points += (zero_points.empty() ? "" : ", ") + quoted(name) + ": " + std::to_string(per);
  }
  s += "  \"af4_zero_points_per_element\": {" + zero_points + "},\n";
  s += "  \"members\": [\n";
  const auto rules = member_rules();
  for (std::size_t i = 0; i < rules.size(); ++i) {
    s += "    " + member_line(rules[i]) + (i + 1 < rules.size() ? ",\n" : "\n");
  }
  s += "  ]\n}\n";
  return s;
}

}  // namespace ncert::certify
