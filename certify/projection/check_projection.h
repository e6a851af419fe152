// This header defines check_projection: load one /projections/<name> and run its checks in
// order (checks.h): geometry; identity; one reference pass feeding bound and walk; untouched;
// vacuity. identity, walk and untouched appear only when the dump holds what they compare. A
// check whose prerequisite failed (e.g. bound after a broken segment table) is a FAIL "not
// evaluated".
#pragma once

#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/projection/checks.h"
#include "certify/projection/reference_pass.h"

namespace ncert::certify {

struct ProjectionTiming {
  double read_seconds = 0;       ///< HDF5 reads
  double reference_seconds = 0;  ///< reference evaluation wall time (comparisons included)
  double compare_seconds = 0;    ///< comparison work inside it, per thread (CPU time / threads)
  double other_seconds = 0;      ///< identity and untouched scans
};

struct ProjectionOutcome {
  std::vector<CheckResult> checks;
  bool reference_evaluated = false;  ///< the reference pass ran (a block hook saw every block)
  ProjectionTiming timing;
};

/// Runs every check of one projection. `hook` (optional) also sees every reference block.
/// Errors only for read failures (the dump was validated).
/// `weights` and `cache` as load_projection's.
Result<ProjectionOutcome> check_projection(const DumpReader& reader, const ProjectionInfo& info,
                                           const CheckOptions& options, const BlockHook& hook = {},
                                           const WeightsSource* weights = nullptr, WeightsCache* cache = nullptr);

}  // namespace ncert::certify
