// This header defines BoundStats: the verdict and statistics of comparing engine outputs with
// the reference intervals, element by element. Inside or outside the deterministic interval
// is the verdict (no other tolerance); beyond the probabilistic tier, the bound utilization
// |z - c| / (distance from c to the interval edge on z's side) and the signed mean error (a
// bias detector) are statistics. Partial stats merge deterministically: sums in block order,
// "first" failures by (row, col).
#pragma once

#include <cstdint>

#include "reference/bounds.h"

namespace ncert::reference {

struct ElementRecord {
  Index row = -1;  ///< -1: none
  Index col = -1;
  float value = 0;    ///< the engine's stored value
  double center = 0;  ///< y* + bias + residual
  double bound = 0;   ///< B of the element
  Interval accept;    ///< accepted interval
  bool found() const { return row >= 0; }
};

class BoundStats {
 public:
  /// One engine value z against the reference of element (row, col).
  void add(Index row, Index col, float z, double center, double bound, const Interval& accept, const Interval& expect);
  /// Appends the stats of a later block (or row set); deterministic in the order of merges.
  void merge(const BoundStats& other);

  Index elements() const { return elements_; }
  Index outside() const { return outside_; }          ///< deterministic failures
  Index beyond_tier() const { return beyond_tier_; }  ///< inside B but outside T
  Index nonfinite() const { return nonfinite_; }      ///< NaN/Inf engine values
  double max_abs_error() const { return max_abs_; }   ///< max |z - c| over finite z
  const ElementRecord& max_abs_at() const { return max_abs_at_; }
  /// max |z - c| / B over finite z (the bound utilization of docs/error-bounds.md §2). For bf16
  /// outputs the output rounding (up to half a bf16 ulp) is part of |z - c|, so it can exceed 1
  /// while z is inside the interval: the verdict is the interval, this is a statistic.
  double max_error_over_bound() const { return max_err_over_b_; }
  /// max of utilization(): how much of the accepted half-interval the values use (<= 1 inside).
  /// A value whose interval is a single point uses all of it (1): for bf16 outputs that is
  /// the common case, so single_valued() is the informative figure there.
  double max_utilization() const { return max_util_; }
  /// Values inside an accepted interval that holds one value only (lo == hi): the engine's
  /// value is the only one the reference allows. For bf16 outputs at K in the thousands this is
  /// most of them (their B is far below half a bf16 ulp).
  Index single_valued() const { return single_valued_; }
  double mean_signed_error() const { return counted_ ? sum_err_ / static_cast<double>(counted_) : 0.0; }
  /// Mean of (z - c) / B: near 0 for unbiased rounding, drifts for truncation or bugs.
  double mean_signed_error_over_bound() const { return counted_ ? sum_norm_ / static_cast<double>(counted_) : 0.0; }
  const ElementRecord& first_outside() const { return first_outside_; }
  const ElementRecord& first_beyond_tier() const { return first_beyond_; }

 private:
  Index elements_ = 0;
  Index counted_ = 0;  // finite values contributing to the means
  Index outside_ = 0;
  Index beyond_tier_ = 0;
  Index single_valued_ = 0;
  Index nonfinite_ = 0;
  double max_abs_ = 0;
  ElementRecord max_abs_at_;
  double max_util_ = 0;
  double max_err_over_b_ = 0;
  double sum_err_ = 0;
  double sum_norm_ = 0;
  ElementRecord first_outside_;
  ElementRecord first_beyond_;
};

/// |z - c| relative to the accepted half-interval on z's side (<= 1 inside, up to rounding
/// of the edges; +inf for a NaN or for z != c with a zero-width side).
double utilization(float z, double center, const Interval& accept);

}  // namespace ncert::reference
