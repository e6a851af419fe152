// This header defines the six checks of one /projections/<name> (issue "ncert check"):
//   geometry   the dump's plan passes the packing host guards (the guard code on failure)
//   identity   y_packed == y_unpacked on selected rows, y_compact scattered == y_packed (bits)
//   bound      every engine output inside the reference interval of every element
//   walk       every engine output equals the emulated k_walk bit for bit (when declared)
//   untouched  unselected rows and padding columns of y_packed equal y_before (when present)
//   vacuity    the projection proves something (selected rows, nonzero data, an output)
// identity, walk and untouched appear only when the dump holds what they compare. A check whose
// prerequisite failed (e.g. bound after a broken segment table) is a FAIL "not evaluated".
#pragma once

#include <functional>
#include <vector>

#include "certify/dump_reader.h"
#include "certify/projection_data.h"
#include "certify/report.h"
#include "reference/linear.h"

namespace ncert::certify {

struct CheckOptions {
  double lambda = 10.0;        ///< probabilistic tier multiplier
  bool strict = false;         ///< fail on values beyond the probabilistic tier too
  bool allow_vacuous = false;  ///< a projection that proves nothing passes (reported as such)
  reference::ReferenceOptions reference;
};

struct ProjectionTiming {
  double read_seconds = 0;       ///< HDF5 reads
  double reference_seconds = 0;  ///< reference evaluation wall time (comparisons included)
  double compare_seconds = 0;    ///< comparison work inside it, per thread (CPU time / threads)
  double other_seconds = 0;      ///< identity and untouched scans
};

/// Extra per-block consumer of the reference (the logits witness uses it to bound lm_head
/// outputs). Called concurrently for distinct blocks.
using BlockHook = std::function<void(const reference::ReferenceBlock&)>;

/// Runs every check of one projection. `hook` (optional) also sees every reference block.
/// Errors only for read failures (the dump was validated).
Result<std::vector<CheckResult>> check_projection(const DumpReader& reader,
                                                  const ProjectionInfo& info,
                                                  const CheckOptions& options,
                                                  ProjectionTiming* timing,
                                                  const BlockHook& hook = {});

}  // namespace ncert::certify
