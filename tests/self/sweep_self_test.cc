// The sweep checked: helpers with planted bugs must make it fail, each for the right reason.
// A sweep that passes a broken helper certifies nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "packing/guards.h"
#include "packing/sweep.h"

namespace ncert::packing {
namespace {

std::vector<SweepCase> some_cases() {
  std::vector<SweepCase> out;
  const auto all = default_cases();
  for (std::size_t i = 0; i < all.size(); i += 97) out.push_back(all[i]);  // every kind spread
  for (const SweepCase& c : all) {
    if (!c.guard.empty()) out.push_back(c);
  }
  return out;
}

SweepSummary sweep_with(const ExecuteFn& helper) { return sweep_cases(some_cases(), helper); }

TEST(SweepSelf, TheRealHelperPasses) {
  const SweepSummary s = sweep_with(execute);
  EXPECT_EQ(s.failed, 0) << s.first_failure_reason;
}

TEST(SweepSelf, ScatterToTheWrongRowIsCaughtAsAnIdentityFailure) {
  const SweepSummary s =
      sweep_with([](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
        NCERT_RETURN_IF_ERROR(validate(p, b));
        PackPlan shifted = p;
        for (auto& r : shifted.selector) {
          if (r >= 0) r = (r + 1) % static_cast<std::int32_t>(p.rows());
        }
        gather(p, b.x, b.compact_in);
        for (Index s2 = 0; s2 < p.slots; ++s2) {
          if (p.selector[s2] < 0) continue;
          k.run(static_cast<const unsigned char*>(b.compact_in) + s2 * p.compact_in_stride * dtype_size(p.x_dtype),
                p.x_dtype, p.compact_in_stride, 1, b.compact_out + s2 * p.compact_out_stride, p.compact_out_stride);
        }
        scatter(shifted, b.compact_out, b.bias, b.residual, b.out);
        return PathTaken::kPacked;
      });
  EXPECT_GT(s.failed_identity + s.failed_alias, 0);
  // Which of a case's checks failed is recorded only in its failure text (packing/sweep.h).
  EXPECT_NE(s.first_failure_reason.find("identity"), std::string::npos) << s.first_failure_reason;
}

TEST(SweepSelf, APaddingColumnWriteIsCaught) {
  const SweepSummary s =
      sweep_with([](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
        auto r = execute(p, k, b);
        if (r.ok() && p.out_stride > p.n) {
          // Clobber the first padding column of row 0.
          std::memset(static_cast<unsigned char*>(b.out) + p.n * dtype_size(p.output), 0, 2);
        }
        return r;
      });
  EXPECT_GT(s.failed, 0);
  bool found = false;
  for (const SweepCase& c : some_cases()) {
    if (c.out_pad == 0 || !c.guard.empty() || c.kind != CaseKind::kIdentity) continue;
    const CaseResult r =
        run_case(c, [](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
          auto res = execute(p, k, b);
          std::memset(static_cast<unsigned char*>(b.out) + p.n * dtype_size(p.output), 0, 2);
          return res;
        });
    ASSERT_FALSE(r.pass);
    EXPECT_NE(r.failure.find("padding column written"), std::string::npos) << r.failure;
    found = true;
    break;
  }
  EXPECT_TRUE(found);
}

TEST(SweepSelf, AnOutOfBoundsWriteIsCaughtByTheCanaries) {
  for (const SweepCase& c : some_cases()) {
    if (!c.guard.empty() || c.kind != CaseKind::kIdentity) continue;
    const CaseResult r =
        run_case(c, [](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
          auto res = execute(p, k, b);
          // One byte past the end of the output buffer: inside the canary zone.
          static_cast<unsigned char*>(b.out)[b.out_bytes] ^= 0xFF;
          return res;
        });
    ASSERT_FALSE(r.pass);
    EXPECT_NE(r.failure.find("canary"), std::string::npos) << r.failure;
    return;
  }
  FAIL() << "no identity case";
}

TEST(SweepSelf, AGatherThatSkipsAColumnLeaksNanPaddingAndIsCaught) {
  const SweepSummary s =
      sweep_with([](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
        NCERT_RETURN_IF_ERROR(validate(p, b));
        PackPlan narrow = p;
        narrow.k = p.k - 1;  // the last valid column is never copied: scratch NaN stays there
        gather(narrow, b.x, b.compact_in);
        for (Index s2 = 0; s2 < p.slots; ++s2) {
          if (p.selector[s2] < 0) continue;
          k.run(static_cast<const unsigned char*>(b.compact_in) + s2 * p.compact_in_stride * dtype_size(p.x_dtype),
                p.x_dtype, p.compact_in_stride, 1, b.compact_out + s2 * p.compact_out_stride, p.compact_out_stride);
        }
        scatter(p, b.compact_out, b.bias, b.residual, b.out);
        return PathTaken::kPacked;
      });
  EXPECT_GT(s.failed, 0);
  EXPECT_NE(s.first_failure_reason.find("packed"), std::string::npos) << s.first_failure_reason;
}

TEST(SweepSelf, SkippingTheGuardsIsCaught) {
  const SweepSummary s =
      sweep_with([](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
        // Refuses only what would crash this process, never with the right code.
        if (!validate(p, b).ok()) return Status(ErrorCode::kInvalidArgument, "refused");
        run_packed(p, k, b);
        return PathTaken::kPacked;
      });
  EXPECT_GT(s.failed_guard, 0);
}

TEST(SweepSelf, TouchingBuffersBeforeRefusingIsCaught) {
  const SweepSummary s =
      sweep_with([](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
        if (b.compact_out != nullptr && b.compact_out_bytes >= 4) b.compact_out[0] = 1.0f;  // before validating
        return execute(p, k, b);
      });
  EXPECT_GT(s.failed_guard, 0);
}

TEST(SweepSelf, ResidualAddedTwiceInPlaceIsCaughtInAliasCases) {
  const SweepSummary s =
      sweep_with([](const PackPlan& p, const LinearKernel& k, const HostBuffers& b) -> Result<PathTaken> {
        auto r = execute(p, k, b);
        if (!r.ok() || !reference::has_residual(p.epilogue) || b.out != b.residual) return r;
        run_packed(p, k, b);  // a second pass re-reads the already-updated residual
        return r;
      });
  EXPECT_GT(s.failed_alias, 0);
  EXPECT_EQ(s.failed_identity, 0);
}

}  // namespace
}  // namespace ncert::packing
