// This header defines the typed evidence of every check kind: what a check found, as plain
// values, for the renderers (report/render_json.cc, render_text.cc, and the HTML and JUnit
// pages) to present. Checks compute these structs; nothing here is JSON, and no stage reads a
// rendered report back. The result records that several modules share (a witness, a fork, the
// comparison of two logits rows) live here too, so report/ stays below the modules that compute
// them: report/ <- projection/, logits/ <- commands/. Every struct compares with ==, and every
// member crosses a process boundary exactly (evidence_wire.h): a new member needs its line in
// evidence_wire.cc's table of its struct, a new alternative of Evidence its table and wire name.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "reference/bound_stats.h"
#include "reference/check_kind.h"
#include "reference/dtype.h"
#include "reference/status.h"

namespace ncert::certify {

// ---- distributions for the HTML report ------------------------------------------------------

/// Counts of a non-negative figure in power-of-two bins, for the HTML report's histograms:
/// `zero` holds exact zeros, `below` values under 2^log2_min, counts[i] values in
/// [2^(log2_min + i), 2^(log2_min + i + 1)), `above` values from 2^log2_max up, and `other` the
/// values with no place on the axis (NaN, infinity, a ratio to a zero bound). A value's bin is
/// its binary exponent, so binning is exact, and histograms only count: partial ones
/// merge by addition and the result does not depend on how the work was split.
struct Log2Histogram {
  int log2_min = 0, log2_max = 0;
  Index zero = 0, below = 0, above = 0, other = 0;
  std::vector<Index> counts;  ///< log2_max - log2_min bins

  Log2Histogram() = default;
  Log2Histogram(int lo, int hi) : log2_min(lo), log2_max(hi), counts(static_cast<std::size_t>(hi - lo), 0) {}

  void add(double v) {
    if (!(v >= 0) || std::isinf(v)) {
      ++other;
      return;
    }
    if (v == 0) {
      ++zero;
      return;
    }
    // floor(log2 v) is the unbiased exponent field of a normal double (subnormals, below
    // 2^-1022, read as -1023 and count as below): no libm call, as this runs once per value
    // checked.
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    const int k = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
    if (k < log2_min)
      ++below;
    else if (k >= log2_max)
      ++above;
    else
      ++counts[static_cast<std::size_t>(k - log2_min)];
  }
  /// Adds another histogram of the same axis.
  void merge(const Log2Histogram& o) {
    zero += o.zero;
    below += o.below;
    above += o.above;
    other += o.other;
    for (std::size_t i = 0; i < counts.size() && i < o.counts.size(); ++i) counts[i] += o.counts[i];
  }
  Index total() const {
    Index n = zero + below + above + other;
    for (Index c : counts) n += c;
    return n;
  }
  bool operator==(const Log2Histogram&) const = default;
};

/// Where an output's failing values lie: its rows x cols cut into cell_rows x cell_cols cells
/// (row r falls in cell r * cell_rows / rows, column c in c * cell_cols / cols), each counting
/// the values outside their interval. `counts` (row-major) is empty when none is outside.
struct FailureGrid {
  static constexpr Index kMaxCellRows = 32, kMaxCellCols = 64;  ///< at most 2,048 cells
  Index rows = 0, cols = 0;
  Index cell_rows = 0, cell_cols = 0;
  std::vector<Index> counts;

  FailureGrid() = default;
  FailureGrid(Index r, Index c)
      : rows(r),
        cols(c),
        cell_rows(r < kMaxCellRows ? r : kMaxCellRows),
        cell_cols(c < kMaxCellCols ? c : kMaxCellCols) {}
  Index cell_row(Index r) const { return r * cell_rows / rows; }
  Index cell_col(Index c) const { return c * cell_cols / cols; }
  bool operator==(const FailureGrid&) const = default;
};

// ---- records shared by logits modules ------------------------------------------------------

enum class WitnessClass : std::uint8_t { kCertified, kNearTie, kTie, kUnbounded };
std::string_view witness_class_name(WitnessClass c);

/// The raw target-maximum witness of one emitted token (docs/cli.md "witness").
struct Witness {
  Index row = 0;
  std::int64_t position = 0;
  std::int32_t token = 0;
  float logit = 0;
  std::int32_t runner_up = -1;
  float runner_up_logit = 0;
  double margin = 0;       ///< logit - runner_up_logit in f64 (exact for f32 operands within 2^29)
  double margin_ulps = 0;  ///< margin / ulp_f32(logit) (kept for the JSON; f32 ulps whatever the logits' type)
  std::int32_t ties = 0;
  WitnessClass cls = WitnessClass::kUnbounded;
  double certified_gap = 0;  ///< lo_t - max hi_j, or margin - 2e: > 0 iff certified
  std::string row_xxh3;      ///< canonical hex of the row's raw bytes
  bool ok = true;
  std::string failure;  ///< why the emission is not the row's maximum
  /// The logits' stored type, and the margin in its ulps at the emitted logit: a bf16 row's
  /// values are 2^16 f32 ulps apart, so its margins read in f32 ulps look 65,536 times wider.
  DType logits_dtype = DType::kF32;
  double margin_dtype_ulps = 0;
  bool operator==(const Witness&) const = default;
};

/// Whether an f32 ULP distance between a and b is counted through zero (opposite signs, or one
/// of them a zero): the count then includes every float between 0 and each value (about 10^9
/// for two values of order 1e-3), so it says nothing about how close a and b are.
inline bool ulps_cross_zero(float a, float b) {
  return a != b && (std::signbit(a) != std::signbit(b) || a == 0.0f || b == 0.0f);
}

/// |b - a| / max(|a|, |b|) in f64 (0 for equal values; NaN when either is NaN): how close two
/// values of different types are, where an f32 ulp count is not a useful figure.
inline double relative_difference(float a, float b) {
  const double x = a, y = b;
  if (x == y) return 0;
  return std::fabs(y - x) / std::max(std::fabs(x), std::fabs(y));
}

/// The full-vocabulary comparison of two raw f32 logits rows (d = b - a), logits/row_compare.h.
struct RowComparison {
  bool bit_identical = true;
  Index first_diff = -1;  ///< first column whose bits differ
  double max_abs = 0;     ///< max |b - a| over finite pairs
  Index max_abs_col = -1;
  std::uint64_t max_ulp = 0;  ///< f32 ULP distance (kUlpInfinite for NaN/Inf mismatches)
  Index max_ulp_col = -1;
  float max_ulp_a = 0, max_ulp_b = 0;  ///< the two values at max_ulp_col
  double mean_abs = 0;
  double rms_centered = 0;                     ///< RMS of (d - mean d)
  Index argmax_a = -1, argmax_b = -1;          ///< lowest index among maxima
  double top5_overlap = 0, top10_overlap = 0;  ///< |top-k(A) & top-k(B)| / k
  double kl_ab = 0, kl_ba = 0, jsd = 0;
  double dp_token = 0;     ///< p_B(t) - p_A(t) for A's emitted token t
  Index rank_in_b = 0;     ///< 1-based rank of A's token in row B (ties: lower id first)
  bool nonfinite = false;  ///< a NaN or +Inf in either row (probabilities undefined)
  bool masked = false;     ///< -Inf (masked vocabulary) present
  /// For abs:A,rel:R policies: max over j of |d_j| - R max(|a_j|, |b_j|), and where.
  double max_excess = 0;
  Index max_excess_col = -1;
  Index violations = 0;  ///< elements breaking the element-wise policy the comparison was given
  bool operator==(const RowComparison&) const = default;
};

enum class ForkClass : std::uint8_t { kTie, kNearTie, kUnexplained, kInvalid, kUndetermined };
std::string_view fork_class_name(ForkClass c);

struct TopEntry {
  std::int32_t token = -1;
  float logit = 0;
  double gap = 0;  ///< top logit - this logit
  bool operator==(const TopEntry&) const = default;
};

/// One side of a fork: its own row at the fork.
struct ForkSide {
  Witness witness;                    ///< of its own emission
  std::vector<TopEntry> top;          ///< top 5 of the row (ties: lower id first)
  std::int32_t other = -1;            ///< the other side's emission
  float other_logit = 0;              ///< its logit in this row
  Index other_rank = 0;               ///< its 1-based rank in this row
  double gap = 0;                     ///< L[own] - L[other], exact
  double gap_ulps = 0;                ///< gap / ulp_f32(L[own]) (kept for the JSON)
  double gap_dtype_ulps = 0;          ///< gap in ulps of this row's own type (witness.logits_dtype) at L[own]
  bool exact_tie = false;             ///< own and other are bit-identical maxima of this row
  double eps_own = 0, eps_other = 0;  ///< per-logit error of this side (model sources only)
  bool operator==(const ForkSide&) const = default;
};

/// |d| on the matched rows before a fork (the observed envelope's evidence).
struct BeforeFork {
  Index rows = 0;
  Index bit_identical = 0;
  double max_abs = 0;       ///< largest |d| over every logit of those rows
  double p50 = 0, p99 = 0;  ///< of the rows' max |d|
  bool operator==(const BeforeFork&) const = default;
};

struct Fork {
  Index row = 0;
  std::int64_t position = 0;
  std::int32_t token_a = -1, token_b = -1;
  ForkSide a, b;
  double delta_a = 0, delta_b = 0;  ///< |L_A[x] - L_B[x]| at x = token_a, token_b
  double env_a = 0, env_b = 0;      ///< the envelope at each token
  bool has_envelope = false;        ///< false: no source (the fork is undetermined unless |d| is 0)
  std::string envelope_source;      ///< which source, and why the preferred ones were not used
  BeforeFork before;
  std::vector<std::int32_t> context;  ///< the last tokens of the shared history
  ForkClass cls = ForkClass::kNearTie;
  std::string why;
  bool operator==(const Fork&) const = default;
};

// ---- evidence, one struct per check kind (or per shape of a kind) ---------------------------

/// `check`'s schema check: what the valid dump holds.
struct SchemaEvidence {
  std::string engine, build;
  Index projections = 0, logits_runs = 0, tensors = 0, notes = 0;
  bool operator==(const SchemaEvidence&) const = default;
};

/// A check whose prerequisite failed (the reason says which).
struct NotEvaluatedEvidence {
  bool operator==(const NotEvaluatedEvidence&) const = default;
};

struct GeometryEvidence {
  Index rows = 0, slots = 0, slots_used = 0, k = 0, n = 0, in_stride = 0, out_stride = 0;
  bool request_rules = false;
  Index requests = 0, block_rows = 0, cap = 0;  ///< with request_rules
  ErrorCode guard = ErrorCode::kOk;             ///< the guard that refused the plan
  bool operator==(const GeometryEvidence&) const = default;
};

/// How a packed output that differs is explained by another row's values, bit for bit: what the
/// gather or the scatter did instead of what the selector says.
enum class SlotMisroute : std::uint8_t {
  kGathered,   ///< y_packed row `row` is y_unpacked row `actual`: slot `slot` computed that row
  kScattered,  ///< y_packed row `row` is y_compact slot `actual`: the scatter wrote that slot there
  kUnwritten,  ///< y_packed row `row` is still y_before: the scatter never wrote it
  kCompact,    ///< y_compact slot `slot` is y_unpacked row `actual` (y_packed is right)
};
/// "gathered", "scattered", "unwritten", "compact".
std::string_view slot_misroute_name(SlotMisroute m);

struct SlotMapping {
  SlotMisroute kind = SlotMisroute::kGathered;
  Index slot = 0;     ///< the slot the selector maps to `row`
  Index row = 0;      ///< the row the selector says
  Index actual = -1;  ///< the row (kGathered, kCompact) or slot (kScattered) whose values are there
  Index others = 0;   ///< further rows or slots with the same values (ambiguous when > 0)
  bool operator==(const SlotMapping&) const = default;
};

struct IdentityEvidence {
  static constexpr std::size_t kMaxMappings = 64;
  Index elements_compared = 0, packed_vs_unpacked = 0, compact_vs_packed = 0, differ = 0;
  Index selected_rows = 0;
  /// Selected rows with a difference, and how many of them a SlotMapping explains.
  Index rows_differing = 0, rows_explained = 0;
  std::vector<SlotMapping> mappings;  ///< in slot order, at most kMaxMappings
  bool operator==(const IdentityEvidence&) const = default;
};

/// The figures of one output's reference::BoundStats that the reports show, as plain values:
/// what its accessors return. The stats keep their running sums private, and nothing after the
/// check needs them, so the evidence holds these (and can cross a process boundary exactly).
struct BoundFigures {
  Index elements = 0, outside = 0, beyond_tier = 0, nonfinite = 0, single_valued = 0;
  double max_abs_error = 0;                  ///< max |y - y*| over finite values
  Index max_abs_row = -1, max_abs_col = -1;  ///< where max_abs_error is (-1: no finite value)
  double max_error_over_bound = 0, max_utilization = 0;
  double mean_signed_error = 0, mean_signed_error_over_bound = 0;

  BoundFigures() = default;
  BoundFigures(const reference::BoundStats& s)  // NOLINT: implicit by design: a check assigns its stats
      : elements(s.elements()),
        outside(s.outside()),
        beyond_tier(s.beyond_tier()),
        nonfinite(s.nonfinite()),
        single_valued(s.single_valued()),
        max_abs_error(s.max_abs_error()),
        max_abs_row(s.max_abs_at().found() ? s.max_abs_at().row : -1),
        max_abs_col(s.max_abs_at().found() ? s.max_abs_at().col : -1),
        max_error_over_bound(s.max_error_over_bound()),
        max_utilization(s.max_utilization()),
        mean_signed_error(s.mean_signed_error()),
        mean_signed_error_over_bound(s.mean_signed_error_over_bound()) {}
  bool operator==(const BoundFigures&) const = default;

  /// Why max_utilization is not a share ("" when it is finite): a NaN output, or a value outside
  /// an interval that does not extend past the reference on the value's side (a single-valued
  /// interval, or one rounded to one side of y*), has no share of it; those values are counted
  /// in `nonfinite` and `outside`, and a reader should go by those rather than by "inf".
  std::string utilization_note() const {
    if (std::isfinite(max_utilization)) return "";
    if (nonfinite > 0 && outside == 0) return "not defined: " + std::to_string(nonfinite) + " non-finite value(s)";
    return "not defined: " + std::to_string(outside) +
           " value(s) outside their accepted interval, some on a side where the interval does not extend past "
           "the reference" +
           (nonfinite > 0 ? ", and " + std::to_string(nonfinite) + " non-finite value(s)" : std::string());
  }
};

/// One engine output against the reference intervals.
struct OutputBound {
  std::string output;  ///< "y_unpacked", "y_packed", "y_compact"
  BoundFigures stats;
  /// |y - y*| / B of every finite value: how much of its bound each value used (for bf16
  /// outputs the output rounding is part of |y - y*|, so values above 1 can lie inside).
  Log2Histogram error_over_bound{kErrorOverBoundLog2Min, kErrorOverBoundLog2Max};
  FailureGrid outside;  ///< where the values outside their intervals lie
  /// 2^-32 .. 2^8: an f32 output of K = 5120 typically uses 2^-12 .. 2^-4 of B, a bf16 output's
  /// rounding up to 2^6 of a tight B; further out is counted in `below` / `above`.
  static constexpr int kErrorOverBoundLog2Min = -32, kErrorOverBoundLog2Max = 8;
  bool operator==(const OutputBound&) const = default;
};

/// The first value outside its interval, in full.
struct BoundFailure {
  std::string output;
  reference::ElementRecord element;
  Index slot = -1;  ///< -1: not a packed output
  /// Member by member (reference::ElementRecord has no ==).
  bool operator==(const BoundFailure& o) const {
    const reference::ElementRecord &a = element, &b = o.element;
    return output == o.output && slot == o.slot && a.row == b.row && a.col == b.col && a.value == b.value &&
           a.center == b.center && a.bound == b.bound && a.accept.lo == b.accept.lo && a.accept.hi == b.accept.hi;
  }
};

/// What a trial changes in the model the checks hold the data against. Only kMovesCentres can
/// bring residuals that a fault leaves back to rounding noise; a wider bound holds more values
/// without moving one centre (diagnosis.h, fitting_trials).
enum class TrialEffect : std::uint8_t {
  kMovesCentres,   ///< other weights, activations, bias or walk: the exact values move
  kWidensBound,    ///< a wider accumulator or folded dequantization: B grows, the centres stay
  kMovesRounding,  ///< another output rounding: the intervals move about unchanged centres
  /// Not a declaration: a kernel fault fitted on the sample (one input channel's scale), named
  /// as the fault where it brings the sample within the rounding noise, never as a fix.
  kLocatesFault,
};
std::string_view trial_effect_name(TrialEffect e);

/// One re-test of a likely declaration mistake on a sample of a failing projection
/// (certify/projection/diagnosis.h): the declaration changed, and how many of the sampled engine
/// values its intervals hold. A trial emulating a walk that misses on the sample's first 16
/// columns is counted on those alone, its `sampled` then smaller than the declaration's.
struct DeclarationTrial {
  std::string declaration;  ///< "dequant = output", "accumulator = f32-rz", "x rounded to bf16", ...
  std::string segment;      ///< the weight segment it concerns, "" for the projection
  TrialEffect effect = TrialEffect::kMovesCentres;
  Index sampled = 0, inside = 0;
  /// The sampled values' mean r^2 / sigma^2 under this declaration (sigma the residual model's,
  /// output rounding included; docs/error-bounds.md §6c): about 1e-2 or less where the
  /// declaration is the kernel's, far above 1 where a systematic error remains. -1: not computed.
  double energy = -1;
  /// Sampled values outside this declaration's intervals left to bound, out of `energy` and
  /// counted with `inside` where a trial names a mistake: fewer than 1 % of the sample and, for
  /// a trial, each outside as declared too (wrong values beside the mistake). 0 otherwise.
  Index left = 0;
  /// The residual tests' diagnosis only: sampled values inside their intervals but far off the
  /// rounding noise (r^2 / sigma^2 above diagnosis_far_energy, 58 at 2,048 values), left out of
  /// `energy` on the same terms as `left` and not counted in it. 0 otherwise.
  Index far = 0;
  /// The declaration only (the first trial; 0 for the others): its sampled residuals' lean
  /// away from zero, sum s / sqrt(sum s^2) over s = sign(c) r / sigma (negative: toward zero).
  /// Centred rounding errors, of any precision, keep it within a few units (symmetric s:
  /// P(|lean| >= t) <= 2 exp(-t^2 / 2)); an accumulator or output that truncates falls short of
  /// every value and leans far toward zero (diagnosis.h, kTruncationLean). 0: not read (fewer
  /// than 16 finite residuals).
  double lean = 0;
  bool operator==(const DeclarationTrial&) const = default;
};

/// What a location fit found (LocationFit::kind).
enum class FitKind : std::uint8_t {
  kRow,           ///< one row's residuals, in every tested column, and no other row's
  kRows,          ///< a few rows' residuals (2 to 8), in every tested column, and no other row's
  kElement,       ///< one value of the strongest column: its row isolated in the other columns tested
  kElements,      ///< 2 to 8 values of the significant columns (up to 8), their rows isolated alike
  kColumnOffset,  ///< the strongest column's outputs, every row moved by one constant (a wrong bias)
  kGroupOffset,   ///< one group's weights moved by one constant (an affine group's bias, a zero point)
  kGroupScale,    ///< an affine group's scale: its s q part scaled, its bias not (no candidate models it)
  kColumnSwap,    ///< the strongest column holds another column's exact values (weight rows exchanged)
  /// one scale shared by several columns (scale_rows > 1: a 128 x 128 block, a per-tensor scale
  /// per group) wrong: every column sharing it fits the same scale of its group's contribution
  kScaleBlock,
  /// one contiguous K range [k_begin, k_end) missing (value 0) or counted twice (value 2) in every
  /// column fitted (the significant ones among the strongest), at any alignment: a masked tail,
  /// or a tile the kernel skips, that the candidates' 64-term ranges reach only in part
  kRange,
};
std::string_view fit_kind_name(FitKind k);

/// A row a location fit names (kRow, kRows): its number in x, its slot in a packed output (-1
/// in y_unpacked), the scale its outputs fit, and the part of its dot product scaled: an
/// activation group of x_quant (group, k_begin, k_end) or the whole (-1, 0, K). With integer
/// x_quant a row's part may fit an offset instead: its zero points moved by `steps` (the
/// kernel's minus the dumped ones), each group's activations by -steps times its scale (value:
/// that move of the part's first group). alike: the other reading (a scale beside an offset,
/// an offset beside a scale) fits almost as well, over alike_group (-1: the whole row), as the
/// scale or the steps alike_value. A value (kElements): its row, slot and column, and its
/// residual (group -1, k_begin = k_end = 0).
struct FittedRow {
  Index row = -1;
  Index slot = -1;
  double value = 0;
  Index group = -1, k_begin = 0, k_end = 0;
  Index col = -1;       ///< kElements: the value's column; -1 for a row (kRow, kRows)
  bool offset = false;  ///< kRow, kRows: the part's zero points moved, not its scale
  double steps = 0;     ///< offset: the zero points' change fitted (0 otherwise)
  bool alike = false;
  Index alike_group = -1;
  double alike_value = 0;
  bool operator==(const FittedRow&) const = default;
};

/// The failure's location where one structure other than a scale explains the residuals of the
/// strongest candidate's column (docs/detection.md "Where the fault is"): per row, by least
/// squares, one row alone, a constant, one group's weights offset, against a group's scale and
/// the column's scale. Set only, with at least 4 rows, where the fit explains at least half the
/// residual energy and leaves at most a quarter of what the best alternative leaves.
struct LocationFit {
  FitKind kind = FitKind::kRow;
  std::string output;
  Index row = -1;                              ///< kRow, kElement; kRows, kElements: the first of rows
  Index slot = -1;                             ///< kRow, kElement of y_packed / y_compact: the row's slot
  Index col = 0;                               ///< the strongest candidate's column (kElements: the first value's)
  Index group = -1, k_begin = -1, k_end = -1;  ///< kGroupOffset, kGroupScale; kRow(s): the activation group
  Index columns = 0;                           ///< kRow(s), kElement(s): the other columns tested
  /// kRow: the scale its outputs fit (1 + least squares over the tested columns); kRows: the
  /// first row's; kElement: the value's residual (kElements: the first value's); kColumnOffset:
  /// the outputs' offset; kGroupOffset: the weights' offset; kGroupScale: the scale of the
  /// group's s q part.
  double value = 0;
  double explained = 0;              ///< the share of the residual energy the fit explains
  double alternative_explained = 0;  ///< the same for the best alternative
  /// kRow, kRows: the first row's FittedRow::offset and steps.
  bool offset = false;
  double steps = 0;
  /// kRow(s): the share of the rows' energy their scales (or offsets) explain; kGroupOffset of an affine
  /// group whose scale fits alike (its scale, its bias or both): the share its scale alone
  /// explains.
  double scale_explained = 0;
  /// kColumnSwap: the column whose exact values col holds (value: the fitted coefficient of
  /// their difference, 1 for an exchange); whether other_col holds col's in turn; whether col
  /// holds other_col's whole output, bias and residual included, rather than its dot product.
  Index other_col = -1;
  bool exchanged = false;
  bool with_epilogue = false;
  /// kRange: the range, [k_begin, k_end); columns: the columns fitted, every one of which it
  /// explains; value: 1 plus the coefficient fitted (0: missing, 2: counted twice); explained
  /// over those columns; alternative_explained: the strongest candidate's range there.
  /// kScaleBlock: the columns sharing the scale, [col_begin, col_end), and its row of `scales`
  /// (group is its column); columns: how many of them were fitted; value: the scale they fit;
  /// alternative_explained: the share the same scale explains in those columns but col.
  Index col_begin = -1, col_end = -1, scale_row = -1;
  /// kRow, kRows found by the pooled test (docs/detection.md "Pooled over the columns"): the
  /// strongest significant columns left out (no row standing out alone), the rows' fits over
  /// `columns` others each explain at least `explained` of their row's weighted residual energy
  /// there (alternative_explained: the best row not named), where rounding noise reaches
  /// chance_share with probability kResidualAlpha over `fits` fits (every row, part and family).
  bool pooled = false;
  double chance_share = 0;
  Index fits = 0;
  /// kRow, kRows: every row named, the row with the most residual energy first; kElements:
  /// every value named, by column (the strongest first), in a column the most energy first.
  std::vector<FittedRow> rows;
  bool operator==(const LocationFit&) const = default;
};

struct BoundEvidence {
  std::vector<OutputBound> outputs;
  std::vector<std::string> weights;  ///< per segment: which weights the reference used, and why
  Index ambiguous_weights = 0;       ///< weights with two allowed kernel values (spread charged)
  std::string accumulator;
  double u_eff = 0, lambda = 0;
  bool round_to_nearest = true;
  Index k = 0, elements = 0, outside = 0, beyond_tier = 0;
  /// In y_unpacked where it holds values outside (else the packed output where they are spread
  /// widest; bound.cc spread_of_outside): the rows of x holding any of them, and the rows it
  /// holds at all (y_packed its selected rows, y_compact its used slots). row_spread: the
  /// diagnosis names then only declarations that bring the sampled values within the rounding
  /// noise.
  Index rows_outside = 0, rows_held = 0;
  Index rows_values = 0;  ///< the values outside in that output
  /// Every row holding values outside is a row whose activations dominate (RowNorms: 2-norm
  /// over 4 times the median row's): any mistake's rounding is largest there.
  bool rows_dominant = false;
  std::vector<Index> rows_named;  ///< those rows, ascending, where at most 8 hold any (else empty)
  /// Read from y_unpacked, while another output holds values outside in rows y_unpacked's are
  /// not in (a packed path's own fault): the rows speak for y_unpacked alone.
  bool rows_elsewhere = false;
  std::optional<BoundFailure> first;
  DType output = DType::kBf16;  ///< the outputs' dtype (bf16: |y - y*| includes the output rounding)
  /// When the check fails broadly: the declaration as declared, then each alternative re-tested
  /// on the same sample (first the declared one, sampled/inside as found).
  std::vector<DeclarationTrial> diagnosis;
  /// Where the values outside lie in a few rows, more than chance puts there, and signature names
  /// no location: the pooled test's rows over y_unpacked (LocationFit::pooled; docs/detection.md
  /// "Pooled over the columns"), its text ending the reason after "likely location: ".
  std::optional<LocationFit> location;
  bool operator==(const BoundEvidence&) const = default;
};

struct WalkEvidence {
  struct Output {
    std::string output;
    Index compared = 0, mismatches = 0;
    /// The rows and columns the mismatches span (-1: none).
    Index row_min = -1, row_max = -1, col_min = -1, col_max = -1;
    bool operator==(const Output&) const = default;
  };
  std::string k_walk;
  std::vector<Output> outputs;
  Index compared = 0, mismatches = 0;
  /// Where at least 1 % of the values differ: the declaration as declared, then each quantized
  /// segment's other declarations, `inside` counting the sampled values its emulated walk
  /// reproduces bit for bit (check_projection.cc, docs/cli.md).
  std::vector<DeclarationTrial> diagnosis;
  bool operator==(const WalkEvidence&) const = default;
};

/// The value of one output that lies farthest beyond what its roundings allow, in
/// accumulation sigmas (the bias test's per-value part).
struct BiasValue {
  Index row = -1, col = -1;
  double z = 0;              ///< (|r| - the roundings bounded outright - slack) / sigma
  double residual_ulps = 0;  ///< sign(c) (stored - c) / ulp(c) (negative: toward zero)
  double allowed_ulps = 0;   ///< the largest |residual| within the threshold, in ulp(c)
  double stored = 0, exact = 0;
  bool operator==(const BiasValue&) const = default;
};

/// The bias test of one bf16 or f16 output (docs/error-bounds.md §6a).
struct BiasOutput {
  std::string output;
  Index values = 0, excluded = 0;
  double mean_ulps = 0;   ///< mean signed residual toward +|c| (negative: toward zero)
  double shift_ulps = 0;  ///< the mean bias a directed accumulator may add (0 for round-to-nearest)
  double limit_ulps = 0;  ///< |mean| beyond shift + limit fails
  bool one_sided = false;
  /// The per-value part (round-to-nearest accumulators): values tested, values beyond what
  /// their roundings allow by at most one more spacing (a neighbour of the round-to-nearest
  /// value), of those the ones toward zero, and values beyond by more.
  Index tested = 0, beyond = 0, beyond_toward_zero = 0, far = 0;
  Index row_min = -1, row_max = -1;  ///< the rows (of x) the values beyond lie in (-1: none)
  Index col_min = -1, col_max = -1;  ///< the columns the values beyond lie in (-1: none)
  /// The rows the output holds (y_unpacked all M, the packed outputs the selected ones; rows
  /// that are not live left out, RowNorms), whether its values beyond lie in one of them too
  /// often for chance (bias.cc, beyond_in_one_row), and whether that row's activations dominate
  /// (a rounding fault would then show there first too).
  Index rows_held = 0;
  bool one_row = false;
  bool row_dominates = false;
  /// The largest (|r| - the roundings bounded outright - slack) / sigma over the tested values
  /// (negative: every value within its outright bounds); nullopt when none was tested.
  std::optional<double> peak_z;
  std::optional<BiasValue> worst;
  bool operator==(const BiasOutput&) const = default;
};

struct BiasEvidence {
  double alpha = 0;     ///< false-alarm probability of the whole check
  bool nearest = true;  ///< round-to-nearest accumulator (errors modelled as centred)
  /// The per-value threshold in accumulation sigmas (0: the per-value part did not run).
  double value_threshold = 0;
  std::vector<BiasOutput> outputs;
  bool operator==(const BiasEvidence&) const = default;
};

/// One candidate of the signature test (docs/error-bounds.md §7a): a K range of one output
/// column, the residuals of its rows weighted by their partial dot products over that range.
struct SignatureFinding {
  std::string output;
  Index col = 0, k_begin = 0, k_end = 0;
  Index group = -1;  ///< the weight segment's group number when the range is exactly one group
  double z = 0;      ///< (|sum a r / s^2| - sum |a| slack / s^2) / sqrt(sum a^2 / s^2), s = sigma
  double fit = 0;    ///< weighted least squares: the outputs hold (1 + fit) times the range's exact part
  /// Its column held one live row in that output: every K range's z is the same there, so only
  /// the whole K was tried, and a fault of any range reads as one of the whole dot product.
  bool one_row = false;
  bool operator==(const SignatureFinding&) const = default;
};

/// The strongest candidate's column, where it holds zero-point weights, fitted by one group's
/// zero point off by a whole number: a zero point off by d moves that group's weights by -d
/// times its scale, so the outputs by -d s sum_{k in g} x_k, a signature the scale candidates
/// (sum_{k in g} x_k w_k) only approximate, and one of them then named a scale in another group.
/// Set only, with at least 4 rows, where it explains at least half the column's residual energy
/// and leaves at most a quarter of what the best alternative leaves.
struct ZeroPointFinding {
  std::string output;
  Index col = 0, group = 0, k_begin = 0, k_end = 0;
  double shift = 0;      ///< the kernel's zero point minus the dumped one, as fitted
  double explained = 0;  ///< the share of the column's residual energy the fit explains
  /// The same for the best of the alternatives: a group's scale, the column's scale, a constant
  /// offset (a wrong bias).
  double alternative_explained = 0;
  bool operator==(const ZeroPointFinding&) const = default;
};

/// The signature test of one projection: every (output, column, dyadic K range) candidate.
struct SignatureEvidence {
  static constexpr int kZLog2Min = -4;
  static constexpr int kZLog2Max = 10;
  double alpha = 0;             ///< false-alarm probability of the whole check
  Index tile = 0;               ///< K columns of the narrowest range
  Index ranges_per_column = 0;  ///< dyadic ranges over the tiles, the whole K included
  /// Candidates tested: those computed with a nonzero signature, and every range of a screened
  /// column.
  Index candidates = 0;
  double threshold = 0;   ///< z beyond which a candidate fails
  Index significant = 0;  ///< candidates beyond it
  /// (output, column) pairs with a candidate beyond it: a fault in one group of one column
  /// makes many of that column's ranges significant (32 rows cannot tell them all apart).
  Index significant_columns = 0;
  /// Packed / compact (output, column) pairs equal to y_unpacked's column bit for bit on every
  /// row they hold: tested through y_unpacked's candidates (on all rows), not counted again.
  Index columns_as_unpacked = 0;
  /// (output, column) pairs with a candidate tested (computed or screened): the columns
  /// significant_columns is a share of (a column over one live row tests the whole K alone).
  Index columns_tested = 0;
  /// (output, column) pairs whose bound sqrt(sum r^2 / sigma^2), which every candidate's z is
  /// under, is itself under the threshold: tested without computing their candidates.
  Index columns_screened = 0;
  double screened_max = 0;  ///< the largest bound of a screened column
  /// (output, column) pairs not tested, or tested on some of their ranges only: a partial dot
  /// or a candidate's sums beyond the range of the type it is computed in (activations and
  /// weights near FLT_MAX). bound and variance still test their values.
  Index columns_untested = 0;
  std::vector<SignatureFinding> strongest;  ///< the largest computed z first, at most 8
  /// Where the location names one column and 2 to 8 columns are significant, every one of them
  /// among the 8 strongest: the strongest candidate of each other significant column, strongest
  /// first (a fault in several columns at once: two channels' scales wrong). Empty otherwise.
  std::vector<SignatureFinding> others;
  /// Where the strongest finding's K range is missing (or counted twice) with more than 8
  /// columns and a tenth of those tested significant, and each of the 8 strongest columns reads
  /// that same range so: how many they are (else 0). The range is then the kernel's in every
  /// column (a split-K part dropped), not one column's.
  Index range_columns = 0;
  /// z of every computed candidate, and once per screened column its bound.
  Log2Histogram z{kZLog2Min, kZLog2Max};
  std::optional<ZeroPointFinding> zero_point;  ///< the failure's location, where a zero point explains it
  std::optional<LocationFit> fit;  ///< the failure's location, where a row, an offset or a group's offset explains it
  bool operator==(const SignatureEvidence&) const = default;
};

/// The variance test of one output (docs/error-bounds.md §7b).
struct VarianceOutput {
  std::string output;
  Index values = 0;
  Index outside = 0;  ///< values outside B, left to `bound` (not among `values`)
  double ratio = 0;   ///< sum (|r| - slack)_+^2 over sum sigma^2
  double limit = 0;   ///< the ratio a correct kernel stays under (false-alarm probability alpha)
  /// The centre part (f32 outputs, docs/error-bounds.md §6e): sum sign(c) r / sigma over
  /// sqrt(leaning), signed (negative: toward zero), against lean_limit; how many of the
  /// `leaning` residuals lie toward zero.
  std::optional<double> lean_z;
  double lean_limit = 0;
  Index leaning = 0;
  Index toward_zero = 0;
  Index away_from_zero = 0;  ///< of the `leaning` residuals; those of exactly 0 are neither
  /// The same sum over the residuals' own spread, sqrt(sum (r / sigma)^2), instead of
  /// sqrt(leaning), against lean_t plus the slack's shift over that spread
  /// (spread_limit). Where the energy fails too, a lean beyond lean_limit but within
  /// spread_limit is the size of that excess noise, not a direction (a 16-bit accumulator
  /// rounding to nearest: z = 11.9 against 10.2, 2.0 on its own spread).
  std::optional<double> spread_z;
  double spread_limit = 0;
  bool operator==(const VarianceOutput&) const = default;
};

struct VarianceEvidence {
  double alpha = 0;
  std::string accumulator;
  std::vector<VarianceOutput> outputs;
  /// Where the check fails and bound's diagnosis did not run: the declaration as declared, then
  /// each likely mistake re-tested on the sample (check_projection.cc, docs/cli.md).
  std::vector<DeclarationTrial> diagnosis;
  bool operator==(const VarianceEvidence&) const = default;
};

/// The quantize check (docs/error-bounds.md §6b): each code of x_quantized against the declared
/// rounding of x / s (+ zp), the quotient allowed a relative slack for the engine's own f32
/// division and, with f16 / bf16 scales, for quantizing with the scale before it was stored.
struct QuantizeEvidence {
  std::string quantizer;  ///< x_quant's name: "int8", "uint8", "e4m3", "e5m2"
  std::string rounding;   ///< "rne", "rna"
  Index group = 0;        ///< x_quant_group
  Index values = 0;       ///< codes checked
  Index excluded = 0;     ///< values of x that are inf or NaN (no code quantizes them: any fails the check)
  Index mismatched = 0;   ///< codes outside their allowed range
  Index bad_scales = 0;   ///< scales not positive and finite (0 allowed as §3.6 says)
  double tolerance = 0;   ///< the relative slack of the quotient
  // The first mismatched code (row and column in first_failure): x, the group's scale and zero
  // point, the code found and the allowed codes' range (values of FP8 codes).
  double x = 0, scale = 0, zero_point = 0, found = 0, lowest = 0, highest = 0;
  /// The first inf or NaN of x (row-major), -1 when excluded = 0.
  Index nonfinite_row = -1, nonfinite_col = -1;
  bool operator==(const QuantizeEvidence&) const = default;
};

struct UntouchedEvidence {
  Index elements_compared = 0, changed = 0;
  bool first_in_padding = false;  ///< with a first failure: a padding column (else an unselected row)
  bool operator==(const UntouchedEvidence&) const = default;
};

struct VacuityEvidence {
  Index selected_rows = 0, outputs = 0;
  std::vector<std::string> vacuous;  ///< what is missing ("no selected rows", ...)
  bool operator==(const VacuityEvidence&) const = default;
};

struct WitnessEvidence {
  Index tokens = 0, vocab = 0;
  std::string error_source;
  Index certified = 0, near_tie = 0, tie = 0, unbounded = 0, failed = 0;
  std::optional<Witness> smallest_margin;  ///< the certified/near-tie witness with the least margin
  std::optional<Witness> first_failure;
  /// Margins of the valid emissions (ties count as zero), absolute (2^-30 .. 2^10: one ulp at a
  /// logit of 12 is 2^-20) and in ulps of the emitted logit (2^-1 .. 2^40: half an ulp below a
  /// power of two).
  Log2Histogram margin{-30, 10};
  Log2Histogram margin_ulps{-1, 40};
  DType logits_dtype = DType::kF32;  ///< the unit of margin_ulps: ulps of this type at the emitted logit
  /// The valid emissions with the smallest margins (ties excluded), smallest first, equal
  /// margins by row; at most kTightest.
  std::vector<Witness> tightest;
  static constexpr std::size_t kTightest = 10;
  bool operator==(const WitnessEvidence&) const = default;
};

/// `witness --verify` of one stored run.
struct VerifyEvidence {
  std::optional<std::int64_t> position;  ///< the first position that differs
  Index tokens = 0, verified = 0;
  std::string error_source;
  /// Whether the dump file's XXH3-128 is the one the witness file records for its source
  /// (nullopt when it records none).
  std::optional<bool> same_file;
  bool operator==(const VerifyEvidence&) const = default;
};

/// Nearest-rank percentiles of a per-row figure (empty when there are no rows).
struct Distribution {
  bool empty = true;
  double max = 0, p999 = 0, p99 = 0, p95 = 0, p90 = 0, p50 = 0, min = 0;
  bool operator==(const Distribution&) const = default;
};

/// A run's matched rows in order, summarized in at most kMaxPoints consecutive groups of
/// `rows_per_point` rows (the last group may hold fewer): per group the largest KL(A||B)
/// (+inf when a row's is not finite), the largest max |d|, and how many rows' top-1 agree.
struct PositionSeries {
  static constexpr Index kMaxPoints = 512;
  Index rows = 0;  ///< matched rows summarized
  Index rows_per_point = 0;
  std::vector<double> kl_max;
  std::vector<double> max_abs;
  std::vector<Index> top1_agree;
  Index group_rows(std::size_t i) const {
    const Index begin = static_cast<Index>(i) * rows_per_point;
    return rows - begin < rows_per_point ? rows - begin : rows_per_point;
  }
  bool operator==(const PositionSeries&) const = default;
};

struct LogitsEvidence {
  Index rows_a = 0, rows_b = 0, compared = 0, matched = 0, unmatched = 0, divergence_row = -1;
  bool prompts_equal = true;
  Index vocab = 0;
  std::string policy;
  Index bit_identical_rows = 0, nonfinite_rows = 0;
  std::uint64_t max_ulp = 0;
  /// Where max_ulp was reached (first row with it) and the two values there, so a distance
  /// counted through zero is shown with the values that explain it.
  Index max_ulp_row = -1, max_ulp_col = -1;
  float max_ulp_a = 0, max_ulp_b = 0;
  double top1_agreement = 0, top1_agreement_stderr = 0, top5_overlap_mean = 0, top10_overlap_mean = 0;
  double kl_mean = 0, jsd_max = 0;
  Distribution kl_ab, max_abs_diff;
  double timing_seconds = 0;
  std::vector<RowComparison> first_rows;  ///< up to 16 matched rows, in order
  Index first_failure_row = -1;
  /// Rows and elements that break the policy (elements: for element-wise policies).
  Index failing_rows = 0, failing_elements = 0;
  bool element_policy = false;  ///< bitwise, ulp and abs count elements; kl and top1 rows
  PositionSeries series;        ///< per-position figures along the run (capped)
  std::string policy_source;    ///< why this policy: "--policy", or the default's reason
  /// The logits' stored types: when they differ, f32 ulp counts between the widened values say
  /// little (a bf16 value is 2^16 f32 ulps from its neighbour), so |d| and relative differences
  /// are shown instead.
  DType dtype_a = DType::kF32, dtype_b = DType::kF32;
  std::vector<Fork> forks;  ///< under the forks policy: the forks it judged
  bool operator==(const LogitsEvidence&) const = default;
};

struct TensorEvidence {
  std::string policy;
  DType dtype = DType::kF32;
  std::vector<Index> shape;
  std::string note;       ///< "" or why another policy was not used
  bool compared = false;  ///< false: dtypes or shapes differ
  Index elements = 0, violations = 0;
  double max_abs_diff = 0;
  std::uint64_t max_ulp = 0;
  Index first_failure = -1;  ///< flat index
  bool operator==(const TensorEvidence&) const = default;
};

struct ForkEvidence {
  Fork fork;
  /// Token text (with --vocab): the context, both emissions, each top-5 entry.
  bool has_text = false;
  std::string context_text, text_a, text_b;
  std::vector<std::string> top_a_text, top_b_text;
  bool operator==(const ForkEvidence&) const = default;
};

/// A run pair without a fork.
struct NoForkEvidence {
  Index rows_a = 0, rows_b = 0, compared = 0;
  bool prompts_equal = true;
  bool operator==(const NoForkEvidence&) const = default;
};

/// One of the sweep's checks (identity, alias or guard).
struct SweepEvidence {
  Index cases = 0, failed = 0;
  Index identity_comparisons = 0, rows_compared = 0, width_cases = 0, width_rows = 0;  ///< identity
  Index alias_cases = 0, alias_comparisons = 0, alias_rows = 0;                        ///< alias
  std::vector<ErrorCode> guards_covered;                                               ///< guard
  Index fallbacks = 0;                                                                 ///< guard
  std::string first_failure_key;  ///< "" when the first failure is of another kind
  bool operator==(const SweepEvidence&) const = default;
};

/// `demo`: one dump certified as `check` would, and what was expected of it.
struct DemoDumpEvidence {
  std::string file;
  std::string dump_verdict;
  Index checks = 0;
  std::vector<std::string> failed_checks;  ///< ids
  std::string fault;                       ///< "" for the good dump
  std::vector<CheckKind> expected;         ///< the kinds that must fail (faulty dumps)
  bool operator==(const DemoDumpEvidence&) const = default;
};

struct DemoCompareEvidence {
  std::vector<std::string> files;
  std::string policy;
  bool operator==(const DemoCompareEvidence&) const = default;
};

struct DemoForkEvidence {
  std::vector<std::string> files;
  std::string expected_class, found_class, forks_verdict;
  bool operator==(const DemoForkEvidence&) const = default;
};

/// The evidence of a check: std::monostate for none (a skipped check). Evidence that crossed a
/// process boundary (a campaign's worker, an MPI rank, its journal) is the same typed value
/// again (evidence_wire.h), so every renderer draws from it as from the check's own.
using Evidence =
    std::variant<std::monostate, SchemaEvidence, NotEvaluatedEvidence, GeometryEvidence, IdentityEvidence,
                 BoundEvidence, WalkEvidence, BiasEvidence, SignatureEvidence, VarianceEvidence, QuantizeEvidence,
                 UntouchedEvidence, VacuityEvidence, WitnessEvidence, VerifyEvidence, LogitsEvidence, TensorEvidence,
                 ForkEvidence, NoForkEvidence, SweepEvidence, DemoDumpEvidence, DemoCompareEvidence, DemoForkEvidence>;

}  // namespace ncert::certify
