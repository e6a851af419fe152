#include "certify/logits/witness.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include "certify/io/hash.h"
#include "certify/io/row_stream.h"
#include "certify/logits/detail/logits_row.h"
#include "certify/logits/detail/simd_max.h"
#include "certify/report/format.h"
#include "certify/report/progress.h"
#include "reference/float_bits.h"

namespace ncert::certify {

namespace {

/// First index in [from, n) whose value equals v, scanning 64 at a time with a vectorizable
/// "any" test before the exact search.
Index find_first(const float* row, Index from, Index n, float v) {
  Index j = from;
  for (; j + 64 <= n; j += 64) {
    int hit = 0;
#pragma omp simd reduction(| : hit)
    for (Index i = 0; i < 64; ++i) hit |= row[j + i] == v;
    if (hit) break;
  }
  for (; j < n; ++j) {
    if (row[j] == v) return j;
  }
  return -1;
}

}  // namespace

RowScan scan_row(const float* row, Index vocab) {
  RowScan s;
  float m = -std::numeric_limits<float>::infinity();
  Index nan = 0, pinf = 0;
  // Pass 1: the maximum (NaN never compares greater) and the special values.
#pragma omp simd reduction(max : m) reduction(+ : nan, pinf)
  for (Index j = 0; j < vocab; ++j) {
    const float v = row[j];
    m = v > m ? v : m;
    nan += v != v;
    pinf += v == std::numeric_limits<float>::infinity();
  }
  s.max = m = detail::simd_max_result(m, row, vocab);
  s.nan = nan;
  s.pos_inf = pinf;
  if (nan) {
    for (Index j = 0; j < vocab; ++j) {
      if (row[j] != row[j]) {
        s.first_nan = j;
        break;
      }
    }
  }
  if (pinf) s.first_pos_inf = find_first(row, 0, vocab, std::numeric_limits<float>::infinity());
  // Pass 2: ties at the maximum and the largest value below it.
  Index ties = 0;
  float r = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(+ : ties) reduction(max : r)
  for (Index j = 0; j < vocab; ++j) {
    const float v = row[j];
    ties += v == m;
    r = (v < m && v > r) ? v : r;
  }
  s.ties = ties;
  s.runner_up = r = detail::simd_max_result(r, row, vocab, m);  // the largest value below m
  s.argmax = find_first(row, 0, vocab, m);
  if (ties >= 2) s.tie_second = find_first(row, s.argmax + 1, vocab, m);
  if (ties < vocab) s.runner_up_index = find_first(row, 0, vocab, r);  // r may be -inf (masked)
  return s;
}

double ulps_of_type(double x, float at, DType t) {
  if (!std::isfinite(at)) return x / reference::ulp_of_f32(at);
  return x / reference::spacing_of_type(std::fabs(static_cast<double>(at)), t);
}

namespace {

/// Said where the emission is not the one greedy decoding picks: the run may not be greedy at all.
constexpr std::string_view kGreedyNote =
    " (witness certifies greedy decoding: a token sampled, or chosen after a temperature, top-k or mask the logits do "
    "not hold, is not its row's maximum)";

/// Why the lm_head's intervals refute the emission ("" where they do not): the emitted logit
/// outside its own interval, or another token's interval wholly above it. Either way a value
/// of the row is outside its interval: were both in theirs, the other token's logit would
/// exceed the emitted one, which is the row's maximum. Such a margin certifies nothing, and
/// the emission is no near-tie (a reviewer's lm_head with +0.5 planted on a runner-up read
/// "1 near-tie" and passed).
std::string refutation(const RowIntervals& iv, float logit, std::int32_t token) {
  // Built by appending: GCC 12 warns (-Wrestrict, falsely) on "[" + std::string here.
  std::string interval(1, '[');
  interval.append(format_f32(iv.token_lo)).append(", ").append(format_f32(iv.token_hi)).append("]");
  if (iv.token_seen && (logit < iv.token_lo || logit > iv.token_hi)) {
    return "emitted token " + std::to_string(token) + "'s logit " + format_f32(logit) +
           " lies outside its reference interval " + interval + ": the logit itself is wrong";
  }
  const bool best_is_token = iv.best_lo_col == token;
  const float lo = best_is_token ? iv.second_lo : iv.best_lo;
  const Index col = best_is_token ? iv.second_lo_col : iv.best_lo_col;
  if (iv.token_seen && col >= 0 && lo > iv.token_hi) {
    return "the reference refutes emitted token " + std::to_string(token) + ": token " + std::to_string(col) +
           "'s exact logit is at least " + format_f32(lo) + ", above token " + std::to_string(token) + "'s interval " +
           interval + ", so a logit of the row lies outside its interval";
  }
  return "";
}

}  // namespace

Witness witness_row(const float* row, Index vocab, const RowScan& scan, std::int32_t token,
                    const LogitErrorModel& model, Index row_index, DType logits_dtype) {
  Witness w;
  w.logits_dtype = logits_dtype;
  w.row = row_index;
  w.position = row_index;
  w.token = token;
  w.ties = static_cast<std::int32_t>(scan.ties);
  w.row_xxh3 = xxh3_128_hex(row, static_cast<std::size_t>(vocab) * 4);
  auto fail = [&](std::string why) {
    w.ok = false;
    w.failure = std::move(why);
    return w;
  };
  if (token < 0 || token >= vocab) {
    return fail("token " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  w.logit = row[token];
  const std::string tok_text = "token " + std::to_string(token) + " (logit " + format_f32(w.logit) + ")";
  const std::string max_text = "the maximum " + format_f32(scan.max) + " is at token " + std::to_string(scan.argmax);
  if (scan.nan) {
    return fail("row holds " + std::to_string(scan.nan) + " NaN, first at token " + std::to_string(scan.first_nan) +
                "; " + tok_text + " cannot be certified");
  }
  if (scan.pos_inf) {
    return fail("row holds +Inf at token " + std::to_string(scan.first_pos_inf) + "; " + tok_text +
                " cannot be certified");
  }
  if (std::isinf(w.logit) && w.logit < 0) {
    return fail("emitted " + tok_text + " is masked (-Inf); " + max_text + std::string(kGreedyNote));
  }
  if (w.logit < scan.max) {
    return fail("emitted " + tok_text + " is not the maximum: " + max_text + std::string(kGreedyNote));
  }
  if (token != scan.argmax) {
    return fail("emitted " + tok_text + " ties the maximum but tie_break = lowest picks token " +
                std::to_string(scan.argmax) + std::string(kGreedyNote));
  }
  // The runner-up: the other maximum in a tie, else the largest value below.
  if (scan.ties >= 2) {
    w.runner_up = static_cast<std::int32_t>(scan.tie_second);
    w.runner_up_logit = scan.max;
  } else {
    w.runner_up = static_cast<std::int32_t>(scan.runner_up_index);
    w.runner_up_logit = scan.runner_up;
  }
  w.margin = static_cast<double>(w.logit) - static_cast<double>(w.runner_up_logit);
  w.margin_ulps = w.margin / reference::ulp_of_f32(w.logit);
  w.margin_dtype_ulps = ulps_of_type(w.margin, w.logit, logits_dtype);
  if (model.kind == LogitErrorModel::Kind::kLmHead) {
    if (const std::string why = refutation(model.intervals[static_cast<std::size_t>(row_index)], w.logit, token);
        !why.empty()) {
      return fail(why + " (" + model.source + "; check's bound names the values outside)");
    }
  }
  if (scan.ties >= 2) {
    w.cls = WitnessClass::kTie;
    return w;
  }
  switch (model.kind) {
    case LogitErrorModel::Kind::kNone:
      w.cls = WitnessClass::kUnbounded;
      break;
    case LogitErrorModel::Kind::kAbsolute:
      // Stability lemma (docs/error-bounds.md §8): |g_j - r_j| <= e for all j and a margin > 2e
      // keep the argmax of the true logits.
      w.certified_gap = w.margin - 2 * model.absolute;
      w.cls = w.certified_gap > 0 ? WitnessClass::kCertified : WitnessClass::kNearTie;
      break;
    case LogitErrorModel::Kind::kLmHead: {
      const RowIntervals& iv = model.intervals[static_cast<std::size_t>(row_index)];
      const float other = iv.best_col != token ? iv.best_hi : iv.second_hi;
      // r_t - B_t > r_j + B_j for all j != t: the true argmax is t.
      w.certified_gap = static_cast<double>(iv.token_lo) - static_cast<double>(other);
      w.cls = w.certified_gap > 0 ? WitnessClass::kCertified : WitnessClass::kNearTie;
      break;
    }
  }
  return w;
}

Result<RunWitnesses> witness_run(const DumpReader& reader, const LogitsRunInfo& run, LogitErrorModel model,
                                 FileHashCursor* hash) {
  RunWitnesses out;
  out.run = run.name;
  out.vocab = run.vocab;
  NCERT_ASSIGN_OR_RETURN(auto tokens, reader.read_i32(run.path + "/tokens"));
  std::vector<std::int64_t> positions;
  if (run.has_positions) {
    NCERT_ASSIGN_OR_RETURN(positions, reader.read_i64(run.path + "/positions"));
  }
  // With an lm_head, its output rows must be the logits rows themselves: stream both.
  const bool with_head = model.kind == LogitErrorModel::Kind::kLmHead;
  // About 16 MiB per block (27 rows of a 151,936 vocabulary): memory stays flat in T.
  std::vector<const DatasetInfo*> datasets = {reader.model().dataset(run.path + "/logits")};
  if (with_head) datasets.push_back(reader.model().dataset(model.head_dataset));
  const Index per_block = block_rows_for(datasets, 16 << 20, 64);
  NCERT_ASSIGN_OR_RETURN(RowStream stream, RowStream::open(reader, run.path + "/logits", per_block, hash));
  const DType logits_type = detail::logits_dtype(reader, run.path + "/logits");
  out.logits_dtype = logits_type;
  std::vector<std::vector<float>> widened(static_cast<std::size_t>(omp_get_max_threads()));
  std::optional<RowStream> head;
  if (with_head) {
    NCERT_ASSIGN_OR_RETURN(RowStream h, RowStream::open(reader, model.head_dataset, per_block));
    head = std::move(h);
  }
  out.witnesses.resize(static_cast<std::size_t>(run.tokens));
  // Rows whose lm_head output differs from the logits row (set per row; the first is reported).
  std::vector<char> head_differs(head ? static_cast<std::size_t>(run.tokens) : 0, 0);
  std::vector<RowStream*> streams = {&stream};
  if (head) streams.push_back(&*head);
  Progress progress("witness " + run.name + ": rows", run.tokens);
  const auto after_block = [&](Index done) { progress.reach(done); };
  NCERT_RETURN_IF_ERROR(stream_rows(
      streams, run.tokens,
      [&](Index t, const unsigned char* const* rows) {
        const float* row =
            detail::widen_row(rows[0], logits_type, run.vocab, widened[static_cast<std::size_t>(omp_get_thread_num())]);
        const RowScan scan = scan_row(row, run.vocab);
        // The lm_head's intervals bound its own outputs, not a row that differs from them: such
        // a row is witnessed without them, neither certified nor refuted (a soft-capped or
        // masked row read "the logit itself is wrong", hiding that the rows are not the head's).
        const bool differs = head && !lm_head_row_matches(row, rows[1], model.head_output, run.vocab);
        if (head) head_differs[static_cast<std::size_t>(t)] = differs;
        static const LogitErrorModel kUnbounded;
        Witness w = witness_row(row, run.vocab, scan, tokens[static_cast<std::size_t>(t)], differs ? kUnbounded : model,
                                t, logits_type);
        if (!positions.empty()) w.position = positions[static_cast<std::size_t>(t)];
        out.witnesses[static_cast<std::size_t>(t)] = std::move(w);
      },
      after_block));
  for (std::size_t t = 0; t < head_differs.size(); ++t) {
    if (!head_differs[t]) continue;
    // Re-read the one row pair to name the first differing token.
    const DatasetInfo* hd = reader.model().dataset(model.head_dataset);
    std::vector<float> a;
    std::vector<unsigned char> h(static_cast<std::size_t>(hd->row_elements() * dtype_size(hd->dtype)));
    NCERT_RETURN_IF_ERROR(detail::read_row_f32(reader, run.path + "/logits", static_cast<Index>(t), run.vocab, a));
    NCERT_RETURN_IF_ERROR(reader.read_rows(model.head_dataset, static_cast<Index>(t), 1, h.data()));
    out.lm_head_mismatch = true;
    out.lm_head_mismatch_text =
        lm_head_row_mismatch(a.data(), h.data(), model.head_output, run.vocab, static_cast<Index>(t));
    break;
  }
  for (const Witness& w : out.witnesses) out.failed += !w.ok;
  out.model = std::move(model);
  return out;
}

namespace {

/// The valid, untied emissions with the smallest margins, smallest first (equal margins in row
/// order, so the list is the same however the rows were computed).
std::vector<Witness> tightest_witnesses(const std::vector<Witness>& all, std::size_t count) {
  std::vector<const Witness*> valid;
  for (const Witness& w : all) {
    if (w.ok && w.ties < 2) valid.push_back(&w);
  }
  const auto by_margin = [](const Witness* a, const Witness* b) {
    return a->margin != b->margin ? a->margin < b->margin : a->row < b->row;
  };
  const std::size_t n = std::min(count, valid.size());
  std::partial_sort(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(n), valid.end(), by_margin);
  std::vector<Witness> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(*valid[i]);
  return out;
}

CheckResult witness_check(const RunWitnesses& r) {
  CheckResult c;
  c.id = "logits/" + r.run + "/witness";
  c.subject = "logits/" + r.run;
  c.kind = CheckKind::kWitness;
  WitnessEvidence e;
  e.tokens = static_cast<Index>(r.witnesses.size());
  e.vocab = r.vocab;
  e.error_source = r.model.source;
  e.logits_dtype = r.logits_dtype;
  e.failed = r.failed;
  for (const Witness& w : r.witnesses) {
    if (!w.ok) {
      if (!e.first_failure) e.first_failure = w;
      continue;
    }
    switch (w.cls) {
      case WitnessClass::kCertified:
        ++e.certified;
        break;
      case WitnessClass::kNearTie:
        ++e.near_tie;
        break;
      case WitnessClass::kTie:
        ++e.tie;
        break;
      case WitnessClass::kUnbounded:
        ++e.unbounded;
        break;
    }
    if (w.ties < 2 && (!e.smallest_margin || w.margin < e.smallest_margin->margin)) e.smallest_margin = w;
    e.margin.add(w.margin);
    e.margin_ulps.add(w.margin_dtype_ulps);
  }
  e.tightest = tightest_witnesses(r.witnesses, WitnessEvidence::kTightest);
  if (e.first_failure) {
    const Witness& f = *e.first_failure;
    c.verdict = Verdict::kFail;
    c.reason = "run " + r.run + " position " + std::to_string(f.position) + ": " + f.failure + "; " +
               std::to_string(r.failed) + " of " + std::to_string(r.witnesses.size()) + " emissions fail";
    c.first_failure = Location{"logits/" + r.run, f.row, -1, -1, f.position, f.token};
  } else if (r.witnesses.empty()) {
    // A run with no emission certifies nothing (an engine that stopped before its first
    // token), and nothing certified is a failure (docs/cli.md), as a projection with no
    // selected row is.
    c.verdict = Verdict::kFail;
    c.reason = "run " + r.run + " holds no emission (tokens and logits have 0 rows): nothing is certified";
  } else if (r.lm_head_mismatch) {
    c.verdict = Verdict::kFail;
    c.reason = "run " + r.run + ": the logits rows are not the lm_head's outputs (" + r.lm_head_mismatch_text +
               "), so its reference intervals do not bound them and their emissions are unbounded: dump the raw "
               "logits (the lm_head's outputs, before temperature, softcap or any scaling), or declare no lm_head "
               "for the run";
  } else {
    c.reason = std::to_string(r.witnesses.size()) +
               " emissions are their rows' maxima: " + std::to_string(e.certified) + " certified, " +
               std::to_string(e.near_tie) + " near-tie, " + std::to_string(e.tie) + " tie, " +
               std::to_string(e.unbounded) + " unbounded (error: " + r.model.source + ")";
    if (e.smallest_margin) {
      c.reason += "; smallest margin " + format_short(e.smallest_margin->margin) + " (" +
                  format_short(e.smallest_margin->margin_dtype_ulps) + " " + std::string(dtype_name(r.logits_dtype)) +
                  " ulps) at position " + std::to_string(e.smallest_margin->position);
    }
  }
  c.evidence = std::move(e);
  return c;
}

}  // namespace

std::vector<CheckResult> witness_checks(const RunWitnesses& r) {
  std::vector<CheckResult> out = {witness_check(r)};
  if (r.model.kind == LogitErrorModel::Kind::kNone) {
    out.push_back(
        skipped("logits/" + r.run + "/intervals", "logits/" + r.run, CheckKind::kWitness,
                "no error model (" + r.model.source + "): the margins are not certified; " +
                    (r.model.hint.empty() ? "dump the run's lm_head projection with its y_unpacked" : r.model.hint) +
                    ", or pass --logit-error"));
  }
  return out;
}

}  // namespace ncert::certify
