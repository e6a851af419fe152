#include "reference/k_walk.h"

#include <cmath>

namespace ncert::reference {

// This file is compiled with -ffp-contract=off (tools/cmake): `acc + x * w` is two roundings
// unless std::fma is written out, which is exactly what "seq" and "seq-fma" mean.

float walk_dot(const KWalk& walk, const float* x, const float* w, Index k) {
  const Index parts = walk.parts;
  const Index len = k / parts;
  float total = 0.0f;
  for (Index p = 0; p < parts; ++p) {
    float acc = 0.0f;
    const Index end = (p + 1) * len;
    if (walk.fma) {
      for (Index c = p * len; c < end; ++c) acc = std::fma(x[c], w[c], acc);
    } else {
      for (Index c = p * len; c < end; ++c) acc = acc + x[c] * w[c];
    }
    total = p == 0 ? acc : total + acc;
  }
  return total;
}

void walk_row_block(const KWalk& walk, const float* x, const float* wt, Index k, Index width,
                    float* out, float* scratch) {
  const Index parts = walk.parts;
  const Index len = k / parts;
  for (Index p = 0; p < parts; ++p) {
    float* acc = p == 0 ? out : scratch;
    for (Index j = 0; j < width; ++j) acc[j] = 0.0f;
    const Index end = (p + 1) * len;
    // Independent columns side by side: the compiler vectorizes over j, each lane keeping its
    // own column's k order, so every result equals walk_dot bit for bit.
    if (walk.fma) {
      for (Index c = p * len; c < end; ++c) {
        const float xv = x[c];
        const float* row = wt + c * width;
        for (Index j = 0; j < width; ++j) acc[j] = std::fma(xv, row[j], acc[j]);
      }
    } else {
      for (Index c = p * len; c < end; ++c) {
        const float xv = x[c];
        const float* row = wt + c * width;
        for (Index j = 0; j < width; ++j) acc[j] = acc[j] + xv * row[j];
      }
    }
    if (p > 0) {
      for (Index j = 0; j < width; ++j) out[j] = out[j] + scratch[j];
    }
  }
}

float round_to_output(float v, DType output) {
  return output == DType::kBf16 ? round_to_bf16(v) : v;
}

float epilogue_value(float acc, float bias, float residual, Epilogue epilogue,
                     ResidualAt residual_at, DType output) {
  float v = acc;
  if (has_bias(epilogue)) v = v + bias;
  if (has_residual(epilogue) && residual_at == ResidualAt::kF32) v = v + residual;
  float out = round_to_output(v, output);
  if (has_residual(epilogue) && residual_at == ResidualAt::kOutput) {
    out = round_to_output(out + residual, output);
  }
  return out;
}

}  // namespace ncert::reference
