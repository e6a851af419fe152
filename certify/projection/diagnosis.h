// This header defines the declaration diagnosis of a projection whose `bound` check fails
// broadly: the likely declaration mistakes (another accumulator, output rounding, dequantization,
// dequant_op or nibble order, activations rounded to bf16 or f16 before the kernel, weights
// transposed) re-tested on a sample of rows and columns, each reported with how many sampled
// engine values its intervals hold. A trial that holds every sampled value while the declaration
// does not is named in the failure: "the data fits dequant = output for segment kv".
#pragma once

#include <vector>

#include "certify/projection/checks.h"
#include "certify/report/evidence.h"

namespace ncert::certify {

/// Rows and columns of the sample (the first ones: the outputs of y_unpacked there).
inline constexpr Index kDiagnosisRows = 8;
inline constexpr Index kDiagnosisCols = 256;
/// A bound failure is broad when at least this share of the values is outside (a wrong
/// declaration moves most outputs; a real kernel fault may move a few).
inline constexpr double kDiagnosisShare = 0.01;

/// The declared model first, then every alternative tried; empty when there is nothing to sample
/// (no y_unpacked) or the reference cannot run on the sample.
std::vector<DeclarationTrial> diagnose_declarations(const ProjectionFacts& f, const CheckOptions& options);

}  // namespace ncert::certify
