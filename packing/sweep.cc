#include "packing/sweep.h"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>

#include "packing/guards.h"
#include "packing/width_buckets.h"
#include "reference/float_bits.h"

namespace ncert::packing {

using reference::Epilogue;
using reference::ResidualAt;
using reference::WeightFormat;

// ---- keys -------------------------------------------------------------------------------------

namespace {

std::string kind_name(CaseKind k) {
  switch (k) {
    case CaseKind::kIdentity: return "identity";
    case CaseKind::kGuard: return "guard";
    case CaseKind::kWidth: return "width";
  }
  return "?";
}

}  // namespace

std::string SweepCase::key() const {
  std::string s = "pack(kind=" + kind_name(kind);
  auto add = [&](const char* name, const std::string& v) { s += std::string(",") + name + "=" + v; };
  add("R", std::to_string(requests));
  add("B", std::to_string(block_rows));
  add("cap", std::to_string(cap));
  add("P", std::to_string(slots));
  add("commit", commit);
  add("fmt", formats);
  add("K", std::to_string(k));
  add("N", std::to_string(n));
  add("inpad", std::to_string(in_pad));
  add("outpad", std::to_string(out_pad));
  add("cpad", std::to_string(compact_pad));
  add("x", std::string(dtype_name(x)));
  add("y", std::string(dtype_name(output)));
  add("bias", std::string(dtype_name(bias)));
  add("res", std::string(dtype_name(residual)));
  add("epi", std::string(reference::epilogue_name(epilogue)));
  add("at", std::string(reference::residual_at_name(at)));
  add("inplace", inplace ? "1" : "0");
  add("walk", walk.empty() ? "none" : walk);
  add("perm", permute ? "1" : "0");
  add("guard", guard.empty() ? "none" : guard);
  add("seed", std::to_string(seed));
  return s + ")";
}

Result<SweepCase> parse_case(std::string_view key) {
  auto bad = [&](const std::string& why) {
    return Status(ErrorCode::kUsage, "sweep case \"" + std::string(key) + "\": " + why);
  };
  if (key.substr(0, 5) != "pack(" || key.empty() || key.back() != ')') {
    return bad("expected pack(name=value,...)");
  }
  std::map<std::string, std::string> f;
  std::string_view body = key.substr(5, key.size() - 6);
  while (!body.empty()) {
    const std::size_t comma = body.find(',');
    const std::string_view item = body.substr(0, comma);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return bad("field \"" + std::string(item) + "\" has no '='");
    f[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
    if (comma == std::string_view::npos) break;
    body = body.substr(comma + 1);
  }
  SweepCase c;
  auto take = [&](const char* name) -> Result<std::string> {
    auto it = f.find(name);
    if (it == f.end()) return bad(std::string("missing field ") + name);
    std::string v = it->second;
    f.erase(it);
    return v;
  };
  auto take_int = [&](const char* name, Index* out) -> Status {
    NCERT_ASSIGN_OR_RETURN(std::string v, take(name));
    long long n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size()) return bad(std::string(name) + " = " + v + " is not an integer");
    *out = n;
    return Status();
  };
  auto take_dtype = [&](const char* name, DType* out) -> Status {
    NCERT_ASSIGN_OR_RETURN(std::string v, take(name));
    auto t = parse_dtype(v);
    if (!t || !is_float_dtype(*t)) return bad(std::string(name) + " = " + v + " is not f32/bf16");
    *out = *t;
    return Status();
  };
  NCERT_ASSIGN_OR_RETURN(std::string kind, take("kind"));
  if (kind == "identity") c.kind = CaseKind::kIdentity;
  else if (kind == "guard") c.kind = CaseKind::kGuard;
  else if (kind == "width") c.kind = CaseKind::kWidth;
  else return bad("kind = " + kind);
  NCERT_RETURN_IF_ERROR(take_int("R", &c.requests));
  NCERT_RETURN_IF_ERROR(take_int("B", &c.block_rows));
  NCERT_RETURN_IF_ERROR(take_int("cap", &c.cap));
  NCERT_RETURN_IF_ERROR(take_int("P", &c.slots));
  NCERT_ASSIGN_OR_RETURN(c.commit, take("commit"));
  NCERT_ASSIGN_OR_RETURN(c.formats, take("fmt"));
  NCERT_RETURN_IF_ERROR(take_int("K", &c.k));
  NCERT_RETURN_IF_ERROR(take_int("N", &c.n));
  NCERT_RETURN_IF_ERROR(take_int("inpad", &c.in_pad));
  NCERT_RETURN_IF_ERROR(take_int("outpad", &c.out_pad));
  NCERT_RETURN_IF_ERROR(take_int("cpad", &c.compact_pad));
  NCERT_RETURN_IF_ERROR(take_dtype("x", &c.x));
  NCERT_RETURN_IF_ERROR(take_dtype("y", &c.output));
  NCERT_RETURN_IF_ERROR(take_dtype("bias", &c.bias));
  NCERT_RETURN_IF_ERROR(take_dtype("res", &c.residual));
  NCERT_ASSIGN_OR_RETURN(std::string epi, take("epi"));
  auto e = reference::parse_epilogue(epi);
  if (!e.ok()) return bad(e.status().message());
  c.epilogue = *e;
  NCERT_ASSIGN_OR_RETURN(std::string at, take("at"));
  auto a = reference::parse_residual_at(at);
  if (!a.ok()) return bad(a.status().message());
  c.at = *a;
  Index flag = 0;
  NCERT_RETURN_IF_ERROR(take_int("inplace", &flag));
  c.inplace = flag != 0;
  NCERT_ASSIGN_OR_RETURN(c.walk, take("walk"));
  if (c.walk == "none") c.walk.clear();
  if (!c.walk.empty() && !reference::parse_k_walk(c.walk).ok()) return bad("walk = " + c.walk);
  NCERT_RETURN_IF_ERROR(take_int("perm", &flag));
  c.permute = flag != 0;
  NCERT_ASSIGN_OR_RETURN(c.guard, take("guard"));
  if (c.guard == "none") c.guard.clear();
  Index seed = 0;
  NCERT_RETURN_IF_ERROR(take_int("seed", &seed));
  c.seed = static_cast<std::uint64_t>(seed);
  if (!f.empty()) return bad("unknown field " + f.begin()->first);
  static const std::vector<std::string> kCommits = {"full", "one", "ragged", "single",
                                                    "alternate", "decreasing", "empty"};
  if (std::find(kCommits.begin(), kCommits.end(), c.commit) == kCommits.end()) {
    return bad("commit = " + c.commit);
  }
  static const std::vector<std::string> kFormats = {"bf16", "f32", "af4a", "af4c", "mix"};
  if (std::find(kFormats.begin(), kFormats.end(), c.formats) == kFormats.end()) {
    return bad("fmt = " + c.formats);
  }
  if (c.requests < 1 || c.block_rows < 1 || c.k < 1 || c.n < 1 || c.slots < 0 || c.cap < 0 ||
      c.in_pad < 0 || c.out_pad < 0 || c.compact_pad < 0 || c.k > (1 << 20) || c.n > (1 << 20) ||
      c.requests * c.block_rows > (1 << 16)) {
    return bad("sizes out of range");
  }
  if (!c.guard.empty()) {
    const auto& names = guard_names();
    if (std::none_of(names.begin(), names.end(), [&](const auto& g) { return g.first == c.guard; })) {
      return bad("guard = " + c.guard);
    }
  }
  return c;
}

const std::vector<std::pair<std::string, ErrorCode>>& guard_names() {
  static const std::vector<std::pair<std::string, ErrorCode>> kNames = {
      {"plan-shape-requests", ErrorCode::kGuardPlanShape},
      {"plan-shape-cap", ErrorCode::kGuardPlanShape},
      {"unsupported-residual-type", ErrorCode::kGuardUnsupported},
      {"unsupported-folded-walk", ErrorCode::kGuardUnsupported},
      {"walk-split", ErrorCode::kGuardWalkSplit},
      {"segment-gap", ErrorCode::kGuardSegmentTable},
      {"segment-overlap", ErrorCode::kGuardSegmentTable},
      {"segment-total", ErrorCode::kGuardSegmentTable},
      {"af4-group", ErrorCode::kGuardAf4Geometry},
      {"af4-codes-shape", ErrorCode::kGuardAf4Geometry},
      {"af4-scales-shape", ErrorCode::kGuardAf4Geometry},
      {"stride-input", ErrorCode::kGuardStrideBelowWidth},
      {"stride-output", ErrorCode::kGuardStrideBelowWidth},
      {"stride-compact", ErrorCode::kGuardStrideBelowWidth},
      {"too-few-slots", ErrorCode::kGuardTooFewSlots},
      {"row-out-of-range", ErrorCode::kGuardRowOutOfRange},
      {"row-negative", ErrorCode::kGuardRowOutOfRange},
      {"duplicate-row", ErrorCode::kGuardDuplicateRow},
      {"cap-exceeded", ErrorCode::kGuardCapExceeded},
      {"commit-mismatch", ErrorCode::kGuardCommitMismatch},
      {"not-prefix", ErrorCode::kGuardNotPrefix},
      {"extent-x", ErrorCode::kGuardExtentTooSmall},
      {"extent-scratch", ErrorCode::kGuardExtentTooSmall},
      {"misaligned", ErrorCode::kGuardMisaligned},
      {"output-aliases-input", ErrorCode::kGuardOutputAliasesInput},
      {"partial-overlap", ErrorCode::kGuardPartialOverlap},
      {"scratch-overlap", ErrorCode::kGuardPartialOverlap},
      {"capacity", ErrorCode::kGuardCapacity},
  };
  return kNames;
}

// ---- buffers with canaries --------------------------------------------------------------------

namespace {

constexpr std::size_t kCanaryBytes = 64;

inline unsigned char canary_byte(std::size_t i) {
  return static_cast<unsigned char>(0xA5u ^ (i * 29u));
}

/// A heap buffer whose payload is surrounded by canary bytes (checked after every case) and
/// aligned to 64 bytes plus an optional deliberate misalignment.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(std::size_t bytes, std::size_t misalign = 0)
      : bytes_(bytes), misalign_(misalign) {
    mem_.resize(bytes + 2 * kCanaryBytes + 64 + misalign);
    const auto base = reinterpret_cast<std::uintptr_t>(mem_.data());
    const std::uintptr_t start = base + kCanaryBytes;
    offset_ = kCanaryBytes + (64 - start % 64) % 64 + misalign;
    for (std::size_t i = 0; i < mem_.size(); ++i) mem_[i] = canary_byte(i);
  }
  // A copy gets its own aligned payload (a plain vector copy would keep the old offset on a
  // differently aligned allocation) and fresh canaries.
  GuardedBuffer(const GuardedBuffer& o) : GuardedBuffer(o.bytes_, o.misalign_) {
    if (bytes_ > 0) std::memcpy(data(), o.data(), bytes_);
  }
  GuardedBuffer& operator=(const GuardedBuffer& o) {
    if (this != &o) *this = GuardedBuffer(o);
    return *this;
  }
  GuardedBuffer(GuardedBuffer&&) noexcept = default;
  GuardedBuffer& operator=(GuardedBuffer&&) noexcept = default;
  unsigned char* data() { return mem_.data() + offset_; }
  const unsigned char* data() const { return mem_.data() + offset_; }
  std::size_t bytes() const { return bytes_; }
  bool intact() const {
    for (std::size_t i = 0; i < offset_; ++i) {
      if (mem_[i] != canary_byte(i)) return false;
    }
    for (std::size_t i = offset_ + bytes_; i < mem_.size(); ++i) {
      if (mem_[i] != canary_byte(i)) return false;
    }
    return true;
  }
  const std::vector<unsigned char>& raw() const { return mem_; }

 private:
  std::vector<unsigned char> mem_;
  std::size_t offset_ = 0;
  std::size_t bytes_ = 0;
  std::size_t misalign_ = 0;
};

// Signalling-NaN bit patterns for padding: never produced by arithmetic, so one in an output
// cell can only have been copied there.
constexpr std::uint32_t kNanF32 = 0x7FA5A5A5u;
constexpr std::uint16_t kNanBf16 = 0x7FA5u;

void put(unsigned char* base, DType t, Index i, float v) {
  if (t == DType::kF32) {
    std::memcpy(base + i * 4, &v, 4);
  } else {
    const std::uint16_t b = reference::f32_to_bf16(v);
    std::memcpy(base + i * 2, &b, 2);
  }
}

void put_nan(unsigned char* base, DType t, Index i) {
  if (t == DType::kF32) {
    std::memcpy(base + i * 4, &kNanF32, 4);
  } else {
    std::memcpy(base + i * 2, &kNanBf16, 2);
  }
}

float get(const unsigned char* base, DType t, Index i) { return reference::decode_element(base, t, i); }

/// rows x stride matrix: valid columns from gen(), padding columns NaN-patterned.
GuardedBuffer make_matrix(Index rows, Index stride, Index width, DType t,
                          const std::function<float()>& gen, std::size_t misalign = 0) {
  GuardedBuffer b(static_cast<std::size_t>(rows * stride * dtype_size(t)), misalign);
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < stride; ++c) {
      if (c < width) put(b.data(), t, r * stride + c, gen());
      else put_nan(b.data(), t, r * stride + c);
    }
  }
  return b;
}

// ---- weights ----------------------------------------------------------------------------------

struct WeightStore {
  std::vector<std::vector<unsigned char>> blobs;
  reference::Weights weights;
  std::vector<SegmentGeometry> geometry;
};

void add_segment(WeightStore& s, std::mt19937_64& rng, WeightFormat fmt, Index rows, Index k,
                 const reference::Af4Layout& layout, const std::string& name) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  reference::WeightSegment seg;
  SegmentGeometry g;
  seg.name = g.name = name;
  seg.format = g.format = fmt;
  seg.row_begin = g.row_begin = s.weights.n;
  seg.row_end = g.row_end = s.weights.n + rows;
  if (fmt != WeightFormat::kAf4) {
    const DType t = fmt == WeightFormat::kF32 ? DType::kF32 : DType::kBf16;
    std::vector<unsigned char> v(static_cast<std::size_t>(rows * k * dtype_size(t)));
    for (Index i = 0; i < rows * k; ++i) put(v.data(), t, i, 0.05f * nd(rng));
    s.blobs.push_back(std::move(v));
    seg.values = s.blobs.back().data();
    g.values_cols = k;
  } else {
    const Index groups = k / layout.group_size;
    std::vector<unsigned char> codes(static_cast<std::size_t>(rows * k / 2));
    for (auto& c : codes) c = static_cast<unsigned char>(rng());
    std::vector<unsigned char> scales(static_cast<std::size_t>(rows * groups * dtype_size(layout.scale_dtype)));
    std::vector<unsigned char> biases(scales.size());
    for (Index i = 0; i < rows * groups; ++i) {
      const float sc = 0.01f * nd(rng), bi = 0.05f * nd(rng);
      if (layout.scale_dtype == DType::kF16) {
        const std::uint16_t hs = reference::f32_to_f16(sc), hb = reference::f32_to_f16(bi);
        std::memcpy(&scales[i * 2], &hs, 2);
        std::memcpy(&biases[i * 2], &hb, 2);
      } else {
        put(scales.data(), layout.scale_dtype, i, sc);
        put(biases.data(), layout.scale_dtype, i, bi);
      }
    }
    s.blobs.push_back(std::move(codes));
    s.blobs.push_back(std::move(scales));
    s.blobs.push_back(std::move(biases));
    seg.af4.layout = layout;
    if (layout.variant == reference::Af4Variant::kCodebook) {
      seg.af4.layout.table = reference::builtin_codebook(layout.codebook);
    }
    seg.af4.rows = rows;
    seg.af4.k = k;
    const std::size_t n = s.blobs.size();
    seg.af4.codes = s.blobs[n - 3].data();
    seg.af4.scales = s.blobs[n - 2].data();
    seg.af4.biases = s.blobs[n - 1].data();
    g.af4 = seg.af4.layout;
    g.codes_cols = layout.packing == reference::Af4Packing::kU32Lsb ? k / 8 : k / 2;
    g.scales_cols = groups;
    g.biases_cols = layout.variant == reference::Af4Variant::kAffine ? groups : 0;
  }
  s.weights.n += rows;
  s.weights.segments.push_back(seg);
  s.geometry.push_back(g);
}

reference::Af4Layout af4_layout(reference::Af4Variant v, reference::Af4Packing p, Index group,
                                DType scale, reference::Dequant d,
                                reference::Af4Codebook cb = reference::Af4Codebook::kNone) {
  reference::Af4Layout L;
  L.variant = v;
  L.packing = p;
  L.group_size = group;
  L.scale_dtype = scale;
  L.dequant = d;
  L.codebook = cb;
  return L;
}

/// blobs must not reallocate after pointers are taken: reserve generously first.
WeightStore make_weights(const std::string& fmt, Index n, Index k, std::uint64_t seed) {
  using reference::Af4Packing;
  using reference::Af4Variant;
  using reference::Dequant;
  WeightStore s;
  s.blobs.reserve(16);
  s.weights.k = k;
  std::mt19937_64 rng(seed * 7919 + 13);
  if (fmt == "bf16") {
    add_segment(s, rng, WeightFormat::kBf16, n, k, {}, "bf16");
  } else if (fmt == "f32") {
    add_segment(s, rng, WeightFormat::kF32, n, k, {}, "f32");
  } else if (fmt == "af4a") {
    add_segment(s, rng, WeightFormat::kAf4, n, k,
                af4_layout(Af4Variant::kAffine, Af4Packing::kU32Lsb, 32, DType::kBf16, Dequant::kExact),
                "af4-affine");
  } else if (fmt == "af4c") {
    add_segment(s, rng, WeightFormat::kAf4, n, k,
                af4_layout(Af4Variant::kCodebook, Af4Packing::kU8Msb, 16, DType::kF16, Dequant::kF32,
                           reference::Af4Codebook::kNf4),
                "af4-nf4");
  } else {  // mix: AF4 (output dequant) + bf16 + f32
    const Index a = std::max<Index>(1, n / 3), b = std::max<Index>(1, n / 3);
    add_segment(s, rng, WeightFormat::kAf4, a, k,
                af4_layout(Af4Variant::kAffine, Af4Packing::kU8Lsb, 16, DType::kF32, Dequant::kOutput),
                "mix-af4");
    add_segment(s, rng, WeightFormat::kBf16, b, k, {}, "mix-bf16");
    add_segment(s, rng, WeightFormat::kF32, n - a - b, k, {}, "mix-f32");
  }
  return s;
}

// ---- one case's data ------------------------------------------------------------------------

std::vector<std::int32_t> commits_for(const SweepCase& c) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(c.requests), 0);
  for (Index r = 0; r < c.requests; ++r) {
    Index x = 0;
    if (c.commit == "full") x = c.cap;
    else if (c.commit == "one") x = std::min<Index>(1, c.cap);
    else if (c.commit == "ragged") x = c.cap > 0 ? r % c.cap + 1 : 0;
    else if (c.commit == "single") x = r == 0 ? c.cap : 0;
    else if (c.commit == "alternate") x = r % 2 == 0 ? c.cap : 0;
    else if (c.commit == "decreasing") x = std::max<Index>(0, c.cap - r);
    v[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(x);
  }
  return v;
}

struct CaseData {
  PackPlan plan;
  WeightStore store;
  std::shared_ptr<const LinearKernel> kernel;
  GuardedBuffer x, residual, bias, out_before, compact_in, compact_out;
};

Result<std::unique_ptr<CaseData>> build(const SweepCase& c) {
  auto d = std::make_unique<CaseData>();
  PackPlan& p = d->plan;
  p.requests = c.requests;
  p.block_rows = c.block_rows;
  p.cap = c.cap;
  p.slots = c.slots;
  p.commit_counts = commits_for(c);
  p.selector = canonical_selector(c.block_rows, p.commit_counts, c.slots);
  if (c.permute) {
    std::shuffle(p.selector.begin(), p.selector.end(), std::mt19937_64(c.seed));
  }
  p.k = c.k;
  p.n = c.n;
  p.in_stride = c.k + c.in_pad;
  p.out_stride = c.n + c.out_pad;
  p.residual_stride = p.out_stride;
  p.compact_in_stride = c.k + c.compact_pad;
  p.compact_out_stride = c.n + c.compact_pad;
  p.x_dtype = c.x;
  p.output = c.output;
  p.bias_dtype = c.bias;
  p.residual_dtype = c.inplace ? c.output : c.residual;
  p.epilogue = c.epilogue;
  p.residual_at = c.at;
  if (!c.walk.empty()) {
    NCERT_ASSIGN_OR_RETURN(p.walk, reference::parse_k_walk(c.walk));
  }
  d->store = make_weights(c.formats, c.n, c.k, c.seed);
  p.segments = d->store.geometry;
  NCERT_ASSIGN_OR_RETURN(d->kernel, LinearKernel::create(d->store.weights, c.x, p.walk));

  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto gen = [&] { return nd(rng); };
  const Index M = p.rows();
  d->x = make_matrix(M, p.in_stride, p.k, p.x_dtype, gen);
  if (reference::has_bias(p.epilogue)) d->bias = make_matrix(1, p.n, p.n, p.bias_dtype, gen);
  if (reference::has_residual(p.epilogue) && !c.inplace) {
    d->residual = make_matrix(M, p.residual_stride, p.n, p.residual_dtype, gen);
  }
  // The output buffer before the call: "old" finite values, NaN-patterned padding. In place,
  // these old values are the residual.
  d->out_before = make_matrix(M, p.out_stride, p.n, p.output, gen);
  d->compact_in = make_matrix(std::max<Index>(p.slots, 1), p.compact_in_stride, 0, p.x_dtype, gen);
  d->compact_out = make_matrix(std::max<Index>(p.slots, 1), p.compact_out_stride, 0, DType::kF32, gen);
  return d;
}

HostBuffers buffers_for(CaseData& d, GuardedBuffer& out, bool inplace) {
  HostBuffers b;
  b.x = d.x.data();
  b.x_bytes = d.x.bytes();
  b.out = out.data();
  b.out_bytes = out.bytes();
  if (reference::has_residual(d.plan.epilogue)) {
    b.residual = inplace ? out.data() : d.residual.data();
    b.residual_bytes = inplace ? out.bytes() : d.residual.bytes();
  }
  if (reference::has_bias(d.plan.epilogue)) {
    b.bias = d.bias.data();
    b.bias_bytes = d.bias.bytes();
  }
  b.compact_in = d.compact_in.data();
  b.compact_in_bytes = d.compact_in.bytes();
  b.compact_out = reinterpret_cast<float*>(d.compact_out.data());
  b.compact_out_bytes = d.compact_out.bytes();
  return b;
}

std::string cell(Index r, Index c) { return "row " + std::to_string(r) + " col " + std::to_string(c); }

std::string hex_of(const unsigned char* base, DType t, Index i) {
  char buf[16];
  if (t == DType::kF32) {
    std::uint32_t u;
    std::memcpy(&u, base + i * 4, 4);
    std::snprintf(buf, sizeof buf, "0x%08x", u);
  } else {
    std::uint16_t u;
    std::memcpy(&u, base + i * 2, 2);
    std::snprintf(buf, sizeof buf, "0x%04x", u);
  }
  return buf;
}

bool same_payload(const GuardedBuffer& a, const GuardedBuffer& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

// ---- runners --------------------------------------------------------------------------------

CaseResult run_identity(const SweepCase& c, const ExecuteFn& helper) {
  CaseResult res;
  res.alias = c.inplace;
  auto built = build(c);
  if (!built.ok()) {
    res.pass = false;
    res.failure = "case does not build: " + built.status().to_string();
    return res;
  }
  CaseData& d = **built;
  const PackPlan& p = d.plan;
  const Index M = p.rows();
  const int osz = dtype_size(p.output);
  const GuardedBuffer x_before = d.x;

  // Unpacked path on its own copy of the output (and of the residual when in place).
  GuardedBuffer out_u = d.out_before;
  HostBuffers bu = buffers_for(d, out_u, c.inplace);
  if (Status s = validate_unpacked(p, bu); !s.ok()) {
    res.pass = false;
    res.failure = "valid case refused by the unpacked guards: " + s.to_string();
    return res;
  }
  run_unpacked(p, *d.kernel, bu);

  GuardedBuffer out_p = d.out_before;
  HostBuffers bp = buffers_for(d, out_p, c.inplace);
  auto path = helper(p, *d.kernel, bp);
  if (!path.ok() || *path != PathTaken::kPacked) {
    res.pass = false;
    res.failure = "valid plan not run packed: " + (path.ok() ? std::string("fell back") : path.status().to_string());
    return res;
  }

  auto failure = [&](std::string msg) {
    res.pass = false;
    res.failure = std::move(msg);
    return res;
  };
  std::vector<Index> slot_of(static_cast<std::size_t>(M), -1);
  for (Index s = 0; s < p.slots; ++s) {
    if (p.selector[static_cast<std::size_t>(s)] >= 0) slot_of[p.selector[static_cast<std::size_t>(s)]] = s;
  }
  // Canaries first: an out-of-bounds write invalidates everything else.
  const std::pair<const char*, const GuardedBuffer*> all[] = {
      {"x", &d.x}, {"residual", &d.residual}, {"bias", &d.bias}, {"compact input", &d.compact_in},
      {"compact output", &d.compact_out}, {"packed output", &out_p}, {"unpacked output", &out_u}};
  for (const auto& [name, buf] : all) {
    if (buf->bytes() > 0 && !buf->intact()) {
      return failure(std::string("canary bytes around the ") + name + " buffer were overwritten (" +
                     std::string(error_name(ErrorCode::kGuardCanaryClobbered)) + ")");
    }
  }
  if (!same_payload(d.x, x_before)) return failure("the input x was modified");
  Index compared = 0;
  for (Index r = 0; r < M; ++r) {
    const bool selected = slot_of[r] >= 0;
    for (Index j = 0; j < p.out_stride; ++j) {
      const Index i = r * p.out_stride + j;
      const bool valid = j < p.n;
      const unsigned char* pp = out_p.data() + i * osz;
      if (selected && valid) {
        const unsigned char* up = out_u.data() + i * osz;
        if (std::memcmp(pp, up, static_cast<std::size_t>(osz)) != 0) {
          return failure("identity: packed " + hex_of(out_p.data(), p.output, i) + " != unpacked " +
                         hex_of(out_u.data(), p.output, i) + " at " + cell(r, j) + " (slot " +
                         std::to_string(slot_of[r]) + ")");
        }
        if (!std::isfinite(get(out_p.data(), p.output, i))) {
          return failure("non-finite output at " + cell(r, j) + ": NaN-patterned padding leaked in");
        }
      } else {
        const unsigned char* bp0 = d.out_before.data() + i * osz;
        if (std::memcmp(pp, bp0, static_cast<std::size_t>(osz)) != 0) {
          return failure(std::string(valid ? "unselected row written" : "padding column written") + " at " +
                         cell(r, j) + ": " + hex_of(d.out_before.data(), p.output, i) + " -> " +
                         hex_of(out_p.data(), p.output, i));
        }
      }
      if (!valid &&
          std::memcmp(out_u.data() + i * osz, d.out_before.data() + i * osz, static_cast<std::size_t>(osz)) != 0) {
        return failure("unpacked path wrote padding column at " + cell(r, j));
      }
    }
    compared += selected;
  }
  res.rows_compared = compared;
  res.identity_comparisons = compared > 0 ? 1 : 0;
  return res;
}

/// Mutates a valid case into the named violation. Returns the buffers to hand to execute()
/// (pointing into `d` and `scratch`).
HostBuffers plant(const std::string& guard, CaseData& d, GuardedBuffer& out,
                  std::vector<GuardedBuffer>& scratch) {
  PackPlan& p = d.plan;
  HostBuffers b = buffers_for(d, out, false);
  const Index M = p.rows();
  if (guard == "plan-shape-requests") {
    p.requests = kMaxRequests + 1;
    p.commit_counts.assign(static_cast<std::size_t>(p.requests), 0);
  } else if (guard == "plan-shape-cap") {
    p.cap = kMaxCap + 1;
  } else if (guard == "unsupported-residual-type") {
    p.epilogue = reference::Epilogue::kResidual;
    p.residual_at = reference::ResidualAt::kOutput;
    p.output = DType::kBf16;
    p.residual_dtype = DType::kF32;
    scratch.push_back(make_matrix(M, p.residual_stride, p.n, DType::kF32, [] { return 0.5f; }));
    b.residual = scratch.back().data();
    b.residual_bytes = scratch.back().bytes();
  } else if (guard == "unsupported-folded-walk") {
    p.walk = *reference::parse_k_walk("seq");
    for (auto& g : p.segments) {
      if (g.format == WeightFormat::kAf4) g.af4.dequant = reference::Dequant::kFolded;
    }
  } else if (guard == "walk-split") {
    p.walk = *reference::parse_k_walk("split:" + std::to_string(p.k + 1));
  } else if (guard == "segment-gap") {
    p.segments.back().row_begin += 1;
  } else if (guard == "segment-overlap") {
    p.segments.back().row_begin -= 1;
  } else if (guard == "segment-total") {
    p.segments.back().row_end += 1;
  } else if (guard == "af4-group") {
    for (auto& g : p.segments) {
      if (g.format == WeightFormat::kAf4) g.af4.group_size = p.k / 2 + 1;
    }
  } else if (guard == "af4-codes-shape") {
    for (auto& g : p.segments) {
      if (g.format == WeightFormat::kAf4) g.codes_cols += 1;
    }
  } else if (guard == "af4-scales-shape") {
    for (auto& g : p.segments) {
      if (g.format == WeightFormat::kAf4) g.scales_cols -= 1;
    }
  } else if (guard == "stride-input") {
    p.in_stride = p.k - 1;
  } else if (guard == "stride-output") {
    p.out_stride = p.n - 1;
  } else if (guard == "stride-compact") {
    p.compact_out_stride = p.n - 1;
  } else if (guard == "too-few-slots") {
    p.commit_counts[0] = static_cast<std::int32_t>(p.slots + 1);
  } else if (guard == "row-out-of-range") {
    p.selector[0] = static_cast<std::int32_t>(M);
  } else if (guard == "row-negative") {
    p.selector[0] = -2;
  } else if (guard == "duplicate-row") {
    p.selector[1] = p.selector[0];
  } else if (guard == "cap-exceeded") {
    p.selector[static_cast<std::size_t>(p.commit_counts[0])] = p.commit_counts[0];
    p.commit_counts[0] += 1;
  } else if (guard == "commit-mismatch") {
    p.commit_counts[0] -= 1;
  } else if (guard == "not-prefix") {
    p.selector[0] = p.commit_counts[0];  // request 0's row just past its prefix
  } else if (guard == "extent-x") {
    // One element short of what the last row's valid columns need (the trailing padding of
    // the allocation is not part of the geometry's extent).
    b.x_bytes = extent_bytes(M, p.in_stride, p.k, p.x_dtype) - static_cast<std::size_t>(dtype_size(p.x_dtype));
  } else if (guard == "extent-scratch") {
    b.compact_out_bytes -= 4;
  } else if (guard == "misaligned") {
    scratch.push_back(make_matrix(M, p.in_stride, p.k, p.x_dtype, [] { return 1.0f; }, 4));
    b.x = scratch.back().data();
  } else if (guard == "output-aliases-input") {
    b.out = const_cast<void*>(b.x);
    b.out_bytes = std::min(b.out_bytes, b.x_bytes);
  } else if (guard == "partial-overlap") {
    // The residual starts 16 bytes into the output buffer (still aligned, still long enough
    // thanks to the padding columns): neither disjoint nor exactly in place.
    p.epilogue = reference::Epilogue::kResidual;
    p.residual_dtype = p.output;
    b.residual = out.data() + 16;
    b.residual_bytes = out.bytes() - 16;
  } else if (guard == "scratch-overlap") {
    b.compact_out = reinterpret_cast<float*>(out.data());
  }
  return b;
}

CaseResult run_guard(const SweepCase& c, const ExecuteFn& helper) {
  CaseResult res;
  auto built = build(c);
  if (!built.ok()) {
    res.pass = false;
    res.failure = "base case does not build: " + built.status().to_string();
    return res;
  }
  CaseData& d = **built;
  ErrorCode want = ErrorCode::kOk;
  for (const auto& [name, code] : guard_names()) {
    if (name == c.guard) want = code;
  }
  GuardedBuffer out = d.out_before;
  std::vector<GuardedBuffer> scratch;
  scratch.reserve(4);
  const HostBuffers b = plant(c.guard, d, out, scratch);
  // Snapshot every byte (canaries included) of every buffer the call could reach.
  const std::vector<const GuardedBuffer*> reach = {&d.x, &d.residual, &d.bias, &d.compact_in,
                                                   &d.compact_out, &out};
  std::vector<std::vector<unsigned char>> before;
  for (const GuardedBuffer* g : reach) before.push_back(g->raw());
  for (const GuardedBuffer& g : scratch) before.push_back(g.raw());

  auto outcome = helper(d.plan, *d.kernel, b);
  if (want == ErrorCode::kGuardUnsupported) {
    res.guard = ErrorCode::kGuardUnsupported;
    if (!outcome.ok() || *outcome != PathTaken::kUnpacked) {
      res.pass = false;
      res.failure = "unsupported plan did not fall back to the unpacked path: " +
                    (outcome.ok() ? std::string("ran packed") : outcome.status().to_string());
      return res;
    }
    res.fell_back = true;
    // The fallback must equal a direct unpacked run.
    GuardedBuffer again = d.out_before;
    HostBuffers b2 = b;
    b2.out = again.data();
    if (b.residual == out.data()) b2.residual = again.data();
    run_unpacked(d.plan, *d.kernel, b2);
    if (!same_payload(again, out)) {
      res.pass = false;
      res.failure = "fallback output differs from a direct unpacked run";
    }
    return res;
  }
  if (outcome.ok()) {
    res.pass = false;
    res.failure = "violation \"" + c.guard + "\" was not refused (expected " +
                  std::string(error_name(want)) + ")";
    return res;
  }
  res.guard = outcome.status().code();
  if (res.guard != want) {
    res.pass = false;
    res.failure = "violation \"" + c.guard + "\" refused with " + outcome.status().to_string() +
                  ", expected " + std::string(error_name(want));
    return res;
  }
  std::size_t i = 0;
  for (const GuardedBuffer* g : reach) {
    if (g->raw() != before[i++]) {
      res.pass = false;
      res.failure = "a refused call touched a buffer (" + c.guard + ")";
      return res;
    }
  }
  for (const GuardedBuffer& g : scratch) {
    if (g.raw() != before[i++]) {
      res.pass = false;
      res.failure = "a refused call touched a buffer (" + c.guard + ")";
      return res;
    }
  }
  return res;
}

CaseResult run_width(const SweepCase& c) {
  CaseResult res;
  WeightStore store = make_weights(c.formats, c.n, c.k, c.seed);
  reference::KWalk walk;
  if (!c.walk.empty()) walk = *reference::parse_k_walk(c.walk);
  auto kernel = LinearKernel::create(store.weights, c.x, walk);
  if (!kernel.ok()) {
    res.pass = false;
    res.failure = kernel.status().to_string();
    return res;
  }
  const std::shared_ptr<const LinearKernel> shared = std::move(kernel).value();
  auto buckets = WidthBuckets::create({8192, 512}, shared, c.x);
  if (!buckets.ok()) {
    res.pass = false;
    res.failure = buckets.status().to_string();
    return res;
  }
  auto fail = [&](std::string msg) {
    res.pass = false;
    res.failure = std::move(msg);
    return res;
  };
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Index longest = 8192 + 1;
  std::vector<unsigned char> x(static_cast<std::size_t>(longest * c.k * dtype_size(c.x)));
  for (Index i = 0; i < longest * c.k; ++i) put(x.data(), c.x, i, nd(rng));
  if (c.guard == "capacity") {
    auto r = buckets->run(x.data(), longest);
    res.guard = r.ok() ? ErrorCode::kOk : r.status().code();
    if (res.guard != ErrorCode::kGuardCapacity) return fail("a prompt of 8193 rows was not refused for capacity");
    return res;
  }
  // One copy of the weights, owned by the kernel; the instances hold activations only.
  if (buckets->kernel_owners() != 2) {  // `shared` here and the buckets
    return fail("width instances copied the kernel: " + std::to_string(buckets->kernel_owners()) + " owners");
  }
  const std::size_t per_row = static_cast<std::size_t>(c.k * dtype_size(c.x) + c.n * 4);
  if (buckets->instance_bytes() != (512 + 8192) * per_row) {
    return fail("width instances hold more than their activations and accumulators");
  }
  // Alternate requests between widths; every valid row must be identical at both widths.
  for (Index rows : {Index{1}, Index{37}, Index{512}, Index{513}, Index{3000}}) {
    auto picked = buckets->pick(rows);
    if (!picked.ok() || *picked != (rows <= 512 ? 512 : 8192)) return fail("wrong bucket for " + std::to_string(rows) + " rows");
    auto a = buckets->run(x.data(), rows);
    auto wide = buckets->run(x.data(), rows, 8192);
    if (!a.ok() || !wide.ok()) return fail("width run failed");
    if (std::memcmp(a->data(), wide->data(), a->size() * sizeof(float)) != 0) {
      return fail("rows computed at width " + std::to_string(*picked) + " differ from width 8192 (" +
                  std::to_string(rows) + " rows)");
    }
    // And each row equals the kernel run on that row alone.
    std::vector<float> one(static_cast<std::size_t>(c.n));
    const Index r = rows - 1;
    shared->run(x.data() + r * c.k * dtype_size(c.x), c.x, c.k, 1, one.data(), c.n);
    if (std::memcmp(one.data(), a->data() + r * c.n, one.size() * sizeof(float)) != 0) {
      return fail("row " + std::to_string(r) + " differs from a single-row run");
    }
    res.rows_compared += rows;
  }
  return res;
}

}  // namespace

CaseResult run_case(const SweepCase& c, const ExecuteFn& helper) {
  switch (c.kind) {
    case CaseKind::kIdentity: return run_identity(c, helper);
    case CaseKind::kGuard: return run_guard(c, helper);
    case CaseKind::kWidth: return run_width(c);
  }
  return {};
}

// ---- the table ------------------------------------------------------------------------------

std::vector<SweepCase> default_cases() {
  std::vector<SweepCase> cases;
  cases.reserve(16500);
  const std::vector<std::string> commits = {"full", "one", "ragged", "single", "alternate", "decreasing"};
  const std::pair<Index, Index> cap_b[] = {{1, 2}, {2, 4}, {4, 4}};
  const std::vector<std::string> formats = {"bf16", "f32", "af4a", "af4c", "mix"};
  const Index ks[] = {32, 64, 96, 160};
  const Index ns[] = {8, 24, 40, 72};
  const Index in_pads[] = {0, 8, 24};
  const Index out_pads[] = {0, 8};
  const std::vector<std::string> walks = {"", "seq", "seq-fma", "split:2", "split:4:fma", "split:8",
                                          "split:16:fma"};
  // The 11 epilogue variants: none; bias (f32, bf16); residual and bias+residual at f32 and at
  // output, each separate and in place.
  struct Epi {
    Epilogue e;
    ResidualAt at;
    bool inplace;
    bool bf16_bias;
  };
  const Epi epis[] = {{Epilogue::kNone, ResidualAt::kF32, false, false},
                      {Epilogue::kBias, ResidualAt::kF32, false, false},
                      {Epilogue::kBias, ResidualAt::kF32, false, true},
                      {Epilogue::kResidual, ResidualAt::kF32, false, false},
                      {Epilogue::kResidual, ResidualAt::kOutput, false, false},
                      {Epilogue::kBiasResidual, ResidualAt::kF32, false, false},
                      {Epilogue::kBiasResidual, ResidualAt::kOutput, false, true},
                      {Epilogue::kResidual, ResidualAt::kF32, true, false},
                      {Epilogue::kResidual, ResidualAt::kOutput, true, false},
                      {Epilogue::kBiasResidual, ResidualAt::kF32, true, false},
                      {Epilogue::kBiasResidual, ResidualAt::kOutput, true, true}};
  std::uint64_t idx = 0;
  for (Index r = 1; r <= kMaxRequests; ++r) {
    for (const std::string& commit : commits) {
      for (const auto& [cap, b] : cap_b) {
        for (const std::string& fmt : formats) {
          for (DType out : {DType::kF32, DType::kBf16}) {
            for (const Epi& e : epis) {
              SweepCase c;
              c.kind = CaseKind::kIdentity;
              c.requests = r;
              c.block_rows = b;
              c.cap = cap;
              c.slots = r * cap + (idx % 3 == 0 ? 3 : 0);
              c.commit = commit;
              c.formats = fmt;
              c.k = ks[idx % 4];
              c.n = ns[(idx / 4) % 4];
              c.in_pad = in_pads[idx % 3];
              c.out_pad = out_pads[(idx / 3) % 2];
              c.compact_pad = (idx / 5) % 2 ? 4 : 0;
              c.x = (idx / 7) % 2 ? DType::kF32 : DType::kBf16;
              c.output = out;
              c.bias = e.bf16_bias ? DType::kBf16 : DType::kF32;
              c.epilogue = e.e;
              c.at = e.at;
              c.inplace = e.inplace;
              // A separate residual may be f32 under a bf16 output when added at f32.
              c.residual = (e.at == ResidualAt::kF32 && !e.inplace && idx % 2) ? DType::kF32 : out;
              c.walk = walks[idx % walks.size()];
              c.permute = (idx / 11) % 2 == 1;
              c.seed = 1000 + idx;
              cases.push_back(c);
              ++idx;
            }
          }
        }
      }
    }
  }
  // Empty commits: nothing gathered, nothing written.
  for (Index r = 1; r <= kMaxRequests; ++r) {
    for (DType out : {DType::kF32, DType::kBf16}) {
      SweepCase c;
      c.requests = r;
      c.commit = "empty";
      c.output = out;
      c.formats = r % 2 ? "mix" : "af4a";
      c.epilogue = Epilogue::kBiasResidual;
      c.inplace = true;
      c.residual = out;
      c.slots = r * c.cap;
      c.seed = 50000 + static_cast<std::uint64_t>(r) * 2 + (out == DType::kBf16);
      cases.push_back(c);
    }
  }
  // Realistic padded strides: the in-projection output (16480 valid of 16640) and an input
  // with the same padding (K = 16480 = 515 AF4 groups of 32).
  for (DType out : {DType::kF32, DType::kBf16}) {
    for (const std::string fmt : {"bf16", "mix"}) {
      for (bool inplace : {false, true}) {
        SweepCase c;
        c.requests = 2;
        c.block_rows = 2;
        c.cap = 1;
        c.slots = 3;
        c.k = 16;
        c.n = 16480;
        c.out_pad = 160;
        c.formats = fmt;
        c.output = out;
        c.residual = out;
        c.epilogue = Epilogue::kBiasResidual;
        c.inplace = inplace;
        c.walk = "seq-fma";
        c.seed = 60000 + cases.size();
        cases.push_back(c);
      }
    }
    for (const std::string fmt : {"bf16", "af4a"}) {
      SweepCase c;
      c.requests = 1;
      c.block_rows = 2;
      c.cap = 2;
      c.slots = 2;
      c.k = 16480;
      c.in_pad = 160;
      c.n = 8;
      c.formats = fmt;
      c.output = out;
      c.walk = "split:4:fma";
      c.seed = 61000 + cases.size();
      cases.push_back(c);
    }
  }
  // Width buckets: shared weights, identical rows at 512 and 8192.
  for (DType x : {DType::kBf16, DType::kF32}) {
    for (const std::string walk : {"", "split:2:fma"}) {
      SweepCase c;
      c.kind = CaseKind::kWidth;
      c.k = 16;
      c.n = 8;
      c.x = x;
      c.formats = x == DType::kBf16 ? "mix" : "af4c";
      c.walk = walk;
      c.seed = 62000 + cases.size();
      cases.push_back(c);
    }
  }
  // Guard cases: every violation on a valid base (R = 3, B = 4, cap = 2, mixed formats).
  for (const auto& [name, code] : guard_names()) {
    for (int variant = 0; variant < 2; ++variant) {
      SweepCase c;
      c.kind = name == "capacity" ? CaseKind::kWidth : CaseKind::kGuard;
      c.guard = name;
      c.requests = 3;
      c.block_rows = 4;
      c.cap = 2;
      c.slots = 8;
      c.commit = "full";
      c.formats = variant == 0 ? "mix" : "af4a";
      c.k = 64;
      c.n = 24;
      c.in_pad = 8;
      c.out_pad = 8;
      c.x = variant == 0 ? DType::kBf16 : DType::kF32;
      c.output = variant == 0 ? DType::kF32 : DType::kBf16;
      c.residual = c.output;
      c.epilogue = variant == 0 ? Epilogue::kBiasResidual : Epilogue::kBias;
      c.walk = variant == 0 ? "split:4:fma" : "";
      c.seed = 63000 + cases.size();
      if (c.kind == CaseKind::kWidth) {
        c.k = 16;
        c.n = 8;
      }
      cases.push_back(c);
    }
  }
  return cases;
}

// ---- the runner -------------------------------------------------------------------------------

SweepSummary sweep_cases(const std::vector<SweepCase>& cases, const ExecuteFn& helper) {
  std::vector<CaseResult> results(cases.size());
  const Index n = static_cast<Index>(cases.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (Index i = 0; i < n; ++i) results[static_cast<std::size_t>(i)] = run_case(cases[static_cast<std::size_t>(i)], helper);
  SweepSummary s;
  for (Index i = 0; i < n; ++i) {
    const SweepCase& c = cases[static_cast<std::size_t>(i)];
    const CaseResult& r = results[static_cast<std::size_t>(i)];
    ++s.cases;
    s.identity_comparisons += r.identity_comparisons;
    s.rows_compared += r.rows_compared;
    s.alias_cases += r.alias ? 1 : 0;
    s.fallbacks += r.fell_back ? 1 : 0;
    if (c.kind == CaseKind::kGuard || !c.guard.empty()) {
      ++s.guard_cases;
      if (r.pass && r.guard != ErrorCode::kOk) s.guards_covered.insert(r.guard);
    } else if (c.kind == CaseKind::kWidth) {
      ++s.width_cases;
    }
    if (r.pass) {
      ++s.passed;
      continue;
    }
    ++s.failed;
    if (!c.guard.empty()) ++s.failed_guard;
    else if (c.kind == CaseKind::kWidth) ++s.failed_width;
    else if (c.inplace) ++s.failed_alias;
    else ++s.failed_identity;
    if (s.first_failure < 0) {
      s.first_failure = i;
      s.first_failure_key = c.key();
      s.first_failure_reason = r.failure;
    }
  }
  return s;
}

}  // namespace ncert::packing
