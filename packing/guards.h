// This header defines the host guards of the packing helper: validate(plan, buffers) checks
// everything before any byte is touched and returns a specific, stable 3xx ErrorCode with the
// numbers. Checks run in a fixed, documented order (docs/packing.md):
//   1 plan shape      R, B, cap, P within limits and consistent        kGuardPlanShape
//   2 support matrix  format/epilogue/output combinations, model-wide  kGuardUnsupported
//   3 walk split      split:<P> / splitk:<S> with K % P or K % S != 0  kGuardWalkSplit
//   4 segment table   gaps, overlaps, wrong total                      kGuardSegmentTable
//   5 AF4 geometry    group size divides K, codes/scales shapes        kGuardAf4Geometry
//   6 strides         stride >= valid width (input, output, compact)   kGuardStrideBelowWidth
//   7 slots           committed rows fit the P slots                   kGuardTooFewSlots
//   8 selector rows   in [-1, M)                                       kGuardRowOutOfRange
//   9 duplicates      one slot per original row                        kGuardDuplicateRow
//  10 cap             per request, selector count and commit <= cap    kGuardCapExceeded
//  11 commits         commit count == selector count per request       kGuardCommitMismatch
//  12 prefix          selected rows are the request's first c rows     kGuardNotPrefix
//  13 extents         buffers and scratch long enough                  kGuardExtentTooSmall
//  14 alignment       16-byte aligned bases                            kGuardMisaligned
//  15 aliasing        out overlapping x                                kGuardOutputAliasesInput
//  16 overlap         any other overlap involving a written buffer,   kGuardPartialOverlap
//                     except out == residual exactly (in place)
// The combination check comes before any per-request (cap) check: an unsupported model is
// rejected for every call, not only for the calls whose commits happen to reach it.
#pragma once

#include "packing/pack_plan.h"
#include "reference/status.h"

namespace ncert::packing {

/// The plan alone (checks 1-12).
Status validate_plan(const PackPlan& plan);
/// Plan and buffers (checks 1-16), in order; the first violation wins.
Status validate(const PackPlan& plan, const HostBuffers& buffers);
/// Checks 3-5 (walk split, segment table, AF4 geometry) and K, N >= 1: whether a reference
/// of this projection can be computed at all, whatever the selector says.
Status validate_weights(const PackPlan& plan);
/// Checks 8-9: every selector entry in [-1, M) and no row twice, so slots map to rows.
Status validate_selector_rows(const PackPlan& plan);
/// What the unpacked path needs of the buffers (x, out, residual, bias: extents, alignment,
/// aliasing); used for the fallback of an unsupported plan.
Status validate_unpacked(const PackPlan& plan, const HostBuffers& buffers);

}  // namespace ncert::packing
