// The sweep's guard cases: one row per planted violation, {name, the guard code that must refuse
// it, the function that plants it on a valid case}; a refused call must leave every byte of
// every buffer it could reach untouched.
#include <algorithm>

#include "packing/detail/sweep_data.h"
#include "packing/detail/sweep_runs.h"
#include "packing/guards.h"

namespace ncert::packing {

namespace detail {

namespace {

/// What a planter may change: the plan, the call's buffers, and scratch buffers it adds.
struct Planting {
  PackPlan& p;
  Index m;  ///< rows of the valid plan
  HostBuffers& b;
  GuardedBuffer& out;
  std::vector<GuardedBuffer>& scratch;
};

struct GuardRow {
  const char* name;
  ErrorCode code;
  void (*plant)(Planting&);
};

const GuardRow kGuards[] = {
    {"plan-shape-requests", ErrorCode::kGuardPlanShape,
     [](Planting& g) {
       g.p.requests = kMaxRequests + 1;
       g.p.commit_counts.assign(static_cast<std::size_t>(g.p.requests), 0);
     }},
    {"plan-shape-cap", ErrorCode::kGuardPlanShape, [](Planting& g) { g.p.cap = kMaxCap + 1; }},
    {"unsupported-residual-type", ErrorCode::kGuardUnsupported,
     [](Planting& g) {
       g.p.epilogue = reference::Epilogue::kResidual;
       g.p.residual_at = reference::ResidualAt::kOutput;
       g.p.output = DType::kBf16;
       g.p.residual_dtype = DType::kF32;
       g.scratch.push_back(make_matrix(g.m, g.p.residual_stride, g.p.n, DType::kF32, [] { return 0.5f; }));
       g.b.residual = g.scratch.back().data();
       g.b.residual_bytes = g.scratch.back().bytes();
     }},
    {"unsupported-folded-walk", ErrorCode::kGuardUnsupported,
     [](Planting& g) {
       g.p.walk = *reference::parse_k_walk("seq");
       for (auto& seg : g.p.segments) {
         if (seg.format == reference::WeightFormat::kAf4) seg.af4.dequant = reference::Dequant::kFolded;
       }
     }},
    {"walk-split", ErrorCode::kGuardWalkSplit,
     [](Planting& g) { g.p.walk = *reference::parse_k_walk("split:" + std::to_string(g.p.k + 1)); }},
    {"segment-gap", ErrorCode::kGuardSegmentTable, [](Planting& g) { g.p.segments.back().row_begin += 1; }},
    {"segment-overlap", ErrorCode::kGuardSegmentTable, [](Planting& g) { g.p.segments.back().row_begin -= 1; }},
    {"segment-total", ErrorCode::kGuardSegmentTable, [](Planting& g) { g.p.segments.back().row_end += 1; }},
    {"af4-group", ErrorCode::kGuardAf4Geometry,
     [](Planting& g) {
       for (auto& seg : g.p.segments) {
         if (seg.format == reference::WeightFormat::kAf4) seg.af4.group_size = g.p.k / 2 + 1;
       }
     }},
    {"af4-codes-shape", ErrorCode::kGuardAf4Geometry,
     [](Planting& g) {
       for (auto& seg : g.p.segments) {
         if (seg.format == reference::WeightFormat::kAf4) seg.codes_cols += 1;
       }
     }},
    {"af4-scales-shape", ErrorCode::kGuardAf4Geometry,
     [](Planting& g) {
       for (auto& seg : g.p.segments) {
         if (seg.format == reference::WeightFormat::kAf4) seg.scales_cols -= 1;
       }
     }},
    {"stride-input", ErrorCode::kGuardStrideBelowWidth, [](Planting& g) { g.p.in_stride = g.p.k - 1; }},
    {"stride-output", ErrorCode::kGuardStrideBelowWidth, [](Planting& g) { g.p.out_stride = g.p.n - 1; }},
    {"stride-compact", ErrorCode::kGuardStrideBelowWidth, [](Planting& g) { g.p.compact_out_stride = g.p.n - 1; }},
    {"too-few-slots", ErrorCode::kGuardTooFewSlots,
     [](Planting& g) { g.p.commit_counts[0] = static_cast<std::int32_t>(g.p.slots + 1); }},
    {"row-out-of-range", ErrorCode::kGuardRowOutOfRange,
     [](Planting& g) { g.p.selector[0] = static_cast<std::int32_t>(g.m); }},
    {"row-negative", ErrorCode::kGuardRowOutOfRange, [](Planting& g) { g.p.selector[0] = -2; }},
    {"duplicate-row", ErrorCode::kGuardDuplicateRow, [](Planting& g) { g.p.selector[1] = g.p.selector[0]; }},
    {"cap-exceeded", ErrorCode::kGuardCapExceeded,
     [](Planting& g) {
       g.p.selector[static_cast<std::size_t>(g.p.commit_counts[0])] = g.p.commit_counts[0];
       g.p.commit_counts[0] += 1;
     }},
    {"commit-mismatch", ErrorCode::kGuardCommitMismatch, [](Planting& g) { g.p.commit_counts[0] -= 1; }},
    {"not-prefix", ErrorCode::kGuardNotPrefix,
     [](Planting& g) {
       g.p.selector[0] = g.p.commit_counts[0];  // request 0's row just past its prefix
     }},
    {"extent-x", ErrorCode::kGuardExtentTooSmall,
     [](Planting& g) {
       // One element short of what the last row's valid columns need (the trailing padding of
       // the allocation is not part of the geometry's extent).
       g.b.x_bytes =
           extent_bytes(g.m, g.p.in_stride, g.p.k, g.p.x_dtype) - static_cast<std::size_t>(dtype_size(g.p.x_dtype));
     }},
    {"extent-scratch", ErrorCode::kGuardExtentTooSmall, [](Planting& g) { g.b.compact_out_bytes -= 4; }},
    {"misaligned", ErrorCode::kGuardMisaligned,
     [](Planting& g) {
       g.scratch.push_back(make_matrix(
           g.m, g.p.in_stride, g.p.k, g.p.x_dtype, [] { return 1.0f; }, 4));
       g.b.x = g.scratch.back().data();
     }},
    {"output-aliases-input", ErrorCode::kGuardOutputAliasesInput,
     [](Planting& g) {
       g.b.out = const_cast<void*>(g.b.x);
       g.b.out_bytes = std::min(g.b.out_bytes, g.b.x_bytes);
     }},
    {"partial-overlap", ErrorCode::kGuardPartialOverlap,
     [](Planting& g) {
       // The residual starts 16 bytes into the output buffer (still aligned, still long enough
       // thanks to the padding columns): neither disjoint nor exactly in place.
       g.p.epilogue = reference::Epilogue::kResidual;
       g.p.residual_dtype = g.p.output;
       g.b.residual = g.out.data() + 16;
       g.b.residual_bytes = g.out.bytes() - 16;
     }},
    {"scratch-overlap", ErrorCode::kGuardPartialOverlap,
     [](Planting& g) { g.b.compact_out = reinterpret_cast<float*>(g.out.data()); }},
    // capacity is planted by the width-bucket runner (a prompt longer than every bucket).
    {"capacity", ErrorCode::kGuardCapacity, [](Planting&) {}},
};

const GuardRow* find_guard(const std::string& name) {
  for (const GuardRow& g : kGuards) {
    if (name == g.name) return &g;
  }
  return nullptr;
}

}  // namespace

CaseResult run_guard(const SweepCase& c, const ExecuteFn& helper) {
  CaseResult res;
  auto built = build(c);
  if (!built.ok()) {
    res.pass = false;
    res.failure = "base case does not build: " + built.status().to_string();
    return res;
  }
  CaseData& d = **built;
  const GuardRow* row = find_guard(c.guard);
  if (!row) {
    res.pass = false;
    res.failure = "no planted violation is named \"" + c.guard + "\"";
    return res;
  }
  const ErrorCode want = row->code;
  GuardedBuffer out = d.out_before;
  std::vector<GuardedBuffer> scratch;
  scratch.reserve(4);
  HostBuffers b = buffers_for(d, out, false);
  Planting planting{d.plan, d.plan.rows(), b, out, scratch};
  row->plant(planting);
  // Snapshot every byte (canaries included) of every buffer the call could reach.
  const std::vector<const GuardedBuffer*> reach = {&d.x, &d.residual, &d.bias, &d.compact_in, &d.compact_out, &out};
  std::vector<std::vector<unsigned char>> before;
  before.reserve(reach.size() + scratch.size());
  for (const GuardedBuffer* g : reach) before.push_back(g->raw());
  for (const GuardedBuffer& g : scratch) before.push_back(g.raw());

  auto outcome = helper(d.plan, *d.kernel, b);
  if (want == ErrorCode::kGuardUnsupported) {
    res.guard = ErrorCode::kGuardUnsupported;
    if (!outcome.ok() || *outcome != PathTaken::kUnpacked) {
      res.pass = false;
      res.failure = "unsupported plan did not fall back to the unpacked path: " +
                    (outcome.ok() ? std::string("ran packed") : outcome.status().to_string());
      return res;
    }
    res.fell_back = true;
    // The fallback must equal a direct unpacked run.
    GuardedBuffer again = d.out_before;
    HostBuffers b2 = b;
    b2.out = again.data();
    if (b.residual == out.data()) b2.residual = again.data();
    run_unpacked(d.plan, *d.kernel, b2);
    if (!same_payload(again, out)) {
      res.pass = false;
      res.failure = "fallback output differs from a direct unpacked run";
    }
    return res;
  }
  if (outcome.ok()) {
    res.pass = false;
    res.failure = "violation \"" + c.guard + "\" was not refused (expected " + std::string(error_name(want)) + ")";
    return res;
  }
  res.guard = outcome.status().code();
  if (res.guard != want) {
    res.pass = false;
    res.failure = "violation \"" + c.guard + "\" refused with " + outcome.status().to_string() + ", expected " +
                  std::string(error_name(want));
    return res;
  }
  std::size_t i = 0;
  for (const GuardedBuffer* g : reach) {
    if (g->raw() != before[i++]) {
      res.pass = false;
      res.failure = "a refused call touched a buffer (" + c.guard + ")";
      return res;
    }
  }
  for (const GuardedBuffer& g : scratch) {
    if (g.raw() != before[i++]) {
      res.pass = false;
      res.failure = "a refused call touched a buffer (" + c.guard + ")";
      return res;
    }
  }
  return res;
}

}  // namespace detail

const std::vector<std::pair<std::string, ErrorCode>>& guard_names() {
  static const std::vector<std::pair<std::string, ErrorCode>> kNames = [] {
    std::vector<std::pair<std::string, ErrorCode>> v;
    for (const detail::GuardRow& g : detail::kGuards) v.emplace_back(g.name, g.code);
    return v;
  }();
  return kNames;
}

}  // namespace ncert::packing
