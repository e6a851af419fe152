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

constexpr NameOf<Af4Variant> kVariants[] = {{Af4Variant::kAffine, "affine"}, {Af4Variant::kCodebook, "codebook"}};
constexpr NameOf<Af4Codebook> kCodebooks[] = {
    {Af4Codebook::kNf4, "nf4"}, {Af4Codebook::kAf4_64, "af4-64"}, {Af4Codebook::kCustom, "custom"}};
constexpr NameOf<Af4Packing> kPackings[] = {
    {Af4Packing::kU32Lsb, "u32-lsb"}, {Af4Packing::kU8Msb, "u8-msb"}, {Af4Packing::kU8Lsb, "u8-lsb"}};
constexpr NameOf<Dequant> kDequants[] = {
    {Dequant::kExact, "exact"}, {Dequant::kF32, "f32"}, {Dequant::kOutput, "output"}, {Dequant::kFolded, "folded"}};
constexpr NameOf<DequantOp> kDequantOps[] = {
    {DequantOp::kFma, "fma"}, {DequantOp::kMulAdd, "mul-add"}, {DequantOp::kEither, "either"}};

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
std::string_view af4_variant_name(Af4Variant v) { return name_of(kVariants, v); }
std::string_view af4_codebook_name(Af4Codebook c) { return name_of(kCodebooks, c); }
std::string_view af4_packing_name(Af4Packing p) { return name_of(kPackings, p); }
std::string_view dequant_name(Dequant d) { return name_of(kDequants, d); }
std::string_view dequant_op_name(DequantOp o) { return name_of(kDequantOps, o); }

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

using detail::kernel_weight;

void af4_decode_row(const Af4View& v, Index row, DType activation, double* exact, double* alg, float* kernel,
                    double* spread) {
  const Af4Layout& L = v.layout;
  const Index groups = v.k / L.group_size;
  const bool affine = L.variant == Af4Variant::kAffine;
  const bool pinned = L.dequant == Dequant::kF32 || L.dequant == Dequant::kOutput;
  const bool round_to_act = L.dequant == Dequant::kOutput && activation == DType::kBf16;
  for (Index g = 0; g < groups; ++g) {
    const float s = af4_scale(v, row, g);
    const float b = af4_bias(v, row, g);
    const double sd = s;
    const double bd = b;
    for (Index c = g * L.group_size; c < (g + 1) * L.group_size; ++c) {
      const int q = af4_code(v, row, c);
      if (pinned) {
        // The kernel's weight is known: by the declared order, or as the midpoint of both.
        const float w_fma = kernel_weight(L, s, b, q, true, round_to_act);
        const float w_mul = kernel_weight(L, s, b, q, false, round_to_act);
        const float lo = L.dequant_op == DequantOp::kMulAdd ? w_mul : w_fma;
        const float hi = L.dequant_op == DequantOp::kFma ? w_fma : w_mul;
        const double mid = 0.5 * (static_cast<double>(lo) + static_cast<double>(hi));  // exact: one more bit
        const double half = 0.5 * std::fabs(static_cast<double>(hi) - static_cast<double>(lo));
        if (exact) exact[c] = mid;
        if (alg) alg[c] = std::fabs(mid) + half;
        if (kernel) kernel[c] = L.dequant_op == DequantOp::kMulAdd ? w_mul : w_fma;
        if (spread) spread[c] = half;
        continue;
      }
      // s*q: at most 24 + 4 significant bits, exact in f64. table[q]*s: 24 + 24 bits, exact.
      const double sq = affine ? sd * q : static_cast<double>(L.table[q]) * sd;
      const double w = affine ? sq + bd : sq;
      if (exact) exact[c] = w;
      if (alg) alg[c] = L.dequant == Dequant::kFolded ? std::fabs(sq) + std::fabs(bd) : std::fabs(w);
      if (kernel) kernel[c] = affine ? std::fma(s, static_cast<float>(q), b) : L.table[q] * s;
      if (spread) spread[c] = 0;
    }
  }
}

}  // namespace ncert::reference
