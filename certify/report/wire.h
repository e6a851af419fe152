// This header defines how check results travel between processes (a campaign's isolated
// workers, MPI ranks, its journal): as JSON that carries everything a result holds, its evidence
// typed (evidence_wire.h), so the report assembled from them is byte-identical, in every format,
// to the one the checks' own command writes, and code after the wire inspects the evidence the
// checks computed (std::get_if<BoundEvidence> works on a result that crossed it).
//
// A check on the wire:
//   {"id", "subject", "kind", "verdict", "reason", "details", "always_show_details",
//    "first_failure" (when set), "evidence": {"type": <alternative>, <every member>}}
// Strings are made valid UTF-8 on the way (utf8_repaired), as every renderer escapes them anyway.
// The form is versioned (kWireVersion) because the campaign journal stores it on disk.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "certify/report/report.h"

namespace ncert::certify {

/// The wire form's version, recorded in the campaign journal's first line: a journal of another
/// version is refused before any of its results is read (certify/campaign/journal.cc).
///   1  evidence as the JSON `stats` it rendered to where it ran, untyped (journals without "wire")
///   2  typed evidence, every member (evidence_wire.h)
///   3  walk evidence with its diagnosis (2026-12-03) and each output's row and column span of
///      the values that differ (2026-12-04): version 2 journals lack those members
///   4  quantize evidence with its first non-finite x (2026-12-04)
///   5  location fits of several rows (FitKind::kRows, LocationFit::rows) and the bound's
///      rows_outside / rows_held (2026-12-05)
///   6  each declaration trial's effect (TrialEffect: moves the centres, widens B, or moves the
///      output rounding) and the values the variance test left to bound (2026-12-06)
///   7  location fits of several values (FitKind::kElements, FittedRow::col) and the values a
///      declaration trial left to bound (DeclarationTrial::left) (2026-12-06)
///   8  the values far off the rounding noise a residual diagnosis's trial left out
///      (DeclarationTrial::far) (2026-12-06)
///   9  the bound's values outside in the output its rows_outside / rows_held are read from
///      (BoundEvidence::rows_values) (2026-12-06)
///  10  bias's rows of the values beyond, the rows each output holds, and whether they lie in
///      one row beyond chance, and whether it dominates (BiasOutput::row_min, row_max,
///      rows_held, one_row, row_dominates); a diagnosis
///      trial that locates a fault (TrialEffect::kLocatesFault: one input channel's scale);
///      whether the bound's rows outside all dominate (BoundEvidence::rows_dominant)
///      (2026-12-06)
///  11  the bound's rows outside read per row of x, not per cell of its grid, and named where
///      at most 8 hold any (BoundEvidence::rows_named); signature's columns whose partial dots
///      leave f32's or f64's range (SignatureEvidence::columns_untested); whether a signature
///      finding's column held one live row (SignatureFinding::one_row); whether the values outside
///      the bound lie in other rows of other outputs too (BoundEvidence::rows_elsewhere)
///      (2026-12-06)
///  12  the declaration's residual lean on the diagnosis sample (DeclarationTrial::lean)
///      (2026-12-06)
///  13  location fits of a scale shared by several columns (FitKind::kScaleBlock,
///      LocationFit::col_begin, col_end, scale_row); the strongest candidate of each other
///      significant column (SignatureEvidence::others) (2026-12-07)
///  14  the variance lean over the residuals' own spread (VarianceOutput::spread_z,
///      spread_limit, away_from_zero); the columns signature tested and those sharing a
///      missing K range (SignatureEvidence::columns_tested, range_columns) (2026-12-07)
///  15  location fits of a K range missing or counted twice at any alignment (FitKind::kRange)
///      (2026-12-07)
///  16  a row's zero points moved over one part of K (FittedRow::offset, steps, and the other
///      reading alike: alike, alike_group, alike_value; LocationFit::offset, steps) (2026-12-07)
///  17  rows named by the pooled test (LocationFit::pooled, chance_share, fits), and bound's
///      location from it (BoundEvidence::location) (2026-12-07)
inline constexpr int kWireVersion = 17;

/// One check as JSON: every member, the evidence typed (evidence_to_wire).
Json check_to_wire(const CheckResult& check);
/// The check back (kInvalidArgument naming the field when the JSON is not one).
Result<CheckResult> check_from_wire(const Json& wire);

Json checks_to_wire(const std::vector<CheckResult>& checks);
Result<std::vector<CheckResult>> checks_from_wire(const Json& wire);

/// A whole report as JSON (checks in wire form, inputs, stats, extra, error, preamble) and back.
Json report_to_wire(const Report& report);
Result<Report> report_from_wire(const Json& wire);

/// A Status as JSON {code, message, detail} and back (into *out; kInvalidArgument if malformed).
Json status_to_wire(const Status& status);
Status status_from_wire(const Json& wire, Status* out);

/// Every string and key of `j` made valid UTF-8 (invalid bytes as \xNN text), so it can be
/// dumped: the renderers escape the same way, so nothing changes on the way.
Json utf8_repaired(Json j);

}  // namespace ncert::certify
