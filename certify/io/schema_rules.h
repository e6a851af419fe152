// This header defines the member rules of the dump format (versions 1 and 2) as a table: for each kind of container
// (the root, a projection, a weight segment, a logits run, a state tensor) every attribute,
// dataset and group it may hold, whether it is required (and under which condition), the element
// types and the shape it must have in the format's symbols (M, K, N, P, R, in_stride, ...), and
// what its absence does: a refusal with its error code, a named SKIP, a default, or nothing.
//
// The schema checker (schema.cc) takes presence, element types and shapes from this table, and
// docs/dump-format.md prints it: tests/dump_format compares the page's member tables with
// rule_row() entry by entry, so the page and the checker cannot drift apart.
//
// The same table is exported as data for the Python writer (python/ncert_dump/schema_rules.json,
// written by ncert-docgen from schema_rules_json()): the writer validates with these rows instead
// of a copy kept by hand, and a test fails when the file differs from what this table renders.
//
// Conventions: a shape dimension the checker cannot know when the file is opened resolves to -1
// ("any extent"); the column counts of AF4 codes and scales are checked by the geometry guard
// 309 when the projection is checked, not here. No HDF5 types.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reference/af4.h"
#include "reference/dtype.h"
#include "reference/linear_spec.h"
#include "reference/status.h"

namespace ncert::certify {

/// The largest extent or count an attribute may declare (shape-limit beyond): 2^32 - 1,
/// thousands of times any real model's (vocabularies reach 2^18, K and N 2^17). Every other
/// extent comes from a stored dataset's dims, which the survey bounds by what the file holds; so
/// the sizes the memory estimate forms from a declared one (a reference block: K x 64 columns x
/// 28 bytes, 2^43 at most) stay far below 2^64 and the budget check sees an honest figure, never
/// a saturated one. The reader and the C++ writer both hold integer attributes to it.
inline constexpr Index kMaxShapeValue = (Index{1} << 32) - 1;

/// The newest value of the root's ncert_schema_version this build reads (§2), and the oldest:
/// every version in between is read, each with only the members and values it defines.
inline constexpr std::int64_t kDumpFormatVersion = 2;
inline constexpr std::int64_t kOldestDumpFormatVersion = 1;

/// The kinds of object that hold members (docs/dump-format.md §2-6).
enum class Container : std::uint8_t { kRoot, kProjection, kSegment, kLogitsRun, kTensor };
inline constexpr Container kAllContainers[] = {Container::kRoot, Container::kProjection, Container::kSegment,
                                               Container::kLogitsRun, Container::kTensor};
/// How the page names a container: "/", "/projections/<name>", ".../weight/<segment>", ...
std::string_view container_path(Container c);

enum class MemberKind : std::uint8_t { kAttribute, kDataset, kGroup };
std::string_view member_kind_name(MemberKind k);  ///< "attribute", "dataset", "group"

/// When a member is read at all. Outside its condition a member is not read (a dataset present
/// anyway is noted and ignored where the page says so).
enum class When : std::uint8_t {
  kAlways,
  kEpilogueHasBias,      ///< epilogue = bias or bias+residual
  kEpilogueHasResidual,  ///< epilogue = residual or bias+residual
  kFormatValues,         ///< segment format other than af4: a `values` dataset
  kFormatAf4,            ///< segment format = af4
  kFormatQuantized,      ///< segment format = af4, int8, e4m3 or e5m2 (codes times scales)
  kFormatScaled,         ///< segment format = int8, e4m3 or e5m2
  kVariantAffine,        ///< AF4 variant = affine
  kVariantCodebook,      ///< AF4 variant = codebook
  kVariantZeroPoint,     ///< AF4 variant = zero-point
  kCodebookCustom,       ///< AF4 codebook = custom
  kXQuant,               ///< x_quant declared (any quantizer)
  kXQuantInteger,        ///< x_quant = int8 or uint8
};

/// What the conditions depend on, as far as the checker has parsed the container.
struct RuleContext {
  reference::Epilogue epilogue = reference::Epilogue::kNone;
  reference::WeightFormat format = reference::WeightFormat::kBf16;
  reference::Af4Variant variant = reference::Af4Variant::kAffine;
  reference::Af4Codebook codebook = reference::Af4Codebook::kNone;
  reference::XQuantType x_quant = reference::XQuantType::kNone;
};
bool rule_applies(When when, const RuleContext& context);

/// The element type a member must have.
enum class TypeRule : std::uint8_t {
  kString,               ///< attribute: one string
  kInt,                  ///< attribute: one integer, at least MemberRule::min_value
  kDTypes,               ///< dataset: one of MemberRule::dtypes
  kOutputDtype,          ///< dataset: the projection's output_dtype
  kFormatDtype,          ///< dataset: the segment's format (bf16 or f32)
  kCodesByPacking,       ///< dataset: u32 for packing u32-lsb, u8 for u8-msb and u8-lsb
  kAsScales,             ///< dataset: the type of the segment's scales
  kZeroPointsByPacking,  ///< dataset: u32 for zero_point_packing u32-lsb, u8 for u8, u8-msb, u8-lsb
  kXQuantDtype,          ///< dataset: i8, u8, e4m3 or e5m2, by the projection's x_quant
  kGroup,                ///< group: no element type
};

/// What the type rules depend on.
struct TypeContext {
  DType output = DType::kF32;
  reference::WeightFormat format = reference::WeightFormat::kBf16;
  reference::Af4Packing packing = reference::Af4Packing::kU32Lsb;
  DType scales = DType::kBf16;
  reference::ZeroPointPacking zero_point_packing = reference::ZeroPointPacking::kU8;
  reference::XQuantType x_quant = reference::XQuantType::kNone;
};

/// One dimension of a shape, in the format's symbols (docs/dump-format.md §1).
enum class Dim : std::uint8_t {
  kM,                 ///< rows of x
  kK,                 ///< attribute k
  kN,                 ///< attribute n
  kP,                 ///< physical slots: length of selector
  kR,                 ///< request slots: attribute requests (else length of commit_counts)
  kInStride,          ///< attribute in_stride (default k)
  kOutStride,         ///< attribute out_stride (default n)
  kRows,              ///< segment rows: row_end - row_begin
  kCodeColumns,       ///< K/c, c = 8 codes per u32 or 2 per u8 (guard 309)
  kScaleColumns,      ///< K/group_size (guard 309)
  kScaleRows,         ///< ceil(rows/scale_rows): rows for AF4, blocks of scale_rows for scaled formats
  kZeroPointColumns,  ///< Z: K/group_size zero points one per byte, ceil(K/group_size / c) packed
  kXScaleColumns,     ///< K/x_quant_group (guard 309)
  kT,                 ///< emitted tokens: length of tokens
  kV,                 ///< attribute vocab
  kP0,                ///< prompt length: length of prompt_tokens
  k16,                ///< 16 codebook entries
};
std::string_view dim_name(Dim d);  ///< "M", "K", ..., "K/c", "K/group_size", "Z", "16"
/// Where a dimension's extent comes from, said in a shape refusal beside the extent it did not
/// match ("rows: row_end - row_begin, row_end exclusive"); "" where the name says it.
std::string_view dim_origin(Dim d);
/// "[4, *, 16]": a shape or an expected one, -1 (any extent) as "*".
std::string shape_text(const std::vector<Index>& shape);
/// The shape refusal's text, for the reader and the writers alike: "shape [5, 16] but the
/// attributes require [4, 16] (rows: row_end - row_begin, row_end exclusive)"; -1 in `expected`
/// is any extent ("*"), and `dims` (the rule's, when known) adds where each extent that did not
/// match comes from.
std::string shape_mismatch_text(const std::vector<Index>& shape, const std::vector<Index>& expected,
                                const std::vector<Dim>* dims);

/// The values of the symbols the checker knows so far; -1 = not known (any extent accepted).
struct ShapeSymbols {
  Index m = -1, k = -1, n = -1, p = -1, r = -1, in_stride = -1, out_stride = -1, rows = -1;
  Index scale_columns = -1;       ///< the scales' column count, once scales are read (for biases)
  Index scale_rows = -1;          ///< ceil(rows / scale_rows) (rows for AF4)
  Index zero_point_columns = -1;  ///< Z of the segment's zero_point_packing, once scales are read
  Index x_scale_columns = -1;     ///< K/x_quant_group when x_quant_group divides K
  Index t = -1, v = -1;
};

enum class ShapeKind : std::uint8_t { kScalar, kGroup, kAnyRank, kDims };

/// What the absence of a member does (alone, every other member present).
enum class Absent : std::uint8_t {
  kRefused,  ///< the dump is refused (exit 3) with MemberRule::refused
  kSkip,     ///< checks are reported SKIP: MemberRule::skips, suffixes of report check ids
  kDefault,  ///< MemberRule::default_value applies
  kNone,     ///< no check is lost (a label, or data another command uses)
};

/// The closed set of values a string attribute may take. Enumerated attributes list the names
/// of the reference enum they parse to (reference/linear_spec.h, af4.h), in the order the
/// parser's refusal lists them (a test holds the two together); `op` and `tie_break` have one
/// value each, which the checker compares itself.
struct ValueSet {
  std::vector<std::string_view> names;  ///< empty: any string (or a grammar a parser checks)
  ErrorCode refused = ErrorCode::kOk;   ///< the error of any other value
  /// How the refusal names the attribute: `<what> "v" is not one of a, b`; "" for the one-value
  /// form `<name> = "v"; only "a" is defined`.
  std::string_view what;
};

struct MemberRule {
  Container container = Container::kRoot;
  std::string_view name;  ///< "" for the state tensor itself
  MemberKind kind = MemberKind::kAttribute;
  bool required = false;  ///< when `when` holds
  When when = When::kAlways;
  TypeRule type = TypeRule::kString;
  std::vector<DType> dtypes;           ///< kDTypes, in the order error messages list them
  std::int64_t min_value = INT64_MIN;  ///< kInt
  ShapeKind shape = ShapeKind::kScalar;
  std::vector<Dim> dims;  ///< kDims
  Absent absent = Absent::kNone;
  ErrorCode refused = ErrorCode::kOk;   ///< kRefused
  std::vector<std::string_view> skips;  ///< kSkip
  std::string_view default_value;       ///< kDefault, as the page prints it
  ValueSet values;                      ///< kString
};

/// Every rule, container by container, in the order of the page's tables.
std::span<const MemberRule> member_rules();
/// The rule of one member; asserts that it exists (a checker asking for an unknown rule is a bug).
const MemberRule& member_rule(Container c, MemberKind kind, std::string_view name);
/// Whether `name` is a dataset or group member of the container (for unknown-member notes).
bool is_member_name(Container c, std::string_view name);

/// The dtypes a dataset member accepts in this context (empty for attributes and groups).
std::vector<DType> allowed_dtypes(const MemberRule& rule, const TypeContext& context);
/// "f32 or bf16": how error messages list the accepted dtypes.
std::string dtype_list(const std::vector<DType>& dtypes);
/// "f32, f16 or bf16": the accepted dtypes in a sentence.
std::string dtype_prose(const std::vector<DType>& dtypes);
/// The expected extents of a dataset member (-1 = any extent).
std::vector<Index> expected_shape(const MemberRule& rule, const ShapeSymbols& symbols);

/// The cells of a rule's row in docs/dump-format.md (every column but the free-text meaning).
struct RuleRow {
  std::string member;    ///< "`x`", "(the tensor)"
  std::string kind;      ///< "dataset"
  std::string presence;  ///< "required", "optional", "required if `epilogue` has a bias"
  std::string dtype;     ///< "f32, bf16", "string", "int ≥ 1", "`output_dtype`"
  std::string shape;     ///< "[M, in_stride]", "scalar", "—", "any"
  std::string absent;    ///< "refused 223 (missing-member)", "SKIP `untouched`", "default `k`", "none"
};
RuleRow rule_row(const MemberRule& rule);

/// How JSON and messages name things: "root", "projection", "segment", "logits_run", "tensor".
std::string_view container_name(Container c);
/// "always", "epilogue-has-bias", ..., "codebook-custom".
std::string_view when_name(When w);
/// The condition of `when` as a conjunction over the parsed attributes it depends on: for each
/// of "epilogue", "format", "variant", "codebook" that it restricts, the values for which it
/// holds (computed by evaluating rule_applies over every context, so it cannot disagree).
std::vector<std::pair<std::string_view, std::vector<std::string_view>>> when_condition(When when);

/// The member rules as the JSON the Python writer loads (python/ncert_dump/schema_rules.json):
/// every rule in table order, one line each, keys in a fixed order, with the value sets, the
/// conditions as conjunctions, the dtype a context-dependent type rule resolves to, and which
/// shape symbols the checker knows when the file is opened. Deterministic: ncert-docgen writes
/// it and `ncert-docgen check` fails when the file differs.
std::string schema_rules_json();

}  // namespace ncert::certify
