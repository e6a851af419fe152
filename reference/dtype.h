// This header defines DType, the element types of the dump format (docs/dump-format.md §1), with
// their names as spelled in files and on the command line, and their sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ncert {

using Index = std::int64_t;  ///< every size and offset (matches Eigen::Index)

enum class DType : std::uint8_t {
  kF32,   ///< IEEE binary32
  kF16,   ///< IEEE binary16
  kBf16,  ///< bfloat16, always handled as raw 16-bit patterns
  kE4m3,  ///< OCP FP8 E4M3FN (reference/narrow_float.h), raw 8-bit patterns
  kE5m2,  ///< OCP FP8 E5M2, raw 8-bit patterns
  kI8,
  kU8,
  kU32,
  kI32,
  kI64,
};

/// "f32", "f16", "bf16", "e4m3", "e5m2", "i8", "u8", "u32", "i32", "i64".
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element.
int dtype_size(DType t);
/// f32, f16 or bf16 (the types values are computed in; FP8 only ever holds scaled values).
bool is_float_dtype(DType t);
/// e4m3 or e5m2.
bool is_fp8_dtype(DType t);

}  // namespace ncert
