#include "certify/projection/residual_tally.h"

#include <algorithm>
#include <cmath>
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

void SignatureTally::add(const SignatureHit& h, double threshold) {
  ++candidates;
  if (h.z > threshold) ++significant;
  z.add(std::max(h.z, 0.0));
  keep_strongest(strongest, h);
}

void SignatureTally::merge(const SignatureTally& o) {
  candidates += o.candidates;
  significant += o.significant;
  significant_columns += o.significant_columns;
  z.merge(o.z);
  for (const SignatureHit& h : o.strongest) keep_strongest(strongest, h);
}

void VarianceTally::merge(const VarianceTally& o) {
  values += o.values;
  energy += o.energy;
  var += o.var;
  var2 += o.var2;
}

BlockSignatures::BlockSignatures(const std::vector<TileRange>& ranges, Index outputs, Index width)
    : ranges_(ranges),
      outputs_(outputs),
      width_(width),
      num_(static_cast<std::size_t>(outputs * width) * ranges.size(), 0.0),
      den_(num_.size(), 0.0),
      aa_(num_.size(), 0.0),
      slack_(num_.size(), 0.0),
      a_(ranges.size()),
      seen_(static_cast<std::size_t>(outputs * width), false) {}

void BlockSignatures::add(Index o, Index jj, double r, double var, double slack, const float* tile_dot,
                          Index tile_stride) {
  const std::size_t n = ranges_.size();
  for (std::size_t c = 0; c < n; ++c) {
    const TileRange& g = ranges_[c];
    if (g.left < 0) {
      a_[c] = static_cast<double>(tile_dot[g.first * tile_stride]);
    } else {
      a_[c] = a_[static_cast<std::size_t>(g.left)] + (g.right >= 0 ? a_[static_cast<std::size_t>(g.right)] : 0.0);
    }
  }
  const std::size_t cell = static_cast<std::size_t>(o * width_ + jj);
  seen_[cell] = true;
  double* num = num_.data() + cell * n;
  double* den = den_.data() + cell * n;
  double* aa = aa_.data() + cell * n;
  double* sl = slack_.data() + cell * n;
  const double* a = a_.data();
  for (std::size_t c = 0; c < n; ++c) {
    const double a2 = a[c] * a[c];
    num[c] += a[c] * r;
    den[c] += a2 * var;
    aa[c] += a2;
    sl[c] += std::fabs(a[c]) * slack;
  }
}

void BlockSignatures::finish(Index col_begin, double threshold, std::vector<SignatureTally>& out) {
  const std::size_t n = ranges_.size();
  for (Index o = 0; o < outputs_; ++o) {
    for (Index jj = 0; jj < width_; ++jj) {
      const std::size_t cell = static_cast<std::size_t>(o * width_ + jj);
      if (!seen_[cell]) continue;
      seen_[cell] = false;
      double* num = num_.data() + cell * n;
      double* den = den_.data() + cell * n;
      double* aa = aa_.data() + cell * n;
      double* sl = slack_.data() + cell * n;
      const Index before = out[static_cast<std::size_t>(o)].significant;
      for (std::size_t c = 0; c < n; ++c) {
        // A range whose partial dots are all zero (zero weights or activations there) has no
        // signature to find; it is not a candidate.
        if (aa[c] > 0) {
          SignatureHit h;
          h.output = o;
          h.col = col_begin + jj;
          h.range = static_cast<Index>(c);
          const double excess = std::fabs(num[c]) - sl[c];
          // No rounding at all (sigma 0: exact arithmetic): any excess is a fault.
          h.z = den[c] > 0 ? excess / std::sqrt(den[c]) : (excess > 0 ? HUGE_VAL : 0.0);
          h.fit = num[c] / aa[c];
          out[static_cast<std::size_t>(o)].add(h, threshold);
        }
        num[c] = den[c] = aa[c] = sl[c] = 0.0;
      }
      if (out[static_cast<std::size_t>(o)].significant > before) ++out[static_cast<std::size_t>(o)].significant_columns;
    }
  }
}

}  // namespace ncert::certify
