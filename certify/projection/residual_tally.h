// This header defines what the reference pass collects for the residual tests of
// docs/error-bounds.md §6c-6e. Under the mean-independent rounding model every residual
// r = y - y* of a round-to-nearest kernel is a sum of bounded, conditionally centred rounding
// errors plus a deterministic offset (B's slack), whatever the summation order; a fault adds a
// structured term the rounding cannot produce:
//   signature  a wrong scale, zero point or codebook in one weight group, or a dropped or
//              doubled K range, moves every row's residual of one column in proportion to that
//              range's partial dot product a. Per (column, dyadic K range) the matched filter
//              sum a r / sigma^2, against Azuma's bound on it, finds it and fits its size.
//   variance   an accumulator with fewer bits than declared raises sum r^2 above the most any
//              order of rounding errors of the declared size allows.
// Each block adds its elements to its own tallies, merged in block order afterwards, so the
// results do not depend on the thread count.
#pragma once

#include <cmath>
#include <vector>

#include "certify/report/evidence.h"
#include "reference/linear.h"
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
  bool one_row = false;  ///< its column held one live row: only the whole K was tried
  bool operator==(const SignatureHit&) const = default;
};

/// The order of candidates: larger z first, then output, column and range (a total order, so
/// the strongest ones do not depend on how blocks were merged).
bool stronger(const SignatureHit& a, const SignatureHit& b);

/// Keeps in `v` the strongest hit of each of the SignatureTally::kKeep strongest columns (by
/// their strongest hit; any output), strongest first: the same whatever order hits arrive or
/// lists merge in (a column's entry only grows, and one below the kKeep-th stays below it).
void keep_strongest_column(std::vector<SignatureHit>& v, const SignatureHit& h);

struct SignatureTally {
  static constexpr std::size_t kKeep = 8;
  Index candidates = 0;
  Index significant = 0;
  Index significant_columns = 0;  ///< (output, column) pairs with a candidate beyond it
  Index columns_as_unpacked = 0;  ///< columns equal to y_unpacked's, tested there
  /// (output, column) pairs with a candidate counted (run or screened): a column over one
  /// live row counts one candidate, the whole K, not ranges_per_column.
  Index columns_tested = 0;
  /// (output, column) pairs whose every candidate is below the threshold by their bound
  /// sqrt(sum r^2 / sigma^2) (Cauchy-Schwarz): tested without computing their candidates.
  Index columns_screened = 0;
  double screened_max = 0;  ///< the largest bound of a screened column
  /// (output, column) pairs not tested: a partial dot of theirs, or a candidate's sums, beyond
  /// the range of the type it is computed in (activations and weights near FLT_MAX).
  Index columns_untested = 0;
  std::vector<SignatureHit> strongest;  ///< by z, then output, column and range: deterministic
  /// The same, one per column (its strongest hit): the columns a failure's location is sought
  /// among beside the strongest (a column holding another's values: detail/localize.h).
  std::vector<SignatureHit> strongest_columns;
  /// z of every computed candidate, and each screened column's bound (once per column).
  Log2Histogram z{SignatureEvidence::kZLog2Min, SignatureEvidence::kZLog2Max};
  void add(const SignatureHit& h, double threshold);
  /// A column screened by its bound: its `ranges` candidates are all at most `bound`.
  void add_screened(double bound, Index ranges);
  void merge(const SignatureTally& o);
};

/// The variance test's sums over a set of one output's elements.
struct VarianceSums {
  Index values = 0;        ///< values with sigma > 0
  double q = 0;            ///< sum ((|r| - slack)_+ / sigma)^2 over them
  Index beyond_exact = 0;  ///< values with sigma 0 (no rounding) whose |r| exceeds slack
  /// The centre part (docs/error-bounds.md §6e): over the values with sigma > 0 and a nonzero
  /// centre c, the sum of sign(c) r / sigma (a martingale of proxy `leaning` under the model),
  /// the sum of slack / sigma it may move by, and how many residuals lie toward zero; and the
  /// sum of (r / sigma)^2 over the same values, the lean's own spread.
  Index leaning = 0;
  double lean = 0;
  double lean_shift = 0;
  double lean_sq = 0;
  Index toward_zero = 0;
  Index away_from_zero = 0;  ///< residuals away from zero (those of exactly 0 are neither)
  Index count() const { return values + beyond_exact; }
  /// One value's centre-part terms: `toward` = sign(c) r, `sd` its sigma (> 0), `slack` what
  /// the deterministic part may move r by.
  void add_lean(double toward, double sd, double slack);
  void merge(const VarianceSums& o);
};

/// The variance test's sums over one output's elements, those inside their interval and those
/// outside B apart: a few values outside are bound's and left out of the test (under the model
/// there are none, so alpha holds either way), and two wrong values do not read as an
/// accumulator 5 bits short; where many are, all are tested (a narrower accumulator under bf16
/// outputs keeps inside B only the values its errors did not move to another neighbour).
struct VarianceTally {
  VarianceSums inside, outside;
  void merge(const VarianceTally& o);
};

/// The matched filters of one block. The reference pass sets each output's elements (residual,
/// sigma^2, slack) as it compares them; finish() then screens each (output, column): every
/// candidate's z = (|sum a r / sigma^2| - sum |a| slack / sigma^2) / sqrt(sum a^2 / sigma^2) is
/// at most sqrt(sum r^2 / sigma^2) whatever the weights a (Cauchy-Schwarz), so a column whose bound is
/// below the threshold cannot hold a significant candidate and is not run (a legitimate f32
/// column's bound is about 1 against a threshold near 9). The others run every range column by
/// column: the column's partial dots per tile (reference::column_tile_dots), then per range,
/// are built once, as ranges x rows, and each output's four sums per range are dot products
/// over the rows (8 fixed lanes, added in a fixed order: the same sums on every CPU). One per
/// thread, reused block after block.
class BlockSignatures {
 public:
  /// Sizes the block (rows x width per output) with every element absent.
  void reset(Index outputs, Index rows, Index width);
  /// Element (i, jj) of output `o` is present with residual r, sigma^2 `var` and slack.
  void set(Index o, Index i, Index jj, double r, double var, double slack);
  /// Output `o`'s column jj holds the same values as output `same_as`'s, bit for bit, on every
  /// row it has: its candidates are those of `same_as` on fewer rows, so they are not run again.
  void share(Index o, Index jj, Index same_as);
  /// Every candidate of the block into `out` (per output): computed from the block's tile dots
  /// where its column's bound reaches the threshold, screened otherwise; the columns not run
  /// again as columns_as_unpacked.
  void finish(const std::vector<TileRange>& ranges, const reference::ReferenceBlock& block, double threshold,
              std::vector<SignatureTally>& out);

 private:
  /// SignatureHit::col of a range whose sums leave f64's range: no candidate, and its column
  /// counted untested.
  static constexpr Index kUntested = -2;
  std::size_t at(Index o, Index jj) const { return static_cast<std::size_t>((o * width_ + jj) * padded_); }
  /// Output o's candidates in column jj (absolute column `col`), from the ranges' partial dots
  /// in a_, into its tally.
  void column_candidates(const std::vector<TileRange>& ranges, Index o, Index jj, Index col, double threshold,
                         SignatureTally& tally);
  /// Range c's sums over output o's rows of column jj: its z and fit (col -1: no candidate,
  /// kUntested: sums beyond f64's range).
  SignatureHit range_hit(Index o, Index jj, std::size_t c, Index col) const;
  /// The (output, column) cell's bound on every candidate's z is at most the threshold.
  bool screened(std::size_t cell, double threshold) const { return !(std::sqrt(q_[cell]) > threshold); }
  Index outputs_ = 0, rows_ = 0, width_ = 0;
  Index padded_ = 0;  ///< rows rounded up to the lanes (absent rows: all zero)
  // outputs x width x padded each: r / sigma^2, 1 / sigma^2 and slack / sigma^2 (0 where
  // sigma is 0), r and slack where sigma is 0 (0 elsewhere), and 1 / 0 for present / absent.
  std::vector<double> r_w_, w_, slack_w_, exact_r_, exact_slack_, mask_;
  /// outputs x width: sum r^2 / sigma^2 over the column's rows (infinite when a row without
  /// rounding, sigma 0, has a residual).
  std::vector<double> q_;
  std::vector<Index> shared_;       ///< outputs x width: -1, or the output it repeats
  std::vector<char> any_;           ///< outputs x width: a column with at least one element
  std::vector<double> a_;           ///< ranges x padded: one column's partial dots
  std::vector<float> dots_;         ///< tiles x rows: one column's tile dots
  std::vector<double> live_;        ///< padded: 1 where a row's tile dots are not all zero
  std::vector<SignatureHit> hits_;  ///< one output's candidates of the column, per range
};

}  // namespace ncert::certify
