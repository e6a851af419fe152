#include "certify/logits/forks.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

#include "certify/logits/compare.h"
#include "certify/report/format.h"
#include "reference/float_bits.h"

namespace ncert::certify {

namespace {

constexpr int kTop = 5;

/// Top entries of a row by logit descending, lower id first among equals (NaN never enters).
std::vector<TopEntry> top_of(const std::vector<float>& row) {
  std::vector<TopEntry> top;
  for (std::size_t j = 0; j < row.size(); ++j) {
    const float x = row[j];
    if (std::isnan(x)) continue;
    if (static_cast<int>(top.size()) == kTop && !(x > top.back().logit)) continue;
    auto it = std::find_if(top.begin(), top.end(), [&](const TopEntry& e) { return x > e.logit; });
    top.insert(it, TopEntry{static_cast<std::int32_t>(j), x, 0});
    if (static_cast<int>(top.size()) > kTop) top.pop_back();
  }
  for (TopEntry& e : top) e.gap = static_cast<double>(top.front().logit) - e.logit;
  return top;
}

/// 1-based rank of token t in the row: entries above it, then equal entries of lower id.
Index rank_of(const std::vector<float>& row, std::int32_t t) {
  const float x = row[static_cast<std::size_t>(t)];
  Index above = 0;
  for (std::size_t j = 0; j < row.size(); ++j) {
    above += row[j] > x || (row[j] == x && static_cast<std::int32_t>(j) < t);
  }
  return above + 1;
}

ForkSide side_view(const std::vector<float>& row, std::int32_t own, std::int32_t other, Index r,
                   const LogitErrorModel& model) {
  ForkSide s;
  const auto V = static_cast<Index>(row.size());
  s.witness = witness_row(row.data(), V, scan_row(row.data(), V), own, model, r);
  s.top = top_of(row);
  s.other = other;
  if (other >= 0 && other < V) {
    s.other_logit = row[static_cast<std::size_t>(other)];
    s.other_rank = rank_of(row, other);
  }
  if (own >= 0 && own < V && other >= 0 && other < V) {
    const float lo = row[static_cast<std::size_t>(own)];
    s.gap = static_cast<double>(lo) - static_cast<double>(s.other_logit);
    s.gap_ulps = s.gap / reference::ulp_of_f32(lo);
    s.exact_tie = s.witness.ok && reference::f32_bits(lo) == reference::f32_bits(s.other_logit);
  }
  return s;
}

/// One side's per-logit error at the fork cells: lm_head intervals, --logit-error, or none.
struct SideErrors {
  enum class Kind : std::uint8_t { kNone, kAbsolute, kLmHead } kind = Kind::kNone;
  double absolute = 0;
  std::string source;
  std::vector<reference::Interval> cells;  ///< lm_head: two per fork (a, b)
  std::vector<bool> usable;                ///< lm_head: per fork, the logits row is the lm_head's row
};

Result<SideErrors> side_errors(const DumpReader& reader, const LogitsRunInfo& run, const std::vector<Index>& fork_rows,
                               const std::vector<std::pair<std::int32_t, std::int32_t>>& fork_tokens,
                               const ForksOptions& o, const char* side) {
  SideErrors e;
  const ProjectionInfo* head = find_lm_head(reader.model(), run.name);
  if (!fork_rows.empty() && head && lm_head_unusable(*head).empty()) {
    std::vector<std::pair<Index, Index>> cells;
    for (std::size_t k = 0; k < fork_rows.size(); ++k) {
      cells.emplace_back(fork_rows[k], std::clamp<Index>(fork_tokens[k].first, 0, run.vocab - 1));
      cells.emplace_back(fork_rows[k], std::clamp<Index>(fork_tokens[k].second, 0, run.vocab - 1));
    }
    NCERT_ASSIGN_OR_RETURN(auto tokens, reader.read_i32(run.path + "/tokens"));
    LmHeadCollector collector(std::move(tokens), std::move(cells), omp_get_max_threads());
    NCERT_RETURN_IF_ERROR(evaluate_lm_head(reader, *head, o.lambda, collector));
    e.kind = SideErrors::Kind::kLmHead;
    e.source = std::string("lm_head ") + head->name + " (" + side + ")";
    e.cells = collector.cells();
    // Its intervals bound the logits only where the logits row is the lm_head's output row.
    const std::string y = head->path + "/y_unpacked";
    const DatasetInfo* yd = reader.model().dataset(y);
    std::vector<float> lr(static_cast<std::size_t>(run.vocab));
    std::vector<unsigned char> hr(static_cast<std::size_t>(yd->row_elements() * dtype_size(yd->dtype)));
    for (Index f : fork_rows) {
      NCERT_RETURN_IF_ERROR(reader.read_rows(run.path + "/logits", f, 1, lr.data()));
      NCERT_RETURN_IF_ERROR(reader.read_rows(y, f, 1, hr.data()));
      e.usable.push_back(lm_head_row_matches(lr.data(), hr.data(), head->output, run.vocab));
    }
    return e;
  }
  if (o.logit_error) {
    e.kind = SideErrors::Kind::kAbsolute;
    e.absolute = *o.logit_error;
    e.source = "--logit-error " + format_float(*o.logit_error) + " (" + side + ")";
  }
  return e;
}

/// The error of one side at fork k's token (0: a, 1: b); nullopt when that side has no model.
std::optional<double> side_eps(const SideErrors& e, std::size_t k, int which) {
  switch (e.kind) {
    case SideErrors::Kind::kNone: return std::nullopt;
    case SideErrors::Kind::kAbsolute: return e.absolute;
    case SideErrors::Kind::kLmHead: {
      if (!e.usable[k]) return std::nullopt;
      const reference::Interval& iv = e.cells[2 * k + static_cast<std::size_t>(which)];
      return (static_cast<double>(iv.hi) - static_cast<double>(iv.lo)) / 2;
    }
  }
  return std::nullopt;
}

std::string token_text(std::int32_t id, const Vocabulary* vocab) {
  return vocab ? std::to_string(id) + " " + vocab->render(id) : std::to_string(id);
}

std::string witness_line(const ForkSide& s, const Vocabulary* vocab) {
  const Witness& w = s.witness;
  if (!w.ok) return "NOT A WITNESS: " + w.failure;
  std::string line = "emits " + token_text(w.token, vocab) + " at " + format_f32(w.logit) + ", the row's maximum";
  if (w.ties >= 2) {
    line += " (tied with " + std::to_string(w.ties - 1) + " other(s), lowest id wins)";
  } else {
    line += ", margin " + format_short(w.margin) + " (" + format_short(w.margin_ulps) + " ulps) over " +
            std::to_string(w.runner_up);
  }
  line += "; the other run's token " + std::to_string(s.other) + " ranks " + std::to_string(s.other_rank) + " at " +
          format_f32(s.other_logit) + " (gap " + format_short(s.gap) + ", " + format_short(s.gap_ulps) + " ulps)";
  return line;
}

std::string top_line(const std::vector<TopEntry>& top, const Vocabulary* vocab) {
  std::string line;
  for (const TopEntry& e : top) {
    if (!line.empty()) line += " | ";
    line += token_text(e.token, vocab) + " " + format_f32(e.logit) + " (-" + format_short(e.gap) + ")";
  }
  return line;
}

/// |d| on the matched rows before the fork row, other forks excluded.
BeforeFork before_fork(const RunComparison& c, Index fork_row, const std::set<Index>& fork_rows) {
  BeforeFork before;
  std::vector<double> maxes;
  for (Index t = 0; t < std::min(fork_row, c.matched); ++t) {
    if (fork_rows.count(t)) continue;
    const RowComparison& x = c.rows[static_cast<std::size_t>(t)];
    maxes.push_back(x.max_abs);
    before.bit_identical += x.bit_identical;
  }
  before.rows = static_cast<Index>(maxes.size());
  if (!maxes.empty()) {
    std::sort(maxes.begin(), maxes.end());
    before.max_abs = maxes.back();
    before.p50 = nearest_rank(maxes, 50);
    before.p99 = nearest_rank(maxes, 99);
  }
  return before;
}

/// The fork's class and why (forks.h): invalid, unexplained, tie or near-tie.
void classify(Fork& f) {
  if (!f.a.witness.ok || !f.b.witness.ok) {
    f.cls = ForkClass::kInvalid;
    f.why = std::string(!f.a.witness.ok ? "A's" : "B's") + " emission is not its own row's maximum: " +
            (!f.a.witness.ok ? f.a.witness.failure : f.b.witness.failure);
  } else if (f.delta_a > f.env_a || f.delta_b > f.env_b) {
    const bool at_a = f.delta_a / std::max(f.env_a, 1e-300) >= f.delta_b / std::max(f.env_b, 1e-300);
    f.cls = ForkClass::kUnexplained;
    f.why = "the rows differ at token " + std::to_string(at_a ? f.token_a : f.token_b) + " by " +
            format_short(at_a ? f.delta_a : f.delta_b) + ", beyond the envelope " +
            format_short(at_a ? f.env_a : f.env_b) + ": numerics do not explain this fork";
  } else if (f.a.exact_tie || f.b.exact_tie) {
    f.cls = ForkClass::kTie;
    f.why = std::string(f.a.exact_tie ? "A's" : "B's") + " row holds tokens " + std::to_string(f.token_a) + " and " +
            std::to_string(f.token_b) + " as bit-identical maxima; the rows agree within the envelope";
  } else {
    f.cls = ForkClass::kNearTie;
    f.why = "|d| " + format_short(f.delta_a) + " at " + std::to_string(f.token_a) + " and " + format_short(f.delta_b) +
            " at " + std::to_string(f.token_b) + " are within the envelope (" + format_short(f.env_a) + ", " +
            format_short(f.env_b) + "), so the gaps " + format_short(f.a.gap) + " and " + format_short(f.b.gap) +
            " may fall either way";
  }
}

}  // namespace

Result<RunForks> find_forks(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b, const LogitsRunInfo& rb,
                            const ForksOptions& o) {
  NCERT_ASSIGN_OR_RETURN(RunComparison c, compare_runs(a, ra, b, rb, o.matched_history, 0.0));
  RunForks out;
  out.run_a = ra.name;
  out.run_b = rb.name;
  out.rows_a = c.rows_a;
  out.rows_b = c.rows_b;
  out.compared = c.compared;
  out.prompts_equal = c.prompts_equal;
  out.teacher_forced = o.matched_history;
  if (!c.prompts_equal && !o.matched_history) return out;  // no shared history: nothing forks

  std::vector<Index> rows;
  std::vector<std::pair<std::int32_t, std::int32_t>> toks;
  for (Index t = 0; t < c.compared; ++t) {
    const std::int32_t x = c.tokens_a[static_cast<std::size_t>(t)], y = c.tokens_b[static_cast<std::size_t>(t)];
    if (x == y) continue;
    rows.push_back(t);
    toks.emplace_back(x, y);
    if (!o.matched_history) break;  // later rows of B have another history
  }
  if (rows.empty()) return out;

  NCERT_ASSIGN_OR_RETURN(SideErrors ea, side_errors(a, ra, rows, toks, o, "A"));
  NCERT_ASSIGN_OR_RETURN(SideErrors eb, side_errors(b, rb, rows, toks, o, "B"));
  // The witnesses' own classes: --logit-error when given.
  const LogitErrorModel wmodel = absolute_error_model(o.logit_error);
  std::vector<std::int32_t> history;
  if (ra.has_prompt_tokens) {
    NCERT_ASSIGN_OR_RETURN(history, a.read_i32(ra.path + "/prompt_tokens"));
  }
  std::vector<std::int64_t> positions;
  if (ra.has_positions) {
    NCERT_ASSIGN_OR_RETURN(positions, a.read_i64(ra.path + "/positions"));
  }
  const std::set<Index> fork_rows(rows.begin(), rows.end());
  const Index V = ra.vocab;
  std::vector<float> la(static_cast<std::size_t>(V)), lb(static_cast<std::size_t>(V));
  for (std::size_t k = 0; k < rows.size(); ++k) {
    Fork f;
    f.row = rows[k];
    f.position = positions.empty() ? f.row : positions[static_cast<std::size_t>(f.row)];
    f.token_a = toks[k].first;
    f.token_b = toks[k].second;
    NCERT_RETURN_IF_ERROR(a.read_rows(ra.path + "/logits", f.row, 1, la.data()));
    NCERT_RETURN_IF_ERROR(b.read_rows(rb.path + "/logits", f.row, 1, lb.data()));
    f.a = side_view(la, f.token_a, f.token_b, f.row, wmodel);
    f.b = side_view(lb, f.token_b, f.token_a, f.row, wmodel);
    f.a.witness.position = f.b.witness.position = f.position;
    const bool in_range = f.token_a >= 0 && f.token_a < V && f.token_b >= 0 && f.token_b < V;
    if (in_range) {
      f.delta_a = std::fabs(static_cast<double>(la[static_cast<std::size_t>(f.token_a)]) - lb[static_cast<std::size_t>(f.token_a)]);
      f.delta_b = std::fabs(static_cast<double>(la[static_cast<std::size_t>(f.token_b)]) - lb[static_cast<std::size_t>(f.token_b)]);
    }
    f.before = before_fork(c, f.row, fork_rows);
    // The envelope: both sides' error models, else what the matched rows showed.
    const auto a_at_a = side_eps(ea, k, 0), a_at_b = side_eps(ea, k, 1);
    const auto b_at_a = side_eps(eb, k, 0), b_at_b = side_eps(eb, k, 1);
    if (a_at_a && a_at_b && b_at_a && b_at_b) {
      f.a.eps_own = *a_at_a;
      f.a.eps_other = *a_at_b;
      f.b.eps_own = *b_at_b;
      f.b.eps_other = *b_at_a;
      f.env_a = *a_at_a + *b_at_a;
      f.env_b = *a_at_b + *b_at_b;
      f.envelope_source = ea.source + " + " + eb.source;
    } else if (f.before.rows > 0) {
      f.env_a = f.env_b = f.before.max_abs;
      f.envelope_source = "observed: the largest |d| over the " + std::to_string(f.before.rows) +
                          " matched rows before the fork";
    } else {
      f.envelope_source = "none: no error model and no matched rows before the fork (pass --logit-error)";
    }
    // History shared up to the fork: A's prompt and tokens (B's are the same up to here).
    std::vector<std::int32_t> ctx = history;
    ctx.insert(ctx.end(), c.tokens_a.begin(), c.tokens_a.begin() + f.row);
    const auto keep = static_cast<std::size_t>(std::max<Index>(o.context, 0));
    f.context.assign(ctx.end() - static_cast<std::ptrdiff_t>(std::min(keep, ctx.size())), ctx.end());

    classify(f);
    out.forks.push_back(std::move(f));
  }
  return out;
}

std::vector<CheckResult> fork_checks(const RunForks& r, const ForksOptions& o, const Vocabulary* vocab) {
  const std::string name = r.run_a == r.run_b ? r.run_a : r.run_a + ":" + r.run_b;
  std::vector<CheckResult> out;
  if (r.forks.empty()) {
    CheckResult c;
    c.id = "forks/" + name;
    c.kind = CheckKind::kFork;
    c.evidence = NoForkEvidence{r.rows_a, r.rows_b, r.compared, r.prompts_equal};
    if (!r.prompts_equal && !r.teacher_forced) {
      c.verdict = Verdict::kFail;
      c.reason = "the runs' prompts differ, so no row shares a history (pair other runs, or --matched-history)";
    } else if (r.rows_a != r.rows_b) {
      c.verdict = o.require_identical ? Verdict::kFail : Verdict::kPass;
      c.reason = "token streams identical over the " + std::to_string(r.compared) + " common tokens; " +
                 (r.rows_a > r.rows_b ? "B" : "A") + " stops " + std::to_string(std::abs(r.rows_a - r.rows_b)) +
                 " token(s) earlier" + (o.require_identical ? " (--require-identical)" : "");
    } else {
      c.reason = "token streams identical over all " + std::to_string(r.compared) + " tokens: no fork";
    }
    out.push_back(std::move(c));
    return out;
  }
  for (const Fork& f : r.forks) {
    CheckResult c;
    c.id = "forks/" + name + "/" + std::to_string(f.position);
    c.kind = CheckKind::kFork;
    c.always_show_details = true;
    const bool explained = f.cls == ForkClass::kTie || f.cls == ForkClass::kNearTie;
    c.verdict = explained && !o.require_identical ? Verdict::kPass : Verdict::kFail;
    c.reason = std::string(fork_class_name(f.cls)) + " at position " + std::to_string(f.position) + ": A emits " +
               token_text(f.token_a, vocab) + ", B emits " + token_text(f.token_b, vocab) + "; " + f.why +
               (explained && o.require_identical ? " (--require-identical)" : "");
    if (c.failed()) c.first_failure = Location{"forks/" + name, f.row, -1, -1, f.position, f.token_b};
    ForkEvidence e;
    e.fork = f;
    if (vocab) {
      e.has_text = true;
      e.context_text = vocab->render_sequence(f.context);
      e.text_a = vocab->render(f.token_a);
      e.text_b = vocab->render(f.token_b);
      for (const TopEntry& t : f.a.top) e.top_a_text.push_back(vocab->render(t.token));
      for (const TopEntry& t : f.b.top) e.top_b_text.push_back(vocab->render(t.token));
    }
    c.evidence = std::move(e);
    std::string ctx;
    for (std::int32_t t : f.context) {
      if (!ctx.empty()) ctx += ' ';
      ctx += std::to_string(t);
    }
    c.details.push_back("run " + name + ", position " + std::to_string(f.position) + " (row " + std::to_string(f.row) +
                        "), after: " + (vocab ? vocab->render_sequence(f.context) + "  [" + ctx + "]" : "[" + ctx + "]"));
    c.details.push_back("A " + witness_line(f.a, vocab));
    c.details.push_back("B " + witness_line(f.b, vocab));
    c.details.push_back("top-5 A: " + top_line(f.a.top, vocab));
    c.details.push_back("top-5 B: " + top_line(f.b.top, vocab));
    c.details.push_back("|d| at " + std::to_string(f.token_a) + ": " + format_short(f.delta_a) + ", at " +
                        std::to_string(f.token_b) + ": " + format_short(f.delta_b) + "; envelope " +
                        format_short(f.env_a) + " / " + format_short(f.env_b) + " (" + f.envelope_source + ")");
    c.details.push_back("before the fork: " + std::to_string(f.before.rows) + " matched row(s), " +
                        std::to_string(f.before.bit_identical) + " bit-identical; max |d| " +
                        format_short(f.before.max_abs) + ", per-row max |d| p50 " + format_short(f.before.p50) +
                        ", p99 " + format_short(f.before.p99));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ncert::certify
