// The schema checker: the surveyed objects against dump-format v1 (docs/dump-format.md), every
// violation a finding that names the object.
#include <algorithm>

#include "certify/io/detail/reader_impl.h"

namespace ncert::certify::detail {

namespace {

/// Schema validation over the surveyed objects (docs/dump-format.md §2-6).
class SchemaChecker {
 public:
  SchemaChecker(const ReaderOptions& options, Surveyed& surveyed, DumpModel& model)
      : options_(options), model_(model), attrs_(&surveyed.attrs), groups_(&surveyed.groups),
        failed_(&surveyed.failed) {}

  void run() {
    check_root();
    for (const std::string& child : children("/")) {
      if (child == "/projections" || child == "/logits" || child == "/tensors") continue;
      if (std::count(options_.extra_root_members.begin(), options_.extra_root_members.end(), leaf_of(child))) continue;
      note(child, "unknown root member, ignored");
    }
    if (groups_->count("/projections")) {
      for (const std::string& c : children("/projections")) {
        if (!groups_->count(c)) {
          error(ErrorCode::kMissingMember, c, "expected a projection group, found a dataset");
          continue;
        }
        check_projection(c);
      }
    } else if (model_.dataset("/projections")) {
      error(ErrorCode::kMissingMember, "/projections", "expected a group");
    }
    if (groups_->count("/logits")) {
      for (const std::string& c : children("/logits")) {
        if (!groups_->count(c)) {
          error(ErrorCode::kMissingMember, c, "expected a logits run group, found a dataset");
          continue;
        }
        check_logits(c);
      }
    }
    if (groups_->count("/tensors")) check_tensors();
    check_lm_heads();
  }

 private:
  DumpModel& model() { return model_; }

  void error(ErrorCode code, const std::string& path, std::string msg) {
    model().findings.push_back({Severity::kError, code, path, std::move(msg)});
    ++errors_;
  }
  void note(const std::string& path, std::string msg) {
    model().findings.push_back({Severity::kNote, ErrorCode::kOk, path, std::move(msg)});
  }

  std::vector<std::string> children(const std::string& parent) {
    std::vector<std::string> out;
    for (const std::string& g : *groups_) {
      if (g != "/" && parent_of(g) == parent) out.push_back(g);
    }
    for (const DatasetInfo& d : model().datasets) {
      if (parent_of(d.path) == parent) out.push_back(d.path);
    }
    for (const std::string& f : *failed_) {
      if (parent_of(f) == parent) out.push_back(f);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  const AttrValue* attr(const std::string& obj, const std::string& name) {
    auto it = attrs_->find(obj);
    if (it == attrs_->end()) return nullptr;
    for (const auto& [n, v] : it->second) {
      if (n == name) return &v;
    }
    return nullptr;
  }

  std::optional<std::string> str_attr(const std::string& obj, const std::string& name,
                                      bool required) {
    const AttrValue* v = attr(obj, name);
    if (!v) {
      if (required) error(ErrorCode::kMissingAttribute, obj, "missing attribute \"" + name + "\"");
      return std::nullopt;
    }
    if (v->kind != AttrValue::Kind::kString || v->strings.size() != 1) {
      error(ErrorCode::kAttributeInvalid, obj,
            "attribute \"" + name + "\" = " + v->render() + " is not a string");
      return std::nullopt;
    }
    return v->strings[0];
  }

  std::optional<Index> int_attr(const std::string& obj, const std::string& name, bool required,
                                Index min_value) {
    const AttrValue* v = attr(obj, name);
    if (!v) {
      if (required) error(ErrorCode::kMissingAttribute, obj, "missing attribute \"" + name + "\"");
      return std::nullopt;
    }
    if (v->kind != AttrValue::Kind::kInt || v->ints.size() != 1) {
      error(ErrorCode::kAttributeInvalid, obj,
            "attribute \"" + name + "\" = " + v->render() + " is not an integer");
      return std::nullopt;
    }
    if (v->ints[0] < min_value) {
      error(ErrorCode::kAttributeInvalid, obj,
            "attribute \"" + name + "\" = " + std::to_string(v->ints[0]) + " is below " +
                std::to_string(min_value));
      return std::nullopt;
    }
    return v->ints[0];
  }

  template <typename T>
  std::optional<T> parsed(const std::string& obj, Result<T> r) {
    if (!r.ok()) {
      error(r.status().code(), obj, r.status().message());
      return std::nullopt;
    }
    return std::move(r).value();
  }

  /// A dataset member with a dtype from `allowed` and an expected shape (-1 = any extent).
  const DatasetInfo* member(const std::string& path, bool required,
                            std::initializer_list<DType> allowed,
                            std::vector<Index> expected_shape) {
    const DatasetInfo* d = model().dataset(path);
    if (!d) {
      if (failed_->count(path)) return nullptr;  // already reported
      if (groups_->count(path)) {
        error(ErrorCode::kMissingMember, path, "expected a dataset, found a group");
      } else if (required) {
        error(ErrorCode::kMissingMember, parent_of(path),
              "missing dataset \"" + leaf_of(path) + "\"");
      }
      return nullptr;
    }
    if (std::find(allowed.begin(), allowed.end(), d->dtype) == allowed.end()) {
      std::string names;
      for (DType t : allowed) names += std::string(names.empty() ? "" : " or ") + std::string(dtype_name(t));
      error(ErrorCode::kDatatypeRefused, path,
            "dtype " + std::string(dtype_name(d->dtype)) + " where " + names + " is required");
      return nullptr;
    }
    bool match = d->shape.size() == expected_shape.size();
    for (std::size_t i = 0; match && i < expected_shape.size(); ++i) {
      match = expected_shape[i] < 0 || expected_shape[i] == d->shape[i];
    }
    if (!match) {
      std::string want = "[";
      for (std::size_t i = 0; i < expected_shape.size(); ++i) {
        want += (i ? ", " : "") + (expected_shape[i] < 0 ? std::string("*")
                                                         : std::to_string(expected_shape[i]));
      }
      error(ErrorCode::kShapeMismatch, path,
            "shape " + shape_string(d->shape) + " but the attributes require " + want + "]");
      return nullptr;
    }
    if (static_cast<std::uint64_t>(d->bytes) > options_.memory_limit) {
      error(ErrorCode::kMemoryLimit, path,
            std::to_string(d->bytes) + " bytes exceed the memory limit of " +
                std::to_string(options_.memory_limit) + " bytes (--max-memory)");
      return nullptr;
    }
    return d;
  }

  void check_root() {
    DumpModel& m = model();
    const auto schema = str_attr("/", "ncert_schema", false);
    if (!attr("/", "ncert_schema")) {
      error(ErrorCode::kSchemaUnknown, "/",
            "no ncert_schema attribute: not an ncert dump (docs/dump-format.md §2)");
    } else if (schema && *schema != options_.schema) {
      error(ErrorCode::kSchemaUnknown, "/", "ncert_schema = \"" + *schema + "\", expected \"" + options_.schema + "\"");
    }
    const AttrValue* ver = attr("/", "ncert_schema_version");
    if (!ver) {
      error(ErrorCode::kMissingAttribute, "/", "missing attribute \"ncert_schema_version\"");
    } else if (ver->kind != AttrValue::Kind::kInt || ver->ints.size() != 1) {
      error(ErrorCode::kAttributeInvalid, "/",
            "ncert_schema_version = " + ver->render() + " is not an integer");
    } else if (ver->ints[0] != 1) {
      error(ErrorCode::kSchemaVersion, "/",
            "ncert_schema_version = " + std::to_string(ver->ints[0]) +
                "; this build of ncert reads version 1 only");
    } else {
      m.schema_version = 1;
    }
    if (auto e = str_attr("/", "engine", true)) m.engine = *e;
    if (auto b = str_attr("/", "build", true)) m.build = *b;
    if (auto mo = str_attr("/", "model", false)) m.model = *mo;
    if (auto d = str_attr("/", "device", false)) m.device = *d;
    std::set<std::string> known = {"ncert_schema", "ncert_schema_version", "engine", "build", "model", "device"};
    known.insert(options_.extra_root_attributes.begin(), options_.extra_root_attributes.end());
    if (auto it = attrs_->find("/"); it != attrs_->end()) {
      for (const auto& [name, v] : it->second) {
        if (!known.count(name)) note("/", "unknown root attribute \"" + name + "\", ignored");
      }
    }
  }

  void check_projection(const std::string& path) {
    const int errors_before = errors_;
    ProjectionInfo p;
    p.path = path;
    p.name = leaf_of(path);
    if (auto op = str_attr(path, "op", true); op && *op != "linear") {
      error(ErrorCode::kAttributeInvalid, path, "op = \"" + *op + "\"; only \"linear\" is defined");
    }
    const auto k = int_attr(path, "k", true, 1);
    const auto n = int_attr(path, "n", true, 1);
    const auto in_stride = int_attr(path, "in_stride", false, 1);
    const auto out_stride = int_attr(path, "out_stride", false, 1);
    if (auto a = str_attr(path, "accumulator", true)) {
      if (auto acc = parsed(path, reference::parse_accumulator(*a))) p.accumulator = *acc;
    }
    if (auto o = str_attr(path, "output_dtype", true)) {
      if (auto t = parsed(path, reference::parse_output_dtype(*o))) p.output = *t;
    }
    if (auto e = str_attr(path, "epilogue", true)) {
      if (auto ep = parsed(path, reference::parse_epilogue(*e))) p.epilogue = *ep;
    }
    if (auto r = str_attr(path, "residual_at", false)) {
      if (auto ra = parsed(path, reference::parse_residual_at(*r))) p.residual_at = *ra;
    }
    if (auto r = str_attr(path, "output_rounding", false)) {
      if (auto orr = parsed(path, reference::parse_output_rounding(*r))) p.output_rounding = *orr;
    }
    if (auto w = str_attr(path, "k_walk", false)) {
      if (auto kw = parsed(path, reference::parse_k_walk(*w))) p.walk = *kw;
    }
    p.layer = int_attr(path, "layer", false, INT64_MIN);
    if (auto r = str_attr(path, "role", false)) p.role = *r;
    if (auto l = str_attr(path, "logits_run", false)) p.logits_run = *l;
    p.requests = int_attr(path, "requests", false, 1);
    p.block_rows = int_attr(path, "block_rows", false, 1);
    p.cap = int_attr(path, "cap", false, 0);
    if (!k || !n) return;
    p.k = *k;
    p.n = *n;
    p.in_stride = in_stride.value_or(p.k);
    p.out_stride = out_stride.value_or(p.n);

    static const std::set<std::string> kMembers = {
        "x", "weight", "bias", "residual", "selector", "commit_counts",
        "y_unpacked", "y_packed", "y_compact", "y_before"};
    for (const std::string& c : children(path)) {
      if (!kMembers.count(leaf_of(c))) note(c, "unknown projection member, ignored");
    }

    const DatasetInfo* x = member(path + "/x", true, {DType::kF32, DType::kBf16}, {-1, p.in_stride});
    if (!x) return;
    p.x_dtype = x->dtype;
    p.m = x->shape[0];
    if (p.requests && p.block_rows && *p.requests * *p.block_rows != p.m) {
      error(ErrorCode::kShapeMismatch, path + "/x",
            std::to_string(p.m) + " rows but requests x block_rows = " +
                std::to_string(*p.requests) + " x " + std::to_string(*p.block_rows) + " = " +
                std::to_string(*p.requests * *p.block_rows));
    }
    const DatasetInfo* sel = member(path + "/selector", true, {DType::kI32}, {-1});
    if (sel) p.p = sel->shape[0];
    const Index r = p.requests.value_or(-1);
    if (const DatasetInfo* cc = member(path + "/commit_counts", false, {DType::kI32}, {r})) {
      p.has_commit_counts = true;
      if (!p.requests) p.requests = cc->shape[0];
    }
    if (reference::has_bias(p.epilogue)) {
      if (auto* b = member(path + "/bias", true, {DType::kF32, DType::kBf16}, {p.n})) {
        p.bias_dtype = b->dtype;
      }
    } else if (model().dataset(path + "/bias")) {
      note(path + "/bias", "present but the epilogue has no bias; ignored");
    }
    if (reference::has_residual(p.epilogue)) {
      if (auto* rd = member(path + "/residual", true, {DType::kF32, DType::kBf16},
                            {p.m, p.out_stride})) {
        p.residual_dtype = rd->dtype;
      }
    } else if (model().dataset(path + "/residual")) {
      note(path + "/residual", "present but the epilogue has no residual; ignored");
    }
    p.has_y_unpacked = member(path + "/y_unpacked", false, {p.output}, {p.m, p.out_stride});
    p.has_y_packed = member(path + "/y_packed", false, {p.output}, {p.m, p.out_stride});
    p.has_y_before = member(path + "/y_before", false, {p.output}, {p.m, p.out_stride});
    if (sel) {
      p.has_y_compact = member(path + "/y_compact", false, {p.output}, {p.p, p.out_stride});
    }

    const std::string wpath = path + "/weight";
    if (!groups_->count(wpath)) {
      error(ErrorCode::kMissingMember, path, "missing group \"weight\"");
      return;
    }
    for (const std::string& s : children(wpath)) {
      if (!groups_->count(s)) {
        error(ErrorCode::kMissingMember, s, "expected a weight segment group, found a dataset");
        continue;
      }
      check_segment(s, p);
    }
    if (p.segments.empty() && errors_ == errors_before) {
      error(ErrorCode::kMissingMember, wpath, "no weight segments");
    }
    std::sort(p.segments.begin(), p.segments.end(),
              [](const SegmentInfo& a, const SegmentInfo& b) {
                return a.row_begin != b.row_begin ? a.row_begin < b.row_begin : a.name < b.name;
              });
    if (errors_ == errors_before) model().projections.push_back(std::move(p));
  }

  void check_segment(const std::string& path, ProjectionInfo& p) {
    SegmentInfo s;
    s.path = path;
    s.name = leaf_of(path);
    const auto fmt = str_attr(path, "format", true);
    const auto begin = int_attr(path, "row_begin", true, 0);
    const auto end = int_attr(path, "row_end", true, 0);
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
    const Index rows = s.row_end - s.row_begin;
    if (s.format != reference::WeightFormat::kAf4) {
      const DType t = s.format == reference::WeightFormat::kF32 ? DType::kF32 : DType::kBf16;
      if (!member(path + "/values", true, {t}, {rows, p.k})) return;
      s.values_dtype = t;
      p.segments.push_back(std::move(s));
      return;
    }
    reference::Af4Layout& L = s.af4;
    const auto gs = int_attr(path, "group_size", true, 1);
    const auto variant = str_attr(path, "variant", true);
    const auto packing = str_attr(path, "packing", true);
    if (!gs || !variant || !packing) return;
    L.group_size = *gs;
    if (auto v = parsed(path, reference::parse_af4_variant(*variant))) L.variant = *v; else return;
    if (auto pk = parsed(path, reference::parse_af4_packing(*packing))) L.packing = *pk; else return;
    if (auto dq = str_attr(path, "dequant", false)) {
      if (auto d = parsed(path, reference::parse_dequant(*dq))) L.dequant = *d; else return;
    }
    if (auto op = str_attr(path, "dequant_op", false)) {
      if (auto o = parsed(path, reference::parse_dequant_op(*op))) L.dequant_op = *o; else return;
    }
    if (L.variant == reference::Af4Variant::kCodebook) {
      const auto cb = str_attr(path, "codebook", true);
      if (!cb) return;
      if (auto c = parsed(path, reference::parse_af4_codebook(*cb))) L.codebook = *c; else return;
      if (L.codebook == reference::Af4Codebook::kCustom) {
        if (!member(path + "/codebook", true, {DType::kF32}, {16})) return;
      } else {
        L.table = reference::builtin_codebook(L.codebook);
      }
    }
    const DType code_type =
        L.packing == reference::Af4Packing::kU32Lsb ? DType::kU32 : DType::kU8;
    const DatasetInfo* codes = member(path + "/codes", true, {code_type}, {rows, -1});
    const DatasetInfo* scales =
        member(path + "/scales", true, {DType::kBf16, DType::kF16, DType::kF32}, {rows, -1});
    if (!codes || !scales) return;
    s.values_dtype = code_type;
    L.scale_dtype = scales->dtype;
    if (L.variant == reference::Af4Variant::kAffine) {
      const DatasetInfo* b = member(path + "/biases", true, {scales->dtype}, scales->shape);
      if (!b) return;
    }
    p.segments.push_back(std::move(s));
  }

  void check_logits(const std::string& path) {
    const int errors_before = errors_;
    LogitsRunInfo run;
    run.path = path;
    run.name = leaf_of(path);
    const auto vocab = int_attr(path, "vocab", true, 1);
    if (auto tb = str_attr(path, "tie_break", false)) {
      if (*tb != "lowest") {
        error(ErrorCode::kAttributeInvalid, path,
              "tie_break = \"" + *tb + "\"; only \"lowest\" is defined");
      }
      run.tie_break = *tb;
    }
    if (auto pr = str_attr(path, "prompt", false)) run.prompt = *pr;
    if (!vocab) return;
    run.vocab = *vocab;
    const DatasetInfo* tokens = member(path + "/tokens", true, {DType::kI32}, {-1});
    if (!tokens) return;
    run.tokens = tokens->shape[0];
    const std::string lpath = path + "/logits";
    const DatasetInfo* d = model().dataset(lpath);
    if (!d) {
      member(lpath, true, {DType::kF32}, {run.tokens, run.vocab});  // reports the absence
      return;
    }
    if (d->dtype != DType::kF32) {
      error(ErrorCode::kDatatypeRefused, lpath,
            "dtype " + std::string(dtype_name(d->dtype)) + " where f32 is required (raw logits)");
      return;
    }
    if (d->shape.size() != 2 || d->shape[0] != run.tokens || d->shape[1] != run.vocab) {
      error(ErrorCode::kShapeMismatch, lpath,
            "shape " + shape_string(d->shape) + " but tokens and vocab require [" +
                std::to_string(run.tokens) + ", " + std::to_string(run.vocab) + "]");
      return;
    }
    // Logits are streamed; only one row must fit in memory.
    if (static_cast<std::uint64_t>(run.vocab) * 4 > options_.memory_limit) {
      error(ErrorCode::kMemoryLimit, lpath, "one row of " + std::to_string(run.vocab * 4) +
                                                " bytes exceeds the memory limit");
      return;
    }
    run.has_positions = member(path + "/positions", false, {DType::kI64}, {run.tokens}) != nullptr;
    run.has_prompt_tokens = member(path + "/prompt_tokens", false, {DType::kI32}, {-1}) != nullptr;
    static const std::set<std::string> kMembers = {"tokens", "logits", "positions", "prompt_tokens"};
    for (const std::string& c : children(path)) {
      if (!kMembers.count(leaf_of(c))) note(c, "unknown logits member, ignored");
    }
    if (errors_ == errors_before) model().logits.push_back(std::move(run));
  }

  void check_tensors() {
    for (const DatasetInfo& d : model().datasets) {
      if (d.path.rfind("/tensors/", 0) != 0) continue;
      if (!is_float_dtype(d.dtype)) {
        error(ErrorCode::kDatatypeRefused, d.path,
              "dtype " + std::string(dtype_name(d.dtype)) + "; state tensors are f32, f16 or bf16");
        continue;
      }
      TensorInfo t;
      t.path = d.path;
      t.name = d.path.substr(std::string("/tensors/").size());
      t.dtype = d.dtype;
      t.shape = d.shape;
      if (auto c = str_attr(d.path, "compare", false)) t.compare = *c;
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
        error(ErrorCode::kMissingMember, p.path,
              "logits_run = \"" + p.logits_run + "\" names no /logits run");
      } else if (it->vocab != p.n || it->tokens != p.m) {
        error(ErrorCode::kShapeMismatch, p.path,
              "lm_head of run \"" + p.logits_run + "\" has " + std::to_string(p.m) + " x " +
                  std::to_string(p.n) + " outputs but the run has " + std::to_string(it->tokens) +
                  " tokens x vocab " + std::to_string(it->vocab));
      }
    }
  }

  const ReaderOptions& options_;
  DumpModel& model_;
  std::map<std::string, TypedAttrs>* attrs_;
  std::set<std::string>* groups_;
  const std::set<std::string>* failed_;
  int errors_ = 0;
};

}  // namespace

void check_schema(const ReaderOptions& options, Surveyed& surveyed, DumpModel& model) {
  SchemaChecker(options, surveyed, model).run();
}

}  // namespace ncert::certify::detail
