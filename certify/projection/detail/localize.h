// Where a failing signature test's fault is, when a structure its candidates do not model
// explains it better than any scale: one row of the activations, one value, a column's bias, one
// group's weights moved by a constant (a zero point, an affine bias). The candidates are scales
// of K ranges of one column; these faults reach them only approximately, and the strongest
// candidate then names a scale somewhere else (docs/detection.md "Where the fault is").
#pragma once

#include <string>

#include "certify/projection/checks.h"

namespace ncert::certify::detail {

/// Fits the strongest candidate's column of y_unpacked, by least squares over its rows, by one
/// row alone, a constant, each group's weights offset, each group's scale and the column's
/// scale, and sets e.zero_point or e.fit where one of the first three (not a scale) explains at
/// least half the residual energy and leaves at most a quarter of what the best other leaves;
/// a row is then tested in up to 64 other columns (row or element). Requires e.strongest; sets
/// nothing without y_unpacked or with fewer than 4 finite rows. Runs on a failure only: M x K
/// products per column fitted.
void localize(const ProjectionFacts& f, SignatureEvidence& e);

std::string describe_zero_point(const ZeroPointFinding& z);
std::string describe_fit(const LocationFit& t, const ProjectionInfo& info);

}  // namespace ncert::certify::detail
