// This header defines the memory a projection's certification needs, computed from the dump's
// declared shapes before anything is read, so that --max-memory bounds the whole run: a dump
// that declares more than the budget allows is refused up front with the figure, instead of
// growing until the allocator or the kernel stops it.
#pragma once

#include <cstdint>

#include "certify/io/dump_model.h"
#include "reference/status.h"

namespace ncert::certify {

/// Peak bytes held while one projection is certified with `threads` threads and reference
/// blocks of `block_cols` columns: its members read whole, the activations in the reference's
/// three forms, the per-thread block scratch, and the per-element facts of the comparisons.
/// `weights_elsewhere`: the bytes of weights read from a weights dump (a projection that omits
/// its own, docs/dump-format.md §4.5).
std::uint64_t projection_peak_bytes(const DumpModel& model, const ProjectionInfo& info, int threads, Index block_cols,
                                    std::uint64_t weights_elsewhere = 0);

/// kMemoryLimit naming the projection, its shapes and the figure when projection_peak_bytes
/// exceeds `budget` (projections are certified one at a time, so each must fit alone).
Status check_projection_memory(const DumpModel& model, const ProjectionInfo& info, int threads, Index block_cols,
                               std::uint64_t budget, std::uint64_t weights_elsewhere = 0);

}  // namespace ncert::certify
