// The k_walk grammar and its emulation (reference/linear_spec.h, reference/k_walk.h):
//  - every accepted form parses to its description, every malformed one is k-walk-invalid;
//  - lanes, splitk and promote equal slow oracles written here from docs/dump-format.md §3.4:
//    recursive trees over materialized lanes, and for promote exact integer arithmetic (values
//    as 128-bit multiples of 2^scale, rounded to p bits by integer shifts: no floating point);
//  - split:<P>[:fma] is bit-identical to splitk:<P>:seq/seq[-fma], and promote at p = 24 with
//    rne to the hardware's f32 walks;
//  - the blocked paths (walk_row_block, walk_rows_block through compute_reference) equal
//    walk_dot for every form;
//  - the bound of a promoted walk holds a correct promoted kernel that the f32 bound refuses.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/bounds.h"
#include "reference/k_walk.h"
#include "reference/linear.h"
#include "reference/linear_spec.h"
#include "tests/common/linear_fixture.h"

namespace ncert::reference {
namespace {

__extension__ typedef __int128 I128;  // GCC and clang; -Wpedantic wants the marker

std::uint32_t f32_bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// ---- parsing ----------------------------------------------------------------------------------

TEST(KWalkParse, EveryAcceptedFormHasItsDescription) {
  auto w = parse_k_walk("lanes:8:halving");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->inner, KWalkInner::kLanes);
  EXPECT_EQ(w->lanes, 8);
  EXPECT_EQ(w->lane_tree, KWalkTree::kHalving);
  EXPECT_FALSE(w->fma);
  EXPECT_EQ(w->parts, 1);
  EXPECT_EQ(w->name, "lanes:8:halving");
  w = parse_k_walk("lanes:6:seq:fma");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->lanes, 6);
  EXPECT_EQ(w->lane_tree, KWalkTree::kSeq);
  EXPECT_TRUE(w->fma);
  w = parse_k_walk("lanes:16:pairs");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->lane_tree, KWalkTree::kPairs);
  w = parse_k_walk("promote:128:14:rz");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->inner, KWalkInner::kPromote);
  EXPECT_EQ(w->promote_block, 128);
  EXPECT_EQ(w->promote_bits, 14);
  EXPECT_EQ(w->promote_rounding, PromoteRounding::kTowardZero);
  EXPECT_FALSE(w->fma);
  EXPECT_EQ(w->promote_unit(), 0x1p-13);
  w = parse_k_walk("promote:4:24:rne:fma");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->promote_rounding, PromoteRounding::kNearestEven);
  EXPECT_TRUE(w->fma);
  EXPECT_EQ(w->promote_unit(), 0x1p-24);
  w = parse_k_walk("splitk:4:halving/lanes:8:pairs:fma");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->parts, 4);
  EXPECT_EQ(w->combine, KWalkTree::kHalving);
  EXPECT_EQ(w->inner, KWalkInner::kLanes);
  EXPECT_EQ(w->lanes, 8);
  EXPECT_EQ(w->lane_tree, KWalkTree::kPairs);
  EXPECT_TRUE(w->fma);
  EXPECT_FALSE(w->plain());
  w = parse_k_walk("splitk:3:seq/seq-fma");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->parts, 3);
  EXPECT_TRUE(w->fma);
  EXPECT_TRUE(w->plain());
  w = parse_k_walk("splitk:08:pairs/promote:32:8:rne");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->parts, 8);
  EXPECT_EQ(w->combine, KWalkTree::kPairs);
  EXPECT_EQ(w->promote_bits, 8);
  // The existing forms keep their meaning.
  w = parse_k_walk("split:5:fma");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->parts, 5);
  EXPECT_TRUE(w->fma);
  EXPECT_TRUE(w->plain());
  EXPECT_TRUE(parse_k_walk("seq")->plain());
  EXPECT_TRUE(parse_k_walk("seq-fma")->fma);
  EXPECT_EQ(parse_k_walk("split:008")->parts, 8);
}

TEST(KWalkParse, MalformedFormsAreKWalkInvalidListingTheForms) {
  for (const char* s : {"lanes:1:seq",
                        "lanes:0:seq",
                        "lanes:6:halving",
                        "lanes:12:pairs",
                        "lanes:8",
                        "lanes:8:tree",
                        "lanes:8:seq:",
                        "lanes:8:seq:fma:x",
                        "lanes:+8:seq",
                        "lanes:-8:seq",
                        "lanes: 8:seq",
                        "promote:0:14:rz",
                        "promote:128:7:rz",
                        "promote:128:25:rne",
                        "promote:128:14",
                        "promote:128:14:rd",
                        "promote:128:14:rz:fma:x",
                        "promote:128:14:rz:",
                        "splitk:0:seq/seq",
                        "splitk:3:halving/seq",
                        "splitk:6:pairs/seq",
                        "splitk:4:seq",
                        "splitk:4/seq",
                        "splitk:4:seq/split:2",
                        "splitk:4:seq/splitk:2:seq/seq",
                        "splitk:4:seq/",
                        "splitk:4:seq/lanes:3:pairs",
                        "splitk:4:halving:fma/seq",
                        "lanes:8:butterfly(4,1)",
                        "lanes:8:butterfly(4,1,2,2)",
                        "lanes:8:butterfly(4,1,3)",
                        "lanes:8:butterfly(8,4,1,2)",
                        "lanes:6:butterfly(4,1,2)",
                        "lanes:8:butterfly()",
                        "lanes:8:butterfly(4,1,2",
                        "lanes:8:butterfly(4, 1, 2)",
                        "splitk:3:butterfly(1,2)/seq",
                        "lanes:16:groups(1,seq,seq)",
                        "lanes:16:groups(3,seq,seq)",
                        "lanes:16:groups(4,seq)",
                        "lanes:16:groups(4,butterfly(1,2),seq)",
                        "lanes:12:groups(4,seq,halving)",
                        "lanes:131072:groups(4,seq,seq)",
                        "splitk:4:groups(2,seq,seq)/seq",
                        "split:0",
                        "split:4:x",
                        "SEQ",
                        "lanes",
                        "promote",
                        "splitk:",
                        ""}) {
    SCOPED_TRACE(s);
    const auto w = parse_k_walk(s);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code(), ErrorCode::kKWalkInvalid);
    EXPECT_EQ(w.status().message(), "k_walk \"" + std::string(s) + "\" is not one of " + std::string(kKWalkForms));
  }
}

// ---- oracles ----------------------------------------------------------------------------------

// An exact value x * 2^scale held as a 128-bit integer x.
struct Exact {
  int scale = 0;

  I128 of_float(float f) const {
    if (f == 0) return 0;
    int e = 0;
    const float m = std::frexp(std::fabs(f), &e);  // exact: |f| = m 2^e, m in [0.5, 1)
    const auto mant = static_cast<I128>(std::ldexp(m, 24));
    const int shift = e - 24 - scale;
    EXPECT_GE(shift, 0) << "scale too coarse for " << f;
    const I128 v = mant << shift;
    return f < 0 ? -v : v;
  }
  I128 product(float x, float w) const {
    if (x == 0 || w == 0) return 0;
    int ex = 0, ew = 0;
    const auto mx = static_cast<I128>(std::ldexp(std::frexp(std::fabs(x), &ex), 24));
    const auto mw = static_cast<I128>(std::ldexp(std::frexp(std::fabs(w), &ew), 24));
    const int shift = ex + ew - 48 - scale;
    EXPECT_GE(shift, 0) << "scale too coarse for " << x << " * " << w;
    const I128 v = (mx * mw) << shift;
    return (x < 0) != (w < 0) ? -v : v;
  }
  /// v rounded to `bits` significand bits on f32's exponent range (quantum 2^(max(e, -126) + 1 -
  /// bits) in the binade [2^e, 2^(e+1))), by integer shifts.
  I128 round(I128 v, int bits, bool rz) const {
    if (v == 0) return 0;
    const I128 a = v < 0 ? -v : v;
    int top = 0;
    while ((a >> (top + 1)) != 0) ++top;
    const int e = top + scale;
    const int shift = std::max(e, -126) + 1 - bits - scale;
    if (shift <= 0) return v;
    I128 keep = a >> shift;
    const I128 rem = a - (keep << shift);
    const I128 half = I128{1} << (shift - 1);
    if (!rz && (rem > half || (rem == half && (keep & 1) != 0))) ++keep;
    const I128 r = keep << shift;
    return v < 0 ? -r : r;
  }
  float to_float(I128 v) const {
    // Callers pass p-bit values (p <= 24): the conversion to double is exact.
    return static_cast<float>(std::ldexp(static_cast<double>(v), scale));
  }
};

/// promote:<P>:<p>:<rnd>[:fma], from the spec text, in exact integers.
float promote_oracle(const Exact& ex, const float* x, const float* w, Index k, Index block, int bits, bool rz,
                     bool fma) {
  I128 total = 0;
  for (Index b0 = 0; b0 < k; b0 += block) {
    I128 acc = 0;
    for (Index c = b0; c < std::min(k, b0 + block); ++c) {
      const I128 p = ex.product(x[c], w[c]);
      acc = fma ? ex.round(p + acc, bits, rz) : ex.round(ex.round(p, bits, rz) + acc, bits, rz);
    }
    total = b0 == 0 ? acc : ex.round(total + acc, 24, false);  // f32: 24 bits, to nearest even
  }
  return ex.to_float(total);
}

float tree_oracle(KWalkTree tree, const std::vector<Index>& distances, std::vector<float> v) {
  if (v.size() == 1) return v[0];
  std::vector<float> next(v.size() / 2);
  switch (tree) {
    case KWalkTree::kButterfly: {  // a shuffle per distance: lane i takes its xor-partner's value
      for (Index d : distances) {
        std::vector<float> shuffled = v;
        for (std::size_t i = 0; i < v.size(); ++i) {
          const std::size_t partner = i ^ static_cast<std::size_t>(d);
          if (partner < v.size()) shuffled[i] = v[partner];
        }
        for (std::size_t i = 0; i < v.size(); ++i) {
          if ((i & static_cast<std::size_t>(d)) == 0) v[i] = v[i] + shuffled[i];
        }
      }
      return v[0];
    }
    case KWalkTree::kSeq: {
      float t = v[0];
      for (std::size_t i = 1; i < v.size(); ++i) t = t + v[i];
      return t;
    }
    case KWalkTree::kHalving:  // the upper half folded onto the lower
      for (std::size_t i = 0; i < next.size(); ++i) next[i] = v[i] + v[i + next.size()];
      break;
    case KWalkTree::kGroups:  // written out in GroupsAreMlasFoldAccumulatorsBitForBit instead
      ADD_FAILURE() << "no groups oracle here";
      return v[0];
    case KWalkTree::kPairs:  // adjacent pairs
      for (std::size_t i = 0; i < next.size(); ++i) next[i] = v[2 * i] + v[2 * i + 1];
      break;
  }
  return tree_oracle(tree, distances, next);
}

/// lanes:<L>:<tree>[:fma]: every lane materialized, even beyond K.
float lanes_oracle(const float* x, const float* w, Index k, Index lanes, KWalkTree tree,
                   const std::vector<Index>& distances, bool fma) {
  std::vector<float> lane(static_cast<std::size_t>(lanes), 0.0f);
  for (Index c = 0; c < k; ++c) {
    float& a = lane[static_cast<std::size_t>(c % lanes)];
    if (fma) {
      a = std::fma(x[c], w[c], a);
    } else {
      const float product = x[c] * w[c];
      a = a + product;
    }
  }
  return tree_oracle(tree, distances, lane);
}

/// Any walk: its parts by the matching oracle, then the combine tree.
float walk_oracle(const KWalk& kw, const Exact& ex, const float* x, const float* w, Index k) {
  const Index len = k / kw.parts;
  std::vector<float> sums;
  for (Index p = 0; p < kw.parts; ++p) {
    const float* xp = x + p * len;
    const float* wp = w + p * len;
    if (kw.inner == KWalkInner::kPromote) {
      sums.push_back(promote_oracle(ex, xp, wp, len, kw.promote_block, kw.promote_bits,
                                    kw.promote_rounding == PromoteRounding::kTowardZero, kw.fma));
    } else {
      sums.push_back(lanes_oracle(xp, wp, len, kw.inner == KWalkInner::kLanes ? kw.lanes : 1, kw.lane_tree,
                                  kw.lane_distances, kw.fma));
    }
  }
  return tree_oracle(kw.combine, kw.combine_distances, sums);
}

/// A float with a random 24-bit significand, sign and exponent in [lo, hi].
float random_float(std::mt19937_64& rng, int lo, int hi) {
  std::uniform_int_distribution<std::uint32_t> mant(1u << 23, (1u << 24) - 1);
  std::uniform_int_distribution<int> expo(lo, hi);
  std::bernoulli_distribution neg(0.5);
  const float v = std::ldexp(static_cast<float>(mant(rng)), expo(rng) - 23);
  return neg(rng) ? -v : v;
}

// ---- emulation against the oracles ------------------------------------------------------------

TEST(KWalkEmulation, PromoteEqualsExactIntegerOracleOnRandomData) {
  std::mt19937_64 rng(19);
  const Exact ex{-66};  // exponents in [-10, 10]: products are multiples of 2^-66 below 2^22
  const std::vector<Index> blocks = {1, 3, 16, 128, 1000};
  const std::vector<int> bits = {8, 11, 14, 19, 24};
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Index k = std::uniform_int_distribution<Index>(1, 300)(rng);
    std::vector<float> x(static_cast<std::size_t>(k)), w(x.size());
    const bool positive = trial % 4 == 0;  // no cancellation: long carries, biased truncation
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = random_float(rng, -10, 10);
      w[i] = random_float(rng, -10, 10);
      if (positive) {
        x[i] = std::fabs(x[i]);
        w[i] = std::fabs(w[i]);
      }
    }
    const Index block = blocks[static_cast<std::size_t>(trial) % blocks.size()];
    const int p = bits[static_cast<std::size_t>(trial / 5) % bits.size()];
    for (const char* rnd : {"rne", "rz"}) {
      for (const char* fma : {"", ":fma"}) {
        const std::string name = "promote:" + std::to_string(block) + ":" + std::to_string(p) + ":" + rnd + fma;
        SCOPED_TRACE(name + " K=" + std::to_string(k));
        const KWalk kw = *parse_k_walk(name);
        ASSERT_EQ(f32_bits(walk_dot(kw, x.data(), w.data(), k)), f32_bits(walk_oracle(kw, ex, x.data(), w.data(), k)));
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 1600);
}

TEST(KWalkEmulation, PromoteEdgeCasesEqualTheOracle) {
  struct Case {
    std::string walk;
    std::vector<float> x, w;
    float expected;  ///< worked by hand
  };
  const float tie8 = 1.0f + 0x1p-8f;  // halfway between 1 and 1 + 2^-7 at 8 bits
  const std::vector<Case> cases = {
      // A product at a tie rounds to even (1), and 1 + 3 2^-8 rounds up to the even 1 + 2^-6.
      {"promote:8:8:rne", {tie8}, {1.0f}, 1.0f},
      {"promote:8:8:rne", {1.0f + 0x3p-8f}, {1.0f}, 1.0f + 0x1p-6f},
      {"promote:8:8:rne", {-tie8}, {1.0f}, -1.0f},
      // A carry into the next binade: 2 - 2^-8 at 8 bits is 2 (rne) or 2 - 2^-7 (rz).
      {"promote:8:8:rne", {2.0f - 0x1p-8f}, {1.0f}, 2.0f},
      {"promote:8:8:rz", {2.0f - 0x1p-8f}, {1.0f}, 2.0f - 0x1p-7f},
      {"promote:8:8:rz", {-(2.0f - 0x1p-8f)}, {1.0f}, -(2.0f - 0x1p-7f)},
      // Just below a power of two: rz steps down by the smaller binade's spacing (2^-8, not 2^-7),
      // fused or not (the product -2^-30 is exact at 8 bits, the sum is not).
      {"promote:8:8:rz:fma", {1.0f, -0x1p-30f}, {1.0f, 1.0f}, 1.0f - 0x1p-8f},
      {"promote:8:8:rz", {1.0f, -0x1p-30f}, {1.0f, 1.0f}, 1.0f - 0x1p-8f},
      // Ties at every step go to even: 1 + 2^-8 -> 1, then 1 + 2^-30 -> 1.
      {"promote:8:8:rne:fma", {1.0f, 0x1p-8f, 0x1p-30f}, {1.0f, 1.0f, 1.0f}, 1.0f},
      // The tie broken by the accumulator: 2^-30 + (1 + 2^-8) rounds up at 8 bits only when fused.
      {"promote:8:8:rne:fma", {0x1p-30f, 1.0f + 0x1p-8f}, {1.0f, 1.0f}, 1.0f + 0x1p-7f},
      {"promote:8:8:rne", {0x1p-30f, 1.0f + 0x1p-8f}, {1.0f, 1.0f}, 1.0f},
      // ... and by a part the f64 sum itself loses (2^-60 below half an f64 ulp of 1): TwoSum's
      // low part decides the tie, and the rz step below a power of two.
      {"promote:8:8:rne:fma", {0x1p-60f, 1.0f + 0x1p-8f}, {1.0f, 1.0f}, 1.0f + 0x1p-7f},
      {"promote:8:8:rne:fma", {-0x1p-60f, 1.0f + 0x1p-8f}, {1.0f, 1.0f}, 1.0f},
      {"promote:8:8:rz:fma", {-0x1p-60f, 1.0f}, {1.0f, 1.0f}, 1.0f - 0x1p-8f},
      {"promote:8:8:rz:fma", {0x1p-60f, -1.0f}, {1.0f, 1.0f}, -(1.0f - 0x1p-8f)},
      // Zeros and exact cancellation: +0.
      {"promote:4:12:rz", {0.0f, -0.0f, 3.0f, -3.0f}, {-1.0f, 2.0f, 1.0f, 1.0f}, 0.0f},
      // Blocks: each block rounds at p bits, the blocks add in f32.
      {"promote:1:8:rz", {1.0f, 0x1p-20f}, {1.0f, 1.0f}, 1.0f + 0x1p-20f},
      {"promote:2:8:rz", {1.0f, 0x1p-20f}, {1.0f, 1.0f}, 1.0f},
  };
  const Exact ex{-120};  // 2^-60 times 1 has its lowest significand bit at 2^-107
  for (const Case& c : cases) {
    SCOPED_TRACE(c.walk + " x0 = " + std::to_string(c.x[0]));
    const KWalk kw = *parse_k_walk(c.walk);
    const auto k = static_cast<Index>(c.x.size());
    EXPECT_EQ(f32_bits(walk_dot(kw, c.x.data(), c.w.data(), k)), f32_bits(c.expected));
    EXPECT_EQ(walk_oracle(kw, ex, c.x.data(), c.w.data(), k), c.expected);
  }
}

TEST(KWalkEmulation, PromoteWithSubnormalInputsEqualsTheOracle) {
  // Subnormal x (2^-149 .. 2^-127) times w in [2^-3, 2^3]: sums near and below 2^-126, where the
  // p-bit grid keeps the lowest normal binade's quantum 2^(-125 - p).
  std::mt19937_64 rng(7);
  const Exact ex{-200};  // 24-bit significands: 2^-149 has its lowest at 2^-172, times w at 2^-198
  std::uniform_int_distribution<std::uint32_t> sub(1, (1u << 23) - 1);
  for (int trial = 0; trial < 200; ++trial) {
    const Index k = std::uniform_int_distribution<Index>(1, 64)(rng);
    std::vector<float> x(static_cast<std::size_t>(k)), w(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = std::bit_cast<float>(sub(rng) | (trial % 2 == 0 && i % 3 == 0 ? 0x80000000u : 0u));
      w[i] = random_float(rng, -3, 3);
    }
    for (const char* name :
         {"promote:5:8:rz", "promote:5:8:rne:fma", "promote:64:13:rne", "promote:3:24:rz:fma", "promote:7:24:rne"}) {
      SCOPED_TRACE(std::string(name) + " trial " + std::to_string(trial));
      const KWalk kw = *parse_k_walk(name);
      ASSERT_EQ(f32_bits(walk_dot(kw, x.data(), w.data(), k)), f32_bits(walk_oracle(kw, ex, x.data(), w.data(), k)));
    }
  }
}

TEST(KWalkEmulation, PromoteAt24BitsRneIsTheHardwareSplitWalk) {
  // p = 24 with rne is f32 itself: blocks of P are split:K/P parts, bit for bit (fused or not).
  std::mt19937_64 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(4096), w(4096);
  for (auto& v : x) v = n(rng);
  for (auto& v : w) v = n(rng) * 1e-30f;  // products near 2^-100: some partial sums subnormal-free
  for (Index block : {1, 16, 128, 4096}) {
    const std::string p = std::to_string(block), parts = std::to_string(4096 / block);
    EXPECT_EQ(f32_bits(walk_dot(*parse_k_walk("promote:" + p + ":24:rne"), x.data(), w.data(), 4096)),
              f32_bits(walk_dot(*parse_k_walk("split:" + parts), x.data(), w.data(), 4096)))
        << block;
    EXPECT_EQ(f32_bits(walk_dot(*parse_k_walk("promote:" + p + ":24:rne:fma"), x.data(), w.data(), 4096)),
              f32_bits(walk_dot(*parse_k_walk("split:" + parts + ":fma"), x.data(), w.data(), 4096)))
        << block;
  }
}

TEST(KWalkEmulation, LanesAndSplitKEqualTheirOracles) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const Exact ex{-80};
  struct Case {
    std::string walk;
    Index k;
  };
  const std::vector<Case> cases = {
      {"lanes:8:halving", 256},
      {"lanes:8:halving", 253},  // a masked tail
      {"lanes:16:pairs:fma", 100},
      {"lanes:6:seq", 77},
      {"lanes:3:seq:fma", 2},
      {"lanes:1024:halving", 100},
      {"lanes:1048576:pairs", 5},  // L beyond K: zero lanes
      {"lanes:64:seq", 10},
      {"lanes:2:pairs", 1},
      {"splitk:4:halving/seq", 256},
      {"splitk:8:pairs/seq-fma", 512},
      {"splitk:3:seq/lanes:8:halving:fma", 300},
      {"splitk:4:pairs/promote:16:11:rz", 256},
      {"splitk:2:halving/promote:100:9:rne:fma", 300},
      {"splitk:1:halving/lanes:4:pairs", 9},
      {"lanes:8:butterfly(4,1,2):fma", 256},  // AVX2: fold the upper 128 bits, then hadd twice
      {"lanes:8:butterfly(4,1,2):fma", 253},
      {"lanes:4:butterfly(1,2)", 40},               // SSE haddps twice
      {"lanes:32:butterfly(4,8,16,1,2):fma", 512},  // four 8-lane accumulators, then the fold
      {"lanes:32:butterfly(4,8,16,1,2):fma", 7},    // L beyond K: the distances above 8 drop
      {"splitk:4:butterfly(2,1)/seq-fma", 256},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.walk + " K=" + std::to_string(c.k));
    const KWalk kw = *parse_k_walk(c.walk);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(c.k)), w(x.size());
      for (auto& v : x) v = reference::round_to_bf16(n(rng));  // bf16 x bf16: exact in Exact{-80}
      for (auto& v : w) v = reference::round_to_bf16(n(rng));
      ASSERT_EQ(f32_bits(walk_dot(kw, x.data(), w.data(), c.k)),
                f32_bits(walk_oracle(kw, ex, x.data(), w.data(), c.k)));
    }
  }
}

TEST(KWalkEmulation, GroupsAreMlasFoldAccumulatorsBitForBit) {
  // MLAS's one-row 4-bit kernel (AVX-512): 16 FMA lanes, term k in lane k mod 16, then
  // FoldAccumulators: each 128-bit quarter's 4 lanes summed in order, then (Q0 + Q2) + (Q1 + Q3).
  // Written here from that description; and its AVX2 twin, 8 lanes, each half in order, added.
  auto parsed = parse_k_walk("lanes:16:groups(4,seq,halving):fma");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->lane_tree, KWalkTree::kGroups);
  EXPECT_EQ(parsed->lane_group, 4);
  EXPECT_EQ(parsed->lane_group_inner, KWalkTree::kSeq);
  EXPECT_EQ(parsed->lane_group_outer, KWalkTree::kHalving);
  const KWalk avx512 = *parsed;
  const KWalk avx2 = *parse_k_walk("lanes:8:groups(4,seq,seq):fma");
  std::mt19937_64 rng(21);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Index differ = 0;
  for (const Index k : {Index{768}, Index{1152}, Index{100}, Index{5}}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(k)), w(x.size());
      for (auto& v : x) v = n(rng);
      for (auto& v : w) v = n(rng);
      float lane16[16] = {}, lane8[8] = {};
      for (Index c = 0; c < k; ++c) {
        lane16[c % 16] = std::fma(x[c], w[c], lane16[c % 16]);
        lane8[c % 8] = std::fma(x[c], w[c], lane8[c % 8]);
      }
      float q[4];
      for (std::size_t i = 0; i < 4; ++i)
        q[i] = ((lane16[4 * i] + lane16[4 * i + 1]) + lane16[4 * i + 2]) + lane16[4 * i + 3];
      const float fold16 = (q[0] + q[2]) + (q[1] + q[3]);
      const float fold8 =
          (((lane8[0] + lane8[1]) + lane8[2]) + lane8[3]) + (((lane8[4] + lane8[5]) + lane8[6]) + lane8[7]);
      ASSERT_EQ(f32_bits(walk_dot(avx512, x.data(), w.data(), k)), f32_bits(fold16)) << k;
      ASSERT_EQ(f32_bits(walk_dot(avx2, x.data(), w.data(), k)), f32_bits(fold8)) << k;
      differ += f32_bits(walk_dot(*parse_k_walk("lanes:16:halving:fma"), x.data(), w.data(), k)) != f32_bits(fold16);
    }
  }
  EXPECT_GT(differ, 0);  // not halving by another name
}

/// lanes:<L>:groups(g,inner,outer)[:fma] with every lane materialized, even beyond K: each run of
/// g lanes by `inner`, then the L / g sums by `outer` (docs/dump-format.md §3.4).
float groups_oracle(const KWalk& kw, const float* x, const float* w, Index k) {
  std::vector<float> lane(static_cast<std::size_t>(kw.lanes), 0.0f);
  for (Index c = 0; c < k; ++c) {
    float& a = lane[static_cast<std::size_t>(c % kw.lanes)];
    a = kw.fma ? std::fma(x[c], w[c], a) : a + x[c] * w[c];
  }
  std::vector<float> sums;
  for (Index j = 0; j < kw.lanes; j += kw.lane_group) {
    sums.push_back(
        tree_oracle(kw.lane_group_inner, {}, std::vector<float>(lane.begin() + j, lane.begin() + j + kw.lane_group)));
  }
  return tree_oracle(kw.lane_group_outer, {}, sums);
}

TEST(KWalkEmulation, GroupsBeyondKEqualEveryLaneMaterialized) {
  // Only the groups K reaches are reduced, the last cut to its inner tree's lanes: the same bits
  // as every lane added. A reviewer's lanes:65536:groups(65536,seq,seq) at K 16 once reduced
  // 65,536 lanes per value (a 2.6 MB dump ran beyond 60 s).
  std::mt19937_64 rng(23);
  std::normal_distribution<float> n(0.0f, 1.0f);
  struct Case {
    std::string walk;
    Index k;
  };
  const std::vector<Case> cases = {
      {"lanes:64:groups(16,halving,pairs)", 20},   {"lanes:64:groups(16,halving,pairs)", 37},
      {"lanes:64:groups(16,halving,pairs)", 64},   {"lanes:64:groups(16,halving,pairs)", 100},
      {"lanes:32:groups(4,pairs,halving):fma", 5}, {"lanes:32:groups(4,pairs,halving):fma", 9},
      {"lanes:16:groups(2,seq,seq)", 3},           {"lanes:48:groups(16,seq,seq):fma", 33},
      {"lanes:65536:groups(65536,seq,seq)", 16},   {"lanes:65536:groups(16,halving,halving):fma", 40},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.walk + " K=" + std::to_string(c.k));
    const KWalk kw = *parse_k_walk(c.walk);
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(c.k)), w(x.size());
      for (auto& v : x) v = n(rng);
      for (auto& v : w) v = n(rng);
      ASSERT_EQ(f32_bits(walk_dot(kw, x.data(), w.data(), c.k)), f32_bits(groups_oracle(kw, x.data(), w.data(), c.k)));
    }
  }
}

TEST(KWalkEmulation, FusedLanesRoundingToMinusZeroBesideEmptyLanesSumToPlusZero) {
  // fma(1e-30, -1e-20, +0) rounds -1e-50 to -0: each lane holding a term is -0, the lanes K
  // never reaches +0, and the tree over all L lanes gives +0 (a sum is -0 only where both are).
  // Found by a reviewer: lanes:8:halving:fma at K 4 gave 0x80000000 against the kernel's +0.
  const std::vector<float> x(4, 1e-30f), w(4, -1e-20f);
  for (const char* walk : {"lanes:8:halving:fma", "lanes:16:seq:fma", "lanes:8:groups(2,seq,seq):fma",
                           "lanes:8:butterfly(4,1,2):fma", "lanes:64:groups(16,halving,pairs):fma"}) {
    SCOPED_TRACE(walk);
    const KWalk kw = *parse_k_walk(walk);
    const float oracle = kw.lane_tree == KWalkTree::kGroups
                             ? groups_oracle(kw, x.data(), w.data(), 4)
                             : lanes_oracle(x.data(), w.data(), 4, kw.lanes, kw.lane_tree, kw.lane_distances, true);
    EXPECT_EQ(f32_bits(oracle), 0u);
    EXPECT_EQ(f32_bits(walk_dot(kw, x.data(), w.data(), 4)), 0u);
  }
  // Every lane holding a term: the -0 stays.
  const KWalk four = *parse_k_walk("lanes:4:halving:fma");
  EXPECT_EQ(f32_bits(walk_dot(four, x.data(), w.data(), 4)), 0x80000000u);
}

TEST(KWalkEmulation, ButterfliesInOrderAreHalvingAndPairsBitForBit) {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(1000), w(1000);
  for (int trial = 0; trial < 50; ++trial) {
    for (auto& v : x) v = n(rng);
    for (auto& v : w) v = n(rng);
    for (const auto& [butterfly, named] : {std::pair{"lanes:16:butterfly(8,4,2,1):fma", "lanes:16:halving:fma"},
                                           std::pair{"lanes:16:butterfly(1,2,4,8):fma", "lanes:16:pairs:fma"}}) {
      EXPECT_EQ(f32_bits(walk_dot(*parse_k_walk(butterfly), x.data(), w.data(), 1000)),
                f32_bits(walk_dot(*parse_k_walk(named), x.data(), w.data(), 1000)))
          << butterfly;
    }
  }
  const auto w8 = parse_k_walk("lanes:8:butterfly(4,1,2):fma");
  ASSERT_TRUE(w8.ok());
  EXPECT_EQ(w8->lane_tree, KWalkTree::kButterfly);
  EXPECT_EQ(w8->lane_distances, (std::vector<Index>{4, 1, 2}));
}

TEST(KWalkEmulation, SplitIsSplitKWithSeqCombineBitForBit) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(4096), w(4096);
  for (int trial = 0; trial < 20; ++trial) {
    for (auto& v : x) v = n(rng);
    for (auto& v : w) v = n(rng);
    for (Index parts : {1, 2, 8, 64, 4096}) {
      const std::string p = std::to_string(parts);
      const KWalk split = *parse_k_walk("split:" + p), splitk = *parse_k_walk("splitk:" + p + ":seq/seq");
      const KWalk split_fma = *parse_k_walk("split:" + p + ":fma"),
                  splitk_fma = *parse_k_walk("splitk:" + p + ":seq/seq-fma");
      EXPECT_EQ(split.parts, splitk.parts);
      EXPECT_EQ(split.fma, splitk.fma);
      EXPECT_EQ(split.combine, splitk.combine);
      EXPECT_EQ(split.inner, splitk.inner);
      EXPECT_EQ(f32_bits(walk_dot(split, x.data(), w.data(), 4096)),
                f32_bits(walk_dot(splitk, x.data(), w.data(), 4096)));
      EXPECT_EQ(f32_bits(walk_dot(split_fma, x.data(), w.data(), 4096)),
                f32_bits(walk_dot(splitk_fma, x.data(), w.data(), 4096)));
      EXPECT_EQ(f32_bits(walk_dot(splitk, x.data(), w.data(), 4096)),
                f32_bits(walk_oracle(splitk, Exact{}, x.data(), w.data(), 4096)));
    }
  }
}

/// compute_reference's walk (blocks of `block_cols`) and walk_row_block, for every row and
/// column of a 96-deep problem, against walk_dot: bit for bit. `bias_start`: with a bias the
/// output holds before the kernel adds into it (bias_at = start), which the walk takes.
void expect_blocked_paths_equal_walk_dot(const char* name, Index m, Index block_cols, bool bias_start) {
  SCOPED_TRACE(std::string(name) + ", " + std::to_string(m) + " rows, blocks of " + std::to_string(block_cols) +
               (bias_start ? ", bias at the start" : ""));
  testing::ProblemOptions o;
  o.m = m;
  o.k = 96;
  o.x_dtype = DType::kF32;
  o.walk = name;
  if (bias_start) {
    o.epilogue = reference::Epilogue::kBias;
    o.bias_at = reference::BiasAt::kStart;
  }
  o.segments = {{WeightFormat::kF32, 93, {}}};  // 93 columns: a block of 56 and one of 37
  auto p = testing::make_problem(o);
  ReferenceOptions ro;
  ro.block_cols = block_cols;
  auto r = compute_reference(p->problem, ro);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const KWalk& kw = p->problem.walk;
  const Index n = p->weights.n;
  std::vector<float> wt(static_cast<std::size_t>(o.k * n));
  for (Index j = 0; j < n; ++j) {
    for (Index c = 0; c < o.k; ++c) wt[static_cast<std::size_t>(c * n + j)] = p->f32_store[0][j * o.k + c];
  }
  const float* start = bias_start ? p->bias.data() : nullptr;
  std::vector<float> row(static_cast<std::size_t>(n)), scratch(row.size());
  for (Index i = 0; i < p->m; ++i) {
    const float* x = p->x_values.data() + i * o.k;
    walk_row_block(kw, x, wt.data(), o.k, n, row.data(), scratch.data(), start);
    for (Index j = 0; j < n; ++j) {
      const float want = walk_dot(kw, x, p->f32_store[0].data() + j * o.k, o.k, start ? start + j : nullptr);
      // The reference's walk is the stored f32 output; with the bias in the sum the epilogue
      // adds it no more.
      ASSERT_EQ(f32_bits(r->walk[r->at(i, j)]), f32_bits(want)) << i << "," << j;
      ASSERT_EQ(f32_bits(row[static_cast<std::size_t>(j)]), f32_bits(want)) << i << "," << j;
    }
  }
}

TEST(KWalkEmulation, BlockedPathsEqualWalkDotForEveryForm) {
  for (const char* name :
       {"seq", "split:4:fma", "lanes:8:halving", "lanes:5:seq:fma", "splitk:4:pairs/seq",
        "splitk:2:halving/lanes:4:pairs:fma", "promote:16:12:rz", "promote:32:9:rne:fma",
        "splitk:4:seq/promote:8:14:rne", "lanes:8:butterfly(4,1,2):fma", "lanes:16:groups(4,seq,halving):fma"}) {
    // Register blocks of 4 and 8 rows (AVX-512), 8 rows and a 3-row tail; 37 rows cross a panel
    // of 32 rows (walk_rows_block reads each weight panel for 32 rows at a time).
    // Blocks of 20 columns: one 16-column weight panel and a narrower one of 4 columns, then a
    // last block of 13 (no full panel); of 56: a pair of panels (part_8x32), a single one and 8
    // columns, then 37: a pair and 5.
    for (const auto& [m, block_cols] :
         {std::pair<Index, Index>{3, 20}, {6, 20}, {11, 20}, {37, 20}, {6, 56}, {11, 56}, {37, 56}}) {
      expect_blocked_paths_equal_walk_dot(name, m, block_cols, false);
    }
  }
}

TEST(KWalkEmulation, ABiasTheOutputStartsFromJoinsPartZeroUnderASeqCombine) {
  // bias_at = start (k_walk.h): the output holds the bias and the kernel adds each part's sum
  // into it, as MLAS adds its K blocks of 256 into a Gemm's Y: total = fl32(p_0 + b), then + p_i.
  // The oracle sums each part itself; for a walk of one part, or parts combined by a tree
  // other than seq, the bias is added once to the result (bias_at = end's value).
  std::mt19937_64 rng(29);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const Index k = 768;
  std::vector<float> x(static_cast<std::size_t>(k)), w(x.size());
  int differ_from_end = 0;
  for (int trial = 0; trial < 200; ++trial) {
    for (auto& v : x) v = n(rng) * 1e-4f;  // small products beside a bias of about 1: the blocks
    for (auto& v : w) v = n(rng);          // round at the bias's magnitude
    const float b = n(rng);
    for (Index parts : {3, 6}) {
      const KWalk kw = *parse_k_walk("splitk:" + std::to_string(parts) + ":seq/seq-fma");
      const Index len = k / parts;
      float total = b;
      for (Index p = 0; p < parts; ++p) {
        float acc = 0.0f;
        for (Index c = p * len; c < (p + 1) * len; ++c) acc = std::fma(x[c], w[c], acc);
        total = total + acc;
      }
      const float got = walk_dot(kw, x.data(), w.data(), k, &b);
      ASSERT_EQ(f32_bits(got), f32_bits(total)) << parts << " parts, trial " << trial;
      const float end = walk_dot(kw, x.data(), w.data(), k) + b;
      differ_from_end += f32_bits(got) != f32_bits(end);
    }
    for (const char* one : {"seq-fma", "lanes:8:halving:fma", "splitk:4:pairs/seq", "promote:128:14:rne"}) {
      const KWalk kw = *parse_k_walk(one);
      ASSERT_EQ(f32_bits(walk_dot(kw, x.data(), w.data(), k, &b)), f32_bits(walk_dot(kw, x.data(), w.data(), k) + b))
          << one;
    }
  }
  // The two ends differ often enough here that a walk test tells them apart (ONNX Runtime's
  // Gemm: 52-55 % of its values at K 1,536).
  EXPECT_GT(differ_from_end, 100);
}

TEST(KWalkEmulation, BlockedPathsEqualWalkDotWithABiasAtTheStart) {
  for (const char* name : {"split:4:fma", "split:3", "splitk:4:seq/lanes:4:pairs", "splitk:2:seq/promote:16:12:rz",
                           "seq", "lanes:8:halving", "splitk:4:pairs/seq"}) {
    for (const auto& [m, block_cols] : {std::pair<Index, Index>{3, 20}, {11, 56}, {37, 56}}) {
      expect_blocked_paths_equal_walk_dot(name, m, block_cols, true);
    }
  }
}

// ---- the bound of a promoted walk -------------------------------------------------------------

TEST(KWalkBound, PromotedKernelPassesItsBoundAndNotTheF32One) {
  // All-positive data: a truncating 14-bit accumulator loses up to 2^-13 of its partial sum at
  // every step, all in one direction, far beyond gamma_K(2^-24) S.
  testing::ProblemOptions o;
  o.m = 4;
  o.k = 1024;
  o.x_dtype = DType::kF32;
  o.positive = true;
  o.segments = {{WeightFormat::kF32, 16, {}}};
  o.walk = "promote:128:14:rz";
  auto promoted = testing::make_problem(o);
  o.walk = "";
  auto plain = testing::make_problem(o);  // the same seed: the same data, no walk declared
  auto rp = compute_reference(promoted->problem);
  auto rf = compute_reference(plain->problem);
  ASSERT_TRUE(rp.ok() && rf.ok());
  const KWalk kw = *parse_k_walk("promote:128:14:rz");
  const Exact ex{-120};
  Index outside_f32 = 0, outside_promoted = 0;
  double worst_ratio = 0;  // |engine - y*| / B_f32, the largest
  for (Index i = 0; i < o.m; ++i) {
    for (Index j = 0; j < 16; ++j) {
      const float* x = promoted->x_values.data() + i * o.k;
      const float* w = promoted->f32_store[0].data() + j * o.k;
      const float engine = walk_oracle(kw, ex, x, w, o.k);  // a correct promoted kernel
      const Index e = rp->at(i, j);
      outside_promoted += contains(rp->accept[e], engine) ? 0 : 1;
      outside_f32 += contains(rf->accept[e], engine) ? 0 : 1;
      worst_ratio = std::max(worst_ratio, std::fabs(engine - rf->y_star[e]) / rf->bound[e]);
      EXPECT_GT(rp->bound[e], rf->bound[e]);
      EXPECT_EQ(rp->y_star[e], rf->y_star[e]);
    }
  }
  EXPECT_EQ(outside_promoted, 0);
  EXPECT_EQ(outside_f32, o.m * 16) << "the f32 bound should refuse every truncated element";
  EXPECT_GT(worst_ratio, 10.0);
  RecordProperty("worst_error_over_f32_bound", std::to_string(worst_ratio));
  RecordProperty("promoted_over_f32_bound", std::to_string(rp->bound[0] / rf->bound[0]));
}

TEST(KWalkBound, PromotedGammaCountsTheRoundingsOfEachStage) {
  WeightSegment seg;
  seg.format = WeightFormat::kF32;
  // promote:128:14:rz over K = 1024: 128 roundings at 2^-13, 7 f32 additions at 2^-24.
  ColumnModel m = column_model(seg, 1024, *parse_k_walk("promote:128:14:rz"), 0x1p-24);
  EXPECT_EQ(m.inner_roundings, 128);
  EXPECT_EQ(m.inner_u, 0x1p-13);
  EXPECT_EQ(m.outer_roundings, 7);
  EXPECT_FALSE(m.inner_round_to_nearest);
  const double exact = std::pow(1 + 0x1p-13, 128) * std::pow(1 + 0x1p-24, 7) - 1;
  const double g = promoted_gamma(128, 0x1p-13, 7, 0x1p-24);
  EXPECT_GE(g, exact);
  EXPECT_LT(g, exact * 1.01);
  // A short last block and splitk: K = 1000 in 4 parts of 250, blocks of 100: 3 blocks per part,
  // 2 additions, then log2(4) = 2 levels of pairs. p = 24 never goes below the accumulator's
  // unit: 2^-22 for matrix-unit.
  m = column_model(seg, 1000, *parse_k_walk("splitk:4:pairs/promote:100:24:rne:fma"), 0x1p-22);
  EXPECT_EQ(m.inner_roundings, 100);
  EXPECT_EQ(m.inner_u, 0x1p-22);
  EXPECT_EQ(m.outer_roundings, 4);
  EXPECT_TRUE(m.inner_round_to_nearest);
  // A block longer than K: K roundings inside, none outside.
  m = column_model(seg, 64, *parse_k_walk("promote:1000:8:rne"), 0x1p-24);
  EXPECT_EQ(m.inner_roundings, 64);
  EXPECT_EQ(m.outer_roundings, 0);
  // lanes and splitk without promote: the f32 model (valid for any order).
  m = column_model(seg, 1024, *parse_k_walk("splitk:4:halving/lanes:8:halving"), 0x1p-24);
  EXPECT_EQ(m.inner_roundings, 0);
  EXPECT_EQ(m.k_eff, 1024);
  EXPECT_TRUE(std::isinf(promoted_gamma(128, 0x1p-7, 7, 0x1p-24)));  // 128 2^-7 = 1: vacuous
}

}  // namespace
}  // namespace ncert::reference
