#include "certify/projection/check_projection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "certify/projection/detail/localize.h"
#include "certify/projection/diagnosis.h"
#include "certify/report/format.h"
#include "certify/report/progress.h"
#include "packing/guards.h"
#include "reference/code_walk.h"

namespace ncert::certify {

std::string projection_check_id(const ProjectionInfo& info, CheckKind kind) {
  return "projections/" + info.name + "/" + std::string(check_kind_name(kind));
}

CheckResult projection_check(const ProjectionInfo& info, CheckKind kind) {
  CheckResult r;
  r.id = projection_check_id(info, kind);
  r.kind = kind;
  return r;
}

ProjectionFacts projection_facts(const LoadedProjection& data) {
  ProjectionFacts f{data,
                    packing::validate_plan(data.plan),
                    data.weights_evaluable(),
                    packing::validate_selector_rows(data.plan),
                    {}};
  f.slot_of_row.assign(static_cast<std::size_t>(data.info->m), -1);
  if (f.rows.ok()) {
    for (Index s = 0; s < static_cast<Index>(data.selector.size()); ++s) {
      const Index row = data.selector[static_cast<std::size_t>(s)];
      if (row >= 0) f.slot_of_row[static_cast<std::size_t>(row)] = s;
    }
  }
  return f;
}

namespace {

/// Whether the projection was dumped with y_unpacked only (docs/dump-format.md allows it for an
/// lm_head computed without packing): its packed-path checks have nothing to check, by design.
bool unpacked_only(const LoadedProjection& data) {
  return data.y_unpacked.present && !data.y_packed.present && !data.y_compact.present;
}

constexpr const char* kUnpackedOnly = "dumped with y_unpacked only: ";

/// The per-request host guards (cap, prefix, commit counts) run only with the request geometry;
/// without it, or without commit_counts, say which part of geometry did not run (not applicable
/// where no packed output exists to guard).
std::optional<CheckResult> request_guards_skip(const ProjectionInfo& info, bool no_packed_path) {
  std::vector<std::string> missing;
  if (!info.requests) missing.push_back("requests");
  if (!info.block_rows) missing.push_back("block_rows");
  if (!info.cap) missing.push_back("cap");
  const bool geometry = missing.empty();
  if (!info.has_commit_counts) missing.push_back("commit_counts");
  if (missing.empty()) return std::nullopt;
  if (no_packed_path) {
    return not_applicable("projections/" + info.name + "/request-guards", "projections/" + info.name,
                          CheckKind::kGeometry,
                          std::string(kUnpackedOnly) + "no packed output for the per-request guards to hold");
  }
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  return skipped(
      "projections/" + info.name + "/request-guards", "projections/" + info.name, CheckKind::kGeometry,
      list + " not dumped: " +
          (geometry ? "the commit-count guard (304) could not check the selector against the engine's own counts"
                    : "the per-request guards (cap 302, prefix 303, commit counts 304) did not run; only the "
                      "slot rules did"));
}

/// The checks of one projection as they are made, and the two ways a check does not run: not
/// evaluated (a FAIL: a prerequisite is broken) and skipped (the dump lacks what it compares).
struct ChecksBeingMade {
  const ProjectionInfo& info;
  std::string subject;
  std::vector<CheckResult>& checks;

  void blocked(CheckKind kind, const std::string& why) {
    checks.push_back(not_evaluated(projection_check_id(info, kind), kind, why));
  }
  void skip(CheckKind kind, std::string why) {
    checks.push_back(skipped(projection_check_id(info, kind), subject, kind, std::move(why)));
  }
  void inapplicable(CheckKind kind, const std::string& why) {
    checks.push_back(not_applicable(projection_check_id(info, kind), subject, kind, kUnpackedOnly + why));
  }
};

// 2. identity, where two engine outputs can be compared.
void identity_step(const ProjectionFacts& f, const std::string& selector_broken, ChecksBeingMade& out) {
  const LoadedProjection& data = f.data;
  if (data.y_packed.present && (data.y_unpacked.present || data.y_compact.present)) {
    if (f.rows.ok())
      out.checks.push_back(identity_check(f));
    else
      out.blocked(CheckKind::kIdentity, selector_broken);
  } else if (unpacked_only(data)) {
    out.inapplicable(CheckKind::kIdentity, "no packed output to compare with the unpacked one");
  } else {
    out.skip(CheckKind::kIdentity, std::string(data.y_packed.present ? "y_unpacked and y_compact" : "y_packed") +
                                       " not dumped: packed and unpacked outputs cannot be compared bit for bit");
  }
}

/// Why the reference cannot be evaluated, or empty when it can.
std::string reference_blocker(const ProjectionFacts& f, const reference::LinearProblem& problem,
                              const std::string& selector_broken) {
  const LoadedProjection& data = f.data;
  if (f.weights.code() == ErrorCode::kGuardWalkSplit) {
    // The weights are fine: it is the walk's declaration that the reference cannot take.
    return "the declared k_walk does not fit K (" + f.weights.message() +
           "): declare a k_walk whose parts (and for codes:<C>, whose C) divide K, or none";
  }
  if (!f.weights.ok()) return "the weights cannot be evaluated (" + f.weights.message() + ")";
  if (!f.rows.ok() && (data.y_packed.present || data.y_compact.present)) return selector_broken;
  if (const Status ps = reference::validate_problem(problem); !ps.ok()) return ps.message();
  return std::string();
}

/// Whether the walk's own roundings are the declared accumulator's: every walk but `promote:`
/// adds in round-to-nearest f32 (dump-format §3.4), which only `f32-rn` (or u = 2^-24 rounding
/// to nearest) declares; a promoted walk states its inner rounding itself.
bool walk_rounding_declared(const ProjectionInfo& info) {
  const reference::Accumulator& acc = info.accumulator;
  if (info.walk.inner == reference::KWalkInner::kPromote) return true;
  // u = 5.96e-8 is f32's 2^-24 written in decimal: equal to within the digits given.
  return acc.kind == reference::AccumulatorKind::kF32Rn ||
         (acc.kind == reference::AccumulatorKind::kExplicit && acc.round_to_nearest &&
          std::fabs(acc.u_eff - 0x1p-24) <= 1e-3 * 0x1p-24);
}

/// 4. walk, from an evaluated reference pass: checked where the pass emulated the declared walk,
/// else skipped saying why.
/// The walk diagnosis's fits, the operation order first: for zero-point weights `dequant =
/// exact` and `sub-mul` are the same f32 weights, which the walk cannot tell apart, and the
/// order is what only the walk sees (the two orders' weights differ by one f32 rounding, inside
/// B).
std::vector<const DeclarationTrial*> walk_fits(const std::vector<DeclarationTrial>& trials) {
  std::vector<const DeclarationTrial*> fits = fitting_trials(trials);
  std::stable_partition(fits.begin(), fits.end(),
                        [](const DeclarationTrial* t) { return t->declaration.starts_with("dequant_op"); });
  return fits;
}

/// A walk failing broadly (1 % of the values or more) is re-emulated on the sample under each
/// quantized segment's other declarations; one that reproduces every sampled value is named.
void diagnose_walk_failure(const ProjectionFacts& f, const CheckOptions& options, CheckResult& walk) {
  auto& e = std::get<WalkEvidence>(walk.evidence);
  if (static_cast<double>(e.mismatches) < kDiagnosisShare * static_cast<double>(e.compared)) {
    // Too few for the diagnosis: the bias's other end alone, on the first rows the mismatches of
    // y_unpacked span (an f16 Gemm's bias added first, declared last, moved 12 of 19,968 values
    // and the reason said nothing of why: a review's).
    const auto out = std::find_if(e.outputs.begin(), e.outputs.end(), [](const WalkEvidence::Output& o) {
      return o.output == engine_output_name(EngineOutputId::kUnpacked) && o.mismatches > 0;
    });
    if (out == e.outputs.end()) return;
    std::vector<Index> rows;
    for (Index r = out->row_min; r <= out->row_max && static_cast<Index>(rows.size()) < kDiagnosisRows; ++r) {
      rows.push_back(r);
    }
    e.diagnosis = diagnose_bias_at(f, options, rows, true);
  } else {
    e.diagnosis = diagnose_walk(f, options);
    if (!e.diagnosis.empty() && e.diagnosis.front().inside < e.diagnosis.front().sampled &&
        walk_fits(e.diagnosis).empty()) {
      // Tried and none fits: said, since silence read as "not tried" (a review's hadd kernel
      // declared halving, before butterfly(4,1,2) was among the trials).
      walk.reason += "; no other declaration tried (lane counts, trees, splits, fusing, " +
                     std::string(f.info().walk.codes() ? "chunks, scalings" : "dequantization") + ") reproduces the " +
                     std::to_string(e.diagnosis.front().sampled) +
                     " sampled values: a kernel fault, or an order no k_walk form declares";
    }
  }
  if (e.diagnosis.size() < 2) {
    e.diagnosis.clear();
    return;
  }
  const DeclarationTrial& declared = e.diagnosis.front();
  // Every fit is named (walk_fits says why, and in which order).
  const std::vector<const DeclarationTrial*> fits = walk_fits(e.diagnosis);
  if (fits.empty()) return;
  std::string text;
  for (const DeclarationTrial* t : fits) text += (text.empty() ? "" : "; or ") + trial_text(*t);
  walk.reason += "; the data fits " + text + " (its walk reproduces all " + std::to_string(declared.sampled) +
                 " sampled values bit for bit; " + std::to_string(declared.inside) + " as declared)";
}

void walk_step(const ProjectionFacts& f, const CheckOptions& options, const ReferencePass& pass, bool walk_supported,
               bool rounding_pinned, const std::string& codes_blocked, ChecksBeingMade& out) {
  const ProjectionInfo& info = out.info;
  if (walk_supported && pass.summary.ambiguous_weights > 0) {
    out.skip(CheckKind::kWalk, std::to_string(pass.summary.ambiguous_weights) +
                                   " weights differ between the fused and the multiply-then-add dequantization "
                                   "(dequant_op = either): declare dequant_op to hold the kernel to its walk");
  } else if (walk_supported) {
    CheckResult walk = walk_check(f, pass);
    if (walk.failed()) diagnose_walk_failure(f, options, walk);
    out.checks.push_back(std::move(walk));
  } else if (!codes_blocked.empty()) {
    out.skip(CheckKind::kWalk, "k_walk " + info.walk.name + " sums integer code products, but " + codes_blocked);
  } else if (info.walk.declared && !info.walk.codes() && info.x_quant.type != reference::XQuantType::kNone) {
    out.skip(CheckKind::kWalk, "k_walk " + info.walk.name + " is an f32 walk over x, but x_quant = " +
                                   std::string(reference::x_quant_name(info.x_quant.type)) +
                                   ": the kernel multiplies quantized codes; an integer kernel's walk is declared "
                                   "codes:<C>:<scaling>/<walk> (docs/dump-format.md §3.4)");
  } else if (info.walk.declared && !walk_rounding_declared(info)) {
    // A review's AVX2 kernel under MXCSR round-toward-zero, declared f32-rz with its lanes, failed
    // 2,271 of 2,304 values against the round-to-nearest emulation, with no word of why.
    out.skip(CheckKind::kWalk,
             "k_walk " + info.walk.name +
                 " rounds its f32 operations to nearest, but accumulator = " + info.accumulator.name +
                 " declares other roundings: declare accumulator = f32-rn to hold a round-to-nearest kernel to its "
                 "walk (a one-accumulator kernel that rounds toward zero is promote:<K>:24:rz, or with :fma)");
  } else if (info.walk.declared && !rounding_pinned) {
    // Not the engine's fault: nothing pins the value a walk would have to reproduce.
    out.skip(CheckKind::kWalk,
             "k_walk " + info.walk.name +
                 " has no single stored value: output_rounding = any does not pin the output rounding");
  } else if (info.walk.declared) {
    out.skip(CheckKind::kWalk,
             "k_walk " + info.walk.name + " is not defined for this weight format (" + f.plan.message() + ")");
  }
}

/// The fault a failing bound's diagnosis fits to the rounding noise (fault_fit), if any.
const DeclarationTrial* bound_fault(const std::vector<CheckResult>& checks) {
  for (const CheckResult& c : checks) {
    const auto* b = std::get_if<BoundEvidence>(&c.evidence);
    if (b && c.failed()) return fault_fit(b->diagnosis);
  }
  return nullptr;
}

/// The failing bound check's evidence where its values outside lie in a few rows, more of them
/// than chance puts there (RowSpread::kConcentrated), or nullptr.
const BoundEvidence* bound_rows(const std::vector<CheckResult>& checks) {
  for (const CheckResult& c : checks) {
    const auto* b = std::get_if<BoundEvidence>(&c.evidence);
    if (b && c.failed() && row_spread(*b) == RowSpread::kConcentrated && !b->rows_named.empty()) return b;
  }
  return nullptr;
}

/// "; bound finds the sampled residuals fit row 2's outputs scaled 1.01x (...) to the rounding
/// noise: what <check> reads above may be that fault's alone, not <what it reads it as>".
std::string bound_fault_clause(const DeclarationTrial& fault, std::string_view check, std::string_view not_what) {
  return "; bound finds the sampled residuals fit " + trial_text(fault) + " to the rounding noise: what " +
         std::string(check) + " reads above may be that fault's alone, not " + std::string(not_what);
}

/// What an earlier check already explains about a broad failure, or "": a declaration the
/// bound's diagnosis found the data to fit, a quantize failure (the activations the products
/// used are not the declared ones), or an identity failure whose every differing row a slot
/// mapping explains. The residual tests read their residuals against the declarations and
/// the selector, so their own cause (a scale, an accumulator) would then point elsewhere.
/// `for_bias`: a fit of another output rounding is what bias itself tests (its "truncation"
/// agrees with it), so that one does not count.
std::string explained_earlier(const std::vector<CheckResult>& checks, bool for_bias = false) {
  for (const CheckResult& c : checks) {
    if (!c.failed()) continue;
    if (const auto* b = std::get_if<BoundEvidence>(&c.evidence)) {
      // In bound's own order (its reason names the least energetic first). Where the values
      // outside lie in a few rows, a trial that only widens B holds them without explaining
      // them: a row's fault reads the same there (bf16 outputs, one row of 4 x 1.002: 4 values,
      // "the data fits accumulator = f32-rz; or accumulator = matrix-unit"), and bias, which
      // tells the two apart by their direction, runs (23 values beyond, all in that row, away
      // from zero). signature and variance stay held back: a truncating accumulator shows
      // first in a row whose products share a sign, and they read it as that row's, a column's
      // K range or an offset (a review's 20- to 22-bit truncating accumulators).
      const RowSpread spread = row_spread(*b);
      for (const DeclarationTrial* t : rank_by_energy(fitting_trials(b->diagnosis, spread))) {
        if (for_bias && t->effect == TrialEffect::kMovesRounding) continue;
        if (for_bias && spread == RowSpread::kFewRows && t->effect == TrialEffect::kWidensBound) continue;
        return "bound finds the data fits " + trial_text(*t) +
               ", not the declarations the residuals are read against: correct the declaration first";
      }
    }
    if (const auto* w = std::get_if<WalkEvidence>(&c.evidence)) {
      if (const auto fits = walk_fits(w->diagnosis); !fits.empty()) {
        return "walk finds the data fits " + trial_text(*fits.front()) +
               ", not the declarations the residuals are read against: correct the declaration first";
      }
    }
    if (const auto* v = std::get_if<VarianceEvidence>(&c.evidence)) {
      if (const DeclarationTrial* t = residual_fit(v->diagnosis)) {
        return "variance finds the residuals fit " + trial_text(*t) +
               ", not the declarations they are read against: correct the declaration first";
      }
    }
    if (const auto* q = std::get_if<QuantizeEvidence>(&c.evidence)) {
      if (q->mismatched == 0 && q->excluded > 0) {
        return "quantize finds x holds " + std::to_string(q->excluded) +
               " inf or NaN value(s), which no code quantizes, so the products are not of x: correct x first";
      }
      return "quantize finds the stored quantized activations are not x's declared quantization, so the products "
             "are not the declared ones: correct the activation quantization first";
    }
    if (const auto* id = std::get_if<IdentityEvidence>(&c.evidence)) {
      if (id->rows_differing > 0 && id->rows_explained == id->rows_differing) {
        return "identity explains every differing row by a slot mapping (a misrouted row, not its arithmetic): "
               "correct the selector or the packing first";
      }
    }
  }
  return "";
}

/// Where variance fails and bound's diagnosis did not run (every value, or all but under 1 %,
/// inside B: a mistake too small for B at large K), the likely declaration mistakes re-tested on
/// the sample by their residual energy; one that brings it within the limit while the
/// declaration does not leads variance's reason. Returns whether one did.
bool residual_diagnosis(const ProjectionFacts& f, const CheckOptions& options, const ChecksBeingMade& out,
                        CheckResult& var) {
  for (const CheckResult& c : out.checks) {
    const auto* b = std::get_if<BoundEvidence>(&c.evidence);
    if (b && !b->diagnosis.empty()) return false;
  }
  std::vector<DeclarationTrial> trials = diagnose_declarations(f, options, DiagnosisReason::kResiduals);
  auto& e = std::get<VarianceEvidence>(var.evidence);
  const DeclarationTrial* t = residual_fit(trials);
  if (t) {
    const DeclarationTrial& declared = trials.front();
    // ", 2 outside as declared too left to bound (wrong values beside the mistake)"; values
    // inside B but far off the noise: ", 2 far off the noise as declared too left out (...)".
    std::string left;
    if (t->left > 0) left.append(", ").append(std::to_string(t->left)).append(" outside as declared too left to bound");
    if (t->far > 0) {
      left.append(left.empty() ? ", " : " and ").append(std::to_string(t->far));
      left.append(" far off the noise as declared too left out");
    }
    if (!left.empty()) {
      left.append(t->left + t->far == 1 ? " (a wrong value" : " (wrong values").append(" beside the mistake)");
    }
    var.reason = "the data fits " + trial_text(*t) + " (residual energy " + format_short(t->energy) + "x on " +
                 std::to_string(declared.sampled) + " sampled values" + left + ", " + format_short(declared.energy) +
                 "x as declared, limit " + format_short(diagnosis_energy_limit(declared.sampled)) + "x); " + var.reason;
  }
  if (trials.size() > 1) e.diagnosis = std::move(trials);
  return t != nullptr;
}

/// A failing bound check whose values outside lie in a few rows (RowSpread::kConcentrated) and
/// whose diagnosis fits no fault: BoundEvidence::location from the pooled test, its text after
/// "; likely location: ".
void locate_bound_rows(const ProjectionFacts& f, std::vector<CheckResult>& checks) {
  for (CheckResult& c : checks) {
    auto* b = std::get_if<BoundEvidence>(&c.evidence);
    if (b == nullptr || !c.failed() || row_spread(*b) != RowSpread::kConcentrated || fault_fit(b->diagnosis)) continue;
    if (std::optional<LocationFit> t = detail::locate_rows(f)) {
      c.reason += "; likely location: " + detail::describe_fit(*t, f.info());
      b->location = std::move(t);
    }
  }
}

/// The residual tests, and the bound failure's likely location from the signature test; not
/// evaluated where an earlier check already explains the failure (explained_earlier).
void residual_steps(const ProjectionFacts& f, const CheckOptions& options, const ReferencePass& pass,
                    ChecksBeingMade& out) {
  std::optional<CheckResult> sig = signature_check(f, pass);
  std::optional<CheckResult> var = variance_check(f, pass);
  const std::string explained = explained_earlier(out.checks);
  if (explained.empty() && var && var->failed() && residual_diagnosis(f, options, out, *var)) {
    // The variance check now names the declaration the residuals fit; the signature's own
    // cause (a scale, a range) would point elsewhere.
    if (sig && sig->failed()) {
      *sig = skipped(sig->id, sig->subject, sig->kind, "not evaluated: " + explained_earlier({*var}));
    }
    if (sig) out.checks.push_back(std::move(*sig));
    out.checks.push_back(std::move(*var));
    return;
  }
  bool var_located = false;  // variance's reason names signature's location
  if (!explained.empty()) {
    for (std::optional<CheckResult>* c : {&sig, &var}) {
      if (*c && (*c)->failed()) **c = skipped((*c)->id, (*c)->subject, (*c)->kind, "not evaluated: " + explained);
    }
  } else if (sig && sig->failed()) {
    const auto& e = std::get<SignatureEvidence>(sig->evidence);
    for (CheckResult& c : out.checks) {
      // Where bound's diagnosis fits one input channel's fault, the signature's candidate (a
      // column's K range) is that fault seen in one column: not another location, and the
      // signature's reason says so.
      // The diagnosis samples y_unpacked: a location in a packed output is that path's own (a
      // review's y_packed x 0.5 beside y_unpacked x 1.002 read "fit 0.501x ...; bound finds the
      // sampled residuals fit every output scaled 1.002x").
      const auto* b = std::get_if<BoundEvidence>(&c.evidence);
      if (const DeclarationTrial* fault = b ? fault_fit(b->diagnosis) : nullptr) {
        // A row's scale that signature fits to the same row of y_unpacked is the same reading.
        const FaultReading read = read_fault(*fault);
        const bool same_row =
            read.kind == FaultKind::kRow && e.fit && e.fit->kind == FitKind::kRow && e.fit->row == read.row;
        if (location_output(e) == engine_output_name(EngineOutputId::kUnpacked) && !same_row) {
          sig->reason += "; bound finds the sampled residuals fit " + trial_text(*fault) +
                         " to the rounding noise: what this names may be that fault seen in part";
        }
      } else if (const DeclarationTrial* wider = b ? narrower_than_declared(b->diagnosis, row_spread(*b)) : nullptr) {
        // bound reads a narrower accumulator rounding to nearest: its noise, far above what the
        // declaration allows, makes every column's candidates significant (a review's 14-bit
        // accumulator read "column 85, group 12 ... 1.002x" as bound's likely location).
        sig->reason += "; bound finds every sampled value held by " + trial_text(*wider) +
                       "'s wider bound alone beside centred residuals: a narrower accumulator that rounds to "
                       "nearest, whose noise this may be";
      } else if (c.kind == CheckKind::kBound && c.failed() && !signature_spread(e)) {
        // Spread over a tenth of the columns or more, signature's strongest candidate is no
        // location, and its own reason says so.
        c.reason += "; likely location: " + describe_location(e, f.info());
      }
      // Wrong values no slot mapping explains, located in a packed output: the packed path's
      // arithmetic, named where it is.
      const auto* id = std::get_if<IdentityEvidence>(&c.evidence);
      if (id && c.failed() && id->rows_explained == 0 && signature_localizes(e) &&
          location_output(e) != engine_output_name(EngineOutputId::kUnpacked)) {
        c.reason += "; signature locates the packed path's wrong values: " + describe_location_short(e);
      }
    }
    if (var && var->failed() && signature_localizes(e)) {
      var->reason += "; signature locates a fault (" + describe_location_short(e) +
                     "): what variance reads above may be that fault's alone, not the kernel's rounding";
      var_located = true;
    }
  }
  // Where signature fails on no column, bound's values outside in a few rows, more than chance
  // puts there, are located by the pooled test over every column (a reviewer's row 8 x 1.01 of
  // 16 under bf16 outputs: 1716 values outside, no word of where before).
  if (explained.empty() && !(sig && sig->failed())) locate_bound_rows(f, out.checks);
  // Where signature locates nothing, a fault bound's diagnosis fits is what the residuals hold
  // (a bf16 row of dominant activations x 1.01: variance read "at least 0.535 bits coarser").
  if (var && var->failed() && !var_located && explained.empty()) {
    if (const DeclarationTrial* fault = bound_fault(out.checks)) {
      var->reason += bound_fault_clause(*fault, "variance", "the kernel's rounding");
    } else if (const BoundEvidence* rows = bound_rows(out.checks)) {
      // A row's fault beyond B in most of its values reads as a coarser rounding over all of
      // them (a reviewer's row 8 x 1.01 of 16 under bf16 outputs: "0.1185 bits coarser").
      var->reason +=
          "; bound's values outside lie in " + rows_outside_text(*rows) + ": what variance reads above may be " +
          (rows->rows_outside == 1 ? "that row's fault" : "those rows' fault") + " alone, not the kernel's rounding";
    }
  }
  if (sig) out.checks.push_back(std::move(*sig));
  if (var) out.checks.push_back(std::move(*var));
}

// 3-5. bound, walk and bias, from one pass of the reference (left empty when it cannot run).
Status reference_steps(const ProjectionFacts& f, const CheckOptions& options, const BlockHook& hook,
                       const std::string& selector_broken, ChecksBeingMade& out, ProjectionOutcome& outcome,
                       std::optional<ReferencePass>& pass) {
  const ProjectionInfo& info = out.info;
  ProjectionTiming& T = outcome.timing;
  const reference::LinearProblem problem = f.data.problem(options.lambda);
  const std::string ref_blocker = reference_blocker(f, problem, selector_broken);
  // A walk whose combination is unsupported (folded AF4), or whose output rounding is not pinned
  // (output_rounding = any), has no single emulated value to compare with.
  const bool rounding_pinned = info.output_rounding != reference::OutputRounding::kAny;
  const bool quantized = info.x_quant.type != reference::XQuantType::kNone;
  // An integer kernel's code walk, when the data has the codes it sums (code_walk.h).
  const std::string codes_blocked = info.walk.codes() ? reference::code_walk_unsupported(problem) : "";
  const bool walk_supported = info.walk.declared && f.plan.code() != ErrorCode::kGuardUnsupported && rounding_pinned &&
                              quantized == info.walk.codes() && codes_blocked.empty() && walk_rounding_declared(info);
  if (!f.any_output()) {
    // Nothing to bound: vacuity reports it.
  } else if (!ref_blocker.empty()) {
    // Every check that reads the reference's residuals is named as not evaluated, not left out
    // (a k_walk not dividing K listed bound and walk only, as if the others did not exist).
    out.blocked(CheckKind::kBound, ref_blocker);
    if (info.walk.declared) out.blocked(CheckKind::kWalk, ref_blocker);
    if (info.output == DType::kBf16 || info.output == DType::kF16) out.blocked(CheckKind::kBias, ref_blocker);
    out.blocked(CheckKind::kSignature, ref_blocker);
    out.blocked(CheckKind::kVariance, ref_blocker);
  } else {
    reference::ReferenceOptions ro = options.reference;
    ro.emulate_walk = walk_supported;
    NCERT_ASSIGN_OR_RETURN(pass, run_reference_pass(f, problem, ro, hook));
    outcome.reference_evaluated = true;
    T.reference_seconds = pass->seconds;
    T.compare_seconds = pass->compare_seconds;
    out.checks.push_back(bound_check(f, *pass, options));
    walk_step(f, options, *pass, walk_supported, rounding_pinned, codes_blocked, out);
    // bias is reported before the residual tests but decided after them: values wrong by more
    // than a spacing are its business only where no other check already fails on them.
    const auto bias_at = static_cast<std::ptrdiff_t>(out.checks.size());
    residual_steps(f, options, *pass, out);
    std::string_view failing;
    for (const CheckResult& c : out.checks) {
      if (c.failed() && (c.kind == CheckKind::kIdentity || c.kind == CheckKind::kBound ||
                         c.kind == CheckKind::kSignature || c.kind == CheckKind::kVariance)) {
        failing = check_kind_name(c.kind);
        break;
      }
    }
    if (auto b = bias_check(f, *pass, failing)) {
      // Like the residual tests, bias reads residuals against the declarations: where the data
      // fits another one (transposed weights, x rounded before the kernel), its "truncation"
      // would point elsewhere.
      if (b->failed()) {
        if (const std::string explained = explained_earlier(out.checks, true); !explained.empty()) {
          *b = skipped(b->id, b->subject, b->kind, "not evaluated: " + explained);
        } else if (const DeclarationTrial* fault = bound_fault(out.checks)) {
          b->reason += bound_fault_clause(*fault, "bias", "the output rounding's");
        }
      }
      out.checks.insert(out.checks.begin() + bias_at, std::move(*b));
    }
  }
  if (!info.walk.declared) {
    out.skip(CheckKind::kWalk, "no k_walk declared: the kernel's reduction order is not held bit for bit");
  }
  return Status();
}

// 6. untouched.
void untouched_step(const ProjectionFacts& f, ChecksBeingMade& out) {
  const LoadedProjection& data = f.data;
  if (data.y_before.present && data.y_packed.present) {
    if (f.rows.ok())
      out.checks.push_back(untouched_check(f));
    else
      out.blocked(CheckKind::kUntouched, "the selector does not map slots to rows");
  } else if (unpacked_only(data)) {
    out.inapplicable(CheckKind::kUntouched, "no packed output whose unselected rows could be touched");
  } else {
    out.skip(CheckKind::kUntouched, std::string(data.y_packed.present ? "y_before" : "y_packed") +
                                        " not dumped: unselected rows and padding columns cannot be checked untouched");
  }
}

}  // namespace

Result<ProjectionOutcome> check_projection(const DumpReader& reader, const ProjectionInfo& info,
                                           const CheckOptions& options, const BlockHook& hook,
                                           const WeightsSource* weights, WeightsCache* cache) {
  NCERT_ASSIGN_OR_RETURN(LoadedProjection data, load_projection(reader, info, weights, cache));
  data.info = &info;
  ProjectionOutcome out;
  ProjectionTiming& T = out.timing;
  T.read_seconds = data.read_seconds;
  const ProjectionFacts f = projection_facts(data);
  ChecksBeingMade made{info, "projections/" + info.name, out.checks};
  const std::string selector_broken = "the selector does not map slots to rows (" + f.rows.message() + ")";

  // 1. geometry, and what later checks may rely on.
  made.checks.push_back(geometry_check(f));
  if (auto s = request_guards_skip(info, unpacked_only(data))) made.checks.push_back(std::move(*s));
  if (const Status rows = reference::rows_hold_widths(info); !rows.ok()) {
    // Rows narrower than K or N (guard 306, geometry's FAIL): every other check reads K values
    // of x or N of an output per row, past the stored arrays (a heap over-read ASan found).
    const std::string why = rows.named_message();
    if (info.x_quant.type != reference::XQuantType::kNone) made.blocked(CheckKind::kQuantize, why);
    made.blocked(CheckKind::kIdentity, why);
    made.blocked(CheckKind::kBound, why);
    if (info.walk.declared) made.blocked(CheckKind::kWalk, why);
    made.blocked(CheckKind::kUntouched, why);
    made.checks.push_back(vacuity_check(f, nullptr, options));
    for (CheckResult& c : made.checks) c.subject = made.subject;
    return out;
  }

  auto t_other = std::chrono::steady_clock::now();
  if (auto q = quantize_check(f)) made.checks.push_back(std::move(*q));
  identity_step(f, selector_broken, made);
  T.other_seconds = seconds_since(t_other);

  std::optional<ReferencePass> pass;
  NCERT_RETURN_IF_ERROR(reference_steps(f, options, hook, selector_broken, made, out, pass));

  t_other = std::chrono::steady_clock::now();
  untouched_step(f, made);

  // 7. vacuity.
  made.checks.push_back(vacuity_check(f, pass ? &*pass : nullptr, options));
  T.other_seconds += seconds_since(t_other);
  for (CheckResult& c : made.checks) c.subject = made.subject;
  return out;
}

}  // namespace ncert::certify
