// DumpBuilder: the typed structs become nodes (detail/member_check.h), which the reader's member
// rules judge before DumpWriter writes them. The version is decided at close(); the file lives
// under a temporary name until then.
#include "certify/io/dump_builder.h"

#include <filesystem>
#include <map>
#include <set>

#include "certify/io/detail/member_check.h"
#include "certify/io/dump_writer.h"
#include "certify/io/output_file.h"

namespace ncert::certify {

std::string_view element_storage_name(ElementStorage s) {
  switch (s) {
    case ElementStorage::kFloat:
      return "float";
    case ElementStorage::kU16:
      return "uint16_t";
    case ElementStorage::kU8:
      return "uint8_t";
    case ElementStorage::kI8:
      return "int8_t";
    case ElementStorage::kU32:
      return "uint32_t";
    case ElementStorage::kI32:
      return "int32_t";
    case ElementStorage::kI64:
      return "int64_t";
  }
  return "?";
}

ElementStorage element_storage(DType t) {
  switch (t) {
    case DType::kF32:
      return ElementStorage::kFloat;
    case DType::kF16:
    case DType::kBf16:
      return ElementStorage::kU16;
    case DType::kE4m3:
    case DType::kE5m2:
    case DType::kU8:
      return ElementStorage::kU8;
    case DType::kI8:
      return ElementStorage::kI8;
    case DType::kU32:
      return ElementStorage::kU32;
    case DType::kI32:
      return ElementStorage::kI32;
    case DType::kI64:
      return ElementStorage::kI64;
  }
  return ElementStorage::kFloat;
}

namespace {

using detail::Node;
using detail::NodeContext;
namespace fs = std::filesystem;

Status refuse(ErrorCode code, const std::string& path, const std::string& message) {
  return Status(code, path + ": " + message);
}

/// A name that becomes one HDF5 link: not empty, no '/', not "." (HDF5 would resolve it).
Status check_leaf(const std::string& name, const std::string& parent, std::string_view what) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos || name.find('\0') != std::string::npos) {
    return refuse(ErrorCode::kInvalidArgument, parent,
                  std::string(what) + " \"" + name + "\" is not one HDF5 link name (empty, \".\", '/' or NUL)");
  }
  return Status();
}

template <typename E>
std::optional<std::string> name_of(const std::optional<E>& e, std::string_view (*name)(E)) {
  if (!e) return std::nullopt;
  return std::string(name(*e));
}

/// Why a dequant_op does not fit the segment's variant (the reader's 411).
std::string dequant_op_misfit(reference::Af4Variant variant, reference::DequantOp op) {
  const std::string value(reference::dequant_op_name(op));
  if (variant == reference::Af4Variant::kZeroPoint) {
    return "AF4 dequant_op \"" + value + "\" is not one of sub-mul, fused (what variant zero-point accepts)";
  }
  return "AF4 dequant_op \"" + value + "\" applies to variant zero-point only; variant " +
         std::string(reference::af4_variant_name(variant)) + " accepts fma, mul-add, either";
}

bool is_version_2_dtype(DType t) { return t == DType::kF16 || is_fp8_dtype(t) || t == DType::kI8; }

}  // namespace

namespace detail {

/// An lm_head projection whose logits run is not added yet. Named (not in the anonymous
/// namespace) because DumpBuilder::Impl holds them: a unity build includes this file into another
/// translation unit, where GCC refuses an anonymous-namespace type in a named class's member.
struct PendingLmHead {
  std::string path, run;
  Index m = 0, n = 0;
};

}  // namespace detail

using LmHead = detail::PendingLmHead;

struct DumpBuilder::Impl {
  std::string path, temp;
  BuilderOptions options;
  std::optional<DumpWriter> writer;
  std::set<std::string> names;                          ///< objects added: "/projections/q", ...
  std::map<std::string, std::pair<Index, Index>> runs;  ///< logits run -> (T, V)
  std::vector<LmHead> pending;                          ///< lm_heads whose run is not added yet
  std::string version_2_reason;

  bool open() const { return writer.has_value(); }

  void note_version_2(const std::string& reason) {
    if (version_2_reason.empty()) version_2_reason = reason;
  }

  /// Removes the temporary file: nothing of this dump stays behind.
  void discard() {
    if (writer) {
      (void)writer->close();
      writer.reset();
    }
    std::error_code ignored;
    fs::remove(temp, ignored);
  }

  Status closed_error() const { return refuse(ErrorCode::kInvalidArgument, path, "the builder is closed"); }

  /// A refusal of one object, named in the file as the reader names it ("F.h5: /projections/q: ...").
  Status in_file(const Status& s) const { return s.ok() ? s : Status(s.code(), path + ": " + s.message()); }

  /// A write that failed half way poisons the file: it is discarded, so that it cannot appear.
  Status written(Status s) {
    if (!s.ok()) {
      discard();
      return Status(s.code(), s.message() + " (the dump at " + path + " was discarded)");
    }
    return s;
  }

  Status write_node(const Node& node) {
    NCERT_RETURN_IF_ERROR(writer->create_group(node.path));
    for (const detail::NodeAttr& a : node.attrs) {
      if (a.text) {
        NCERT_RETURN_IF_ERROR(writer->write_attr(node.path, a.name, *a.text));
      } else {
        NCERT_RETURN_IF_ERROR(writer->write_attr(node.path, a.name, std::int64_t{*a.number}));
      }
    }
    for (const auto& [name, a] : node.datasets) {
      NCERT_RETURN_IF_ERROR(writer->write_dataset(node.path + "/" + name, a->dtype(), a->shape(), a->data()));
    }
    return Status();
  }
};

namespace {

Node segment_node(const std::string& path, const WeightSegment& s) {
  Node node;
  node.container = Container::kSegment;
  node.path = path;
  node.text("format", std::string(reference::weight_format_name(s.format)));
  node.number("row_begin", s.row_begin);
  node.number("row_end", s.row_end);
  node.number("group_size", s.group_size);
  node.number("scale_rows", s.scale_rows);
  node.text("variant", name_of(s.variant, reference::af4_variant_name));
  node.text("codebook", name_of(s.codebook, reference::af4_codebook_name));
  node.text("packing", name_of(s.packing, reference::af4_packing_name));
  node.text("zero_point_packing", name_of(s.zero_point_packing, reference::zero_point_packing_name));
  node.text("dequant", name_of(s.dequant, reference::dequant_name));
  node.text("dequant_op", name_of(s.dequant_op, reference::dequant_op_name));
  node.array("values", s.values);
  node.array("codes", s.codes);
  node.array("scales", s.scales);
  node.array("biases", s.biases);
  node.array("codebook", s.codebook_table);
  node.array("zero_points", s.zero_points);
  return node;
}

/// A segment against the rules of §4.1, with K known from its projection.
Status check_segment(const Node& node, const WeightSegment& s, Index k) {
  NodeContext c;
  c.rules.format = c.types.format = s.format;
  c.rules.variant = s.variant.value_or(reference::Af4Variant::kAffine);
  c.rules.codebook = s.codebook.value_or(reference::Af4Codebook::kNone);
  c.types.packing = s.packing.value_or(reference::Af4Packing::kU32Lsb);
  c.types.zero_point_packing = s.zero_point_packing.value_or(reference::ZeroPointPacking::kU8);
  NCERT_RETURN_IF_ERROR(detail::check_attributes(node, c));
  if (*s.row_end <= *s.row_begin) {
    return refuse(ErrorCode::kAttributeInvalid, node.path,
                  "row_end " + std::to_string(*s.row_end) + " <= row_begin " + std::to_string(*s.row_begin));
  }
  if (s.format == reference::WeightFormat::kAf4 && s.dequant_op &&
      !reference::dequant_op_fits(*s.variant, *s.dequant_op)) {
    return refuse(ErrorCode::kDequantOpUnknown, node.path, dequant_op_misfit(*s.variant, *s.dequant_op));
  }
  c.symbols.k = k;
  c.symbols.rows = *s.row_end - *s.row_begin;
  const Index scale_rows = s.scale_rows.value_or(1);
  c.symbols.scale_rows =
      reference::is_scaled_format(s.format) ? (c.symbols.rows + scale_rows - 1) / scale_rows : c.symbols.rows;
  return detail::check_datasets(node, c, [](std::string_view name, const DumpArray& a, NodeContext& ctx) {
    if (name == "scales") {
      ctx.types.scales = a.dtype();
      ctx.symbols.scale_columns = a.shape()[1];
      ctx.symbols.zero_point_columns = reference::zero_point_columns(ctx.types.zero_point_packing, a.shape()[1]);
    }
  });
}

Node projection_node(const std::string& path, const Projection& p) {
  Node node;
  node.container = Container::kProjection;
  node.path = path;
  node.text("op", std::string("linear"));
  node.number("k", p.k);
  node.number("n", p.n);
  node.number("in_stride", p.in_stride);
  node.number("out_stride", p.out_stride);
  node.text("accumulator", p.accumulator.empty() ? std::nullopt : std::optional<std::string>(p.accumulator));
  node.text("output_dtype", name_of(p.output_dtype, dtype_name));
  node.text("epilogue", name_of(p.epilogue, reference::epilogue_name));
  node.text("residual_at", name_of(p.residual_at, reference::residual_at_name));
  node.text("bias_at", name_of(p.bias_at, reference::bias_at_name));
  node.text("output_rounding", name_of(p.output_rounding, reference::output_rounding_name));
  node.text("k_walk", p.k_walk);
  node.number("layer", p.layer);
  node.text("role", p.role);
  node.text("logits_run", p.logits_run);
  node.number("requests", p.requests);
  node.number("block_rows", p.block_rows);
  node.number("cap", p.cap);
  node.text("weights_xxh3", p.weights_xxh3);
  node.text("x_quant", name_of(p.x_quant, reference::x_quant_name));
  node.number("x_quant_group", p.x_quant_group);
  node.text("x_quant_rounding", name_of(p.x_quant_rounding, reference::x_quant_rounding_name));
  node.array("x", p.x);
  node.array("x_quantized", p.x_quantized);
  node.array("x_scales", p.x_scales);
  node.array("x_zero_points", p.x_zero_points);
  node.array("bias", p.bias);
  node.array("residual", p.residual);
  node.array("selector", p.selector);
  node.array("commit_counts", p.commit_counts);
  node.array("y_unpacked", p.y_unpacked);
  node.array("y_packed", p.y_packed);
  node.array("y_compact", p.y_compact);
  node.array("y_before", p.y_before);
  return node;
}

/// The attributes the table cannot judge alone: the grammars of accumulator and k_walk, and the
/// weights hash's canonical form (the reader's 405, 406, 222).
Status check_projection_grammars(const Projection& p, const std::string& path) {
  if (auto acc = reference::parse_accumulator(p.accumulator); !acc.ok()) {
    return refuse(acc.status().code(), path, acc.status().message());
  }
  if (p.k_walk) {
    if (auto walk = reference::parse_k_walk(*p.k_walk); !walk.ok()) {
      return refuse(walk.status().code(), path, walk.status().message());
    }
  }
  if (p.weights_xxh3) {
    const std::string& h = *p.weights_xxh3;
    if (h.size() != 32 || h.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return refuse(ErrorCode::kAttributeInvalid, path,
                    "weights_xxh3 = \"" + h + "\" is not an XXH3-128 hash in 32 lowercase hex digits");
    }
  }
  return Status();
}

/// The first member or value of the projection that dump format version 2 defines, or "".
std::string projection_version_2(const std::string& path, const Projection& p, const Node& node) {
  if (p.output_dtype == DType::kF16) return path + ": output_dtype = \"f16\"";
  if (p.x_quant) return path + ": x_quant";
  if (p.bias_at == reference::BiasAt::kStart) return path + ": bias_at = \"start\"";
  if (p.k_walk && reference::k_walk_is_version_2(*p.k_walk)) return path + ": k_walk = \"" + *p.k_walk + "\"";
  for (const auto& [name, a] : node.datasets) {
    if (is_version_2_dtype(a->dtype())) {
      return path + "/" + name + ": an " + std::string(dtype_name(a->dtype())) + " " + name;
    }
  }
  for (const WeightSegment& s : p.weight) {
    const std::string spath = path + "/weight/" + s.name;
    if (s.format == reference::WeightFormat::kF16 || reference::is_scaled_format(s.format)) {
      return spath + ": format = \"" + std::string(reference::weight_format_name(s.format)) + "\"";
    }
    if (s.format == reference::WeightFormat::kAf4 && s.variant == reference::Af4Variant::kZeroPoint) {
      return spath + ": variant = \"zero-point\"";
    }
    for (const DumpArray* a : {&s.values, &s.scales, &s.biases}) {
      if (a->present() && is_version_2_dtype(a->dtype())) {
        return spath + ": " + std::string(dtype_name(a->dtype())) + " weights or scales";
      }
    }
  }
  return "";
}

Status lm_head_fits(const LmHead& head, Index tokens, Index vocab) {
  if (tokens == head.m && vocab == head.n) return Status();
  return refuse(ErrorCode::kShapeMismatch, head.path,
                "lm_head of run \"" + head.run + "\" has " + std::to_string(head.m) + " x " + std::to_string(head.n) +
                    " outputs but the run has " + std::to_string(tokens) + " tokens x vocab " + std::to_string(vocab));
}

}  // namespace

DumpBuilder::DumpBuilder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DumpBuilder::DumpBuilder(DumpBuilder&&) noexcept = default;
DumpBuilder& DumpBuilder::operator=(DumpBuilder&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->discard();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
DumpBuilder::~DumpBuilder() {
  if (impl_) impl_->discard();
}

namespace {

/// A builder whose dump was moved to another (an engine's use after std::move): refused, not a
/// crash.
Status moved_from() {
  return Status(ErrorCode::kInvalidArgument,
                "this DumpBuilder was moved from: its dump belongs to the builder it "
                "was moved to");
}

}  // namespace

Result<DumpBuilder> DumpBuilder::create(const std::string& path, const BuilderOptions& options) {
  if (options.engine.empty() || options.build.empty()) {
    return refuse(ErrorCode::kInvalidArgument, path,
                  "the root attributes engine and build are required (docs/dump-format.md §2)");
  }
  std::error_code ec;
  // Said now, of the path given, not at close() after every write (an outside engine's
  // directory) or of the temporary name (its missing parent).
  if (fs::is_directory(path, ec)) {
    return Status(ErrorCode::kInvalidArgument, path + ": is a directory; a dump is a file");
  }
  if (!options.overwrite && fs::exists(path, ec)) {
    return Status(ErrorCode::kOutputExists, path + ": exists; refusing to overwrite it");
  }
  if (const fs::path dir = fs::path(path).parent_path(); !dir.empty() && !fs::is_directory(dir, ec)) {
    return Status(ErrorCode::kIo,
                  path + ": " + dir.string() +
                      (fs::exists(fs::symlink_status(dir, ec)) ? " is not a directory (or cannot be read)"
                                                               : ": the directory does not exist"));
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  impl->temp = temporary_beside(path);
  NCERT_ASSIGN_OR_RETURN(DumpWriter writer, DumpWriter::create(impl->temp));
  impl->writer.emplace(std::move(writer));
  return DumpBuilder(std::move(impl));
}

std::int64_t DumpBuilder::schema_version() const { return !impl_ || impl_->version_2_reason.empty() ? 1 : 2; }
const std::string& DumpBuilder::version_2_reason() const {
  static const std::string kNone;
  return impl_ ? impl_->version_2_reason : kNone;
}

Status DumpBuilder::add_projection(const Projection& p) {
  if (!impl_) return moved_from();
  Impl& im = *impl_;
  if (!im.open()) return im.closed_error();
  return im.in_file([&]() -> Status {
    NCERT_RETURN_IF_ERROR(check_leaf(p.name, "/projections", "projection name"));
    const std::string path = "/projections/" + p.name;
    if (im.names.count(path)) return refuse(ErrorCode::kInvalidArgument, path, "already added");
    const Node node = projection_node(path, p);

    NodeContext c;
    c.rules.epilogue = p.epilogue.value_or(reference::Epilogue::kNone);
    c.rules.x_quant = c.types.x_quant = p.x_quant.value_or(reference::XQuantType::kNone);
    c.types.output = p.output_dtype.value_or(DType::kF32);
    NCERT_RETURN_IF_ERROR(detail::check_attributes(node, c));
    NCERT_RETURN_IF_ERROR(check_projection_grammars(p, path));
    const Index k = *p.k;
    c.symbols.k = k;
    c.symbols.n = *p.n;
    c.symbols.in_stride = p.in_stride.value_or(k);
    c.symbols.out_stride = p.out_stride.value_or(*p.n);
    c.symbols.r = p.requests.value_or(-1);
    // A group that does not divide K is geometry guard 309 when the projection is checked.
    const Index x_group = p.x_quant_group.value_or(k);
    if (k % x_group == 0) c.symbols.x_scale_columns = k / x_group;
    NCERT_RETURN_IF_ERROR(
        detail::check_datasets(node, c, [](std::string_view name, const DumpArray& a, NodeContext& ctx) {
          if (name == "x") ctx.symbols.m = a.shape()[0];
          if (name == "selector") ctx.symbols.p = a.shape()[0];
        }));
    const Index m = c.symbols.m;
    if (p.requests && p.block_rows && *p.requests * *p.block_rows != m) {
      return refuse(ErrorCode::kShapeMismatch, path + "/x",
                    std::to_string(m) + " rows but requests x block_rows = " + std::to_string(*p.requests) + " x " +
                        std::to_string(*p.block_rows) + " = " + std::to_string(*p.requests * *p.block_rows));
    }
    // §4.5: without segments the weights come from a weights dump, by the declared hash.
    if (p.weight.empty() && !p.weights_xxh3) {
      return refuse(ErrorCode::kMissingMember, path, "missing group \"weight\" (no segment given)");
    }
    std::vector<Node> segments;
    std::set<std::string> segment_names;
    for (const WeightSegment& s : p.weight) {
      NCERT_RETURN_IF_ERROR(check_leaf(s.name, path + "/weight", "segment name"));
      if (!segment_names.insert(s.name).second) {
        return refuse(ErrorCode::kInvalidArgument, path + "/weight/" + s.name, "segment given twice");
      }
      segments.push_back(segment_node(path + "/weight/" + s.name, s));
      NCERT_RETURN_IF_ERROR(check_segment(segments.back(), s, k));
    }
    // The reader's rule (schema.cc): an empty name names no run, and read as absent the run's
    // witnesses would go uncertified.
    if (p.role == "lm_head" && p.logits_run && p.logits_run->empty()) {
      return refuse(ErrorCode::kMissingMember, path,
                    "logits_run = \"\" names no /logits run (omit it for an lm_head of no run)");
    }
    std::optional<LmHead> head;
    if (p.role == "lm_head" && p.logits_run) {
      head = LmHead{path, *p.logits_run, m, *p.n};
      if (auto run = im.runs.find(head->run); run != im.runs.end()) {
        NCERT_RETURN_IF_ERROR(lm_head_fits(*head, run->second.first, run->second.second));
      }
    }

    NCERT_RETURN_IF_ERROR(im.written(im.write_node(node)));
    for (const Node& s : segments) NCERT_RETURN_IF_ERROR(im.written(im.write_node(s)));
    im.names.insert(path);
    if (head && !im.runs.count(head->run)) im.pending.push_back(*head);
    im.note_version_2(projection_version_2(path, p, node));
    return Status();
  }());
}

Status DumpBuilder::add_logits_run(const LogitsRun& run) {
  if (!impl_) return moved_from();
  Impl& im = *impl_;
  if (!im.open()) return im.closed_error();
  return im.in_file([&]() -> Status {
    NCERT_RETURN_IF_ERROR(check_leaf(run.name, "/logits", "logits run name"));
    const std::string path = "/logits/" + run.name;
    if (im.names.count(path)) return refuse(ErrorCode::kInvalidArgument, path, "already added");
    Node node;
    node.container = Container::kLogitsRun;
    node.path = path;
    node.number("vocab", run.vocab);
    node.text("tie_break", run.tie_break);
    node.text("prompt", run.prompt);
    node.array("tokens", run.tokens);
    node.array("logits", run.logits);
    node.array("positions", run.positions);
    node.array("prompt_tokens", run.prompt_tokens);
    NodeContext c;
    NCERT_RETURN_IF_ERROR(detail::check_attributes(node, c));
    c.symbols.v = *run.vocab;
    NCERT_RETURN_IF_ERROR(
        detail::check_datasets(node, c, [](std::string_view name, const DumpArray& a, NodeContext& ctx) {
          if (name == "tokens") ctx.symbols.t = a.shape()[0];
        }));
    for (const LmHead& head : im.pending) {
      if (head.run == run.name) NCERT_RETURN_IF_ERROR(lm_head_fits(head, c.symbols.t, *run.vocab));
    }
    NCERT_RETURN_IF_ERROR(im.written(im.write_node(node)));
    im.names.insert(path);
    im.runs[run.name] = {c.symbols.t, *run.vocab};
    std::erase_if(im.pending, [&](const LmHead& h) { return h.run == run.name; });
    if (run.logits.dtype() != DType::kF32) {
      im.note_version_2(path + "/logits: " + std::string(dtype_name(run.logits.dtype())) + " logits");
    }
    return Status();
  }());
}

Status DumpBuilder::add_tensor(const StateTensor& t) {
  if (!impl_) return moved_from();
  Impl& im = *impl_;
  if (!im.open()) return im.closed_error();
  return im.in_file([&]() -> Status {
    std::vector<std::string> parts;
    for (std::size_t from = 0;;) {
      const std::size_t slash = t.name.find('/', from);
      parts.push_back(t.name.substr(from, slash == std::string::npos ? std::string::npos : slash - from));
      if (slash == std::string::npos) break;
      from = slash + 1;
    }
    for (const std::string& part : parts) NCERT_RETURN_IF_ERROR(check_leaf(part, "/tensors", "tensor name component"));
    const std::string path = "/tensors/" + t.name;
    for (const std::string& other : im.names) {
      if (other == path || other.starts_with(path + "/") || path.starts_with(other + "/")) {
        return refuse(ErrorCode::kInvalidArgument, path, "clashes with " + other);
      }
    }
    if (!t.values.present()) return refuse(ErrorCode::kMissingMember, path, "no values given");
    const MemberRule& rule = member_rule(Container::kTensor, MemberKind::kDataset, "");
    const std::vector<DType> allowed = allowed_dtypes(rule, TypeContext{});
    NCERT_RETURN_IF_ERROR(
        detail::check_array(path, t.values, allowed, std::nullopt, "; state tensors are " + dtype_prose(allowed)));
    Node attrs;  // the compare attribute, judged by its rule
    attrs.container = Container::kTensor;
    attrs.path = path;
    attrs.text("compare", t.compare);
    NCERT_RETURN_IF_ERROR(detail::check_attributes(attrs, NodeContext{}));

    const std::string parent = path.substr(0, path.rfind('/'));
    NCERT_RETURN_IF_ERROR(im.written(im.writer->create_group(parent)));
    NCERT_RETURN_IF_ERROR(
        im.written(im.writer->write_dataset(path, t.values.dtype(), t.values.shape(), t.values.data())));
    if (t.compare) NCERT_RETURN_IF_ERROR(im.written(im.writer->write_attr(path, "compare", *t.compare)));
    im.names.insert(path);
    if (is_fp8_dtype(t.values.dtype())) {
      im.note_version_2(path + ": an " + std::string(dtype_name(t.values.dtype())) + " tensor");
    }
    return Status();
  }());
}

void DumpBuilder::abort() {
  if (impl_) impl_->discard();
}

Status DumpBuilder::close() {
  if (!impl_) return moved_from();
  Impl& im = *impl_;
  if (!im.open()) return im.closed_error();
  if (!im.pending.empty()) {
    const LmHead head = im.pending.front();
    im.discard();
    return im.in_file(refuse(ErrorCode::kMissingMember, head.path,
                             "logits_run = \"" + head.run + "\" names no /logits run (the dump was discarded)"));
  }
  RootInfo root;
  root.engine = im.options.engine;
  root.build = im.options.build;
  root.model = im.options.model;
  root.device = im.options.device;
  root.schema_version = schema_version();
  NCERT_RETURN_IF_ERROR(im.written(im.writer->write_root(root)));
  Status closed = im.writer->close();
  im.writer.reset();
  if (!closed.ok()) {
    im.discard();
    return closed;
  }
  // Without overwrite the file appears by a hard link, which fails rather than replace a file
  // that appeared since create(); with it, by rename, which replaces atomically.
  Status placed = move_into_place(im.temp, im.path, im.options.overwrite, "the dump");
  im.discard();  // the temporary name only, once placed
  return placed;
}

}  // namespace ncert::certify
