// This header defines the checks of one /projections/<name>, one function each, over what they
// share: the loaded members (ProjectionFacts) and the values of one reference pass
// (reference_pass.h). check_projection.h runs them in order; docs/design.md says what each
// proves.
//   geometry   the dump's plan passes the packing host guards (the guard code on failure)
//   identity   y_packed == y_unpacked on selected rows, y_compact scattered == y_packed (bits)
//   bound      every engine output inside the reference interval of every element
//   walk       every engine output equals the emulated k_walk bit for bit (when declared)
//   bias       the signed rounding residuals of a round-to-nearest bf16 or f16 output are centred
//   signature  no (column, K range) of the residuals carries a fault's signature
//   variance   the residuals' energy is within what any order of the declared roundings allows
//   quantize   every quantized activation is the declared rounding of x / scale (with x_quant)
//   untouched  unselected rows and padding columns of y_packed equal y_before (when present)
//   vacuity    the projection proves something (selected rows, nonzero data, an output)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "certify/projection/projection_data.h"
#include "certify/projection/reference_pass.h"
#include "certify/report/check_result.h"
#include "reference/linear_spec.h"

namespace ncert::certify {

struct CheckOptions {
  double lambda = reference::kDefaultLambda;  ///< probabilistic tier multiplier
  bool strict = false;                        ///< fail on values beyond the probabilistic tier too
  bool allow_vacuous = false;                 ///< a projection that proves nothing passes (reported as such)
  reference::ReferenceOptions reference;
};

/// What every check of one projection may rely on: the loaded members, the packing guards'
/// verdicts on its plan, and the physical slot of each original row.
struct ProjectionFacts {
  const LoadedProjection& data;
  Status plan;                     ///< packing::validate_plan (the geometry check's verdict)
  Status weights;                  ///< the segment table (the reference needs it)
  Status rows;                     ///< the selector maps slots to distinct rows in range
  std::vector<Index> slot_of_row;  ///< -1: unselected (all -1 when `rows` failed)

  const ProjectionInfo& info() const { return *data.info; }
  bool any_output() const { return data.y_unpacked.present || data.y_packed.present || data.y_compact.present; }
};
ProjectionFacts projection_facts(const LoadedProjection& data);

/// "projections/<name>/<kind>".
std::string projection_check_id(const ProjectionInfo& info, CheckKind kind);
/// A PASS check of `kind` for the projection, with its id (the check then fills it in).
CheckResult projection_check(const ProjectionInfo& info, CheckKind kind);

CheckResult geometry_check(const ProjectionFacts& f);
/// Requires f.rows ok.
CheckResult identity_check(const ProjectionFacts& f);
/// From an evaluated reference pass.
CheckResult bound_check(const ProjectionFacts& f, const ReferencePass& pass, const CheckOptions& options);
/// From a reference pass that emulated the declared walk.
CheckResult walk_check(const ProjectionFacts& f, const ReferencePass& pass);
/// From an evaluated reference pass; nullopt for an f32 output (no output rounding to test).
/// `failing_elsewhere`: a check of the projection that already fails on its values ("bound"),
/// or "": values wrong by more than a spacing are then left to it, not called a rounding fault.
std::optional<CheckResult> bias_check(const ProjectionFacts& f, const ReferencePass& pass,
                                      std::string_view failing_elsewhere);
/// Why the residual model (docs/error-bounds.md §6c) does not apply, or "" when it does.
std::string residual_model_blocker(const ProjectionFacts& f, bool biased_rounding);
/// "y_packed column 88, k 1024-1279 missing: ..." for one signature finding.
std::string describe_signature(const SignatureFinding& s, const ProjectionInfo& info);
/// The failing signature test's location: its location fit or zero-point fit where it has one
/// (detail/localize.h), else its strongest finding (requires one).
std::string describe_location(const SignatureEvidence& e, const ProjectionInfo& info);
/// "y_unpacked row 2", "y_unpacked column 11": describe_location's place, without the size.
std::string describe_location_short(const SignatureEvidence& e);
/// The engine output describe_location names ("" without a finding).
std::string location_output(const SignatureEvidence& e);
/// Whether a failing signature test names a structured fault rather than noise everywhere: a
/// location fit or a zero point, a K range missing or counted twice, or significant candidates
/// in at most 1 % of the (output, column) pairs.
bool signature_localizes(const SignatureEvidence& e);
/// Whether a failing signature test's significant candidates lie in more than 8 columns and at
/// least a tenth of those tested, with no location fit, zero point or K range named: structure
/// spread over the columns (a kernel's rounding noise or lean), which names no location.
bool signature_spread(const SignatureEvidence& e);
/// From an evaluated reference pass (nullopt when it collected no residual tallies).
std::optional<CheckResult> signature_check(const ProjectionFacts& f, const ReferencePass& pass);
/// From an evaluated reference pass.
std::optional<CheckResult> variance_check(const ProjectionFacts& f, const ReferencePass& pass);
/// nullopt without x_quant.
std::optional<CheckResult> quantize_check(const ProjectionFacts& f);
/// Requires f.rows ok, y_before and y_packed.
CheckResult untouched_check(const ProjectionFacts& f);
/// `pass` may be null (the reference could not run).
CheckResult vacuity_check(const ProjectionFacts& f, const ReferencePass* pass, const CheckOptions& options);

}  // namespace ncert::certify
