// Each host guard fires on its violation with its own stable code and the numbers, in the
// documented order (docs/packing.md); valid plans and exact in-place aliasing pass.
#include "packing/guards.h"

#include <gtest/gtest.h>

#include <vector>

namespace ncert::packing {
namespace {

using reference::Epilogue;
using reference::WeightFormat;

struct Fixture {
  PackPlan plan;
  std::vector<float> x, out, residual, bias, cin, cout;
  HostBuffers buffers;

  Fixture() {
    plan.requests = 3;
    plan.block_rows = 4;
    plan.cap = 2;
    plan.slots = 8;
    plan.commit_counts = {2, 1, 2};
    plan.selector = canonical_selector(4, plan.commit_counts, 8);
    plan.k = 32;
    plan.n = 20;
    plan.in_stride = 40;
    plan.out_stride = 24;
    plan.residual_stride = 24;
    plan.compact_in_stride = 32;
    plan.compact_out_stride = 20;
    plan.x_dtype = DType::kF32;
    plan.output = DType::kF32;
    plan.residual_dtype = DType::kF32;
    plan.epilogue = Epilogue::kBiasResidual;
    SegmentGeometry a;
    a.name = "a";
    a.format = WeightFormat::kAf4;
    a.row_begin = 0;
    a.row_end = 12;
    a.af4.packing = reference::Af4Packing::kU32Lsb;
    a.af4.group_size = 16;
    a.codes_cols = 4;
    a.scales_cols = 2;
    a.biases_cols = 2;
    SegmentGeometry b;
    b.name = "b";
    b.format = WeightFormat::kBf16;
    b.row_begin = 12;
    b.row_end = 20;
    b.values_cols = 32;
    plan.segments = {a, b};
    alloc();
  }

  void alloc() {
    const Index M = plan.rows();
    x.assign(static_cast<std::size_t>(M * plan.in_stride), 1.0f);
    out.assign(static_cast<std::size_t>(M * plan.out_stride), 0.0f);
    residual.assign(static_cast<std::size_t>(M * plan.residual_stride), 0.0f);
    bias.assign(static_cast<std::size_t>(plan.n), 0.0f);
    cin.assign(static_cast<std::size_t>(plan.slots * plan.compact_in_stride), 0.0f);
    cout.assign(static_cast<std::size_t>(plan.slots * plan.compact_out_stride), 0.0f);
    buffers = {x.data(),    x.size() * 4,    out.data(), out.size() * 4, residual.data(), residual.size() * 4,
               bias.data(), bias.size() * 4, cin.data(), cin.size() * 4, cout.data(),     cout.size() * 4};
  }

  Status check() const { return validate(plan, buffers); }
};

void expect_code(const Status& s, ErrorCode code, const std::string& fragment) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

TEST(Guards, ValidPlanPasses) {
  Fixture f;
  EXPECT_TRUE(f.check().ok()) << f.check().to_string();
}

TEST(Guards, PlanShape) {
  Fixture f;
  f.plan.requests = 9;
  f.plan.commit_counts.assign(9, 0);
  expect_code(f.check(), ErrorCode::kGuardPlanShape, "R = 9");
  Fixture g;
  g.plan.cap = 5;
  expect_code(g.check(), ErrorCode::kGuardPlanShape, "cap = 5");
  Fixture h;
  h.plan.selector.pop_back();
  expect_code(h.check(), ErrorCode::kGuardPlanShape, "7 entries for P = 8");
}

TEST(Guards, UnsupportedCombinationsAreCheckedBeforeAnyCap) {
  Fixture f;
  f.plan.residual_at = reference::ResidualAt::kOutput;
  f.plan.output = DType::kBf16;      // residual stays f32
  f.plan.commit_counts = {3, 3, 3};  // would also exceed cap 2
  expect_code(f.check(), ErrorCode::kGuardUnsupported, "residual_at = output");
  Fixture g;
  g.plan.walk = *reference::parse_k_walk("seq");
  g.plan.segments[0].af4.dequant = reference::Dequant::kFolded;
  expect_code(g.check(), ErrorCode::kGuardUnsupported, "folded");
}

TEST(Guards, WalkSplitMustDivideK) {
  Fixture f;
  f.plan.walk = *reference::parse_k_walk("split:5");
  expect_code(f.check(), ErrorCode::kGuardWalkSplit, "K = 32 is not a multiple of 5");
  // splitk cuts K into S parts the same way, whatever its inner walk; lanes and promote do not
  // cut K (a short tail or a short last block is part of their definition).
  Fixture g;
  g.plan.walk = *reference::parse_k_walk("splitk:3:seq/lanes:8:halving");
  expect_code(g.check(), ErrorCode::kGuardWalkSplit,
              "k_walk splitk:3:seq/lanes:8:halving: K = 32 is not a multiple of 3");
  for (const char* ok : {"splitk:4:pairs/promote:3:10:rz", "lanes:6:seq", "promote:5:8:rne:fma"}) {
    Fixture h;
    h.plan.walk = *reference::parse_k_walk(ok);
    EXPECT_TRUE(h.check().ok()) << ok << ": " << h.check().to_string();
  }
}

TEST(Guards, SegmentTable) {
  Fixture gap;
  gap.plan.segments[1].row_begin = 13;
  expect_code(gap.check(), ErrorCode::kGuardSegmentTable, "gap: output columns [12, 13)");
  Fixture overlap;
  overlap.plan.segments[1].row_begin = 11;
  expect_code(overlap.check(), ErrorCode::kGuardSegmentTable, "overlap");
  Fixture total;
  total.plan.segments[1].row_end = 21;
  expect_code(total.check(), ErrorCode::kGuardSegmentTable, "N = 20");
}

TEST(Guards, Af4Geometry) {
  Fixture f;
  f.plan.segments[0].af4.group_size = 12;
  expect_code(f.check(), ErrorCode::kGuardAf4Geometry, "group_size 12 does not divide K = 32");
  Fixture g;
  g.plan.segments[0].codes_cols = 16;
  expect_code(g.check(), ErrorCode::kGuardAf4Geometry, "codes have 16 columns");
  Fixture h;
  h.plan.segments[0].scales_cols = 4;
  expect_code(h.check(), ErrorCode::kGuardAf4Geometry, "scales have 4 columns");
  // Activation groups too (x_quant_group, docs/dump-format.md §3.6).
  Fixture x;
  x.plan.x_quant.type = reference::XQuantType::kInt8;
  x.plan.x_quant.group = 24;
  expect_code(x.check(), ErrorCode::kGuardAf4Geometry, "x_quant_group 24 does not divide K = 32");
}

TEST(Guards, StridesBelowValidWidth) {
  Fixture f;
  f.plan.in_stride = 31;
  expect_code(f.check(), ErrorCode::kGuardStrideBelowWidth, "input x stride 31 < valid width 32");
  Fixture g;
  g.plan.out_stride = 19;
  expect_code(g.check(), ErrorCode::kGuardStrideBelowWidth, "output stride 19");
  Fixture h;
  h.plan.compact_in_stride = 16;
  expect_code(h.check(), ErrorCode::kGuardStrideBelowWidth, "compact input scratch stride 16");
}

TEST(Guards, SelectorAndCommits) {
  Fixture slots;
  slots.plan.commit_counts = {4, 4, 2};
  slots.plan.cap = 4;
  expect_code(slots.check(), ErrorCode::kGuardTooFewSlots, "sum to 10 rows but only 8");
  Fixture range;
  range.plan.selector[0] = 12;
  expect_code(range.check(), ErrorCode::kGuardRowOutOfRange, "slot 0 selects row 12, outside [-1, 12)");
  Fixture dup;
  dup.plan.selector[1] = 0;
  expect_code(dup.check(), ErrorCode::kGuardDuplicateRow, "row 0 is selected by slots 0 and 1");
  Fixture cap;
  cap.plan.selector = {0, 1, 2, 4, 8, 9, -1, -1};
  cap.plan.commit_counts = {3, 1, 2};
  expect_code(cap.check(), ErrorCode::kGuardCapExceeded, "request 0 gathers 3 rows");
  // The commit count alone over the cap, the selector's count within it: said as such (it had
  // read "request 0 gathers 2 rows (commit count 3) but cap = 2").
  Fixture commit_over;
  commit_over.plan.commit_counts = {3, 1, 2};
  expect_code(commit_over.check(), ErrorCode::kGuardCapExceeded,
              "request 0: commit_counts says 3 rows but cap = 2 (the selector gathers 2)");
  Fixture mismatch;
  mismatch.plan.commit_counts = {2, 0, 2};
  expect_code(mismatch.check(), ErrorCode::kGuardCommitMismatch,
              "request 1: selector gathers 1 rows, commit_counts says 0");
  Fixture prefix;
  prefix.plan.selector[2] = 5;  // request 1 selects offset 1 instead of 0
  expect_code(prefix.check(), ErrorCode::kGuardNotPrefix, "request 1: row 4 (offset 0) is not selected");
}

TEST(Guards, BuffersAndAliasing) {
  Fixture extent;
  extent.buffers.x_bytes = ((12 - 1) * 40 + 32) * 4 - 4;
  expect_code(extent.check(), ErrorCode::kGuardExtentTooSmall, "input x holds");
  Fixture scratch;
  scratch.buffers.compact_out_bytes = 4;
  expect_code(scratch.check(), ErrorCode::kGuardExtentTooSmall, "compact output scratch");
  Fixture mis;
  mis.bias.assign(40, 0.0f);
  mis.buffers.bias = reinterpret_cast<const char*>(mis.bias.data()) + 4;  // 4 bytes off
  mis.buffers.bias_bytes = 39 * 4;
  expect_code(mis.check(), ErrorCode::kGuardMisaligned, "bias");
  Fixture alias;
  alias.buffers.out = alias.x.data();
  alias.buffers.out_bytes = alias.x.size() * 4;
  expect_code(alias.check(), ErrorCode::kGuardOutputAliasesInput, "overlap the input x");
  Fixture partial;
  partial.buffers.residual = partial.out.data() + 4;
  partial.buffers.residual_bytes = (partial.out.size() - 4) * 4;
  expect_code(partial.check(), ErrorCode::kGuardPartialOverlap, "overlap");
  Fixture inplace;
  inplace.buffers.residual = inplace.out.data();
  inplace.buffers.residual_bytes = inplace.out.size() * 4;
  EXPECT_TRUE(inplace.check().ok()) << inplace.check().to_string();
  Fixture inplace_bad;
  inplace_bad.plan.residual_dtype = DType::kBf16;  // same base, different element type
  inplace_bad.buffers.residual = inplace_bad.out.data();
  inplace_bad.buffers.residual_bytes = inplace_bad.out.size() * 4;
  expect_code(inplace_bad.check(), ErrorCode::kGuardPartialOverlap, "identical layouts");
}

TEST(Guards, CanonicalSelector) {
  EXPECT_EQ(canonical_selector(4, {2, 0, 1}, 5), (std::vector<std::int32_t>{0, 1, 8, -1, -1}));
  EXPECT_EQ(extent_bytes(3, 10, 4, DType::kBf16), static_cast<std::size_t>((2 * 10 + 4) * 2));
  EXPECT_EQ(extent_bytes(0, 10, 4, DType::kF32), 0u);
}

}  // namespace
}  // namespace ncert::packing
