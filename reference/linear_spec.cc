#include "reference/linear_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace ncert::reference {

Result<Accumulator> parse_accumulator(std::string_view s) {
  Accumulator a;
  a.name = std::string(s);
  if (s == "f32-rn") {
    a.kind = AccumulatorKind::kF32Rn;
    a.u_eff = 0x1p-24;
    a.round_to_nearest = true;
    return a;
  }
  if (s == "f32-rz") {
    a.kind = AccumulatorKind::kF32Rz;
    a.u_eff = 0x1p-23;
    a.round_to_nearest = false;
    return a;
  }
  if (s == "matrix-unit") {
    a.kind = AccumulatorKind::kMatrixUnit;
    a.u_eff = 0x1p-22;
    a.round_to_nearest = false;
    return a;
  }
  if (s.substr(0, 2) == "u=") {
    const std::string num(s.substr(2));
    char* end = nullptr;
    const double u = std::strtod(num.c_str(), &end);
    // strtod skips leading blanks, so 'u= 1e-7' has loaded since format v1 and keeps loading
    // (python/ncert_dump accepts it too); a trailing blank never did.
    if (!num.empty() && end == num.c_str() + num.size() && std::isfinite(u) && u > 0 && u < 0.5) {
      a.kind = AccumulatorKind::kExplicit;
      a.u_eff = u;
      a.round_to_nearest = u <= 0x1p-24;
      return a;
    }
  }
  return Status(
      ErrorCode::kAccumulatorUnknown,
      "accumulator \"" + std::string(s) + "\" is not one of f32-rn, f32-rz, matrix-unit, u=<x> with 0 < x < 0.5");
}

Result<Epilogue> parse_epilogue(std::string_view s) {
  if (s == "none") return Epilogue::kNone;
  if (s == "bias") return Epilogue::kBias;
  if (s == "residual") return Epilogue::kResidual;
  if (s == "bias+residual") return Epilogue::kBiasResidual;
  return Status(ErrorCode::kEpilogueUnknown,
                "epilogue \"" + std::string(s) + "\" is not one of none, bias, residual, bias+residual");
}

Result<ResidualAt> parse_residual_at(std::string_view s) {
  if (s == "f32") return ResidualAt::kF32;
  if (s == "output") return ResidualAt::kOutput;
  return Status(ErrorCode::kOutputDtypeUnknown, "residual_at \"" + std::string(s) + "\" is not one of f32, output");
}

Result<BiasAt> parse_bias_at(std::string_view s) {
  if (s == "end") return BiasAt::kEnd;
  if (s == "start") return BiasAt::kStart;
  return Status(ErrorCode::kEpilogueUnknown, "bias_at \"" + std::string(s) + "\" is not one of end, start");
}

Result<OutputRounding> parse_output_rounding(std::string_view s) {
  if (s == "rne") return OutputRounding::kNearestEven;
  if (s == "rz") return OutputRounding::kTowardZero;
  if (s == "any") return OutputRounding::kAny;
  return Status(ErrorCode::kOutputRoundingUnknown,
                "output_rounding \"" + std::string(s) + "\" is not one of rne, rz, any");
}

std::string_view output_rounding_name(OutputRounding r) {
  switch (r) {
    case OutputRounding::kNearestEven:
      return "rne";
    case OutputRounding::kTowardZero:
      return "rz";
    case OutputRounding::kAny:
      return "any";
  }
  return "?";
}

std::string_view epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::kNone:
      return "none";
    case Epilogue::kBias:
      return "bias";
    case Epilogue::kResidual:
      return "residual";
    case Epilogue::kBiasResidual:
      return "bias+residual";
  }
  return "?";
}

std::string_view residual_at_name(ResidualAt r) {
  switch (r) {
    case ResidualAt::kF32:
      return "f32";
    case ResidualAt::kOutput:
      return "output";
  }
  return "?";
}

std::string_view bias_at_name(BiasAt b) {
  switch (b) {
    case BiasAt::kEnd:
      return "end";
    case BiasAt::kStart:
      return "start";
  }
  return "?";
}

Result<DType> parse_output_dtype(std::string_view s) {
  if (s == "f32") return DType::kF32;
  if (s == "bf16") return DType::kBf16;
  if (s == "f16") return DType::kF16;
  return Status(ErrorCode::kOutputDtypeUnknown, "output_dtype \"" + std::string(s) + "\" is not one of f32, bf16, f16");
}

namespace {

/// std::from_chars over all of `text` (decimal digits, an optional '-', nothing else).
std::optional<long long> whole_number(std::string_view text) {
  long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

bool power_of_two(Index v) { return v >= 1 && (v & (v - 1)) == 0; }

struct TreeSpec {
  KWalkTree tree = KWalkTree::kSeq;
  std::vector<Index> distances;  ///< butterfly only
  Index group = 0;               ///< groups only: g, and the trees inside and over the groups
  KWalkTree inner = KWalkTree::kSeq, outer = KWalkTree::kSeq;
};

/// `s` cut at every `sep` (empty fields kept).
std::vector<std::string_view> fields(std::string_view s, char sep);

/// seq, halving, pairs or butterfly(<d>,...) with each d a power of two, once.
std::optional<TreeSpec> parse_tree(std::string_view s) {
  if (s == "seq") return TreeSpec{KWalkTree::kSeq, {}};
  if (s == "halving") return TreeSpec{KWalkTree::kHalving, {}};
  if (s == "pairs") return TreeSpec{KWalkTree::kPairs, {}};
  if (s.starts_with("groups(") && s.back() == ')') {
    const std::vector<std::string_view> f = fields(s.substr(7, s.size() - 8), ',');
    // Inside and over the groups: seq, halving or pairs, as parse_tree reads them.
    const auto simple = [](std::string_view t) -> std::optional<KWalkTree> {
      const std::optional<TreeSpec> tree = parse_tree(t);
      if (!tree || tree->tree == KWalkTree::kButterfly || tree->tree == KWalkTree::kGroups) return std::nullopt;
      return tree->tree;
    };
    const auto g = f.size() == 3 ? whole_number(f[0]) : std::nullopt;
    const auto inner = f.size() == 3 ? simple(f[1]) : std::nullopt;
    const auto outer = f.size() == 3 ? simple(f[2]) : std::nullopt;
    if (!g || *g < 2 || !inner || !outer) return std::nullopt;
    return TreeSpec{KWalkTree::kGroups, {}, *g, *inner, *outer};
  }
  constexpr std::string_view kOpen = "butterfly(";
  if (s.substr(0, kOpen.size()) != kOpen || s.size() <= kOpen.size() || s.back() != ')') return std::nullopt;
  TreeSpec t{KWalkTree::kButterfly, {}};
  for (std::string_view d : fields(s.substr(kOpen.size(), s.size() - kOpen.size() - 1), ',')) {
    const auto v = whole_number(d);
    if (!v || !power_of_two(*v) || std::find(t.distances.begin(), t.distances.end(), *v) != t.distances.end()) {
      return std::nullopt;
    }
    t.distances.push_back(*v);
  }
  return t;
}

/// Whether the tree can reduce n values: any n for seq; a power of two for the others, and for a
/// butterfly exactly the distances 1, 2, ..., n/2 in some order.
bool tree_fits(const TreeSpec& t, Index n) {
  if (t.tree == KWalkTree::kSeq) return true;
  if (t.tree == KWalkTree::kGroups) {
    // At most 65,536 lanes; the emulation materializes those K reaches (lanes_used).
    return n <= 65536 && n % t.group == 0 && tree_fits(TreeSpec{t.inner, {}}, t.group) &&
           tree_fits(TreeSpec{t.outer, {}}, n / t.group);
  }
  if (!power_of_two(n)) return false;
  if (t.tree != KWalkTree::kButterfly) return true;
  Index covered = 0;
  for (Index d : t.distances) covered |= d;
  return n >= 2 && covered == n - 1;
}

std::vector<std::string_view> fields(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  return out;
}

/// lanes:<L>:<tree>[:fma] into w; false when `f` (the fields of the form) is not one.
bool parse_lanes(const std::vector<std::string_view>& f, KWalk& w) {
  if (f.size() != 3 && !(f.size() == 4 && f[3] == "fma")) return false;
  const auto lanes = whole_number(f[1]);
  const auto tree = parse_tree(f[2]);
  if (!lanes || *lanes < 2 || !tree || !tree_fits(*tree, *lanes)) return false;
  w.inner = KWalkInner::kLanes;
  w.lanes = *lanes;
  w.lane_tree = tree->tree;
  w.lane_distances = tree->distances;
  w.lane_group = tree->group;
  w.lane_group_inner = tree->inner;
  w.lane_group_outer = tree->outer;
  w.fma = f.size() == 4;
  return true;
}

/// promote:<P>:<p>:<rnd>[:fma] into w; false when `f` is not one.
bool parse_promote(const std::vector<std::string_view>& f, KWalk& w) {
  if (f.size() != 4 && !(f.size() == 5 && f[4] == "fma")) return false;
  const auto block = whole_number(f[1]);
  const auto bits = whole_number(f[2]);
  if (!block || *block < 1 || !bits || *bits < 8 || *bits > 24 || (f[3] != "rne" && f[3] != "rz")) return false;
  w.inner = KWalkInner::kPromote;
  w.promote_block = *block;
  w.promote_bits = static_cast<int>(*bits);
  w.promote_rounding = f[3] == "rne" ? PromoteRounding::kNearestEven : PromoteRounding::kTowardZero;
  w.fma = f.size() == 5;
  return true;
}

/// The walks a part can be reduced by (seq, seq-fma, lanes, promote) into w.
bool parse_inner(std::string_view s, KWalk& w) {
  if (s == "seq") return true;
  if (s == "seq-fma") {
    w.fma = true;
    return true;
  }
  const std::vector<std::string_view> f = fields(s, ':');
  if (f[0] == "lanes") return parse_lanes(f, w);
  if (f[0] == "promote") return parse_promote(f, w);
  return false;
}

/// splitk:<S>:<combine>/<inner> (`rest` follows "splitk:") into w.
bool parse_splitk(std::string_view rest, KWalk& w) {
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return false;
  const std::vector<std::string_view> head = fields(rest.substr(0, slash), ':');
  if (head.size() != 2) return false;
  const auto parts = whole_number(head[0]);
  const auto combine = parse_tree(head[1]);
  if (!parts || *parts < 1 || !combine || combine->tree == KWalkTree::kGroups || !tree_fits(*combine, *parts)) {
    return false;
  }
  w.parts = *parts;
  w.combine = combine->tree;
  w.combine_distances = combine->distances;
  return parse_inner(rest.substr(slash + 1), w);
}

}  // namespace

double KWalk::promote_unit() const {
  // Round to nearest: at most half a unit in the last of p places, 2^-p relative; toward zero a
  // whole unit, 2^(1-p).
  return std::ldexp(1.0, (promote_rounding == PromoteRounding::kNearestEven ? 0 : 1) - promote_bits);
}

bool k_walk_is_version_2(std::string_view walk) {
  for (std::string_view form : {"lanes:", "promote:", "splitk:", "codes:"}) {
    if (walk.starts_with(form)) return true;
  }
  return false;
}

std::string walk_split_message(const KWalk& walk, Index k) {
  const std::string head = "k_walk " + walk.name + ": K = " + std::to_string(k);
  if (walk.codes() && k % walk.code_chunk != 0) {
    return head + " is not a multiple of C = " + std::to_string(walk.code_chunk);
  }
  if (walk.code_once) {
    return head + " makes " + std::to_string(walk.terms(k)) + " code sums of " + std::to_string(walk.code_chunk) +
           ", where once scales a single sum (C = K)";
  }
  if (walk.codes()) {
    return head + " makes " + std::to_string(walk.terms(k)) + " code sums of " + std::to_string(walk.code_chunk) +
           ", not a multiple of " + std::to_string(walk.parts);
  }
  return head + " is not a multiple of " + std::to_string(walk.parts);
}

std::string_view code_scaling_name(CodeScaling s) {
  switch (s) {
    case CodeScaling::kScaleProduct:
      return "scale-product";
    case CodeScaling::kWScaleFirst:
      return "w-scale-first";
    case CodeScaling::kXScaleFirst:
      return "x-scale-first";
  }
  return "?";
}

namespace {

/// codes:<C>:<scaling>/<walk> (`rest` follows "codes:"): the f32 walk parsed as any other, then
/// the chunk and scaling set on it. A second codes: inside is not a form.
std::optional<KWalk> parse_codes(std::string_view whole, std::string_view rest) {
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::vector<std::string_view> head = fields(rest.substr(0, slash), ':');
  if (head.size() != 2) return std::nullopt;
  const auto chunk = whole_number(head[0]);
  std::optional<CodeScaling> scaling;
  for (CodeScaling c : {CodeScaling::kScaleProduct, CodeScaling::kWScaleFirst, CodeScaling::kXScaleFirst}) {
    if (head[1] == code_scaling_name(c)) scaling = c;
  }
  const std::string_view inner = rest.substr(slash + 1);
  if (!chunk || *chunk < 1 || !scaling || inner.starts_with("codes:")) return std::nullopt;
  KWalk w;
  w.declared = true;
  if (inner == "once") {
    w.code_once = true;  // otherwise seq's fields: one part, no lanes, not fused
  } else {
    auto walk = parse_k_walk(inner);
    if (!walk.ok()) return std::nullopt;
    w = std::move(walk).value();
  }
  w.code_chunk = *chunk;
  w.code_scaling = *scaling;
  w.name = std::string(whole);
  return w;
}

}  // namespace

Result<KWalk> parse_k_walk(std::string_view s) {
  if (s.starts_with("codes:")) {
    if (auto w = parse_codes(s, s.substr(6))) return *std::move(w);
    return Status(ErrorCode::kKWalkInvalid,
                  "k_walk \"" + std::string(s) + "\" is not one of " + std::string(kKWalkForms));
  }
  KWalk w;
  w.declared = true;
  w.name = std::string(s);
  if (parse_inner(s, w)) return w;
  w = KWalk{};  // a failed inner parse may have set fields
  w.declared = true;
  w.name = std::string(s);
  if (s.substr(0, 7) == "splitk:" && parse_splitk(s.substr(7), w)) return w;
  if (s.substr(0, 6) == "split:") {
    std::string_view rest = s.substr(6);
    const std::size_t colon = rest.find(':');
    std::string_view num = rest.substr(0, colon);
    std::string_view suffix = colon == std::string_view::npos ? "" : rest.substr(colon);
    const auto parts = whole_number(num);
    if (parts && *parts >= 1 && (suffix.empty() || suffix == ":fma")) {
      w.parts = *parts;
      w.fma = suffix == ":fma";
      return w;
    }
  }
  return Status(ErrorCode::kKWalkInvalid,
                "k_walk \"" + std::string(s) + "\" is not one of " + std::string(kKWalkForms));
}

Result<WeightFormat> parse_weight_format(std::string_view s) {
  if (s == "af4") return WeightFormat::kAf4;
  if (s == "bf16") return WeightFormat::kBf16;
  if (s == "f32") return WeightFormat::kF32;
  if (s == "f16") return WeightFormat::kF16;
  if (s == "int8") return WeightFormat::kInt8;
  if (s == "e4m3") return WeightFormat::kE4m3;
  if (s == "e5m2") return WeightFormat::kE5m2;
  return Status(ErrorCode::kFormatUnknown,
                "format \"" + std::string(s) + "\" is not one of af4, bf16, f32, f16, int8, e4m3, e5m2");
}

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kAf4:
      return "af4";
    case WeightFormat::kBf16:
      return "bf16";
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kInt8:
      return "int8";
    case WeightFormat::kE4m3:
      return "e4m3";
    case WeightFormat::kE5m2:
      return "e5m2";
  }
  return "?";
}

DType weight_values_dtype(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16:
      return DType::kBf16;
    case WeightFormat::kF32:
      return DType::kF32;
    case WeightFormat::kF16:
      return DType::kF16;
    case WeightFormat::kInt8:
      return DType::kI8;
    case WeightFormat::kE4m3:
      return DType::kE4m3;
    case WeightFormat::kE5m2:
      return DType::kE5m2;
    case WeightFormat::kAf4:
      break;
  }
  return DType::kU8;
}

double ScaledView::code(Index r, Index c) const {
  const Index i = r * k + c;
  if (values_dtype == DType::kI8) return static_cast<const std::int8_t*>(values)[i];
  return decode_element(values, values_dtype, i);
}

float ScaledView::scale(Index r, Index c) const {
  return decode_element(scales, scale_dtype, (r / scale_rows) * (k / group_size) + c / group_size);
}

void scaled_decode_row(const ScaledView& v, Index row, DType activation, double* exact, double* alg, float* kernel) {
  const bool pinned = v.dequant == Dequant::kF32 || v.dequant == Dequant::kOutput;
  const DType round_to = v.dequant == Dequant::kOutput ? activation : DType::kF32;
  for (Index c = 0; c < v.k; ++c) {
    const double q = v.code(row, c);
    const float s = v.scale(row, c);
    // q has at most 8 significant bits, s 24: their product is exact in f64. The kernel's f32
    // weight is that product rounded once (q is exact in f32).
    const double w = q * static_cast<double>(s);
    const float w32 = round_to_type(static_cast<float>(q) * s, round_to, false);
    if (exact) exact[c] = pinned ? static_cast<double>(w32) : w;
    if (alg) alg[c] = std::fabs(pinned ? static_cast<double>(w32) : w);
    if (kernel) kernel[c] = w32;
  }
}

const WeightSegment& segment_of(const Weights& w, Index j) {
  // Segments are few (a handful per projection); a linear scan beats a search here.
  for (const WeightSegment& s : w.segments) {
    if (j >= s.row_begin && j < s.row_end) return s;
  }
  NCERT_UNREACHABLE("weight row outside every segment (segment table not validated)");
}

void decode_weight_row(const Weights& w, Index j, DType activation, double* exact, double* alg, float* kernel,
                       double* spread) {
  const WeightSegment& s = segment_of(w, j);
  const Index local = j - s.row_begin;
  const Index k = w.k;
  switch (s.format) {
    case WeightFormat::kAf4:
      af4_decode_row(s.af4, local, activation, exact, alg, kernel, spread);
      return;
    case WeightFormat::kInt8:
    case WeightFormat::kE4m3:
    case WeightFormat::kE5m2:
      scaled_decode_row(s.scaled, local, activation, exact, alg, kernel);
      if (spread) std::fill(spread, spread + k, 0.0);
      return;
    case WeightFormat::kBf16:
    case WeightFormat::kF16: {
      const auto* v = static_cast<const std::uint16_t*>(s.values) + local * k;
      for (Index c = 0; c < k; ++c) {
        const float f = value_of_bits(v[c], weight_values_dtype(s.format));
        if (exact) exact[c] = f;
        if (alg) alg[c] = std::fabs(static_cast<double>(f));
        if (kernel) kernel[c] = f;
        if (spread) spread[c] = 0;
      }
      return;
    }
    case WeightFormat::kF32: {
      const auto* v = static_cast<const float*>(s.values) + local * k;
      for (Index c = 0; c < k; ++c) {
        if (exact) exact[c] = v[c];
        if (alg) alg[c] = std::fabs(static_cast<double>(v[c]));
        if (kernel) kernel[c] = v[c];
        if (spread) spread[c] = 0;
      }
      return;
    }
  }
}

Status rows_hold_widths(const ProjectionLayout& l) {
  // The packing helper's own guard (packing/guards.cc check_strides) starts with this one, so
  // the words are the same wherever the guard trips (python/ncert_dump/guards.py mirrors them).
  if (l.in_stride < l.k) {
    return Status(ErrorCode::kGuardStrideBelowWidth,
                  "input x stride " + std::to_string(l.in_stride) + " < valid width " + std::to_string(l.k));
  }
  if (l.out_stride < l.n) {
    return Status(ErrorCode::kGuardStrideBelowWidth,
                  "output stride " + std::to_string(l.out_stride) + " < valid width " + std::to_string(l.n));
  }
  return Status();
}

Status validate_problem(const LinearProblem& p) {
  if (p.weights == nullptr) return Status(ErrorCode::kInvalidArgument, "no weights");
  const Weights& w = *p.weights;
  if (p.x.empty()) return Status(ErrorCode::kInvalidArgument, "no activations x");
  if (!is_float_dtype(p.x.dtype)) return Status(ErrorCode::kInvalidArgument, "x must be f32, bf16 or f16");
  if (p.x.cols != w.k) {
    return Status(ErrorCode::kShapeMismatch,
                  "x has " + std::to_string(p.x.cols) + " valid columns but K = " + std::to_string(w.k));
  }
  if (p.x.stride < p.x.cols) {
    return Status(ErrorCode::kGuardStrideBelowWidth,
                  "x stride " + std::to_string(p.x.stride) + " < K " + std::to_string(p.x.cols));
  }
  if (has_bias(p.epilogue) && (p.bias.empty() || p.bias.size != w.n)) {
    return Status(ErrorCode::kShapeMismatch, "epilogue needs a bias of n = " + std::to_string(w.n));
  }
  if (has_residual(p.epilogue)) {
    if (p.residual.empty() || p.residual.rows != p.x.rows || p.residual.cols != w.n || p.residual.stride < w.n) {
      return Status(ErrorCode::kShapeMismatch,
                    "epilogue needs a residual of " + std::to_string(p.x.rows) + " x " + std::to_string(w.n));
    }
  }
  if (!is_float_dtype(p.output)) return Status(ErrorCode::kOutputDtypeUnknown, "output must be f32, bf16 or f16");
  if (p.x_quant.type != XQuantType::kNone) {
    const XQuantizedView& q = p.x_quantized;
    if (q.values == nullptr || q.scales == nullptr) {
      return Status(ErrorCode::kInvalidArgument, "x_quant declared without x_quantized and x_scales");
    }
    if (p.x_quant.group < 1 || w.k % p.x_quant.group != 0) {
      return Status(ErrorCode::kGuardAf4Geometry, "x_quant_group = " + std::to_string(p.x_quant.group) +
                                                      " does not divide K = " + std::to_string(w.k));
    }
  }
  // The host guard (packing::validate_weights) holds every AF4 segment to these before a check
  // evaluates it; a caller that skipped it (a run's lm_head evaluated alone) must not read
  // K/group_size groups a row out of arrays stored for another count, or a null member.
  for (const WeightSegment& s : w.segments) {
    if (s.format != WeightFormat::kAf4) continue;
    const Af4View& a = s.af4;
    const Index g = a.layout.group_size;
    if (g < 1 || w.k % g != 0) {
      return Status(ErrorCode::kGuardAf4Geometry, "segment " + s.name + ": group_size " + std::to_string(g) +
                                                      " does not divide K = " + std::to_string(w.k));
    }
    const bool zero_point = a.layout.variant == Af4Variant::kZeroPoint;
    const bool affine = a.layout.variant == Af4Variant::kAffine;
    if (a.codes == nullptr || a.scales == nullptr || (affine && a.biases == nullptr) ||
        (zero_point && a.zero_points == nullptr)) {
      return Status(ErrorCode::kInvalidArgument, "segment " + s.name + ": AF4 " +
                                                     std::string(af4_variant_name(a.layout.variant)) +
                                                     " weights without their codes, scales" +
                                                     (affine       ? ", biases"
                                                      : zero_point ? ", zero points"
                                                                   : ""));
    }
  }
  if (p.walk.declared && !p.walk.divides(w.k)) {
    return Status(ErrorCode::kGuardWalkSplit, walk_split_message(p.walk, w.k));
  }
  if (!(p.lambda > 0) || !std::isfinite(p.lambda)) {
    return Status(ErrorCode::kInvalidArgument, "lambda must be a positive number");
  }
  return Status();
}

}  // namespace ncert::reference

namespace ncert::reference {

Result<XQuantType> parse_x_quant(std::string_view s) {
  for (XQuantType t : {XQuantType::kInt8, XQuantType::kUint8, XQuantType::kE4m3, XQuantType::kE5m2}) {
    if (x_quant_name(t) == s) return t;
  }
  return Status(ErrorCode::kXQuantUnknown, "x_quant \"" + std::string(s) + "\" is not one of int8, uint8, e4m3, e5m2");
}

std::string_view x_quant_name(XQuantType t) {
  switch (t) {
    case XQuantType::kNone:
      return "none";
    case XQuantType::kInt8:
      return "int8";
    case XQuantType::kUint8:
      return "uint8";
    case XQuantType::kE4m3:
      return "e4m3";
    case XQuantType::kE5m2:
      return "e5m2";
  }
  return "?";
}

DType x_quant_storage(XQuantType t) {
  switch (t) {
    case XQuantType::kInt8:
      return DType::kI8;
    case XQuantType::kUint8:
      return DType::kU8;
    case XQuantType::kE4m3:
      return DType::kE4m3;
    case XQuantType::kE5m2:
      return DType::kE5m2;
    case XQuantType::kNone:
      break;
  }
  return DType::kF32;
}

Result<XQuantRounding> parse_x_quant_rounding(std::string_view s) {
  if (s == "rne") return XQuantRounding::kNearestEven;
  if (s == "rna") return XQuantRounding::kNearestAway;
  return Status(ErrorCode::kXQuantUnknown, "x_quant_rounding \"" + std::string(s) + "\" is not one of rne, rna");
}

std::string_view x_quant_rounding_name(XQuantRounding r) { return r == XQuantRounding::kNearestEven ? "rne" : "rna"; }

double XQuantizedView::code(Index r, Index c) const {
  const Index i = r * k + c;
  switch (type) {
    case XQuantType::kInt8:
      return static_cast<const std::int8_t*>(values)[i];
    case XQuantType::kUint8:
      return static_cast<const std::uint8_t*>(values)[i];
    case XQuantType::kE4m3:
    case XQuantType::kE5m2:
      return decode_element(values, x_quant_storage(type), i);
    case XQuantType::kNone:
      break;
  }
  return 0;
}

double XQuantizedView::zero_point(Index r, Index g) const {
  if (zero_points == nullptr) return 0;
  const Index i = r * (k / group) + g;
  return type == XQuantType::kInt8 ? static_cast<const std::int8_t*>(zero_points)[i]
                                   : static_cast<const std::uint8_t*>(zero_points)[i];
}

double XQuantizedView::scale(Index r, Index g) const {
  return decode_element(scales, scale_dtype, r * (k / group) + g);
}

double XQuantizedView::value(Index r, Index c) const {
  const Index g = c / group;
  // (q - zp) is an integer of at most 9 bits, or an FP8 value; s an f32: the product is exact in f64.
  return (code(r, c) - zero_point(r, g)) * scale(r, g);
}

}  // namespace ncert::reference
