// Test support: f32 dot products in the summation orders real kernels use, to hold the
// reference's bounds against (tests/unit/reference/*). Compiled with -ffp-contract=off, so an
// a * b + s is two roundings unless std::fma says one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "reference/dtype.h"

namespace ncert::testing {

using Order = std::function<float(const float* x, const float* w, Index k)>;

/// Left to right, multiply then add.
inline float seq(const float* x, const float* w, Index k) {
  float a = 0;
  for (Index c = 0; c < k; ++c) a = a + x[c] * w[c];
  return a;
}
/// Left to right, one fused multiply-add per term.
inline float seq_fma(const float* x, const float* w, Index k) {
  float a = 0;
  for (Index c = 0; c < k; ++c) a = std::fma(x[c], w[c], a);
  return a;
}
/// Right to left, multiply then add.
inline float reversed(const float* x, const float* w, Index k) {
  float a = 0;
  for (Index c = k - 1; c >= 0; --c) a = a + x[c] * w[c];
  return a;
}
/// Right to left, fused.
inline float reversed_fma(const float* x, const float* w, Index k) {
  float a = 0;
  for (Index c = k - 1; c >= 0; --c) a = std::fma(x[c], w[c], a);
  return a;
}
/// Halves summed recursively.
inline float pairwise(const float* x, const float* w, Index k) {
  if (k == 1) return x[0] * w[0];
  const Index h = k / 2;
  return pairwise(x, w, h) + pairwise(x + h, w + h, k - h);
}
/// `parts` consecutive (possibly uneven) parts summed in turn, then the parts added.
inline Order split(Index parts, bool fma) {
  return [parts, fma](const float* x, const float* w, Index k) {
    float total = 0;
    for (Index p = 0; p < parts; ++p) {
      const Index b = k * p / parts, e = k * (p + 1) / parts;
      const float part = fma ? seq_fma(x + b, w + b, e - b) : seq(x + b, w + b, e - b);
      total = total + part;
    }
    return total;
  };
}
/// A fixed random permutation of the terms.
inline Order shuffled(std::uint64_t seed) {
  return [seed](const float* x, const float* w, Index k) {
    std::vector<Index> idx(static_cast<std::size_t>(k));
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), std::mt19937_64(seed));
    float a = 0;
    for (Index c : idx) a = a + x[c] * w[c];
    return a;
  };
}
/// 16 FMA lanes over panels of 256, lanes summed in a tree, panels added in turn (what a
/// blocked SIMD GEMM kernel does).
inline float panels(const float* x, const float* w, Index k) {
  float total = 0;
  for (Index p = 0; p < k; p += 256) {
    float lane[16] = {};
    for (Index c = p; c < std::min(k, p + 256); ++c) lane[c % 16] = std::fma(x[c], w[c], lane[c % 16]);
    for (int width = 8; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l) lane[l] = lane[l] + lane[l + width];
    }
    total = total + lane[0];
  }
  return total;
}
/// Largest product first: every later small term is added to a large partial sum.
inline float largest_first(const float* x, const float* w, Index k) {
  std::vector<Index> idx(static_cast<std::size_t>(k));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](Index i, Index j) { return x[i] * w[i] > x[j] * w[j]; });
  float a = 0;
  for (Index c : idx) a = a + x[c] * w[c];
  return a;
}

}  // namespace ncert::testing
