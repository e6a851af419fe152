#include "packing/helper.h"

#include <algorithm>
#include <cstring>

#include "packing/guards.h"
#include "reference/k_walk.h"

namespace ncert::packing {

namespace {

// Columns per weight block: 64 f32 lanes keep one row's accumulators in registers/L1 while
// the transposed K x 64 block streams from L2.
constexpr Index kBlock = 64;

float load(const void* base, DType t, Index i) {
  if (t == DType::kF32) return static_cast<const float*>(base)[i];
  return reference::value_of_bits(static_cast<const std::uint16_t*>(base)[i], t);
}

void store(void* base, DType t, Index i, float v) {
  if (t == DType::kF32) {
    static_cast<float*>(base)[i] = v;
  } else {
    // v is already bf16- or f16-valued (round_to_output), so this conversion is exact.
    static_cast<std::uint16_t*>(base)[i] = static_cast<std::uint16_t>(reference::bits_of_value(v, t));
  }
}

}  // namespace

Result<std::shared_ptr<const LinearKernel>> LinearKernel::create(const reference::Weights& w, DType activation,
                                                                 const reference::KWalk& walk) {
  auto kernel = std::make_shared<LinearKernel>();
  kernel->k_ = w.k;
  kernel->n_ = w.n;
  kernel->walk_ = walk;
  if (!walk.declared) {
    kernel->walk_.declared = true;
    kernel->walk_.fma = true;
    kernel->walk_.parts = 1;
    kernel->walk_.name = "seq-fma";
  }
  if (walk.codes()) {
    return Status(ErrorCode::kGuardUnsupported,
                  "k_walk " + walk.name + ": the helper's kernel sums f32 products of x, not integer code sums");
  }
  if (!kernel->walk_.divides(w.k)) return Status(ErrorCode::kGuardWalkSplit, reference::walk_split_message(walk, w.k));
  kernel->wt_.resize(static_cast<std::size_t>(w.n * w.k));
  std::vector<float> row(static_cast<std::size_t>(w.k));
  for (Index j0 = 0; j0 < w.n; j0 += kBlock) {
    const Index width = std::min(kBlock, w.n - j0);
    float* block = kernel->wt_.data() + j0 * w.k;
    for (Index jj = 0; jj < width; ++jj) {
      reference::decode_weight_row(w, j0 + jj, activation, nullptr, nullptr, row.data());
      for (Index c = 0; c < w.k; ++c) block[c * width + jj] = row[c];
    }
  }
  return std::shared_ptr<const LinearKernel>(std::move(kernel));
}

void LinearKernel::run(const void* x, DType x_dtype, Index x_stride, Index rows, float* acc, Index acc_stride,
                       const float* start) const {
  std::vector<float> xr(static_cast<std::size_t>(k_));
  std::vector<float> scratch(static_cast<std::size_t>(kBlock));
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < k_; ++c) xr[c] = load(x, x_dtype, r * x_stride + c);
    for (Index j0 = 0; j0 < n_; j0 += kBlock) {
      const Index width = std::min(kBlock, n_ - j0);
      reference::walk_row_block(walk_, xr.data(), wt_.data() + j0 * k_, k_, width, acc + r * acc_stride + j0,
                                scratch.data(), start != nullptr ? start + j0 : nullptr);
    }
  }
}

void gather(const PackPlan& p, const void* x, void* compact_in) {
  const int size = dtype_size(p.x_dtype);
  const auto* src = static_cast<const unsigned char*>(x);
  auto* dst = static_cast<unsigned char*>(compact_in);
  for (Index s = 0; s < p.slots; ++s) {
    const Index r = p.selector[static_cast<std::size_t>(s)];
    if (r < 0) continue;
    std::memcpy(dst + s * p.compact_in_stride * size, src + r * p.in_stride * size,
                static_cast<std::size_t>(p.k * size));
  }
}

namespace {
/// The plan's biases as f32 where the kernel starts from them (bias_at = start), else empty.
std::vector<float> start_biases(const PackPlan& p, const void* bias) {
  std::vector<float> out;
  if (!reference::bias_in_sum(p)) return out;
  out.resize(static_cast<std::size_t>(p.n));
  for (Index j = 0; j < p.n; ++j) out[static_cast<std::size_t>(j)] = load(bias, p.bias_dtype, j);
  return out;
}

void epilogue_row(const PackPlan& p, const float* acc, const void* bias, const void* residual, Index row, void* out) {
  const bool has_b = reference::has_bias(p.epilogue);
  const bool has_r = reference::has_residual(p.epilogue);
  for (Index j = 0; j < p.n; ++j) {
    const float b = has_b ? load(bias, p.bias_dtype, j) : 0.0f;
    // In place (out == residual) this reads the element before the store below overwrites it.
    const float r = has_r ? load(residual, p.residual_dtype, row * p.residual_stride + j) : 0.0f;
    const float v = reference::epilogue_value(acc[j], b, r, p);
    store(out, p.output, row * p.out_stride + j, v);
  }
}
}  // namespace

void scatter(const PackPlan& p, const float* compact_out, const void* bias, const void* residual, void* out) {
  for (Index s = 0; s < p.slots; ++s) {
    const Index r = p.selector[static_cast<std::size_t>(s)];
    if (r < 0) continue;
    epilogue_row(p, compact_out + s * p.compact_out_stride, bias, residual, r, out);
  }
}

void run_unpacked(const PackPlan& p, const LinearKernel& kernel, const HostBuffers& b) {
  std::vector<float> acc(static_cast<std::size_t>(p.n));
  const std::vector<float> start = start_biases(p, b.bias);
  for (Index r = 0; r < p.rows(); ++r) {
    kernel.run(static_cast<const unsigned char*>(b.x) + r * p.in_stride * dtype_size(p.x_dtype), p.x_dtype, p.in_stride,
               1, acc.data(), p.n, start.empty() ? nullptr : start.data());
    epilogue_row(p, acc.data(), b.bias, b.residual, r, b.out);
  }
}

void run_packed(const PackPlan& p, const LinearKernel& kernel, const HostBuffers& b) {
  gather(p, b.x, b.compact_in);
  const int size = dtype_size(p.x_dtype);
  const std::vector<float> start = start_biases(p, b.bias);
  for (Index s = 0; s < p.slots; ++s) {
    if (p.selector[static_cast<std::size_t>(s)] < 0) continue;
    kernel.run(static_cast<const unsigned char*>(b.compact_in) + s * p.compact_in_stride * size, p.x_dtype,
               p.compact_in_stride, 1, b.compact_out + s * p.compact_out_stride, p.compact_out_stride,
               start.empty() ? nullptr : start.data());
  }
  scatter(p, b.compact_out, b.bias, b.residual, b.out);
}

Result<PathTaken> execute(const PackPlan& p, const LinearKernel& kernel, const HostBuffers& b) {
  if (kernel.k() != p.k || kernel.n() != p.n) {
    return Status(ErrorCode::kGuardPlanShape, "kernel is K x N = " + std::to_string(kernel.k()) + " x " +
                                                  std::to_string(kernel.n()) + ", plan " + std::to_string(p.k) + " x " +
                                                  std::to_string(p.n));
  }
  const Status s = validate(p, b);
  if (s.ok()) {
    run_packed(p, kernel, b);
    return PathTaken::kPacked;
  }
  if (s.code() != ErrorCode::kGuardUnsupported) return s;
  NCERT_RETURN_IF_ERROR(validate_unpacked(p, b));
  run_unpacked(p, kernel, b);
  return PathTaken::kUnpacked;
}

}  // namespace ncert::packing
