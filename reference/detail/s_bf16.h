// Internal: S = |x| |w|^T from magnitudes that are bf16 numbers, summed in one fixed order
// (docs/error-bounds.md §1, "S from bf16 magnitudes"): through AVX512-BF16's VDPBF16PS where
// the build has it and the CPU runs it fast (instruction_is_faster), else in plain f32
// arithmetic, with the same bits. The instruction multiplies 32 pairs and adds them into 16 f32
// lanes, from operands of half the f32 GEMM's memory; the portable path does 16 products per
// fused multiply-add, as the f32 GEMM does.
#pragma once

#include <cstdint>

#include "reference/dtype.h"

namespace ncert::reference::detail {

/// Whether this build has the instruction (compiled for a CPU with AVX512-BF16); without it
/// s_gemm_bf16 computes the same sums in plain f32 arithmetic.
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
inline constexpr bool kSBf16Instruction = true;
#else
inline constexpr bool kSBf16Instruction = false;
#endif

/// Whether this CPU runs the instruction faster than the portable path: where the build has it,
/// on AMD's CPUs. Measured on one core (bench_reference --s-block), against Eigen's f32 GEMM:
/// on an AMD EPYC (Zen 4) the instruction ran 2.08x its speed (221 GFLOP/s; an earlier, slower
/// portable path 1.07x); on an Intel Xeon (Sapphire Rapids class) 0.65-0.72x, the portable path
/// 0.93-0.97x: VDPBF16PS retires one every two cycles there (1.7 G/s against 7 G/s of 16-lane
/// fused multiply-adds), 16 products a cycle against 32. Speed only: both give the same bits.
bool instruction_is_faster();

/// K padded with zero magnitudes to a multiple of one instruction's 32 products.
inline constexpr Index kBf16Pairs = 32;
inline constexpr Index bf16_padded(Index k) { return (k + kBf16Pairs - 1) / kBf16Pairs * kBf16Pairs; }

/// The kernel's operand: `rows` rows of `k` f32 magnitudes (non-negative, as the f32 GEMM reads
/// them) as bf16 bit patterns, each row padded with zeros to bf16_padded(k) (so rows start
/// 64-byte aligned in a 64-byte aligned buffer, as LargeVector's are: unaligned, every 64-byte
/// load of a row spans two cache lines). Rounded up to bf16
/// when `round_up`, else each must be a bf16 number already. Every nonzero result lies in
/// [2^-63, 2^63), so that every product of two is a normal f32, exact, and every partial sum of
/// them normal, zero or, past FLT_MAX, +inf (the caller then takes the f64 GEMM): no flush to
/// zero or denormal input can apply, and the instruction's arithmetic is plain f32 rounding to
/// nearest. False, `out` unspecified, when a value cannot be
/// (outside that range, not finite, or not a bf16 number when !round_up): the caller then uses
/// the f32 GEMM.
bool to_bf16_magnitudes(const float* mag, Index rows, Index k, bool round_up, std::uint16_t* out);

/// C[m x n] (row-major, contiguous) = A B^T, A [m x kp] and B [n x kp] from to_bf16_magnitudes
/// (kp = bf16_padded(K)). Each element is summed in one fixed order: K in chunks of 1,024; in a
/// chunk, lane l (0-15) adds pair after pair, (acc + a[2l+1] b[2l+1]) + a[2l] b[2l], from 0; the
/// 16 lanes then meet in a fixed tree (l + l+8, then + l+4, + l+2, + l+1); chunk sums add in
/// order into C. The instruction rounds to nearest whatever the process's modes; the lanes' tree
/// and the chunk sums are ordinary f32 additions. A product's path passes at most
/// min(kp/16, 64) + 4 + ceil(kp/1,024) - 1 roundings, and never more than K - 1 additions (zero
/// padding adds exactly): what the f32 GEMM's inflation assumes. Through the instruction when
/// `instruction` and kSBf16Instruction, else by widening each pair to f32 (the products are
/// exact) and adding in the same order: the same bits either way under rounding to nearest (the
/// process's default, which ncert never changes; the instruction ignores the mode, the portable
/// path follows it), so a verdict does not depend on the CPU the build targets.
void s_gemm_bf16(const std::uint16_t* a, Index m, const std::uint16_t* b, Index n, Index kp, float* c,
                 bool instruction = true);

/// The portable path's form of A, for a caller that multiplies it by many B: to_bf16_magnitudes'
/// rows (m x kp) widened into f32 once (twice the memory), each 32-pair step as its 16 odd
/// values, then its 16 even.
void widen_bf16_rows(const std::uint16_t* a, Index m, Index kp, float* out);

/// S by the portable path from A widened (widen_bf16_rows) and B as f32 magnitudes (n rows of
/// k), which it rounds up to bf16 when `round_up` and else requires to be bf16 numbers, chunk
/// by chunk: the bits of to_bf16_magnitudes(b_mag, n, k, round_up) then s_gemm_bf16, without
/// B's bf16 copy (a pass over the block's weights). False, C unspecified, where
/// to_bf16_magnitudes would refuse B (possibly found after some chunks: the caller then takes
/// the f32 GEMM, as it would have).
bool s_gemm_bf16_widened(const float* a_wide, Index m, const float* b_mag, Index n, Index k, bool round_up, float* c);

}  // namespace ncert::reference::detail
