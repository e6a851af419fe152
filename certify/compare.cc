#include "certify/compare.h"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "certify/row_stream.h"
#include "reference/float_bits.h"

namespace ncert::certify {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool parse_double(std::string_view s, double* out) {
  const std::string str(s);
  char* end = nullptr;
  *out = std::strtod(str.c_str(), &end);
  return !str.empty() && end == str.c_str() + str.size() && std::isfinite(*out) && *out >= 0;
}

}  // namespace

Result<Policy> parse_policy(std::string_view s) {
  Policy p;
  p.text = std::string(s);
  auto bad = [&] {
    return Status(ErrorCode::kPolicyInvalid, "policy \"" + std::string(s) +
                                                 "\" is not one of bitwise, ulp:N, abs:A[,rel:R], kl:X, top1");
  };
  if (s == "bitwise") return p;
  if (s == "top1") {
    p.kind = Policy::Kind::kTop1;
    return p;
  }
  if (s.substr(0, 4) == "ulp:") {
    std::uint64_t n = 0;
    const auto v = s.substr(4);
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || ptr != v.data() + v.size()) return bad();
    p.kind = Policy::Kind::kUlp;
    p.ulp = n;
    return p;
  }
  if (s.substr(0, 3) == "kl:") {
    if (!parse_double(s.substr(3), &p.kl)) return bad();
    p.kind = Policy::Kind::kKl;
    return p;
  }
  if (s.substr(0, 4) == "abs:") {
    std::string_view rest = s.substr(4);
    const std::size_t comma = rest.find(',');
    if (!parse_double(rest.substr(0, comma), &p.abs)) return bad();
    if (comma != std::string_view::npos) {
      const std::string_view r = rest.substr(comma + 1);
      if (r.substr(0, 4) != "rel:" || !parse_double(r.substr(4), &p.rel)) return bad();
    }
    p.kind = Policy::Kind::kAbs;
    return p;
  }
  return bad();
}

Result<Policy> parse_tensor_policy(std::string_view s) {
  NCERT_ASSIGN_OR_RETURN(Policy p, parse_policy(s));
  if (p.kind == Policy::Kind::kKl || p.kind == Policy::Kind::kTop1) {
    return Status(ErrorCode::kPolicyInvalid,
                  "policy \"" + std::string(s) + "\" applies to logits only; tensors take bitwise, ulp:N or abs:A[,rel:R]");
  }
  return p;
}

Result<RunComparison> compare_runs(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b,
                                   const LogitsRunInfo& rb, bool matched_history, double rel, FileHashCursor* hash_a,
                                   FileHashCursor* hash_b) {
  const auto t0 = std::chrono::steady_clock::now();
  if (ra.vocab != rb.vocab) {
    return Status(ErrorCode::kVocabMismatch, "runs " + ra.name + " (" + a.model().file + ", vocab " +
                                                 std::to_string(ra.vocab) + ") and " + rb.name + " (" +
                                                 b.model().file + ", vocab " + std::to_string(rb.vocab) +
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
  const Index per_block = block_rows_for({a.model().dataset(ra.path + "/logits"), b.model().dataset(rb.path + "/logits")},
                                         16 << 20, 64);
  NCERT_ASSIGN_OR_RETURN(RowStream sa, RowStream::open(a, ra.path + "/logits", per_block, hash_a));
  NCERT_ASSIGN_OR_RETURN(RowStream sb, RowStream::open(b, rb.path + "/logits", per_block, hash_b));
  std::vector<CompareScratch> scratch(static_cast<std::size_t>(omp_get_max_threads()));
  RowStream* streams[] = {&sa, &sb};
  NCERT_RETURN_IF_ERROR(stream_rows(streams, c.matched, [&](Index t, const unsigned char* const* rows) {
    c.rows[static_cast<std::size_t>(t)] =
        compare_rows(reinterpret_cast<const float*>(rows[0]), reinterpret_cast<const float*>(rows[1]), c.vocab,
                     c.tokens_a[static_cast<std::size_t>(t)], rel, scratch[static_cast<std::size_t>(omp_get_thread_num())]);
  }));
  c.seconds = since(t0);
  return c;
}

namespace {

/// Nearest-rank percentile of sorted values (p in [0, 100]).
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const std::size_t i = static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[i];
}

Json distribution(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return Json::object();
  return Json{{"max", v.back()},           {"p99.9", percentile(v, 99.9)}, {"p99", percentile(v, 99)},
              {"p95", percentile(v, 95)},  {"p90", percentile(v, 90)},     {"p50", percentile(v, 50)},
              {"min", v.front()}};
}

Json number_or_text(double v) { return std::isfinite(v) ? Json(v) : Json(format_float(v)); }

}  // namespace

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
    for (const auto& [x, y] : explicit_pairs) {
      const LogitsRunInfo* px = find(A, x);
      const LogitsRunInfo* py = find(B, y);
      if (!px || !py) {
        return Status(ErrorCode::kUsage,
                      "--pair " + x + ":" + y + ": " + (!px ? a_path + " has no run " + x : b_path + " has no run " + y));
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
    if (px && py) out.pairs.emplace_back(px, py);
    else out.one_sided.push_back(std::string("logits/") + n + (px ? " (A only)" : " (B only)"));
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

CheckResult logits_check(const RunComparison& c, const Policy& policy) {
  CheckResult r;
  r.id = "logits/" + (c.run_a == c.run_b ? c.run_a : c.run_a + ":" + c.run_b);
  r.kind = "logits";
  Index identical = 0, top1 = 0, nonfinite = 0;
  double top5 = 0, top10 = 0, kl_sum = 0, jsd_max = 0;
  std::uint64_t max_ulp = 0;
  std::vector<double> kls, maxabs;
  Index failed_row = -1;
  std::string failure;
  for (Index t = 0; t < c.matched; ++t) {
    const RowComparison& x = c.rows[static_cast<std::size_t>(t)];
    identical += x.bit_identical;
    top1 += x.argmax_a == x.argmax_b;
    top5 += x.top5_overlap;
    top10 += x.top10_overlap;
    nonfinite += x.nonfinite;
    if (std::isfinite(x.kl_ab)) kl_sum += x.kl_ab;
    if (std::isfinite(x.jsd)) jsd_max = std::max(jsd_max, x.jsd);
    max_ulp = std::max(max_ulp, x.max_ulp);
    kls.push_back(x.kl_ab);
    maxabs.push_back(x.max_abs);
    if (failed_row >= 0) continue;
    const std::string row = "row " + std::to_string(t);
    switch (policy.kind) {
      case Policy::Kind::kBitwise:
        if (!x.bit_identical) {
          failed_row = t;
          failure = row + " col " + std::to_string(x.first_diff) + " differs (bitwise policy)";
        }
        break;
      case Policy::Kind::kUlp:
        if (x.max_ulp > policy.ulp) {
          failed_row = t;
          failure = row + " col " + std::to_string(x.max_ulp_col) + " is " +
                    (x.max_ulp == reference::kUlpInfinite ? std::string("infinitely many") : std::to_string(x.max_ulp)) +
                    " ulps apart > " + std::to_string(policy.ulp);
        }
        break;
      case Policy::Kind::kAbs:
        if (!(x.max_excess <= policy.abs)) {
          failed_row = t;
          failure = row + " col " + std::to_string(x.max_excess_col) + ": |d| exceeds " + format_float(policy.abs) +
                    (policy.rel > 0 ? " + " + format_float(policy.rel) + " max(|a|, |b|)" : std::string()) + " by " +
                    format_short(x.max_excess - policy.abs);
        }
        break;
      case Policy::Kind::kKl:
        if (!(x.kl_ab <= policy.kl)) {
          failed_row = t;
          failure = row + ": KL(A||B) = " + format_short(x.kl_ab) + " > " + format_float(policy.kl) +
                    " (largest |d| at col " + std::to_string(x.max_abs_col) + ")";
        }
        break;
      case Policy::Kind::kTop1:
        if (x.argmax_a != x.argmax_b) {
          failed_row = t;
          failure = row + ": argmax " + std::to_string(x.argmax_a) + " in A but " + std::to_string(x.argmax_b) + " in B";
        }
        break;
    }
  }
  const double m = static_cast<double>(std::max<Index>(c.matched, 1));
  const double rate = static_cast<double>(top1) / m;
  r.stats = Json{{"rows_a", c.rows_a},
                 {"rows_b", c.rows_b},
                 {"compared", c.compared},
                 {"matched", c.matched},
                 {"unmatched", std::max(c.rows_a, c.rows_b) - c.matched},
                 {"divergence_row", c.divergence},
                 {"prompts_equal", c.prompts_equal},
                 {"vocab", c.vocab},
                 {"policy", policy.text},
                 {"bit_identical_rows", identical},
                 {"nonfinite_rows", nonfinite},
                 {"max_ulp", max_ulp == reference::kUlpInfinite ? Json("inf") : Json(max_ulp)},
                 {"top1_agreement", rate},
                 {"top1_agreement_stderr", std::sqrt(rate * (1 - rate) / m)},
                 {"top5_overlap_mean", top5 / m},
                 {"top10_overlap_mean", top10 / m},
                 {"kl_mean", kl_sum / m},
                 {"jsd_max", jsd_max},
                 {"kl_ab", distribution(kls)},
                 {"max_abs_diff", distribution(maxabs)},
                 {"timing_seconds", c.seconds}};
  // Per-row detail for the first rows (small runs) keeps reports useful without growing with T.
  Json rows = Json::array();
  for (Index t = 0; t < std::min<Index>(c.matched, 16); ++t) {
    const RowComparison& x = c.rows[static_cast<std::size_t>(t)];
    rows.push_back(Json{{"row", t}, {"matched", true}, {"bit_identical", x.bit_identical},
                        {"max_abs", x.max_abs}, {"max_abs_col", x.max_abs_col},
                        {"max_ulp", x.max_ulp == reference::kUlpInfinite ? Json("inf") : Json(x.max_ulp)},
                        {"mean_abs", x.mean_abs}, {"rms_centered", x.rms_centered},
                        {"argmax_a", x.argmax_a}, {"argmax_b", x.argmax_b},
                        {"top5_overlap", x.top5_overlap}, {"top10_overlap", x.top10_overlap},
                        {"kl_ab", number_or_text(x.kl_ab)}, {"kl_ba", number_or_text(x.kl_ba)},
                        {"jsd", number_or_text(x.jsd)}, {"dp_token", number_or_text(x.dp_token)},
                        {"rank_in_b", x.rank_in_b}});
  }
  r.stats["first_rows"] = rows;
  const std::string extent = std::to_string(c.matched) + " matched row(s)" +
                             (c.compared > c.matched ? ", " + std::to_string(std::max(c.rows_a, c.rows_b) - c.matched) +
                                                           " unmatched after the histories diverge at row " +
                                                           std::to_string(c.divergence)
                                                     : std::string());
  if (failed_row >= 0) {
    r.verdict = Verdict::kFail;
    r.reason = failure + "; " + extent;
    r.stats["first_failure_row"] = failed_row;
    // The failing row in full, and how the run looks overall, for the human summary.
    const RowComparison& x = c.rows[static_cast<std::size_t>(failed_row)];
    r.details.push_back("row " + std::to_string(failed_row) + ": max |d| " + format_short(x.max_abs) + " at col " +
                        std::to_string(x.max_abs_col) + ", max " +
                        (x.max_ulp == reference::kUlpInfinite ? std::string("inf") : std::to_string(x.max_ulp)) +
                        " ulps at col " + std::to_string(x.max_ulp_col) + ", mean |d| " + format_short(x.mean_abs) +
                        ", KL(A||B) " + format_short(x.kl_ab) + ", KL(B||A) " + format_short(x.kl_ba) + ", JSD " +
                        format_short(x.jsd) + ", argmax " + std::to_string(x.argmax_a) + " / " +
                        std::to_string(x.argmax_b) + ", top-5 overlap " + format_short(x.top5_overlap));
    r.details.push_back("run: " + std::to_string(identical) + " of " + std::to_string(c.matched) +
                        " matched rows bit-identical, top-1 agreement " + format_short(100 * rate) + "%, KL(A||B) p50 " +
                        format_short(r.stats["kl_ab"].value("p50", 0.0)) + ", max " +
                        format_short(r.stats["kl_ab"].value("max", 0.0)) + ", max |d| " +
                        format_short(r.stats["max_abs_diff"].value("max", 0.0)));
  } else if (c.matched == 0) {
    r.verdict = Verdict::kFail;
    r.reason = "no matched rows to judge (" + std::string(c.prompts_equal ? "the first tokens differ" : "the prompts differ") +
               "); use --matched-history for teacher-forced runs";
  } else {
    r.reason = "policy " + policy.text + " holds on " + extent + "; " + std::to_string(identical) +
               " bit-identical, top-1 agreement " + format_short(100 * rate) + "%, KL(A||B) max " +
               format_short(kls.empty() ? 0 : *std::max_element(kls.begin(), kls.end()));
  }
  return r;
}

namespace {

float element(const unsigned char* base, DType t, Index i) { return reference::decode_element(base, t, i); }

std::uint64_t element_ulps(const unsigned char* a, const unsigned char* b, DType t, Index i) {
  if (t == DType::kF32) return reference::ulp_distance_f32(element(a, t, i), element(b, t, i));
  std::uint16_t x, y;
  std::memcpy(&x, a + i * 2, 2);
  std::memcpy(&y, b + i * 2, 2);
  return t == DType::kBf16 ? reference::ulp_distance_bf16(x, y) : reference::ulp_distance_f16(x, y);
}

std::string index_text(const std::vector<Index>& shape, Index flat) {
  std::vector<Index> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (std::size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

Result<CheckResult> tensor_check(const DumpReader& a, const TensorInfo& ta, const DumpReader& b,
                                 const TensorInfo& tb, const Policy& policy, bool overridden) {
  CheckResult r;
  r.id = "tensors/" + ta.name;
  r.kind = "tensor";
  r.stats = Json{{"policy", policy.text}, {"dtype", std::string(dtype_name(ta.dtype))}, {"shape", ta.shape}};
  if (!overridden && ta.compare != tb.compare) r.stats["note"] = "compare attributes differ; A's is used";
  if (ta.dtype != tb.dtype || ta.shape != tb.shape) {
    r.verdict = Verdict::kFail;
    r.reason = "A is " + std::string(dtype_name(ta.dtype)) + " " + Json(ta.shape).dump() + ", B is " +
               std::string(dtype_name(tb.dtype)) + " " + Json(tb.shape).dump();
    return r;
  }
  const DatasetInfo* da = a.model().dataset(ta.path);
  Index elements = da ? da->elements : 0;
  Index differ = 0, first = -1;
  double max_abs = 0;
  std::uint64_t max_ulp = 0;
  std::string first_text;
  auto judge = [&](const unsigned char* pa, const unsigned char* pb, Index n, Index base) {
    const int size = dtype_size(ta.dtype);
    for (Index i = 0; i < n; ++i) {
      const bool same = std::memcmp(pa + i * size, pb + i * size, static_cast<std::size_t>(size)) == 0;
      const float x = element(pa, ta.dtype, i), y = element(pb, ta.dtype, i);
      const double d = std::fabs(static_cast<double>(y) - static_cast<double>(x));
      if (std::isfinite(d)) max_abs = std::max(max_abs, d);
      const std::uint64_t u = same ? 0 : element_ulps(pa, pb, ta.dtype, i);
      max_ulp = std::max(max_ulp, u);
      bool ok = same;
      if (!same) {
        switch (policy.kind) {
          case Policy::Kind::kUlp: ok = u <= policy.ulp; break;
          case Policy::Kind::kAbs:
            ok = d <= policy.abs + policy.rel * std::max(std::fabs(static_cast<double>(x)), std::fabs(static_cast<double>(y)));
            break;
          default: ok = false; break;
        }
      }
      if (!ok && differ++ == 0) {
        first = base + i;
        first_text = "element " + index_text(ta.shape, base + i) + ": A " + format_float(x) + " vs B " + format_float(y) +
                     (u == reference::kUlpInfinite ? "" : " (" + std::to_string(u) + " ulps)");
      }
    }
  };
  if (ta.shape.empty()) {
    NCERT_ASSIGN_OR_RETURN(auto xa, a.read_bytes(ta.path));
    NCERT_ASSIGN_OR_RETURN(auto xb, b.read_bytes(tb.path));
    judge(xa.data(), xb.data(), 1, 0);
  } else {
    // Blocks of about 16 MiB whatever the shape (a KV cache's first dimension may be layers).
    const Index per_row = da ? da->row_elements() : 0;
    const Index per_block = block_rows_for({da, b.model().dataset(tb.path)}, 16 << 20, 4096);
    NCERT_ASSIGN_OR_RETURN(RowStream sa, RowStream::open(a, ta.path, per_block));
    NCERT_ASSIGN_OR_RETURN(RowStream sb, RowStream::open(b, tb.path, per_block));
    for (;;) {
      NCERT_ASSIGN_OR_RETURN(RowBlock ba, sa.next());
      NCERT_ASSIGN_OR_RETURN(RowBlock bb, sb.next());
      if (ba.rows == 0) break;
      judge(ba.data, bb.data, ba.rows * per_row, ba.first_row * per_row);
    }
  }
  r.stats["elements"] = elements;
  r.stats["violations"] = differ;
  r.stats["max_abs_diff"] = max_abs;
  r.stats["max_ulp"] = max_ulp == reference::kUlpInfinite ? Json("inf") : Json(max_ulp);
  if (differ > 0) {
    r.verdict = Verdict::kFail;
    r.reason = first_text + " breaks " + policy.text + "; " + std::to_string(differ) + " of " +
               std::to_string(elements) + " elements";
    r.stats["first_failure"] = first;
  } else {
    r.reason = std::to_string(elements) + " elements hold under " + policy.text + " (max |d| " + format_short(max_abs) + ")";
  }
  return r;
}

Result<Report> compare_files(const CompareOptions& o, InputHashes& hashes) {
  const auto t0 = std::chrono::steady_clock::now();
  Report report;
  report.command = "compare";
  auto refuse = [&](const Status& s) { return report.refuse(s); };
  auto ra = DumpReader::open(o.a, o.reader);
  if (!ra.ok()) return refuse(ra.status());
  auto rb = DumpReader::open(o.b, o.reader);
  if (!rb.ok()) return refuse(rb.status());
  const DumpModel& A = ra->model();
  const DumpModel& B = rb->model();
  report.preamble.push_back("ncert compare " + o.a + " (" + A.engine + " " + A.build + ") vs " + o.b + " (" + B.engine +
                            " " + B.build + ")");

  NCERT_ASSIGN_OR_RETURN(RunPairing paired, pair_runs(A, B, o.pairs, o.a, o.b));
  const auto& pairs = paired.pairs;
  const auto& one_sided = paired.one_sided;
  std::set<std::string> tensor_names;
  for (const auto& t : A.tensors) tensor_names.insert(t.name);
  for (const auto& t : B.tensors) tensor_names.insert(t.name);
  if (pairs.empty() && tensor_names.empty()) {
    return refuse(Status(ErrorCode::kNoCommonRuns, o.a + " and " + o.b + " share no logits run or tensor to compare"));
  }
  if (Status s = check_vocabularies(paired, o.a, o.b); !s.ok()) return refuse(s);
  Index bytes = 0;
  for (const auto& [x, y] : pairs) {
    NCERT_ASSIGN_OR_RETURN(RunComparison c, compare_runs(*ra, *x, *rb, *y, o.matched_history, o.policy.rel,
                                                         hashes.cursor(0), hashes.cursor(1)));
    bytes += 2 * c.matched * c.vocab * 4;
    report.checks.push_back(logits_check(c, o.policy));
  }
  for (const std::string& s : one_sided) {
    CheckResult c;
    c.id = s.substr(0, s.find(' '));
    c.kind = "logits";
    c.verdict = o.allow_missing ? Verdict::kPass : Verdict::kFail;
    c.reason = "present in " + s.substr(s.find('(') + 1, 1) + " only" + (o.allow_missing ? " (allowed by --allow-missing)" : "");
    report.checks.push_back(std::move(c));
  }
  for (const std::string& n : tensor_names) {
    const TensorInfo* ta = nullptr;
    const TensorInfo* tb = nullptr;
    for (const auto& t : A.tensors) if (t.name == n) ta = &t;
    for (const auto& t : B.tensors) if (t.name == n) tb = &t;
    if (!ta || !tb) {
      CheckResult c;
      c.id = "tensors/" + n;
      c.kind = "tensor";
      c.verdict = o.allow_missing ? Verdict::kPass : Verdict::kFail;
      c.reason = std::string("present in ") + (ta ? "A" : "B") + " only" + (o.allow_missing ? " (allowed by --allow-missing)" : "");
      report.checks.push_back(std::move(c));
      continue;
    }
    Policy p;
    bool overridden = false;
    if (o.tensor_policy) {
      p = *o.tensor_policy;
      overridden = true;
    } else if (!ta->compare.empty()) {
      auto parsed = parse_tensor_policy(ta->compare);
      if (!parsed.ok()) return refuse(Status(parsed.status().code(), ta->path + ": compare = \"" + ta->compare + "\": " + parsed.status().message()));
      p = *parsed;
    }
    NCERT_ASSIGN_OR_RETURN(CheckResult c, tensor_check(*ra, *ta, *rb, *tb, p, overridden));
    const DatasetInfo* d = A.dataset(ta->path);
    if (d) bytes += 2 * d->bytes;
    report.checks.push_back(std::move(c));
  }
  const double seconds = since(t0);
  report.stats["runs"] = pairs.size();
  report.stats["tensors"] = tensor_names.size();
  report.stats["bytes_compared"] = bytes;
  report.stats["timing_seconds"] = seconds;
  report.stats["timing_gb_per_second"] = seconds > 0 ? static_cast<double>(bytes) / seconds * 1e-9 : 0;
  return report;
}

}  // namespace

Result<Report> run_compare(const CompareOptions& o) {
  InputHashes hashes({o.a, o.b});
  Result<Report> r = compare_files(o, hashes);
  if (r.ok()) r->inputs = hashes.finish();
  return r;
}

}  // namespace ncert::certify
