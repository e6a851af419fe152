#include "certify/logits/lm_head.h"

#include <omp.h>

#include <cstring>

#include "certify/projection/memory.h"
#include "certify/projection/projection_data.h"
#include "certify/report/format.h"
#include "reference/float_bits.h"
#include "reference/linear_spec.h"

namespace ncert::certify {

const ProjectionInfo* find_lm_head(const DumpModel& model, const std::string& run) {
  for (const ProjectionInfo& p : model.projections) {
    if (p.role == "lm_head" && p.logits_run == run) return &p;
  }
  return nullptr;
}

std::string undeclared_lm_head_hint(const DumpModel& model, const LogitsRunInfo& run) {
  for (const ProjectionInfo& p : model.projections) {
    // Only a projection that says it is an lm_head (by role or name): a width that happens to
    // match the vocabulary is no reason to advise declaring an MLP projection one.
    const bool named = p.role == "lm_head" || p.name.find("lm_head") != std::string::npos;
    if (!named || !p.has_y_unpacked || p.n != run.vocab) continue;
    std::string missing;
    if (p.role != "lm_head")
      missing = "role = \"lm_head\"" + std::string(p.role.empty() ? "" : " (it has \"" + p.role + "\")");
    if (p.logits_run != run.name) {
      missing += (missing.empty() ? "" : " and ") + std::string("logits_run = \"") + run.name + "\"" +
                 (p.logits_run.empty() ? "" : " (it has \"" + p.logits_run + "\")");
    }
    return "projection " + p.name + " has a y_unpacked as wide as the run's vocabulary (" + std::to_string(run.vocab) +
           ") but is not declared as its lm_head: give it " + missing;
  }
  return "";
}

std::string lm_head_unusable(const ProjectionInfo& head) {
  if (!head.has_y_unpacked) {
    return "lm_head " + head.name + " has no y_unpacked, so nothing ties its intervals to the logits rows";
  }
  // Its rows are read K (x) and vocabulary (y_unpacked) values wide; narrower ones fail its
  // geometry, and reading them would run past the stored arrays.
  if (const Status rows = reference::rows_hold_widths(head); !rows.ok()) {
    return "lm_head " + head.name + " cannot be read: " + rows.named_message();
  }
  return "";
}

namespace {
float head_value(const unsigned char* head_row, DType output, Index j) {
  return reference::decode_element(head_row, output, j);
}
}  // namespace

bool lm_head_row_matches(const float* logits_row, const unsigned char* head_row, DType output, Index vocab) {
  if (output == DType::kF32) return std::memcmp(logits_row, head_row, static_cast<std::size_t>(vocab) * 4) == 0;
  for (Index j = 0; j < vocab; ++j) {
    if (reference::f32_bits(logits_row[j]) != reference::f32_bits(head_value(head_row, output, j))) return false;
  }
  return true;
}

std::string lm_head_row_mismatch(const float* logits_row, const unsigned char* head_row, DType output, Index vocab,
                                 Index row) {
  for (Index j = 0; j < vocab; ++j) {
    const float h = head_value(head_row, output, j);
    if (reference::f32_bits(logits_row[j]) == reference::f32_bits(h)) continue;
    return "row " + std::to_string(row) + " token " + std::to_string(j) + ": logits " + format_f32(logits_row[j]) +
           " (" + hex_bits_f32(logits_row[j]) + ") but the lm_head output is " + format_f32(h) + " (" +
           hex_bits_f32(h) + ")";
  }
  return "";
}

LmHeadCollector::LmHeadCollector(std::vector<std::int32_t> tokens, std::vector<std::pair<Index, Index>> cells,
                                 int threads)
    : tokens_(std::move(tokens)),
      per_thread_(static_cast<std::size_t>(std::max(threads, 1)), std::vector<RowIntervals>(tokens_.size())),
      cells_(std::move(cells)),
      cell_intervals_(cells_.size()) {}

namespace {
/// Keeps the two largest values and their columns; equal values keep the lower column, so the
/// result does not depend on the order blocks arrive in.
void keep_two(float v, Index col, float& best, Index& best_col, float& second, Index& second_col) {
  // A NaN end reads as -inf, so no order of blocks lets one stick in a slot.
  auto better = [](float h, Index c, float h2, Index c2) {
    if (c2 < 0) return true;  // empty slot
    const float a = std::isnan(h) ? -INFINITY : h, b = std::isnan(h2) ? -INFINITY : h2;
    return a > b || (a == b && c < c2);
  };
  if (better(v, col, best, best_col)) {
    second = best;
    second_col = best_col;
    best = v;
    best_col = col;
  } else if (better(v, col, second, second_col)) {
    second = v;
    second_col = col;
  }
}

void offer(RowIntervals& r, float hi, Index col) {
  keep_two(hi, col, r.best_hi, r.best_col, r.second_hi, r.second_col);
}
void offer_lo(RowIntervals& r, float lo, Index col) {
  keep_two(lo, col, r.best_lo, r.best_lo_col, r.second_lo, r.second_lo_col);
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
      offer_lo(r, iv.lo, c);
      if (c == tok) {
        r.token_lo = iv.lo;
        r.token_hi = iv.hi;
        r.token_seen = true;
      }
    }
  }
  // Blocks own disjoint column ranges, so each cell is written by exactly one block.
  for (std::size_t k = 0; k < cells_.size(); ++k) {
    const auto [row, col] = cells_[k];
    if (row < b.rows && col >= b.col_begin && col < b.col_end) cell_intervals_[k] = b.accept[b.at(row, col)];
  }
}

std::vector<RowIntervals> LmHeadCollector::rows() const {
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
      if (p.best_lo_col >= 0) offer_lo(o, p.best_lo, p.best_lo_col);
      if (p.second_lo_col >= 0) offer_lo(o, p.second_lo, p.second_lo_col);
    }
  }
  return out;
}

Result<std::string> evaluate_lm_head(const DumpReader& reader, const ProjectionInfo& head, double lambda,
                                     LmHeadCollector& collector) {
  reference::ReferenceOptions ro;
  ro.emulate_walk = false;
  NCERT_RETURN_IF_ERROR(check_projection_memory(reader.model(), head, omp_get_max_threads(), ro.block_cols,
                                                reader.options().memory_limit));
  NCERT_ASSIGN_OR_RETURN(LoadedProjection data, load_projection(reader, head));
  data.info = &head;
  // The host guards `check` runs before it evaluates a projection (its geometry check): weights
  // that fail one (a K the walk or an AF4 group does not divide, segments that do not tile N)
  // have no reference, and the head is one projection's FAIL there, not a refused dump.
  if (const Status g = data.weights_evaluable(); !g.ok()) {
    return g.named_message();
  }
  // And what check's reference blocker asks of the problem (an x_quant_group that does not
  // divide K, an x narrower than K): one projection's FAIL there, not a refused dump here.
  const reference::LinearProblem problem = data.problem(lambda);
  if (const Status p = reference::validate_problem(problem); !p.ok()) {
    return p.named_message();
  }
  class Sink final : public reference::ReferenceSink {
   public:
    explicit Sink(LmHeadCollector* c) : c_(c) {}
    void consume(const reference::ReferenceBlock& b) override { c_->consume(b); }
    LmHeadCollector* c_;
  } sink(&collector);
  auto s = reference::evaluate_reference(problem, sink, ro);
  if (!s.ok()) return s.status().with_context(reader.model().file + ": " + head.path);
  return std::string();
}

LogitErrorModel absolute_error_model(std::optional<double> logit_error) {
  LogitErrorModel m;
  if (logit_error) {
    m.kind = LogitErrorModel::Kind::kAbsolute;
    m.absolute = *logit_error;
    m.source = "--logit-error " + format_float(*logit_error);
  }
  return m;
}

LogitErrorModel lm_head_error_model(const ProjectionInfo& head, std::vector<RowIntervals> intervals) {
  LogitErrorModel m;
  m.kind = LogitErrorModel::Kind::kLmHead;
  m.source = "lm_head projection " + head.name;
  m.head_dataset = head.path + "/y_unpacked";
  m.head_output = head.output;
  m.intervals = std::move(intervals);
  return m;
}

std::string head_not_evaluated(const ProjectionInfo& head, std::string_view why) {
  return "lm_head " + head.name + " could not be evaluated: " + std::string(why);
}

LogitErrorModel unevaluated_head_model(std::optional<double> logit_error, const std::string& why, std::string hint) {
  LogitErrorModel m = absolute_error_model(logit_error);
  m.source += " (" + why + ")";
  m.hint = std::move(hint);
  return m;
}

Result<LogitErrorModel> error_model_for(const DumpReader& reader, const LogitsRunInfo& run,
                                        std::optional<double> logit_error, double lambda) {
  const ProjectionInfo* head = find_lm_head(reader.model(), run.name);
  if (head && lm_head_unusable(*head).empty()) {
    NCERT_ASSIGN_OR_RETURN(auto tokens, reader.read_i32(run.path + "/tokens"));
    LmHeadCollector collector(std::move(tokens), {}, omp_get_max_threads());
    NCERT_ASSIGN_OR_RETURN(const std::string blocked, evaluate_lm_head(reader, *head, lambda, collector));
    if (blocked.empty()) return lm_head_error_model(*head, collector.rows());
    return unevaluated_head_model(
        logit_error, head_not_evaluated(*head, blocked),
        "correct lm_head " + head->name + "'s weights or declarations (check fails its geometry)");
  }
  if (!head) {
    LogitErrorModel m = absolute_error_model(logit_error);
    m.hint = undeclared_lm_head_hint(reader.model(), run);
    return m;
  }
  return unevaluated_head_model(
      logit_error, lm_head_unusable(*head),
      head->has_y_unpacked ? "correct lm_head " + head->name + " as its geometry check says" : "");
}

}  // namespace ncert::certify
