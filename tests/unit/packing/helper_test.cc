// The helper's kernel, gather/scatter and fallback against hand-built expectations and the
// reference's K-walk emulation; width buckets share one kernel and agree at every width.
#include "packing/helper.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "packing/guards.h"
#include "packing/width_buckets.h"
#include "reference/k_walk.h"
#include "tests/common/linear_fixture.h"

namespace ncert::packing {
namespace {

using ncert::testing::make_problem;
using ncert::testing::ProblemOptions;
using reference::Epilogue;
using reference::WeightFormat;

TEST(Kernel, EqualsTheReferenceWalkBitForBit) {
  ProblemOptions o;
  o.m = 5;
  o.k = 96;
  o.x_dtype = DType::kF32;
  o.segments = {{WeightFormat::kBf16, 70, {}}, {WeightFormat::kF32, 5, {}}};
  for (const std::string walk : {"seq", "seq-fma", "split:3", "split:8:fma"}) {
    o.walk = walk;
    auto p = make_problem(o);
    auto kernel = LinearKernel::create(p->weights, DType::kF32, p->problem.walk);
    ASSERT_TRUE(kernel.ok());
    std::vector<float> acc(static_cast<std::size_t>(5 * 75));
    (*kernel)->run(p->x_f32.data(), DType::kF32, 96, 5, acc.data(), 75);
    std::vector<float> w(96);
    for (Index i = 0; i < 5; ++i) {
      for (Index j = 0; j < 75; ++j) {
        reference::decode_weight_row(p->weights, j, DType::kF32, nullptr, nullptr, w.data());
        const float want = reference::walk_dot(p->problem.walk, p->x_f32.data() + i * 96, w.data(), 96);
        ASSERT_EQ(reference::f32_bits(acc[i * 75 + j]), reference::f32_bits(want)) << walk;
      }
    }
  }
  o.walk = "split:5";
  auto p = make_problem(o);
  EXPECT_EQ(LinearKernel::create(p->weights, DType::kF32, p->problem.walk).status().code(), ErrorCode::kGuardWalkSplit);
}

struct HelperSetup {
  std::unique_ptr<ncert::testing::OwnedProblem> prob;
  std::shared_ptr<const LinearKernel> kernel;
  PackPlan plan;
  std::vector<float> x, out, residual, bias, cin, cout;

  explicit HelperSetup(bool inplace) {
    ProblemOptions o;
    o.m = 8;
    o.k = 16;
    o.x_dtype = DType::kF32;
    o.segments = {{WeightFormat::kBf16, 6, {}}};
    prob = make_problem(o);
    kernel = *LinearKernel::create(prob->weights, DType::kF32, {});
    plan.requests = 2;
    plan.block_rows = 4;
    plan.cap = 2;
    plan.slots = 4;
    plan.commit_counts = {2, 1};
    plan.selector = {4, 0, 1, -1};  // request 1's row in slot 0: any slot order is valid
    plan.k = 16;
    plan.n = 6;
    plan.in_stride = 20;
    plan.out_stride = 8;
    plan.residual_stride = 8;
    plan.compact_in_stride = 16;
    plan.compact_out_stride = 6;
    plan.x_dtype = DType::kF32;
    plan.output = DType::kF32;
    plan.residual_dtype = DType::kF32;
    plan.epilogue = Epilogue::kBiasResidual;
    SegmentGeometry g;
    g.name = "w";
    g.format = WeightFormat::kBf16;
    g.row_begin = 0;
    g.row_end = 6;
    g.values_cols = 16;
    plan.segments = {g};
    x.assign(8 * 20, NAN);
    for (Index r = 0; r < 8; ++r) {
      for (Index c = 0; c < 16; ++c) x[r * 20 + c] = prob->x_values[r * 16 + c];
    }
    out.assign(8 * 8, NAN);  // padding columns stay NaN
    for (Index r = 0; r < 8; ++r) {
      for (Index c = 0; c < 6; ++c) out[r * 8 + c] = 100.0f + static_cast<float>(r * 8 + c);
    }
    residual = out;
    bias = {0.5f, -0.5f, 1.0f, 2.0f, -1.0f, 0.25f};
    cin.assign(4 * 16, NAN);
    cout.assign(4 * 6, NAN);
    (void)inplace;
  }
  HostBuffers buffers(bool inplace) {
    HostBuffers b{x.data(),
                  x.size() * 4,
                  out.data(),
                  out.size() * 4,
                  inplace ? out.data() : residual.data(),
                  (inplace ? out.size() : residual.size()) * 4,
                  bias.data(),
                  bias.size() * 4,
                  cin.data(),
                  cin.size() * 4,
                  cout.data(),
                  cout.size() * 4};
    return b;
  }
};

TEST(Helper, PackedScatterWritesOnlySelectedRowsAndValidColumns) {
  for (bool inplace : {false, true}) {
    HelperSetup s(inplace);
    const std::vector<float> before = s.out;
    auto path = execute(s.plan, *s.kernel, s.buffers(inplace));
    ASSERT_TRUE(path.ok()) << path.status().to_string();
    EXPECT_EQ(*path, PathTaken::kPacked);
    for (Index r = 0; r < 8; ++r) {
      const bool selected = r == 0 || r == 1 || r == 4;
      for (Index c = 0; c < 8; ++c) {
        const float got = s.out[r * 8 + c];
        if (c >= 6) {
          EXPECT_TRUE(std::isnan(got)) << "padding column written at " << r << "," << c;
        } else if (!selected) {
          EXPECT_EQ(got, before[r * 8 + c]) << "unselected row written at " << r;
        } else {
          std::vector<float> w(16);
          reference::decode_weight_row(s.prob->weights, c, DType::kF32, nullptr, nullptr, w.data());
          const float acc = reference::walk_dot(s.kernel->walk(), s.prob->x_values.data() + r * 16, w.data(), 16);
          // In place, the residual is the output's old value (read before the store).
          reference::ProjectionArithmetic a;
          a.epilogue = Epilogue::kBiasResidual;
          const float want = reference::epilogue_value(acc, s.bias[c], before[r * 8 + c], a);
          EXPECT_EQ(reference::f32_bits(got), reference::f32_bits(want)) << r << "," << c;
        }
      }
    }
  }
}

TEST(Helper, PackedEqualsUnpackedOnSelectedRows) {
  HelperSetup a(false), b(false);
  ASSERT_TRUE(execute(a.plan, *a.kernel, a.buffers(false)).ok());
  run_unpacked(b.plan, *b.kernel, b.buffers(false));
  for (Index r : {0, 1, 4}) {
    EXPECT_EQ(std::memcmp(&a.out[r * 8], &b.out[r * 8], 6 * 4), 0) << r;
  }
}

TEST(Helper, UnsupportedPlanFallsBackToTheUnpackedPath) {
  HelperSetup s(false), u(false);
  s.plan.walk = *reference::parse_k_walk("seq-fma");
  s.plan.segments[0].format = WeightFormat::kAf4;  // claim AF4 folded: no defined walk
  s.plan.segments[0].af4.dequant = reference::Dequant::kFolded;
  s.plan.segments[0].af4.group_size = 16;
  s.plan.segments[0].af4.packing = reference::Af4Packing::kU8Lsb;
  s.plan.segments[0].codes_cols = 8;
  s.plan.segments[0].scales_cols = 1;
  s.plan.segments[0].biases_cols = 1;
  auto path = execute(s.plan, *s.kernel, s.buffers(false));
  ASSERT_TRUE(path.ok()) << path.status().to_string();
  EXPECT_EQ(*path, PathTaken::kUnpacked);
  run_unpacked(u.plan, *u.kernel, u.buffers(false));
  EXPECT_EQ(std::memcmp(s.out.data(), u.out.data(), s.out.size() * 4), 0);
}

TEST(Helper, RefusedPlanTouchesNothing) {
  HelperSetup s(false);
  s.plan.selector[3] = 0;  // duplicate row
  const auto out = s.out;
  const auto cin = s.cin;
  auto path = execute(s.plan, *s.kernel, s.buffers(false));
  EXPECT_EQ(path.status().code(), ErrorCode::kGuardDuplicateRow);
  EXPECT_EQ(std::memcmp(out.data(), s.out.data(), out.size() * 4), 0);
  EXPECT_EQ(std::memcmp(cin.data(), s.cin.data(), cin.size() * 4), 0);
}

TEST(WidthBucketsTest, PickCapacityAndSharedWeights) {
  ProblemOptions o;
  o.m = 1;
  o.k = 16;
  o.segments = {{WeightFormat::kBf16, 8, {}}};
  auto p = make_problem(o);
  std::shared_ptr<const LinearKernel> kernel = *LinearKernel::create(p->weights, DType::kBf16, {});
  auto b = WidthBuckets::create({8192, 512}, kernel, DType::kBf16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b->pick(1), 512);
  EXPECT_EQ(*b->pick(512), 512);
  EXPECT_EQ(*b->pick(513), 8192);
  EXPECT_EQ(b->pick(8193).status().code(), ErrorCode::kGuardCapacity);
  EXPECT_EQ(b->kernel_owners(), 2);  // this test's pointer and the buckets: no copy per width
  EXPECT_EQ(b->instance_bytes(), static_cast<std::size_t>((512 + 8192) * (16 * 2 + 8 * 4)));
  std::vector<std::uint16_t> x(700 * 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = reference::f32_to_bf16(std::sin(static_cast<float>(i)));
  auto at512 = b->run(x.data(), 300);
  auto at8192 = b->run(x.data(), 300, 8192);
  auto again = b->run(x.data(), 300);  // alternating requests reuse the same instances
  ASSERT_TRUE(at512.ok() && at8192.ok() && again.ok());
  EXPECT_EQ(*at512, *at8192);
  EXPECT_EQ(*at512, *again);
  EXPECT_EQ(b->run(x.data(), 600, 512).status().code(), ErrorCode::kGuardCapacity);
  EXPECT_EQ(WidthBuckets::create({512, 512}, kernel, DType::kBf16).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ncert::packing
