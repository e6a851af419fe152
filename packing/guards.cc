#include "packing/guards.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace ncert::packing {

using reference::Af4Packing;
using reference::Af4Variant;
using reference::Dequant;
using reference::WeightFormat;

std::size_t extent_bytes(Index rows, Index stride, Index width, DType t) {
  if (rows <= 0 || width <= 0) return 0;
  return static_cast<std::size_t>((rows - 1) * stride + width) * static_cast<std::size_t>(dtype_size(t));
}

std::vector<std::int32_t> canonical_selector(Index block_rows, const std::vector<std::int32_t>& commits, Index slots) {
  std::vector<std::int32_t> sel(static_cast<std::size_t>(slots), -1);
  std::size_t p = 0;
  for (std::size_t r = 0; r < commits.size(); ++r) {
    for (std::int32_t i = 0; i < commits[r] && p < sel.size(); ++i) {
      sel[p++] = static_cast<std::int32_t>(static_cast<Index>(r) * block_rows + i);
    }
  }
  return sel;
}

namespace {

std::string n2s(Index v) { return std::to_string(v); }

Status fail(ErrorCode code, std::string msg) { return Status(code, std::move(msg)); }

bool float_dtype(DType t) { return t == DType::kF32 || t == DType::kBf16 || t == DType::kF16; }

// 1. The geometry of the call itself.
Status check_plan_shape(const PackPlan& p) {
  if (p.requests < 1 || (p.helper_limits && p.requests > kMaxRequests)) {
    return fail(ErrorCode::kGuardPlanShape,
                "requests R = " + n2s(p.requests) +
                    (p.helper_limits ? " outside [1, " + n2s(kMaxRequests) + "]" : std::string(" < 1")));
  }
  if (p.block_rows < 1) return fail(ErrorCode::kGuardPlanShape, "block_rows B = " + n2s(p.block_rows) + " < 1");
  if (p.request_rules && (p.cap < 0 || p.cap > kMaxCap || p.cap > p.block_rows)) {
    return fail(ErrorCode::kGuardPlanShape,
                "cap = " + n2s(p.cap) + " outside [0, min(" + n2s(kMaxCap) + ", B = " + n2s(p.block_rows) + ")]");
  }
  if (p.slots < 0 || static_cast<Index>(p.selector.size()) != p.slots) {
    return fail(ErrorCode::kGuardPlanShape, "selector has " + n2s(static_cast<Index>(p.selector.size())) +
                                                " entries for P = " + n2s(p.slots) + " slots");
  }
  if (static_cast<Index>(p.commit_counts.size()) != p.requests) {
    return fail(ErrorCode::kGuardPlanShape, "commit_counts has " + n2s(static_cast<Index>(p.commit_counts.size())) +
                                                " entries for R = " + n2s(p.requests));
  }
  if (p.k < 1 || p.n < 1) {
    return fail(ErrorCode::kGuardPlanShape, "K = " + n2s(p.k) + ", N = " + n2s(p.n) + ": both must be >= 1");
  }
  return Status();
}

// 2. What the packed helper can run at all. Checked over the whole model before any request's
// commits are looked at, so whether a call is packed never depends on which rows it carries.
Status check_support(const PackPlan& p) {
  if (!float_dtype(p.x_dtype) || !float_dtype(p.output)) {
    return fail(ErrorCode::kGuardUnsupported, "activations and outputs must be f32, bf16 or f16 (x " +
                                                  std::string(dtype_name(p.x_dtype)) + ", output " +
                                                  std::string(dtype_name(p.output)) + ")");
  }
  if (reference::has_bias(p.epilogue) && !float_dtype(p.bias_dtype)) {
    return fail(ErrorCode::kGuardUnsupported, "bias must be f32, bf16 or f16");
  }
  if (reference::has_residual(p.epilogue)) {
    if (!float_dtype(p.residual_dtype)) {
      return fail(ErrorCode::kGuardUnsupported, "residual must be f32, bf16 or f16");
    }
    if (p.residual_at == reference::ResidualAt::kOutput && p.residual_dtype != p.output) {
      // "Added after rounding, in the output type" is only defined for a residual already in
      // that type; converting it would add a rounding the engine does not declare.
      return fail(ErrorCode::kGuardUnsupported, "residual_at = output needs the residual in the output type (" +
                                                    std::string(dtype_name(p.output)) + "), got " +
                                                    std::string(dtype_name(p.residual_dtype)));
    }
  }
  for (const SegmentGeometry& s : p.segments) {
    if (s.format == WeightFormat::kAf4 && s.af4.dequant == Dequant::kFolded && p.walk.declared) {
      return fail(ErrorCode::kGuardUnsupported,
                  "segment " + s.name + ": k_walk " + p.walk.name +
                      " is not defined for AF4 dequant = folded (the folded kernel has its own "
                      "per-group order)");
    }
    if (reference::is_scaled_format(s.format) && s.scaled.dequant == Dequant::kFolded && p.walk.declared) {
      return fail(ErrorCode::kGuardUnsupported, "segment " + s.name + ": k_walk " + p.walk.name +
                                                    " is not defined for dequant = folded (the folded kernel "
                                                    "scales each group's sum)");
    }
  }
  return Status();
}

// 3. A declared split must cut K into equal parts.
Status check_walk(const PackPlan& p) {
  if (p.walk.declared && !p.walk.divides(p.k)) {
    return fail(ErrorCode::kGuardWalkSplit, reference::walk_split_message(p.walk, p.k));
  }
  return Status();
}

// 4. Segments must tile [0, N): a gap leaves outputs uncomputed, an overlap computes twice.
Status check_segments(const PackPlan& p) {
  if (p.segments.empty()) return fail(ErrorCode::kGuardSegmentTable, "no weight segments");
  std::vector<const SegmentGeometry*> s;
  for (const auto& g : p.segments) s.push_back(&g);
  std::sort(s.begin(), s.end(), [](auto* a, auto* b) { return a->row_begin < b->row_begin; });
  Index next = 0;
  for (const SegmentGeometry* g : s) {
    if (g->row_end <= g->row_begin) {
      return fail(ErrorCode::kGuardSegmentTable,
                  "segment " + g->name + " covers [" + n2s(g->row_begin) + ", " + n2s(g->row_end) + ")");
    }
    if (g->row_begin > next) {
      return fail(ErrorCode::kGuardSegmentTable, "gap: output columns [" + n2s(next) + ", " + n2s(g->row_begin) +
                                                     ") belong to no segment (next is " + g->name + ")");
    }
    if (g->row_begin < next) {
      return fail(ErrorCode::kGuardSegmentTable, "overlap: segment " + g->name + " starts at " + n2s(g->row_begin) +
                                                     " but columns up to " + n2s(next) + " are already covered");
    }
    next = g->row_end;
  }
  if (next != p.n) {
    return fail(ErrorCode::kGuardSegmentTable, "segments cover [0, " + n2s(next) + ") but N = " + n2s(p.n));
  }
  for (const SegmentGeometry* g : s) {
    if (g->format != WeightFormat::kAf4 && g->values_cols != p.k) {
      return fail(ErrorCode::kGuardSegmentTable,
                  "segment " + g->name + " has " + n2s(g->values_cols) + " columns, K = " + n2s(p.k));
    }
  }
  return Status();
}

// 5. AF4 and scaled groups must divide K and the codes/scales extents must match the packing.
Status check_af4(const PackPlan& p) {
  for (const SegmentGeometry& g : p.segments) {
    if (reference::is_scaled_format(g.format)) {
      // A scaled segment's grid: groups along K, blocks of scale_rows rows (docs/dump-format.md §4.6).
      const Index gs = g.scaled.group_size, sr = g.scaled.scale_rows, rows = g.row_end - g.row_begin;
      if (gs < 1 || p.k % gs != 0) {
        return fail(ErrorCode::kGuardAf4Geometry,
                    "segment " + g.name + ": group_size " + n2s(gs) + " does not divide K = " + n2s(p.k));
      }
      if (sr < 1) return fail(ErrorCode::kGuardAf4Geometry, "segment " + g.name + ": scale_rows " + n2s(sr) + " < 1");
      const Index want_rows = rows / sr + (rows % sr != 0);  // ceil, without overflow for huge sr
      if (g.scales_cols != p.k / gs || g.scales_rows != want_rows) {
        return fail(ErrorCode::kGuardAf4Geometry,
                    "segment " + g.name + ": scales are [" + n2s(g.scales_rows) + ", " + n2s(g.scales_cols) +
                        "], [ceil(rows/scale_rows), K/group_size] = [" + n2s(want_rows) + ", " + n2s(p.k / gs) + "]");
      }
      continue;
    }
    if (g.format != WeightFormat::kAf4) continue;
    const Index gs = g.af4.group_size;
    if (gs < 1 || p.k % gs != 0) {
      return fail(ErrorCode::kGuardAf4Geometry,
                  "segment " + g.name + ": group_size " + n2s(gs) + " does not divide K = " + n2s(p.k));
    }
    const bool u32 = g.af4.packing == Af4Packing::kU32Lsb;
    const Index per = u32 ? 8 : 2;
    if (p.k % per != 0 || g.codes_cols != p.k / per) {
      return fail(ErrorCode::kGuardAf4Geometry,
                  "segment " + g.name + ": codes have " + n2s(g.codes_cols) + " columns; " +
                      std::string(reference::af4_packing_name(g.af4.packing)) + " with K = " + n2s(p.k) + " needs K/" +
                      n2s(per) + (p.k % per ? " (K is not a multiple)" : " = " + n2s(p.k / per)));
    }
    if (g.scales_cols != p.k / gs) {
      return fail(ErrorCode::kGuardAf4Geometry, "segment " + g.name + ": scales have " + n2s(g.scales_cols) +
                                                    " columns, K/group_size = " + n2s(p.k / gs));
    }
    if (g.af4.variant == Af4Variant::kAffine && g.biases_cols != g.scales_cols) {
      return fail(ErrorCode::kGuardAf4Geometry, "segment " + g.name + ": biases have " + n2s(g.biases_cols) +
                                                    " columns, scales " + n2s(g.scales_cols));
    }
  }
  return Status();
}

// 6. A row stride below the valid width makes rows overlap: reads and writes of one row would
// hit the next.
Status check_strides(const PackPlan& p, bool packed) {
  NCERT_RETURN_IF_ERROR(reference::rows_hold_widths(p));  // x and the outputs, as the reference reads them
  struct S {
    const char* what;
    Index stride, width;
  };
  const S scratch[] = {{"compact input scratch", p.compact_in_stride, p.k},
                       {"compact output scratch", p.compact_out_stride, p.n}};
  for (const S& s : scratch) {
    if (packed && s.stride < s.width) {
      return fail(ErrorCode::kGuardStrideBelowWidth,
                  std::string(s.what) + " stride " + n2s(s.stride) + " < valid width " + n2s(s.width));
    }
  }
  if (reference::has_residual(p.epilogue) && p.residual_stride < p.n) {
    return fail(ErrorCode::kGuardStrideBelowWidth,
                "residual stride " + n2s(p.residual_stride) + " < valid width " + n2s(p.n));
  }
  return Status();
}

// 8-9. The slot owning each original row (-1: none), or the first row out of range / twice.
Result<std::vector<Index>> selector_owners(const PackPlan& p) {
  const Index M = p.rows();
  std::vector<Index> owner(static_cast<std::size_t>(std::max<Index>(M, 0)), -1);
  for (Index s = 0; s < static_cast<Index>(p.selector.size()); ++s) {
    const Index r = p.selector[static_cast<std::size_t>(s)];
    if (r < -1 || r >= M) {
      return fail(ErrorCode::kGuardRowOutOfRange,
                  "slot " + n2s(s) + " selects row " + n2s(r) + ", outside [-1, " + n2s(M) + ")");
    }
    if (r < 0) continue;
    if (owner[r] >= 0) {
      return fail(ErrorCode::kGuardDuplicateRow,
                  "row " + n2s(r) + " is selected by slots " + n2s(owner[r]) + " and " + n2s(s));
    }
    owner[r] = s;
  }
  return owner;
}

// 7-12. The selector and the commit counts: the two places where the cap is applied must agree.
Status check_selector(const PackPlan& p) {
  Index committed = 0;
  for (std::int32_t c : p.commit_counts) {
    if (c < 0) return fail(ErrorCode::kGuardCommitMismatch, "negative commit count " + n2s(c));
    committed += c;
  }
  if (committed > p.slots) {
    return fail(ErrorCode::kGuardTooFewSlots,
                "commit counts sum to " + n2s(committed) + " rows but only " + n2s(p.slots) + " physical slots");
  }
  NCERT_ASSIGN_OR_RETURN(const std::vector<Index> owner, selector_owners(p));
  if (!p.request_rules) return Status();
  for (Index q = 0; q < p.requests; ++q) {
    Index count = 0;
    for (Index i = 0; i < p.block_rows; ++i) count += owner[q * p.block_rows + i] >= 0;
    const Index commit = p.commit_counts[static_cast<std::size_t>(q)];
    if (count > p.cap) {
      return fail(ErrorCode::kGuardCapExceeded, "request " + n2s(q) + " gathers " + n2s(count) +
                                                    " rows (commit count " + n2s(commit) + ") but cap = " + n2s(p.cap));
    }
    // The commit count alone over the cap: said as such (the selector's count within it had
    // read "gathers 3 rows (commit count 4) but cap = 3").
    if (commit > p.cap) {
      return fail(ErrorCode::kGuardCapExceeded, "request " + n2s(q) + ": commit_counts says " + n2s(commit) +
                                                    " rows but cap = " + n2s(p.cap) + " (the selector gathers " +
                                                    n2s(count) + ")");
    }
    if (count != commit) {
      return fail(ErrorCode::kGuardCommitMismatch, "request " + n2s(q) + ": selector gathers " + n2s(count) +
                                                       " rows, commit_counts says " + n2s(commit));
    }
    for (Index i = 0; i < p.block_rows; ++i) {
      const bool selected = owner[q * p.block_rows + i] >= 0;
      if (selected != (i < count)) {
        return fail(ErrorCode::kGuardNotPrefix, "request " + n2s(q) + ": row " + n2s(q * p.block_rows + i) +
                                                    " (offset " + n2s(i) + ") is " +
                                                    (selected ? "selected" : "not selected") +
                                                    " but the committed prefix is " + n2s(count) + " rows");
      }
    }
  }
  return Status();
}

struct Range {
  const char* name;
  std::uintptr_t begin;
  std::uintptr_t end;
  bool written;
};

bool overlaps(const Range& a, const Range& b) {
  return a.begin < b.end && b.begin < a.end && a.begin != a.end && b.begin != b.end;
}

Status check_extent(const char* what, const void* ptr, std::size_t have, std::size_t need) {
  if (need > 0 && (ptr == nullptr || have < need)) {
    return fail(ErrorCode::kGuardExtentTooSmall, std::string(what) + " holds " + std::to_string(ptr ? have : 0) +
                                                     " bytes, the geometry needs " + std::to_string(need));
  }
  return Status();
}

Status check_buffers(const PackPlan& p, const HostBuffers& b, bool packed) {
  const Index M = p.rows();
  const bool bias = reference::has_bias(p.epilogue);
  const bool res = reference::has_residual(p.epilogue);
  // 13. Every byte the call touches must be inside the caller's buffers.
  NCERT_RETURN_IF_ERROR(check_extent("input x", b.x, b.x_bytes, extent_bytes(M, p.in_stride, p.k, p.x_dtype)));
  NCERT_RETURN_IF_ERROR(check_extent("output", b.out, b.out_bytes, extent_bytes(M, p.out_stride, p.n, p.output)));
  if (res) {
    NCERT_RETURN_IF_ERROR(check_extent("residual", b.residual, b.residual_bytes,
                                       extent_bytes(M, p.residual_stride, p.n, p.residual_dtype)));
  }
  if (bias) {
    NCERT_RETURN_IF_ERROR(check_extent("bias", b.bias, b.bias_bytes, extent_bytes(1, p.n, p.n, p.bias_dtype)));
  }
  if (packed) {
    NCERT_RETURN_IF_ERROR(check_extent("compact input scratch", b.compact_in, b.compact_in_bytes,
                                       extent_bytes(p.slots, p.compact_in_stride, p.k, p.x_dtype)));
    NCERT_RETURN_IF_ERROR(check_extent("compact output scratch", b.compact_out, b.compact_out_bytes,
                                       extent_bytes(p.slots, p.compact_out_stride, p.n, DType::kF32)));
  }
  std::vector<Range> ranges;
  auto add = [&](const char* name, const void* ptr, std::size_t bytes, bool written) {
    if (ptr == nullptr || bytes == 0) return;
    const auto a = reinterpret_cast<std::uintptr_t>(ptr);
    ranges.push_back({name, a, a + bytes, written});
  };
  add("input x", b.x, b.x_bytes, false);
  add("output", b.out, b.out_bytes, true);
  if (res) add("residual", b.residual, b.residual_bytes, false);
  if (bias) add("bias", b.bias, b.bias_bytes, false);
  if (packed) {
    add("compact input scratch", b.compact_in, b.compact_in_bytes, true);
    add("compact output scratch", b.compact_out, b.compact_out_bytes, true);
  }
  // 14. Misaligned bases would fault (or silently split) the kernel's 16-byte loads.
  for (const Range& r : ranges) {
    if (r.begin % kBufferAlignment != 0) {
      return fail(ErrorCode::kGuardMisaligned, std::string(r.name) + " at address " + std::to_string(r.begin) +
                                                   " is not " + std::to_string(kBufferAlignment) +
                                                   "-byte aligned (offset " +
                                                   std::to_string(r.begin % kBufferAlignment) + ")");
    }
  }
  const bool inplace = res && b.out == b.residual;
  if (inplace && (p.residual_stride != p.out_stride || p.residual_dtype != p.output)) {
    return fail(ErrorCode::kGuardPartialOverlap,
                "output and residual share a base but not stride/type (out stride " + n2s(p.out_stride) + " " +
                    std::string(dtype_name(p.output)) + ", residual stride " + n2s(p.residual_stride) + " " +
                    std::string(dtype_name(p.residual_dtype)) + "): in-place addition needs identical layouts");
  }
  // 15. Writing the output over the input would corrupt rows not yet read.
  const Range* out = nullptr;
  const Range* x = nullptr;
  for (const Range& r : ranges) {
    if (std::string(r.name) == "output") out = &r;
    if (std::string(r.name) == "input x") x = &r;
  }
  if (out && x && overlaps(*out, *x)) {
    return fail(ErrorCode::kGuardOutputAliasesInput,
                "output bytes [" + std::to_string(out->begin - x->begin) + ", " + std::to_string(out->end - x->begin) +
                    ") relative to x overlap the input x (" + std::to_string(x->end - x->begin) + " bytes)");
  }
  // 16. Any other overlap involving a written buffer, except exact in-place residual.
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    for (std::size_t j = i + 1; j < ranges.size(); ++j) {
      const Range& a = ranges[i];
      const Range& c = ranges[j];
      if (!(a.written || c.written) || !overlaps(a, c)) continue;
      const bool exact_inplace = inplace && ((std::string(a.name) == "output" && std::string(c.name) == "residual") ||
                                             (std::string(a.name) == "residual" && std::string(c.name) == "output"));
      if (exact_inplace) continue;
      return fail(ErrorCode::kGuardPartialOverlap,
                  std::string(a.name) + " and " + c.name + " overlap by " +
                      std::to_string(std::min(a.end, c.end) - std::max(a.begin, c.begin)) + " bytes");
    }
  }
  return Status();
}

// 5b. Activation groups (x_quant) must divide K: a last group of another width than its scale
// describes read as a `quantize` FAIL while `geometry` passed.
Status check_x_quant(const PackPlan& p) {
  if (p.x_quant.type != reference::XQuantType::kNone && (p.x_quant.group < 1 || p.k % p.x_quant.group != 0)) {
    return fail(ErrorCode::kGuardAf4Geometry,
                "x_quant_group " + n2s(p.x_quant.group) + " does not divide K = " + n2s(p.k));
  }
  return Status();
}

}  // namespace

Status validate_plan(const PackPlan& p) {
  NCERT_RETURN_IF_ERROR(check_plan_shape(p));
  NCERT_RETURN_IF_ERROR(check_x_quant(p));
  NCERT_RETURN_IF_ERROR(check_support(p));
  NCERT_RETURN_IF_ERROR(check_walk(p));
  NCERT_RETURN_IF_ERROR(check_segments(p));
  NCERT_RETURN_IF_ERROR(check_af4(p));
  NCERT_RETURN_IF_ERROR(check_strides(p, true));
  NCERT_RETURN_IF_ERROR(check_selector(p));
  return Status();
}

Status validate_weights(const PackPlan& p) {
  if (p.k < 1 || p.n < 1) {
    return fail(ErrorCode::kGuardPlanShape, "K = " + n2s(p.k) + ", N = " + n2s(p.n) + ": both must be >= 1");
  }
  NCERT_RETURN_IF_ERROR(check_walk(p));
  NCERT_RETURN_IF_ERROR(check_segments(p));
  return check_af4(p);
}

Status validate_selector_rows(const PackPlan& p) { return selector_owners(p).status(); }

Status validate(const PackPlan& p, const HostBuffers& b) {
  NCERT_RETURN_IF_ERROR(validate_plan(p));
  return check_buffers(p, b, true);
}

Status validate_unpacked(const PackPlan& p, const HostBuffers& b) {
  NCERT_RETURN_IF_ERROR(check_plan_shape(p));
  NCERT_RETURN_IF_ERROR(check_x_quant(p));
  NCERT_RETURN_IF_ERROR(check_walk(p));
  NCERT_RETURN_IF_ERROR(check_segments(p));
  NCERT_RETURN_IF_ERROR(check_af4(p));
  NCERT_RETURN_IF_ERROR(check_strides(p, false));
  return check_buffers(p, b, false);
}

}  // namespace ncert::packing
