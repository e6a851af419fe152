#include "reference/k_walk.h"

#include <algorithm>
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

void walk_row_block(const KWalk& walk, const float* x, const float* wt, Index k, Index width, float* out,
                    float* scratch) {
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

namespace {

// One part of the walk for `nr` <= 4 rows and exactly 16 columns: the 4 x 16 accumulators stay
// in registers for the whole k range, so each weight vector is loaded once and feeds 4 FMAs.
// Every lane keeps its own column's k order: the bits equal walk_dot's.
template <bool kFma>
inline void step16(float (&a)[16], float xv, const float* w) {
  for (int l = 0; l < 16; ++l) {
    if constexpr (kFma) {
      a[l] = std::fma(xv, w[l], a[l]);
    } else {
      a[l] = a[l] + xv * w[l];
    }
  }
}

template <bool kFma>
void part_4x16(const float* x, Index nr, const float* wt, Index k, Index width, Index c0, Index c1, float* acc) {
  // Four named accumulator rows (not a 2-D array): the compiler keeps each in one vector
  // register (or two) for the whole loop instead of reloading it around every FMA.
  float a0[16] = {}, a1[16] = {}, a2[16] = {}, a3[16] = {};
  const float* x0 = x;
  const float* x1 = x + (nr > 1 ? 1 : 0) * k;
  const float* x2 = x + (nr > 2 ? 2 : 0) * k;
  const float* x3 = x + (nr > 3 ? 3 : 0) * k;
  for (Index c = c0; c < c1; ++c) {
    const float* w = wt + c * width;
    step16<kFma>(a0, x0[c], w);
    step16<kFma>(a1, x1[c], w);  // rows beyond nr repeat row 0; their results are dropped
    step16<kFma>(a2, x2[c], w);
    step16<kFma>(a3, x3[c], w);
  }
  const float* rows[4] = {a0, a1, a2, a3};
  for (Index r = 0; r < nr; ++r) {
    for (int l = 0; l < 16; ++l) acc[r * width + l] = rows[r][l];
  }
}

}  // namespace

void walk_rows_block(const KWalk& walk, const float* x, Index rows, const float* wt, Index k, Index width, float* out,
                     float* scratch) {
  const Index parts = walk.parts;
  const Index len = k / parts;
  for (Index r0 = 0; r0 < rows; r0 += 4) {
    const Index nr = std::min<Index>(4, rows - r0);
    const float* xr = x + r0 * k;
    float* total = out + r0 * width;
    float* part = scratch + r0 * width;
    for (Index p = 0; p < parts; ++p) {
      // Part 0 goes straight into the total; each later part into scratch, then total += part
      // right away: total = ((p0 + p1) + p2) + ..., as the walk defines.
      float* acc = p == 0 ? total : part;
      const Index c0 = p * len, c1 = (p + 1) * len;
      Index j0 = 0;
      for (; j0 + 16 <= width; j0 += 16) {
        if (walk.fma) {
          part_4x16<true>(xr, nr, wt + j0, k, width, c0, c1, acc + j0);
        } else {
          part_4x16<false>(xr, nr, wt + j0, k, width, c0, c1, acc + j0);
        }
      }
      if (j0 < width) {  // the last < 16 columns: the plain loop, same per-column order
        for (Index r = 0; r < nr; ++r) {
          for (Index j = j0; j < width; ++j) acc[r * width + j] = 0.0f;
        }
        for (Index c = c0; c < c1; ++c) {
          const float* w = wt + c * width;
          for (Index r = 0; r < nr; ++r) {
            const float xv = xr[r * k + c];
            for (Index j = j0; j < width; ++j) {
              float& a = acc[r * width + j];
              a = walk.fma ? std::fma(xv, w[j], a) : a + xv * w[j];
            }
          }
        }
      }
      if (p > 0) {
        for (Index r = 0; r < nr; ++r) {
          for (Index j = 0; j < width; ++j) total[r * width + j] = total[r * width + j] + part[r * width + j];
        }
      }
    }
  }
}

float round_to_output(float v, DType output, OutputRounding rounding) {
  if (output != DType::kBf16) return v;
  return rounding == OutputRounding::kTowardZero ? bf16_to_f32(f32_to_bf16_truncate(v)) : round_to_bf16(v);
}

float epilogue_value(float acc, float bias, float residual, const ProjectionArithmetic& a) {
  float v = acc;
  if (has_bias(a.epilogue)) v = v + bias;
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kF32) v = v + residual;
  float out = round_to_output(v, a.output, a.output_rounding);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kOutput) {
    out = round_to_output(out + residual, a.output, a.output_rounding);
  }
  return out;
}

}  // namespace ncert::reference
