// Where a failing signature test's fault is, when a structure its candidates do not model
// explains it better than any scale: one row of the activations or a few (each by its own
// scale), one value, a column's bias, one group's weights moved by a constant (a zero point, an
// affine bias), another column's values (weight rows or outputs exchanged). The candidates are
// scales of K ranges of one column; these faults reach them only approximately, and the
// strongest candidate then names a scale somewhere else (docs/detection.md "Where the fault
// is").
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "certify/projection/checks.h"

namespace ncert::certify::detail {

/// What the signature pass knows beyond the evidence: per engine output (report order), the
/// (output, column) pairs with a significant candidate, the column of its strongest candidate
/// (-1: none) and the significant columns among its strongest (up to SignatureTally::kKeep,
/// strongest first: all of them where `significant` is no more); the columns of the strongest
/// candidates over every output, one per column, strongest first (up to kKeep).
struct SignatureColumns {
  std::array<Index, kEngineOutputs> significant{};
  std::array<Index, kEngineOutputs> top{-1, -1, -1};
  std::array<std::vector<Index>, kEngineOutputs> significant_kept;
  std::vector<Index> strongest;
};

/// Tests the strongest candidate's column of its output (y_unpacked, or y_packed / y_compact for
/// a fault of the packed path alone) for holding another column's exact values (the columns
/// beside it and `columns.strongest`), and sets e.fit where one does; else fits it by least
/// squares over the rows it holds, by one
/// row alone, a constant, each group's weights offset, each group's scale and the column's
/// scale, and sets e.zero_point or e.fit where one of the first three (not a scale) explains at
/// least half the residual energy and leaves at most a quarter of what the best other leaves;
/// a row is then tested in up to 64 other columns of that output (row, or element where
/// `significant` allows one value only). Where a few rows stand out in that column and the
/// test names neither, and every significant column is of that output and kept (at most 8),
/// each of those columns is fitted in turn: a few values (elements, 2 to 8 in all), where each
/// column's energy lies in a few rows alone and none of those rows stands out in any other
/// column tested. Where that names no row, K range, copied column or shared scale, the pooled
/// test fits each row over up to 1,024 other columns (the significant ones kept left out), its
/// residuals weighted by its own rounding noise, and names the rows (1 to 8, a quarter at
/// most) whose fit explains more of their energy than noise reaches with probability 1e-9
/// over every fit (a row's activation fault under bf16 outputs, a fraction of a spacing in
/// each column). Sets nothing without e.strongest or with fewer than 4 finite rows. Runs on a
/// failure only: M x K products per column fitted.
void localize(const ProjectionFacts& f, SignatureEvidence& e, const SignatureColumns& columns);

/// The pooled test over y_unpacked, every column in (none significant to leave out): for a
/// bound failure whose values outside lie in a few rows where signature fails on no column (a
/// row x 1.01 of 16 under bf16 outputs moves each value 2-3 spacings, beyond B, and stands out
/// in no column's K ranges). col is -1. Runs on a failure only.
std::optional<LocationFit> locate_rows(const ProjectionFacts& f);

std::string describe_zero_point(const ZeroPointFinding& z);
/// A row fit's row: "y_unpacked row 5", "y_packed row 5 (slot 3)", "y_compact slot 3 (row 5)".
std::string describe_row(const LocationFit& t);
/// A values fit's values: "y_unpacked row 9 column 70 and row 9 column 2".
std::string describe_values(const LocationFit& t);
/// A shared scale's columns and K range (FitKind::kScaleBlock): "y_unpacked columns 128-255,
/// group 2 (k 256-383)".
std::string describe_block(const LocationFit& t);
std::string describe_fit(const LocationFit& t, const ProjectionInfo& info);

}  // namespace ncert::certify::detail
