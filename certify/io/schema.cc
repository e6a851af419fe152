// The schema checker: the surveyed objects against the dump format (docs/dump-format.md, versions 1 and 2), every
// violation a finding that names the object. Which members exist, whether they are required,
// their element types and shapes come from the member rules (schema_rules.h), the table the page
// prints, with the closed value sets; this file adds what a table cannot say: the order of the
// checks, the grammars and rules that join members (x rows = requests x block_rows, lm_head shapes).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "certify/io/detail/reader_impl.h"
#include "certify/io/schema_rules.h"

namespace ncert::certify::detail {

namespace {

const MemberRule& attr_rule(Container c, std::string_view name) { return member_rule(c, MemberKind::kAttribute, name); }
const MemberRule& dataset_rule(Container c, std::string_view name) {
  return member_rule(c, MemberKind::kDataset, name);
}

/// Why a dequant_op that parses does not apply to the segment's variant (411): the values the
/// variant accepts.
std::string dequant_op_misfit(reference::Af4Variant variant, const std::string& value) {
  if (variant == reference::Af4Variant::kZeroPoint) {
    return "AF4 dequant_op \"" + value + "\" is not one of sub-mul, fused (what variant zero-point accepts)";
  }
  return "AF4 dequant_op \"" + value + "\" applies to variant zero-point only; variant " +
         std::string(reference::af4_variant_name(variant)) + " accepts fma, mul-add, either";
}

/// Schema validation over the surveyed objects (docs/dump-format.md §2-6).
class SchemaChecker {
 public:
  SchemaChecker(const ReaderOptions& options, Surveyed& surveyed, DumpModel& model)
      : options_(options), model_(model), loose_(&surveyed.loose), failed_(&surveyed.failed) {}

  void run() {
    check_root();
    for (const std::string& child : children("/")) {
      if (child == "/projections" || child == "/logits" || child == "/tensors") continue;
      if (std::count(options_.extra_root_members.begin(), options_.extra_root_members.end(), leaf_of(child))) continue;
      ignore_member(child, "unknown root member, ignored");
    }
    if (is_group("/projections")) {
      for (const std::string& c : children("/projections")) {
        if (!is_group(c)) {
          error(ErrorCode::kMissingMember, c, "expected a projection group, found a dataset");
          continue;
        }
        check_projection(c);
      }
    } else if (model_.dataset("/projections")) {
      error(ErrorCode::kMissingMember, "/projections", "expected a group");
    }
    if (is_group("/logits")) {
      for (const std::string& c : children("/logits")) {
        if (!is_group(c)) {
          error(ErrorCode::kMissingMember, c, "expected a logits run group, found a dataset");
          continue;
        }
        check_logits(c);
      }
    }
    if (is_group("/tensors")) check_tensors();
    check_lm_heads();
    if (model_.schema_version == 1) check_version_1_features();
    // A version 2 member in a file that declares 1 is the cause of what its absence of version 2
    // companions then reads as (x_quant without x_quantized: "missing member"): said first.
    std::stable_partition(model_.findings.begin(), model_.findings.end(), [](const Finding& f) {
      return f.severity == Severity::kError && f.code == ErrorCode::kSchemaVersion;
    });
  }

 private:
  DumpModel& model() { return model_; }

  /// Names one version 2 use in a file that declares 1, once (the members' checks name some of
  /// them as they read them, before what they then miss reads as the cause).
  void version_2_used(const std::string& path, const std::string& what) {
    const std::string msg =
        what + " is dump format version 2, but the file declares ncert_schema_version = 1 (declare 2)";
    for (const Finding& f : model_.findings) {
      if (f.code == ErrorCode::kSchemaVersion && f.path == path && f.message == msg) return;
    }
    error(ErrorCode::kSchemaVersion, path, msg);
  }

  /// A file that declares version 1 may use only what version 1 defined (docs/dump-format.md §2):
  /// a reader of version 1 would misread the rest, so a writer that uses a version 2 member or
  /// value must say so. Each use is named with its object.
  void check_version_1_features() {
    for (const ProjectionInfo& p : model_.projections) {
      if (p.x_dtype == DType::kF16) version_2_used(p.path + "/x", "an f16 x");
      if (p.output == DType::kF16) version_2_used(p.path, "output_dtype = \"f16\"");
      if (p.bias_dtype == DType::kF16) version_2_used(p.path + "/bias", "an f16 bias");
      if (p.residual_dtype == DType::kF16) version_2_used(p.path + "/residual", "an f16 residual");
      if (p.x_quant.type != reference::XQuantType::kNone) version_2_used(p.path, "x_quant");
      if (p.bias_at == reference::BiasAt::kStart) version_2_used(p.path, "bias_at = \"start\"");
      if (p.walk.declared && reference::k_walk_is_version_2(p.walk.name)) {
        version_2_used(p.path, "k_walk = \"" + p.walk.name + "\"");
      }
      for (const SegmentInfo& s : p.segments) {
        if (s.format == reference::WeightFormat::kF16 || reference::is_scaled_format(s.format)) {
          version_2_used(s.path, "format = \"" + std::string(reference::weight_format_name(s.format)) + "\"");
        }
        if (s.format == reference::WeightFormat::kAf4 && s.af4.variant == reference::Af4Variant::kZeroPoint) {
          version_2_used(s.path, "variant = \"zero-point\"");
        }
      }
    }
    for (const LogitsRunInfo& r : model_.logits) {
      const DatasetInfo* d = model_.dataset(r.path + "/logits");
      if (d && d->dtype != DType::kF32) version_2_used(d->path, std::string(dtype_name(d->dtype)) + " logits");
    }
    for (const TensorInfo& t : model_.tensors) {
      if (is_fp8_dtype(t.dtype)) version_2_used(t.path, "an " + std::string(dtype_name(t.dtype)) + " tensor");
    }
  }

  void error(ErrorCode code, const std::string& path, std::string msg) {
    model().findings.push_back({Severity::kError, code, path, std::move(msg)});
    ++errors_;
  }
  void note(const std::string& path, std::string msg) {
    model().findings.push_back({Severity::kNote, ErrorCode::kOk, path, std::move(msg)});
  }
  /// A member the dump format does not define: noted as ignored. ncert never reads it, so a
  /// datatype the survey refused in it or below it is no fault of the dump (a plain HDF5 file's
  /// int16 dataset was listed both as refused and as ignored).
  void ignore_member(const std::string& path, std::string msg) {
    std::erase_if(model().findings, [&](const Finding& x) {
      return x.code == ErrorCode::kDatatypeRefused && (x.path == path || x.path.starts_with(path + "/"));
    });
    note(path, std::move(msg));
  }

  /// The objects directly under `parent`, sorted. The surveyed objects are indexed by parent
  /// once: scanning every object for each parent was quadratic (4,000 1x1 projections, about
  /// 20,000 objects, took a minute; 24,000 did not finish in ten).
  const std::vector<std::string>& children(const std::string& parent) {
    if (!children_) {
      children_.emplace();
      auto add = [&](const std::string& path) { (*children_)[parent_of(path)].push_back(path); };
      for (const GroupInfo& g : model().groups) add(g.path);
      for (const DatasetInfo& d : model().datasets) add(d.path);
      for (const std::string& f : *failed_) add(f);
      for (auto& [key, list] : *children_) {
        std::sort(list.begin(), list.end());
        list.erase(std::unique(list.begin(), list.end()), list.end());
      }
    }
    static const std::vector<std::string> kNone;
    const auto it = children_->find(parent);
    return it == children_->end() ? kNone : it->second;
  }

  bool is_group(const std::string& path) const { return path == "/" || model_.group(path) != nullptr; }

  /// The attributes of a surveyed object: the model's, or those of an object it does not hold.
  std::span<const AttributeInfo> attributes_of(const std::string& obj) const {
    if (obj == "/") return model_.root_attributes;
    if (const GroupInfo* g = model_.group(obj)) return g->attributes;
    if (const DatasetInfo* d = model_.dataset(obj)) return d->attributes;
    const auto it = loose_->find(obj);
    return it == loose_->end() ? std::span<const AttributeInfo>() : it->second;
  }

  const AttrValue* attr(const std::string& obj, const std::string& name) const {
    for (const AttributeInfo& a : attributes_of(obj)) {
      if (a.name == name) return &a.value;
    }
    return nullptr;
  }

  /// Why an attribute is not of the kind read: its size where it is beyond the reader's limit
  /// (a 1.1 MB k_walk read "is not a string"), else its kind.
  static std::string not_a(const AttrValue& v, const std::string& kind) {
    if (v.kind == AttrValue::Kind::kOther && v.type_description.starts_with("oversized")) {
      return " is larger than an attribute may be (1 MiB or 65,536 elements, docs/dump-format.md §1)";
    }
    return (kind == "integer" ? " is not an " : " is not a ") + kind;
  }

  std::optional<std::string> str_attr(const std::string& obj, const std::string& name, bool required) {
    const AttrValue* v = attr(obj, name);
    if (!v) {
      if (required) error(ErrorCode::kMissingAttribute, obj, "missing attribute \"" + name + "\"");
      return std::nullopt;
    }
    if (v->kind != AttrValue::Kind::kString || v->strings.size() != 1) {
      error(ErrorCode::kAttributeInvalid, obj, "attribute \"" + name + "\" = " + v->render() + not_a(*v, "string"));
      return std::nullopt;
    }
    return v->strings[0];
  }

  std::optional<Index> int_attr(const std::string& obj, const std::string& name, bool required, Index min_value) {
    const AttrValue* v = attr(obj, name);
    if (!v) {
      if (required) error(ErrorCode::kMissingAttribute, obj, "missing attribute \"" + name + "\"");
      return std::nullopt;
    }
    if (v->kind != AttrValue::Kind::kInt || v->ints.size() != 1) {
      // A float attribute renders as "64": say what is stored, or the value reads as an integer.
      const bool floating = v->kind == AttrValue::Kind::kFloat && v->scalar;
      error(ErrorCode::kAttributeInvalid, obj,
            "attribute \"" + name + "\" = " + v->render() + not_a(*v, "integer") +
                (floating ? std::string(" (stored as a float: write an integer attribute)") : std::string()));
      return std::nullopt;
    }
    if (v->ints[0] < min_value) {
      error(ErrorCode::kAttributeInvalid, obj,
            "attribute \"" + name + "\" = " + std::to_string(v->ints[0]) + " is below " + std::to_string(min_value));
      return std::nullopt;
    }
    return v->ints[0];
  }

  /// A string attribute as its rule says (required or optional).
  std::optional<std::string> str_attr(const std::string& obj, const MemberRule& rule) {
    NCERT_ASSERT(rule.kind == MemberKind::kAttribute && rule.type == TypeRule::kString, "a rule of another kind");
    return str_attr(obj, std::string(rule.name), rule.required);
  }
  /// An integer attribute as its rule says (required or optional, with its minimum). An extent
  /// or count (every rule with a minimum of 0 or more: k, n, the strides, vocab, group sizes,
  /// segment rows, request geometry) above kMaxShapeValue is refused as shape-limit, naming the
  /// attribute: certifying it would need sizes beyond 64 bits, which must not reach the memory
  /// estimate as a saturated figure.
  std::optional<Index> int_attr(const std::string& obj, const MemberRule& rule) {
    NCERT_ASSERT(rule.kind == MemberKind::kAttribute && rule.type == TypeRule::kInt, "a rule of another kind");
    const std::string name(rule.name);
    const auto v = int_attr(obj, name, rule.required, rule.min_value);
    if (v && rule.min_value >= 0 && *v > kMaxShapeValue) {
      error(ErrorCode::kShapeLimit, obj,
            "attribute \"" + name + "\" = " + std::to_string(*v) + " is above " + std::to_string(kMaxShapeValue) +
                " (2^32 - 1), the largest extent ncert accepts; refused before any size is computed from it");
      return std::nullopt;
    }
    return v;
  }

  template <typename T>
  std::optional<T> parsed(const std::string& obj, Result<T> r) {
    if (!r.ok()) {
      error(r.status().code(), obj, r.status().message());
      return std::nullopt;
    }
    return std::move(r).value();
  }

  /// A dataset member of the container at `parent` as its rule says: presence, then a dtype the
  /// rule allows in `types`, then the rule's shape resolved with `symbols` (-1 = any extent).
  const DatasetInfo* member(const std::string& parent, const MemberRule& rule, const TypeContext& types,
                            const ShapeSymbols& symbols) {
    NCERT_ASSERT(rule.kind == MemberKind::kDataset && rule.shape == ShapeKind::kDims, "a rule of another kind");
    return member(parent + "/" + std::string(rule.name), rule.required, allowed_dtypes(rule, types),
                  expected_shape(rule, symbols), &rule.dims);
  }

  /// A dataset member with a dtype from `allowed` and an expected shape (-1 = any extent).
  const DatasetInfo* member(const std::string& path, bool required, const std::vector<DType>& allowed,
                            const std::vector<Index>& expected_shape, const std::vector<Dim>* dims = nullptr) {
    const DatasetInfo* d = model().dataset(path);
    if (!d) {
      if (failed_->count(path)) return nullptr;  // already reported
      if (is_group(path)) {
        error(ErrorCode::kMissingMember, path, "expected a dataset, found a group");
      } else if (required) {
        error(ErrorCode::kMissingMember, parent_of(path), "missing dataset \"" + leaf_of(path) + "\"");
      }
      return nullptr;
    }
    if (std::find(allowed.begin(), allowed.end(), d->dtype) == allowed.end()) {
      error(ErrorCode::kDatatypeRefused, path,
            "dtype " + std::string(dtype_name(d->dtype)) + " where " + dtype_list(allowed) + " is required");
      return nullptr;
    }
    bool match = d->shape.size() == expected_shape.size();
    for (std::size_t i = 0; match && i < expected_shape.size(); ++i) {
      match = expected_shape[i] < 0 || expected_shape[i] == d->shape[i];
    }
    if (!match) {
      error(ErrorCode::kShapeMismatch, path, shape_mismatch_text(d->shape, expected_shape, dims));
      return nullptr;
    }
    if (static_cast<std::uint64_t>(d->bytes) > options_.memory_limit) {
      error(ErrorCode::kMemoryLimit, path,
            std::to_string(d->bytes) + " bytes exceed the memory limit of " + std::to_string(options_.memory_limit) +
                " bytes (--max-memory)");
      return nullptr;
    }
    return d;
  }

  void check_root() {
    DumpModel& m = model();
    constexpr Container kRoot = Container::kRoot;
    // A missing ncert_schema has its own code (schema-unknown, the rule's `refused`): the file
    // does not declare itself an ncert file at all, which says more than "missing attribute".
    const auto schema = str_attr("/", "ncert_schema", false);
    if (!attr("/", "ncert_schema")) {
      error(attr_rule(kRoot, "ncert_schema").refused, "/",
            "no ncert_schema attribute: not an ncert dump (docs/dump-format.md §2)");
    } else if (schema && *schema != options_.schema) {
      error(ErrorCode::kSchemaUnknown, "/", "ncert_schema = \"" + *schema + "\", expected \"" + options_.schema + "\"");
    }
    const AttrValue* ver = attr("/", "ncert_schema_version");
    if (!ver) {
      error(attr_rule(kRoot, "ncert_schema_version").refused, "/", "missing attribute \"ncert_schema_version\"");
    } else if (ver->kind != AttrValue::Kind::kInt || ver->ints.size() != 1) {
      error(ErrorCode::kAttributeInvalid, "/", "ncert_schema_version = " + ver->render() + " is not an integer");
    } else if (ver->ints[0] < kOldestDumpFormatVersion || ver->ints[0] > kDumpFormatVersion) {
      error(ErrorCode::kSchemaVersion, "/",
            "ncert_schema_version = " + std::to_string(ver->ints[0]) + "; this build of ncert reads versions " +
                std::to_string(kOldestDumpFormatVersion) + " to " + std::to_string(kDumpFormatVersion));
    } else {
      m.schema_version = ver->ints[0];
    }
    if (auto e = str_attr("/", attr_rule(kRoot, "engine"))) m.engine = *e;
    if (auto b = str_attr("/", attr_rule(kRoot, "build"))) m.build = *b;
    if (auto mo = str_attr("/", attr_rule(kRoot, "model"))) m.model = *mo;
    if (auto d = str_attr("/", attr_rule(kRoot, "device"))) m.device = *d;
    std::set<std::string> known;
    for (const MemberRule& r : member_rules()) {
      if (r.container == kRoot && r.kind == MemberKind::kAttribute) known.insert(std::string(r.name));
    }
    known.insert(options_.extra_root_attributes.begin(), options_.extra_root_attributes.end());
    for (const AttributeInfo& a : model_.root_attributes) {
      if (!known.count(a.name)) note("/", "unknown root attribute \"" + a.name + "\", ignored");
    }
  }

  /// A one-value attribute (`op`, `tie_break`): a finding unless `value` is the format's one.
  void expect_only_value(const std::string& obj, const MemberRule& rule, const std::string& value) {
    NCERT_ASSERT(rule.values.names.size() == 1 && rule.values.what.empty(), "a one-value rule");
    const std::string only(rule.values.names.front());
    if (value == only) return;
    error(rule.values.refused, obj, std::string(rule.name) + " = \"" + value + "\"; only \"" + only + "\" is defined");
  }

  /// §3, in four named steps: the attributes, the notes on unknown members, the datasets, the
  /// weights. A projection with any error is not added to the model.
  void check_projection(const std::string& path) {
    const int errors_before = errors_;
    ProjectionInfo p;
    p.path = path;
    p.name = leaf_of(path);
    if (!projection_attributes(path, p)) return;
    for (const std::string& c : children(path)) {
      if (!is_member_name(Container::kProjection, leaf_of(c))) ignore_member(c, "unknown projection member, ignored");
    }
    if (!projection_datasets(path, p)) return;
    projection_weights(path, p, errors_before);
  }

  /// Every attribute of the projection, in the table's order. False when k or n is unusable:
  /// without them no member's shape can be checked.
  bool projection_attributes(const std::string& path, ProjectionInfo& p) {
    constexpr Container kProj = Container::kProjection;
    const MemberRule& op_rule = attr_rule(kProj, "op");
    if (auto op = str_attr(path, op_rule)) expect_only_value(path, op_rule, *op);
    const auto k = int_attr(path, attr_rule(kProj, "k"));
    const auto n = int_attr(path, attr_rule(kProj, "n"));
    const auto in_stride = int_attr(path, attr_rule(kProj, "in_stride"));
    const auto out_stride = int_attr(path, attr_rule(kProj, "out_stride"));
    if (auto a = str_attr(path, attr_rule(kProj, "accumulator"))) {
      if (auto acc = parsed(path, reference::parse_accumulator(*a))) p.accumulator = *acc;
    }
    if (auto o = str_attr(path, attr_rule(kProj, "output_dtype"))) {
      if (auto t = parsed(path, reference::parse_output_dtype(*o))) p.output = *t;
    }
    if (auto e = str_attr(path, attr_rule(kProj, "epilogue"))) {
      if (auto ep = parsed(path, reference::parse_epilogue(*e))) p.epilogue = *ep;
    }
    if (auto r = str_attr(path, attr_rule(kProj, "residual_at"))) {
      if (auto ra = parsed(path, reference::parse_residual_at(*r))) p.residual_at = *ra;
    }
    if (auto b = str_attr(path, attr_rule(kProj, "bias_at"))) {
      if (auto ba = parsed(path, reference::parse_bias_at(*b))) p.bias_at = *ba;
    }
    if (auto r = str_attr(path, attr_rule(kProj, "output_rounding"))) {
      if (auto orr = parsed(path, reference::parse_output_rounding(*r))) p.output_rounding = *orr;
    }
    if (auto w = str_attr(path, attr_rule(kProj, "k_walk"))) {
      if (auto kw = parsed(path, reference::parse_k_walk(*w))) p.walk = *kw;
    }
    if (auto q = str_attr(path, attr_rule(kProj, "x_quant"))) {
      if (auto t = parsed(path, reference::parse_x_quant(*q))) p.x_quant.type = *t;
    }
    const auto x_quant_group = int_attr(path, attr_rule(kProj, "x_quant_group"));
    if (auto r = str_attr(path, attr_rule(kProj, "x_quant_rounding"))) {
      if (auto qr = parsed(path, reference::parse_x_quant_rounding(*r))) p.x_quant.rounding = *qr;
      // FP8 codes are always rne (§3.6): an rna would be reported and never applied. The Python
      // writer refuses it alike.
      const bool fp8 = p.x_quant.type == reference::XQuantType::kE4m3 || p.x_quant.type == reference::XQuantType::kE5m2;
      if (fp8 && p.x_quant.rounding == reference::XQuantRounding::kNearestAway) {
        error(ErrorCode::kAttributeInvalid, path,
              "x_quant_rounding = \"rna\" with x_quant = \"" + std::string(reference::x_quant_name(p.x_quant.type)) +
                  "\": FP8 quantization always rounds to nearest even (docs/dump-format.md §3.6)");
      }
    }
    if (p.x_quant.type == reference::XQuantType::kNone) {
      for (std::string_view name : {"x_quant_group", "x_quant_rounding"}) {
        if (attr(path, std::string(name))) note(path, std::string(name) + " without x_quant; ignored");
      }
    }
    p.layer = int_attr(path, attr_rule(kProj, "layer"));
    if (auto r = str_attr(path, attr_rule(kProj, "role"))) p.role = *r;
    if (auto l = str_attr(path, attr_rule(kProj, "logits_run"))) {
      p.logits_run = *l;
      // An empty name names no run; read as absent, the run's witnesses went uncertified.
      if (l->empty() && p.role == "lm_head") {
        error(ErrorCode::kMissingMember, path,
              "logits_run = \"\" names no /logits run (omit it for an lm_head of no run)");
      }
      // Only an lm_head names its run (§3.5): said, not silently dropped (an outside writer's
      // projection named a run that does not exist, and nothing was said).
      if (p.role != "lm_head") {
        note(path, "logits_run = \"" + *l + "\" without role = \"lm_head\"; ignored (an lm_head names its run)");
      }
    }
    p.requests = int_attr(path, attr_rule(kProj, "requests"));
    p.block_rows = int_attr(path, attr_rule(kProj, "block_rows"));
    p.cap = int_attr(path, attr_rule(kProj, "cap"));
    if (auto h = str_attr(path, attr_rule(kProj, "weights_xxh3"))) {
      // §4.5: the canonical form, so that equal weights have equal strings.
      const bool canonical = h->size() == 32 && h->find_first_not_of("0123456789abcdef") == std::string::npos;
      if (!canonical) {
        error(ErrorCode::kAttributeInvalid, path,
              "weights_xxh3 = \"" + *h + "\" is not an XXH3-128 hash in 32 lowercase hex digits");
      } else {
        p.weights_xxh3 = *h;
      }
    }
    if (!k || !n) return false;
    p.k = *k;
    p.n = *n;
    p.in_stride = in_stride.value_or(p.k);
    p.out_stride = out_stride.value_or(p.n);
    p.x_quant.group = x_quant_group.value_or(p.k);
    return true;
  }

  /// The datasets, in the order their shapes become known: x gives M, the selector P, then the
  /// members shaped by them. False when x is unusable (M unknown).
  bool projection_datasets(const std::string& path, ProjectionInfo& p) {
    constexpr Container kProj = Container::kProjection;
    RuleContext context;
    context.epilogue = p.epilogue;
    TypeContext types;
    types.output = p.output;
    ShapeSymbols sym;
    sym.k = p.k;
    sym.n = p.n;
    sym.in_stride = p.in_stride;
    sym.out_stride = p.out_stride;
    // Version 2 attributes in a version 1 file, named before the members they call for are
    // missed (x_quant without x_quantized read "missing member", a review's).
    if (model_.schema_version == 1) {
      if (p.x_quant.type != reference::XQuantType::kNone) version_2_used(path, "x_quant");
      if (p.output == DType::kF16) version_2_used(path, "output_dtype = \"f16\"");
    }
    const DatasetInfo* x = member(path, dataset_rule(kProj, "x"), types, sym);
    if (!x) return false;
    p.x_dtype = x->dtype;
    p.m = x->shape[0];
    sym.m = p.m;
    // A projection of no rows (an expert no token was routed to) certifies nothing: noted and
    // left out, where every check read it otherwise (block_rows 0, "no activations x" beside an
    // x, a dump-level vacuity that counted it).
    if (p.m < 1) {
      note(path + "/x", "0 rows: nothing to certify; the projection is left out");
      ++model_.projections_without_rows;
      return false;
    }
    context.x_quant = types.x_quant = p.x_quant.type;
    // A group that does not divide K is geometry guard 309 when the projection is checked.
    if (p.k % p.x_quant.group == 0) sym.x_scale_columns = p.k / p.x_quant.group;
    for (std::string_view name : {"x_quantized", "x_scales", "x_zero_points"}) {
      const MemberRule& rule = dataset_rule(kProj, name);
      if (rule_applies(rule.when, context)) {
        const DatasetInfo* d = member(path, rule, types, sym);
        if (d && name == "x_scales") p.x_scales_dtype = d->dtype;
        if (d && name == "x_zero_points") p.has_x_zero_points = true;
      } else if (model().dataset(path + "/" + std::string(name))) {
        note(path + "/" + std::string(name), p.x_quant.type == reference::XQuantType::kNone
                                                 ? "present without x_quant; ignored"
                                                 : "present but x_quant has no zero points; ignored");
      }
    }
    if (p.requests && p.block_rows && *p.requests * *p.block_rows != p.m) {
      error(ErrorCode::kShapeMismatch, path + "/x",
            std::to_string(p.m) + " rows but requests x block_rows = " + std::to_string(*p.requests) + " x " +
                std::to_string(*p.block_rows) + " = " + std::to_string(*p.requests * *p.block_rows));
    }
    const DatasetInfo* sel = member(path, dataset_rule(kProj, "selector"), types, sym);
    if (sel) p.p = sel->shape[0];
    sym.p = p.p;
    sym.r = p.requests.value_or(-1);
    if (const DatasetInfo* cc = member(path, dataset_rule(kProj, "commit_counts"), types, sym)) {
      p.has_commit_counts = true;
      if (!p.requests) p.requests = cc->shape[0];
    }
    const MemberRule& bias = dataset_rule(kProj, "bias");
    if (rule_applies(bias.when, context)) {
      if (auto* b = member(path, bias, types, sym)) p.bias_dtype = b->dtype;
    } else if (model().dataset(path + "/bias")) {
      note(path + "/bias", "present but the epilogue has no bias; ignored");
    }
    if (p.bias_at == reference::BiasAt::kStart && !reference::has_bias(p.epilogue)) {
      note(path, "bias_at = \"start\" but the epilogue has no bias; ignored");
    }
    const MemberRule& residual = dataset_rule(kProj, "residual");
    if (rule_applies(residual.when, context)) {
      if (auto* rd = member(path, residual, types, sym)) p.residual_dtype = rd->dtype;
    } else if (model().dataset(path + "/residual")) {
      note(path + "/residual", "present but the epilogue has no residual; ignored");
    }
    p.has_y_unpacked = member(path, dataset_rule(kProj, "y_unpacked"), types, sym);
    p.has_y_packed = member(path, dataset_rule(kProj, "y_packed"), types, sym);
    p.has_y_before = member(path, dataset_rule(kProj, "y_before"), types, sym);
    if (sel) p.has_y_compact = member(path, dataset_rule(kProj, "y_compact"), types, sym);
    return true;
  }

  /// The weight group and its segments (or, §4.5, weights declared by hash and given by a
  /// weights dump); adds the projection to the model when nothing since `errors_before` failed.
  void projection_weights(const std::string& path, ProjectionInfo& p, int errors_before) {
    const MemberRule& weight = member_rule(Container::kProjection, MemberKind::kGroup, "weight");
    const std::string wpath = path + "/" + std::string(weight.name);
    if (!is_group(wpath) && !model().dataset(wpath) && !p.weights_xxh3.empty()) {
      // §4.5: the weights are the weights dump's projection with this weights hash.
      if (options_.is_weights_dump) {
        error(weight.refused, path,
              "missing group \"weight\": the projection declares weights_xxh3 = " + p.weights_xxh3 +
                  " and omits its weights, but this file is given as the weights dump, which must carry them "
                  "(a step dump cannot be its own or another's weights dump; write the weights dump with each "
                  "projection's weight group and its weights_xxh3)");
        return;
      }
      if (!options_.weights_elsewhere) {
        error(weight.refused, path,
              "missing group \"weight\": the projection declares weights_xxh3 = " + p.weights_xxh3 +
                  " but no weights dump was given (`ncert check --weights W.h5`, or \"weights\" in a campaign "
                  "manifest, for check entries; compare, forks and witness read dumps that carry their "
                  "weights)");
        return;
      }
      p.weights_omitted = true;
      if (errors_ == errors_before) model().projections.push_back(std::move(p));
      return;
    }
    if (!is_group(wpath)) {
      error(weight.refused, path, "missing group \"weight\"");
      return;
    }
    for (const std::string& s : children(wpath)) {
      if (!is_group(s)) {
        error(ErrorCode::kMissingMember, s, "expected a weight segment group, found a dataset");
        continue;
      }
      check_segment(s, p);
    }
    // A segment whose dataset the survey already refused (its datatype, say) is left out with
    // that error reported: "no weight segments" would then be the first, and false, reason.
    const auto refused_under = failed_->lower_bound(wpath + "/");
    const bool member_refused = refused_under != failed_->end() && refused_under->starts_with(wpath + "/");
    if (p.segments.empty() && errors_ == errors_before && !member_refused) {
      error(ErrorCode::kMissingMember, wpath, "no weight segments");
    }
    if (p.segments.empty()) return;
    std::sort(p.segments.begin(), p.segments.end(), [](const SegmentInfo& a, const SegmentInfo& b) {
      return a.row_begin != b.row_begin ? a.row_begin < b.row_begin : a.name < b.name;
    });
    if (errors_ == errors_before) model().projections.push_back(std::move(p));
  }

  /// A segment's dequant_op (its variant's default when absent; one that does not fit the
  /// variant refused, 411) and, for zero-point, zero_point_packing. False after a refusal.
  bool read_af4_order(const std::string& path, const RuleContext& context, reference::Af4Layout& L,
                      TypeContext& types) {
    constexpr Container kSeg = Container::kSegment;
    L.dequant_op = reference::default_dequant_op(L.variant);
    if (auto op = str_attr(path, attr_rule(kSeg, "dequant_op"))) {
      auto o = reference::parse_dequant_op(*op);
      // A zero-point segment's refusal lists what zero-point accepts, not all five names.
      if (o.ok() ? !reference::dequant_op_fits(L.variant, *o) : L.variant == reference::Af4Variant::kZeroPoint) {
        error(ErrorCode::kDequantOpUnknown, path, dequant_op_misfit(L.variant, *op));
        return false;
      }
      const auto parsed_op = parsed(path, std::move(o));
      if (!parsed_op) return false;
      L.dequant_op = *parsed_op;
    }
    const MemberRule& zp_packing = attr_rule(kSeg, "zero_point_packing");
    if (!rule_applies(zp_packing.when, context)) return true;
    if (auto zpp = str_attr(path, zp_packing)) {
      const auto z = parsed(path, reference::parse_zero_point_packing(*zpp));
      if (!z) return false;
      L.zero_point_packing = *z;
    }
    types.zero_point_packing = L.zero_point_packing;
    return true;
  }

  void check_segment(const std::string& path, ProjectionInfo& p) {
    constexpr Container kSeg = Container::kSegment;
    SegmentInfo s;
    s.path = path;
    s.name = leaf_of(path);
    const auto fmt = str_attr(path, attr_rule(kSeg, "format"));
    const auto begin = int_attr(path, attr_rule(kSeg, "row_begin"));
    const auto end = int_attr(path, attr_rule(kSeg, "row_end"));
    if (!fmt || !begin || !end) return;
    const auto format = parsed(path, reference::parse_weight_format(*fmt));
    if (!format) return;
    s.format = *format;
    s.row_begin = *begin;
    s.row_end = *end;
    if (s.row_end <= s.row_begin) {
      error(ErrorCode::kAttributeInvalid, path,
            "row_end " + std::to_string(s.row_end) + " <= row_begin " + std::to_string(s.row_begin));
      return;
    }
    RuleContext context;
    context.format = s.format;
    TypeContext types;
    types.format = s.format;
    ShapeSymbols sym;
    sym.k = p.k;
    sym.rows = s.row_end - s.row_begin;
    const MemberRule& values = dataset_rule(kSeg, "values");
    if (rule_applies(values.when, context)) {
      const DatasetInfo* v = member(path, values, types, sym);
      if (!v) return;
      s.values_dtype = v->dtype;
      if (reference::is_scaled_format(s.format) && !scaled_members(path, p, s, types, sym)) return;
      p.segments.push_back(std::move(s));
      return;
    }
    sym.scale_rows = sym.rows;
    reference::Af4Layout& L = s.af4;
    const auto gs = int_attr(path, attr_rule(kSeg, "group_size"));
    const auto variant = str_attr(path, attr_rule(kSeg, "variant"));
    const auto packing = str_attr(path, attr_rule(kSeg, "packing"));
    if (!gs || !variant || !packing) return;
    L.group_size = *gs;
    if (auto v = parsed(path, reference::parse_af4_variant(*variant)))
      L.variant = *v;
    else
      return;
    if (auto pk = parsed(path, reference::parse_af4_packing(*packing)))
      L.packing = *pk;
    else
      return;
    context.variant = L.variant;
    types.packing = L.packing;
    if (model_.schema_version == 1 && L.variant == reference::Af4Variant::kZeroPoint) {
      version_2_used(path, "variant = \"zero-point\"");
    }
    if (auto dq = str_attr(path, attr_rule(kSeg, "dequant"))) {
      if (auto d = parsed(path, reference::parse_dequant(*dq)))
        L.dequant = *d;
      else
        return;
    }
    if (!read_af4_order(path, context, L, types)) return;
    const MemberRule& codebook = attr_rule(kSeg, "codebook");
    if (rule_applies(codebook.when, context)) {
      const auto cb = str_attr(path, codebook);
      if (!cb) return;
      if (auto c = parsed(path, reference::parse_af4_codebook(*cb)))
        L.codebook = *c;
      else
        return;
      context.codebook = L.codebook;
      const MemberRule& table = dataset_rule(kSeg, "codebook");
      if (rule_applies(table.when, context)) {
        if (!member(path, table, types, sym)) return;
      } else {
        L.table = reference::builtin_codebook(L.codebook);
      }
    }
    const DatasetInfo* codes = member(path, dataset_rule(kSeg, "codes"), types, sym);
    const DatasetInfo* scales = member(path, dataset_rule(kSeg, "scales"), types, sym);
    if (!codes || !scales) return;
    s.values_dtype = codes->dtype;
    L.scale_dtype = scales->dtype;
    types.scales = scales->dtype;
    sym.scale_columns = scales->shape[1];
    const MemberRule& biases = dataset_rule(kSeg, "biases");
    if (rule_applies(biases.when, context)) {
      if (!member(path, biases, types, sym)) return;
    }
    const MemberRule& zero_points = dataset_rule(kSeg, "zero_points");
    if (rule_applies(zero_points.when, context)) {
      sym.zero_point_columns = reference::zero_point_columns(L.zero_point_packing, sym.scale_columns);
      if (!member(path, zero_points, types, sym)) return;
    }
    p.segments.push_back(std::move(s));
  }

  /// The scale grid of an int8 / e4m3 / e5m2 segment (docs/dump-format.md §4.6). The grid's
  /// divisibility and the scales' column count are guard 309 when the projection is checked.
  bool scaled_members(const std::string& path, const ProjectionInfo& p, SegmentInfo& s, const TypeContext& types,
                      ShapeSymbols sym) {
    constexpr Container kSeg = Container::kSegment;
    reference::ScaledView& v = s.scaled;
    const auto gs = int_attr(path, attr_rule(kSeg, "group_size"));
    if (!gs) return false;
    v.group_size = *gs;
    v.scale_rows = int_attr(path, attr_rule(kSeg, "scale_rows")).value_or(1);
    if (auto dq = str_attr(path, attr_rule(kSeg, "dequant"))) {
      if (auto d = parsed(path, reference::parse_dequant(*dq)))
        v.dequant = *d;
      else
        return false;
    }
    // ceil(rows / scale_rows) without rows + scale_rows - 1 (scale_rows may be near 2^63).
    sym.scale_rows = sym.rows / v.scale_rows + (sym.rows % v.scale_rows != 0);
    const DatasetInfo* scales = member(path, dataset_rule(kSeg, "scales"), types, sym);
    if (!scales) return false;
    v.values_dtype = s.values_dtype;
    v.scale_dtype = scales->dtype;
    v.rows = s.row_end - s.row_begin;
    v.k = p.k;
    return true;
  }

  void check_logits(const std::string& path) {
    const int errors_before = errors_;
    constexpr Container kRun = Container::kLogitsRun;
    LogitsRunInfo run;
    run.path = path;
    run.name = leaf_of(path);
    const auto vocab = int_attr(path, attr_rule(kRun, "vocab"));
    const MemberRule& tie_break = attr_rule(kRun, "tie_break");
    if (auto tb = str_attr(path, tie_break)) {
      expect_only_value(path, tie_break, *tb);
      run.tie_break = *tb;
    }
    if (auto pr = str_attr(path, attr_rule(kRun, "prompt"))) run.prompt = *pr;
    if (!vocab) return;
    run.vocab = *vocab;
    const TypeContext types{};
    ShapeSymbols sym;
    sym.v = run.vocab;
    const DatasetInfo* tokens = member(path, dataset_rule(kRun, "tokens"), types, sym);
    if (!tokens) return;
    run.tokens = tokens->shape[0];
    sym.t = run.tokens;
    // The logits are streamed, not read whole: their own messages, and no whole-dataset limit.
    const MemberRule& logits = dataset_rule(kRun, "logits");
    const std::string lpath = path + "/" + std::string(logits.name);
    const DatasetInfo* d = model().dataset(lpath);
    if (!d) {
      member(path, logits, types, sym);  // reports the absence
      return;
    }
    const std::vector<DType> allowed = allowed_dtypes(logits, types);
    if (std::find(allowed.begin(), allowed.end(), d->dtype) == allowed.end()) {
      error(
          ErrorCode::kDatatypeRefused, lpath,
          "dtype " + std::string(dtype_name(d->dtype)) + " where " + dtype_list(allowed) + " is required (raw logits)");
      return;
    }
    if (d->shape != expected_shape(logits, sym)) {
      error(ErrorCode::kShapeMismatch, lpath,
            "shape " + shape_string(d->shape) + " but tokens and vocab require [" + std::to_string(run.tokens) + ", " +
                std::to_string(run.vocab) + "]");
      return;
    }
    // Logits are streamed; only one row must fit in memory.
    if (static_cast<std::uint64_t>(run.vocab) * 4 > options_.memory_limit) {
      error(ErrorCode::kMemoryLimit, lpath,
            "one row of " + std::to_string(run.vocab * 4) + " bytes exceeds the memory limit");
      return;
    }
    run.has_positions = member(path, dataset_rule(kRun, "positions"), types, sym) != nullptr;
    run.has_prompt_tokens = member(path, dataset_rule(kRun, "prompt_tokens"), types, sym) != nullptr;
    for (const std::string& c : children(path)) {
      if (!is_member_name(kRun, leaf_of(c))) ignore_member(c, "unknown logits member, ignored");
    }
    if (errors_ == errors_before) model().logits.push_back(std::move(run));
  }

  void check_tensors() {
    const MemberRule& tensor = dataset_rule(Container::kTensor, "");
    const std::vector<DType> allowed = allowed_dtypes(tensor, TypeContext{});
    for (const DatasetInfo& d : model().datasets) {
      if (d.path.rfind("/tensors/", 0) != 0) continue;
      if (std::find(allowed.begin(), allowed.end(), d.dtype) == allowed.end()) {
        error(ErrorCode::kDatatypeRefused, d.path,
              "dtype " + std::string(dtype_name(d.dtype)) + "; state tensors are " + dtype_prose(allowed));
        continue;
      }
      TensorInfo t;
      t.path = d.path;
      t.name = d.path.substr(std::string("/tensors/").size());
      t.dtype = d.dtype;
      t.shape = d.shape;
      if (auto c = str_attr(d.path, attr_rule(Container::kTensor, "compare"))) t.compare = *c;
      if (d.shape.empty() ? d.bytes : d.bytes / std::max<Index>(d.shape[0], 1) > 0) {
        const Index slice = d.shape.empty() ? d.bytes : d.bytes / std::max<Index>(d.shape[0], 1);
        if (static_cast<std::uint64_t>(slice) > options_.memory_limit) {
          error(ErrorCode::kMemoryLimit, d.path,
                "one leading slice of " + std::to_string(slice) + " bytes exceeds the memory limit");
          continue;
        }
      }
      model().tensors.push_back(std::move(t));
    }
  }

  void check_lm_heads() {
    for (const ProjectionInfo& p : model().projections) {
      if (p.role != "lm_head" || p.logits_run.empty()) continue;
      const auto it = std::find_if(model().logits.begin(), model().logits.end(),
                                   [&](const LogitsRunInfo& r) { return r.name == p.logits_run; });
      if (it == model().logits.end()) {
        error(ErrorCode::kMissingMember, p.path, "logits_run = \"" + p.logits_run + "\" names no /logits run");
      } else if (it->vocab != p.n || it->tokens != p.m) {
        error(ErrorCode::kShapeMismatch, p.path,
              "lm_head of run \"" + p.logits_run + "\" has " + std::to_string(p.m) + " x " + std::to_string(p.n) +
                  " outputs but the run has " + std::to_string(it->tokens) + " tokens x vocab " +
                  std::to_string(it->vocab));
      }
    }
  }

  const ReaderOptions& options_;
  DumpModel& model_;
  const std::map<std::string, TypedAttrs>* loose_;
  const std::set<std::string>* failed_;
  /// children()'s index: parent path -> its objects, built on first use (the survey is done).
  std::optional<std::map<std::string, std::vector<std::string>>> children_;
  int errors_ = 0;
};

}  // namespace

void check_schema(const ReaderOptions& options, Surveyed& surveyed, DumpModel& model) {
  SchemaChecker(options, surveyed, model).run();
}

}  // namespace ncert::certify::detail
