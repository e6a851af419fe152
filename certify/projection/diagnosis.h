// This header defines the declaration diagnosis of a projection whose `bound` check fails
// broadly: the likely declaration mistakes (another accumulator, output rounding, dequantization,
// dequant_op or nibble order, activations rounded to bf16 or f16 before the kernel, weights
// transposed) re-tested on a sample of rows and columns, each reported with how many sampled
// engine values its intervals hold. A trial that holds every sampled value while the declaration
// does not is named in the failure: "the data fits dequant = output for segment kv".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "certify/projection/checks.h"
#include "certify/report/evidence.h"

namespace ncert::certify {

/// Rows and columns of the sample (the first ones: the outputs of y_unpacked there). The
/// columns reach kDiagnosisCols into every segment that starts before kDiagnosisSegmentReach
/// (diagnosis_columns), so a declaration mistaken for a later segment is tried on its columns.
inline constexpr Index kDiagnosisRows = 8;
inline constexpr Index kDiagnosisCols = 256;
inline constexpr Index kDiagnosisSegmentReach = 4096;
/// A bound failure is broad when at least this share of the values is outside (a wrong
/// declaration moves most outputs; a real kernel fault may move a few). Where they lie in a few
/// rows (row_spread), fitting_trials asks more of a trial that only widens B.
inline constexpr double kDiagnosisShare = 0.01;

/// What a diagnosis explains: a broad `bound` failure (trials that hold every sampled value),
/// or a residual test's failure with every value inside B (trials whose residual energy on the
/// sample is within the limit where the declaration's is not: a mistake too small for B at
/// large K, such as x rounded to f16 at K = 3072).
enum class DiagnosisReason : std::uint8_t { kBound, kResiduals };

/// The sample's columns, a prefix [0, n) of W's: kDiagnosisCols, and further to kDiagnosisCols
/// columns into each segment that starts before kDiagnosisSegmentReach (at most 4,351 columns:
/// 8 x 4,351 x K values a trial, ~0.2 G products at K 5,120).
Index diagnosis_columns(const reference::Weights& w);

/// The declared model first, then every alternative tried (none when the declaration already
/// explains the sample); empty when there is nothing to sample (no y_unpacked) or the reference
/// cannot run on the sample. For `bound`, where the declaration leaves the sample's energy
/// beyond the limit, the last is not a declaration but a fault (TrialEffect::kLocatesFault): the
/// input channel whose scale, fitted by least squares, explains most of the sampled residuals
/// (channel_trial in diagnosis.cc). A wider bound holds such a fault (x[:, 17] x 1.02: "the data
/// fits accumulator = f32-rz; or accumulator = matrix-unit") as it holds a few rows'.
/// `lone_row`: the one row of y_unpacked holding values outside its intervals, where one alone
/// does (-1 otherwise); a row of the sample, its scale is fitted as a fault (row_scale_trial).
std::vector<DeclarationTrial> diagnose_declarations(const ProjectionFacts& f, const CheckOptions& options,
                                                    DiagnosisReason reason = DiagnosisReason::kBound,
                                                    Index lone_row = -1);

/// How the values outside the bound spread over the rows (row_spread).
enum class RowSpread : std::uint8_t {
  kBroad,         ///< over more than a quarter of the rows, or an output of fewer than 4
  kFewRows,       ///< over a quarter of the rows or fewer
  kConcentrated,  ///< so, and too many values there for chance (kFewRowsChance)
};

/// The trials after the declaration that hold every sampled value (`fits` in the JSON), in
/// trial order. In a few rows (kFewRows), a trial other than another output rounding only where
/// it also brings the sampled values' energy within diagnosis_energy_limit, as a declaration
/// the kernel used does (an undeclared per-column bias holds one row's fault by shifting every
/// row half way; a wider bound alone, accumulator = matrix-unit, holds a few rows' faults
/// without moving a centre). Concentrated there, no trial that only widens B at all: its
/// energy is the declaration's, within the limit under bf16 outputs, whose rounding dwarfs a
/// small fault.
/// A fault trial (kLocatesFault) is never one of them, and where one fits (fault_fit), or a trial
/// that moves the centres holds every value with its energy within the limit, no trial that
/// only widens B is either: those bring the values within the rounding noise, a wider B holds
/// them only around it.
std::vector<const DeclarationTrial*> fitting_trials(const std::vector<DeclarationTrial>& trials,
                                                    RowSpread spread = RowSpread::kBroad);

/// What a fault trial (kLocatesFault) names, read back from the declaration the diagnosis wrote
/// for it: one input channel's scale (in every column or in some segments' columns), every
/// value's scale, or one sampled row's (`row`, a row of y_unpacked and x).
enum class FaultKind : std::uint8_t { kChannel, kEveryValue, kRow };
struct FaultReading {
  FaultKind kind = FaultKind::kEveryValue;
  Index row = -1;
};
FaultReading read_fault(const DeclarationTrial& t);

/// A trial of a directed accumulator (f32-rz, matrix-unit: TrialEffect::kWidensBound), whose
/// errors fall short toward zero. fitting_trials names one only where the declaration's sampled
/// residuals lean toward zero (DeclarationTrial::lean at or below -kTruncationLean): a narrower
/// accumulator rounding to nearest leaves them centred, and a directed one's wider B holds it
/// too. 3: centred residuals lean so far with probability at most 2 exp(-4.5) = 0.022 (a
/// reading, not a verdict); a 22-bit truncating accumulator leans 20 or more on 2,048 values.
inline constexpr double kTruncationLean = 3;
bool directed_accumulator_trial(const DeclarationTrial& t);
/// Whether the declaration's residuals do not lean toward zero beyond kTruncationLean.
bool centred_beside_directed(const std::vector<DeclarationTrial>& trials);

/// Where nothing fits (no trial fitting_trials names, no fault_fit) over rows spread broad, and
/// a directed accumulator holds every sampled value by its wider bound alone beside centred
/// residuals (a lean within kTruncationLean either way): that trial, and bound reads a narrower
/// accumulator that rounds to nearest. Null otherwise.
const DeclarationTrial* narrower_than_declared(const std::vector<DeclarationTrial>& trials, RowSpread spread);

/// The fault trial that holds every sampled value with their energy within the limit, where
/// the declaration's is beyond it; null when there is none.
const DeclarationTrial* fault_fit(const std::vector<DeclarationTrial>& trials);

/// The rows an output must hold for its spread to be preferred (spread_of_outside: y_unpacked's
/// 1 of 8 over the packed outputs' 1 of 4), the fewest row_spread reads a spread from (a quarter
/// of 4 is one row), and the chance at most that the values outside fell in so few rows at
/// random for kConcentrated.
inline constexpr Index kFewRowsHeld = 8;
inline constexpr Index kFewRowsMin = 4;
/// The most rows holding values outside that bound names (BoundEvidence::rows_named).
inline constexpr Index kFewRowsNamed = 8;
inline constexpr double kFewRowsChance = 1e-3;

/// The rows of x by their activations' size: a row whose 2-norm is over kDominantRow times the
/// lower median nonzero row's dominates (a BOS token's activations of 5000 beside rows of norm
/// 32): any mistake's rounding is largest there, so values beyond it in that row alone cannot
/// tell a fault of the row from a rounding fault (a truncating accumulator, 6 values beyond all
/// in such a row of 4). A row of zeros is not live where nothing is added after the dot
/// product: it holds no rounding then, so no value beyond either.
inline constexpr double kDominantRow = 4;
struct RowNorms {
  std::vector<double> norm;      ///< per row of x
  double median = 0;             ///< the lower median of the nonzero norms
  bool zero_rows_round = false;  ///< a bias or residual is added (and rounded) in every row
  bool live(Index row) const { return zero_rows_round || norm[static_cast<std::size_t>(row)] > 0; }
  bool dominant(Index row) const { return norm[static_cast<std::size_t>(row)] > kDominantRow * median; }
};
RowNorms row_norms(const ProjectionFacts& f);

/// Whether the values outside the bound lie in at most a quarter of the rows the output holds
/// (of at least kFewRowsMin), and whether too many lie there for chance: a declaration
/// mistake moves every row's values alike unless a few rows' activations dwarf the others' (a
/// row of one activation 500 times the rest, x rounded to bf16: only that row left B), and its
/// few values outside may fall in a few rows by chance (2 in 2 rows of 8). Where every row
/// holding them dominates (BoundEvidence::rows_dominant), broad: so a wider accumulator's do.
RowSpread row_spread(const BoundEvidence& e);
/// "1 of 16 rows (row 3)", "2 of 32 rows (rows 1, 4)": the rows holding values outside, named
/// where BoundEvidence names them.
std::string rows_outside_text(const BoundEvidence& e);

/// The trials ordered by their energy on the sample, least first (energies within twice the
/// least keep their order; a trial without one last).
std::vector<const DeclarationTrial*> rank_by_energy(std::vector<const DeclarationTrial*> trials);

/// Where `walk` fails broadly: the declared walk emulated on the same sample, then each AF4
/// segment's other dequantization, operation order and nibble order, each counted by the sampled
/// values its emulated walk reproduces bit for bit (`inside`). A trial that reproduces every one
/// names a mistake the bound cannot see (dequant_op: the two orders' weights differ by one f32
/// rounding, inside B).
std::vector<DeclarationTrial> diagnose_walk(const ProjectionFacts& f, const CheckOptions& options);

/// Where too few values fail for the diagnoses above (under kDiagnosisShare of them) and a bias
/// is declared: the other `bias_at` alone, on `rows` of y_unpacked (those holding the failing
/// values, at most kDiagnosisRows) and the sample's columns. `walk`: counted as diagnose_walk
/// counts (its walk reproducing every sampled value); else as diagnose_declarations counts for
/// bound (bias_at = start, with its own residual model). The declaration first, then the trial,
/// only where the trial fits: for bound, start's B holds every sampled value and the values
/// inside B as declared show more noise than the declaration allows; empty otherwise (no bias,
/// quantized activations, a walk the bias's end does not change, nothing failing, no fit), so
/// that nothing is read as a diagnosis (variance then runs its own).
std::vector<DeclarationTrial> diagnose_bias_at(const ProjectionFacts& f, const CheckOptions& options,
                                               const std::vector<Index>& rows, bool walk);

/// One trial as a reason names it: "dequant = output for segment kv".
std::string trial_text(const DeclarationTrial& t);

/// The residual energy a correct kernel's `sampled` values stay under (docs/error-bounds.md §6e's
/// limit, at the residual tests' alpha).
double diagnosis_energy_limit(Index sampled);

/// The r^2 / sigma^2 beyond which one of `sampled` values is far off the rounding noise:
/// Azuma's two-sided tail 2 exp(-q / 2) shared out over the values at the residual tests'
/// alpha, 2 ln(2 n / alpha) (58 at 2,048 values). The residual tests' diagnosis leaves such
/// values out of a trial's energy on the terms it leaves values outside B
/// (DeclarationTrial::far).
double diagnosis_far_energy(Index sampled);

/// The trial that holds every sampled value with its energy within the limit (the first of
/// rank_by_energy), where the declaration's energy is beyond it; null when none does.
const DeclarationTrial* residual_fit(const std::vector<DeclarationTrial>& trials);

}  // namespace ncert::certify
