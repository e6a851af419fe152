#include "packing/width_buckets.h"

#include <algorithm>
#include <cstring>

namespace ncert::packing {

Result<WidthBuckets> WidthBuckets::create(std::vector<Index> widths, std::shared_ptr<const LinearKernel> kernel,
                                          DType x_dtype) {
  if (!kernel) return Status(ErrorCode::kInvalidArgument, "no kernel");
  std::sort(widths.begin(), widths.end());
  if (widths.empty() || widths.front() < 1 || std::adjacent_find(widths.begin(), widths.end()) != widths.end()) {
    return Status(ErrorCode::kInvalidArgument, "widths must be distinct positive row counts");
  }
  WidthBuckets b;
  b.widths_ = widths;
  b.kernel_ = std::move(kernel);
  b.x_dtype_ = x_dtype;
  for (Index w : widths) {
    Instance inst;
    inst.width = w;
    inst.x.assign(static_cast<std::size_t>(w * b.kernel_->k() * dtype_size(x_dtype)), 0);
    inst.acc.assign(static_cast<std::size_t>(w * b.kernel_->n()), 0.0f);
    b.instances_.push_back(std::move(inst));
  }
  return b;
}

Result<Index> WidthBuckets::pick(Index rows) const {
  for (Index w : widths_) {
    if (w >= rows) return w;
  }
  return Status(ErrorCode::kGuardCapacity, "a prompt of " + std::to_string(rows) +
                                               " rows exceeds the largest compiled width " +
                                               std::to_string(widths_.back()));
}

Result<std::vector<float>> WidthBuckets::run(const void* x, Index rows, Index width) {
  if (rows < 0) return Status(ErrorCode::kInvalidArgument, "negative row count");
  Index w = width;
  if (w == 0) {
    NCERT_ASSIGN_OR_RETURN(w, pick(rows));
  }
  auto it = std::find_if(instances_.begin(), instances_.end(), [&](const Instance& i) { return i.width == w; });
  if (it == instances_.end()) {
    return Status(ErrorCode::kInvalidArgument, "width " + std::to_string(w) + " is not compiled");
  }
  if (rows > w) {
    return Status(ErrorCode::kGuardCapacity, std::to_string(rows) + " rows exceed width " + std::to_string(w));
  }
  const Index K = kernel_->k(), N = kernel_->n();
  const std::size_t row_bytes = static_cast<std::size_t>(K * dtype_size(x_dtype_));
  // Valid rows in, the rest of the instance zeroed: a previous request's rows never leak.
  std::memcpy(it->x.data(), x, static_cast<std::size_t>(rows) * row_bytes);
  std::fill(it->x.begin() + static_cast<std::ptrdiff_t>(rows * row_bytes), it->x.end(), 0);
  kernel_->run(it->x.data(), x_dtype_, K, w, it->acc.data(), N);
  return std::vector<float>(it->acc.begin(), it->acc.begin() + rows * N);
}

std::size_t WidthBuckets::instance_bytes() const {
  std::size_t b = 0;
  for (const Instance& i : instances_) b += i.x.size() + i.acc.size() * sizeof(float);
  return b;
}

}  // namespace ncert::packing
