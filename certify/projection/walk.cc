// walk: when the dump declares the kernel's K walk, every engine value equals the walk emulated
// bit for bit (reference/k_walk.h), epilogue included.
#include <algorithm>
#include <cmath>
#include <string>

#include "certify/projection/checks.h"
#include "certify/projection/detail/text.h"

namespace ncert::certify {
namespace {

/// Where the values that differ lie. A wrong walk declaration, accumulator or epilogue moves
/// values in every column; values that differ in one column only point at that column's weights
/// (a group's scale 0.2 % off in a bf16 output moves a few of its 32 values, docs/detection.md),
/// in one row only at that row's activations. Either is said only where chance would rarely put
/// the values there (below 1 %: `distinct` values in one of `cols` columns, cols^(1 - distinct); 2 of
/// 32 x 256 values in one column, 1 in 256, as a bf16 group's scale 0.2 % off moved them)
/// and the output has more than one line across (a one-row GEMV's values all lie in row 0
/// whatever their cause, a single element's in one row and one column: a review's both were
/// blamed on operands).
/// Where y_unpacked equals the walk and only the packed outputs differ, the packed path's values
/// are wrong, not the operands: identity reads that (a row the scatter never wrote, still
/// y_before, had read "that row's activations are not those the kernel used").
std::string where_they_lie(const WalkTally& span, Index distinct, Index rows, Index cols, bool bias, bool packed_only) {
  if (span.mismatches < 1) return "";
  if (packed_only) {
    return std::string(span.row_min == span.row_max ? ", all in row " + std::to_string(span.row_min) : "") +
           ", in the packed outputs alone (y_unpacked equals the walk): the packed path's values, which identity "
           "checks, not the operands";
  }
  if (span.mismatches < 2) return "";
  if (span.col_min == span.col_max && span.row_min == span.row_max) {
    return ", all at one element (row " + std::to_string(span.row_min) + ", column " + std::to_string(span.col_min) +
           ", in each output that holds it)";
  }
  const auto rare = [&](Index lines) {
    return lines >= 2 && (static_cast<double>(distinct) - 1) * std::log10(static_cast<double>(lines)) > 2;
  };
  if (span.col_min == span.col_max && rare(cols)) {
    return ", all in column " + std::to_string(span.col_min) + ": that column's weights (or their scales" +
           (bias ? ", or its bias" : "") + ") are not those the kernel used";
  }
  if (span.row_min == span.row_max && rare(rows)) {
    // Or the kernel took another path for that row alone: ONNX Runtime's W4A8 kernel sums the
    // last row of an odd M in another lane order than the rows it pairs (a review's M = 3 call).
    return ", all in row " + std::to_string(span.row_min) +
           ": that row's activations are not those the kernel used, or the kernel computed that row by another "
           "path (a kernel that pairs rows and sums the last of an odd count alone)";
  }
  const auto lines = [](const char* one, Index lo, Index hi) {
    return lo == hi ? std::string(one) + " " + std::to_string(lo)
                    : std::string(one) + "s " + std::to_string(lo) + "-" + std::to_string(hi);
  };
  return ", in " + lines("row", span.row_min, span.row_max) + " and " + lines("column", span.col_min, span.col_max);
}

}  // namespace

CheckResult walk_check(const ProjectionFacts& f, const ReferencePass& pass) {
  const ProjectionInfo& info = f.info();
  CheckResult r = projection_check(info, CheckKind::kWalk);
  WalkEvidence e;
  e.k_walk = info.walk.name;
  std::optional<EngineOutputId> first;
  WalkTally span;      // every output's tally merged: the rows and columns all mismatches span
  Index distinct = 0;  // a lower bound on the elements that differ: the most one output holds
  for (EngineOutputId id : kAllEngineOutputs) {
    if (!f.data.output(id).present) continue;
    const WalkTally& w = pass.walk[static_cast<std::size_t>(id)];
    e.outputs.push_back(
        {std::string(engine_output_name(id)), w.compared, w.mismatches, w.row_min, w.row_max, w.col_min, w.col_max});
    span.merge(w);
    e.compared += w.compared;
    e.mismatches += w.mismatches;
    if (!first && w.mismatches > 0) first = id;
    distinct = std::max(distinct, w.mismatches);  // each output's values are distinct elements
  }
  // y_unpacked dumped and equal to the walk everywhere: any difference is the packed path's.
  const bool unpacked_agrees = f.data.y_unpacked.present &&
                               pass.walk[static_cast<std::size_t>(EngineOutputId::kUnpacked)].compared > 0 &&
                               pass.walk[static_cast<std::size_t>(EngineOutputId::kUnpacked)].mismatches == 0;
  if (first) {
    const WalkTally& w = pass.walk[static_cast<std::size_t>(*first)];
    const std::string name(engine_output_name(*first));
    const Index slot = *first != EngineOutputId::kUnpacked ? f.slot_of_row[static_cast<std::size_t>(w.row)] : -1;
    r.verdict = Verdict::kFail;
    r.reason = name + " " + detail::where(w.row, w.col, slot) + " differs from the emulated " + info.walk.name +
               " walk: engine " + detail::hex_bits(w.engine, info.output) + " vs walk " +
               detail::hex_bits(w.walk, info.output) + "; " + std::to_string(e.mismatches) + " of " +
               std::to_string(e.compared) + " values differ" +
               where_they_lie(span, distinct, info.m, info.n, info.bias_dtype.has_value(), unpacked_agrees);
    r.first_failure = Location{name, w.row, w.col, slot};
  } else {
    r.reason = "all " + std::to_string(e.compared) + " engine values equal the emulated " + info.walk.name +
               " walk bit for bit";
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
