// signature: no (output column, K range) of the residuals carries a fault's signature
// (docs/error-bounds.md §6d). A wrong scale, zero point or codebook in one weight group moves the
// residuals of every row of its column in proportion to the group's partial dot product a; a
// dropped or doubled K range, by minus or plus that range's partial sum; a wrong per-channel
// scale, by the column's whole dot product. Per candidate, z = (|sum a r / s^2| - sum |a| slack
// / s^2) / sqrt(sum a^2 / s^2), s = sigma, is bounded by Azuma's inequality under the mean-independent rounding
// model, with the two-sided tail shared over every candidate (a false-alarm probability of at
// most 1e-9 per projection); the strongest candidate names the location and the fitted size.
#include <algorithm>
#include <cmath>

#include "certify/projection/checks.h"
#include "certify/projection/detail/localize.h"
#include "certify/projection/detail/text.h"
#include "certify/report/format.h"
#include "reference/af4.h"

namespace ncert::certify {

std::string residual_model_blocker(const ProjectionFacts& f, bool biased_rounding) {
  const ProjectionInfo& info = f.info();
  if (biased_rounding) {
    return "accumulator " + info.accumulator.name + (info.walk.declared ? " with k_walk " + info.walk.name : "") +
           " rounds with a bias: the residual model holds for round-to-nearest accumulation only";
  }
  const bool narrow = info.output == DType::kBf16 || info.output == DType::kF16;
  if (narrow && info.output_rounding != reference::OutputRounding::kNearestEven) {
    return "output_rounding = " + std::string(reference::output_rounding_name(info.output_rounding)) +
           ": the residual model holds for round-to-nearest outputs only";
  }
  return std::string();
}

namespace {

/// Whether the weights of output column `col` are a scale times their codes (AF4 codebook and
/// zero-point, int8 / FP8 scaled), so that a group's contribution is proportional to its scale;
/// an affine AF4 group's also holds its bias terms, which a scale error leaves alone.
bool contribution_is_scaled(const ProjectionInfo& info, Index col) {
  const SegmentInfo* seg = info.segment_at(col);
  if (seg == nullptr) return false;
  if (seg->format == reference::WeightFormat::kAf4) return seg->af4.variant != reference::Af4Variant::kAffine;
  return reference::is_scaled_format(seg->format);
}

/// A finding's fit within this of -1 or +1 reads as its K range missing or counted twice: a
/// dropped range fits -1 to within its own rounding (1e-8), a scale error of a group fits
/// e of a few percent at most.
constexpr double kRangeCountTolerance = 0.1;

bool range_missing(const SignatureFinding& s) { return std::fabs(s.fit + 1) < kRangeCountTolerance; }
bool range_doubled(const SignatureFinding& s) { return std::fabs(s.fit - 1) < kRangeCountTolerance; }

/// A candidate as a finding: its output, column and K range (a group where the range is one).
SignatureFinding finding_of(const SignatureHit& h, const ReferencePass& pass, const ProjectionFacts& f) {
  const Index k = f.info().k;
  const TileRange& g = pass.ranges[static_cast<std::size_t>(h.range)];
  SignatureFinding s;
  s.output = std::string(engine_output_name(static_cast<EngineOutputId>(h.output)));
  s.col = h.col;
  s.k_begin = g.first * pass.tile;
  s.k_end = std::min(k, (g.first + g.count) * pass.tile);
  const Index gs = segment_group_size(reference::segment_of(f.data.weights, h.col));
  if (gs > 0 && gs < k && s.k_begin % gs == 0 && s.k_end - s.k_begin == gs) s.group = s.k_begin / gs;
  s.z = h.z;
  s.fit = h.fit;
  s.one_row = h.one_row;
  return s;
}

/// Whether the location names one column's fault (its candidate, a zero point, a bias, a group's
/// offset or scale): other significant columns are then other faults. A row, values, a copied
/// column or a shared scale already account for the columns they reach.
bool names_one_column(const SignatureEvidence& e) {
  if (!e.fit) return true;
  const FitKind k = e.fit->kind;
  return k == FitKind::kColumnOffset || k == FitKind::kGroupOffset || k == FitKind::kGroupScale;
}

/// SignatureEvidence::others: the strongest candidate of each significant column but the
/// location's, where every significant column is among `by_column` (the strongest of each of
/// the kKeep strongest columns) and there are 2 to kKeep of them. Two channels' scales wrong
/// read "column 7, the whole dot product ... 1.011x; 2 candidates in 2 output columns", the
/// second column unnamed.
std::vector<SignatureFinding> other_columns(const SignatureEvidence& e, std::vector<SignatureHit> by_column,
                                            const ReferencePass& pass, const ProjectionFacts& f) {
  if (!names_one_column(e) || e.significant_columns < 2) return {};
  std::sort(by_column.begin(), by_column.end(), stronger);
  const auto significant = static_cast<Index>(std::count_if(
      by_column.begin(), by_column.end(), [&](const SignatureHit& h) { return h.z > pass.signature_threshold; }));
  if (significant != e.significant_columns) return {};
  const Index col = e.fit ? e.fit->col : e.zero_point ? e.zero_point->col : e.strongest.front().col;
  const std::string output = location_output(e);
  std::vector<SignatureFinding> out;
  for (const SignatureHit& h : by_column) {
    if (!(h.z > pass.signature_threshold)) continue;
    SignatureFinding s = finding_of(h, pass, f);
    if (s.col == col && s.output == output) continue;
    out.push_back(std::move(s));
  }
  return out;
}

/// Where the strongest finding's K range is missing or counted twice in more than 8 columns and
/// a tenth of those tested, and each of the strongest columns reads the same range the same
/// way: how many of them (else 0). A split-K part dropped in every column read "column 41,
/// group 2 (k 128-191) missing", one column of 256 (an outside exporter's).
Index shared_range_columns(const SignatureEvidence& e, const std::vector<SignatureHit>& by_column,
                           const ReferencePass& pass, const ProjectionFacts& f) {
  if (e.fit || e.zero_point || e.strongest.empty()) return 0;
  const SignatureFinding& s = e.strongest.front();
  // The whole K missing or doubled is the whole dot product's reading (all-zero outputs, M 1).
  if (s.k_begin == 0 && s.k_end == f.info().k) return 0;
  const bool missing = range_missing(s);
  if (!(missing || range_doubled(s)) || e.significant_columns <= 8 || 10 * e.significant_columns < e.columns_tested) {
    return 0;
  }
  Index same = 0;
  for (const SignatureHit& h : by_column) {
    const SignatureFinding o = finding_of(h, pass, f);
    if (o.k_begin != s.k_begin || o.k_end != s.k_end || !(missing ? range_missing(o) : range_doubled(o))) return 0;
    ++same;
  }
  return same;
}

/// "k 128-191 missing in 256 of 256 output columns: ..." (range_columns > 0).
std::string describe_shared_range(const SignatureEvidence& e) {
  const SignatureFinding& s = e.strongest.front();
  const bool missing = range_missing(s);  // else counted twice (shared_range_columns)
  // Every column where all are significant, else those (one N tile's split-K part, 32 of 256).
  const bool every = e.significant_columns >= e.columns_tested;
  return detail::range_text(s.k_begin, s.k_end, -1) + (missing ? " missing" : " counted twice") + " in " +
         std::to_string(e.significant_columns) + " of " + std::to_string(e.columns_tested) +
         " output columns, and each of the " + std::to_string(e.range_columns) + " strongest fits " +
         (missing ? "0x" : "2x") + " that range's exact contribution (" + s.output + " column " +
         std::to_string(s.col) + ": z = " + format_short(s.z) + "): the kernel " + (missing ? "drops" : "adds twice") +
         " those K terms " + (every ? "in every column" : "in those columns") +
         " (a split-K part or a tile), or x's columns there are not the ones it used";
}

/// "; and in 1 other column: y_unpacked column 20, the whole dot product 1.01x (z = 15.1)".
std::string others_text(const std::vector<SignatureFinding>& others, Index k) {
  if (others.empty()) return std::string();
  std::string s =
      "; and in " + std::to_string(others.size()) + " other column" + (others.size() == 1 ? "" : "s") + ": ";
  for (std::size_t i = 0; i < others.size(); ++i) {
    const SignatureFinding& o = others[i];
    if (i > 0) s += ", ";
    s += o.output + " column " + std::to_string(o.col) + ", " +
         (o.k_begin == 0 && o.k_end == k ? std::string("the whole dot product")
                                         : detail::range_text(o.k_begin, o.k_end, o.group)) +
         " " + format_scale(1 + o.fit) + "x (z = " + format_short(o.z) + ")";
  }
  return s;
}

}  // namespace

std::string describe_signature(const SignatureFinding& s, const ProjectionInfo& info) {
  const Index k = info.k;
  const std::string where = s.output + " column " + std::to_string(s.col) + ", ";
  // A range dropped outright fits 1 + fit of order 1e-8 (the fit's own rounding): "0x".
  const double times = std::fabs(1 + s.fit) < 5e-5 ? 0.0 : 1 + s.fit;
  // Within 1e-3 of 1 with digits enough to show how far: a range x 1.0005 read "fit 1x".
  const std::string size = format_scale(times);
  const bool scaled_group = s.group >= 0 && contribution_is_scaled(info, s.col);
  const std::string range = detail::range_text(s.k_begin, s.k_end, s.group);
  std::string what;
  if (s.k_begin == 0 && s.k_end == k) {
    what = where + "the whole dot product: the outputs fit " + size +
           (s.one_row ? "x their exact values (a wrong per-channel scale, or a wrong scale of the output; over one row "
                        "a fault of any K range, a group's scale or a dropped range, reads the same)"
                      : "x their exact values (a wrong per-channel scale, or a wrong scale of the output)");
  } else if (range_missing(s)) {
    what = where + range + " missing: the outputs fit " + size + "x that range's exact contribution";
  } else if (range_doubled(s)) {
    what = where + range + (scaled_group ? " counted twice, or its scale doubled" : " counted twice") +
           ": the outputs fit " + size + "x that range's exact contribution";
  } else if (scaled_group) {
    what = where + range + ": the residuals fit a scale of " + size + "x the dumped scale";
  } else if (s.group >= 0) {
    what = where + range + ": the outputs fit " + size +
           "x that group's exact contribution (a wrong scale or bias of the group: an affine group's "
           "contribution holds its bias terms, which a scale error leaves alone)";
  } else {
    what = where + range + ": the outputs fit " + size + "x that range's exact contribution";
  }
  return what + " (z = " + format_short(s.z) + ")";
}

std::string describe_location(const SignatureEvidence& e, const ProjectionInfo& info) {
  if (e.fit) return detail::describe_fit(*e.fit, info);
  if (e.range_columns > 0) return describe_shared_range(e);
  return e.zero_point ? detail::describe_zero_point(*e.zero_point) : describe_signature(e.strongest.front(), info);
}

std::string describe_location_short(const SignatureEvidence& e) {
  if (e.fit) {
    const LocationFit& t = *e.fit;
    if (t.kind == FitKind::kRow || t.kind == FitKind::kRows) return detail::describe_row(t);
    if (t.kind == FitKind::kElement) return detail::describe_row(t) + ", column " + std::to_string(t.col);
    if (t.kind == FitKind::kElements) return detail::describe_values(t);
    if (t.kind == FitKind::kScaleBlock) return detail::describe_block(t);
    if (t.kind == FitKind::kRange) {
      return detail::range_text(t.k_begin, t.k_end, -1) + " in " + std::to_string(t.columns) + " " + t.output +
             (t.columns == 1 ? " column" : " columns");
    }
    return t.output + " column " + std::to_string(t.col);
  }
  if (e.zero_point) return e.zero_point->output + " column " + std::to_string(e.zero_point->col);
  if (e.range_columns > 0) {
    const SignatureFinding& s = e.strongest.front();
    return detail::range_text(s.k_begin, s.k_end, -1) + " in " + std::to_string(e.significant_columns) +
           " output columns";
  }
  return e.strongest.front().output + " column " + std::to_string(e.strongest.front().col);
}

std::string location_output(const SignatureEvidence& e) {
  if (e.fit) return e.fit->output;
  if (e.zero_point) return e.zero_point->output;
  return e.strongest.empty() ? std::string() : e.strongest.front().output;
}

bool signature_localizes(const SignatureEvidence& e) {
  if (e.fit || e.zero_point) return true;
  if (!e.strongest.empty() && (range_missing(e.strongest.front()) || range_doubled(e.strongest.front()))) return true;
  // At most 1 % of the columns: a narrower accumulator's noise reaches every column alike; a
  // wrong scale of one group reached 1 of 768 in the outside exporter's W8A8 dump, which
  // variance alone read as 5.3 bits lost.
  return e.significant_columns > 0 && 100 * e.significant_columns <= e.columns_tested;
}

bool signature_spread(const SignatureEvidence& e) {
  // More than the 8 columns others_text can name, and a tenth of those tested: a truncating
  // f32 accumulator reached 47 of 256 columns, a 16-bit one rounding to nearest 250 of 256.
  return !signature_localizes(e) && e.significant_columns > 8 && 10 * e.significant_columns >= e.columns_tested;
}

std::optional<CheckResult> signature_check(const ProjectionFacts& f, const ReferencePass& pass) {
  const ProjectionInfo& info = f.info();
  if (pass.signature.empty()) return std::nullopt;
  const std::string id = projection_check_id(info, CheckKind::kSignature);
  const std::string subject = "projections/" + info.name;
  if (const std::string why = residual_model_blocker(f, pass.summary.biased_rounding); !why.empty()) {
    return skipped(id, subject, CheckKind::kSignature, why);
  }
  SignatureEvidence e;
  e.alpha = kResidualAlpha;
  e.tile = pass.tile;
  e.ranges_per_column = static_cast<Index>(pass.ranges.size());
  e.threshold = pass.signature_threshold;
  std::vector<SignatureHit> all;
  detail::SignatureColumns columns;
  std::vector<SignatureHit> by_column;  // the strongest columns over every output
  for (EngineOutputId o : kAllEngineOutputs) {
    const SignatureTally& t = pass.signature[static_cast<std::size_t>(o)];
    columns.significant[static_cast<std::size_t>(o)] = t.significant_columns;
    if (!t.strongest_columns.empty()) columns.top[static_cast<std::size_t>(o)] = t.strongest_columns.front().col;
    for (const SignatureHit& h : t.strongest_columns) {
      if (h.z > pass.signature_threshold) columns.significant_kept[static_cast<std::size_t>(o)].push_back(h.col);
    }
    for (const SignatureHit& h : t.strongest_columns) keep_strongest_column(by_column, h);
    e.candidates += t.candidates;
    e.significant += t.significant;
    e.significant_columns += t.significant_columns;
    e.columns_as_unpacked += t.columns_as_unpacked;
    e.columns_tested += t.columns_tested;
    e.columns_screened += t.columns_screened;
    e.columns_untested += t.columns_untested;
    e.screened_max = std::max(e.screened_max, t.screened_max);
    e.z.merge(t.z);
    all.insert(all.end(), t.strongest.begin(), t.strongest.end());
  }
  // Columns whose partial dots leave the range they are computed in: no candidate of theirs
  // is counted, and the reason says so.
  const std::string untested =
      e.columns_untested == 0
          ? std::string()
          : "; " + std::to_string(e.columns_untested) + " column" + (e.columns_untested == 1 ? "" : "s") +
                " not tested (partial dots beyond the range of f32 or f64: bound and variance test their values)";
  if (e.candidates == 0) {
    return skipped(id, subject, CheckKind::kSignature,
                   e.columns_untested > 0 ? "no candidate could be tested" + untested
                                          : "no output value has a residual to test (no finite value)");
  }
  std::sort(all.begin(), all.end(), stronger);
  for (const SignatureHit& h : by_column) columns.strongest.push_back(h.col);
  for (std::size_t i = 0; i < all.size() && i < SignatureTally::kKeep; ++i) {
    e.strongest.push_back(finding_of(all[i], pass, f));
  }
  CheckResult r = projection_check(info, CheckKind::kSignature);
  // The threshold is shared out over every candidate the test could have run; where it ran
  // fewer (a packed column equal to y_unpacked's, one live row, partial dots out of range) it
  // is set for more than were run, and the reason says so.
  const auto planned = static_cast<Index>(pass.signature_planned);
  const std::string odds = "threshold " + format_short(e.threshold) +
                           (planned > e.candidates ? " set for " + std::to_string(planned) + " candidates, " +
                                                         std::to_string(e.candidates) + " of them run"
                                                   : " over " + std::to_string(e.candidates) + " candidates") +
                           ", false-alarm probability <= 1e-9";
  if (e.significant > 0) {
    const SignatureFinding& s = e.strongest.front();
    detail::localize(f, e, columns);
    e.others = other_columns(e, by_column, pass, f);
    e.range_columns = shared_range_columns(e, by_column, pass, f);
    r.verdict = Verdict::kFail;
    // Spread over the columns, the strongest candidate is no location: it is named as the
    // strongest, beside what such a spread is.
    r.reason = signature_spread(e)
                   ? "no single location: candidates beyond the threshold in " + std::to_string(e.significant_columns) +
                         " of " + std::to_string(e.columns_tested) +
                         " output columns, a spread the kernel's rounding leaves (noise above the "
                         "declared accumulator's, or a lean, which variance and bias test) or a fault "
                         "of many columns, such as one segment's or one tile's (the strongest: " +
                         describe_location(e, info) + ")"
                   : describe_location(e, info) + others_text(e.others, info.k);
    r.reason += "; " + std::to_string(e.significant) + " candidate" + (e.significant == 1 ? "" : "s") + " in " +
                std::to_string(e.significant_columns) + " output column" + (e.significant_columns == 1 ? "" : "s") +
                " beyond the " + odds + untested;
    r.first_failure = Location{s.output, -1, s.col};
  } else {
    const std::string screened = std::to_string(e.columns_screened) + " column" + (e.columns_screened == 1 ? "" : "s") +
                                 " screened (every z at most " + format_short(e.screened_max) + ")";
    r.reason = "no column's residuals carry a fault's signature: " +
               (e.strongest.empty() ? screened
                                    : "largest z " + format_short(e.strongest.front().z) +
                                          (e.columns_screened > 0 ? ", " + screened : std::string())) +
               " (" + odds + ")" + untested;
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
