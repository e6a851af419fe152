#include "reference/k_walk.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference/detail/transpose.h"

namespace ncert::reference {

// This file is compiled with -ffp-contract=off (tools/cmake): `acc + x * w` is two roundings
// unless std::fma is written out, which is exactly what "seq" and "seq-fma" mean.

namespace {

/// TwoSum (Knuth): hi = fl64(a + b) and lo with hi + lo = a + b exactly (no overflow here: the
/// operands are products of two f32 values and p-bit sums, below 2^257).
struct TwoSum {
  double hi = 0;
  double lo = 0;
};
TwoSum two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

/// The exact value hi + lo (|lo| <= half an ulp of hi, as TwoSum leaves it) rounded once to
/// `bits` significand bits on f32's exponent range: in the binade [2^e, 2^(e+1)) the quantum is
/// 2^(max(e, -126) + 1 - bits), so below 2^-126 the grid is gradual underflow with the quantum of
/// the lowest normal binade (p = 24 is f32 exactly). Overflow: rne gives inf at 2^128 after
/// rounding, rz the largest p-bit value. Bit operations on hi; lo only decides where hi is a
/// grid point (rz) or a midpoint (rne), the only places where hi and the exact sum can round
/// differently: grid points and midpoints are doubles (bits + 1 <= 25), so hi = fl64(exact)
/// lies on the same side of every other one (monotonicity).
float round_to_bits(double hi, double lo, int bits, PromoteRounding rnd) {
  if (hi == 0 || !std::isfinite(hi)) return static_cast<float>(hi);  // the sign of an exact 0 is IEEE's
  const auto u = std::bit_cast<std::uint64_t>(hi);
  const bool negative = (u >> 63) != 0;
  const int e = static_cast<int>((u >> 52) & 0x7FF) - 1023;  // hi is normal: |hi| >= 2^-298
  const int q = std::max(e, -126) + 1 - bits;                // log2 of the quantum
  const int drop = q - (e - 52);                             // >= 53 - 24 = 29 low bits of 53
  if (drop > 53) return negative ? -0.0f : 0.0f;             // |exact| < quantum / 2
  const std::uint64_t mant = (u & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  std::uint64_t keep = mant >> drop;
  const std::uint64_t rem = mant & ((std::uint64_t{1} << drop) - 1);
  const std::uint64_t half = std::uint64_t{1} << (drop - 1);
  const bool lo_outward = lo != 0 && ((lo < 0) == negative);  // |exact| > |hi|
  const bool lo_inward = lo != 0 && !lo_outward;              // |exact| < |hi|
  double mag = 0;
  if (rnd == PromoteRounding::kNearestEven) {
    if (rem > half || (rem == half && (lo_outward || (lo == 0 && (keep & 1) != 0)))) ++keep;
    mag = std::ldexp(static_cast<double>(keep), q);
    if (mag >= 0x1p128) mag = std::numeric_limits<double>::infinity();
  } else {
    mag = std::ldexp(static_cast<double>(keep), q);
    if (rem == 0 && lo_inward) {
      // Just below a grid point: the next one down, whose spacing is half as large where the
      // grid point is a power of two above the lowest normal binade.
      const bool power = keep == (std::uint64_t{1} << (bits - 1)) && e > -126;
      mag -= std::ldexp(1.0, power ? q - 1 : q);
    }
    if (mag >= 0x1p128) mag = std::ldexp(std::ldexp(1.0, bits) - 1, 128 - bits);
  }
  return static_cast<float>(negative ? -mag : mag);
}

/// Reduces v[0..n) to one f32 value in the tree's order (v is overwritten). A butterfly's
/// distances at or above n only ever add lanes that stayed +0 (see lanes_used), and are skipped.
float reduce_tree(KWalkTree tree, const std::vector<Index>& distances, float* v, Index n) {
  switch (tree) {
    case KWalkTree::kButterfly:
      // v[i + d] has bit d set and is not written in the step that reads it: in place is safe.
      for (Index d : distances) {
        if (d >= n) continue;
        for (Index i = 0; i < n; ++i) {
          if ((i & d) == 0) v[i] = v[i] + v[i + d];
        }
      }
      return v[0];
    case KWalkTree::kSeq: {
      float t = v[0];
      for (Index i = 1; i < n; ++i) t = t + v[i];
      return t;
    }
    case KWalkTree::kHalving:
      for (Index width = n; width > 1;) {
        width /= 2;
        for (Index i = 0; i < width; ++i) v[i] = v[i] + v[i + width];
      }
      return v[0];
    case KWalkTree::kPairs:
      // v[i] is written after v[2i] and v[2i + 1] are read (2i >= i): in place is safe.
      for (Index width = n; width > 1; width /= 2) {
        for (Index i = 0; i < width / 2; ++i) v[i] = v[2 * i] + v[2 * i + 1];
      }
      return v[0];
    case KWalkTree::kGroups:
      break;  // reduce_groups: it needs the group's shape
  }
  return v[0];
}

/// The lanes a tree over lanes of which only the first `used` hold terms (the rest +0) needs:
/// seq the used ones, halving, pairs and butterfly bit_ceil of them (their upper halves only add
/// zeros). The value is the full tree's but for the sign of a zero result (lanes_dot).
Index tree_lanes(KWalkTree tree, Index used) {
  const auto u = static_cast<std::uint64_t>(std::max<Index>(1, used));
  return tree == KWalkTree::kSeq ? static_cast<Index>(u) : static_cast<Index>(std::bit_ceil(u));
}

/// The lanes of a groups(g,inner,outer) tree that hold terms, min(K, L) (at least 1), and the
/// groups they fill, the last perhaps in part.
struct FilledGroups {
  Index lanes = 1, groups = 1;
};
FilledGroups filled_groups(const KWalk& walk, Index k) {
  const Index lanes = std::min(std::max<Index>(1, k), walk.lanes);
  return {lanes, (lanes + walk.lane_group - 1) / walk.lane_group};
}

/// groups(g,inner,outer) over the lanes of `k` terms as lanes_used materialized them: each group
/// holding terms reduced by `inner` into v[j] (group j's values start at j g >= j, and the
/// groups before it are done: in place is safe), the last cut to tree_lanes of its lanes, then
/// the group sums by `outer`, the groups beyond (+0 sums) counting only as outer's bit_ceil
/// requires. With L <= K every group is whole.
float reduce_groups(const KWalk& walk, float* v, Index k) {
  const Index g = walk.lane_group;
  const FilledGroups filled = filled_groups(walk, k);
  for (Index j = 0; j < filled.groups; ++j) {
    const Index used = std::min(g, filled.lanes - j * g);
    v[j] = reduce_tree(walk.lane_group_inner, {}, v + j * g, tree_lanes(walk.lane_group_inner, used));
  }
  const Index outer = tree_lanes(walk.lane_group_outer, filled.groups);
  for (Index j = filled.groups; j < outer; ++j) v[j] = 0.0f;
  return reduce_tree(walk.lane_group_outer, {}, v, outer);
}

/// The lanes a walk materializes for `k` terms. Lanes beyond K never receive a term and stay
/// +0, and adding +0 is exact and the identity but for a -0 (a lane can be -0: fma(x, w, +0)
/// rounds a tiny negative product to -0; lanes_dot restores the +0 a zero result then has). A
/// halving, pairs or butterfly tree over L >= bit_ceil(K) lanes is therefore the same tree over
/// bit_ceil(K) lanes (the upper halves only add zeros: a butterfly drops the distances at or above
/// bit_ceil(K) and keeps the others in their order), and a seq tree over L >= K lanes the seq
/// tree over K: an L of 2^40 costs no memory.
Index lanes_used(const KWalk& walk, Index k) {
  if (walk.lane_tree == KWalkTree::kGroups) {
    // Groups of +0 lanes beyond K reduce to +0: the groups holding terms, the last cut to its
    // inner tree's lanes (reduce_groups), and room for outer's bit_ceil of group sums. A g of
    // 65,536 at K = 16 once reduced 65,536 lanes per value (a 2.6 MB dump ran > 60 s).
    const Index g = walk.lane_group;
    const FilledGroups filled = filled_groups(walk, k);
    const Index last = (filled.groups - 1) * g;
    const Index lanes = last + tree_lanes(walk.lane_group_inner, filled.lanes - last);
    return std::min(walk.lanes, std::max(lanes, tree_lanes(walk.lane_group_outer, filled.groups)));
  }
  return std::min(walk.lanes, tree_lanes(walk.lane_tree, k));
}

float seq_dot(bool fma, const float* x, const float* w, Index k) {
  float acc = 0.0f;
  if (fma) {
    for (Index c = 0; c < k; ++c) acc = std::fma(x[c], w[c], acc);
  } else {
    for (Index c = 0; c < k; ++c) acc = acc + x[c] * w[c];
  }
  return acc;
}

/// lanes:<L>:<tree>[:fma] over x[0..k): term c into lane c mod L, then the tree. `lane` holds
/// lanes_used() floats.
float lanes_dot(const KWalk& walk, const float* x, const float* w, Index k, float* lane) {
  const Index lanes = lanes_used(walk, k);
  for (Index l = 0; l < lanes; ++l) lane[l] = 0.0f;
  for (Index c0 = 0; c0 < k; c0 += lanes) {
    const Index n = std::min(lanes, k - c0);  // a masked tail: the last lanes one term short
    for (Index l = 0; l < n; ++l) {
      lane[l] = walk.fma ? std::fma(x[c0 + l], w[c0 + l], lane[l]) : lane[l] + x[c0 + l] * w[c0 + l];
    }
  }
  const float sum = walk.lane_tree == KWalkTree::kGroups
                        ? reduce_groups(walk, lane, k)
                        : reduce_tree(walk.lane_tree, walk.lane_distances, lane, lanes);
  // A sum of floats is -0 only where both are -0, so a tree holding a +0 lane never ends at -0;
  // where lanes were left out as +0, a zero sum is +0 (a reviewer's lanes:8:halving:fma at K 4,
  // each product rounding to -0, gave 0x80000000 against the kernel's 0x00000000).
  return lanes < walk.lanes && sum == 0.0f ? 0.0f : sum;
}

/// promote:<P>:<p>:<rnd>[:fma] over x[0..k): blocks of P terms at p bits, each block's sum added
/// to the f32 total. x*w of two floats is exact in f64 (24 + 24 bits).
float promote_dot(const KWalk& walk, const float* x, const float* w, Index k) {
  const int bits = walk.promote_bits;
  const PromoteRounding rnd = walk.promote_rounding;
  float total = 0.0f;
  for (Index b0 = 0; b0 < k;) {
    const Index b1 = k - b0 <= walk.promote_block ? k : b0 + walk.promote_block;
    float acc = 0.0f;
    for (Index c = b0; c < b1; ++c) {
      const double product = static_cast<double>(x[c]) * static_cast<double>(w[c]);
      const double term = walk.fma ? product : static_cast<double>(round_to_bits(product, 0.0, bits, rnd));
      const TwoSum s = two_sum(term, static_cast<double>(acc));
      acc = round_to_bits(s.hi, s.lo, bits, rnd);
    }
    total = b0 == 0 ? acc : total + acc;
    b0 = b1;
  }
  return total;
}

/// Any walk, one dot product: each of the walk's parts by its inner walk from 0, then the
/// combine tree; `start` (bias_at = start) added to part 0's sum under a seq tree, else to the
/// tree's result (k_walk.h). `scratch` grows to parts + lanes floats.
float staged_dot(const KWalk& walk, const float* x, const float* w, Index k, std::vector<float>& scratch,
                 const float* start) {
  const Index parts = walk.parts;
  const Index len = k / parts;
  const Index lanes = walk.inner == KWalkInner::kLanes ? lanes_used(walk, len) : 0;
  scratch.resize(static_cast<std::size_t>(parts + lanes));
  float* sums = scratch.data();
  for (Index p = 0; p < parts; ++p) {
    const float* xp = x + p * len;
    const float* wp = w + p * len;
    switch (walk.inner) {
      case KWalkInner::kSeq:
        sums[p] = seq_dot(walk.fma, xp, wp, len);
        break;
      case KWalkInner::kLanes:
        sums[p] = lanes_dot(walk, xp, wp, len, sums + parts);
        break;
      case KWalkInner::kPromote:
        sums[p] = promote_dot(walk, xp, wp, len);
        break;
    }
  }
  const bool in_chain = start != nullptr && walk.combine == KWalkTree::kSeq;
  if (in_chain) sums[0] = sums[0] + *start;
  const float total = reduce_tree(walk.combine, walk.combine_distances, sums, parts);
  return start != nullptr && !in_chain ? total + *start : total;
}

/// walk_rows_block's weight panels: 16 columns, one AVX-512 register of f32 (k_walk.h).
constexpr Index kPanelCols = 16;
static_assert(kPanelCols == detail::kTransposeRows, "the panels detail::F32Panels describes");

/// The blocked paths' fallback for every form but the plain ones: column by column through
/// staged_dot, gathering the column from the transposed block once for all rows. Measured with
/// walk_rows_block on 4 rows x 128 columns at K = 4096 (one thread, AVX-512, GCC 12 -O3):
/// split:4:fma 0.068 ms (the vectorized path), lanes:16:halving:fma 1.5 ms (22x),
/// splitk:4:pairs/seq-fma 3.0 ms (45x), promote:128:14:rz:fma 34 ms (500x: TwoSum and the bit
/// rounding per term, scalar). A 32 x 16480 x 5120 projection declaring promote thus spends ~45 s
/// of one core in the walk emulation; only dumps that declare these walks pay it.
void staged_block(const KWalk& walk, const float* x, Index rows, const float* wt, Index k, Index width, bool panels,
                  float* out, const float* start) {
  std::vector<float> column(static_cast<std::size_t>(k));
  std::vector<float> scratch;
  for (Index j = 0; j < width; ++j) {
    // Row-major (wt[c * width + j]) or in panels of kPanelCols columns (walk_rows_block's).
    const detail::F32Panels layout{wt, width, k};
    const float* base = panels ? layout.row(j) : wt + j;
    const Index pw = panels ? layout.step(j) : width;
    for (Index c = 0; c < k; ++c) column[static_cast<std::size_t>(c)] = base[c * pw];
    const float* b = start != nullptr ? start + j : nullptr;
    for (Index r = 0; r < rows; ++r) out[r * width + j] = staged_dot(walk, x + r * k, column.data(), k, scratch, b);
  }
}

}  // namespace

float walk_dot(const KWalk& walk, const float* x, const float* w, Index k, const float* start) {
  if (!walk.plain()) {
    // Kept per thread: an integer kernel's walk (code_walk.h) calls this once per element.
    thread_local std::vector<float> scratch;
    return staged_dot(walk, x, w, k, scratch, start);
  }
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
    // bias_at = start: the bias joins part 0's sum before any later part (k_walk.h).
    total = p == 0 ? (start != nullptr ? acc + *start : acc) : total + acc;
  }
  return total;
}

void walk_row_block(const KWalk& walk, const float* x, const float* wt, Index k, Index width, float* out,
                    float* scratch, const float* start) {
  if (!walk.plain()) {
    staged_block(walk, x, 1, wt, k, width, false, out, start);
    return;
  }
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
    if (p == 0 && start != nullptr) {
      for (Index j = 0; j < width; ++j) out[j] = out[j] + start[j];
    }
    if (p > 0) {
      for (Index j = 0; j < width; ++j) out[j] = out[j] + scratch[j];
    }
  }
}

namespace {

// One part of the walk for `nr` <= 4 rows and one panel of exactly 16 columns (16 consecutive
// floats per k step): the 4 x 16 accumulators stay in registers for the whole k range, so each
// weight vector is loaded once and feeds 4 FMAs.
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
void part_4x16(const float* x, Index nr, const float* panel, Index k, Index width, Index c0, Index c1, float* acc) {
  // Four named accumulator rows (not a 2-D array): the compiler keeps each in one vector
  // register (or two) for the whole loop instead of reloading it around every FMA.
  float a0[16] = {}, a1[16] = {}, a2[16] = {}, a3[16] = {};
  const float* x0 = x;
  const float* x1 = x + (nr > 1 ? 1 : 0) * k;
  const float* x2 = x + (nr > 2 ? 2 : 0) * k;
  const float* x3 = x + (nr > 3 ? 3 : 0) * k;
  for (Index c = c0; c < c1; ++c) {
    const float* w = panel + c * kPanelCols;
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

// The same for 5 to 8 rows: eight accumulator chains hide the FMA latency that four leave
// exposed (4 cycles, two FMA units: 8 chains in flight), and each weight vector feeds 8 FMAs.
template <bool kFma>
void part_8x16(const float* x, Index nr, const float* panel, Index k, Index width, Index c0, Index c1, float* acc) {
  float a0[16] = {}, a1[16] = {}, a2[16] = {}, a3[16] = {}, a4[16] = {}, a5[16] = {}, a6[16] = {}, a7[16] = {};
  auto row = [&](Index r) { return x + (nr > r ? r : 0) * k; };  // rows beyond nr repeat row 0
  const float *x0 = row(0), *x1 = row(1), *x2 = row(2), *x3 = row(3);
  const float *x4 = row(4), *x5 = row(5), *x6 = row(6), *x7 = row(7);
  for (Index c = c0; c < c1; ++c) {
    const float* w = panel + c * kPanelCols;
    step16<kFma>(a0, x0[c], w);
    step16<kFma>(a1, x1[c], w);
    step16<kFma>(a2, x2[c], w);
    step16<kFma>(a3, x3[c], w);
    step16<kFma>(a4, x4[c], w);
    step16<kFma>(a5, x5[c], w);
    step16<kFma>(a6, x6[c], w);
    step16<kFma>(a7, x7[c], w);
  }
  const float* rows[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  for (Index r = 0; r < nr; ++r) {
    for (int l = 0; l < 16; ++l) acc[r * width + l] = rows[r][l];
  }
}

// The same over two adjacent panels (32 columns): 16 accumulator chains, and each broadcast
// activation feeds 2 FMAs. part_8x16's loop is 8 FMAs each with its activation loaded in the
// FMA ({1to16}) beside one weight load: 9 loads for 8 FMAs, more than the 2 vector loads a
// cycle can serve at the FMA rate, and 8 chains of 4-cycle latency leave no slack. Here it is
// 10 loads for 16 FMAs: the walk of a MatMulNBits dump (M 32, K 5,120, N 16,480, seq-fma) took
// 10 % less CPU (perf samples, 3 runs each, Intel Xeon).
template <bool kFma>
void part_8x32(const float* x, Index nr, const float* panel_a, const float* panel_b, Index k, Index width, Index c0,
               Index c1, float* acc) {
  float a0[16] = {}, a1[16] = {}, a2[16] = {}, a3[16] = {}, a4[16] = {}, a5[16] = {}, a6[16] = {}, a7[16] = {};
  float b0[16] = {}, b1[16] = {}, b2[16] = {}, b3[16] = {}, b4[16] = {}, b5[16] = {}, b6[16] = {}, b7[16] = {};
  auto row = [&](Index r) { return x + (nr > r ? r : 0) * k; };  // rows beyond nr repeat row 0
  const float *x0 = row(0), *x1 = row(1), *x2 = row(2), *x3 = row(3);
  const float *x4 = row(4), *x5 = row(5), *x6 = row(6), *x7 = row(7);
  for (Index c = c0; c < c1; ++c) {
    const float* wa = panel_a + c * kPanelCols;
    const float* wb = panel_b + c * kPanelCols;
    float xv = x0[c];
    step16<kFma>(a0, xv, wa);
    step16<kFma>(b0, xv, wb);
    xv = x1[c];
    step16<kFma>(a1, xv, wa);
    step16<kFma>(b1, xv, wb);
    xv = x2[c];
    step16<kFma>(a2, xv, wa);
    step16<kFma>(b2, xv, wb);
    xv = x3[c];
    step16<kFma>(a3, xv, wa);
    step16<kFma>(b3, xv, wb);
    xv = x4[c];
    step16<kFma>(a4, xv, wa);
    step16<kFma>(b4, xv, wb);
    xv = x5[c];
    step16<kFma>(a5, xv, wa);
    step16<kFma>(b5, xv, wb);
    xv = x6[c];
    step16<kFma>(a6, xv, wa);
    step16<kFma>(b6, xv, wb);
    xv = x7[c];
    step16<kFma>(a7, xv, wa);
    step16<kFma>(b7, xv, wb);
  }
  const float* rows_a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  const float* rows_b[8] = {b0, b1, b2, b3, b4, b5, b6, b7};
  for (Index r = 0; r < nr; ++r) {
    for (int l = 0; l < 16; ++l) acc[r * width + l] = rows_a[r][l];
    for (int l = 0; l < 16; ++l) acc[r * width + kPanelCols + l] = rows_b[r][l];
  }
}

// 8 x 16 floats are 8 AVX-512 registers; with AVX2 they would be 16 of its 16 and spill, and
// the 8-row block is measured only with AVX-512 (docs/performance.md).
#if defined(__AVX512F__)
constexpr Index kBlockRows = 8;
#else
constexpr Index kBlockRows = 4;
#endif
// Rows whose activations stay in L2 while a panel is read for each of their blocks: 32 rows x
// k = 5,120 f32 are 640 KB, beside the panel's 320 KB, in a 2 MB L2.
constexpr Index kPanelRows = 32;

}  // namespace

void walk_rows_block(const KWalk& walk, const float* x, Index rows, const float* wt, Index k, Index width, float* out,
                     float* scratch, const float* start) {
  if (!walk.plain()) {
    staged_block(walk, x, rows, wt, k, width, true, out, start);
    return;
  }
  const Index parts = walk.parts;
  const Index len = k / parts;
  // Up to kPanelRows rows at a time; for each panel of 16 columns, every block of 8 of those
  // rows before the next panel, so the panel (k x 16 consecutive floats) is read from L2 after
  // its first block. Row-major weights (wt[c * width + j]) made each k step of a block load a
  // cache line 512 B from the last, from L3: 22 % of a 4-bit check's CPU stalled on those loads
  // (M 32, K 5120, N 16480), 9 % with panels. Every element's order is unchanged: bits equal
  // walk_dot's.
  const Index full = width - width % kPanelCols;
  for (Index q0 = 0; q0 < rows; q0 += kPanelRows) {
    const Index q1 = std::min<Index>(rows, q0 + kPanelRows);
    // Panels in pairs where two remain (part_8x32), else one.
    for (Index j0 = 0, cols = 0; j0 < full; j0 += cols) {
      cols = j0 + 2 * kPanelCols <= full ? 2 * kPanelCols : kPanelCols;
      const float* panel = wt + j0 * k;
      for (Index r0 = q0; r0 < q1; r0 += kBlockRows) {
        const Index nr = std::min<Index>(kBlockRows, q1 - r0);
        const float* xr = x + r0 * k;
        float* total = out + r0 * width + j0;
        float* part = scratch + r0 * width + j0;
        for (Index p = 0; p < parts; ++p) {
          // Part 0 goes straight into the total; each later part into scratch, then
          // total += part right away: total = ((p0 + p1) + p2) + ..., as the walk defines.
          float* acc = p == 0 ? total : part;
          const Index c0 = p * len, c1 = (p + 1) * len;
          if (nr > 4 && cols == 2 * kPanelCols) {
            (walk.fma ? part_8x32<true> : part_8x32<false>)(xr, nr, panel, panel + kPanelCols * k, k, width, c0, c1,
                                                            acc);
          } else {
            for (Index h = 0; h < cols; h += kPanelCols) {
              if (nr > 4) {
                (walk.fma ? part_8x16<true> : part_8x16<false>)(xr, nr, panel + h * k, k, width, c0, c1, acc + h);
              } else {
                (walk.fma ? part_4x16<true> : part_4x16<false>)(xr, nr, panel + h * k, k, width, c0, c1, acc + h);
              }
            }
          }
          if (p == 0 && start != nullptr) {
            for (Index r = 0; r < nr; ++r) {
              for (Index j = 0; j < cols; ++j) total[r * width + j] = total[r * width + j] + start[j0 + j];
            }
          }
          if (p > 0) {
            for (Index r = 0; r < nr; ++r) {
              for (Index j = 0; j < cols; ++j) total[r * width + j] = total[r * width + j] + part[r * width + j];
            }
          }
        }
      }
    }
    if (full == width) continue;
    // The last panel, narrower than 16 columns: the plain loop, same per-column order.
    const Index tw = width - full;
    const float* panel = wt + full * k;
    for (Index r = q0; r < q1; ++r) {
      const float* xr = x + r * k;
      float* total = out + r * width + full;
      float* part = scratch + r * width + full;
      for (Index p = 0; p < parts; ++p) {
        float* acc = p == 0 ? total : part;
        for (Index j = 0; j < tw; ++j) acc[j] = 0.0f;
        for (Index c = p * len; c < (p + 1) * len; ++c) {
          const float xv = xr[c];
          const float* w = panel + c * tw;
          for (Index j = 0; j < tw; ++j) acc[j] = walk.fma ? std::fma(xv, w[j], acc[j]) : acc[j] + xv * w[j];
        }
        if (p == 0 && start != nullptr) {
          for (Index j = 0; j < tw; ++j) total[j] = total[j] + start[full + j];
        }
        if (p > 0) {
          for (Index j = 0; j < tw; ++j) total[j] = total[j] + part[j];
        }
      }
    }
  }
}

float round_to_output(float v, DType output, OutputRounding rounding) {
  return round_to_type(v, output, rounding == OutputRounding::kTowardZero);
}

float epilogue_value(float acc, float bias, float residual, const ProjectionArithmetic& a) {
  float v = acc;
  if (has_bias(a.epilogue) && !bias_in_sum(a)) v = v + bias;
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kF32) v = v + residual;
  float out = round_to_output(v, a.output, a.output_rounding);
  if (has_residual(a.epilogue) && a.residual_at == ResidualAt::kOutput) {
    out = round_to_output(out + residual, a.output, a.output_rounding);
  }
  return out;
}

}  // namespace ncert::reference
