#include "certify/projection/residual_tally.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

namespace ncert::certify {

std::vector<TileRange> dyadic_ranges(Index tiles) {
  std::vector<TileRange> out;
  for (Index t = 0; t < tiles; ++t) out.push_back(TileRange{t, 1, -1, -1});
  Index level_begin = 0, level_end = tiles;
  while (level_end - level_begin > 1) {
    for (Index i = level_begin; i < level_end; i += 2) {
      const TileRange& l = out[static_cast<std::size_t>(i)];
      if (i + 1 < level_end) {
        const TileRange& r = out[static_cast<std::size_t>(i + 1)];
        out.push_back(TileRange{l.first, l.count + r.count, i, i + 1});
      } else {
        out.push_back(TileRange{l.first, l.count, i, -1});
      }
    }
    level_begin = level_end;
    level_end = static_cast<Index>(out.size());
  }
  return out;
}

Index segment_group_size(const reference::WeightSegment& seg) {
  if (seg.format == reference::WeightFormat::kAf4) return seg.af4.layout.group_size;
  if (reference::is_scaled_format(seg.format)) return seg.scaled.group_size;
  return 0;
}

bool stronger(const SignatureHit& a, const SignatureHit& b) {
  if (a.z != b.z) return a.z > b.z;
  return std::tie(a.output, a.col, a.range) < std::tie(b.output, b.col, b.range);
}

namespace {

void keep_strongest(std::vector<SignatureHit>& v, const SignatureHit& h) {
  if (v.size() == SignatureTally::kKeep && !stronger(h, v.back())) return;
  v.insert(std::upper_bound(v.begin(), v.end(), h, stronger), h);
  if (v.size() > SignatureTally::kKeep) v.pop_back();
}

}  // namespace

void keep_strongest_column(std::vector<SignatureHit>& v, const SignatureHit& h) {
  if (v.size() == SignatureTally::kKeep && !stronger(h, v.back())) return;
  const auto same = std::find_if(v.begin(), v.end(), [&](const SignatureHit& o) { return o.col == h.col; });
  if (same != v.end()) {
    if (!stronger(h, *same)) return;
    v.erase(same);
  }
  v.insert(std::upper_bound(v.begin(), v.end(), h, stronger), h);
  if (v.size() > SignatureTally::kKeep) v.pop_back();
}

void SignatureTally::add(const SignatureHit& h, double threshold) {
  ++candidates;
  if (h.z > threshold) ++significant;
  z.add(std::max(h.z, 0.0));
  keep_strongest(strongest, h);
  keep_strongest_column(strongest_columns, h);
}

void SignatureTally::add_screened(double bound, Index ranges) {
  candidates += ranges;
  ++columns_screened;
  ++columns_tested;
  screened_max = std::max(screened_max, bound);
  z.add(bound);
}

void SignatureTally::merge(const SignatureTally& o) {
  candidates += o.candidates;
  columns_screened += o.columns_screened;
  columns_tested += o.columns_tested;
  columns_untested += o.columns_untested;
  screened_max = std::max(screened_max, o.screened_max);
  significant += o.significant;
  significant_columns += o.significant_columns;
  columns_as_unpacked += o.columns_as_unpacked;
  z.merge(o.z);
  for (const SignatureHit& h : o.strongest) keep_strongest(strongest, h);
  for (const SignatureHit& h : o.strongest_columns) keep_strongest_column(strongest_columns, h);
}

void VarianceSums::add_lean(double toward, double sd, double slack) {
  const double s = toward / sd;  // sign(c) r / sigma, once for the sum and its square
  ++leaning;
  lean += s;
  lean_shift += slack / sd;
  lean_sq += s * s;
  toward_zero += toward < 0;
  away_from_zero += toward > 0;
}

void VarianceSums::merge(const VarianceSums& o) {
  values += o.values;
  q += o.q;
  beyond_exact += o.beyond_exact;
  leaning += o.leaning;
  lean += o.lean;
  lean_shift += o.lean_shift;
  lean_sq += o.lean_sq;
  toward_zero += o.toward_zero;
  away_from_zero += o.away_from_zero;
}

void VarianceTally::merge(const VarianceTally& o) {
  inside.merge(o.inside);
  outside.merge(o.outside);
}

namespace {

/// Lanes of the per-range dot products over a column's rows: 8 partial sums, lane l adding rows
/// l, l + 8, ..., combined in one fixed tree, so the compiler may vectorize them (they are
/// independent) and every CPU adds the same numbers in the same order.
constexpr Index kLanes = 8;

double lane_total(const double (&v)[kLanes]) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

}  // namespace

void BlockSignatures::reset(Index outputs, Index rows, Index width) {
  outputs_ = outputs;
  rows_ = rows;
  width_ = width;
  padded_ = (rows + kLanes - 1) / kLanes * kLanes;
  const auto n = static_cast<std::size_t>(outputs * width * padded_);
  r_w_.assign(n, 0.0);
  w_.assign(n, 0.0);
  slack_w_.assign(n, 0.0);
  exact_r_.assign(n, 0.0);
  exact_slack_.assign(n, 0.0);
  mask_.assign(n, 0.0);
  q_.assign(static_cast<std::size_t>(outputs * width), 0.0);
  shared_.assign(static_cast<std::size_t>(outputs * width), -1);
  any_.assign(static_cast<std::size_t>(outputs * width), 0);
}

void BlockSignatures::set(Index o, Index i, Index jj, double r, double var, double slack) {
  const std::size_t e = at(o, jj) + static_cast<std::size_t>(i);
  if (var > 0) {
    w_[e] = 1 / var;
    r_w_[e] = r / var;
    slack_w_[e] = slack / var;
  } else {
    exact_r_[e] = r;
    exact_slack_[e] = slack;
  }
  mask_[e] = 1.0;
  const auto cell = static_cast<std::size_t>(o * width_ + jj);
  any_[cell] = 1;
  q_[cell] += var > 0 ? r * r / var : (r != 0 ? HUGE_VAL : 0.0);
}

void BlockSignatures::share(Index o, Index jj, Index same_as) {
  shared_[static_cast<std::size_t>(o * width_ + jj)] = same_as;
}

void BlockSignatures::finish(const std::vector<TileRange>& ranges, const reference::ReferenceBlock& block,
                             double threshold, std::vector<SignatureTally>& out) {
  const std::size_t n = ranges.size();
  const auto p = static_cast<std::size_t>(padded_);
  const Index col_begin = block.col_begin;
  a_.assign(n * p, 0.0);
  dots_.resize(static_cast<std::size_t>(block.tiles * rows_));
  for (Index jj = 0; jj < width_; ++jj) {
    // Which outputs' candidates this column runs: present, not a repeat of y_unpacked's, and
    // not screened by their bound.
    bool wanted = false;
    for (Index o = 0; o < outputs_; ++o) {
      const auto cell = static_cast<std::size_t>(o * width_ + jj);
      if (!any_[cell]) continue;
      if (shared_[cell] >= 0) {
        ++out[static_cast<std::size_t>(o)].columns_as_unpacked;
      } else if (!screened(cell, threshold)) {
        wanted = true;
      } else {
        out[static_cast<std::size_t>(o)].add_screened(std::sqrt(q_[cell]), static_cast<Index>(n));
      }
    }
    if (!wanted) continue;
    reference::column_tile_dots(block, col_begin + jj, dots_.data());
    // Partial dots beyond f32's range (activations and weights near FLT_MAX) weight no test: a
    // NaN z had ranked first and read "the outputs fit nanx their exact values" (a review's).
    if (!std::all_of(dots_.begin(), dots_.end(), [](float d) { return std::isfinite(d); })) {
      for (Index o = 0; o < outputs_; ++o) {
        const auto cell = static_cast<std::size_t>(o * width_ + jj);
        if (any_[cell] && shared_[cell] < 0 && !screened(cell, threshold)) {
          ++out[static_cast<std::size_t>(o)].columns_untested;
        }
      }
      continue;
    }
    // Rows with a nonzero partial dot: the others (rows of zeros, padding) carry no candidate.
    live_.assign(p, 0.0);
    for (Index g = 0; g < block.tiles; ++g) {
      for (Index i = 0; i < rows_; ++i) {
        if (dots_[static_cast<std::size_t>(g * rows_ + i)] != 0) live_[static_cast<std::size_t>(i)] = 1.0;
      }
    }
    // The column's partial dots per range: the tiles', then each range the sum of its two
    // children (a range carried up alone is a copy of its child, and its sums are the child's).
    for (std::size_t c = 0; c < n; ++c) {
      const TileRange& g = ranges[c];
      double* a = a_.data() + c * p;
      if (g.left < 0) {
        const float* d = dots_.data() + g.first * rows_;
        for (Index i = 0; i < rows_; ++i) a[i] = static_cast<double>(d[i]);
      } else if (g.right >= 0) {
        const double* l = a_.data() + static_cast<std::size_t>(g.left) * p;
        const double* r = a_.data() + static_cast<std::size_t>(g.right) * p;
        for (std::size_t i = 0; i < p; ++i) a[i] = l[i] + r[i];
      } else {
        std::copy_n(a_.data() + static_cast<std::size_t>(g.left) * p, p, a);
      }
    }
    for (Index o = 0; o < outputs_; ++o) {
      const auto cell = static_cast<std::size_t>(o * width_ + jj);
      if (!any_[cell] || shared_[cell] >= 0 || screened(cell, threshold)) continue;
      column_candidates(ranges, o, jj, col_begin + jj, threshold, out[static_cast<std::size_t>(o)]);
    }
  }
}

void BlockSignatures::column_candidates(const std::vector<TileRange>& ranges, Index o, Index jj, Index col,
                                        double threshold, SignatureTally& tally) {
  const std::size_t n = ranges.size();
  const Index before = tally.significant;
  const Index counted = tally.candidates;
  bool untested = false;
  // Over one row every range's z is |r| / sigma, the same up to rounding, and the best range
  // is noise (a row x 0.5 at M 1 read "k 64-127: the outputs fit 49.31x that range's exact
  // contribution", a review's): only the whole dot product is a candidate there. Rows whose
  // partial dots are all zero do not count (one live row among padding read as M 1 did).
  const double* m = mask_.data() + at(o, jj);
  const bool one_row = std::inner_product(m, m + padded_, live_.data(), 0.0) <= 1.0;
  hits_.resize(n);
  for (std::size_t c = 0; c < n; ++c) {
    const TileRange& g = ranges[c];
    SignatureHit& h = hits_[c];
    if (g.left >= 0 && g.right < 0) {
      h = hits_[static_cast<std::size_t>(g.left)];  // carried up alone: its child's sums
    } else {
      h = range_hit(o, jj, c, col);
      untested = untested || h.col == kUntested;
    }
    if (h.col >= 0 && (!one_row || c + 1 == n)) {
      SignatureHit add = h;
      add.range = static_cast<Index>(c);
      add.one_row = one_row;
      tally.add(add, threshold);
    }
  }
  if (tally.significant > before) ++tally.significant_columns;
  if (tally.candidates > counted) ++tally.columns_tested;
  if (untested) ++tally.columns_untested;
}

SignatureHit BlockSignatures::range_hit(Index o, Index jj, std::size_t c, Index col) const {
  const auto p = static_cast<std::size_t>(padded_);
  const double* rw = r_w_.data() + at(o, jj);
  const double* w = w_.data() + at(o, jj);
  const double* slw = slack_w_.data() + at(o, jj);
  const double* er = exact_r_.data() + at(o, jj);
  const double* es = exact_slack_.data() + at(o, jj);
  const double* m = mask_.data() + at(o, jj);
  const double* a = a_.data() + c * p;
  // Weights a / sigma^2 (docs/error-bounds.md §6d): the rows that rounding disturbs least
  // count most, as in a weighted least-squares fit. Rows without rounding (sigma 0) are summed
  // apart: on them any excess over the slack is a fault.
  double num[kLanes] = {}, den[kLanes] = {}, aa[kLanes] = {}, sk[kLanes] = {};
  double ex[kLanes] = {}, exs[kLanes] = {};
  for (std::size_t i0 = 0; i0 < p; i0 += kLanes) {
    for (Index l = 0; l < kLanes; ++l) {
      const std::size_t i = i0 + static_cast<std::size_t>(l);
      const double a2 = a[i] * a[i];
      num[l] += a[i] * rw[i];
      den[l] += a2 * w[i];
      aa[l] += a2 * m[i];
      sk[l] += std::fabs(a[i]) * slw[i];
      ex[l] += a[i] * er[i];
      exs[l] += std::fabs(a[i]) * es[i];
    }
  }
  const double num_t = lane_total(num), den_t = lane_total(den), aa_t = lane_total(aa);
  const double sk_t = lane_total(sk), ex_t = lane_total(ex), exs_t = lane_total(exs);
  SignatureHit h;
  h.output = o;
  h.col = col;
  h.range = static_cast<Index>(c);
  // A range whose partial dots are all zero (zero weights or activations there) has no
  // signature to find; it is not a candidate (aa 0 marks it).
  h.fit = den_t > 0 ? num_t / den_t : (aa_t > 0 ? ex_t / aa_t : 0.0);
  // sum (a / sigma^2)^2 sigma^2 = sum a^2 / sigma^2: the weighted sum's scale.
  h.z = den_t > 0 ? (std::fabs(num_t) - sk_t) / std::sqrt(den_t) : 0.0;
  // No rounding at all (sigma 0: exact arithmetic): any excess is a fault.
  if (std::fabs(ex_t) - exs_t > 0) h.z = HUGE_VAL;
  if (!(aa_t > 0)) h.col = -1;
  // Sums beyond f64's range (squares of partial dots near FLT_MAX over a small sigma).
  if (!std::isfinite(num_t) || !std::isfinite(den_t) || !std::isfinite(sk_t) || !std::isfinite(ex_t) ||
      !std::isfinite(exs_t) || !std::isfinite(aa_t)) {
    h.col = kUntested;
  }
  return h;
}

}  // namespace ncert::certify
