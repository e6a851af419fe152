// bound: every engine value lies inside the rigorous interval of the exact reference
// (docs/error-bounds.md); values beyond the probabilistic tier fail only with --strict.
#include <algorithm>
#include <cmath>
#include <optional>

#include "certify/projection/checks.h"
#include "certify/projection/detail/text.h"
#include "certify/projection/diagnosis.h"

namespace ncert::certify {

namespace {

/// Which weights the reference used for a segment, and why (docs/error-bounds.md §2).
std::string weight_model(const SegmentInfo& s) {
  std::string where = s.name + " [" + std::to_string(s.row_begin) + "," + std::to_string(s.row_end) + "): ";
  if (reference::is_scaled_format(s.format)) {
    const reference::ScaledView& v = s.scaled;
    return where + std::string(reference::weight_format_name(s.format)) + " codes x scales per " +
           std::to_string(v.scale_rows) + " x " + std::to_string(v.group_size) + ", dequant " +
           std::string(reference::dequant_name(v.dequant)) +
           (v.dequant == reference::Dequant::kF32 || v.dequant == reference::Dequant::kOutput
                ? ": the kernel's fl32(q*s)"
                : ": q*s exactly");
  }
  if (s.format != reference::WeightFormat::kAf4) {
    return where + std::string(reference::weight_format_name(s.format)) + " weights, exact";
  }
  const reference::Af4Layout& L = s.af4;
  const bool zero_point = L.variant == reference::Af4Variant::kZeroPoint;
  switch (L.dequant) {
    case reference::Dequant::kExact:
      return where + (zero_point ? "af4 exact: (q - zp)*s exactly" : "af4 exact: s*q + b exactly");
    case reference::Dequant::kFolded:
      return where + (zero_point ? "af4 folded: (q - zp)*s exactly, K + 3 roundings charged on |s*q| + |s*zp|"
                                 : "af4 folded: s*q + b exactly, K + 3 roundings charged on |s*q| + |b|");
    case reference::Dequant::kF32:
    case reference::Dequant::kOutput:
      return where + "af4 " + std::string(reference::dequant_name(L.dequant)) + " (" +
             std::string(reference::dequant_op_name(L.dequant_op)) +
             "): the kernel's own weights, exactly; no dequantization slack charged";
  }
  return where;
}

/// The declarations the reference relied on, in one clause: "accumulator f32-rn; kv: af4 dequant
/// exact" (docs/error-bounds.md §2). Every bound failure names them.
std::string declarations_text(const ProjectionInfo& info) {
  // Built with append: GCC 12 reports a false -Wrestrict on chains of operator+ here (bug 105329).
  std::string s = "assumed: accumulator ";
  s.append(info.accumulator.name);
  if (info.output != DType::kF32) {
    s.append(", ").append(dtype_name(info.output)).append(" output rounding ");
    s.append(reference::output_rounding_name(info.output_rounding));
  }
  if (info.x_quant.type != reference::XQuantType::kNone) {
    s.append(", x quantized ").append(reference::x_quant_name(info.x_quant.type));
  }
  for (const SegmentInfo& seg : info.segments) {
    s.append("; ").append(seg.name).append(": ").append(reference::weight_format_name(seg.format));
    if (seg.format == reference::WeightFormat::kAf4) {
      s.append(" ").append(reference::af4_variant_name(seg.af4.variant));
      s.append(" dequant ").append(reference::dequant_name(seg.af4.dequant));
      if (seg.af4.dequant == reference::Dequant::kF32 || seg.af4.dequant == reference::Dequant::kOutput) {
        s.append(" (").append(reference::dequant_op_name(seg.af4.dequant_op)).append(")");
      }
    } else if (reference::is_scaled_format(seg.format)) {
      s.append(" dequant ").append(reference::dequant_name(seg.scaled.dequant));
    }
  }
  return s;
}

/// "; y_packed holds a larger share of its values outside than y_unpacked, which the diagnosis
/// samples: a fault of the packed path besides", or "": a fault fitted on y_unpacked's sample
/// says nothing of a packed output that strays further (a review's y_packed x 0.5 beside
/// y_unpacked x 1.002 read "every output scaled 1.002x ... holds them all" alone).
std::string packed_besides(const BoundEvidence& e) {
  const OutputBound* unpacked = nullptr;
  for (const OutputBound& o : e.outputs) {
    if (o.output == engine_output_name(EngineOutputId::kUnpacked)) unpacked = &o;
  }
  if (unpacked == nullptr) return "";
  std::string names;
  for (const OutputBound& o : e.outputs) {
    if (&o == unpacked) continue;
    // outside / elements beyond y_unpacked's, in integers.
    if (o.stats.outside * unpacked->stats.elements > unpacked->stats.outside * o.stats.elements) {
      names.append(names.empty() ? "" : " and ").append(o.output);
    }
  }
  if (names.empty()) return "";
  return "; " + names + (names.find(" and ") == std::string::npos ? " holds" : " hold") +
         " a larger share of values outside than y_unpacked, which the diagnosis samples: a fault of the packed path "
         "besides";
}

/// "; no declaration tried fits the 1024 sampled values, but a fault does: ...": the fault trial
/// that brings the sample within the rounding noise, where no declaration does: a wider B only
/// held its values (an input channel x 1.02 read "the data fits accumulator = f32-rz"), and a few
/// rows of large activations there carried it (read as their fault).
std::string fault_text(const DeclarationTrial& fault, const DeclarationTrial& declared, const BoundEvidence& e) {
  const std::string sampled = std::to_string(declared.sampled), as_declared = std::to_string(declared.inside);
  std::string out;
  out.append("; no declaration tried fits the ").append(sampled).append(" sampled values, but a fault does: ");
  out.append(trial_text(fault));
  if (fault.sampled < declared.sampled) {
    // The scale fit counts only values that say anything of a scale (scale_trial).
    out.append(" holds all ").append(std::to_string(fault.sampled)).append(" it counts (the other ");
    out.append(std::to_string(declared.sampled - fault.sampled)).append(" are exact zeros inside their intervals)");
    out.append(", their energy ");
  } else {
    out.append(" holds them all, their energy ");
  }
  out.append(format_short(fault.energy));
  out.append(" within the rounding noise (limit ").append(format_short(diagnosis_energy_limit(fault.sampled)));
  out.append("; ").append(format_short(declared.energy)).append(" and ").append(as_declared);
  // One segment's or several segments' weights (channel_trial names them in `segment`),
  // every value's scale (scale_trial) or one row's (row_scale_trial).
  const bool several = fault.segment.find(", ") != std::string::npos;
  const FaultKind kind = read_fault(fault).kind;
  out.append(kind == FaultKind::kEveryValue ? " inside as declared): a kernel fault scaling every value"
             : kind == FaultKind::kRow
                 ? " inside as declared): a kernel fault of that row (its activations, or the path that computed it)"
             : fault.segment.empty() ? " inside as declared): a kernel fault of that channel's weights or activations"
             : several ? " inside as declared): a kernel fault of that channel's weights in those segments"
                       : " inside as declared): a kernel fault of that channel's weights in that segment");
  out.append(", not a declaration mistake");
  // A row's fault is a larger share of a packed output holding fewer rows: there the packed
  // outputs' values outside in rows y_unpacked's are not in tell the packed path's own fault
  // (a review's y_packed row 20 beside y_unpacked row 3).
  const bool row = kind == FaultKind::kRow;
  if (!row) out.append(packed_besides(e));
  if (row && e.rows_elsewhere) {
    out.append("; the packed outputs' values outside lie in other rows too: a fault of the packed path besides");
  }
  return out;
}

/// "; the data fits dequant = output for segment kv (all 2048 sampled values inside; 310 as
/// declared)" for the trials that hold every sampled value, or what the best trial reached.
std::string diagnosis_text(const std::vector<DeclarationTrial>& trials, const BoundEvidence& e,
                           bool bias_reads_direction) {
  const RowSpread spread = row_spread(e);
  if (trials.size() == 1 && trials.front().inside == trials.front().sampled && spread != RowSpread::kBroad) {
    // The sample held none of the values outside (they lie in rows or columns it did not draw): no
    // declaration is tried, and where they lie is what there is to say (a reviewer's row 8 x 1.01
    // under bf16 outputs, 1716 values outside, read with no word of where).
    std::string out = "; the values outside lie in " + rows_outside_text(e) + ", none among the " +
                      std::to_string(trials.front().sampled) + " values the diagnosis sampled";
    if (spread == RowSpread::kConcentrated)
      out += e.rows_outside == 1 ? ": a fault of that row" : ": a fault of those rows";
    return out;
  }
  if (trials.size() < 2) return "";
  const bool few = spread != RowSpread::kBroad;
  const DeclarationTrial& declared = trials.front();
  // By the share of its values inside: a walk trial that missed on the sample's first columns
  // was counted on those alone (diagnosis.cc, walk_equal).
  const auto more_inside = [](const DeclarationTrial& a, const DeclarationTrial& b) {
    return a.inside * b.sampled > b.inside * a.sampled;
  };
  const DeclarationTrial* best = nullptr;
  for (std::size_t i = 1; i < trials.size(); ++i) {
    if (trials[i].sampled > 0 && (!best || more_inside(trials[i], *best))) best = &trials[i];
  }
  // Several may hold every value (a wider accumulator's B holds a mistake's few values outside):
  // the one whose residuals are least energetic leads, the kernel's own declaration leaving
  // rounding noise only.
  std::string fits;
  Index left = 0;  // the leading fit's values left to bound
  for (const DeclarationTrial* t : rank_by_energy(fitting_trials(trials, spread))) {
    if (!fits.empty()) fits.append("; or ");
    if (fits.empty()) left = t->left;
    fits.append(trial_text(*t));
  }
  const std::string sampled = std::to_string(declared.sampled), as_declared = std::to_string(declared.inside);
  std::string out;
  if (!fits.empty() && left > 0) {
    out.append("; the data fits ").append(fits).append(" (").append(std::to_string(declared.sampled - left));
    out.append(" of ").append(sampled).append(" sampled values inside, the ").append(std::to_string(left));
    out.append(left == 1 ? " other outside as declared too: a wrong value"
                         : " others outside as declared too: wrong values");
    out.append(" beside the mistake, left to bound; ").append(as_declared).append(" as declared)");
  } else if (!fits.empty()) {
    out.append("; the data fits ").append(fits).append(" (all ").append(sampled).append(" sampled values inside; ");
    out.append(as_declared).append(" as declared)");
    // A wider B alone holds a few rows' fault too (fitting_trials names it there only where the
    // declaration's energy is within the noise already, as under bf16 outputs); bias then runs
    // and tells them apart by direction (explained_earlier).
    const std::vector<const DeclarationTrial*> held = fitting_trials(trials, spread);
    const bool widen_only = std::all_of(
        held.begin(), held.end(), [](const DeclarationTrial* t) { return t->effect == TrialEffect::kWidensBound; });
    if (spread == RowSpread::kFewRows && widen_only) {
      out.append(", by a wider bound alone; the values outside lie in ").append(rows_outside_text(e));
      out.append(e.rows_outside == 1 ? ", and a fault of that row reads the same"
                                     : ", and a fault of those rows reads the same");
      // bias runs where its model applies (bf16 / f16 outputs rounded to nearest after a
      // round-to-nearest accumulator), and truncation moves values toward zero only.
      if (bias_reads_direction) out.append(" (bias tells them apart by the direction its values beyond lie in)");
    }
  } else if (const DeclarationTrial* fault = fault_fit(trials)) {
    out.append(fault_text(*fault, declared, e));
  } else if (few) {
    // A trial may hold every sampled value by a wider bound alone; in a few rows that is a
    // fault of theirs (two rows at 1.01x and 1.02x held by accumulator = matrix-unit).
    out.append(e.rows_elsewhere ? "; the values outside y_unpacked lie in " : "; the values outside lie in ");
    out.append(rows_outside_text(e));
    if (e.rows_elsewhere)
      out.append(" (the packed outputs' lie in other rows too: a fault of the packed path besides)");
    const bool wider_alone = best && best->inside == best->sampled;
    if (declared.energy >= 0 && declared.energy <= diagnosis_energy_limit(declared.sampled)) {
      // Under bf16 outputs half a spacing can dwarf a row's fault: the energy cannot tell, the
      // rows' concentration does (row_spread).
      out.append(", too few for a declaration mistake (the ").append(sampled);
      out.append(" sampled values' energy within the rounding noise as declared");
      if (wider_alone) out.append("; ").append(trial_text(*best)).append(" holds them all, by a wider bound alone");
      out.append(")");
    } else {
      out.append(", and no declaration tried brings the ").append(sampled);
      out.append(" sampled values within the rounding noise");
      if (wider_alone) out.append(" (").append(trial_text(*best)).append(" holds them all, by a wider bound alone)");
    }
    out.append(e.rows_outside == 1 ? ": a fault of that row" : ": a fault of those rows");
    out.append(", not a declaration mistake");
  } else if (const DeclarationTrial* wider = narrower_than_declared(trials, spread)) {
    // A directed accumulator's wider B holds the values, but their residuals do not fall short
    // toward zero as its would (fitting_trials): a narrower accumulator rounding to nearest.
    out.append("; ").append(trial_text(*wider)).append(" holds all ").append(sampled);
    out.append(" sampled values by a wider bound alone, but their residuals as declared are centred (lean ");
    out.append(format_short(declared.lean)).append(", where a directed accumulator's fall short toward zero; ");
    out.append(as_declared).append(" inside as declared): a narrower accumulator that rounds to nearest, or a kernel ");
    out.append("fault, not a declaration ncert tries");
  } else if (best && more_inside(*best, declared)) {
    out.append("; no single other declaration fits the ").append(sampled).append(" sampled values (best: ");
    out.append(trial_text(*best)).append(", ").append(std::to_string(best->inside));
    if (best->sampled != declared.sampled) {
      out.append(" of the ").append(std::to_string(best->sampled)).append(" in the sample's first columns");
    }
    out.append(" inside; ");
    out.append(as_declared).append(" as declared): a kernel fault, or more than one mistake");
  } else {
    // No trial does better than the declaration: naming one as "best" would point nowhere.
    out.append("; none of the ").append(std::to_string(trials.size() - 1));
    out.append(" other declarations tried fits the sampled values better than the declared one (");
    out.append(as_declared).append(" of ").append(sampled).append(" inside): not a declaration mistake ncert tries");
  }
  return out;
}

/// "y_unpacked 1168 of 4096, y_packed 1168 of 4096": each output buffer's own count (a sum over
/// the buffers counts the same wrong row up to three times, once per buffer holding it).
std::string outside_per_output(const BoundEvidence& e) {
  std::string t;
  for (const OutputBound& o : e.outputs) {
    if (!t.empty()) t += ", ";
    t += o.output + " " + std::to_string(o.stats.outside) + " of " + std::to_string(o.stats.elements);
  }
  return t;
}

/// Per row of x: whether the output holds values there (y_unpacked every row, y_packed and
/// y_compact the selected rows; rows that are not live, RowNorms, not counted unless values
/// outside lie there), and whether any is outside (`outside_rows`, ReferencePass); `dominant`:
/// every row holding values outside is live and dominates; `named`: those rows, where at most
/// kFewRowsNamed do.
void count_rows(const ProjectionFacts& f, const RowNorms& norms, EngineOutputId id,
                const std::vector<char>& outside_rows, Index& held, Index& outside, bool& dominant,
                std::vector<Index>& named) {
  held = outside = 0;
  named.clear();
  bool all_large = true;
  for (Index r = 0; r < static_cast<Index>(f.slot_of_row.size()); ++r) {
    const std::size_t at = static_cast<std::size_t>(r);
    const bool in_output = id == EngineOutputId::kUnpacked || f.slot_of_row[at] >= 0;
    const bool out = at < outside_rows.size() && outside_rows[at] != 0;
    // Garbage in padding rows (a row of zeros) is not a large row's rounding: such a row is
    // held, and not dominant, once values outside lie there.
    if (!out && (!in_output || !norms.live(r))) continue;
    ++held;
    if (!out) continue;
    ++outside;
    if (static_cast<Index>(named.size()) <= kFewRowsNamed) named.push_back(r);
    all_large = all_large && in_output && norms.live(r) && norms.dominant(r);
  }
  if (static_cast<Index>(named.size()) > kFewRowsNamed) named.clear();
  dominant = outside > 0 && all_large;
}

/// BoundEvidence::rows_outside / rows_held from y_unpacked where it holds values outside: the
/// output the diagnosis samples, the first failure's and signature's, and the one holding the
/// most rows (one row of 8 at x 1.002 in both paths: its 1 of 8, not the packed outputs' 1 of
/// their 4 selected rows). Read from the packed outputs, where the spread was widest, a packed
/// path's fault in row 20 beside y_unpacked's in row 3 read "1 of 30 rows (row 20)" after
/// "y_unpacked row 3", and beside a truncation seen in a dominant row hid the truncation (a
/// review's). Else, of the packed outputs, the widest spread (the largest share of its rows) of
/// those that hold at least kFewRowsHeld rows where any does, else of the others: row_spread
/// reads from 4 rows up (one row of 4 at x 1.001, 16 values outside, had read "the data fits
/// accumulator = matrix-unit").
void spread_of_outside(const ProjectionFacts& f, const ReferencePass& pass, BoundEvidence& e) {
  bool many = false;  // the choice so far holds kFewRowsHeld rows or more
  std::optional<RowNorms> norms;
  const bool unpacked_outside =
      f.data.y_unpacked.present && pass.bound[static_cast<std::size_t>(EngineOutputId::kUnpacked)].outside() > 0;
  for (EngineOutputId id : kAllEngineOutputs) {
    const std::size_t at = static_cast<std::size_t>(id);
    if (!f.data.output(id).present || pass.bound[at].outside() == 0) continue;
    if (unpacked_outside && id != EngineOutputId::kUnpacked) continue;
    if (!norms) norms = row_norms(f);
    Index held = 0, outside = 0;
    bool dominant = false;
    std::vector<Index> named;
    count_rows(f, *norms, id, pass.outside_rows[at], held, outside, dominant, named);
    if (held == 0) continue;
    const bool more = held >= kFewRowsHeld;
    const bool wider = e.rows_held == 0 || outside * e.rows_held > e.rows_outside * held;
    if ((more && !many) || (more == many && wider)) {
      e.rows_outside = outside;
      e.rows_held = held;
      e.rows_values = pass.bound[at].outside();
      e.rows_dominant = dominant;
      e.rows_named = std::move(named);
      many = more;
    }
  }
  if (!unpacked_outside) return;
  // A packed path's own fault in other rows (a review's: y_packed's 1050 values outside in every
  // row beside y_unpacked's row 3 read "1 of 40 rows (row 3) ... a fault of that row").
  const std::vector<char>& unpacked = pass.outside_rows[static_cast<std::size_t>(EngineOutputId::kUnpacked)];
  for (EngineOutputId id : kAllEngineOutputs) {
    const std::vector<char>& other = pass.outside_rows[static_cast<std::size_t>(id)];
    if (id == EngineOutputId::kUnpacked || !f.data.output(id).present) continue;
    for (std::size_t i = 0; i < other.size(); ++i) {
      if (other[i] != 0 && (i >= unpacked.size() || unpacked[i] == 0)) e.rows_elsewhere = true;
    }
  }
}

/// Why no interval can be computed for some outputs: a bias, x (or its quantized form) or the
/// dequantized weights holding values that are not finite; none where every operand is.
std::optional<std::string> nonfinite_operands(const ProjectionFacts& f, const reference::ReferenceSummary& summary,
                                              double lambda) {
  const ProjectionInfo& info = f.info();
  if (summary.nonfinite_x == 0 && summary.nonfinite_w == 0) {
    // A bias that is not finite: the intervals through it are NaN, and the reason named no value
    // ("outside [nan, inf]", a review's bias[3] = inf).
    if (!reference::has_bias(info.epilogue)) return std::nullopt;
    const reference::VectorView bias = f.data.problem(lambda).bias;
    Index count = 0, first = -1;
    for (Index j = 0; j < bias.size; ++j) {
      if (std::isfinite(bias.at(j))) continue;
      if (count++ == 0) first = j;
    }
    if (count == 0) return std::nullopt;
    return "the bias holds " + std::to_string(count) + " value(s) that are not finite, first bias[" +
           std::to_string(first) + "] = " + format_float(bias.at(first)) +
           ": the reference cannot certify the outputs of those columns";
  }
  const Index row = summary.first_nonfinite_x / info.k, col = summary.first_nonfinite_x % info.k;
  if (summary.nonfinite_x > 0 && info.x_quant.type != reference::XQuantType::kNone) {
    // The reference multiplies the dumped codes by their scales (§3.6): x as stored may be
    // finite throughout while a scale is not (a review's NaN scale read "x holds ... values").
    const Index group = info.x_quant.group > 0 ? info.x_quant.group : info.k;
    return "the quantized activations (x_quantized with x_scales) hold " + std::to_string(summary.nonfinite_x) +
           " value(s) that are not finite or lie beyond f32's range, first at row " + std::to_string(row) + " col " +
           std::to_string(col) + " (its scale x_scales[" + std::to_string(row) + ", " + std::to_string(col / group) +
           "]): the reference cannot certify them";
  }
  if (summary.nonfinite_x > 0) {
    return "x holds " + std::to_string(summary.nonfinite_x) + " non-finite value(s), first at row " +
           std::to_string(row) + " col " + std::to_string(col) + ": the reference cannot certify them";
  }
  return "the dequantized weights hold " + std::to_string(summary.nonfinite_w) +
         " non-finite value(s), first at W row " + std::to_string(summary.first_nonfinite_w / info.k) + " col " +
         std::to_string(summary.first_nonfinite_w % info.k);
}

/// What the diagnosis adds to a bound failure: the likely declaration mistakes where 1 % of the
/// values or more are outside; where fewer are and a bias is declared, bias_at alone.
std::string diagnosis_of_outside(const ProjectionFacts& f, const ReferencePass& pass, const CheckOptions& options,
                                 BoundEvidence& e) {
  const ProjectionInfo& info = f.info();
  const std::vector<char>& outside = pass.outside_rows[static_cast<std::size_t>(EngineOutputId::kUnpacked)];
  if (static_cast<double>(e.outside) >= kDiagnosisShare * static_cast<double>(e.elements)) {
    // The one row of y_unpacked holding values outside, if one alone does: the only row whose
    // scale the diagnosis fits (row_scale_trial).
    Index lone_row = -1;
    if (std::count(outside.begin(), outside.end(), 1) == 1) {
      lone_row = static_cast<Index>(std::find(outside.begin(), outside.end(), 1) - outside.begin());
    }
    e.diagnosis = diagnose_declarations(f, options, DiagnosisReason::kBound, lone_row);
    // bias reads the values beyond by direction where its per-value part runs: bf16 / f16
    // outputs, and the threshold the reference pass set where the residual model applies.
    const bool bias_runs = (info.output == DType::kBf16 || info.output == DType::kF16) && pass.bias_value_threshold > 0;
    return diagnosis_text(e.diagnosis, e, bias_runs);
  }
  if (!reference::has_bias(info.epilogue)) return "";
  // Too few values outside for the diagnosis, but a bias declared added last: a kernel that adds
  // its K blocks into the bias fails only where |bias| dwarfs S (a few rows of small activations:
  // 41 of 8,192 values of ONNX Runtime's Gemm, with no word of why; a review's). That one
  // declaration is tried on the rows holding the values outside.
  std::vector<Index> rows;
  for (std::size_t i = 0; i < outside.size() && static_cast<Index>(rows.size()) < kDiagnosisRows; ++i) {
    if (outside[i] != 0) rows.push_back(static_cast<Index>(i));
  }
  e.diagnosis = diagnose_bias_at(f, options, rows, false);
  if (e.diagnosis.size() != 2) {
    e.diagnosis.clear();  // no fit: variance's own diagnosis runs (it looks for a bound's first)
    return "";
  }
  return diagnosis_text(e.diagnosis, e, false);
}

}  // namespace

CheckResult bound_check(const ProjectionFacts& f, const ReferencePass& pass, const CheckOptions& options) {
  const ProjectionInfo& info = f.info();
  const reference::ReferenceSummary& summary = pass.summary;
  CheckResult r = projection_check(info, CheckKind::kBound);
  BoundEvidence e;
  e.accumulator = info.accumulator.name;
  e.u_eff = info.accumulator.u_eff;
  e.lambda = options.lambda;
  e.round_to_nearest = info.accumulator.round_to_nearest;
  e.k = info.k;
  e.output = info.output;
  for (const SegmentInfo& s : info.segments) e.weights.push_back(weight_model(s));
  e.ambiguous_weights = summary.ambiguous_weights;
  double max_err_over_b = 0;
  Index single_valued = 0;
  std::optional<EngineOutputId> worst;
  for (EngineOutputId id : kAllEngineOutputs) {
    if (!f.data.output(id).present) continue;
    const reference::BoundStats& st = pass.bound[static_cast<std::size_t>(id)];
    OutputBound out;
    out.output = std::string(engine_output_name(id));
    out.stats = st;
    out.error_over_bound = pass.error_over_bound[static_cast<std::size_t>(id)];
    out.outside = pass.outside[static_cast<std::size_t>(id)];
    e.outputs.push_back(std::move(out));
    e.elements += st.elements();
    e.outside += st.outside();
    e.beyond_tier += st.beyond_tier();
    single_valued += st.single_valued();
    max_err_over_b = std::max(max_err_over_b, st.max_error_over_bound());
    if (!worst && st.outside() > 0) worst = id;
  }
  if (std::optional<std::string> why = nonfinite_operands(f, summary, options.lambda)) {
    r.verdict = Verdict::kFail;
    r.reason = *std::move(why);
  } else if (summary.vacuous_bound && info.walk.declared && info.walk.inner == reference::KWalkInner::kPromote) {
    // docs/error-bounds.md §2a: the p-bit blocks' own roundings make the bound vacuous.
    r.verdict = Verdict::kFail;
    r.reason = "the deterministic bound is vacuous: k_walk " + info.walk.name + " rounds up to " +
               std::to_string(std::min(info.walk.promote_block, info.walk.terms(info.k) / info.walk.parts)) +
               " times at u = " + format_float(std::max(info.walk.promote_unit(), info.accumulator.u_eff)) +
               " in a block, n u >= 1/2: nothing can be certified";
  } else if (summary.vacuous_bound) {
    r.verdict = Verdict::kFail;
    r.reason = "the deterministic bound is vacuous: K_eff * u_eff >= 1/2 (K = " + std::to_string(info.k) +
               ", u_eff = " + format_float(info.accumulator.u_eff) + "): nothing can be certified";
  } else if (worst) {
    const std::string name(engine_output_name(*worst));
    const reference::ElementRecord& el = pass.bound[static_cast<std::size_t>(*worst)].first_outside();
    const Index slot = *worst != EngineOutputId::kUnpacked ? f.slot_of_row[static_cast<std::size_t>(el.row)] : -1;
    r.verdict = Verdict::kFail;
    r.reason = name + " " + detail::where(el.row, el.col, slot) + ": " + detail::value_text(el.value, info.output) +
               " outside [" + format_float(el.accept.lo) + ", " + format_float(el.accept.hi) + "] (reference " +
               format_short(el.center) + ", B = " + format_short(el.bound) +
               "); values outside: " + outside_per_output(e);
    r.reason.append(" (").append(declarations_text(info)).append(")");
    spread_of_outside(f, pass, e);
    r.reason += diagnosis_of_outside(f, pass, options, e);
    r.first_failure = Location{name, el.row, el.col, slot};
    e.first = BoundFailure{name, el, slot};
  } else if (options.strict && e.beyond_tier > 0) {
    r.verdict = Verdict::kFail;
    EngineOutputId id = EngineOutputId::kUnpacked;
    for (EngineOutputId o : kAllEngineOutputs) {
      if (f.data.output(o).present && pass.bound[static_cast<std::size_t>(o)].beyond_tier() > 0) {
        id = o;
        break;
      }
    }
    const reference::ElementRecord& el = pass.bound[static_cast<std::size_t>(id)].first_beyond_tier();
    r.reason = std::to_string(e.beyond_tier) + " values beyond the probabilistic tier (--strict), first " +
               std::string(engine_output_name(id)) + " " + detail::where(el.row, el.col, -1) + ": " +
               detail::value_text(el.value, info.output) + " (reference " + format_short(el.center) + ")";
    r.first_failure = Location{std::string(engine_output_name(id)), el.row, el.col};
  } else {
    // For f32 outputs |y - y*| / B is the bound utilization proper. For bf16 (f16) outputs the
    // output rounding (up to half an ulp, ~2^-9 (2^-12) relative) dwarfs B (~1e-5 relative at
    // K = 5120), so |y - y*| / B is in the hundreds on a correct kernel and the share of the
    // interval is 1 on every single-valued one: how many values the reference pins to one
    // bf16 value is the figure that says how tight the check was (all three are in the stats).
    r.reason =
        "all " + std::to_string(e.elements) + " engine values inside the reference intervals (" +
        (info.output == DType::kF32
             ? "max |y - y*| / B " + format_short(max_err_over_b)
             : std::string(dtype_name(info.output)) + " outputs, " + std::to_string(single_valued) +
                   " of them the only " + std::string(dtype_name(info.output)) + " value their interval allows") +
        ", " + std::to_string(e.beyond_tier) + " beyond the probabilistic tier)";
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
