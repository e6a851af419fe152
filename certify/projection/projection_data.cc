#include "certify/projection/projection_data.h"

#include <chrono>
#include <cstring>

#include "reference/float_bits.h"

namespace ncert::certify {

std::string_view engine_output_name(EngineOutputId o) {
  switch (o) {
    case EngineOutputId::kUnpacked:
      return "y_unpacked";
    case EngineOutputId::kPacked:
      return "y_packed";
    case EngineOutputId::kCompact:
      return "y_compact";
  }
  return "?";
}

namespace {

Status read_output(const DumpReader& r, const std::string& path, bool present, EngineOutput* out) {
  if (!present) return Status();
  NCERT_ASSIGN_OR_RETURN(out->bytes, r.read_bytes(path));
  out->present = true;
  const DatasetInfo* d = r.model().dataset(path);
  out->rows = d ? d->shape[0] : 0;
  return Status();
}

}  // namespace

Result<LoadedProjection> load_projection(const DumpReader& reader, const ProjectionInfo& info,
                                         const WeightsSource* weights, WeightsCache* cache) {
  const auto t0 = std::chrono::steady_clock::now();
  LoadedProjection L;
  L.info = &info;
  const std::string& p = info.path;
  NCERT_ASSIGN_OR_RETURN(L.x, reader.read_bytes(p + "/x"));
  if (info.x_quant.type != reference::XQuantType::kNone) {
    NCERT_ASSIGN_OR_RETURN(L.x_quantized, reader.read_bytes(p + "/x_quantized"));
    NCERT_ASSIGN_OR_RETURN(L.x_scales, reader.read_bytes(p + "/x_scales"));
    if (info.has_x_zero_points) {
      NCERT_ASSIGN_OR_RETURN(L.x_zero_points, reader.read_bytes(p + "/x_zero_points"));
    }
  }
  NCERT_ASSIGN_OR_RETURN(L.selector, reader.read_i32(p + "/selector"));
  if (info.has_commit_counts) {
    NCERT_ASSIGN_OR_RETURN(L.commit_counts, reader.read_i32(p + "/commit_counts"));
  }
  if (info.bias_dtype) {
    NCERT_ASSIGN_OR_RETURN(L.bias, reader.read_bytes(p + "/bias"));
  }
  if (info.residual_dtype) {
    NCERT_ASSIGN_OR_RETURN(L.residual, reader.read_bytes(p + "/residual"));
  }
  NCERT_RETURN_IF_ERROR(read_output(reader, p + "/y_unpacked", info.has_y_unpacked, &L.y_unpacked));
  NCERT_RETURN_IF_ERROR(read_output(reader, p + "/y_packed", info.has_y_packed, &L.y_packed));
  NCERT_RETURN_IF_ERROR(read_output(reader, p + "/y_compact", info.has_y_compact, &L.y_compact));
  NCERT_RETURN_IF_ERROR(read_output(reader, p + "/y_before", info.has_y_before, &L.y_before));

  // Weights. A dump that carries them is always read and its declared hash verified; weights
  // taken from a weights dump by hash are read (and verified) once per process with a cache.
  packing::PackPlan& plan = L.plan;
  const DumpReader& source = weights ? *weights->reader : reader;
  const ProjectionInfo& source_info = weights ? *weights->projection : info;
  const bool shareable = cache && info.weights_omitted;
  // Keyed by what is read (which file, which projection), not by the declared hash alone: two
  // projections of a weights dump may declare one hash and carry different weights, and a unit
  // must get exactly what it would read alone (the cache may not change a verdict).
  const std::string key = source.model().file + "\n" + source_info.path + "\n" + info.weights_xxh3;
  std::shared_ptr<const LoadedWeights> W = shareable ? cache->find(key) : nullptr;
  if (W) {
    ++cache->hits;
  } else {
    NCERT_ASSIGN_OR_RETURN(W, load_weights(source, source_info));
    NCERT_RETURN_IF_ERROR(verify_weights_hash(reader.model().file, info, *W, source.model().file, source_info.path));
    if (shareable) cache->add(key, W);
  }
  L.weights.k = info.k;
  L.weights.n = info.n;
  L.weights.segments = W->segments;
  plan.segments = W->geometry;
  L.loaded_weights = std::move(W);

  // The packing plan the dump describes.
  const Index M = info.m;
  plan.request_rules = info.requests.has_value() && info.block_rows.has_value() && info.cap.has_value();
  plan.helper_limits = false;  // the engine's plan: R bounded by the format's shape limit alone
  plan.requests = plan.request_rules ? *info.requests : 1;
  plan.block_rows = plan.request_rules ? *info.block_rows : M;
  plan.slots = info.p;
  plan.selector = L.selector;
  if (!L.commit_counts.empty() && plan.request_rules) {
    plan.commit_counts = L.commit_counts;
  } else {
    // Without commit_counts (or without the request geometry they count against) the selector
    // is the only statement: count it per request so the commit rule holds by construction and
    // the cap and prefix rules still apply; the request-guards skip says what did not run.
    plan.commit_counts.assign(static_cast<std::size_t>(plan.requests), 0);
    for (std::int32_t r : L.selector) {
      if (r >= 0 && r < M && plan.block_rows > 0) ++plan.commit_counts[static_cast<std::size_t>(r / plan.block_rows)];
    }
  }
  if (plan.request_rules) {
    plan.cap = *info.cap;
  } else {
    Index selected = 0;
    for (std::int32_t r : L.selector) selected += r >= 0;
    plan.cap = selected;
  }
  plan.arithmetic() = info.arithmetic();
  plan.layout() = info.layout();
  plan.residual_stride = info.out_stride;
  // The compact buffers of the dump: y_compact has the output stride; the compact input is
  // never dumped, so its stride is the valid width.
  plan.compact_in_stride = info.k;
  plan.compact_out_stride = info.out_stride;
  plan.bias_dtype = info.bias_dtype.value_or(DType::kF32);
  plan.residual_dtype = info.residual_dtype.value_or(info.output);
  L.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return L;
}

reference::LinearProblem LoadedProjection::problem(double lambda) const {
  reference::LinearProblem p;
  p.x = {info->x_dtype, x.data(), info->m, info->k, info->in_stride};
  p.weights = &weights;
  if (info->bias_dtype) p.bias = {*info->bias_dtype, bias.data(), info->n};
  if (info->residual_dtype) {
    p.residual = {*info->residual_dtype, residual.data(), info->m, info->n, info->out_stride};
  }
  p.arithmetic() = info->arithmetic();
  if (info->x_quant.type != reference::XQuantType::kNone) {
    reference::XQuantizedView& q = p.x_quantized;
    q.type = info->x_quant.type;
    q.k = info->k;
    q.group = info->x_quant.group;
    q.values = x_quantized.data();
    q.scale_dtype = info->x_scales_dtype;
    q.scales = x_scales.data();
    q.zero_points = x_zero_points.empty() ? nullptr : x_zero_points.data();
  }
  p.lambda = lambda;
  return p;
}

}  // namespace ncert::certify
