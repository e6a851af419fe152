// Internal to the sweep: the runner of each case kind (sweep.cc, sweep_guards.cc).
#pragma once

#include "packing/sweep.h"

namespace ncert::packing::detail {

/// A valid plan: packed equals unpacked on selected rows bit for bit, nothing else is touched.
CaseResult run_identity(const SweepCase& c, const ExecuteFn& helper);
/// A planted violation: refused with the expected guard code, no byte of any buffer touched
/// (unsupported plans instead fall back to the unpacked path).
CaseResult run_guard(const SweepCase& c, const ExecuteFn& helper);
/// Width buckets: one shared kernel, identical rows at every compiled width.
CaseResult run_width(const SweepCase& c);

}  // namespace ncert::packing::detail
