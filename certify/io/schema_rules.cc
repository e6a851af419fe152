#include "certify/io/schema_rules.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace ncert::certify {

namespace {

using reference::Af4Codebook;
using reference::Af4Packing;
using reference::Af4Variant;
using reference::Dequant;
using reference::DequantOp;
using reference::Epilogue;
using reference::OutputRounding;
using reference::ResidualAt;
using reference::WeightFormat;
using reference::ZeroPointPacking;

// Every value of the enums attributes parse to, in the order the parsers' refusals list them
// (tests/dump_format holds each list to its parser: every name parses back, any other value is
// refused with this order in the sentence).
constexpr DType kOutputDtypes[] = {DType::kF32, DType::kBf16, DType::kF16};
constexpr Epilogue kEpilogues[] = {Epilogue::kNone, Epilogue::kBias, Epilogue::kResidual, Epilogue::kBiasResidual};
constexpr ResidualAt kResidualAts[] = {ResidualAt::kF32, ResidualAt::kOutput};
constexpr reference::BiasAt kBiasAts[] = {reference::BiasAt::kEnd, reference::BiasAt::kStart};
constexpr OutputRounding kOutputRoundings[] = {OutputRounding::kNearestEven, OutputRounding::kTowardZero,
                                               OutputRounding::kAny};
constexpr WeightFormat kFormats[] = {WeightFormat::kAf4,  WeightFormat::kBf16, WeightFormat::kF32, WeightFormat::kF16,
                                     WeightFormat::kInt8, WeightFormat::kE4m3, WeightFormat::kE5m2};
constexpr Af4Variant kVariants[] = {Af4Variant::kAffine, Af4Variant::kCodebook, Af4Variant::kZeroPoint};
constexpr Af4Codebook kCodebooks[] = {Af4Codebook::kNf4, Af4Codebook::kAf4_64, Af4Codebook::kCustom};
constexpr Af4Packing kPackings[] = {Af4Packing::kU32Lsb, Af4Packing::kU8Msb, Af4Packing::kU8Lsb};
constexpr Dequant kDequants[] = {Dequant::kExact, Dequant::kF32, Dequant::kOutput, Dequant::kFolded};
constexpr DequantOp kDequantOps[] = {DequantOp::kFma, DequantOp::kMulAdd, DequantOp::kEither, DequantOp::kSubMul,
                                     DequantOp::kFused};
constexpr reference::XQuantType kXQuants[] = {reference::XQuantType::kInt8, reference::XQuantType::kUint8,
                                              reference::XQuantType::kE4m3, reference::XQuantType::kE5m2};
// The contexts when_condition enumerates: kNone (not declared) first.
constexpr reference::XQuantType kXQuantContexts[] = {reference::XQuantType::kNone, reference::XQuantType::kInt8,
                                                     reference::XQuantType::kUint8, reference::XQuantType::kE4m3,
                                                     reference::XQuantType::kE5m2};
constexpr reference::XQuantRounding kXQuantRoundings[] = {reference::XQuantRounding::kNearestEven,
                                                          reference::XQuantRounding::kNearestAway};
constexpr ZeroPointPacking kZeroPointPackings[] = {ZeroPointPacking::kU8, ZeroPointPacking::kU32Lsb,
                                                   ZeroPointPacking::kU8Msb, ZeroPointPacking::kU8Lsb};

template <typename E, std::size_t N>
ValueSet named(const E (&all)[N], std::string_view (*name)(E), ErrorCode refused, std::string_view what) {
  ValueSet v;
  for (E e : all) v.names.push_back(name(e));
  v.refused = refused;
  v.what = what;
  return v;
}
/// The one value the format defines (`op`, `tie_break`): anything else is attribute-invalid.
ValueSet only(std::string_view value) { return ValueSet{{value}, ErrorCode::kAttributeInvalid, ""}; }

constexpr Container kRoot = Container::kRoot;
constexpr Container kProj = Container::kProjection;
constexpr Container kSeg = Container::kSegment;
constexpr Container kRun = Container::kLogitsRun;
constexpr Container kTensor = Container::kTensor;

// Row builders: the table below reads like the page's tables, one line per member.
MemberRule attribute(Container c, std::string_view name, bool required, TypeRule type,
                     std::int64_t min_value = INT64_MIN) {
  MemberRule r;
  r.container = c;
  r.name = name;
  r.kind = MemberKind::kAttribute;
  r.required = required;
  r.type = type;
  r.min_value = min_value;
  r.shape = ShapeKind::kScalar;
  if (required) {
    r.absent = Absent::kRefused;
    r.refused = ErrorCode::kMissingAttribute;
  }
  return r;
}

MemberRule dataset(Container c, std::string_view name, bool required, TypeRule type, std::vector<DType> dtypes,
                   std::vector<Dim> dims) {
  MemberRule r;
  r.container = c;
  r.name = name;
  r.kind = MemberKind::kDataset;
  r.required = required;
  r.type = type;
  r.dtypes = std::move(dtypes);
  r.shape = ShapeKind::kDims;
  r.dims = std::move(dims);
  if (required) {
    r.absent = Absent::kRefused;
    r.refused = ErrorCode::kMissingMember;
  }
  return r;
}

MemberRule when(MemberRule r, When w) {
  r.when = w;
  return r;
}
MemberRule skips(MemberRule r, std::vector<std::string_view> ids) {
  r.absent = Absent::kSkip;
  r.skips = std::move(ids);
  return r;
}
MemberRule defaults(MemberRule r, std::string_view value) {
  r.absent = Absent::kDefault;
  r.default_value = value;
  return r;
}
MemberRule one_of(MemberRule r, ValueSet values) {
  r.values = std::move(values);
  return r;
}

constexpr bool kRequired = true;
constexpr bool kOptional = false;
constexpr TypeRule kStr = TypeRule::kString;
constexpr TypeRule kInt = TypeRule::kInt;
constexpr TypeRule kList = TypeRule::kDTypes;

// One builder per part of the page (§2-§3, §4, §5-§6), in the page's order.
void root_and_projection_rules(std::vector<MemberRule>& t) {
  using D = DType;
  using enum Dim;
  // ---- §2 the root ----
  MemberRule schema = attribute(kRoot, "ncert_schema", kRequired, kStr);
  schema.refused = ErrorCode::kSchemaUnknown;  // not an ncert file at all, rather than a broken one
  t.push_back(schema);
  t.push_back(attribute(kRoot, "ncert_schema_version", kRequired, kInt));
  t.push_back(attribute(kRoot, "engine", kRequired, kStr));
  t.push_back(attribute(kRoot, "build", kRequired, kStr));
  t.push_back(attribute(kRoot, "model", kOptional, kStr));
  t.push_back(attribute(kRoot, "device", kOptional, kStr));

  // ---- §3 a projection: attributes, then members ----
  t.push_back(one_of(attribute(kProj, "op", kRequired, kStr), only("linear")));
  t.push_back(attribute(kProj, "k", kRequired, kInt, 1));
  t.push_back(attribute(kProj, "n", kRequired, kInt, 1));
  t.push_back(defaults(attribute(kProj, "in_stride", kOptional, kInt, 1), "`k`"));
  t.push_back(defaults(attribute(kProj, "out_stride", kOptional, kInt, 1), "`n`"));
  t.push_back(attribute(kProj, "accumulator", kRequired, kStr));
  t.push_back(one_of(attribute(kProj, "output_dtype", kRequired, kStr),
                     named(kOutputDtypes, dtype_name, ErrorCode::kOutputDtypeUnknown, "output_dtype")));
  t.push_back(one_of(attribute(kProj, "epilogue", kRequired, kStr),
                     named(kEpilogues, reference::epilogue_name, ErrorCode::kEpilogueUnknown, "epilogue")));
  t.push_back(one_of(defaults(attribute(kProj, "residual_at", kOptional, kStr), "`f32`"),
                     named(kResidualAts, reference::residual_at_name, ErrorCode::kOutputDtypeUnknown, "residual_at")));
  t.push_back(one_of(defaults(attribute(kProj, "bias_at", kOptional, kStr), "`end`"),
                     named(kBiasAts, reference::bias_at_name, ErrorCode::kEpilogueUnknown, "bias_at")));
  t.push_back(one_of(
      defaults(attribute(kProj, "output_rounding", kOptional, kStr), "`rne`"),
      named(kOutputRoundings, reference::output_rounding_name, ErrorCode::kOutputRoundingUnknown, "output_rounding")));
  t.push_back(skips(attribute(kProj, "k_walk", kOptional, kStr), {"walk"}));
  t.push_back(attribute(kProj, "layer", kOptional, kInt));
  t.push_back(skips(attribute(kProj, "role", kOptional, kStr), {"intervals"}));
  t.push_back(skips(attribute(kProj, "logits_run", kOptional, kStr), {"intervals"}));
  t.push_back(defaults(attribute(kProj, "requests", kOptional, kInt, 1), "length of `commit_counts`"));
  t.push_back(skips(attribute(kProj, "block_rows", kOptional, kInt, 1), {"request-guards"}));
  t.push_back(skips(attribute(kProj, "cap", kOptional, kInt, 0), {"request-guards"}));
  t.push_back(attribute(kProj, "weights_xxh3", kOptional, kStr));
  t.push_back(one_of(attribute(kProj, "x_quant", kOptional, kStr),
                     named(kXQuants, reference::x_quant_name, ErrorCode::kXQuantUnknown, "x_quant")));
  t.push_back(when(defaults(attribute(kProj, "x_quant_group", kOptional, kInt, 1), "`k`"), When::kXQuant));
  t.push_back(
      one_of(when(defaults(attribute(kProj, "x_quant_rounding", kOptional, kStr), "`rne`"), When::kXQuant),
             named(kXQuantRoundings, reference::x_quant_rounding_name, ErrorCode::kXQuantUnknown, "x_quant_rounding")));
  t.push_back(dataset(kProj, "x", kRequired, kList, {D::kF32, D::kBf16, D::kF16}, {kM, kInStride}));
  t.push_back(when(dataset(kProj, "x_quantized", kRequired, TypeRule::kXQuantDtype, {}, {kM, kK}), When::kXQuant));
  t.push_back(when(dataset(kProj, "x_scales", kRequired, kList, {D::kF32, D::kF16, D::kBf16}, {kM, kXScaleColumns}),
                   When::kXQuant));
  t.push_back(
      when(defaults(dataset(kProj, "x_zero_points", kOptional, TypeRule::kXQuantDtype, {}, {kM, kXScaleColumns}), "0"),
           When::kXQuantInteger));
  MemberRule weight;
  weight.container = kProj;
  weight.name = "weight";
  weight.kind = MemberKind::kGroup;
  weight.required = true;
  weight.type = TypeRule::kGroup;
  weight.shape = ShapeKind::kGroup;
  weight.absent = Absent::kRefused;
  weight.refused = ErrorCode::kMissingMember;
  t.push_back(weight);
  t.push_back(
      when(dataset(kProj, "bias", kRequired, kList, {D::kF32, D::kBf16, D::kF16}, {kN}), When::kEpilogueHasBias));
  t.push_back(when(dataset(kProj, "residual", kRequired, kList, {D::kF32, D::kBf16, D::kF16}, {kM, kOutStride}),
                   When::kEpilogueHasResidual));
  t.push_back(dataset(kProj, "selector", kRequired, kList, {D::kI32}, {kP}));
  t.push_back(skips(dataset(kProj, "commit_counts", kOptional, kList, {D::kI32}, {kR}), {"request-guards"}));
  t.push_back(
      skips(dataset(kProj, "y_unpacked", kOptional, TypeRule::kOutputDtype, {}, {kM, kOutStride}), {"intervals"}));
  t.push_back(skips(dataset(kProj, "y_packed", kOptional, TypeRule::kOutputDtype, {}, {kM, kOutStride}),
                    {"identity", "untouched"}));
  t.push_back(dataset(kProj, "y_compact", kOptional, TypeRule::kOutputDtype, {}, {kP, kOutStride}));
  t.push_back(
      skips(dataset(kProj, "y_before", kOptional, TypeRule::kOutputDtype, {}, {kM, kOutStride}), {"untouched"}));
}

void segment_rules(std::vector<MemberRule>& t) {
  using D = DType;
  using enum Dim;
  // ---- §4 a weight segment ----
  t.push_back(one_of(attribute(kSeg, "format", kRequired, kStr),
                     named(kFormats, reference::weight_format_name, ErrorCode::kFormatUnknown, "format")));
  t.push_back(attribute(kSeg, "row_begin", kRequired, kInt, 0));
  t.push_back(attribute(kSeg, "row_end", kRequired, kInt, 0));
  t.push_back(when(dataset(kSeg, "values", kRequired, TypeRule::kFormatDtype, {}, {kRows, kK}), When::kFormatValues));
  t.push_back(when(attribute(kSeg, "group_size", kRequired, kInt, 1), When::kFormatQuantized));
  t.push_back(when(defaults(attribute(kSeg, "scale_rows", kOptional, kInt, 1), "1"), When::kFormatScaled));
  t.push_back(one_of(when(attribute(kSeg, "variant", kRequired, kStr), When::kFormatAf4),
                     named(kVariants, reference::af4_variant_name, ErrorCode::kAf4VariantUnknown, "AF4 variant")));
  t.push_back(one_of(when(attribute(kSeg, "codebook", kRequired, kStr), When::kVariantCodebook),
                     named(kCodebooks, reference::af4_codebook_name, ErrorCode::kAf4CodebookUnknown, "AF4 codebook")));
  t.push_back(one_of(when(attribute(kSeg, "packing", kRequired, kStr), When::kFormatAf4),
                     named(kPackings, reference::af4_packing_name, ErrorCode::kAf4PackingUnknown, "AF4 packing")));
  t.push_back(
      one_of(when(defaults(attribute(kSeg, "zero_point_packing", kOptional, kStr), "`u8`"), When::kVariantZeroPoint),
             named(kZeroPointPackings, reference::zero_point_packing_name, ErrorCode::kAf4PackingUnknown,
                   "AF4 zero_point_packing")));
  t.push_back(one_of(when(defaults(attribute(kSeg, "dequant", kOptional, kStr), "`exact`"), When::kFormatQuantized),
                     named(kDequants, reference::dequant_name, ErrorCode::kAf4DequantUnknown, "AF4 dequant")));
  t.push_back(
      one_of(when(defaults(attribute(kSeg, "dequant_op", kOptional, kStr), "`either` (`sub-mul` for `zero-point`)"),
                  When::kFormatAf4),
             named(kDequantOps, reference::dequant_op_name, ErrorCode::kDequantOpUnknown, "AF4 dequant_op")));
  t.push_back(
      when(dataset(kSeg, "codes", kRequired, TypeRule::kCodesByPacking, {}, {kRows, kCodeColumns}), When::kFormatAf4));
  t.push_back(when(dataset(kSeg, "scales", kRequired, kList, {D::kBf16, D::kF16, D::kF32}, {kScaleRows, kScaleColumns}),
                   When::kFormatQuantized));
  t.push_back(
      when(dataset(kSeg, "biases", kRequired, TypeRule::kAsScales, {}, {kRows, kScaleColumns}), When::kVariantAffine));
  t.push_back(when(dataset(kSeg, "codebook", kRequired, kList, {D::kF32}, {k16}), When::kCodebookCustom));
  t.push_back(
      when(dataset(kSeg, "zero_points", kRequired, TypeRule::kZeroPointsByPacking, {}, {kRows, kZeroPointColumns}),
           When::kVariantZeroPoint));
}

void run_and_tensor_rules(std::vector<MemberRule>& t) {
  using D = DType;
  using enum Dim;
  // ---- §5 a logits run ----
  t.push_back(attribute(kRun, "vocab", kRequired, kInt, 1));
  t.push_back(one_of(defaults(attribute(kRun, "tie_break", kOptional, kStr), "`lowest`"), only("lowest")));
  t.push_back(attribute(kRun, "prompt", kOptional, kStr));
  t.push_back(dataset(kRun, "tokens", kRequired, kList, {D::kI32}, {kT}));
  t.push_back(dataset(kRun, "logits", kRequired, kList, {D::kF32, D::kBf16, D::kF16}, {kT, kV}));
  t.push_back(defaults(dataset(kRun, "positions", kOptional, kList, {D::kI64}, {kT}), "row index"));
  t.push_back(dataset(kRun, "prompt_tokens", kOptional, kList, {D::kI32}, {kP0}));

  // ---- §6 a state tensor ----
  MemberRule tensor = dataset(kTensor, "", kOptional, kList, {D::kF32, D::kF16, D::kBf16, D::kE4m3, D::kE5m2}, {});
  tensor.shape = ShapeKind::kAnyRank;
  t.push_back(tensor);
  t.push_back(defaults(attribute(kTensor, "compare", kOptional, kStr), "`bitwise`"));
}

std::vector<MemberRule> build_rules() {
  std::vector<MemberRule> t;
  root_and_projection_rules(t);
  segment_rules(t);
  run_and_tensor_rules(t);
  return t;
}

std::string join(const std::vector<std::string_view>& parts, std::string_view sep) {
  std::string s;
  for (std::string_view p : parts) {
    if (!s.empty()) s += sep;
    s += p;
  }
  return s;
}

std::string_view when_text(When w) {
  switch (w) {
    case When::kAlways:
      return "";
    case When::kEpilogueHasBias:
      return "`epilogue` has a bias";
    case When::kEpilogueHasResidual:
      return "`epilogue` has a residual";
    case When::kFormatValues:
      return "`format` is `bf16`, `f32`, `f16`, `int8`, `e4m3` or `e5m2`";
    case When::kFormatAf4:
      return "`format` is `af4`";
    case When::kFormatQuantized:
      return "`format` is `af4`, `int8`, `e4m3` or `e5m2`";
    case When::kFormatScaled:
      return "`format` is `int8`, `e4m3` or `e5m2`";
    case When::kVariantAffine:
      return "`variant` is `affine`";
    case When::kVariantCodebook:
      return "`variant` is `codebook`";
    case When::kVariantZeroPoint:
      return "`variant` is `zero-point`";
    case When::kCodebookCustom:
      return "`codebook` is `custom`";
    case When::kXQuant:
      return "`x_quant` is given";
    case When::kXQuantInteger:
      return "`x_quant` is `int8` or `uint8`";
  }
  return "";
}

}  // namespace

std::string_view container_path(Container c) {
  switch (c) {
    case Container::kRoot:
      return "/";
    case Container::kProjection:
      return "/projections/<name>";
    case Container::kSegment:
      return "/projections/<name>/weight/<segment>";
    case Container::kLogitsRun:
      return "/logits/<run>";
    case Container::kTensor:
      return "/tensors/<name>";
  }
  return "";
}

std::string_view member_kind_name(MemberKind k) {
  switch (k) {
    case MemberKind::kAttribute:
      return "attribute";
    case MemberKind::kDataset:
      return "dataset";
    case MemberKind::kGroup:
      return "group";
  }
  return "";
}

std::string_view dim_name(Dim d) {
  switch (d) {
    case Dim::kM:
      return "M";
    case Dim::kK:
      return "K";
    case Dim::kN:
      return "N";
    case Dim::kP:
      return "P";
    case Dim::kR:
      return "R";
    case Dim::kInStride:
      return "in_stride";
    case Dim::kOutStride:
      return "out_stride";
    case Dim::kRows:
      return "rows";
    case Dim::kCodeColumns:
      return "K/c";
    case Dim::kScaleColumns:
      return "K/group_size";
    case Dim::kScaleRows:
      return "⌈rows/scale_rows⌉";
    case Dim::kZeroPointColumns:
      return "Z";
    case Dim::kXScaleColumns:
      return "K/x_quant_group";
    case Dim::kT:
      return "T";
    case Dim::kV:
      return "V";
    case Dim::kP0:
      return "P0";
    case Dim::k16:
      return "16";
  }
  return "";
}

std::string_view dim_origin(Dim d) {
  switch (d) {
    case Dim::kM:
      return "M: the rows of x";
    case Dim::kK:
      return "K: attribute k";
    case Dim::kN:
      return "N: attribute n";
    case Dim::kP:
      return "P: the length of selector";
    case Dim::kR:
      return "R: attribute requests, else the length of commit_counts";
    case Dim::kInStride:
      return "in_stride: attribute in_stride, k when absent";
    case Dim::kOutStride:
      return "out_stride: attribute out_stride, n when absent";
    case Dim::kRows:
      return "rows: row_end - row_begin, row_end exclusive";
    case Dim::kScaleColumns:
      return "K/group_size: one scale per group of group_size weights along K";
    case Dim::kXScaleColumns:
      return "K/x_quant_group: one scale per group of x_quant_group activations along K";
    case Dim::kT:
      return "T: the length of tokens";
    case Dim::kV:
      return "V: attribute vocab";
    case Dim::kCodeColumns:
    case Dim::kScaleRows:
    case Dim::kZeroPointColumns:
    case Dim::kP0:
    case Dim::k16:
      return "";
  }
  return "";
}

std::string shape_text(const std::vector<Index>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + (shape[i] < 0 ? std::string("*") : std::to_string(shape[i]));
  }
  return s + "]";
}

std::string shape_mismatch_text(const std::vector<Index>& shape, const std::vector<Index>& expected,
                                const std::vector<Dim>* dims) {
  // Where each extent that did not match comes from: "[31, 64]" alone invites deleting a
  // weight row where row_end was written inclusive.
  std::string origins;
  for (std::size_t i = 0; dims && shape.size() == expected.size() && i < expected.size() && i < dims->size(); ++i) {
    if (expected[i] < 0 || expected[i] == shape[i]) continue;
    const std::string_view origin = dim_origin((*dims)[i]);
    if (!origin.empty()) origins += (origins.empty() ? " (" : "; ") + std::string(origin);
  }
  return "shape " + shape_text(shape) + " but the attributes require " + shape_text(expected) +
         (origins.empty() ? "" : origins + ")");
}

bool rule_applies(When w, const RuleContext& c) {
  switch (w) {
    case When::kAlways:
      return true;
    case When::kEpilogueHasBias:
      return reference::has_bias(c.epilogue);
    case When::kEpilogueHasResidual:
      return reference::has_residual(c.epilogue);
    case When::kFormatValues:
      return c.format != WeightFormat::kAf4;
    case When::kFormatAf4:
      return c.format == WeightFormat::kAf4;
    case When::kFormatQuantized:
      return c.format == WeightFormat::kAf4 || reference::is_scaled_format(c.format);
    case When::kFormatScaled:
      return reference::is_scaled_format(c.format);
    case When::kVariantAffine:
      return c.format == WeightFormat::kAf4 && c.variant == Af4Variant::kAffine;
    case When::kVariantCodebook:
      return c.format == WeightFormat::kAf4 && c.variant == Af4Variant::kCodebook;
    case When::kVariantZeroPoint:
      return c.format == WeightFormat::kAf4 && c.variant == Af4Variant::kZeroPoint;
    case When::kCodebookCustom:
      return c.format == WeightFormat::kAf4 && c.variant == Af4Variant::kCodebook && c.codebook == Af4Codebook::kCustom;
    case When::kXQuant:
      return c.x_quant != reference::XQuantType::kNone;
    case When::kXQuantInteger:
      return reference::x_quant_integer(c.x_quant);
  }
  return false;
}

std::span<const MemberRule> member_rules() {
  static const std::vector<MemberRule> rules = build_rules();
  return rules;
}

const MemberRule& member_rule(Container c, MemberKind kind, std::string_view name) {
  for (const MemberRule& r : member_rules()) {
    if (r.container == c && r.kind == kind && r.name == name) return r;
  }
  std::fprintf(stderr, "no member rule for %s %s \"%.*s\"\n", std::string(container_path(c)).c_str(),
               std::string(member_kind_name(kind)).c_str(), static_cast<int>(name.size()), name.data());
  NCERT_ASSERT(false, "every member the checker reads has a rule");
  return member_rules().front();
}

bool is_member_name(Container c, std::string_view name) {
  return std::any_of(member_rules().begin(), member_rules().end(), [&](const MemberRule& r) {
    return r.container == c && r.kind != MemberKind::kAttribute && r.name == name;
  });
}

std::vector<DType> allowed_dtypes(const MemberRule& rule, const TypeContext& c) {
  switch (rule.type) {
    case TypeRule::kDTypes:
      return rule.dtypes;
    case TypeRule::kOutputDtype:
      return {c.output};
    case TypeRule::kFormatDtype:
      return {reference::weight_values_dtype(c.format)};
    case TypeRule::kCodesByPacking:
      return {c.packing == Af4Packing::kU32Lsb ? DType::kU32 : DType::kU8};
    case TypeRule::kAsScales:
      return {c.scales};
    case TypeRule::kZeroPointsByPacking:
      return {c.zero_point_packing == ZeroPointPacking::kU32Lsb ? DType::kU32 : DType::kU8};
    case TypeRule::kXQuantDtype:
      return {reference::x_quant_storage(c.x_quant)};
    case TypeRule::kString:
    case TypeRule::kInt:
    case TypeRule::kGroup:
      return {};
  }
  return {};
}

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string names;
  for (DType t : dtypes) names += std::string(names.empty() ? "" : " or ") + std::string(dtype_name(t));
  return names;
}

std::string dtype_prose(const std::vector<DType>& dtypes) {
  std::string out;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    out += std::string(i == 0 ? "" : i + 1 == dtypes.size() ? " or " : ", ") + std::string(dtype_name(dtypes[i]));
  }
  return out;
}

std::vector<Index> expected_shape(const MemberRule& rule, const ShapeSymbols& s) {
  std::vector<Index> out;
  for (Dim d : rule.dims) {
    switch (d) {
      case Dim::kM:
        out.push_back(s.m);
        break;
      case Dim::kK:
        out.push_back(s.k);
        break;
      case Dim::kN:
        out.push_back(s.n);
        break;
      case Dim::kP:
        out.push_back(s.p);
        break;
      case Dim::kR:
        out.push_back(s.r);
        break;
      case Dim::kInStride:
        out.push_back(s.in_stride);
        break;
      case Dim::kOutStride:
        out.push_back(s.out_stride);
        break;
      case Dim::kRows:
        out.push_back(s.rows);
        break;
      case Dim::kCodeColumns:
        out.push_back(-1);
        break;  // geometry guard 309
      case Dim::kScaleColumns:
        out.push_back(s.scale_columns);
        break;
      case Dim::kScaleRows:
        out.push_back(s.scale_rows);
        break;
      case Dim::kZeroPointColumns:
        out.push_back(s.zero_point_columns);
        break;
      case Dim::kXScaleColumns:
        out.push_back(s.x_scale_columns);
        break;
      case Dim::kT:
        out.push_back(s.t);
        break;
      case Dim::kV:
        out.push_back(s.v);
        break;
      case Dim::kP0:
        out.push_back(-1);
        break;  // defined by prompt_tokens itself
      case Dim::k16:
        out.push_back(16);
        break;
    }
  }
  return out;
}

std::string_view container_name(Container c) {
  switch (c) {
    case Container::kRoot:
      return "root";
    case Container::kProjection:
      return "projection";
    case Container::kSegment:
      return "segment";
    case Container::kLogitsRun:
      return "logits_run";
    case Container::kTensor:
      return "tensor";
  }
  return "";
}

std::string_view when_name(When w) {
  switch (w) {
    case When::kAlways:
      return "always";
    case When::kEpilogueHasBias:
      return "epilogue-has-bias";
    case When::kEpilogueHasResidual:
      return "epilogue-has-residual";
    case When::kFormatValues:
      return "format-values";
    case When::kFormatAf4:
      return "format-af4";
    case When::kFormatQuantized:
      return "format-quantized";
    case When::kFormatScaled:
      return "format-scaled";
    case When::kVariantAffine:
      return "variant-affine";
    case When::kVariantCodebook:
      return "variant-codebook";
    case When::kVariantZeroPoint:
      return "variant-zero-point";
    case When::kCodebookCustom:
      return "codebook-custom";
    case When::kXQuant:
      return "x-quant";
    case When::kXQuantInteger:
      return "x-quant-integer";
  }
  return "";
}

std::vector<std::pair<std::string_view, std::vector<std::string_view>>> when_condition(When w) {
  // 4 epilogues x 3 formats x 3 variants x 3 codebooks x 5 quantizers = 540 contexts: for each
  // attribute, the values that occur in a context where `w` holds; an attribute whose every value
  // occurs is left out (the condition does not depend on it).
  std::vector<bool> epilogue(std::size(kEpilogues)), format(std::size(kFormats)), variant(std::size(kVariants)),
      codebook(std::size(kCodebooks)), x_quant(std::size(kXQuantContexts));
  for (std::size_t e = 0; e < epilogue.size(); ++e) {
    for (std::size_t f = 0; f < format.size(); ++f) {
      for (std::size_t v = 0; v < variant.size(); ++v) {
        for (std::size_t c = 0; c < codebook.size(); ++c) {
          for (std::size_t q = 0; q < x_quant.size(); ++q) {
            const RuleContext context{kEpilogues[e], kFormats[f], kVariants[v], kCodebooks[c], kXQuantContexts[q]};
            if (!rule_applies(w, context)) continue;
            epilogue[e] = format[f] = variant[v] = codebook[c] = x_quant[q] = true;
          }
        }
      }
    }
  }
  std::vector<std::pair<std::string_view, std::vector<std::string_view>>> out;
  const auto restrict = [&](std::string_view attribute, const std::vector<bool>& holds, auto name_of) {
    if (std::all_of(holds.begin(), holds.end(), [](bool b) { return b; })) return;
    std::vector<std::string_view> names;
    for (std::size_t i = 0; i < holds.size(); ++i) {
      if (holds[i]) names.push_back(name_of(i));
    }
    out.emplace_back(attribute, std::move(names));
  };
  restrict("epilogue", epilogue, [](std::size_t i) { return reference::epilogue_name(kEpilogues[i]); });
  restrict("format", format, [](std::size_t i) { return reference::weight_format_name(kFormats[i]); });
  restrict("variant", variant, [](std::size_t i) { return reference::af4_variant_name(kVariants[i]); });
  restrict("codebook", codebook, [](std::size_t i) { return reference::af4_codebook_name(kCodebooks[i]); });
  restrict("x_quant", x_quant, [](std::size_t i) { return reference::x_quant_name(kXQuantContexts[i]); });
  return out;
}

RuleRow rule_row(const MemberRule& r) {
  RuleRow row;
  row.member = r.name.empty() ? std::string("(the tensor)") : "`" + std::string(r.name) + "`";
  row.kind = member_kind_name(r.kind);
  row.presence = r.required ? "required" : "optional";
  if (r.when != When::kAlways) row.presence += " if " + std::string(when_text(r.when));
  switch (r.type) {
    case TypeRule::kString:
      row.dtype = "string";
      break;
    case TypeRule::kInt:
      row.dtype = r.min_value == INT64_MIN ? std::string("int") : "int ≥ " + std::to_string(r.min_value);
      break;
    case TypeRule::kDTypes: {
      std::vector<std::string_view> names;
      for (DType d : r.dtypes) names.push_back(dtype_name(d));
      row.dtype = join(names, ", ");
      break;
    }
    case TypeRule::kOutputDtype:
      row.dtype = "`output_dtype`";
      break;
    case TypeRule::kFormatDtype:
      row.dtype = "`format`";
      break;
    case TypeRule::kCodesByPacking:
      row.dtype = "u32 or u8, by `packing`";
      break;
    case TypeRule::kAsScales:
      row.dtype = "as `scales`";
      break;
    case TypeRule::kZeroPointsByPacking:
      row.dtype = "u8 or u32, by `zero_point_packing`";
      break;
    case TypeRule::kXQuantDtype:
      row.dtype = r.when == When::kXQuantInteger ? "i8 or u8, by `x_quant`" : "i8, u8, e4m3 or e5m2, by `x_quant`";
      break;
    case TypeRule::kGroup:
      row.dtype = "—";
      break;
  }
  switch (r.shape) {
    case ShapeKind::kScalar:
      row.shape = "scalar";
      break;
    case ShapeKind::kGroup:
      row.shape = "—";
      break;
    case ShapeKind::kAnyRank:
      row.shape = "any";
      break;
    case ShapeKind::kDims: {
      std::vector<std::string_view> names;
      for (Dim d : r.dims) names.push_back(dim_name(d));
      row.shape = "[" + join(names, ", ") + "]";
      break;
    }
  }
  switch (r.absent) {
    case Absent::kRefused:
      row.absent =
          "refused " + std::to_string(static_cast<int>(r.refused)) + " (" + std::string(error_name(r.refused)) + ")";
      break;
    case Absent::kSkip: {
      std::string s;
      for (std::string_view id : r.skips) s += std::string(s.empty() ? "" : ", ") + "`" + std::string(id) + "`";
      row.absent = "SKIP " + s;
      break;
    }
    case Absent::kDefault:
      row.absent = "default " + std::string(r.default_value);
      break;
    case Absent::kNone:
      row.absent = "none";
      break;
  }
  return row;
}

}  // namespace ncert::certify
