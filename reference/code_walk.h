// This header defines the bit-exact emulation of an integer kernel's K walk (docs/dump-format.md
// §3.4, k_walk = codes:<C>:<scaling>/<walk>): W8A8 and W4A8 kernels multiply the activations'
// int8 / uint8 codes by the weights' integer codes, sum each run of C products exactly in integer
// registers (4 for AVX2's maddubs + madd lanes, a block of 32 for ggml's scalar loop, K for an
// int32 GEMM that scales once), convert each sum Q to f32 and scale it by the two stored scales
// (linear_spec.h CodeScaling), and add those K / C terms in the f32 walk declared after the '/'.
// Integer sums are exact, so the walk fixes every rounding the kernel makes: the `walk` check then
// holds such a kernel bit for bit, where the bound alone lets an integer accumulator of 16 bits
// through at K = 4,096 (docs/detection.md).
#pragma once

#include <string>

#include "reference/linear_spec.h"

namespace ncert::reference {

/// Why the problem cannot take its declared code walk ("" when it can): x_quant must be int8 or
/// uint8, every weight segment integer codes multiplied as they are (int8, or AF4 zero-point,
/// with dequant = exact), and C must divide x_quant_group and each segment's group_size, so that
/// each chunk of C products has one scale of each side.
std::string code_walk_unsupported(const LinearProblem& p);

/// The walk's sums (before the epilogue) of every row of x against weight rows [j0, j0 + width):
/// out[i * width + jj], M x width. `start`: null, or the width columns' biases (bias_at = start,
/// k_walk.h). Requires code_walk_unsupported(p) to be "" and K % C == 0.
void code_walk_block(const LinearProblem& p, Index j0, Index width, float* out, const float* start = nullptr);

}  // namespace ncert::reference
