// Where a failing signature test's fault is, when a structure its candidates do not model
// explains it better than any scale: one row of the activations or a few (each by its own
// scale), one value, a column's bias, one group's weights moved by a constant (a zero point, an
// affine bias), another column's values (weight rows or outputs exchanged). The candidates are
// scales of K ranges of one column; these faults reach them only approximately, and the
// strongest candidate then names a scale somewhere else (docs/detection.md "Where the fault
// is").
#pragma once

#include <array>
#include <string>
#include <vector>

#include "certify/projection/checks.h"

namespace ncert::certify::detail {

/// What the signature pass knows beyond the evidence: per engine output (report order), the
/// (output, column) pairs with a significant candidate, and the column of its strongest
/// candidate (-1: none); the columns of the strongest candidates, one per column, strongest
/// first (up to SignatureTally::kKeep).
struct SignatureColumns {
  std::array<Index, kEngineOutputs> significant{};
  std::array<Index, kEngineOutputs> top{-1, -1, -1};
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
/// `significant` allows one value only). Sets nothing without e.strongest or with fewer than 4
/// finite rows. Runs on a failure only: M x K products per column fitted.
void localize(const ProjectionFacts& f, SignatureEvidence& e, const SignatureColumns& columns);

std::string describe_zero_point(const ZeroPointFinding& z);
/// A row fit's row: "y_unpacked row 5", "y_packed row 5 (slot 3)", "y_compact slot 3 (row 5)".
std::string describe_row(const LocationFit& t);
std::string describe_fit(const LocationFit& t, const ProjectionInfo& info);

}  // namespace ncert::certify::detail
