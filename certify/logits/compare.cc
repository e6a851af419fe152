#include "certify/logits/compare.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "certify/io/row_stream.h"
#include "certify/logits/detail/logits_row.h"
#include "certify/logits/forks.h"
#include "certify/report/format.h"
#include "certify/report/progress.h"
#include "reference/float_bits.h"

namespace ncert::certify {

Result<RunComparison> compare_runs(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b,
                                   const LogitsRunInfo& rb, bool matched_history, const ElementTest& test,
                                   FileHashCursor* hash_a, FileHashCursor* hash_b) {
  const auto t0 = std::chrono::steady_clock::now();
  if (ra.vocab != rb.vocab) {
    return Status(ErrorCode::kVocabMismatch, "runs " + ra.name + " (" + a.model().file + ", vocab " +
                                                 std::to_string(ra.vocab) + ") and " + rb.name + " (" + b.model().file +
                                                 ", vocab " + std::to_string(rb.vocab) +
                                                 ") have different vocabularies");
  }
  RunComparison c;
  c.run_a = ra.name;
  c.run_b = rb.name;
  c.vocab = ra.vocab;
  c.rows_a = ra.tokens;
  c.rows_b = rb.tokens;
  c.compared = std::min(ra.tokens, rb.tokens);
  NCERT_ASSIGN_OR_RETURN(c.tokens_a, a.read_i32(ra.path + "/tokens"));
  NCERT_ASSIGN_OR_RETURN(c.tokens_b, b.read_i32(rb.path + "/tokens"));
  // The same prompt: the prompt tokens when both runs have them, else the prompt identities.
  if (ra.has_prompt_tokens && rb.has_prompt_tokens) {
    NCERT_ASSIGN_OR_RETURN(auto pa, a.read_i32(ra.path + "/prompt_tokens"));
    NCERT_ASSIGN_OR_RETURN(auto pb, b.read_i32(rb.path + "/prompt_tokens"));
    c.prompts_equal = pa == pb;
  } else if (!ra.prompt.empty() && !rb.prompt.empty()) {
    c.prompts_equal = ra.prompt == rb.prompt;
  }
  if (matched_history) {
    c.matched = c.compared;
  } else if (!c.prompts_equal) {
    c.matched = 0;
    c.divergence = 0;
  } else {
    // Row t was computed from the prompt and tokens [0, t): matched while those agree.
    c.matched = c.compared;
    for (Index t = 0; t + 1 < c.compared; ++t) {
      if (c.tokens_a[static_cast<std::size_t>(t)] != c.tokens_b[static_cast<std::size_t>(t)]) {
        c.matched = t + 1;
        c.divergence = t + 1;
        break;
      }
    }
  }
  // Only matched rows are judged, so only they are compared: rows after the histories diverge
  // come from other contexts (for forks too, which need only the rows before the fork).
  c.rows.resize(static_cast<std::size_t>(c.matched));
  // Blocks of about 4 MiB per file (6 rows of a 151,936 vocabulary): a block read and hashed
  // is still in the cache when its rows are compared. 2 x 2048 rows compared in 0.83-0.86 s
  // with 2 and 4 MiB blocks, 0.87-0.90 with 8, 0.95-1.13 with 16 (2 threads).
  constexpr Index kBlockBytes = Index{4} << 20;
  const Index per_block =
      block_rows_for({a.model().dataset(ra.path + "/logits"), b.model().dataset(rb.path + "/logits")}, kBlockBytes, 64);
  NCERT_ASSIGN_OR_RETURN(RowStream sa, RowStream::open(a, ra.path + "/logits", per_block, hash_a));
  NCERT_ASSIGN_OR_RETURN(RowStream sb, RowStream::open(b, rb.path + "/logits", per_block, hash_b));
  std::vector<CompareScratch> scratch(static_cast<std::size_t>(omp_get_max_threads()));
  const DType type_a = detail::logits_dtype(a, ra.path + "/logits"),
              type_b = detail::logits_dtype(b, rb.path + "/logits");
  c.dtype_a = type_a;
  c.dtype_b = type_b;
  std::vector<std::vector<float>> wide_a(scratch.size()), wide_b(scratch.size());
  RowStream* streams[] = {&sa, &sb};
  Progress progress("compare " + ra.name + ": rows", c.matched);
  NCERT_RETURN_IF_ERROR(stream_rows(
      streams, c.matched,
      [&](Index t, const unsigned char* const* rows) {
        const auto me = static_cast<std::size_t>(omp_get_thread_num());
        c.rows[static_cast<std::size_t>(t)] =
            compare_rows(detail::widen_row(rows[0], type_a, c.vocab, wide_a[me]),
                         detail::widen_row(rows[1], type_b, c.vocab, wide_b[me]), c.vocab,
                         c.tokens_a[static_cast<std::size_t>(t)], test, scratch[me]);
      },
      [&](Index done) { progress.reach(done); }));
  c.seconds = seconds_since(t0);
  return c;
}

ElementTest element_test(const Policy& policy) {
  ElementTest t;
  t.rel = policy.rel;
  switch (policy.kind) {
    case Policy::Kind::kBitwise:
      t.kind = ElementTest::Kind::kBits;
      break;
    case Policy::Kind::kUlp:
      t.kind = ElementTest::Kind::kUlp;
      t.ulp = policy.ulp;
      break;
    case Policy::Kind::kAbs:
      t.kind = ElementTest::Kind::kAbs;
      t.abs = policy.abs;
      break;
    case Policy::Kind::kKl:
    case Policy::Kind::kTop1:
    case Policy::Kind::kForks:
      break;
  }
  return t;
}

namespace {

Distribution distribution(std::vector<double> v) {
  Distribution d;
  if (v.empty()) return d;
  // A KL that is not a number (NaN in a row) ranks above every other value, +inf included, as
  // in the position series: std::sort's < is no ordering once a NaN is among the values.
  std::sort(v.begin(), v.end(), [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; });
  d.empty = false;
  d.max = v.back();
  d.p999 = nearest_rank(v, 99.9);
  d.p99 = nearest_rank(v, 99);
  d.p95 = nearest_rank(v, 95);
  d.p90 = nearest_rank(v, 90);
  d.p50 = nearest_rank(v, 50);
  d.min = v.front();
  return d;
}

}  // namespace

double nearest_rank(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const std::size_t i = static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[i];
}

Status no_common_runs(const DumpModel& a, const DumpModel& b, const std::string& a_path, const std::string& b_path,
                      bool with_tensors) {
  const auto held = [&](const DumpModel& m, const std::string& path) {
    std::string runs;
    for (const LogitsRunInfo& r : m.logits) runs += (runs.empty() ? "" : ", ") + r.name;
    std::string text = path + " holds " + (runs.empty() ? "no logits run" : "logits runs " + runs);
    if (with_tensors) {
      std::string tensors;
      for (const TensorInfo& t : m.tensors) tensors += (tensors.empty() ? "" : ", ") + t.name;
      text += tensors.empty() ? ", no tensor" : ", tensors " + tensors;
    }
    return text;
  };
  const bool both_have_runs = !a.logits.empty() && !b.logits.empty();
  return Status(ErrorCode::kNoCommonRuns,
                a_path + " and " + b_path + " share no logits run" + (with_tensors ? " or tensor" : "") +
                    " to compare: " + held(a, a_path) + "; " + held(b, b_path) +
                    (both_have_runs ? "; runs of different names pair with --pair A_RUN:B_RUN (e.g. --pair " +
                                          a.logits.front().name + ":" + b.logits.front().name + ")"
                                    : std::string()));
}

Result<RunPairing> pair_runs(const DumpModel& A, const DumpModel& B,
                             const std::vector<std::pair<std::string, std::string>>& explicit_pairs,
                             const std::string& a_path, const std::string& b_path) {
  auto find = [](const DumpModel& m, const std::string& name) -> const LogitsRunInfo* {
    for (const LogitsRunInfo& r : m.logits) {
      if (r.name == name) return &r;
    }
    return nullptr;
  };
  RunPairing out;
  if (!explicit_pairs.empty()) {
    std::set<std::pair<std::string, std::string>> given;
    for (const auto& [first_x, first_y] : explicit_pairs) {
      // A run's name may hold ':' itself (an HDF5 group name can): the pair is the one split of
      // the text at a colon whose halves name a run of A and a run of B.
      const std::string text = first_x + ":" + first_y;
      std::vector<std::pair<const LogitsRunInfo*, const LogitsRunInfo*>> fits;
      for (std::size_t c = text.find(':'); c != std::string::npos; c = text.find(':', c + 1)) {
        const LogitsRunInfo* px = find(A, text.substr(0, c));
        const LogitsRunInfo* py = find(B, text.substr(c + 1));
        if (px && py) fits.emplace_back(px, py);
      }
      if (fits.empty()) {
        const bool has_x = find(A, first_x) != nullptr;
        return Status(
            ErrorCode::kUsage,
            "--pair " + text + ": " + (!has_x ? a_path + " has no run " + first_x : b_path + " has no run " + first_y));
      }
      if (fits.size() > 1) {
        return Status(ErrorCode::kUsage, "--pair " + text + " is ambiguous: it reads as " + fits[0].first->name +
                                             " : " + fits[0].second->name + " and as " + fits[1].first->name + " : " +
                                             fits[1].second->name + " (run names holding ':' pair only one way)");
      }
      const auto [px, py] = fits.front();
      // The same pair twice made two checks of one id (a review's).
      if (!given.emplace(px->name, py->name).second) {
        return Status(ErrorCode::kUsage, "--pair " + text + " is given twice");
      }
      out.pairs.emplace_back(px, py);
    }
    return out;
  }
  std::set<std::string> names;
  for (const auto& r : A.logits) names.insert(r.name);
  for (const auto& r : B.logits) names.insert(r.name);
  for (const std::string& n : names) {
    const LogitsRunInfo* px = find(A, n);
    const LogitsRunInfo* py = find(B, n);
    if (px && py)
      out.pairs.emplace_back(px, py);
    else
      out.one_sided.push_back(std::string("logits/") + n + (px ? " (A only)" : " (B only)"));
  }
  return out;
}

Status check_vocabularies(const RunPairing& p, const std::string& a_path, const std::string& b_path) {
  for (const auto& [x, y] : p.pairs) {
    if (x->vocab != y->vocab) {
      return Status(ErrorCode::kVocabMismatch, "run " + x->name + ": vocab " + std::to_string(x->vocab) + " in " +
                                                   a_path + " but " + std::to_string(y->vocab) + " in " + b_path);
    }
  }
  return Status();
}

namespace {

/// "12 ulps apart (1.5 vs 1.5000007)"; through zero the count is not a closeness (see
/// ulps_cross_zero), so the values lead and the count is named for what it is.
std::string ulp_distance_text(std::uint64_t u, float a, float b) {
  const std::string values = format_f32(a) + " vs " + format_f32(b);
  if (u == reference::kUlpInfinite) return values + " (NaN or infinity: infinitely many ulps)";
  if (ulps_cross_zero(a, b))
    return values + ", opposite signs or a zero (" + std::to_string(u) + " ulps counted through zero; |d| " +
           format_short(std::fabs(static_cast<double>(b) - static_cast<double>(a))) + ")";
  return std::to_string(u) + " ulps apart (" + values + ")";
}

/// "0.0023786097 vs 0.002456665, |d| 7.806e-05, relative 0.03177": two values of logits of
/// different types, where an f32 ulp count would measure the coarser type's spacing.
std::string values_apart_text(float a, float b) {
  return format_f32(a) + " vs " + format_f32(b) + ", |d| " +
         format_short(std::fabs(static_cast<double>(b) - static_cast<double>(a))) + ", relative " +
         format_short(relative_difference(a, b));
}

/// Where the row's two values lie farthest apart (in f32 ulps): ", max ulps at col ...". Between
/// logits of different types an f32 ulp count says little (a bf16 value is 2^16 f32 ulps from
/// its neighbour, and through zero the count spans every float near zero), so there the values
/// are shown with their |d| and relative difference instead.
std::string farthest_text(const RowComparison& x, bool cross_dtype) {
  if (x.max_ulp == 0) return cross_dtype ? std::string(", every value equal") : std::string(", 0 ulps");
  if (!cross_dtype) {
    return ", max ulps at col " + std::to_string(x.max_ulp_col) + ": " +
           ulp_distance_text(x.max_ulp, x.max_ulp_a, x.max_ulp_b);
  }
  return ", at col " + std::to_string(x.max_ulp_col) +
         " (the farthest apart in f32 ulps): " + values_apart_text(x.max_ulp_a, x.max_ulp_b);
}

/// Whether row x breaks the policy, and the one-line failure text when it does. `fork` is the
/// fork at row t under the forks policy (null where the emitted tokens agree).
std::optional<std::string> policy_failure(const RowComparison& x, Index t, const Policy& policy, const Fork* fork,
                                          DType dtype_a, DType dtype_b) {
  const std::string row = "row " + std::to_string(t);
  switch (policy.kind) {
    case Policy::Kind::kBitwise:
      if (x.bit_identical) return std::nullopt;
      return row + " col " + std::to_string(x.first_diff) + " differs (bitwise policy)";
    case Policy::Kind::kUlp:
      if (x.max_ulp <= policy.ulp) return std::nullopt;
      if (dtype_a != dtype_b) {
        // An f32 ulp count between logits of two types measures the coarser type's spacing
        // (a bf16 value is 2^16 f32 ulps from its neighbour), not the runs' agreement.
        return row + " col " + std::to_string(x.max_ulp_col) + ": " + values_apart_text(x.max_ulp_a, x.max_ulp_b) +
               ": ulp:" + std::to_string(policy.ulp) + " counts f32 ulps, which cannot compare " +
               std::string(dtype_name(dtype_a)) + " with " + std::string(dtype_name(dtype_b)) +
               " logits: use the forks policy (the default across dtypes), abs: or kl:";
      }
      return row + " col " + std::to_string(x.max_ulp_col) + ": " +
             ulp_distance_text(x.max_ulp, x.max_ulp_a, x.max_ulp_b) + " > " + std::to_string(policy.ulp) + " ulps";
    case Policy::Kind::kAbs:
      if (x.max_excess <= policy.abs) return std::nullopt;
      return row + " col " + std::to_string(x.max_excess_col) + ": |d| exceeds " + format_float(policy.abs) +
             (policy.rel > 0 ? " + " + format_float(policy.rel) + " max(|a|, |b|)" : std::string()) + " by " +
             format_short(x.max_excess - policy.abs);
    case Policy::Kind::kKl:
      if (x.kl_ab <= policy.kl) return std::nullopt;
      // Where an entry is masked (or not finite) on one side only, the divergence is that
      // entry's, not the largest finite |d|'s (a row whose mask B forgot read "largest |d| at
      // col 0", |d| 0 there).
      if (x.max_ulp == reference::kUlpInfinite && x.max_ulp_col >= 0) {
        return row + ": KL(A||B) = " + format_short(x.kl_ab) + " > " + format_float(policy.kl) +
               " (an entry masked or not finite on one side only, first at col " + std::to_string(x.max_ulp_col) +
               ": " + values_apart_text(x.max_ulp_a, x.max_ulp_b) + ")";
      }
      return row + ": KL(A||B) = " + format_short(x.kl_ab) + " > " + format_float(policy.kl) + " (largest |d| at col " +
             std::to_string(x.max_abs_col) + ")";
    case Policy::Kind::kTop1:
      if (x.argmax_a == x.argmax_b) return std::nullopt;
      return row + ": argmax " + std::to_string(x.argmax_a) + " in A but " + std::to_string(x.argmax_b) + " in B";
    case Policy::Kind::kForks:
      // Where the emitted tokens agree the row passes (as in `forks`); where they differ, only a
      // tie or a near-tie within the envelope does. An undetermined fork (no envelope), which
      // `forks` reports as a SKIP, fails here: a verdict policy cannot leave a divergence unjudged.
      if (!fork || fork->cls == ForkClass::kTie || fork->cls == ForkClass::kNearTie) return std::nullopt;
      return row + " (position " + std::to_string(fork->position) + "): A emits " + std::to_string(fork->token_a) +
             ", B emits " + std::to_string(fork->token_b) + ", a fork `forks` classes as " +
             std::string(fork_class_name(fork->cls)) + ": " + fork->why;
  }
  return std::nullopt;
}

/// The run's rows in at most PositionSeries::kMaxPoints consecutive groups (report/evidence.h).
PositionSeries position_series(const RunComparison& c) {
  PositionSeries s;
  s.rows = c.matched;
  if (c.matched == 0) return s;
  s.rows_per_point = (c.matched + PositionSeries::kMaxPoints - 1) / PositionSeries::kMaxPoints;
  for (Index begin = 0; begin < c.matched; begin += s.rows_per_point) {
    double kl = 0, max_abs = 0;
    Index agree = 0;
    for (Index t = begin; t < std::min(c.matched, begin + s.rows_per_point); ++t) {
      const RowComparison& x = c.rows[static_cast<std::size_t>(t)];
      // A KL that is not finite (NaN or Inf in a row) shows as +inf, above every finite value.
      kl = std::max(kl, std::isfinite(x.kl_ab) ? x.kl_ab : std::numeric_limits<double>::infinity());
      max_abs = std::max(max_abs, x.max_abs);
      agree += x.argmax_a == x.argmax_b;
    }
    s.kl_max.push_back(kl);
    s.max_abs.push_back(max_abs);
    s.top1_agree.push_back(agree);
  }
  return s;
}

/// What one walk over the matched rows adds up beside the evidence it fills directly.
struct RowTotals {
  Index top1 = 0;
  double top5 = 0, top10 = 0, kl_sum = 0;
  Index kl_finite = 0;  ///< rows whose KL(A||B) is finite: kl_mean's divisor
  std::vector<double> kls, maxabs;
  std::string failure;  ///< the first failing row's text
};

/// One pass over the matched rows: the evidence's counts and maxima, and the first failure.
RowTotals walk_rows(const RunComparison& c, const Policy& policy, const RunForks* forks, LogitsEvidence& e) {
  RowTotals s;
  std::map<Index, const Fork*> fork_at;
  if (forks) {
    for (const Fork& f : forks->forks) fork_at[f.row] = &f;
  }
  for (Index t = 0; t < c.matched; ++t) {
    const RowComparison& x = c.rows[static_cast<std::size_t>(t)];
    e.bit_identical_rows += x.bit_identical;
    s.top1 += x.argmax_a == x.argmax_b;
    s.top5 += x.top5_overlap;
    s.top10 += x.top10_overlap;
    e.nonfinite_rows += x.nonfinite;
    if (std::isfinite(x.kl_ab)) {
      s.kl_sum += x.kl_ab;
      ++s.kl_finite;
    }
    if (std::isfinite(x.jsd)) e.jsd_max = std::max(e.jsd_max, x.jsd);
    if (x.max_ulp > e.max_ulp) {
      e.max_ulp = x.max_ulp;
      e.max_ulp_row = t;
      e.max_ulp_col = x.max_ulp_col;
      e.max_ulp_a = x.max_ulp_a;
      e.max_ulp_b = x.max_ulp_b;
    }
    s.kls.push_back(x.kl_ab);
    s.maxabs.push_back(x.max_abs);
    e.failing_elements += x.violations;
    const auto at = fork_at.find(t);
    auto f = policy_failure(x, t, policy, at == fork_at.end() ? nullptr : at->second, c.dtype_a, c.dtype_b);
    if (!f) continue;
    ++e.failing_rows;
    if (e.first_failure_row < 0) {
      e.first_failure_row = t;
      s.failure = *f;
    }
  }
  return s;
}

/// The run as a whole: extents, the policy, means and distributions over the matched rows.
void summarize_run(const RunComparison& c, const Policy& policy, const std::string& source, const RowTotals& s,
                   LogitsEvidence& e) {
  // With no matched row there is no agreement to state: the means are NaN (null in the JSON),
  // not 0, which would read as "every row disagrees".
  const double m = c.matched > 0 ? static_cast<double>(c.matched) : std::numeric_limits<double>::quiet_NaN();
  const double rate = static_cast<double>(s.top1) / m;
  e.rows_a = c.rows_a;
  e.rows_b = c.rows_b;
  e.compared = c.compared;
  e.matched = c.matched;
  e.unmatched = std::max(c.rows_a, c.rows_b) - c.matched;
  e.divergence_row = c.divergence;
  e.prompts_equal = c.prompts_equal;
  e.vocab = c.vocab;
  e.policy = policy.text;
  e.policy_source = source;
  e.dtype_a = c.dtype_a;
  e.dtype_b = c.dtype_b;
  e.element_policy = policy.element_wise();
  e.top1_agreement = rate;
  e.top1_agreement_stderr = std::sqrt(rate * (1 - rate) / m);
  e.top5_overlap_mean = s.top5 / m;
  e.top10_overlap_mean = s.top10 / m;
  e.kl_mean = s.kl_finite > 0 ? s.kl_sum / static_cast<double>(s.kl_finite) : std::numeric_limits<double>::quiet_NaN();
  e.kl_ab = distribution(s.kls);
  e.max_abs_diff = distribution(s.maxabs);
  e.timing_seconds = c.seconds;
  e.series = position_series(c);
  // Per-row detail for the first rows (small runs) keeps reports useful without growing with T.
  for (Index t = 0; t < std::min<Index>(c.matched, 16); ++t)
    e.first_rows.push_back(c.rows[static_cast<std::size_t>(t)]);
}

/// Where the histories never diverge but one run holds more rows (a run stopped early, or ran
/// on), the rows beyond the shorter are not compared, and the reason says so ("" otherwise: the
/// unmatched rows after a divergence count them).
std::string length_text(const RunComparison& c) {
  if (c.rows_a == c.rows_b || c.compared > c.matched) return "";
  const bool a_longer = c.rows_a > c.rows_b;
  return "; " + std::string(a_longer ? "A" : "B") + " holds " + std::to_string(std::max(c.rows_a, c.rows_b)) +
         " rows, " + (a_longer ? "B " : "A ") + std::to_string(std::min(c.rows_a, c.rows_b)) + ": " +
         (a_longer ? "A's" : "B's") + " last " + std::to_string(std::abs(c.rows_a - c.rows_b)) + " are not compared";
}

/// The rows after a divergence, counted in each run where their lengths differ: "22 row(s)", or
/// "A's 22 and B's 10 row(s)" (the JSON's `unmatched` is the longer run's count).
std::string unmatched_text(const RunComparison& c) {
  const Index a = c.rows_a - c.matched, b = c.rows_b - c.matched;
  if (a == b) return std::to_string(a) + " row(s)";
  return "A's " + std::to_string(a) + " and B's " + std::to_string(b) + " row(s)";
}

/// A FAIL: the first failing row's text and how much breaks, the failing row in full, the run.
void fail(const RunComparison& c, const std::string& failure, const LogitsEvidence& e, CheckResult& r) {
  const RowComparison& x = c.rows[static_cast<std::size_t>(e.first_failure_row)];
  r.verdict = Verdict::kFail;
  // How much breaks, not only where first: one stray element and a whole broken run read
  // differently.
  r.reason = failure + "; " + std::to_string(e.failing_rows) + " of " + std::to_string(c.matched) +
             " matched row(s) break the policy" +
             (e.element_policy ? " (" + std::to_string(e.failing_elements) + " of " +
                                     std::to_string(c.matched * c.vocab) + " elements)"
                               : std::string()) +
             (c.compared > c.matched ? "; " + unmatched_text(c) + " after the histories diverge at row " +
                                           std::to_string(c.divergence) + " are not compared"
                                     : std::string()) +
             length_text(c);
  r.first_failure = Location{r.id, e.first_failure_row, -1};
  // The failing row in full, and how the run looks overall, for the human summary.
  r.details.push_back("row " + std::to_string(e.first_failure_row) + ": max |d| " + format_short(x.max_abs) +
                      " at col " + std::to_string(x.max_abs_col) + farthest_text(x, c.dtype_a != c.dtype_b) +
                      ", mean |d| " + format_short(x.mean_abs) + ", KL(A||B) " + format_short(x.kl_ab) + ", KL(B||A) " +
                      format_short(x.kl_ba) + ", JSD " + format_short(x.jsd) + ", argmax " +
                      std::to_string(x.argmax_a) + " / " + std::to_string(x.argmax_b) + ", top-5 overlap " +
                      format_short(x.top5_overlap));
  r.details.push_back("run: " + std::to_string(e.bit_identical_rows) + " of " + std::to_string(c.matched) +
                      " matched rows bit-identical, top-1 agreement " + format_short(100 * e.top1_agreement) +
                      "%, KL(A||B) p50 " + format_short(e.kl_ab.p50) + ", max " + format_short(e.kl_ab.max) +
                      ", max |d| " + format_short(e.max_abs_diff.max));
  r.details.push_back("policy " + e.policy + " (" + e.policy_source + ")");
}

/// "token streams identical: no fork" or "2 fork(s), 1 tie and 1 near-tie".
std::string fork_summary(const std::vector<Fork>& forks) {
  if (forks.empty()) return "token streams identical: no fork";
  Index tie = 0;
  for (const Fork& f : forks) tie += f.cls == ForkClass::kTie;
  return std::to_string(forks.size()) + " fork(s), " + std::to_string(tie) + " tie and " +
         std::to_string(static_cast<Index>(forks.size()) - tie) + " near-tie";
}

}  // namespace

std::pair<Policy, std::string> default_policy(DType a, DType b) {
  if (a != b) {
    return {*parse_policy("forks"), "default: A's logits are " + std::string(dtype_name(a)) + ", B's " +
                                        std::string(dtype_name(b)) +
                                        ": they cannot be bit-identical, and a tie in the coarser type may pick "
                                        "either token"};
  }
  return {Policy{}, "default: both runs' logits are " + std::string(dtype_name(a))};
}

std::string empty_run_text(Index rows_a, Index rows_b) {
  if (rows_a == 0 && rows_b == 0) return "both runs hold no rows";
  return std::string(rows_a == 0 ? "A" : "B") + "'s run holds no rows, " + (rows_a == 0 ? "B" : "A") + "'s " +
         std::to_string(std::max(rows_a, rows_b));
}

CheckResult logits_check(const RunComparison& c, const Policy& policy, const std::string& source,
                         const RunForks* forks) {
  CheckResult r;
  r.id = "logits/" + (c.run_a == c.run_b ? c.run_a : c.run_a + ":" + c.run_b);
  r.kind = CheckKind::kLogits;
  LogitsEvidence e;
  const RowTotals totals = walk_rows(c, policy, forks, e);
  summarize_run(c, policy, source, totals, e);
  if (policy.kind == Policy::Kind::kForks && forks) e.forks = forks->forks;
  if (e.first_failure_row >= 0) {
    fail(c, totals.failure, e, r);
  } else if (c.matched == 0) {
    r.verdict = Verdict::kFail;
    if (c.compared == 0) {
      r.reason = "no matched rows to judge: " + empty_run_text(c.rows_a, c.rows_b);
    } else {
      r.reason = "no matched rows to judge (" +
                 std::string(c.prompts_equal ? "the first tokens differ" : "the prompts differ") +
                 "); use --matched-history for teacher-forced runs";
    }
  } else {
    const std::string extent =
        std::to_string(c.matched) + " matched row(s)" +
        (c.compared > c.matched ? ", " + unmatched_text(c) + " unmatched after the histories diverge at row " +
                                      std::to_string(c.divergence)
                                : std::string()) +
        length_text(c);
    r.reason = "policy " + policy.text + " (" + source + ") holds on " + extent + "; " +
               (policy.kind == Policy::Kind::kForks ? fork_summary(e.forks) + "; " : std::string()) +
               std::to_string(e.bit_identical_rows) + " bit-identical, top-1 agreement " +
               format_short(100 * e.top1_agreement) + "%, KL(A||B) max " +
               format_short(totals.kls.empty() ? 0 : *std::max_element(totals.kls.begin(), totals.kls.end()));
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
