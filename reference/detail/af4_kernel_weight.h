// Internal: the kernel's weight for one AF4 code under a pinned dequantization (`f32` /
// `output`), shared by af4_decode_row (reference/af4.cc) and the reference's table decoder
// (reference/detail/weight_rows.cc), which must agree bit for bit.
#pragma once

#include <cmath>

#include "reference/af4.h"
#include "reference/float_bits.h"

namespace ncert::reference::detail {

/// The f32 value s * q + b (affine) or table[q] * s (codebook) by one operation order (one
/// fused multiply-add, or a multiply then an add), rounded to bf16 for `output` with bf16
/// activations. -ffp-contract=off (CMake) keeps s * qf + b two roundings unless fma says one.
inline float kernel_weight(const Af4Layout& L, float s, float b, int q, bool fused, bool round_to_act) {
  float w;
  if (L.variant == Af4Variant::kAffine) {
    const float qf = static_cast<float>(q);
    w = fused ? std::fma(s, qf, b) : s * qf + b;
  } else {
    w = L.table[q] * s;
  }
  return round_to_act ? round_to_bf16(w) : w;
}

}  // namespace ncert::reference::detail
