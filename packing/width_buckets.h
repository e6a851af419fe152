// This header defines WidthBuckets: an engine compiles the linear kernel for a few input
// widths (e.g. 512 and 8192 rows) and runs each prompt on the smallest width that holds it.
// The weights are decoded once into one LinearKernel shared by every width instance (each
// instance owns only its activation and accumulator buffers), requests may alternate between
// widths, and the valid rows computed at any width are bit-identical.
#pragma once

#include <memory>
#include <vector>

#include "packing/helper.h"

namespace ncert::packing {

class WidthBuckets {
 public:
  /// widths: distinct positive row counts (any order). kInvalidArgument otherwise.
  static Result<WidthBuckets> create(std::vector<Index> widths, std::shared_ptr<const LinearKernel> kernel,
                                     DType x_dtype);

  /// The smallest width >= rows; kGuardCapacity when rows exceeds the largest width.
  Result<Index> pick(Index rows) const;

  /// Runs `rows` valid rows of x (row stride = K) on the picked width, or on `width` when it is
  /// nonzero (it must be a compiled width that holds the rows). Rows beyond `rows` in the
  /// instance are padding (zeros) and never reach the result. Returns rows x N accumulators.
  Result<std::vector<float>> run(const void* x, Index rows, Index width = 0);

  const std::vector<Index>& widths() const { return widths_; }
  const LinearKernel& kernel() const { return *kernel_; }
  /// Bytes owned by the instances themselves (activations + accumulators; no weights).
  std::size_t instance_bytes() const;
  /// How many owners the shared kernel has (this object plus outside holders).
  long kernel_owners() const { return kernel_.use_count(); }

 private:
  struct Instance {
    Index width = 0;
    std::vector<unsigned char> x;  // width x K of x_dtype
    std::vector<float> acc;        // width x N
  };
  std::vector<Index> widths_;  // ascending
  std::vector<Instance> instances_;
  std::shared_ptr<const LinearKernel> kernel_;
  DType x_dtype_ = DType::kBf16;
};

}  // namespace ncert::packing
