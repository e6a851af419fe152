// This header defines what the reference pass collects for the residual tests of
// docs/error-bounds.md §6c-6e. Under the mean-independent rounding model every residual
// r = y - y* of a round-to-nearest kernel is a sum of bounded, conditionally centred rounding
// errors plus a deterministic offset (B's slack), whatever the summation order; a fault adds a
// structured term the rounding cannot produce:
//   signature  a wrong scale, zero point or codebook in one weight group, or a dropped or
//              doubled K range, moves every row's residual of one column in proportion to that
//              range's partial dot product a. Per (column, dyadic K range) the matched filter
//              sum a r, against Azuma's bound on it, finds it and fits its size.
//   variance   an accumulator with fewer bits than declared raises sum r^2 above the most any
//              order of rounding errors of the declared size allows.
// Each block adds its elements to its own tallies, merged in block order afterwards, so the
// results do not depend on the thread count.
#pragma once

#include <vector>

#include "certify/report/evidence.h"
#include "reference/linear_spec.h"
#include "reference/status.h"

namespace ncert::certify {

/// A K range of tiles [first, first + count) and, above the first level, the two ranges (or
/// one, for an odd last range) it joins.
struct TileRange {
  Index first = 0, count = 0;
  Index left = -1, right = -1;  ///< indices into the same vector, -1: none (level 0)
};
/// The dyadic ranges over `tiles` tiles: the tiles themselves, then pairs of the previous level
/// (an odd last range carried up alone), up to one range of all tiles. Children come before
/// their parent.
std::vector<TileRange> dyadic_ranges(Index tiles);

/// The weight group of a segment (AF4, scaled formats), 0 for a segment without groups.
Index segment_group_size(const reference::WeightSegment& seg);

/// One candidate as found in a block (columns absolute, ranges as tile indices).
struct SignatureHit {
  Index output = 0;  ///< EngineOutputId
  Index col = -1;
  Index range = 0;  ///< into dyadic_ranges
  double z = 0, fit = 0;
  bool operator==(const SignatureHit&) const = default;
};

/// The order of candidates: larger z first, then output, column and range (a total order, so
/// the strongest ones do not depend on how blocks were merged).
bool stronger(const SignatureHit& a, const SignatureHit& b);

struct SignatureTally {
  static constexpr std::size_t kKeep = 8;
  Index candidates = 0;
  Index significant = 0;
  Index significant_columns = 0;        ///< (output, column) pairs with a candidate beyond it
  std::vector<SignatureHit> strongest;  ///< by z, then output, column and range: deterministic
  Log2Histogram z{SignatureEvidence::kZLog2Min, SignatureEvidence::kZLog2Max};
  void add(const SignatureHit& h, double threshold);
  void merge(const SignatureTally& o);
};

/// The variance test's sums over one output's elements.
struct VarianceTally {
  Index values = 0;
  double energy = 0;  ///< sum (|r| - slack)_+^2
  double var = 0;     ///< sum sigma^2
  double var2 = 0;    ///< sum sigma^4
  void merge(const VarianceTally& o);
};

/// The matched filters of one block, per output: sums over its rows for every (column, range).
class BlockSignatures {
 public:
  BlockSignatures(const std::vector<TileRange>& ranges, Index outputs, Index width);
  /// One element of output `o` at block column jj: its residual r, sigma^2 and slack, and its
  /// partial dots over the tiles (tile t at tile_dot[t * tile_stride]).
  void add(Index o, Index jj, double r, double var, double slack, const float* tile_dot, Index tile_stride);
  /// Every candidate of the block into `out` (per output), then clears the sums.
  void finish(Index col_begin, double threshold, std::vector<SignatureTally>& out);

 private:
  const std::vector<TileRange>& ranges_;
  Index outputs_, width_;
  // outputs x width x ranges each, one array per sum (structure of arrays: the per-element loop
  // over ranges vectorizes; each sum still adds the elements in the same order).
  std::vector<double> num_, den_, aa_, slack_;
  std::vector<double> a_;   ///< one element's partial dots per range
  std::vector<bool> seen_;  ///< outputs x width: a column with at least one element
};

}  // namespace ncert::certify
