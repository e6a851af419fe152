#include "certify/logits/forks.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include "certify/logits/compare.h"
#include "certify/logits/detail/logits_row.h"
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
                   const LogitErrorModel& model, DType dtype) {
  ForkSide s;
  const auto V = static_cast<Index>(row.size());
  s.witness = witness_row(row.data(), V, scan_row(row.data(), V), own, model, r, dtype);
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
    s.gap_dtype_ulps = ulps_of_type(s.gap, lo, dtype);
    s.exact_tie = s.witness.ok && reference::f32_bits(lo) == reference::f32_bits(s.other_logit);
  }
  return s;
}

/// One run's lm_head at the fork rows: its certified intervals at both tokens, whether each
/// fork row's logits are its outputs, and what it computed from (for telling whether two runs'
/// lm_heads saw the same thing).
struct SideHead {
  const ProjectionInfo* head = nullptr;
  std::string unusable;                            ///< why its intervals cannot be used at all ("" if they can)
  std::vector<reference::Interval> cells;          ///< two per fork (a, b)
  std::vector<bool> row_matches;                   ///< per fork: the logits row is the lm_head's output row
  std::vector<std::vector<unsigned char>> x_rows;  ///< per fork: the hidden state's valid columns
  std::string weights;                             ///< content hash of its weights and bias
};

/// The content hash of everything an lm_head multiplies its hidden state by.
Result<std::string> weights_identity(const DumpReader& reader, const ProjectionInfo& head) {
  std::string id = std::to_string(head.k) + "x" + std::to_string(head.n) + ":";
  for (const DatasetInfo& d : reader.model().datasets) {
    const bool weight = d.path.rfind(head.path + "/weight/", 0) == 0;
    if (!weight && d.path != head.path + "/bias") continue;
    NCERT_ASSIGN_OR_RETURN(std::string h, reader.dataset_hash(d.path));
    id += d.path.substr(head.path.size()) + "=" + h + ";";
  }
  return id;
}

Result<SideHead> side_head(const DumpReader& reader, const LogitsRunInfo& run, const std::vector<Index>& fork_rows,
                           const std::vector<std::pair<std::int32_t, std::int32_t>>& fork_tokens, const ForksOptions& o,
                           const char* side) {
  SideHead s;
  s.head = find_lm_head(reader.model(), run.name);
  if (!s.head) {
    s.unusable = std::string(side) + " has no lm_head projection for run " + run.name;
    if (const std::string hint = undeclared_lm_head_hint(reader.model(), run); !hint.empty()) {
      s.unusable += " (" + hint + ")";
    }
    return s;
  }
  s.unusable = lm_head_unusable(*s.head);
  if (!s.unusable.empty()) return s;
  std::vector<std::pair<Index, Index>> cells;
  for (std::size_t k = 0; k < fork_rows.size(); ++k) {
    cells.emplace_back(fork_rows[k], std::clamp<Index>(fork_tokens[k].first, 0, run.vocab - 1));
    cells.emplace_back(fork_rows[k], std::clamp<Index>(fork_tokens[k].second, 0, run.vocab - 1));
  }
  NCERT_ASSIGN_OR_RETURN(auto tokens, reader.read_i32(run.path + "/tokens"));
  LmHeadCollector collector(std::move(tokens), std::move(cells), omp_get_max_threads());
  NCERT_ASSIGN_OR_RETURN(const std::string blocked, evaluate_lm_head(reader, *s.head, o.lambda, collector));
  if (!blocked.empty()) {
    s.unusable = head_not_evaluated(*s.head, blocked);
    return s;
  }
  s.cells = collector.cells();
  // Its intervals bound the logits only where the logits row is the lm_head's output row.
  const std::string y = s.head->path + "/y_unpacked";
  const DatasetInfo* yd = reader.model().dataset(y);
  const DatasetInfo* xd = reader.model().dataset(s.head->path + "/x");
  std::vector<float> lr(static_cast<std::size_t>(run.vocab));
  std::vector<unsigned char> hr(static_cast<std::size_t>(yd->row_elements() * dtype_size(yd->dtype)));
  std::vector<unsigned char> xr(static_cast<std::size_t>(xd->row_elements() * dtype_size(xd->dtype)));
  for (Index f : fork_rows) {
    NCERT_RETURN_IF_ERROR(detail::read_row_f32(reader, run.path + "/logits", f, run.vocab, lr));
    NCERT_RETURN_IF_ERROR(reader.read_rows(y, f, 1, hr.data()));
    NCERT_RETURN_IF_ERROR(reader.read_rows(s.head->path + "/x", f, 1, xr.data()));
    s.row_matches.push_back(lm_head_row_matches(lr.data(), hr.data(), s.head->output, run.vocab));
    s.x_rows.emplace_back(xr.begin(), xr.begin() + s.head->k * dtype_size(xd->dtype));
  }
  NCERT_ASSIGN_OR_RETURN(s.weights, weights_identity(reader, *s.head));
  return s;
}

/// Half the width of a side's certified interval at fork k's token (0: a, 1: b).
double half_width(const SideHead& s, std::size_t k, int which) {
  const reference::Interval& iv = s.cells[2 * k + static_cast<std::size_t>(which)];
  return (static_cast<double>(iv.hi) - static_cast<double>(iv.lo)) / 2;
}

/// Why the two runs' lm_head intervals do not bound the distance between their logits at fork
/// k, or "" when they do: each certifies its own run, so both must have computed from the same
/// hidden state with the same weights for their sum to bound |L_A - L_B|.
std::string heads_unusable(const SideHead& a, const SideHead& b, std::size_t k, Index row) {
  if (!a.unusable.empty()) return a.unusable;
  if (!b.unusable.empty()) return b.unusable;
  if (!a.row_matches[k]) return "A's logits row " + std::to_string(row) + " is not its lm_head's output row";
  if (!b.row_matches[k]) return "B's logits row " + std::to_string(row) + " is not its lm_head's output row";
  if (a.head->x_dtype != b.head->x_dtype || a.x_rows[k] != b.x_rows[k]) {
    return "the two lm_heads' inputs differ at row " + std::to_string(row) +
           " (different hidden states: each interval certifies its own run, not the distance between them)";
  }
  if (a.weights != b.weights) return "the two lm_heads' weights differ";
  return "";
}

/// The envelope at fork f (row index k among the forks): --logit-error when given; else both
/// runs' lm_head intervals where they computed from the same thing; else what the matched rows
/// before the fork showed; else none (the fork is undetermined).
/// `rounding`: per fork token (a, b), half a spacing of each run's logits type at its value
/// there, what storing them may add at the fork beyond the rows before (the observed envelope).
void set_envelope(Fork& f, std::size_t k, const SideHead& ha, const SideHead& hb, const ForksOptions& o,
                  const std::array<double, 2>& rounding) {
  if (o.logit_error) {
    f.env_a = f.env_b = 2 * *o.logit_error;
    f.a.eps_own = f.a.eps_other = f.b.eps_own = f.b.eps_other = *o.logit_error;
    f.envelope_source = "--logit-error " + format_float(*o.logit_error) +
                        " for each run (given: it overrides lm_head intervals and observed differences)";
    f.has_envelope = true;
    return;
  }
  const std::string why_not = heads_unusable(ha, hb, k, f.row);
  if (why_not.empty()) {
    f.a.eps_own = half_width(ha, k, 0);
    f.a.eps_other = half_width(ha, k, 1);
    f.b.eps_own = half_width(hb, k, 1);
    f.b.eps_other = half_width(hb, k, 0);
    f.env_a = f.a.eps_own + f.b.eps_other;
    f.env_b = f.a.eps_other + f.b.eps_own;
    f.envelope_source = "certified: lm_head intervals of both runs (" + ha.head->name + " and " + hb.head->name +
                        ", the same hidden state and weights at row " + std::to_string(f.row) + ")";
    f.has_envelope = true;
  } else if (f.before.rows > 0 && f.before.max_abs > 0) {
    // Rows that were all bit-identical measured no disagreement to compare the fork's with:
    // an envelope of 0 would call a one-ulp difference at the fork "beyond what numerics
    // allow" on the strength of nothing (those forks are undetermined, below).
    // Each run's own rounding of its logits grows with them: the rows before measured it at
    // their values, and a fork at larger ones may differ by more (two f32 runs 1 ulp apart
    // everywhere, 9.5e-7 before and 1.9e-6 at a fork at 16.5; a bf16 export of f32 logits 0.031
    // before and 0.05 at a fork at 20 were read "unexplained"). The envelope is the larger of
    // the two: added to what the rows before measured, the rounding counted twice and passed a
    // bf16 value one spacing off (0.05 where rounding moves at most 0.031 there).
    f.env_a = std::max(f.before.max_abs, rounding[0]);
    f.env_b = std::max(f.before.max_abs, rounding[1]);
    f.envelope_source = "observed: the largest |d| over the " + std::to_string(f.before.rows) +
                        " matched rows before the fork, or half a spacing of each run's logits at the fork's "
                        "values where that is larger (a measurement, not a proof); lm_head intervals not used: " +
                        why_not;
    f.has_envelope = true;
  } else if (f.before.rows > 0) {
    f.envelope_source = "none: the " + std::to_string(f.before.rows) +
                        " matched rows before the fork are bit-identical, so they measure no disagreement; no "
                        "--logit-error, and lm_head intervals not usable: " +
                        why_not;
  } else {
    f.envelope_source =
        "none: no --logit-error, no matched row before the fork, and lm_head intervals not usable: " + why_not;
  }
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
    line += ", margin " + format_short(w.margin) + " (" + format_short(w.margin_dtype_ulps) + " " +
            std::string(dtype_name(w.logits_dtype)) + " ulps) over " + std::to_string(w.runner_up);
  }
  line += "; the other run's token " + std::to_string(s.other) + " ranks " + std::to_string(s.other_rank) + " at " +
          format_f32(s.other_logit) + " (gap " + format_short(s.gap) + ", " + format_short(s.gap_dtype_ulps) + " " +
          std::string(dtype_name(w.logits_dtype)) + " ulps)";
  return line;
}

std::string top_line(const std::vector<TopEntry>& top, const Vocabulary* vocab) {
  std::string line;
  for (const TopEntry& e : top) {
    if (!line.empty()) line += " | ";
    // The gap below the row's top logit; "top" for the maximum and every value tied with it.
    line += token_text(e.token, vocab) + " " + format_f32(e.logit) +
            (e.gap == 0 ? std::string(" (top)") : " (-" + format_short(e.gap) + ")");
  }
  return line;
}

/// Finite values a row needs before its values' precision is read from them: a row of 256
/// values of f32 noise is all bf16 by chance with probability 2^-4096.
constexpr Index kPrecisionValues = 256;

/// The precision a row's values really have: f32 logits that are every one a bf16 (or f16)
/// value are an engine's bf16 (f16) outputs widened to f32, which the format allows (a
/// reviewer's bf16 export stored as f32 read "unexplained" at a tie its bf16 rounding made).
/// Read so only from kPrecisionValues finite values or more, not all whole numbers: a row of
/// integer logits (every integer to 256 is a bf16 value), zeros or a few unmasked entries says
/// nothing of its precision (a review's integer logits, 1 apart at the fork, passed).
DType row_precision(const std::vector<float>& row, DType stored) {
  if (stored != DType::kF32) return stored;
  Index finite = 0;
  bool fraction = false;
  for (float v : row) {
    if (!std::isfinite(v)) continue;
    ++finite;
    fraction = fraction || v != std::trunc(v);
  }
  if (finite < kPrecisionValues || !fraction) return stored;
  for (DType t : {DType::kBf16, DType::kF16}) {
    const bool all = std::all_of(row.begin(), row.end(), [&](float v) {
      return !std::isfinite(v) || reference::round_to_type(v, t, false) == v;
    });
    if (all) return t;
  }
  return stored;
}

/// Half a spacing of A's logits type at |L_A[x]| plus B's at |L_B[x]|: the most storing the
/// two values may move them apart (0 for a non-finite value, which no envelope holds).
double storage_rounding(const std::vector<float>& la, const std::vector<float>& lb, std::int32_t x, DType ta,
                        DType tb) {
  const double a = la[static_cast<std::size_t>(x)], b = lb[static_cast<std::size_t>(x)];
  if (!std::isfinite(a) || !std::isfinite(b)) return 0.0;
  return 0.5 * (reference::spacing_of_type(std::fabs(a), ta) + reference::spacing_of_type(std::fabs(b), tb));
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
    f.why = std::string(!f.a.witness.ok ? "A's" : "B's") +
            " emission is not its own row's maximum: " + (!f.a.witness.ok ? f.a.witness.failure : f.b.witness.failure);
  } else if (!f.has_envelope && (f.delta_a > 0 || f.delta_b > 0)) {
    // Nothing measured or certified says how far the runs may disagree: calling the fork
    // unexplained "beyond an envelope of 0" would claim what nobody measured.
    f.cls = ForkClass::kUndetermined;
    f.why = "|d| " + format_short(f.delta_a) + " at " + std::to_string(f.token_a) + " and " + format_short(f.delta_b) +
            " at " + std::to_string(f.token_b) +
            " cannot be judged without an envelope: pass --logit-error, or dump both runs' lm_heads fed the same "
            "hidden state" +
            (f.before.rows > 0 ? std::string(" (the matched rows before the fork are bit-identical: they measure no "
                                             "envelope)")
                               : std::string(", or a run pair with matched rows before the fork"));
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
  NCERT_ASSIGN_OR_RETURN(RunComparison c, compare_runs(a, ra, b, rb, o.matched_history, ElementTest{}));
  return find_forks(a, ra, b, rb, c, o);
}

Result<RunForks> find_forks(const DumpReader& a, const LogitsRunInfo& ra, const DumpReader& b, const LogitsRunInfo& rb,
                            const RunComparison& c, const ForksOptions& o) {
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

  SideHead ha, hb;
  if (!o.logit_error) {  // an explicit --logit-error overrides them: no need to evaluate the lm_heads
    NCERT_ASSIGN_OR_RETURN(ha, side_head(a, ra, rows, toks, o, "A"));
    NCERT_ASSIGN_OR_RETURN(hb, side_head(b, rb, rows, toks, o, "B"));
  }
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
    NCERT_RETURN_IF_ERROR(detail::read_row_f32(a, ra.path + "/logits", f.row, V, la));
    NCERT_RETURN_IF_ERROR(detail::read_row_f32(b, rb.path + "/logits", f.row, V, lb));
    f.a = side_view(la, f.token_a, f.token_b, f.row, wmodel, c.dtype_a);
    f.b = side_view(lb, f.token_b, f.token_a, f.row, wmodel, c.dtype_b);
    f.a.witness.position = f.b.witness.position = f.position;
    const bool in_range = f.token_a >= 0 && f.token_a < V && f.token_b >= 0 && f.token_b < V;
    if (in_range) {
      f.delta_a = std::fabs(static_cast<double>(la[static_cast<std::size_t>(f.token_a)]) -
                            lb[static_cast<std::size_t>(f.token_a)]);
      f.delta_b = std::fabs(static_cast<double>(la[static_cast<std::size_t>(f.token_b)]) -
                            lb[static_cast<std::size_t>(f.token_b)]);
    }
    f.before = before_fork(c, f.row, fork_rows);
    std::array<double, 2> rounding{};
    DType ta = c.dtype_a, tb = c.dtype_b;
    if (in_range) {
      ta = row_precision(la, c.dtype_a);
      tb = row_precision(lb, c.dtype_b);
      rounding = {storage_rounding(la, lb, f.token_a, ta, tb), storage_rounding(la, lb, f.token_b, ta, tb)};
    }
    set_envelope(f, k, ha, hb, o, rounding);
    // Where the envelope read a run's f32 row at a coarser type, the source says so.
    if (f.has_envelope && f.envelope_source.rfind("observed", 0) == 0) {
      for (const auto& [side, read, stored] : {std::tuple{"A", ta, c.dtype_a}, std::tuple{"B", tb, c.dtype_b}}) {
        if (read == stored) continue;
        f.envelope_source += std::string("; ") + side + "'s f32 row at the fork holds only " +
                             std::string(dtype_name(read)) + " values: read at " + std::string(dtype_name(read)) +
                             " spacing";
      }
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
    c.subject = "forks/" + name;
    c.kind = CheckKind::kFork;
    c.evidence = NoForkEvidence{r.rows_a, r.rows_b, r.compared, r.prompts_equal};
    if (!r.prompts_equal && !r.teacher_forced) {
      c.verdict = Verdict::kFail;
      c.reason = "the runs' prompts differ, so no row shares a history (pair other runs, or --matched-history)";
    } else if (r.compared == 0) {
      // Nothing to compare certifies nothing, as under compare's forks policy ("no matched rows
      // to judge"); it read "token streams identical over the 0 common tokens" (a reviewer's).
      c.verdict = Verdict::kFail;
      c.reason = "no tokens to compare: " + empty_run_text(r.rows_a, r.rows_b);
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
    c.subject = "forks/" + name;
    c.kind = CheckKind::kFork;
    c.always_show_details = true;
    const bool explained = f.cls == ForkClass::kTie || f.cls == ForkClass::kNearTie;
    c.verdict = explained && !o.require_identical ? Verdict::kPass : Verdict::kFail;
    if (f.cls == ForkClass::kUndetermined && !o.require_identical) c.verdict = Verdict::kSkip;
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
    c.details.push_back(
        "run " + name + ", position " + std::to_string(f.position) + " (row " + std::to_string(f.row) +
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
