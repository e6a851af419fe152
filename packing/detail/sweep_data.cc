#include "packing/detail/sweep_data.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "reference/float_bits.h"

namespace ncert::packing::detail {

using reference::WeightFormat;

GuardedBuffer make_matrix(Index rows, Index stride, Index width, DType t, const std::function<float()>& gen,
                          std::size_t misalign) {
  GuardedBuffer b(static_cast<std::size_t>(rows * stride * dtype_size(t)), misalign);
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < stride; ++c) {
      if (c < width)
        reference::encode_element(b.data(), t, r * stride + c, gen());
      else
        reference::encode_marker_nan(b.data(), t, r * stride + c);
    }
  }
  return b;
}

namespace {

// ---- weights ----------------------------------------------------------------------------------

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
    for (Index i = 0; i < rows * k; ++i) reference::encode_element(v.data(), t, i, 0.05f * nd(rng));
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
      reference::encode_element(scales.data(), layout.scale_dtype, i, sc);
      reference::encode_element(biases.data(), layout.scale_dtype, i, bi);
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

reference::Af4Layout af4_layout(reference::Af4Variant v, reference::Af4Packing p, Index group, DType scale,
                                reference::Dequant d, reference::Af4Codebook cb = reference::Af4Codebook::kNone) {
  reference::Af4Layout L;
  L.variant = v;
  L.packing = p;
  L.group_size = group;
  L.scale_dtype = scale;
  L.dequant = d;
  L.codebook = cb;
  return L;
}

}  // namespace

WeightStore make_weights(const std::string& fmt, Index n, Index k, std::uint64_t seed) {
  // blobs must not reallocate after pointers are taken: reserve generously first.
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
                af4_layout(Af4Variant::kAffine, Af4Packing::kU32Lsb, 32, DType::kBf16, Dequant::kExact), "af4-affine");
  } else if (fmt == "af4c") {
    add_segment(s, rng, WeightFormat::kAf4, n, k,
                af4_layout(Af4Variant::kCodebook, Af4Packing::kU8Msb, 16, DType::kF16, Dequant::kF32,
                           reference::Af4Codebook::kNf4),
                "af4-nf4");
  } else {  // mix: AF4 (output dequant) + bf16 + f32
    const Index a = std::max<Index>(1, n / 3), b = std::max<Index>(1, n / 3);
    add_segment(s, rng, WeightFormat::kAf4, a, k,
                af4_layout(Af4Variant::kAffine, Af4Packing::kU8Lsb, 16, DType::kF32, Dequant::kOutput), "mix-af4");
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
    if (c.commit == "full")
      x = c.cap;
    else if (c.commit == "one")
      x = std::min<Index>(1, c.cap);
    else if (c.commit == "ragged")
      x = c.cap > 0 ? r % c.cap + 1 : 0;
    else if (c.commit == "single")
      x = r == 0 ? c.cap : 0;
    else if (c.commit == "alternate")
      x = r % 2 == 0 ? c.cap : 0;
    else if (c.commit == "decreasing")
      x = std::max<Index>(0, c.cap - r);
    v[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(x);
  }
  return v;
}

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

}  // namespace ncert::packing::detail
