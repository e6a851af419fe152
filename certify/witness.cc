#include "certify/witness.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "certify/hash.h"
#include "certify/projection_data.h"
#include "certify/row_stream.h"
#include "reference/float_bits.h"

namespace ncert::certify {

std::string_view witness_class_name(WitnessClass c) {
  switch (c) {
    case WitnessClass::kCertified: return "certified";
    case WitnessClass::kNearTie: return "near-tie";
    case WitnessClass::kTie: return "tie";
    case WitnessClass::kUnbounded: return "unbounded";
  }
  return "?";
}

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
  s.max = m;
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
  s.runner_up = r;
  s.argmax = find_first(row, 0, vocab, m);
  if (ties >= 2) s.tie_second = find_first(row, s.argmax + 1, vocab, m);
  if (ties < vocab) s.runner_up_index = find_first(row, 0, vocab, r);  // r may be -inf (masked)
  return s;
}

Witness witness_row(const float* row, Index vocab, const RowScan& scan, std::int32_t token,
                    const LogitErrorModel& model, Index row_index) {
  Witness w;
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
  if (std::isinf(w.logit) && w.logit < 0) return fail("emitted " + tok_text + " is masked (-Inf); " + max_text);
  if (w.logit < scan.max) return fail("emitted " + tok_text + " is not the maximum: " + max_text);
  if (token != scan.argmax) {
    return fail("emitted " + tok_text + " ties the maximum but tie_break = lowest picks token " +
                std::to_string(scan.argmax));
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
  if (scan.ties >= 2) {
    w.cls = WitnessClass::kTie;
    return w;
  }
  switch (model.kind) {
    case LogitErrorModel::Kind::kNone:
      w.cls = WitnessClass::kUnbounded;
      break;
    case LogitErrorModel::Kind::kAbsolute:
      // Stability lemma (error-bounds.md §8): |g_j - r_j| <= e for all j and a margin > 2e
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

LmHeadCollector::LmHeadCollector(std::vector<std::int32_t> tokens, int threads)
    : tokens_(std::move(tokens)),
      per_thread_(static_cast<std::size_t>(std::max(threads, 1)), std::vector<RowIntervals>(tokens_.size())) {}

namespace {
void offer(RowIntervals& r, float hi, Index col) {
  // Keep the two largest upper ends; equal values keep the lower column, so the result does
  // not depend on the order blocks arrive in.
  auto better = [](float h, Index c, float h2, Index c2) {
    if (c2 < 0) return true;  // empty slot
    return h > h2 || (h == h2 && c < c2);
  };
  if (better(hi, col, r.best_hi, r.best_col)) {
    r.second_hi = r.best_hi;
    r.second_col = r.best_col;
    r.best_hi = hi;
    r.best_col = col;
  } else if (better(hi, col, r.second_hi, r.second_col)) {
    r.second_hi = hi;
    r.second_col = col;
  }
}
}  // namespace

void LmHeadCollector::consume(const reference::ReferenceBlock& b) {
  const int t = omp_get_thread_num();
  std::vector<RowIntervals>& rows = per_thread_[static_cast<std::size_t>(t) % per_thread_.size()];
  for (Index i = 0; i < b.rows && i < static_cast<Index>(rows.size()); ++i) {
    RowIntervals& r = rows[static_cast<std::size_t>(i)];
    const Index tok = tokens_[static_cast<std::size_t>(i)];
    for (Index c = b.col_begin; c < b.col_end; ++c) {
      const reference::Interval& iv = b.accept[b.at(i, c)];
      offer(r, iv.hi, c);
      if (c == tok) {
        r.token_lo = iv.lo;
        r.token_hi = iv.hi;
        r.token_seen = true;
      }
    }
  }
}

std::vector<RowIntervals> LmHeadCollector::result() const {
  std::vector<RowIntervals> out(tokens_.size());
  for (const auto& part : per_thread_) {
    for (std::size_t i = 0; i < part.size(); ++i) {
      const RowIntervals& p = part[i];
      RowIntervals& o = out[i];
      if (p.token_seen) {
        o.token_lo = p.token_lo;
        o.token_hi = p.token_hi;
        o.token_seen = true;
      }
      if (p.best_col >= 0) offer(o, p.best_hi, p.best_col);
      if (p.second_col >= 0) offer(o, p.second_hi, p.second_col);
    }
  }
  return out;
}

Result<LogitErrorModel> error_model_for(const DumpReader& reader, const LogitsRunInfo& run,
                                        std::optional<double> logit_error, double lambda) {
  LogitErrorModel m;
  for (const ProjectionInfo& p : reader.model().projections) {
    if (p.role != "lm_head" || p.logits_run != run.name) continue;
    NCERT_ASSIGN_OR_RETURN(auto tokens, reader.read_i32(run.path + "/tokens"));
    NCERT_ASSIGN_OR_RETURN(LoadedProjection L, load_projection(reader, p));
    L.info = &p;
    LmHeadCollector collector(tokens, omp_get_max_threads());
    class Sink final : public reference::ReferenceSink {
     public:
      explicit Sink(LmHeadCollector* c) : c_(c) {}
      void consume(const reference::ReferenceBlock& b) override { c_->consume(b); }
      LmHeadCollector* c_;
    } sink(&collector);
    reference::ReferenceOptions ro;
    ro.emulate_walk = false;
    auto s = reference::evaluate_reference(L.problem(lambda), sink, ro);
    if (!s.ok()) return s.status().with_context(p.path);
    m.kind = LogitErrorModel::Kind::kLmHead;
    m.source = "lm_head projection " + p.name;
    m.intervals = collector.result();
    return m;
  }
  if (logit_error) {
    m.kind = LogitErrorModel::Kind::kAbsolute;
    m.absolute = *logit_error;
    m.source = "--logit-error " + format_float(*logit_error);
  }
  return m;
}

Result<RunWitnesses> witness_run(const DumpReader& reader, const LogitsRunInfo& run,
                                 LogitErrorModel model, FileHashCursor* hash) {
  RunWitnesses out;
  out.run = run.name;
  out.vocab = run.vocab;
  NCERT_ASSIGN_OR_RETURN(auto tokens, reader.read_i32(run.path + "/tokens"));
  std::vector<std::int64_t> positions;
  if (run.has_positions) {
    NCERT_ASSIGN_OR_RETURN(positions, reader.read_i64(run.path + "/positions"));
  }
  // About 16 MiB per block (27 rows of a 151,936 vocabulary): memory stays flat in T.
  std::vector<const DatasetInfo*> datasets = {reader.model().dataset(run.path + "/logits")};
  for (const ProjectionInfo& p : reader.model().projections) {
    if (p.role == "lm_head" && p.logits_run == run.name) datasets.push_back(reader.model().dataset(p.path + "/y_unpacked"));
  }
  const Index per_block = block_rows_for(datasets, 16 << 20, 64);
  NCERT_ASSIGN_OR_RETURN(RowStream stream, RowStream::open(reader, run.path + "/logits", per_block, hash));
  // With an lm_head, its y_unpacked rows must be the logits rows themselves.
  std::optional<RowStream> head;
  Index head_stride = 0;
  std::string head_path;
  if (model.kind == LogitErrorModel::Kind::kLmHead) {
    for (const ProjectionInfo& p : reader.model().projections) {
      if (p.role == "lm_head" && p.logits_run == run.name && p.has_y_unpacked && p.output == DType::kF32) {
        NCERT_ASSIGN_OR_RETURN(RowStream h, RowStream::open(reader, p.path + "/y_unpacked", per_block));
        head = std::move(h);
        head_stride = p.out_stride;
        head_path = p.path + "/y_unpacked";
      }
    }
  }
  out.witnesses.resize(static_cast<std::size_t>(run.tokens));
  // Rows whose lm_head output differs from the logits row (set per row; the first is reported).
  std::vector<char> head_differs(head ? static_cast<std::size_t>(run.tokens) : 0, 0);
  std::vector<RowStream*> streams = {&stream};
  if (head) streams.push_back(&*head);
  NCERT_RETURN_IF_ERROR(stream_rows(streams, run.tokens, [&](Index t, const unsigned char* const* rows) {
    const float* row = reinterpret_cast<const float*>(rows[0]);
    const RowScan scan = scan_row(row, run.vocab);
    Witness w = witness_row(row, run.vocab, scan, tokens[static_cast<std::size_t>(t)], model, t);
    if (!positions.empty()) w.position = positions[static_cast<std::size_t>(t)];
    out.witnesses[static_cast<std::size_t>(t)] = std::move(w);
    if (head) {
      head_differs[static_cast<std::size_t>(t)] = std::memcmp(row, rows[1], static_cast<std::size_t>(run.vocab) * 4) != 0;
    }
  }));
  for (std::size_t t = 0; t < head_differs.size(); ++t) {
    if (!head_differs[t]) continue;
    // Re-read the one row pair to name the first differing token.
    std::vector<float> a(static_cast<std::size_t>(run.vocab)), h(static_cast<std::size_t>(head_stride));
    NCERT_RETURN_IF_ERROR(reader.read_rows(run.path + "/logits", static_cast<Index>(t), 1, a.data()));
    NCERT_RETURN_IF_ERROR(reader.read_rows(head_path, static_cast<Index>(t), 1, h.data()));
    for (Index j = 0; j < run.vocab; ++j) {
      if (reference::f32_bits(a[static_cast<std::size_t>(j)]) != reference::f32_bits(h[static_cast<std::size_t>(j)])) {
        out.lm_head_mismatch = true;
        out.lm_head_mismatch_text = "row " + std::to_string(t) + " token " + std::to_string(j) + ": logits " +
                                    hex_bits_f32(a[static_cast<std::size_t>(j)]) + " but the lm_head output is " +
                                    hex_bits_f32(h[static_cast<std::size_t>(j)]);
        break;
      }
    }
    break;
  }
  for (const Witness& w : out.witnesses) out.failed += !w.ok;
  out.model = std::move(model);
  return out;
}

Json witness_json(const Witness& w) {
  Json j = Json{{"row", w.row}, {"position", w.position}, {"token", w.token}};
  if (!w.ok) {
    j["failure"] = w.failure;
    return j;
  }
  j["logit"] = w.logit;
  j["runner_up"] = w.runner_up;
  j["runner_up_logit"] = w.runner_up_logit;
  j["margin"] = w.margin;
  j["margin_ulps"] = w.margin_ulps;
  j["ties"] = w.ties;
  j["class"] = std::string(witness_class_name(w.cls));
  if (w.cls == WitnessClass::kCertified || w.cls == WitnessClass::kNearTie) j["certified_gap"] = w.certified_gap;
  j["row_xxh3_128"] = w.row_xxh3;
  return j;
}

Result<std::optional<LmHeadCells>> lm_head_cells(const DumpReader& reader, const LogitsRunInfo& run,
                                                 const std::vector<std::pair<Index, Index>>& cells,
                                                 double lambda) {
  for (const ProjectionInfo& p : reader.model().projections) {
    if (p.role != "lm_head" || p.logits_run != run.name || !p.has_y_unpacked || p.output != DType::kF32) continue;
    NCERT_ASSIGN_OR_RETURN(LoadedProjection L, load_projection(reader, p));
    L.info = &p;
    LmHeadCells out;
    out.projection = p.name;
    out.y_unpacked = p.path + "/y_unpacked";
    out.cells.resize(cells.size());
    // Blocks own disjoint column ranges, so each cell is written by exactly one block.
    class Sink final : public reference::ReferenceSink {
     public:
      Sink(const std::vector<std::pair<Index, Index>>& c, std::vector<reference::Interval>& o) : c_(c), o_(o) {}
      void consume(const reference::ReferenceBlock& b) override {
        for (std::size_t k = 0; k < c_.size(); ++k) {
          const auto [row, col] = c_[k];
          if (row < b.rows && col >= b.col_begin && col < b.col_end) o_[k] = b.accept[b.at(row, col)];
        }
      }
      const std::vector<std::pair<Index, Index>>& c_;
      std::vector<reference::Interval>& o_;
    } sink(cells, out.cells);
    reference::ReferenceOptions ro;
    ro.emulate_walk = false;
    auto s = reference::evaluate_reference(L.problem(lambda), sink, ro);
    if (!s.ok()) return s.status().with_context(p.path);
    return std::optional<LmHeadCells>(std::move(out));
  }
  return std::optional<LmHeadCells>();
}

CheckResult witness_check(const RunWitnesses& r) {
  CheckResult c;
  c.id = "logits/" + r.run + "/witness";
  c.kind = "witness";
  Index counts[4] = {0, 0, 0, 0};
  const Witness* first_fail = nullptr;
  const Witness* smallest = nullptr;
  for (const Witness& w : r.witnesses) {
    if (!w.ok) {
      if (!first_fail) first_fail = &w;
      continue;
    }
    ++counts[static_cast<int>(w.cls)];
    if (w.ties < 2 && (!smallest || w.margin < smallest->margin)) smallest = &w;
  }
  c.stats = Json{{"tokens", r.witnesses.size()},
                 {"vocab", r.vocab},
                 {"error_source", r.model.source},
                 {"certified", counts[0]},
                 {"near_tie", counts[1]},
                 {"tie", counts[2]},
                 {"unbounded", counts[3]},
                 {"failed", r.failed}};
  if (smallest) {
    c.stats["min_margin"] = smallest->margin;
    c.stats["min_margin_position"] = smallest->position;
    c.stats["min_margin_ulps"] = smallest->margin_ulps;
  }
  if (first_fail) {
    c.verdict = Verdict::kFail;
    c.reason = "run " + r.run + " position " + std::to_string(first_fail->position) + ": " + first_fail->failure +
               "; " + std::to_string(r.failed) + " of " + std::to_string(r.witnesses.size()) + " emissions fail";
    c.stats["position"] = first_fail->position;
    c.stats["token"] = first_fail->token;
    return c;
  }
  if (r.lm_head_mismatch) {
    c.verdict = Verdict::kFail;
    c.reason = "run " + r.run + ": the logits rows are not the lm_head's outputs (" + r.lm_head_mismatch_text +
               "), so its reference intervals do not bound them";
    return c;
  }
  c.reason = std::to_string(r.witnesses.size()) + " emissions are their rows' maxima: " + std::to_string(counts[0]) +
             " certified, " + std::to_string(counts[1]) + " near-tie, " + std::to_string(counts[2]) + " tie, " +
             std::to_string(counts[3]) + " unbounded (error: " + r.model.source + ")";
  if (smallest) {
    c.reason += "; smallest margin " + format_short(smallest->margin) + " (" + format_short(smallest->margin_ulps) +
                " ulps) at position " + std::to_string(smallest->position);
  }
  return c;
}

}  // namespace ncert::certify
