// The sweep's runners: identity cases (packed vs unpacked on guarded buffers), width-bucket
// cases, and the deterministic summary over a case list.
#include "packing/sweep.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

#include "packing/detail/sweep_data.h"
#include "packing/detail/sweep_runs.h"
#include "packing/guards.h"
#include "packing/width_buckets.h"
#include "reference/float_bits.h"

namespace ncert::packing {

namespace detail {

CaseResult run_identity(const SweepCase& c, const ExecuteFn& helper) {
  CaseResult res;
  res.alias = c.inplace;
  auto built = build(c);
  if (!built.ok()) {
    res.pass = false;
    res.failure = "case does not build: " + built.status().to_string();
    return res;
  }
  CaseData& d = **built;
  const PackPlan& p = d.plan;
  const Index M = p.rows();
  const int osz = dtype_size(p.output);
  const GuardedBuffer x_before = d.x;

  // Unpacked path on its own copy of the output (and of the residual when in place).
  GuardedBuffer out_u = d.out_before;
  HostBuffers bu = buffers_for(d, out_u, c.inplace);
  if (Status s = validate_unpacked(p, bu); !s.ok()) {
    res.pass = false;
    res.failure = "valid case refused by the unpacked guards: " + s.to_string();
    return res;
  }
  run_unpacked(p, *d.kernel, bu);

  GuardedBuffer out_p = d.out_before;
  HostBuffers bp = buffers_for(d, out_p, c.inplace);
  auto path = helper(p, *d.kernel, bp);
  if (!path.ok() || *path != PathTaken::kPacked) {
    res.pass = false;
    res.failure = "valid plan not run packed: " + (path.ok() ? std::string("fell back") : path.status().to_string());
    return res;
  }

  auto failure = [&](std::string msg) {
    res.pass = false;
    res.failure = std::move(msg);
    return res;
  };
  std::vector<Index> slot_of(static_cast<std::size_t>(M), -1);
  for (Index s = 0; s < p.slots; ++s) {
    if (p.selector[static_cast<std::size_t>(s)] >= 0) slot_of[p.selector[static_cast<std::size_t>(s)]] = s;
  }
  // Canaries first: an out-of-bounds write invalidates everything else.
  const std::pair<const char*, const GuardedBuffer*> all[] = {{"x", &d.x},
                                                              {"residual", &d.residual},
                                                              {"bias", &d.bias},
                                                              {"compact input", &d.compact_in},
                                                              {"compact output", &d.compact_out},
                                                              {"packed output", &out_p},
                                                              {"unpacked output", &out_u}};
  for (const auto& [name, buf] : all) {
    if (buf->bytes() > 0 && !buf->intact()) {
      return failure(std::string("canary bytes around the ") + name + " buffer were overwritten (" +
                     std::string(error_name(ErrorCode::kGuardCanaryClobbered)) + ")");
    }
  }
  if (!same_payload(d.x, x_before)) return failure("the input x was modified");
  Index compared = 0;
  for (Index r = 0; r < M; ++r) {
    const bool selected = slot_of[r] >= 0;
    for (Index j = 0; j < p.out_stride; ++j) {
      const Index i = r * p.out_stride + j;
      const bool valid = j < p.n;
      const unsigned char* pp = out_p.data() + i * osz;
      if (selected && valid) {
        const unsigned char* up = out_u.data() + i * osz;
        if (std::memcmp(pp, up, static_cast<std::size_t>(osz)) != 0) {
          return failure("identity: packed " + hex_of(out_p.data(), p.output, i) + " != unpacked " +
                         hex_of(out_u.data(), p.output, i) + " at " + cell(r, j) + " (slot " +
                         std::to_string(slot_of[r]) + ")");
        }
        if (!std::isfinite(reference::decode_element(out_p.data(), p.output, i))) {
          return failure("non-finite output at " + cell(r, j) + ": NaN-patterned padding leaked in");
        }
      } else {
        const unsigned char* bp0 = d.out_before.data() + i * osz;
        if (std::memcmp(pp, bp0, static_cast<std::size_t>(osz)) != 0) {
          return failure(std::string(valid ? "unselected row written" : "padding column written") + " at " +
                         cell(r, j) + ": " + hex_of(d.out_before.data(), p.output, i) + " -> " +
                         hex_of(out_p.data(), p.output, i));
        }
      }
      if (!valid &&
          std::memcmp(out_u.data() + i * osz, d.out_before.data() + i * osz, static_cast<std::size_t>(osz)) != 0) {
        return failure("unpacked path wrote padding column at " + cell(r, j));
      }
    }
    compared += selected;
  }
  res.rows_compared = compared;
  res.compared = compared > 0;
  return res;
}

CaseResult run_width(const SweepCase& c) {
  CaseResult res;
  WeightStore store = make_weights(c.formats, c.n, c.k, c.seed);
  reference::KWalk walk;
  if (!c.walk.empty()) walk = *reference::parse_k_walk(c.walk);
  auto kernel = LinearKernel::create(store.weights, c.x, walk);
  if (!kernel.ok()) {
    res.pass = false;
    res.failure = kernel.status().to_string();
    return res;
  }
  const std::shared_ptr<const LinearKernel> shared = std::move(kernel).value();
  auto buckets = WidthBuckets::create({8192, 512}, shared, c.x);
  if (!buckets.ok()) {
    res.pass = false;
    res.failure = buckets.status().to_string();
    return res;
  }
  auto fail = [&](std::string msg) {
    res.pass = false;
    res.failure = std::move(msg);
    return res;
  };
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Index longest = 8192 + 1;
  std::vector<unsigned char> x(static_cast<std::size_t>(longest * c.k * dtype_size(c.x)));
  for (Index i = 0; i < longest * c.k; ++i) reference::encode_element(x.data(), c.x, i, nd(rng));
  if (c.guard == "capacity") {
    auto r = buckets->run(x.data(), longest);
    res.guard = r.ok() ? ErrorCode::kOk : r.status().code();
    if (res.guard != ErrorCode::kGuardCapacity) return fail("a prompt of 8193 rows was not refused for capacity");
    return res;
  }
  // One copy of the weights, owned by the kernel; the instances hold activations only.
  if (buckets->kernel_owners() != 2) {  // `shared` here and the buckets
    return fail("width instances copied the kernel: " + std::to_string(buckets->kernel_owners()) + " owners");
  }
  const std::size_t per_row = static_cast<std::size_t>(c.k * dtype_size(c.x) + c.n * 4);
  if (buckets->instance_bytes() != (512 + 8192) * per_row) {
    return fail("width instances hold more than their activations and accumulators");
  }
  // Alternate requests between widths; every valid row must be identical at both widths.
  for (Index rows : {Index{1}, Index{37}, Index{512}, Index{513}, Index{3000}}) {
    auto picked = buckets->pick(rows);
    if (!picked.ok() || *picked != (rows <= 512 ? 512 : 8192))
      return fail("wrong bucket for " + std::to_string(rows) + " rows");
    auto a = buckets->run(x.data(), rows);
    auto wide = buckets->run(x.data(), rows, 8192);
    if (!a.ok() || !wide.ok()) return fail("width run failed");
    if (std::memcmp(a->data(), wide->data(), a->size() * sizeof(float)) != 0) {
      return fail("rows computed at width " + std::to_string(*picked) + " differ from width 8192 (" +
                  std::to_string(rows) + " rows)");
    }
    // And each row equals the kernel run on that row alone.
    std::vector<float> one(static_cast<std::size_t>(c.n));
    const Index r = rows - 1;
    shared->run(x.data() + r * c.k * dtype_size(c.x), c.x, c.k, 1, one.data(), c.n);
    if (std::memcmp(one.data(), a->data() + r * c.n, one.size() * sizeof(float)) != 0) {
      return fail("row " + std::to_string(r) + " differs from a single-row run");
    }
    res.rows_compared += rows;
  }
  return res;
}

}  // namespace detail

CaseResult run_case(const SweepCase& c, const ExecuteFn& helper) {
  switch (c.kind) {
    case CaseKind::kIdentity:
      return detail::run_identity(c, helper);
    case CaseKind::kGuard:
      return detail::run_guard(c, helper);
    case CaseKind::kWidth:
      return detail::run_width(c);
  }
  return {};
}

SweepSummary sweep_cases(const std::vector<SweepCase>& cases, const ExecuteFn& helper) {
  std::vector<CaseResult> results(cases.size());
  const Index n = static_cast<Index>(cases.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (Index i = 0; i < n; ++i)
    results[static_cast<std::size_t>(i)] = run_case(cases[static_cast<std::size_t>(i)], helper);
  SweepSummary s;
  for (Index i = 0; i < n; ++i) {
    const SweepCase& c = cases[static_cast<std::size_t>(i)];
    const CaseResult& r = results[static_cast<std::size_t>(i)];
    ++s.cases;
    s.fallbacks += r.fell_back ? 1 : 0;
    if (c.kind == CaseKind::kGuard || !c.guard.empty()) {
      ++s.guard_cases;
      if (r.pass && r.guard != ErrorCode::kOk) s.guards_covered.insert(r.guard);
    } else if (c.kind == CaseKind::kWidth) {
      ++s.width_cases;
      s.width_rows += r.rows_compared;
    } else if (r.alias) {
      ++s.alias_cases;
      s.alias_comparisons += r.compared;
      s.alias_rows += r.rows_compared;
    } else {
      s.identity_comparisons += r.compared;
      s.rows_compared += r.rows_compared;
    }
    if (r.pass) {
      ++s.passed;
      continue;
    }
    ++s.failed;
    if (!c.guard.empty())
      ++s.failed_guard;
    else if (c.kind == CaseKind::kWidth)
      ++s.failed_width;
    else if (c.inplace)
      ++s.failed_alias;
    else
      ++s.failed_identity;
    if (s.first_failure < 0) {
      s.first_failure = i;
      s.first_failure_key = c.key();
      s.first_failure_reason = r.failure;
    }
  }
  return s;
}

}  // namespace ncert::packing
