// Test support: the weights an independent engine computes from a test problem's plain
// parameters (never ncert's decoder), and AF4 layouts in one call; shared by the reference's
// rigour and power tests (tests/unit/reference/linear*_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/float_bits.h"
#include "tests/common/linear_fixture.h"

namespace ncert::testing {

using reference::Af4Codebook;
using reference::Af4Layout;
using reference::Af4Packing;
using reference::Af4Variant;
using reference::Dequant;
using reference::WeightFormat;
using reference::WeightSegment;

/// The f32 weights an engine uses for column j under the segment's dequant mode, computed from
/// the plain parameters (never ncert's decoder). `fma_dequant` picks fma(s,q,b) over
/// fl(fl(s*q)+b) for the f32/output modes.
inline std::vector<float> engine_weights(const OwnedProblem& p, Index j, bool fma_dequant) {
  std::vector<float> w(static_cast<std::size_t>(p.k));
  for (std::size_t s = 0; s < p.weights.segments.size(); ++s) {
    const WeightSegment& seg = p.weights.segments[s];
    if (j < seg.row_begin || j >= seg.row_end) continue;
    const Index r = j - seg.row_begin;
    for (Index c = 0; c < p.k; ++c) {
      if (seg.format != WeightFormat::kAf4) {
        w[c] = static_cast<float>(p.exact_weight(j, c));
        continue;
      }
      const auto& a = p.af4_plain[s];
      const Af4Layout& L = seg.af4.layout;
      const Index groups = p.k / L.group_size;
      const float sc = a.scale[r * groups + c / L.group_size];
      const float bi = a.bias[r * groups + c / L.group_size];
      const int q = a.q[r * p.k + c];
      float v;
      if (L.variant == Af4Variant::kCodebook) {
        v = L.table[q] * sc;
      } else if (L.dequant == Dequant::kExact) {
        const double e = p.exact_weight(j, c);
        v = static_cast<float>(e);
        EXPECT_EQ(static_cast<double>(v), e) << "exact-mode weight not representable in f32";
      } else {
        v = fma_dequant ? std::fma(sc, static_cast<float>(q), bi) : sc * static_cast<float>(q) + bi;
      }
      if (L.dequant == Dequant::kOutput && p.x_dtype == DType::kBf16) v = reference::round_to_bf16(v);
      w[c] = v;
    }
  }
  return w;
}

/// An AF4 layout from its fields.
inline Af4Layout af4(Af4Variant v, Af4Packing pk, Index group, Dequant dq, DType scale = DType::kBf16,
                     Af4Codebook cb = Af4Codebook::kNone) {
  Af4Layout L;
  L.variant = v;
  L.packing = pk;
  L.group_size = group;
  L.dequant = dq;
  L.scale_dtype = scale;
  L.codebook = cb;
  return L;
}

}  // namespace ncert::testing
