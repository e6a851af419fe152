// This header defines the AF4 4-bit weight format of docs/dump-format.md §4: the variants
// (affine w = s*q + b, MLX style; codebook w = table[q]*s, NF4 / AF4-64 / custom; zero-point
// w = (q - zp)*s with an integer zero point per group, GPTQ / AWQ style), the nibble packings
// (u32-lsb, u8-msb, u8-lsb), per-group scales/biases in bf16/f16/f32 (negative scales allowed)
// and the dequantization modes a kernel may declare. Decoding is bit-exact.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "reference/dtype.h"
#include "reference/status.h"

namespace ncert::reference {

enum class Af4Variant : std::uint8_t { kAffine, kCodebook, kZeroPoint };
enum class Af4Codebook : std::uint8_t { kNone, kNf4, kAf4_64, kCustom };
/// How nibbles sit in the codes dataset. kU32Lsb: 8 codes per little-endian u32, element i in
/// bits 4i..4i+3 (MLX); kU8Msb: 2 per byte, first element in the high nibble (bitsandbytes);
/// kU8Lsb: first element in the low nibble. On little-endian storage kU32Lsb and kU8Lsb put
/// the same nibble at the same byte; they differ in the dataset type and row length (k/8 u32
/// vs k/2 u8).
enum class Af4Packing : std::uint8_t { kU32Lsb, kU8Msb, kU8Lsb };
/// How a zero-point segment stores its zero points (docs/dump-format.md §4.2): one per byte
/// (kU8, the default), or 4-bit packed along the groups exactly as codes are packed along K.
enum class ZeroPointPacking : std::uint8_t { kU8, kU32Lsb, kU8Msb, kU8Lsb };
/// What the engine's kernel does with the 4-bit weights (docs/dump-format.md §4, docs/error-bounds.md §2):
/// kExact: multiplies by the exact s*q+b; kF32: dequantizes to f32 first; kOutput: dequantizes
/// in f32 then rounds to the activation type (tile loaders); kFolded: s*sum(q*x) + b*sum(x).
enum class Dequant : std::uint8_t { kExact, kF32, kOutput, kFolded };
/// The f32 operation order of an AF4 weight in the f32 / output dequantizations
/// (docs/dump-format.md §8). Affine s*q + b: one fused multiply-add, a multiply then an add (two
/// roundings), or either (the default: not pinned, and where the two differ the reference
/// charges the spread). Zero-point (q - zp)*s: kSubMul, the exact integer difference times s
/// (one rounding; the default), or kFused, m = fl32(-zp*s) once per group, then fma(q, s, m).
enum class DequantOp : std::uint8_t { kFma, kMulAdd, kEither, kSubMul, kFused };
/// Whether a dequant_op applies to a variant: sub-mul and fused to zero-point only, the others
/// to affine and codebook only.
bool dequant_op_fits(Af4Variant variant, DequantOp op);
/// The dequant_op a segment of `variant` has when it declares none: sub-mul for zero-point,
/// either otherwise.
DequantOp default_dequant_op(Af4Variant variant);

Result<Af4Variant> parse_af4_variant(std::string_view s);
Result<Af4Codebook> parse_af4_codebook(std::string_view s);
Result<Af4Packing> parse_af4_packing(std::string_view s);
Result<Dequant> parse_dequant(std::string_view s);
Result<DequantOp> parse_dequant_op(std::string_view s);
Result<ZeroPointPacking> parse_zero_point_packing(std::string_view s);
std::string_view af4_variant_name(Af4Variant v);
std::string_view af4_codebook_name(Af4Codebook c);
std::string_view af4_packing_name(Af4Packing p);
std::string_view dequant_name(Dequant d);
std::string_view dequant_op_name(DequantOp o);
std::string_view zero_point_packing_name(ZeroPointPacking p);

/// The built-in codebooks of docs/dump-format.md §4 (ascending, index = code), as f32 values.
const std::array<float, 16>& builtin_codebook(Af4Codebook c);

struct Af4Layout {
  Af4Variant variant = Af4Variant::kAffine;
  Af4Codebook codebook = Af4Codebook::kNone;
  std::array<float, 16> table{};  ///< codebook values (built-in copied in, or custom)
  Af4Packing packing = Af4Packing::kU32Lsb;
  Index group_size = 64;
  DType scale_dtype = DType::kBf16;  ///< of scales and biases: bf16, f16 or f32
  Dequant dequant = Dequant::kExact;
  DequantOp dequant_op = DequantOp::kEither;
  ZeroPointPacking zero_point_packing = ZeroPointPacking::kU8;  ///< zero-point only; storage, for the hash
};

/// One AF4 segment of `rows` weight rows over K. `codes` are the dataset's raw bytes
/// (k/2 bytes per row whatever the packing); scales/biases are raw [rows, k/group_size]
/// patterns of layout.scale_dtype (biases only for affine); zero_points are [rows, k/group_size]
/// bytes, one per group, each 0..15 (zero-point only: the reader unpacks packed zero points and
/// refuses larger values before building a view).
struct Af4View {
  Af4Layout layout;
  Index rows = 0;
  Index k = 0;
  const std::uint8_t* codes = nullptr;
  const void* scales = nullptr;
  const void* biases = nullptr;
  const std::uint8_t* zero_points = nullptr;
};

/// The 4-bit code of element (row, col).
inline int af4_code(const Af4View& v, Index row, Index col) {
  const std::uint8_t byte = v.codes[row * (v.k / 2) + col / 2];
  const bool first = (col % 2) == 0;
  const bool high = (v.layout.packing == Af4Packing::kU8Msb) ? first : !first;
  return high ? (byte >> 4) : (byte & 0x0F);
}

/// Decodes one raw scale/bias element of type t (bf16, f16 or f32) exactly.
float decode_scale(DType t, const void* base, Index index);

inline float af4_scale(const Af4View& v, Index row, Index group) {
  return decode_scale(v.layout.scale_dtype, v.scales, row * (v.k / v.layout.group_size) + group);
}
inline float af4_bias(const Af4View& v, Index row, Index group) {
  if (v.layout.variant != Af4Variant::kAffine) return 0.0f;
  return decode_scale(v.layout.scale_dtype, v.biases, row * (v.k / v.layout.group_size) + group);
}

/// Columns of a zero_points dataset holding `groups` zero points a row: `groups` one per byte
/// (u8), ceil(groups / c) packed, c = 8 zero points per u32 or 2 per u8.
Index zero_point_columns(ZeroPointPacking p, Index groups);
/// Unpacks a zero_points dataset ([rows, zero_point_columns(p, groups)] raw little-endian
/// elements) into [rows, groups] bytes, one zero point each, and checks it: every u8 value at
/// most 15, and for the packed forms every unused trailing nibble of a row 0 (docs/dump-format.md
/// §4.2). The first offender is attribute-invalid, the message `what`, then its row, group and value.
Status unpack_zero_points(ZeroPointPacking p, const std::uint8_t* stored, Index rows, Index groups,
                          std::string_view what, std::uint8_t* out);

inline int af4_zero_point(const Af4View& v, Index row, Index group) {
  if (v.layout.variant != Af4Variant::kZeroPoint) return 0;
  return v.zero_points[row * (v.k / v.layout.group_size) + group];
}

/// Decodes one weight row, each output optional (pass nullptr to skip):
///  exact[k]   the weight the reference multiplies by, as an exact f64. kExact: s*q + b (or
///             table[q]*s, or (q - zp)*s: 24 + 4 bits, exact) exactly (s*q is exact in f64; the sum with b is exact
///             unless their exponents are more than ~25 apart, which the reference's error term allows). kF32 /
///             kOutput: the kernel's own weight, which these modes pin down: fl32(s*q + b) by the declared operation
///             order (fused, or multiply then add), or fl32(table[q]*s), then for kOutput rounded to nearest even in
///             the activation type (bf16 for bf16 activations); zero-point: fl32((q - zp)*s) (sub-mul) or fma(q, s,
///             fl32(-zp*s)) (fused). With dequant_op = either and the two orders giving different values, the midpoint
///             of the two (exact in f64). kFolded: s*q + b (or (q - zp)*s) exactly.
///  alg[k]     the magnitude the bound charges: |exact| + spread, and for kFolded |s*q| + |b|
///             (the folded kernel multiplies codes and adds biases separately: S_q, §2), for
///             zero-point |s*q| + |s*zp| (s*sum(q*x) - s*zp*sum(x)).
///  kernel[k]  the f32 weight the K-walk emulation multiplies by: the kernel weight above (the
///             fused order where either is allowed); fmaf(s, q, b) for kExact and kFolded
///             (fl32((q - zp)*s) for zero-point).
///  spread[k]  half the distance between the two allowed kernel weights (0 where they agree or
///             the order is pinned): the reference adds sum |x| spread to the bound.
void af4_decode_row(const Af4View& v, Index row, DType activation, double* exact, double* alg, float* kernel,
                    double* spread = nullptr);

}  // namespace ncert::reference
