// The member rules exported for the Python writer (schema_rules_json(), written by ncert-docgen
// to python/ncert_dump/schema_rules.json) say what the checker does: every rule is in the JSON
// with every field, each condition is exactly rule_applies over every context, each dtype map is
// allowed_dtypes, and each closed value set is what the reference parser accepts, in the order
// of its refusal. tests/unit/cli (GeneratedDocs) then keeps the file equal to this rendering.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "certify/io/schema_rules.h"

namespace ncert::certify {
namespace {

using nlohmann::json;
using reference::Af4Codebook;
using reference::Af4Variant;
using reference::Epilogue;
using reference::WeightFormat;

// The test's own lists of every enumerator (Af4Codebook::kNone included: a segment that is not a
// codebook segment), so that a condition is checked over contexts the exporter did not choose.
constexpr Epilogue kEpilogues[] = {Epilogue::kNone, Epilogue::kBias, Epilogue::kResidual, Epilogue::kBiasResidual};
constexpr WeightFormat kFormats[] = {WeightFormat::kAf4,  WeightFormat::kBf16, WeightFormat::kF32, WeightFormat::kF16,
                                     WeightFormat::kInt8, WeightFormat::kE4m3, WeightFormat::kE5m2};
constexpr reference::XQuantType kXQuants[] = {reference::XQuantType::kNone, reference::XQuantType::kInt8,
                                              reference::XQuantType::kUint8, reference::XQuantType::kE4m3,
                                              reference::XQuantType::kE5m2};
constexpr Af4Variant kVariants[] = {Af4Variant::kAffine, Af4Variant::kCodebook, Af4Variant::kZeroPoint};
constexpr Af4Codebook kCodebooks[] = {Af4Codebook::kNone, Af4Codebook::kNf4, Af4Codebook::kAf4_64,
                                      Af4Codebook::kCustom};
constexpr When kAllWhens[] = {When::kAlways,         When::kEpilogueHasBias,  When::kEpilogueHasResidual,
                              When::kFormatValues,   When::kFormatAf4,        When::kFormatQuantized,
                              When::kFormatScaled,   When::kVariantAffine,    When::kVariantCodebook,
                              When::kCodebookCustom, When::kVariantZeroPoint, When::kXQuant,
                              When::kXQuantInteger};

json exported() { return json::parse(schema_rules_json()); }

std::vector<std::string> strings(const std::vector<std::string_view>& v) { return {v.begin(), v.end()}; }
std::vector<std::string> dtype_strings(const std::vector<DType>& v) {
  std::vector<std::string> out;
  for (DType t : v) out.emplace_back(dtype_name(t));
  return out;
}

/// Whether the JSON condition {"format": [...], ...} holds for a context.
bool holds(const json& condition, const RuleContext& c) {
  const std::map<std::string, std::string> value = {
      {"epilogue", std::string(reference::epilogue_name(c.epilogue))},
      {"format", std::string(reference::weight_format_name(c.format))},
      {"variant", std::string(reference::af4_variant_name(c.variant))},
      {"codebook",
       c.codebook == Af4Codebook::kNone ? std::string() : std::string(reference::af4_codebook_name(c.codebook))},
      {"x_quant", std::string(reference::x_quant_name(c.x_quant))}};
  for (const auto& [attribute, values] : condition.items()) {
    const auto names = values.get<std::vector<std::string>>();
    if (std::find(names.begin(), names.end(), value.at(attribute)) == names.end()) return false;
  }
  return true;
}

template <typename F>
void for_each_context(F f) {
  for (Epilogue e : kEpilogues) {
    for (WeightFormat fm : kFormats) {
      for (Af4Variant v : kVariants) {
        for (Af4Codebook cb : kCodebooks) {
          for (reference::XQuantType q : kXQuants) f(RuleContext{e, fm, v, cb, q});
        }
      }
    }
  }
}

TEST(SchemaRulesJson, EveryRuleWithEveryField) {
  const json j = exported();
  EXPECT_NE(j.at("generated_by").get<std::string>().find("ncert-docgen"), std::string::npos);
  EXPECT_EQ(j.at("version").get<std::int64_t>(), kDumpFormatVersion);
  EXPECT_EQ(j.at("schema").get<std::string>(), "ncert-dump");
  const json& members = j.at("members");
  ASSERT_EQ(members.size(), member_rules().size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    const MemberRule& r = member_rules()[i];
    const json& m = members[i];
    const std::string where = std::string(container_path(r.container)) + " " + std::string(r.name);
    EXPECT_EQ(m.at("container").get<std::string>(), container_name(r.container)) << where;
    EXPECT_EQ(m.at("kind").get<std::string>(), member_kind_name(r.kind)) << where;
    EXPECT_EQ(m.at("name").get<std::string>(), r.name) << where;
    EXPECT_EQ(m.at("required").get<bool>(), r.required) << where;
    EXPECT_EQ(m.at("when").get<std::string>(), when_name(r.when)) << where;
    if (r.type == TypeRule::kInt && r.min_value != INT64_MIN) {
      EXPECT_EQ(m.at("min_value").get<std::int64_t>(), r.min_value) << where;
    } else {
      EXPECT_TRUE(m.at("min_value").is_null()) << where;
    }
    if (r.values.names.empty()) {
      EXPECT_TRUE(m.at("values").is_null()) << where;
    } else {
      EXPECT_EQ(m.at("values").at("names").get<std::vector<std::string>>(), strings(r.values.names)) << where;
      EXPECT_EQ(m.at("values").at("refused").get<std::string>(), error_name(r.values.refused)) << where;
      EXPECT_EQ(m.at("values").at("what").get<std::string>(), r.values.what) << where;
    }
    EXPECT_EQ(m.at("dtypes").get<std::vector<std::string>>(), dtype_strings(r.dtypes)) << where;
    std::vector<std::string> dims;
    for (Dim d : r.dims) dims.emplace_back(dim_name(d));
    EXPECT_EQ(m.at("dims").get<std::vector<std::string>>(), dims) << where;
    if (r.absent == Absent::kRefused) {
      EXPECT_EQ(m.at("refused").get<std::string>(), error_name(r.refused)) << where;
    } else {
      EXPECT_TRUE(m.at("refused").is_null()) << where;
    }
    EXPECT_EQ(m.at("skips").get<std::vector<std::string>>(), strings(r.skips)) << where;
    // The condition, over every context (the exporter's lists and Af4Codebook::kNone).
    for_each_context([&](const RuleContext& c) {
      EXPECT_EQ(holds(m.at("if"), c), rule_applies(r.when, c))
          << where << " under epilogue " << reference::epilogue_name(c.epilogue) << ", format "
          << reference::weight_format_name(c.format);
    });
  }
}

TEST(SchemaRulesJson, ConditionsAreExactlyRuleApplies) {
  for (When w : kAllWhens) {
    json condition = json::object();
    for (const auto& [attribute, values] : when_condition(w)) condition[std::string(attribute)] = strings(values);
    int holding = 0;
    for_each_context([&](const RuleContext& c) {
      EXPECT_EQ(holds(condition, c), rule_applies(w, c)) << when_name(w);
      holding += rule_applies(w, c);
    });
    EXPECT_GT(holding, 0) << when_name(w) << " holds nowhere";
  }
  // Spot values by hand: a custom codebook needs af4, codebook and custom; a bias any epilogue
  // with one.
  const auto custom = when_condition(When::kCodebookCustom);
  ASSERT_EQ(custom.size(), 3u);
  EXPECT_EQ(custom[2].first, "codebook");
  EXPECT_EQ(strings(custom[2].second), std::vector<std::string>{"custom"});
  const auto bias = when_condition(When::kEpilogueHasBias);
  ASSERT_EQ(bias.size(), 1u);
  EXPECT_EQ(strings(bias[0].second), (std::vector<std::string>{"bias", "bias+residual"}));
  EXPECT_TRUE(when_condition(When::kAlways).empty());
}

TEST(SchemaRulesJson, DtypeMapsAreAllowedDtypes) {
  const json j = exported();
  const auto dataset = [&](Container c, std::string_view name) -> const json& {
    for (const json& m : j.at("members")) {
      if (m.at("container") == container_name(c) && m.at("kind") == "dataset" && m.at("name") == name) return m;
    }
    ADD_FAILURE() << "no " << name;
    return j;
  };
  const json& codes = dataset(Container::kSegment, "codes").at("dtype_by");
  EXPECT_EQ(codes.at("of"), "packing");
  EXPECT_EQ(codes.at("map"), json::parse(R"({"u32-lsb": ["u32"], "u8-msb": ["u8"], "u8-lsb": ["u8"]})"));
  const json& values = dataset(Container::kSegment, "values").at("dtype_by");
  EXPECT_EQ(values.at("map"),
            json::parse(R"({"bf16": ["bf16"], "f32": ["f32"], "f16": ["f16"], "int8": ["i8"], "e4m3": ["e4m3"],
                            "e5m2": ["e5m2"]})"));
  const json& quantized = dataset(Container::kProjection, "x_quantized").at("dtype_by");
  EXPECT_EQ(quantized.at("of"), "x_quant");
  EXPECT_EQ(quantized.at("map"),
            json::parse(R"({"int8": ["i8"], "uint8": ["u8"], "e4m3": ["e4m3"], "e5m2": ["e5m2"]})"));
  EXPECT_EQ(dataset(Container::kProjection, "x_zero_points").at("dtype_by").at("map"),
            json::parse(R"({"int8": ["i8"], "uint8": ["u8"]})"));
  EXPECT_EQ(j.at("dims").at("K/x_quant_group"), "known");
  const json& y = dataset(Container::kProjection, "y_unpacked").at("dtype_by");
  EXPECT_EQ(y.at("of"), "output_dtype");
  EXPECT_EQ(y.at("map").at("bf16"), json::parse(R"(["bf16"])"));
  EXPECT_EQ(dataset(Container::kSegment, "biases").at("dtype_by").at("of"), "scales");
  const json& zero_points = dataset(Container::kSegment, "zero_points").at("dtype_by");
  EXPECT_EQ(zero_points.at("of"), "zero_point_packing");
  EXPECT_EQ(zero_points.at("map"),
            json::parse(R"({"u8": ["u8"], "u32-lsb": ["u32"], "u8-msb": ["u8"], "u8-lsb": ["u8"]})"));
  EXPECT_EQ(j.at("dims").at("Z"), "known");
  EXPECT_EQ(j.at("af4_zero_points_per_element"), json::parse(R"({"u8": 1, "u32-lsb": 8, "u8-msb": 2, "u8-lsb": 2})"));
  EXPECT_TRUE(dataset(Container::kProjection, "x").at("dtype_by").is_null());
  // Shapes: the AF4 code columns and the prompt length are never known when a file is opened;
  // a custom codebook has 16 entries; 32-bit words hold 8 four-bit codes, bytes 2.
  EXPECT_EQ(j.at("dims").at("K/c"), "any");
  EXPECT_EQ(j.at("dims").at("P0"), "any");
  EXPECT_EQ(j.at("dims").at("M"), "known");
  EXPECT_EQ(j.at("dims").at("16"), 16);
  EXPECT_EQ(j.at("af4_codes_per_element"), json::parse(R"({"u32-lsb": 8, "u8-msb": 2, "u8-lsb": 2})"));
}

// Each closed value set is the reference parser's: every name parses, and any other value is refused with the set's
// error and the sentence the Python writer builds from it (`<what> "<value>" is not one of <names>`).
TEST(SchemaRulesJson, ValueSetsAreTheParsers) {
  using Parse = std::function<Status(std::string_view)>;
  const auto status = [](const auto& result) { return result.status(); };
  const std::map<std::string_view, Parse> parsers = {
      {"output_dtype", [&](std::string_view s) { return status(reference::parse_output_dtype(s)); }},
      {"epilogue", [&](std::string_view s) { return status(reference::parse_epilogue(s)); }},
      {"residual_at", [&](std::string_view s) { return status(reference::parse_residual_at(s)); }},
      {"output_rounding", [&](std::string_view s) { return status(reference::parse_output_rounding(s)); }},
      {"format", [&](std::string_view s) { return status(reference::parse_weight_format(s)); }},
      {"variant", [&](std::string_view s) { return status(reference::parse_af4_variant(s)); }},
      {"codebook", [&](std::string_view s) { return status(reference::parse_af4_codebook(s)); }},
      {"packing", [&](std::string_view s) { return status(reference::parse_af4_packing(s)); }},
      {"dequant", [&](std::string_view s) { return status(reference::parse_dequant(s)); }},
      {"dequant_op", [&](std::string_view s) { return status(reference::parse_dequant_op(s)); }},
      {"zero_point_packing", [&](std::string_view s) { return status(reference::parse_zero_point_packing(s)); }},
      {"x_quant", [&](std::string_view s) { return status(reference::parse_x_quant(s)); }},
      {"x_quant_rounding", [&](std::string_view s) { return status(reference::parse_x_quant_rounding(s)); }},
      {"bias_at", [&](std::string_view s) { return status(reference::parse_bias_at(s)); }},
  };
  int enumerated = 0, single = 0;
  for (const MemberRule& r : member_rules()) {
    if (r.values.names.empty()) continue;
    ASSERT_EQ(r.kind, MemberKind::kAttribute) << r.name;
    ASSERT_EQ(r.type, TypeRule::kString) << r.name;
    if (r.values.what.empty()) {
      // `op`, `tie_break`: one value, compared by the checker itself.
      EXPECT_EQ(r.values.names.size(), 1u) << r.name;
      EXPECT_EQ(r.values.refused, ErrorCode::kAttributeInvalid) << r.name;
      ++single;
      continue;
    }
    const auto it = parsers.find(r.name);
    ASSERT_NE(it, parsers.end()) << "no parser known for " << r.name;
    std::string listed;
    for (std::string_view name : r.values.names) {
      EXPECT_TRUE(it->second(name).ok()) << r.name << " = " << name;
      listed += (listed.empty() ? "" : ", ") + std::string(name);
    }
    const Status refused = it->second("int7");
    EXPECT_EQ(refused.code(), r.values.refused) << r.name;
    EXPECT_EQ(refused.message(), std::string(r.values.what) + " \"int7\" is not one of " + listed) << r.name;
    ++enumerated;
  }
  EXPECT_EQ(enumerated, 14);
  EXPECT_EQ(single, 2);
}

}  // namespace
}  // namespace ncert::certify
