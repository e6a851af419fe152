#include "reference/af4.h"

#include <cmath>
#include <cstring>
#include <string>

#include "reference/detail/af4_kernel_weight.h"
#include "reference/float_bits.h"

namespace ncert::reference {

namespace {

template <typename E>
struct NameOf {
  E value;
  std::string_view name;
};

constexpr NameOf<Af4Variant> kVariants[] = {
    {Af4Variant::kAffine, "affine"}, {Af4Variant::kCodebook, "codebook"}, {Af4Variant::kZeroPoint, "zero-point"}};
constexpr NameOf<Af4Codebook> kCodebooks[] = {
    {Af4Codebook::kNf4, "nf4"}, {Af4Codebook::kAf4_64, "af4-64"}, {Af4Codebook::kCustom, "custom"}};
constexpr NameOf<Af4Packing> kPackings[] = {
    {Af4Packing::kU32Lsb, "u32-lsb"}, {Af4Packing::kU8Msb, "u8-msb"}, {Af4Packing::kU8Lsb, "u8-lsb"}};
constexpr NameOf<Dequant> kDequants[] = {
    {Dequant::kExact, "exact"}, {Dequant::kF32, "f32"}, {Dequant::kOutput, "output"}, {Dequant::kFolded, "folded"}};
constexpr NameOf<DequantOp> kDequantOps[] = {{DequantOp::kFma, "fma"},
                                             {DequantOp::kMulAdd, "mul-add"},
                                             {DequantOp::kEither, "either"},
                                             {DequantOp::kSubMul, "sub-mul"},
                                             {DequantOp::kFused, "fused"}};
constexpr NameOf<ZeroPointPacking> kZeroPointPackings[] = {{ZeroPointPacking::kU8, "u8"},
                                                           {ZeroPointPacking::kU32Lsb, "u32-lsb"},
                                                           {ZeroPointPacking::kU8Msb, "u8-msb"},
                                                           {ZeroPointPacking::kU8Lsb, "u8-lsb"}};

template <typename E, std::size_t N>
Result<E> parse_named(const NameOf<E> (&table)[N], std::string_view s, ErrorCode code, std::string_view what) {
  for (const auto& entry : table) {
    if (entry.name == s) return entry.value;
  }
  std::string allowed;
  for (const auto& entry : table) {
    if (!allowed.empty()) allowed += ", ";
    allowed += entry.name;
  }
  return Status(code, std::string(what) + " \"" + std::string(s) + "\" is not one of " + allowed);
}

template <typename E, std::size_t N>
std::string_view name_of(const NameOf<E> (&table)[N], E value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "none";
}

// docs/dump-format.md §4, ascending, index = code. Every decimal there is the nearest f32 (the NF4
// values are exactly representable; docs/formats.md "AF4" lists the f32 hex of each).
constexpr std::array<float, 16> kNf4 = {-1.0f,
                                        -0.6961928009986877f,
                                        -0.5250730514526367f,
                                        -0.39491748809814453f,
                                        -0.28444138169288635f,
                                        -0.18477343022823334f,
                                        -0.09105003625154495f,
                                        0.0f,
                                        0.07958029955625534f,
                                        0.16093020141124725f,
                                        0.24611230194568634f,
                                        0.33791524171829224f,
                                        0.44070982933044434f,
                                        0.5626170039176941f,
                                        0.7229568362236023f,
                                        1.0f};
constexpr std::array<float, 16> kAf464 = {
    -1.0f,       -0.69441008f, -0.51243739f, -0.3736951f, -0.25607552f, -0.14982478f, -0.04934812f, 0.0f,
    0.04273164f, 0.12934483f,  0.21961274f,  0.31675666f, 0.42563882f,  0.55496234f,  0.72424863f,  1.0f};
constexpr std::array<float, 16> kZeros = {};

}  // namespace

Result<Af4Variant> parse_af4_variant(std::string_view s) {
  return parse_named(kVariants, s, ErrorCode::kAf4VariantUnknown, "AF4 variant");
}
Result<Af4Codebook> parse_af4_codebook(std::string_view s) {
  return parse_named(kCodebooks, s, ErrorCode::kAf4CodebookUnknown, "AF4 codebook");
}
Result<Af4Packing> parse_af4_packing(std::string_view s) {
  return parse_named(kPackings, s, ErrorCode::kAf4PackingUnknown, "AF4 packing");
}
Result<Dequant> parse_dequant(std::string_view s) {
  return parse_named(kDequants, s, ErrorCode::kAf4DequantUnknown, "AF4 dequant");
}
Result<DequantOp> parse_dequant_op(std::string_view s) {
  return parse_named(kDequantOps, s, ErrorCode::kDequantOpUnknown, "AF4 dequant_op");
}
Result<ZeroPointPacking> parse_zero_point_packing(std::string_view s) {
  return parse_named(kZeroPointPackings, s, ErrorCode::kAf4PackingUnknown, "AF4 zero_point_packing");
}
Index zero_point_columns(ZeroPointPacking p, Index groups) {
  switch (p) {
    case ZeroPointPacking::kU8:
      return groups;
    case ZeroPointPacking::kU32Lsb:
      return (groups + 7) / 8;
    case ZeroPointPacking::kU8Msb:
    case ZeroPointPacking::kU8Lsb:
      return (groups + 1) / 2;
  }
  return groups;
}

Status unpack_zero_points(ZeroPointPacking p, const std::uint8_t* stored, Index rows, Index groups,
                          std::string_view what, std::uint8_t* out) {
  const auto refuse = [&](Index row, Index group, int value, std::string_view why) {
    return Status(ErrorCode::kAttributeInvalid, std::string(what) + ": row " + std::to_string(row) + ", group " +
                                                    std::to_string(group) + ": zero point " + std::to_string(value) +
                                                    std::string(why));
  };
  if (p == ZeroPointPacking::kU8) {
    for (Index r = 0; r < rows; ++r) {
      for (Index g = 0; g < groups; ++g) {
        const std::uint8_t zp = stored[r * groups + g];
        if (zp > 15) return refuse(r, g, zp, " is above 15 (a zero point is a 4-bit code, 0..15)");
        out[r * groups + g] = zp;
      }
    }
    return Status();
  }
  // Packed: nibble i of a row sits at byte i/2 (little-endian words put u32-lsb's nibbles where
  // u8-lsb puts them), the first of a byte's two in the high nibble for u8-msb only.
  const Index row_bytes = zero_point_columns(p, groups) * (p == ZeroPointPacking::kU32Lsb ? 4 : 1);
  const bool high_first = p == ZeroPointPacking::kU8Msb;
  for (Index r = 0; r < rows; ++r) {
    const std::uint8_t* row = stored + r * row_bytes;
    for (Index i = 0; i < 2 * row_bytes; ++i) {
      const std::uint8_t byte = row[i / 2];
      const bool high = ((i % 2) == 0) == high_first;
      const int zp = high ? (byte >> 4) : (byte & 0x0F);
      if (i < groups) {
        out[r * groups + i] = static_cast<std::uint8_t>(zp);
      } else if (zp != 0) {
        return refuse(
            r, i, zp,
            " in an unused trailing nibble (past the row's " + std::to_string(groups) + " groups; it must be 0)");
      }
    }
  }
  return Status();
}

bool dequant_op_fits(Af4Variant variant, DequantOp op) {
  const bool zero_point_op = op == DequantOp::kSubMul || op == DequantOp::kFused;
  return zero_point_op == (variant == Af4Variant::kZeroPoint);
}
DequantOp default_dequant_op(Af4Variant variant) {
  return variant == Af4Variant::kZeroPoint ? DequantOp::kSubMul : DequantOp::kEither;
}
std::string_view af4_variant_name(Af4Variant v) { return name_of(kVariants, v); }
std::string_view af4_codebook_name(Af4Codebook c) { return name_of(kCodebooks, c); }
std::string_view af4_packing_name(Af4Packing p) { return name_of(kPackings, p); }
std::string_view dequant_name(Dequant d) { return name_of(kDequants, d); }
std::string_view dequant_op_name(DequantOp o) { return name_of(kDequantOps, o); }
std::string_view zero_point_packing_name(ZeroPointPacking p) { return name_of(kZeroPointPackings, p); }

const std::array<float, 16>& builtin_codebook(Af4Codebook c) {
  switch (c) {
    case Af4Codebook::kNf4:
      return kNf4;
    case Af4Codebook::kAf4_64:
      return kAf464;
    case Af4Codebook::kNone:
    case Af4Codebook::kCustom:
      return kZeros;
  }
  return kZeros;
}

float decode_scale(DType t, const void* base, Index index) { return decode_element(base, t, index); }

using detail::dequant_op_only_fused;
using detail::dequant_op_only_unfused;
using detail::exact_kernel_weight;
using detail::folded_magnitude;
using detail::kernel_weight;

void af4_decode_row(const Af4View& v, Index row, DType activation, double* exact, double* alg, float* kernel,
                    double* spread) {
  const Af4Layout& L = v.layout;
  const Index groups = v.k / L.group_size;
  const bool affine = L.variant == Af4Variant::kAffine;
  const bool zero_point = L.variant == Af4Variant::kZeroPoint;
  const bool pinned = L.dequant == Dequant::kF32 || L.dequant == Dequant::kOutput;
  const DType round_to = L.dequant == Dequant::kOutput ? activation : DType::kF32;
  const bool only_fused = dequant_op_only_fused(L.dequant_op);
  const bool only_unfused = dequant_op_only_unfused(L.dequant_op);
  for (Index g = 0; g < groups; ++g) {
    const float s = af4_scale(v, row, g);
    const float b = af4_bias(v, row, g);
    const int zp = af4_zero_point(v, row, g);
    const double sd = s;
    const double bd = b;
    for (Index c = g * L.group_size; c < (g + 1) * L.group_size; ++c) {
      const int q = af4_code(v, row, c);
      if (pinned) {
        // The kernel's weight is known: by the declared order, or as the midpoint of both.
        if (only_fused || only_unfused) {
          // One weight, no spread, also where it is inf or NaN (inf - inf would make a NaN
          // spread: a two-valued weight in a segment that cannot have one).
          const float w = kernel_weight(L, s, b, zp, q, only_fused, round_to);
          if (exact) exact[c] = w;
          if (alg) alg[c] = std::fabs(static_cast<double>(w));
          if (kernel) kernel[c] = w;
          if (spread) spread[c] = 0;
          continue;
        }
        const float w_fma = kernel_weight(L, s, b, zp, q, true, round_to);
        const float w_mul = kernel_weight(L, s, b, zp, q, false, round_to);
        const double mid = 0.5 * (static_cast<double>(w_fma) + static_cast<double>(w_mul));  // exact: one more bit
        const double half = 0.5 * std::fabs(static_cast<double>(w_mul) - static_cast<double>(w_fma));
        if (exact) exact[c] = mid;
        if (alg) alg[c] = std::fabs(mid) + half;
        if (kernel) kernel[c] = w_fma;
        if (spread) spread[c] = half;
        continue;
      }
      // s*q and (q - zp)*s: at most 24 + 4 significant bits, exact in f64. table[q]*s: 24 + 24
      // bits, exact.
      const double sq = affine ? sd * q : zero_point ? sd * (q - zp) : static_cast<double>(L.table[q]) * sd;
      const double w = affine ? sq + bd : sq;
      if (exact) exact[c] = w;
      if (alg) alg[c] = folded_magnitude(L, sd, bd, zp, q, w);
      if (kernel) kernel[c] = exact_kernel_weight(L, s, b, zp, q);
      if (spread) spread[c] = 0;
    }
  }
}

}  // namespace ncert::reference
