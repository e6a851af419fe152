// Internal: the reference's GEMMs (y* in f64, S in f32, the spread's D in f64), behind a
// plain-pointer interface so Eigen is confined to one translation unit.
#pragma once

#include <memory>

#include "reference/detail/transpose.h"
#include "reference/dtype.h"

namespace ncert::reference::detail {

/// C[m x n] = A[m x k] * B[n x k]^T, all row-major and contiguous, f64. Runs on the calling
/// thread only (the caller parallelizes over blocks); the summation order depends only on the
/// shapes, so equal shapes give equal bits on any thread.
void gemm_abt(const double* a, Index m, Index k, const double* b, Index n, double* c);

/// The same in f32 (S = |x| |w| over magnitudes rounded up to f32; docs/error-bounds.md §1).
/// Each element is some summation tree of K products, each product rounded once or fused
/// into an add: at most K roundings on any product's path, whatever Eigen's blocking.
void gemm_abt(const float* a, Index m, Index k, const float* b, Index n, float* c);

struct F32Panels;

/// A, m x k row-major f64, packed once the way gemm_abt packs it in every product: the
/// reference makes one product per block of weight rows (129 blocks of 128 at N 16,480), and
/// Eigen packed the same activations (5 MB at M 128, K 5,120) in each, 6 % of the reference's
/// time. Read-only once made: any thread may use it.

class PackedActivations {
 public:
  /// Packed for products with blocks of `block_rows` weight rows, and of any other width Eigen
  /// blocks alike (covers()). Null where that product would not run Eigen's GEMM (one row, one
  /// column, or a tiny product): then gemm_abt(a, m, k, ...) is the way. One packing only: a
  /// second, for a last block Eigen blocks otherwise (at K 5,120 a 16-row block takes another kc
  /// than 128-row ones), would cost another copy of the activations (84 MB at M 2,048, K 5,120)
  /// to save one product's packing.
  static std::unique_ptr<PackedActivations> pack(const double* a, Index m, Index k, Index block_rows);
  PackedActivations(const PackedActivations&) = delete;
  PackedActivations& operator=(const PackedActivations&) = delete;
  ~PackedActivations();

  /// Whether gemm_abt(*this, b, block_rows, c) may be called: Eigen blocks that product as the
  /// one packed for.
  bool covers(Index block_rows) const;

  struct Impl;

 private:
  explicit PackedActivations(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend void gemm_abt(const PackedActivations& a, const double* b, Index n, double* c);
  friend void gemm_abt(const PackedActivations& a, const F32Panels& b, double* c);
  friend bool packs_from_panels(const PackedActivations& a, const F32Panels& b);
};

/// C[m x n] = A * B[n x k]^T for A packed, m x k: the bits of gemm_abt(a, m, k, b, n, c), for
/// any n it covers().
void gemm_abt(const PackedActivations& a, const double* b, Index n, double* c);

/// Whether gemm_abt(a, b, c) may be called: Eigen packs its f64 blocks of weight rows in panels
/// of three register packets, then two, then one (packets of 8 rows with AVX-512, 4 with AVX),
/// `a` covers() b.n, and b.n and Eigen's block of weight rows (mc) for the product are multiples
/// of the packet (every block's rows then pack in groups of a packet's consecutive floats a k
/// step). Eigen need not round mc so: with a 256 KiB L2, M 2-8 and K ~500 it takes 21 or 22.
bool packs_from_panels(const PackedActivations& a, const F32Panels& b);

/// C = A * B^T for B the f64 values of `b`'s floats: the bits of gemm_abt(a, w, b.n, c) for w
/// those values row-major. Eigen's packing of w transposes a block of f64 rows (24 at a time)
/// read back from L3, 10 % of a 4-bit check's CPU (M 32, K 5,120, N 16,480); here each k step
/// of a packet's rows is that many consecutive floats of a panel, widened into the same packed
/// block.
void gemm_abt(const PackedActivations& a, const F32Panels& b, double* c);

/// Packs rows [i0, i0 + rows) and k [k0, k0 + depth) of `b` as Eigen's gemm_pack_lhs packs the
/// row-major f64 values of those rows for gebp (panels of 3 packets of rows, then 2, then 1: 24,
/// 16, 8 rows with AVX-512, 12, 8, 4 with AVX; each k step of a panel its rows' values in
/// order). rows a multiple of the packet, i0 too. Exposed for its test.
void pack_lhs_from_panels(const F32Panels& b, Index i0, Index rows, Index k0, Index depth, double* block);

/// Whether gemm_abt_magnitudes(a, m, b, c) may be called: Eigen's f32 GEMM runs for the product
/// and packs its blocks of weight rows in panels of three register packets, then two, then one
/// (packets of 16 rows with AVX-512, 8 with AVX), and b.n and that block (mc) are multiples of
/// the packet, so that every packet's k step is consecutive floats of one walk panel.
bool magnitudes_pack_from_panels(Index m, const F32Panels& b);

/// S's f32 product from the walk's panels: C[m x b.n] = A[m x b.k] * |B|^T for |B| the charged
/// magnitudes of `b`'s floats (bounds.h f32_magnitude: |w|, nonzero subnormals raised to
/// 2^-126), the bits of gemm_abt(a, m, b.k, mag, b.n, c) for mag those magnitudes row-major.
/// Eigen's packing of the magnitudes' rows transposes 48 of them at a time, 5.5 % of a 4-bit
/// check's CPU (M 32, K 5,120, N 16,480); here each packet's k step is consecutive floats of a
/// walk panel, their magnitudes taken on the way.
void gemm_abt_magnitudes(const float* a, Index m, const F32Panels& b, float* c);

/// Packs the magnitudes of rows [i0, i0 + rows) and k [k0, k0 + depth) of `b` as Eigen's f32
/// gemm_pack_lhs packs them row-major (panels of 3 packets of rows, then 2, then 1: 48, 32, 16
/// rows with AVX-512, 24, 16, 8 with AVX; each k step of a panel its rows' values in order).
/// rows and i0 multiples of the packet. Exposed for its test.
void pack_lhs_magnitudes_from_panels(const F32Panels& b, Index i0, Index rows, Index k0, Index depth, float* block);

}  // namespace ncert::reference::detail
