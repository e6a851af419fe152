#include "reference/dtype.h"

namespace ncert {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBf16:
      return "bf16";
    case DType::kE4m3:
      return "e4m3";
    case DType::kE5m2:
      return "e5m2";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
    case DType::kU32:
      return "u32";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBf16, DType::kE4m3, DType::kE5m2, DType::kI8, DType::kU8,
                  DType::kU32, DType::kI32, DType::kI64}) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

int dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBf16:
      return 2;
    case DType::kE4m3:
    case DType::kE5m2:
    case DType::kI8:
    case DType::kU8:
      return 1;
    case DType::kU32:
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
  }
  return 0;
}

bool is_float_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBf16; }

bool is_fp8_dtype(DType t) { return t == DType::kE4m3 || t == DType::kE5m2; }

}  // namespace ncert
