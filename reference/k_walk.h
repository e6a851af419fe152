// This header defines the bit-exact emulation of an engine kernel whose reduction order over
// K is declared (docs/dump-format.md §3 k_walk) and of its epilogue, so an engine can be held to
// bitwise equality. The conventions (docs/error-bounds.md §5):
//   seq            acc = 0; for k ascending: acc = fl32(acc + fl32(x_k * w_k))
//   seq-fma        acc = 0; for k ascending: acc = fma(x_k, w_k, acc)
//   split:<P>[:fma] K in P equal contiguous parts, each summed as seq[-fma] from 0, then
//                  total = p_0; total = fl32(total + p_i) for i = 1..P-1
//   lanes:<L>:<tree>[:fma]  L lane accumulators from 0, term k into lane k mod L as seq[-fma]
//                  (a short tail leaves the last lanes one term short), then the lanes reduced
//                  by the tree (KWalkTree: seq, halving, pairs, butterfly)
//   promote:<P>:<p>:<rnd>[:fma]  blocks of P terms (the last may be shorter), each accumulated
//                  from 0 at p significand bits on f32's exponent range, rounded with rnd
//                  (rne, rz) after the product and after the add, or once per fused step; then
//                  total = b_0; total = fl32(total + b_j)
//   splitk:<S>:<tree>/<inner>  K in S equal contiguous parts, each reduced by the inner walk
//                  from 0 as if it were the whole K, then the S sums reduced by the tree;
//                  split:<P>[:fma] is splitk:<P>:seq/seq[-fma]
//   bias_at start  the output holds the bias before the kernel adds into it: where the parts
//                  are combined in sequence (split, splitk:<S>:seq/..., S >= 2) the bias is
//                  added to part 0's sum before part 1 is: total = fl32(p_0 + bias); total =
//                  fl32(total + p_i), as MLAS adds each K block to C; every other walk is one
//                  sum added to it once, fl32(result + bias), bias_at = end's value. The walk
//                  functions take that bias as `start` (null: none) and return the sum with it
//   epilogue       v = fl32(acc + bias) (bias_at = end); v = fl32(v + r) (residual_at = f32);
//                  out = rnd(v); residual_at = output: out = rnd(fl32(rnd(v) + r)); rnd is the
//                  declared output rounding (RNE, or truncation for output_rounding = rz)
// w_k is the f32 weight the kernel multiplies by (decode_weight_row's `kernel` output).
#pragma once

#include "reference/linear_spec.h"

namespace ncert::reference {

/// The walk's f32 dot product of one row x[0..k) with one weight row w[0..k).
/// `start`: the bias the kernel's output holds before it adds into it (bias_at = start), or null.
float walk_dot(const KWalk& walk, const float* x, const float* w, Index k, const float* start = nullptr);

/// The same for one row against `width` weight rows at once. `wt` is the weight block
/// transposed: wt[c * width + j] = w_j[c]. `out` receives width results; `scratch` must hold
/// `width` floats. Results are bit-identical to walk_dot (each column's order is the same;
/// only independent columns are computed side by side). Walks other than seq, seq-fma and
/// split go column by column through walk_dot's own code (k_walk.cc says what that costs).
/// `start`: null, or the `width` columns' biases (bias_at = start).
void walk_row_block(const KWalk& walk, const float* x, const float* wt, Index k, Index width, float* out,
                    float* scratch, const float* start = nullptr);

/// The same for `rows` activation rows at once (x row stride = k, out row stride = width), the
/// weight block in panels of 16 columns: columns [j0, j0 + pw), pw = min(16, width - j0), are
/// the k x pw floats at wt + j0 * k, w_j[c] at wt[j0 * k + c * pw + (j - j0)] (transpose_rows
/// of 16 weight rows at a time writes them so). Blocks of up to 8 rows x 16 columns keep their
/// accumulators in registers for a whole part, so each weight is loaded once for 8 rows.
/// `scratch` must hold rows * width floats. Bit-identical to walk_dot on every element.
/// `start`: null, or the `width` columns' biases (bias_at = start).
void walk_rows_block(const KWalk& walk, const float* x, Index rows, const float* wt, Index k, Index width, float* out,
                     float* scratch, const float* start = nullptr);

/// The value stored by the engine for one element under the emulation's epilogue convention
/// (see the header comment) and the projection's output rounding (rz truncates; rne, and any,
/// which pins nothing, round to nearest even): f32 value, bf16-representable when output is
/// bf16. `bias` / `residual` are ignored unless the epilogue has them, and `bias` where it is in
/// the sum (bias_at = start: the walk added it).
float epilogue_value(float acc, float bias, float residual, const ProjectionArithmetic& a);

/// Rounds an f32 value to the output type's value (to bf16 as `rounding` says, or unchanged
/// for f32).
float round_to_output(float v, DType output, OutputRounding rounding = OutputRounding::kNearestEven);

}  // namespace ncert::reference
