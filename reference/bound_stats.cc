#include "reference/bound_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ncert::reference {

namespace {
bool earlier(const ElementRecord& a, const ElementRecord& b) {
  if (!b.found()) return a.found();
  if (!a.found()) return false;
  return a.row != b.row ? a.row < b.row : a.col < b.col;
}
}  // namespace

double utilization(float z, double center, const Interval& accept) {
  if (std::isnan(z)) return std::numeric_limits<double>::infinity();
  const double d = static_cast<double>(z) - center;
  const double side = d >= 0 ? static_cast<double>(accept.hi) - center : center - static_cast<double>(accept.lo);
  if (d == 0) return 0.0;
  if (!(side > 0)) return std::numeric_limits<double>::infinity();
  return std::fabs(d) / side;
}

void BoundStats::add(Index row, Index col, float z, double center, double bound, const Interval& accept,
                     const Interval& expect) {
  ++elements_;
  const ElementRecord rec{row, col, z, center, bound, accept};
  const bool inside = contains(accept, z);
  if (!inside) {
    ++outside_;
    if (earlier(rec, first_outside_)) first_outside_ = rec;
  } else if (!contains(expect, z)) {
    ++beyond_tier_;
    if (earlier(rec, first_beyond_)) first_beyond_ = rec;
  }
  if (inside && accept.lo == accept.hi) ++single_valued_;
  if (!std::isfinite(z)) {
    ++nonfinite_;
    return;
  }
  const double err = static_cast<double>(z) - center;
  if (std::isfinite(err)) {
    ++counted_;
    sum_err_ += err;
    if (bound > 0 && std::isfinite(bound)) {
      sum_norm_ += err / bound;
      max_err_over_b_ = std::max(max_err_over_b_, std::fabs(err) / bound);
    }
    if (std::fabs(err) > max_abs_ || !max_abs_at_.found()) {
      max_abs_ = std::fabs(err);
      max_abs_at_ = rec;
    }
  }
  // utilization() is >= 0 (+inf for NaN), so the maximum needs no record to stay independent
  // of the merge order.
  max_util_ = std::max(max_util_, utilization(z, center, accept));
}

void BoundStats::merge(const BoundStats& o) {
  elements_ += o.elements_;
  counted_ += o.counted_;
  outside_ += o.outside_;
  beyond_tier_ += o.beyond_tier_;
  single_valued_ += o.single_valued_;
  nonfinite_ += o.nonfinite_;
  sum_err_ += o.sum_err_;
  sum_norm_ += o.sum_norm_;
  max_err_over_b_ = std::max(max_err_over_b_, o.max_err_over_b_);
  // Ties keep the earlier element, so the result does not depend on how work was split.
  if (o.max_abs_at_.found() && (!max_abs_at_.found() || o.max_abs_ > max_abs_ ||
                                (o.max_abs_ == max_abs_ && earlier(o.max_abs_at_, max_abs_at_)))) {
    max_abs_ = o.max_abs_;
    max_abs_at_ = o.max_abs_at_;
  }
  max_util_ = std::max(max_util_, o.max_util_);
  if (earlier(o.first_outside_, first_outside_)) first_outside_ = o.first_outside_;
  if (earlier(o.first_beyond_, first_beyond_)) first_beyond_ = o.first_beyond_;
}

}  // namespace ncert::reference
