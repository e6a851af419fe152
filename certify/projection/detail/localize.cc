#include "certify/projection/detail/localize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "certify/projection/detail/text.h"
#include "certify/projection/reference_pass.h"
#include "certify/projection/residual_tally.h"
#include "certify/report/format.h"
#include "reference/af4.h"

namespace ncert::certify::detail {

namespace {

/// Rows below which nothing is named: one parameter fits any single row exactly, so with one
/// row every hypothesis explains all of it and the choice is arbitrary (a x2 scale fault at
/// M = 1 read as "group 1: zero point +2"); with 4, four rows must agree.
constexpr Index kMinFitRows = 4;
/// Other columns a row standing out in the strongest column is tested in (evenly spaced): a
/// row's activation scale moves every column, one wrong value only its own.
constexpr Index kRowColumns = 64;
/// Rows at most named together, and at most a quarter of the column's rows: a few tokens' wrong
/// activation scales; beyond that the rows are much of a small batch, and a column's or a
/// group's structure is the likelier reading.
constexpr std::size_t kMaxFitRows = 8;

/// The engine output a column is fitted in, and per row of x the row of that output holding it
/// (-1: none): y_unpacked holds every row, y_packed the selected rows in place, y_compact the
/// selected rows in their slots. A fault of the packed path alone is in these rows, and
/// y_unpacked holds none of it.
struct OutputRows {
  EngineOutputId id = EngineOutputId::kUnpacked;
  const EngineOutput* out = nullptr;
  std::vector<Index> source;
  const std::vector<Index>* slot_of_row = nullptr;  ///< ProjectionFacts::slot_of_row
};

OutputRows output_rows(const ProjectionFacts& f, EngineOutputId id) {
  OutputRows o;
  o.id = id;
  o.out = &f.data.output(id);
  o.source.resize(static_cast<std::size_t>(f.info().m));
  o.slot_of_row = &f.slot_of_row;
  for (std::size_t i = 0; i < o.source.size(); ++i) {
    const Index slot = f.slot_of_row[i];
    if (id == EngineOutputId::kCompact) {
      o.source[i] = slot;
    } else {
      o.source[i] = id == EngineOutputId::kUnpacked || slot >= 0 ? static_cast<Index>(i) : -1;
    }
  }
  return o;
}

/// What column_residuals also sums, beside the column's own hypotheses.
struct Extras {
  std::vector<Index> part_rows;          ///< these rows' partial dots over K ranges
  Index part_width = 0;                  ///< this wide
  Index range_begin = 0, range_end = 0;  ///< the strongest candidate's K range (empty: none)
  /// The activations multiplied, M x K row-major, read once for many columns (dense_activations;
  /// nullptr: read per column).
  const double* x = nullptr;
};

/// The activations column_residuals multiplies, M x K row-major: the engine's quantized values
/// where x_quant is declared. Each is a decode through the codes' and scales' types (about 10 ns):
/// the pooled test reads them for hundreds of columns.
std::vector<double> dense_activations(const ProjectionInfo& info, const reference::LinearProblem& p) {
  const bool quantized = info.x_quant.type != reference::XQuantType::kNone;
  std::vector<double> x(static_cast<std::size_t>(p.x.rows * info.k));
  for (Index i = 0; i < p.x.rows; ++i) {
    for (Index k = 0; k < info.k; ++k) {
      x[static_cast<std::size_t>(i * info.k + k)] =
          quantized ? p.x_quantized.value(i, k) : static_cast<double>(p.x.at(i, k));
    }
  }
  return x;
}

/// One column of an engine output against its exact values, per row of x: the residual r (NaN
/// where the output holds no such row, or it or the exact value is not finite), the exact dot
/// product, the noise scale v (sum |x w| + |bias|
/// + |residual|: a dot product's rounding grows with it, and an output's rounding with |y| <= v),
/// the partial dot over the candidate's range; per row and group the sums of x and of x w over
/// the group (groups = 0 for weights without groups).
struct ColumnResiduals {
  Index rows = 0, groups = 0, group_size = 0;
  bool offsets = false;  ///< AF4 zero-point or affine: a group's weights can move by a constant
  bool zero_point = false;
  /// AF4 affine (w = s q + b): sxw holds sum x (w - b), the part a wrong scale moves.
  bool affine = false;
  std::vector<double> r, dot, v, range, sx, sxw, scale;  ///< scale: per group (zero-point only)
  std::vector<double> exact;                             ///< the exact output: dot, bias, residual
  /// Extras::part_rows' partial dots: those of part_rows[j] from j x (K / part_width rounded up).
  std::vector<double> parts;
  /// Per part, the sum of the column's weights over it, then over the whole K: what a row's
  /// activations moved by one constant there (a zero point) add to its output, per unit.
  std::vector<double> part_w;
};

ColumnResiduals column_residuals(const LoadedProjection& d, const reference::LinearProblem& p, const OutputRows& rows,
                                 Index col, const Extras& extras = {}) {
  const ProjectionInfo& info = *d.info;
  const Index K = info.k;
  const reference::WeightSegment& seg = reference::segment_of(d.weights, col);
  ColumnResiduals c;
  c.rows = p.x.rows;
  const Index gs = segment_group_size(seg);
  c.group_size = gs > 0 ? gs : K;
  c.groups = gs > 0 ? K / gs : 0;
  const bool af4 = seg.format == reference::WeightFormat::kAf4;
  c.zero_point = af4 && seg.af4.layout.variant == reference::Af4Variant::kZeroPoint;
  c.affine = af4 && seg.af4.layout.variant == reference::Af4Variant::kAffine;
  c.offsets = c.zero_point || c.affine;
  std::vector<double> bias;  // per group (affine only)
  for (Index g = 0; g < c.groups; ++g) {
    if (c.zero_point) c.scale.push_back(reference::af4_scale(seg.af4, col - seg.row_begin, g));
    if (c.affine) bias.push_back(reference::af4_bias(seg.af4, col - seg.row_begin, g));
  }
  std::vector<double> w(static_cast<std::size_t>(K));
  reference::decode_weight_row(d.weights, col, p.x.dtype, w.data(), nullptr, nullptr);
  const bool quantized = info.x_quant.type != reference::XQuantType::kNone;
  const std::size_t cells = static_cast<std::size_t>(c.rows * c.groups);
  c.sx.assign(cells, 0.0);
  c.sxw.assign(cells, 0.0);
  // Per row of x, its place in part_rows (-1: none).
  std::vector<Index> part_of(static_cast<std::size_t>(c.rows), -1);
  const Index part_count = extras.part_width > 0 ? (K + extras.part_width - 1) / extras.part_width : 0;
  for (std::size_t j = 0; j < extras.part_rows.size(); ++j) {
    part_of[static_cast<std::size_t>(extras.part_rows[j])] = static_cast<Index>(j);
  }
  c.parts.assign(extras.part_rows.size() * static_cast<std::size_t>(part_count), 0.0);
  if (part_count > 0) {
    c.part_w.assign(static_cast<std::size_t>(part_count) + 1, 0.0);
    for (Index k = 0; k < K; ++k) {
      c.part_w[static_cast<std::size_t>(k / extras.part_width)] += w[static_cast<std::size_t>(k)];
      c.part_w.back() += w[static_cast<std::size_t>(k)];
    }
  }
  // Per k its part and group: no division per product.
  std::vector<Index> part_at, group_at;
  for (Index k = 0; k < K && part_count > 0; ++k) part_at.push_back(k / extras.part_width);
  for (Index k = 0; k < K && c.groups > 0; ++k) group_at.push_back(k / gs);
  double v_max = 0;
  for (Index i = 0; i < c.rows; ++i) {
    double dot = 0, mag = 0, range = 0;
    const Index part = part_of[static_cast<std::size_t>(i)];
    double* parts = part >= 0 ? c.parts.data() + part * part_count : nullptr;
    const double* dense = extras.x != nullptr ? extras.x + i * K : nullptr;
    for (Index k = 0; k < K; ++k) {
      const auto kk = static_cast<std::size_t>(k);
      // The products use the engine's quantized activations where x_quant is declared.
      const double x = dense != nullptr ? dense[kk]
                       : quantized      ? p.x_quantized.value(i, k)
                                        : static_cast<double>(p.x.at(i, k));
      const double xw = x * w[kk];
      dot += xw;
      mag += std::fabs(xw);
      if (k >= extras.range_begin && k < extras.range_end) range += xw;
      if (parts != nullptr) parts[part_at[kk]] += xw;
      if (c.groups > 0) {
        const Index g = group_at[kk];
        const std::size_t at = static_cast<std::size_t>(i * c.groups + g);
        c.sx[at] += x;
        // An affine group's scale moves s q only, its bias terms b x stay: w - b is s q up to
        // the dequantization's rounding.
        c.sxw[at] += c.affine ? x * (w[kk] - bias[static_cast<std::size_t>(g)]) : xw;
      }
    }
    double y_star = dot;
    if (reference::has_bias(p.epilogue)) {
      y_star += p.bias.at(col);
      mag += std::fabs(static_cast<double>(p.bias.at(col)));
    }
    if (reference::has_residual(p.epilogue)) {
      y_star += p.residual.at(i, col);
      mag += std::fabs(static_cast<double>(p.residual.at(i, col)));
    }
    const Index source = rows.source[static_cast<std::size_t>(i)];
    const double r = source >= 0
                         ? static_cast<double>(rows.out->value(info.output, info.out_stride, source, col)) - y_star
                         : std::nan("");
    const bool finite = std::isfinite(r) && std::isfinite(dot) && std::isfinite(mag);
    c.r.push_back(finite ? r : std::nan(""));
    c.exact.push_back(y_star);
    c.dot.push_back(dot);
    c.range.push_back(range);
    c.v.push_back(finite ? mag : 0.0);
    v_max = std::max(v_max, c.v.back());
  }
  // A row of zero activations has no rounding, so any residual there stands out: a floor 2^-30
  // under the column's largest scale (1 where every row is zero) keeps the weights finite.
  const double floor = v_max > 0 ? std::ldexp(v_max, -30) : 1.0;
  for (double& v : c.v) v = std::max(v, floor);
  return c;
}

/// The hypotheses, each one parameter fitted by least squares over the column's finite rows,
/// weighted by 1 / v^2 (each row's residual against its own noise scale: a row of activations
/// 100 times the others' has 100 times their rounding, and would otherwise stand out in every
/// column). kCandidate: the strongest candidate's own K range, scaled.
enum Family : std::size_t { kGroupScale, kColumnScale, kCandidate, kGroupOffset, kConstant, kRowAlone, kFamilies };

struct Fits {
  Index rows = 0;                          ///< finite rows
  double rr = 0;                           ///< their weighted residual energy
  std::array<double, kFamilies> energy{};  ///< explained, per family (its best member)
  std::array<double, kFamilies> coef{};    ///< the fitted parameter of that member
  Index scale_group = -1, offset_group = -1, row = -1;

  /// The best family, and what the best of the others explains.
  std::size_t best() const {
    return static_cast<std::size_t>(std::max_element(energy.begin(), energy.end()) - energy.begin());
  }
  /// The most energy any family but `except` (and `also`, where given) explains.
  double best_other(std::size_t except, std::size_t also = kFamilies) const {
    double e = 0;
    for (std::size_t i = 0; i < kFamilies; ++i) {
      if (i != except && i != also) e = std::max(e, energy[i]);
    }
    return e;
  }
};

/// Least squares of r on a over the finite rows: (explained energy, coefficient).
void consider(double ra, double aa, std::size_t family, Index member, Index* best_member, Fits& f) {
  if (!(aa > 0)) return;
  const double e = ra * ra / aa;
  if (e > f.energy[family]) {
    f.energy[family] = e;
    f.coef[family] = ra / aa;
    if (best_member != nullptr) *best_member = member;
  }
}

/// Row i's weighted residual r / v (NaN where not finite).
double weighted(const ColumnResiduals& c, Index i) {
  return c.r[static_cast<std::size_t>(i)] / c.v[static_cast<std::size_t>(i)];
}

Fits fit(const ColumnResiduals& c) {
  Fits f;
  double r_dot = 0, dot_dot = 0, r_one = 0, one_one = 0, r_range = 0, range_range = 0;
  std::vector<double> r_sx(static_cast<std::size_t>(c.groups)), sx_sx(r_sx.size()), r_sxw(r_sx.size()),
      sxw_sxw(r_sx.size());
  for (Index i = 0; i < c.rows; ++i) {
    const double r = weighted(c, i);
    if (std::isnan(r)) continue;
    const double u = 1 / c.v[static_cast<std::size_t>(i)];  // every regressor weighted alike
    ++f.rows;
    f.rr += r * r;
    const double dot = c.dot[static_cast<std::size_t>(i)] * u;
    r_dot += r * dot;
    dot_dot += dot * dot;
    r_one += r * u;
    one_one += u * u;
    const double range = c.range[static_cast<std::size_t>(i)] * u;
    r_range += r * range;
    range_range += range * range;
    for (std::size_t g = 0; g < r_sx.size(); ++g) {
      const double sx = c.sx[static_cast<std::size_t>(i * c.groups) + g] * u;
      const double sxw = c.sxw[static_cast<std::size_t>(i * c.groups) + g] * u;
      r_sx[g] += r * sx;
      sx_sx[g] += sx * sx;
      r_sxw[g] += r * sxw;
      sxw_sxw[g] += sxw * sxw;
    }
    consider(r, 1.0, kRowAlone, i, &f.row, f);
  }
  consider(r_dot, dot_dot, kColumnScale, 0, nullptr, f);
  consider(r_range, range_range, kCandidate, 0, nullptr, f);
  consider(r_one, one_one, kConstant, 0, nullptr, f);
  for (std::size_t g = 0; g < r_sx.size(); ++g) {
    consider(r_sxw[g], sxw_sxw[g], kGroupScale, static_cast<Index>(g), &f.scale_group, f);
    if (c.offsets) consider(r_sx[g], sx_sx[g], kGroupOffset, static_cast<Index>(g), &f.offset_group, f);
  }
  return f;
}

/// A family is the location where it explains at least half the energy and leaves at most a
/// quarter of what the best other family leaves: a zero point off by one in an outside
/// exporter's dump explained 100 % against 20 % for a scale; in a fixture of 3 groups of 32 the
/// scale of the same group still explained 90 % (every x of one sign), the rest being the zero
/// point's alone; a bias off by 0.5 over positive activations: the zero point 99.49 %, the
/// constant all of it.
bool dominates(double explained, double other, double total) {
  return explained >= 0.5 * total && total - explained <= 0.25 * (total - other);
}

/// The fewest rows, the one with the most weighted energy first, whose energy in the column
/// dominates by `dominates`' rule against the best family but a row alone: one row, or up to
/// kMaxFitRows and a quarter of the finite rows. Empty where there is none. With one row this
/// is the row-alone family dominating; two rows of equal residuals explain half each and no
/// single family dominates.
std::vector<Index> standing_rows(const ColumnResiduals& c, const Fits& fits) {
  std::vector<std::pair<double, Index>> energy;
  for (Index i = 0; i < c.rows; ++i) {
    const double r = weighted(c, i);
    if (!std::isnan(r)) energy.emplace_back(r * r, i);
  }
  // The most energy first; among equals, the lower row (fit's own row-alone choice).
  std::sort(energy.begin(), energy.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  const std::size_t most = std::min({kMaxFitRows, energy.size(), std::max<std::size_t>(1, fits.rows / 4)});
  const double other = fits.best_other(kRowAlone);
  double sum = 0;
  for (std::size_t n = 0; n < most; ++n) {
    sum += energy[n].first;
    if (dominates(sum, other, fits.rr)) {
      std::vector<Index> set;
      for (std::size_t j = 0; j <= n; ++j) set.push_back(energy[j].second);
      return set;
    }
  }
  return {};
}

/// A row is named beside others only where one scale of its dot product (or of one activation
/// group's part) explains this share of its residual energy over the strongest column and the
/// tested ones: a row of rounding noise alone fits a scale by chance only, and a row holding one
/// wrong value fits it in that one column. A reviewer's legitimate row of one large activation
/// (its noise 10-70x the others', weighted) and a row with one value + 0.002 were named beside
/// a row at 1.01x before this rule.
constexpr double kRowScaleShare = 0.9;
/// The other family's fit (scale beside offset) is named beside the best where it leaves at most
/// this many times the energy the best leaves. A reviewer's group of activations within 5 % of
/// one value: a zero point -8 explained 97.410 % as an offset and 97.388 % as a scale (each
/// leaving ~2.6 %); an ordinary scale fault leaves under 1 % where an offset leaves 50 % or more.
constexpr double kAlike = 2.0;
/// Or where it explains all but this share of the row's energy: at f32 outputs both readings of
/// a group of activations within 0.2 % of one value explained 100.000 %, the better leaving
/// rounding noise and the other a little more (a zero point +1 read as a scale of 0.9961x alone).
constexpr double kAlikeFloor = 1e-3;

/// The pooled test's rule for a rival fit alike (RowScan::best_part): short of the best by at most
/// this many columns' worth of the noise the best leaves (3 sigma of a difference of fits).
constexpr double kPooledAlike = 9;

/// Columns (the strongest and the tested ones) below which no row is named beside others: over
/// n columns the share one direction takes of isotropic noise is Beta(1/2, (n - 1) / 2), beyond
/// 0.9 with probability ~1e-3 at n = 8 and under 1e-7 at n = 16.
constexpr std::size_t kRowScaleColumns = 16;

/// The other columns a row test looks at (up to kRowColumns, evenly spaced), per column each
/// row's weighted residual energy (0 where not finite), the column's weighted energy and what
/// the best family but a row alone explains; over all of them and the strongest column, per
/// row its energy and per K part (the whole row last) sum r a and sum a^2 of its weighted
/// values.
struct RowScan {
  Index rows = 0, width = 0;
  std::size_t parts = 0;
  /// Integer x_quant: a part of a row may also fit an offset (its zero points moved by one step
  /// count z, each group's activations by -z times its scale), by r_o and o_o: sum r o and sum o^2
  /// of o = the part's sum over its groups of scale x the column's weight sum there, weighted.
  bool offsets = false;
  std::vector<double> xs;                   ///< offsets: per row, each part's activation scale
  std::vector<std::vector<double>> energy;  ///< per tested column, per row
  std::vector<double> rr, other;            ///< per tested column
  std::vector<Index> cols;                  ///< per tested column, its number
  std::vector<double> r_a, a_a;             ///< per row, (parts + 1) each
  std::vector<double> r_o, o_o;             ///< the same for offsets (offsets only)
  std::vector<double> row_energy;           ///< per row, over every column added
  std::vector<Index> row_columns;           ///< per row, the columns added where it is finite
  std::size_t added = 0;                    ///< columns added (the tested and the strongest)

  std::size_t tested() const { return rr.size(); }
  struct Fit {
    std::size_t part = 0;  ///< parts: the whole row
    double explained = 0;
    /// The scale's coefficient (the row fits 1 + coef times the part) or the offset's: -coef is
    /// the zero point's change in steps.
    double coef = 0;
  };
  struct PartFit : Fit {
    bool offset = false;
    /// The other family's best (an offset beside a scale, a scale beside an offset) where it
    /// leaves at most kAlike times the energy the best leaves: the data cannot tell them apart
    /// (a group of nearly constant activations moves alike under both).
    std::optional<Fit> alike;
  };
  /// The part (parts: the whole row) whose scale, or with `offsets` whose offset, explains most
  /// of row i's energy, and that energy: the whole row's scale unless another explains more.
  /// `pooled` (the pooled test's rows, each past what noise reaches): a rival alike by the
  /// pooled rule below, and the better fit leads, alike or not: under bf16 noise a whole number
  /// of steps is no evidence (a scale x 1.01 of codes 156-255 fitted -2.05 steps, alike).
  PartFit best_part(Index i, bool pooled = false) const {
    auto best_of = [&](const std::vector<double>& ra, const std::vector<double>& aa) {
      Fit best{parts, 0.0, 0.0};
      for (std::size_t a = parts + 1; a-- > 0;) {
        if (a < parts && parts == 1) continue;  // one part: the whole row
        const std::size_t at = static_cast<std::size_t>(i) * (parts + 1) + a;
        const double e = aa[at] > 0 ? ra[at] * ra[at] / aa[at] : 0.0;
        if (e > best.explained) best = {a, e, ra[at] / aa[at]};
      }
      return best;
    };
    const Fit scale = best_of(r_a, a_a);
    PartFit best;
    static_cast<Fit&>(best) = scale;
    if (!offsets) return best;
    const Fit offset = best_of(r_o, o_o);
    const bool offset_wins = offset.explained > scale.explained;
    if (offset_wins) {
      static_cast<Fit&>(best) = offset;
      best.offset = true;
    }
    const Fit& rival = offset_wins ? scale : offset;
    const double e = row_energy[static_cast<std::size_t>(i)];
    // Beside a row of noise every fit is alike. Pooled, the best leaves noise over n columns: the rival is alike where
    // it falls short of the best by at most kPooledAlike columns' worth of that noise (twice the noise, the rule above,
    // is n / 2 columns' worth there, and every fit of a row of noise was alike).
    const double n = static_cast<double>(row_columns[static_cast<std::size_t>(i)]);
    const bool close = pooled ? best.explained - rival.explained <= kPooledAlike * (e - best.explained) / (n - 1)
                              : e - rival.explained <= std::max(kAlike * (e - best.explained), kAlikeFloor * e);
    // Only a reading has a rival (kRowScaleShare, or the pooled test's own bound).
    if ((pooled || best.explained >= kRowScaleShare * e) && rival.explained > 0 && close) {
      best.alike = rival;
      // Alike, a whole number of steps is the evidence left: the zero point leads where its
      // steps are one (within a fifth), the scale otherwise.
      const double steps = -(best.offset ? best.coef : rival.coef);
      const double whole = std::round(steps);
      if (!pooled && (whole != 0 && std::fabs(steps - whole) <= 0.2) != best.offset) {
        std::swap(static_cast<Fit&>(best), *best.alike);
        best.offset = !best.offset;
      }
    }
    return best;
  }
  /// Whether row i fits a scale or an offset (kRowScaleShare) over enough columns
  /// (kRowScaleColumns).
  bool scaled(Index i) const {
    const double e = row_energy[static_cast<std::size_t>(i)];
    return added >= kRowScaleColumns && e > 0 && best_part(i).explained >= kRowScaleShare * e;
  }
  double set_energy(std::size_t column, const std::vector<Index>& set) const {
    double e = 0;
    for (Index i : set) e += energy[column][static_cast<std::size_t>(i)];
    return e;
  }
  /// The tested columns where `set` stands out by `dominates`' rule.
  Index standing_out(const std::vector<Index>& set) const {
    Index n = 0;
    for (std::size_t t = 0; t < tested(); ++t) n += rr[t] > 0 && dominates(set_energy(t, set), other[t], rr[t]);
    return n;
  }
  void add(const ColumnResiduals& c) {
    const std::size_t per_row = parts + 1;
    ++added;
    for (Index i = 0; i < rows; ++i) {
      const std::size_t at = static_cast<std::size_t>(i);
      const double r = weighted(c, i), u = 1 / c.v[at];
      if (std::isnan(r)) continue;
      row_energy[at] += r * r;
      ++row_columns[at];
      double* ra = r_a.data() + at * per_row;
      double* aa = a_a.data() + at * per_row;
      for (std::size_t a = 0; a < parts; ++a) {
        const double part = c.parts[at * parts + a] * u;
        ra[a] += r * part;
        aa[a] += part * part;
      }
      ra[parts] += r * c.dot[at] * u;
      aa[parts] += c.dot[at] * u * c.dot[at] * u;
      if (offsets) {
        double* ro = r_o.data() + at * per_row;
        double* oo = o_o.data() + at * per_row;
        double whole = 0;
        for (std::size_t a = 0; a <= parts; ++a) {
          // Each group's activations move by its own scale per step: the whole row's offset is
          // every group's at once (a reviewer's every zero point + 1 in groups of 32 fitted
          // 0.856 steps as one constant over K).
          const double o = a < parts ? xs[at * parts + a] * c.part_w[a] * u : whole;
          whole += a < parts ? o : 0.0;
          ro[a] += r * o;
          oo[a] += o * o;
        }
      }
    }
  }
};

/// The parts of a row a row fault may scale: the whole K, or x_quant's activation groups.
Extras row_parts(const ProjectionInfo& info, Index rows) {
  const Index K = info.k;
  Extras extras;
  extras.part_width =
      info.x_quant.type != reference::XQuantType::kNone && info.x_quant.group > 0 && info.x_quant.group < K
          ? info.x_quant.group
          : K;
  for (Index i = 0; i < rows; ++i) extras.part_rows.push_back(i);
  return extras;
}

/// An empty scan of every row's parts (Extras::part_width wide).
RowScan new_scan(const ProjectionInfo& info, const reference::LinearProblem& p, const Extras& extras) {
  RowScan s;
  s.rows = p.x.rows;
  s.width = extras.part_width;
  s.parts = static_cast<std::size_t>((info.k + s.width - 1) / s.width);
  s.r_a.assign(static_cast<std::size_t>(s.rows) * (s.parts + 1), 0.0);
  s.a_a.assign(s.r_a.size(), 0.0);
  // An integer code's zero point moves every activation of its group by one step of the scale.
  s.offsets = reference::x_quant_integer(info.x_quant.type);
  if (s.offsets) {
    s.r_o.assign(s.r_a.size(), 0.0);
    s.o_o.assign(s.r_a.size(), 0.0);
    for (Index i = 0; i < s.rows; ++i) {
      for (std::size_t a = 0; a < s.parts; ++a)
        s.xs.push_back(p.x_quantized.scale(i, static_cast<Index>(a) * s.width / p.x_quantized.group));
    }
  }
  s.row_energy.assign(static_cast<std::size_t>(s.rows), 0.0);
  s.row_columns.assign(static_cast<std::size_t>(s.rows), 0);
  return s;
}

RowScan scan_rows(const LoadedProjection& d, const reference::LinearProblem& p, const OutputRows& rows, Index col,
                  Index first_row, const Extras& extras) {
  const ProjectionInfo& info = *d.info;
  RowScan s = new_scan(info, p, extras);
  const Index others = std::min(kRowColumns, info.n - 1);
  for (Index t = 0; t < others; ++t) {
    // Evenly spaced over the n - 1 columns other than col.
    Index n = t * (info.n - 1) / others;
    n += n >= col ? 1 : 0;
    const ColumnResiduals c = column_residuals(d, p, rows, n, extras);
    const Fits g = fit(c);
    if (g.rows < kMinFitRows || std::isnan(weighted(c, first_row))) continue;
    std::vector<double> e(static_cast<std::size_t>(s.rows), 0.0);
    for (Index i = 0; i < s.rows; ++i) {
      const double r = weighted(c, i);
      e[static_cast<std::size_t>(i)] = std::isnan(r) ? 0.0 : r * r;
    }
    s.energy.push_back(std::move(e));
    s.cols.push_back(n);
    s.rr.push_back(g.rr);
    s.other.push_back(g.best_other(kRowAlone));
    s.add(c);
  }
  return s;
}

/// The tail probability under which a row of rounding noise stands out in more of the tested
/// columns than isolated() allows.
constexpr double kChanceTail = 1e-4;

/// The most columns of `tested` a row of noise stands out in, by `dominates`' rule, with
/// probability at least kChanceTail: Poisson at `rate` per column.
Index chance_stand_outs(double rate, Index tested) {
  const double lambda = rate * static_cast<double>(tested);
  double term = std::exp(-lambda), cdf = term;
  Index k = 0;
  while (1 - cdf >= kChanceTail && k < tested) {
    ++k;
    term *= lambda / static_cast<double>(k);
    cdf += term;
  }
  return k;
}

/// Whether rows `named` hold wrong values, not a row fault: each stands out, by `dominates`'
/// rule, in no more of the tested columns (those in `skip` not counted) than rows of rounding
/// noise do (chance_stand_outs at the rate the other rows stand out there, one count added),
/// and fits no scale over the columns added (RowScan::scaled). A row fault stands out in at
/// least half and fits its scale. A row of noise holds half a column's energy by chance in
/// about 3 % of columns at M = 8 rows (one chi-square(1) of 8 above the other 7 together),
/// 2 of 63 expected: requiring none, a reviewer's two wrong values at M = 8 went unnamed (row 2
/// stood out in 1 of 63); at M = 32 the rate is about 6e-6, and the one count added allows 2.
bool isolated(const RowScan& s, const std::vector<Index>& named, const std::vector<Index>& skip) {
  Index columns = 0, chance = 0;
  std::vector<Index> count(named.size(), 0);
  for (std::size_t c = 0; c < s.tested(); ++c) {
    if (std::find(skip.begin(), skip.end(), s.cols[c]) != skip.end() || !(s.rr[c] > 0)) continue;
    ++columns;
    for (Index i = 0; i < s.rows; ++i) {
      if (!dominates(s.energy[c][static_cast<std::size_t>(i)], s.other[c], s.rr[c])) continue;
      const auto at = std::find(named.begin(), named.end(), i);
      if (at == named.end()) {
        ++chance;
      } else {
        ++count[static_cast<std::size_t>(at - named.begin())];
      }
    }
  }
  const Index others = s.rows - static_cast<Index>(named.size());
  if (columns == 0 || others <= 0) return false;
  const double rate = static_cast<double>(chance + 1) / static_cast<double>(others * columns);
  const Index allowed = chance_stand_outs(rate, columns);
  for (std::size_t j = 0; j < named.size(); ++j) {
    if (count[j] > allowed || s.scaled(named[j])) return false;
  }
  return true;
}

/// Whether column c, rows `named` left out, holds no more weighted residual energy than the
/// noisiest of the tested columns (those in `skip` not counted) holds in all its rows: what a
/// few wrong values leave is rounding noise. A weight wrong in one channel where two rows'
/// activations there are 8-15 and the others' about 1 moves every row of its column, those two
/// most (a reviewer's W[7, 17] x 1.05, ten values outside B): named as those two rows' wrong
/// values, "off by -0.04639, -0.04639", before this rule.
bool remainder_is_noise(const RowScan& s, const ColumnResiduals& c, const std::vector<Index>& named,
                        const std::vector<Index>& skip) {
  double noisiest = 0;
  bool any = false;
  for (std::size_t t = 0; t < s.tested(); ++t) {
    if (std::find(skip.begin(), skip.end(), s.cols[t]) != skip.end()) continue;
    noisiest = std::max(noisiest, s.rr[t]);
    any = true;
  }
  double rest = 0;
  for (Index i = 0; i < c.rows; ++i) {
    const double r = weighted(c, i);
    if (!std::isnan(r) && std::find(named.begin(), named.end(), i) == named.end()) rest += r * r;
  }
  return any && rest <= noisiest;
}

/// Whether row i's value of c is off from its exact value by more than one spacing of the
/// output there: within a spacing a bf16 or f16 value may be the correct rounding, or its
/// neighbour, and is no wrong value (a reviewer's column bias + 0.002 under bf16 outputs named
/// 8 values, 4 of them the exact values correctly rounded, the 1 / sum |x w| weights not
/// scaling the outputs' own rounding).
bool beyond_rounding(const ColumnResiduals& c, Index i, DType output) {
  const std::size_t at = static_cast<std::size_t>(i);
  return std::fabs(c.r[at]) > 2 * output_rounding_bound(std::fabs(c.exact[at]), output);
}

/// Each row's residual energy summed over the strongest column and the tested ones, as shares
/// of each column's, the most first (among equals, the lower row).
std::vector<std::pair<double, Index>> row_shares(const RowScan& s, const ColumnResiduals& strongest, const Fits& fits) {
  std::vector<std::pair<double, Index>> share;
  for (Index i = 0; i < s.rows; ++i) {
    const double r = weighted(strongest, i);
    if (std::isnan(r)) continue;
    double sum = r * r / fits.rr;
    for (std::size_t t = 0; t < s.tested(); ++t) {
      sum += s.rr[t] > 0 ? s.energy[t][static_cast<std::size_t>(i)] / s.rr[t] : 0.0;
    }
    share.emplace_back(sum, i);
  }
  std::sort(share.begin(), share.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  return share;
}

/// The rows named together. First the fewest: set.front() alone where it stands out in at least
/// half of the tested columns; else 2 to `most` rows fitting a scale (RowScan::scaled), with the
/// most energy over every column, that dominate the strongest column and stand out in at least
/// half of the others (two rows at 1.01x and 1.005x: the first held 98 % of the strongest column,
/// the second stood out with it). Then every other row fitting a scale (a third row at 1.005x
/// beside 1.015x and 1.01x). Empty where none stand out, or where more than `most` rows fit a
/// scale: the named rows would not be "alone".
std::vector<Index> rows_standing_out(const RowScan& s, const ColumnResiduals& strongest, const Fits& fits,
                                     const std::vector<Index>& set) {
  const Index tested = static_cast<Index>(s.tested());
  if (tested == 0) return {};
  const std::vector<std::pair<double, Index>> share = row_shares(s, strongest, fits);
  const std::size_t most = std::min({kMaxFitRows, share.size(), std::max<std::size_t>(1, fits.rows / 4)});
  std::vector<Index> named;
  if (2 * s.standing_out({set.front()}) >= tested) {
    named.push_back(set.front());
  } else {
    double in_strongest = 0;
    for (const auto& [e, i] : share) {
      if (named.size() >= most) return {};
      if (!s.scaled(i)) continue;
      named.push_back(i);
      in_strongest += weighted(strongest, i) * weighted(strongest, i);
      if (named.size() > 1 && dominates(in_strongest, fits.best_other(kRowAlone), fits.rr) &&
          2 * s.standing_out(named) >= tested) {
        break;
      }
    }
    if (named.size() < 2 || !dominates(in_strongest, fits.best_other(kRowAlone), fits.rr) ||
        2 * s.standing_out(named) < tested) {
      return {};
    }
  }
  for (const auto& [e, i] : share) {
    if (std::find(named.begin(), named.end(), i) == named.end() && s.scaled(i)) named.push_back(i);
  }
  return named.size() <= most ? named : std::vector<Index>{};
}

/// Row i as a row fit names it: its slot, and `best`, the part and the scale or offset its
/// outputs fit best over the columns `s` scanned (RowScan::best_part).
FittedRow fitted_row(const RowScan& s, const OutputRows& rows, Index i, Index K, const RowScan::PartFit& best) {
  FittedRow w;
  w.row = i;
  w.slot = rows.id != EngineOutputId::kUnpacked ? (*rows.slot_of_row)[static_cast<std::size_t>(i)] : -1;
  const auto group_of = [&](std::size_t part) { return part == s.parts ? -1 : static_cast<Index>(part); };
  // x = (q - zp) s: a zero point larger by z moves a group's activations by -z s; the value
  // of an offset is that move of the part's (first) group.
  const auto moved = [&](std::size_t part, double coef) {
    return coef * s.xs[static_cast<std::size_t>(i) * s.parts + (part == s.parts ? 0 : part)];
  };
  w.value = best.offset ? moved(best.part, best.coef) : 1 + best.coef;
  w.group = group_of(best.part);
  w.k_begin = best.part == s.parts ? 0 : static_cast<Index>(best.part) * s.width;
  w.k_end = best.part == s.parts ? K : std::min(K, w.k_begin + s.width);
  w.offset = best.offset;
  if (best.offset) w.steps = -best.coef;
  if (best.alike) {
    w.alike = true;
    w.alike_group = group_of(best.alike->part);
    w.alike_value = best.offset ? 1 + best.alike->coef : -best.alike->coef;
  }
  return w;
}

/// A row fit's own members are its first row's (LocationFit::rows, the most energy first).
void set_first_row(LocationFit& t) {
  const FittedRow& first = t.rows.front();
  t.row = first.row;
  t.slot = first.slot;
  t.value = first.value;
  t.group = first.group;
  t.k_begin = first.k_begin;
  t.k_end = first.k_end;
  t.offset = first.offset;
  t.steps = first.steps;
}

/// The row test: rows `set` (the fewest standing out) carry the strongest column's residual
/// energy; in up to kRowColumns other columns (evenly spaced), do they stand out too, by the
/// same rule, in at least half? Then a row fault (rows_standing_out names the rows), each row
/// fitted by a scale of its whole dot product or, where x_quant declares groups along K, of
/// one activation group's part (a wrong scale of one group: the part explaining most of the
/// rows together); with integer x_quant, or by an offset of its activations over one of those
/// parts (a zero point: the residuals follow each column's sum of weights there). One row standing out in none, where
/// the signature test found one significant column only (`one_column`): one wrong value. Otherwise (two values in one
/// column or in different columns, no other column to test) nothing: the candidates' reading
/// stands. `s`: the other columns scanned beside col, and `strongest` (col) added.
std::optional<LocationFit> row_fit(const LoadedProjection& d, const RowScan& s, const OutputRows& rows, Index col,
                                   const ColumnResiduals& strongest, const Fits& fits, const std::vector<Index>& set,
                                   bool one_column) {
  const std::vector<Index> named = rows_standing_out(s, strongest, fits, set);
  LocationFit t;
  t.output = std::string(engine_output_name(rows.id));
  t.col = col;
  t.columns = static_cast<Index>(s.tested());
  if (!named.empty()) {
    double e_rows = 0, e_total = fits.rr, e_alt = fits.best_other(kRowAlone);
    for (Index i : named) e_rows += weighted(strongest, i) * weighted(strongest, i);
    for (std::size_t c = 0; c < s.tested(); ++c) {
      e_rows += s.set_energy(c, named);
      e_total += s.rr[c];
      e_alt += s.other[c];
    }
    // Each row its own part: the whole dot product unless one activation group's explains more
    // (two rows' scales wrong in different groups fit each its own).
    const Index K = d.info->k;
    double e_best = 0;
    t.kind = named.size() == 1 ? FitKind::kRow : FitKind::kRows;
    for (Index i : named) {
      const RowScan::PartFit best = s.best_part(i);
      e_best += best.explained;
      t.rows.push_back(fitted_row(s, rows, i, K, best));
    }
    set_first_row(t);
    t.explained = std::min(1.0, e_rows / e_total);
    t.alternative_explained = std::min(1.0, e_alt / e_total);
    t.scale_explained = e_rows > 0 ? std::min(1.0, e_best / e_rows) : 0.0;
    return t;
  }
  // One value moves one column (more are a fault of several values, rows or columns, which no
  // single structure here explains: two values in columns 7 and 102, the second not among those
  // tested, read as one).
  if (set.size() > 1 || !one_column || !isolated(s, set, {}) || !remainder_is_noise(s, strongest, set, {}) ||
      !beyond_rounding(strongest, set.front(), d.info->output)) {
    return std::nullopt;
  }
  const std::size_t at = static_cast<std::size_t>(set.front());
  t.kind = FitKind::kElement;
  t.row = set.front();
  if (rows.id != EngineOutputId::kUnpacked) t.slot = (*rows.slot_of_row)[at];
  t.value = strongest.r[at];
  t.explained = std::min(1.0, fits.energy[kRowAlone] / fits.rr);
  t.alternative_explained = std::min(1.0, fits.best_other(kRowAlone) / fits.rr);
  return t;
}

/// The values test: a few wrong values (2 to kMaxFitRows in all) in up to kMaxFitRows columns,
/// the output's significant ones. In each, a few rows alone carry the column's energy
/// (standing_rows: they dominate it against every structure of the column's own), each off by
/// more than an output spacing (beyond_rounding), the rest of the column noise
/// (remainder_is_noise), and those rows isolated over up to kRowColumns other columns tested
/// (evenly spaced; a significant column among them not counted for stand-outs): a row fault
/// stands out in at least half. Before this test two values of row 9 in columns 70 and 2 read
/// as "column 70, k 0-255: the outputs fit 0.9967x that range's exact contribution", and two of
/// column 70 in rows 9 and 20 the same.
/// `scan`: row_fit's, the other columns beside the strongest with it added (significant.front():
/// the strongest candidate's column tops its output's); the other significant columns are added
/// to a copy.
std::optional<LocationFit> values_fit(const LoadedProjection& d, const reference::LinearProblem& p,
                                      const OutputRows& rows, const std::vector<Index>& significant,
                                      const RowScan& scan) {
  if (significant.empty() || significant.size() > kMaxFitRows) return std::nullopt;
  LocationFit t;
  t.kind = FitKind::kElements;
  t.output = std::string(engine_output_name(rows.id));
  double e_values = 0, e_total = 0, e_alt = 0;
  std::vector<Index> named_rows;
  const Extras extras = row_parts(*d.info, p.x.rows);
  std::vector<ColumnResiduals> held;     // the significant columns, added to the row scan
  std::vector<std::vector<Index>> sets;  // per significant column, its values' rows
  for (Index col : significant) {
    held.push_back(column_residuals(d, p, rows, col, extras));
    const ColumnResiduals& c = held.back();
    const Fits fits = fit(c);
    if (fits.rows < kMinFitRows || !(fits.rr > 0)) return std::nullopt;
    const std::vector<Index> set = standing_rows(c, fits);
    if (set.empty() || t.rows.size() + set.size() > kMaxFitRows) return std::nullopt;
    sets.push_back(set);
    for (Index i : set) {
      if (!beyond_rounding(c, i, d.info->output)) return std::nullopt;
      const std::size_t at = static_cast<std::size_t>(i);
      FittedRow w;
      w.row = i;
      w.col = col;
      w.slot = rows.id != EngineOutputId::kUnpacked ? (*rows.slot_of_row)[at] : -1;
      w.value = c.r[at];
      t.rows.push_back(w);
      e_values += weighted(c, i) * weighted(c, i);
      if (std::find(named_rows.begin(), named_rows.end(), i) == named_rows.end()) named_rows.push_back(i);
    }
    e_total += fits.rr;
    e_alt += fits.best_other(kRowAlone);
  }
  if (t.rows.size() < 2) return std::nullopt;
  RowScan s = scan;
  for (std::size_t j = 1; j < held.size(); ++j) s.add(held[j]);
  if (!isolated(s, named_rows, significant)) return std::nullopt;
  for (std::size_t j = 0; j < held.size(); ++j) {
    if (!remainder_is_noise(s, held[j], sets[j], significant)) return std::nullopt;
  }
  Index tested = 0;  // the other columns tested, the significant ones among them not counted
  for (Index col : s.cols) {
    tested += std::find(significant.begin(), significant.end(), col) == significant.end() ? 1 : 0;
  }
  const FittedRow& first = t.rows.front();
  t.row = first.row;
  t.slot = first.slot;
  t.col = first.col;
  t.value = first.value;
  t.columns = tested;
  t.explained = std::min(1.0, e_values / e_total);
  t.alternative_explained = std::min(1.0, e_alt / e_total);
  return t;
}

/// A kernel whose weight row `col` is another column's (output channels permuted, two rows
/// exchanged) leaves r = d per row, d = x (w_other - w_col), to the rounding: no scale or
/// offset of col's own explains it (a reviewer's exchanged rows read as a per-channel scale).
/// Where the other column is the one, r - d holds at most this share of r's weighted energy,
/// and of the other column's exact values' own: a random column leaves about the energy of d,
/// 1-2 times r's; a zeroed column (r = -y*) beside one of a tenth its size leaves that column's
/// energy, under 1 % of r's but all of its own (a reviewer's: "column 67 holds column 66's").
constexpr double kSwapRemainder = 0.01;

/// Column c as holding another column's exact values `held`, where its own are `own`: the
/// weighted energy r - (held - own) leaves over the rows c holds, the least-squares
/// coefficient of (held - own) in r, its energy, and the energy of `held` itself.
struct SwapFit {
  double remainder = 0, coef = 0, dd = 0, held = 0, rr = 0;
  /// Whether c holds them: the remainder is small against r's energy and held's.
  bool holds() const {
    return dd > 0 && rr > 0 && remainder <= kSwapRemainder * rr && remainder <= kSwapRemainder * held;
  }
};

SwapFit swap_of(const ColumnResiduals& c, const std::vector<double>& held, const std::vector<double>& own) {
  SwapFit s;
  double rd = 0;
  for (Index i = 0; i < c.rows; ++i) {
    const std::size_t at = static_cast<std::size_t>(i);
    const double r = weighted(c, i);
    const double x = (held[at] - own[at]) / c.v[at], h = held[at] / c.v[at];
    if (std::isnan(r) || !std::isfinite(x) || !std::isfinite(h)) continue;
    s.remainder += (r - x) * (r - x);
    rd += r * x;
    s.dd += x * x;
    s.held += h * h;
    s.rr += r * r;
  }
  s.coef = s.dd > 0 ? rd / s.dd : 0.0;
  return s;
}

/// The swap test: col against the columns beside it and the other columns of the strongest
/// candidates (up to 8, one per column); of those whose exact dot products (or, with a bias or
/// residual in the epilogue, whole exact outputs) col holds, leaving less than any fit of col's
/// own, the one leaving the least is named, and tested in turn for holding col's.
std::optional<LocationFit> swap_fit(const LoadedProjection& d, const reference::LinearProblem& p,
                                    const OutputRows& rows, const std::vector<Index>& strongest,
                                    const ColumnResiduals& c, const Fits& fits, Index col) {
  const Index n = d.info->n;
  std::vector<Index> others;
  auto offer = [&](Index o) {
    if (o >= 0 && o < n && o != col && std::find(others.begin(), others.end(), o) == others.end()) others.push_back(o);
  };
  offer(col - 1);
  offer(col + 1);
  for (Index s : strongest) offer(s);
  const bool epilogue = reference::has_bias(p.epilogue) || reference::has_residual(p.epilogue);
  // A swap must also leave less than the best fit of col's own (a zeroed column fits a scale
  // of 0 exactly).
  const double own_explained = fits.energy[fits.best()];
  std::optional<LocationFit> best;
  double best_remainder = 0;
  for (Index o : others) {
    const ColumnResiduals b = column_residuals(d, p, rows, o);
    // The dot products, and with an epilogue the whole outputs: the one leaving less (a bias
    // exchanged with its output leaves the two biases' difference under the first).
    SwapFit s = swap_of(c, b.dot, c.dot);
    bool whole = false;
    if (epilogue) {
      const SwapFit w = swap_of(c, b.exact, c.exact);
      if (w.holds() && (!s.holds() || w.remainder < s.remainder)) {
        s = w;
        whole = true;
      }
    }
    if (!s.holds() || !(s.remainder < fits.rr - own_explained) || (best && s.remainder >= best_remainder)) continue;
    LocationFit t;
    t.kind = FitKind::kColumnSwap;
    t.output = std::string(engine_output_name(rows.id));
    t.col = col;
    t.other_col = o;
    t.with_epilogue = whole;
    t.value = s.coef;
    t.explained = std::min(1.0, std::max(0.0, 1 - s.remainder / fits.rr));
    t.alternative_explained = std::min(1.0, own_explained / fits.rr);
    // The other column holding col's values in turn, by the same rule.
    t.exchanged = (whole ? swap_of(b, c.exact, b.exact) : swap_of(b, c.dot, b.dot)).holds();
    best = t;
    best_remainder = s.remainder;
  }
  return best;
}

/// Whether one wrong value may be named (row_fit's element), and the other packed output
/// holding it too. One value moves one column of its output. A packed column equal to
/// y_unpacked's on every row it holds is tested there, not counted again, so a value wrong in
/// both paths is one significant column; a value of the packed path alone is one in y_compact
/// and, scattered, one in y_packed, the same column (and the same value: same_value), and
/// none in y_unpacked.
struct OneValue {
  bool one_column = false;
  std::optional<EngineOutputId> pair;
};

OneValue one_value_rule(EngineOutputId held, Index col, const SignatureColumns& columns) {
  OneValue v;
  v.one_column = columns.significant[static_cast<std::size_t>(held)] == 1;
  for (EngineOutputId o : kAllEngineOutputs) {
    const Index count = columns.significant[static_cast<std::size_t>(o)];
    if (o == held || count == 0) continue;
    const bool packed_pair = held != EngineOutputId::kUnpacked && o != EngineOutputId::kUnpacked;
    if (packed_pair && count == 1 && columns.top[static_cast<std::size_t>(o)] == col) {
      v.pair = o;
    } else {
      v.one_column = false;
    }
  }
  return v;
}

/// Whether the other packed output holds row `row`'s value of column `col` bit for bit: two
/// different wrong values, one in each, are not one value (a reviewer's y_packed column 70 and
/// y_compact column 2 read as one).
bool same_value(const ProjectionFacts& f, const OutputRows& rows, EngineOutputId pair, Index row, Index col) {
  const OutputRows twin = output_rows(f, pair);
  const Index a = rows.source[static_cast<std::size_t>(row)];
  const Index b = twin.source[static_cast<std::size_t>(row)];
  const DType type = f.info().output;
  const Index stride = f.info().out_stride;
  return a >= 0 && b >= 0 && rows.out->bits(type, stride, a, col) == twin.out->bits(type, stride, b, col);
}

/// Whether the values test may run in `held`: every significant column is of that output and
/// kept (a fault of the packed path alone, in y_packed and y_compact both, is not read as
/// values).
bool values_allowed(EngineOutputId held, const SignatureColumns& columns) {
  for (EngineOutputId o : kAllEngineOutputs) {
    const std::size_t at = static_cast<std::size_t>(o);
    if (o != held && columns.significant[at] > 0) return false;
  }
  const std::size_t at = static_cast<std::size_t>(held);
  return columns.significant[at] == static_cast<Index>(columns.significant_kept[at].size());
}

/// A group's place in the fit: its number and K range.
void set_group(LocationFit& t, Index group, Index group_size) {
  t.group = group;
  t.k_begin = group * group_size;
  t.k_end = t.k_begin + group_size;
}

/// Columns sharing one scale fitted at most, evenly spaced beside the strongest: a 128 x 128
/// block's others all but one, a per-tensor scale's a sample. One column's own fault is diluted
/// to about 1/64 of the shared fit there, far under the half it must explain.
constexpr Index kBlockColumns = 64;

/// One group's scale fitted by weighted least squares over some columns: sum a r, sum a^2 and
/// sum r^2, a the group's exact contribution and r the residual, each over the row's noise v.
struct ScaleSums {
  double ra = 0, aa = 0, rr = 0;
  void add(const ColumnResiduals& c, Index group) {
    for (Index i = 0; i < c.rows; ++i) {
      const double r = weighted(c, i);
      if (std::isnan(r)) continue;
      const double a = c.sxw[static_cast<std::size_t>(i * c.groups + group)] / c.v[static_cast<std::size_t>(i)];
      ra += r * a;
      aa += a * a;
      rr += r * r;
    }
  }
  double coef() const { return aa > 0 ? ra / aa : 0.0; }
  /// The share of the residual energy the fitted scale explains.
  double share() const { return aa > 0 && rr > 0 ? std::min(1.0, ra * ra / aa / rr) : 0.0; }
};

/// Whether every significant column of every output lies in [begin, end) and they are no more
/// than its columns: a fault reaching columns beyond one scale's is not that scale's.
bool significant_within(const SignatureColumns& columns, Index begin, Index end) {
  for (EngineOutputId o : kAllEngineOutputs) {
    const std::size_t at = static_cast<std::size_t>(o);
    if (columns.significant[at] > end - begin) return false;
    for (Index j : columns.significant_kept[at]) {
      if (j < begin || j >= end) return false;
    }
  }
  return true;
}

/// Where the strongest column's residuals fit a scale of one group's contribution, and that
/// group's scale is shared with other columns (scaled weights with scale_rows > 1: DeepSeek-V3's
/// 128 x 128 FP8 blocks, a per-tensor scale per group), the shared scale is tested: it is named
/// where the other columns sharing it fit the same scale (within a quarter of it) for at least
/// half their residual energy, and no column beyond them is significant. An FP8 block's scale
/// x 1.01 read "column 170, group 2 ... 1.01x the dumped scale" (one of 128 columns) before.
std::optional<LocationFit> scale_block_fit(const LoadedProjection& d, const reference::LinearProblem& p,
                                           const OutputRows& rows, const SignatureColumns& columns,
                                           const ColumnResiduals& c, const Fits& fits, Index col) {
  const reference::WeightSegment& seg = reference::segment_of(d.weights, col);
  if (!reference::is_scaled_format(seg.format) || seg.scaled.scale_rows <= 1 || fits.scale_group < 0) {
    return std::nullopt;
  }
  const Index group = fits.scale_group;
  ScaleSums own;
  own.add(c, group);
  if (own.share() < 0.5) return std::nullopt;
  const Index scale_row = (col - seg.row_begin) / seg.scaled.scale_rows;
  const Index begin = seg.row_begin + scale_row * seg.scaled.scale_rows;
  const Index end = std::min(seg.row_end, begin + seg.scaled.scale_rows);
  if (end - begin < 2 || !significant_within(columns, begin, end)) return std::nullopt;
  ScaleSums others;
  Index fitted = 0;
  const Index width = end - begin - 1;  // the columns beside col
  const Index count = std::min(width, kBlockColumns);
  for (Index j = 0; j < count; ++j) {
    Index other = begin + j * width / count;
    if (other >= col) ++other;  // skip col itself
    others.add(column_residuals(d, p, rows, other), group);
    ++fitted;
  }
  const double mine = own.coef(), theirs = others.coef();
  if (others.share() < 0.5 || mine * theirs <= 0 || std::fabs(theirs - mine) > 0.25 * std::fabs(mine)) {
    return std::nullopt;
  }
  ScaleSums all = others;
  all.ra += own.ra;
  all.aa += own.aa;
  all.rr += own.rr;
  LocationFit t;
  t.kind = FitKind::kScaleBlock;
  t.output = std::string(engine_output_name(rows.id));
  t.col = col;
  set_group(t, group, c.group_size);
  if (c.groups == 1) t.group = -1;  // one scale along the whole K: no group to name
  t.col_begin = begin;
  t.col_end = end;
  t.scale_row = scale_row;
  t.columns = fitted + 1;
  t.value = 1 + all.coef();
  t.explained = all.share();
  t.alternative_explained = others.share();
  return t;
}

/// A value with its sign: "+0.01", "-0.02", "0".
std::string signed_short(double v) {
  std::string text = format_short(v);
  if (v > 0) text.insert(0, 1, '+');
  return text;
}

}  // namespace

/// The range fit (FitKind::kRange): the share of the columns' residual energy a range must
/// explain, pooled, and in each column fitted; how far its ends are searched around the
/// maximum-sum reading; and the prefix sums it keeps at most (32 MiB of doubles).
constexpr double kRangeExplained = 0.99;
constexpr double kRangeColumnExplained = 0.9;
constexpr Index kRangeRefine = 4;
constexpr std::size_t kRangeMaxPrefix = std::size_t{1} << 22;
/// A range's fitted coefficient within this of -1 or +1 reads as missing or counted twice
/// (signature.cc's kRangeCountTolerance).
constexpr double kRangeCoefficientTolerance = 0.1;

/// The (row, column) residuals a range fit reads: per one, r / v and the prefix sums of
/// x_k w_k / v over k (v the row's noise scale, as every fit here weighs its rows), and its
/// column's place in the columns fitted.
struct RangeTerms {
  Index k = 0;
  std::size_t width = 0;  ///< K + 1 prefix sums per residual
  std::vector<double> r, prefix;
  std::vector<std::size_t> column_of;
  double rr = 0;  ///< sum r^2

  std::size_t size() const { return r.size(); }
  /// The partial dot of residual o over [a, b), weighted.
  double part(std::size_t o, Index a, Index b) const {
    return prefix[o * width + static_cast<std::size_t>(b)] - prefix[o * width + static_cast<std::size_t>(a)];
  }
  /// The energy left by c times [a, b): sum (r - c R)^2.
  double left(double c, Index a, Index b) const {
    double e = 0;
    for (std::size_t o = 0; o < size(); ++o) {
      const double x = r[o] - c * part(o, a, b);
      e += x * x;
    }
    return e;
  }
};

RangeTerms range_terms(const LoadedProjection& d, const reference::LinearProblem& p, const OutputRows& rows,
                       const std::vector<Index>& cols) {
  RangeTerms t;
  t.k = d.info->k;
  t.width = static_cast<std::size_t>(t.k + 1);
  const bool quantized = d.info->x_quant.type != reference::XQuantType::kNone;
  std::vector<double> w(static_cast<std::size_t>(t.k));
  // The prefix sums' budget shared by the columns alike: each is fitted on its first rows (a
  // budget spent in column order fitted the first column alone at K = 4,096 and 1,024 rows,
  // and named all eight: the code review's).
  const std::size_t per_column = std::max<std::size_t>(1, kRangeMaxPrefix / t.width / cols.size());
  for (std::size_t ci = 0; ci < cols.size(); ++ci) {
    const ColumnResiduals c = column_residuals(d, p, rows, cols[ci]);
    reference::decode_weight_row(d.weights, cols[ci], p.x.dtype, w.data(), nullptr, nullptr);
    std::size_t taken = 0;
    for (Index i = 0; i < c.rows && taken < per_column; ++i) {
      const double ri = weighted(c, i);
      if (std::isnan(ri)) continue;
      ++taken;
      const double u = 1 / c.v[static_cast<std::size_t>(i)];
      t.r.push_back(ri);
      t.rr += ri * ri;
      t.column_of.push_back(ci);
      double acc = 0;
      t.prefix.push_back(0);
      for (Index k = 0; k < t.k; ++k) {
        const double x = quantized ? p.x_quantized.value(i, k) : static_cast<double>(p.x.at(i, k));
        acc += x * w[static_cast<std::size_t>(k)] * u;
        t.prefix.push_back(acc);
      }
    }
  }
  return t;
}

/// The range [a, b) and sign c whose subtraction leaves the least energy, and that energy.
struct RangeCandidate {
  Index a = 0, b = 0;
  double c = 0, left = 0;
};

/// The energy left by c times [a, b) is, to within cross terms of zero mean, sum r^2 - sum over
/// k in the range of (2 c g_k - d_k), g_k = sum r x_k w_k and d_k = sum (x_k w_k)^2: the range is
/// the maximum-sum subarray of 2 c g_k - d_k (Kadane's scan, O(K) per sign), its ends then
/// searched exactly within kRangeRefine terms.
RangeCandidate best_range(const RangeTerms& t) {
  const auto K = static_cast<std::size_t>(t.k);
  std::vector<double> g(K, 0.0), dd(K, 0.0);
  for (std::size_t o = 0; o < t.size(); ++o) {
    for (std::size_t k = 0; k < K; ++k) {
      const double x = t.part(o, static_cast<Index>(k), static_cast<Index>(k) + 1);
      g[k] += t.r[o] * x;
      dd[k] += x * x;
    }
  }
  RangeCandidate best{0, 0, 0, t.rr};
  for (const double c : {-1.0, 1.0}) {
    double sum = 0, most = 0;
    Index start = 0, a = 0, b = 0;
    for (Index k = 0; k < t.k; ++k) {
      if (sum <= 0) {
        sum = 0;
        start = k;
      }
      sum += 2 * c * g[static_cast<std::size_t>(k)] - dd[static_cast<std::size_t>(k)];
      if (sum > most) {
        most = sum;
        a = start;
        b = k + 1;
      }
    }
    if (b <= a) continue;
    for (Index a2 = std::max<Index>(0, a - kRangeRefine); a2 <= std::min(t.k - 1, a + kRangeRefine); ++a2) {
      for (Index b2 = std::max(a2 + 1, b - kRangeRefine); b2 <= std::min(t.k, b + kRangeRefine); ++b2) {
        const double e = t.left(c, a2, b2);
        if (e < best.left) best = {a2, b2, c, e};
      }
    }
  }
  return best;
}

/// One contiguous K range missing or counted twice in every column of `cols`: each row's
/// residual is then -c or +c times that range's partial dot (best_range finds it). A dropped
/// range k 1000-1031 straddles two of the candidates' 64-term ranges and read "column 235,
/// k 2816-2943 counted twice: 1.954x" (a review's), a tail of 8 terms at K = 3000 "no single
/// location".
std::optional<LocationFit> range_fit(const LoadedProjection& d, const reference::LinearProblem& p,
                                     const OutputRows& rows, const std::vector<Index>& cols,
                                     const SignatureFinding& strongest) {
  const Index K = d.info->k;
  if (K < 2 || cols.empty()) return std::nullopt;
  const RangeTerms terms = range_terms(d, p, rows, cols);
  if (static_cast<Index>(terms.size()) < kMinFitRows || !(terms.rr > 0) || !std::isfinite(terms.rr)) {
    return std::nullopt;
  }
  const RangeCandidate best = best_range(terms);
  if (best.b <= best.a || (best.a == 0 && best.b == K)) return std::nullopt;
  // The candidates' own reading where it is this range (aligned to their tiles), and the whole
  // K's (all-zero outputs) stand.
  if (strongest.k_begin == best.a && strongest.k_end == best.b) return std::nullopt;
  const double explained = 1 - best.left / terms.rr;
  if (!(explained >= kRangeExplained)) return std::nullopt;
  // One residual holding the energy is one wrong value as much as a range whose contribution
  // lies in its row alone (sparse activations: a reviewer's value + 0.05 at M 8 read "k 1833-1833
  // counted twice", activation 1833 nonzero in that row only): the row and values tests decide.
  const double largest =
      *std::max_element(terms.r.begin(), terms.r.end(), [](double x, double y) { return std::fabs(x) < std::fabs(y); });
  if (largest * largest >= kRangeExplained * terms.rr) return std::nullopt;
  // Each column on its own, and the coefficient fitted freely, must read the same.
  std::vector<double> col_rr(cols.size(), 0.0), col_left(cols.size(), 0.0);
  double rR = 0, RR = 0, rS = 0, SS = 0;
  const bool strongest_here = strongest.output == engine_output_name(rows.id) && strongest.k_end > strongest.k_begin;
  for (std::size_t o = 0; o < terms.size(); ++o) {
    const double r = terms.r[o], R = terms.part(o, best.a, best.b);
    col_rr[terms.column_of[o]] += r * r;
    col_left[terms.column_of[o]] += (r - best.c * R) * (r - best.c * R);
    rR += r * R;
    RR += R * R;
    if (strongest_here) {
      const double S = terms.part(o, strongest.k_begin, strongest.k_end);
      rS += r * S;
      SS += S * S;
    }
  }
  for (std::size_t ci = 0; ci < cols.size(); ++ci) {
    // Every column fitted, each explained: a column without a finite row names nothing.
    if (!(col_rr[ci] > 0) || !(col_left[ci] <= (1 - kRangeColumnExplained) * col_rr[ci])) return std::nullopt;
  }
  const double coefficient = RR > 0 ? rR / RR : 0.0;
  if (!(std::fabs(coefficient - best.c) < kRangeCoefficientTolerance)) return std::nullopt;
  const double alternative = SS > 0 ? std::min(1.0, rS * rS / SS / terms.rr) : 0.0;
  if (!dominates(explained * terms.rr, alternative * terms.rr, terms.rr)) return std::nullopt;
  LocationFit t;
  t.kind = FitKind::kRange;
  t.output = std::string(engine_output_name(rows.id));
  t.col = cols.front();
  t.k_begin = best.a;
  t.k_end = best.b;
  t.columns = static_cast<Index>(cols.size());
  // A range that is one weight group of the column: that group's scale read as 0 (or doubled)
  // does the same, and the reason says so.
  const Index gs = segment_group_size(reference::segment_of(d.weights, t.col));
  if (gs > 0 && gs < K && best.a % gs == 0 && best.b - best.a == gs) t.group = best.a / gs;
  t.value = 1 + coefficient;
  t.explained = explained;
  t.alternative_explained = alternative;
  return t;
}

/// The columns a range fit reads: the significant columns of the strongest candidate's output
/// among the strongest, the strongest candidate's own first (it alone where none is).
std::vector<Index> range_columns(const SignatureColumns& columns, EngineOutputId held, Index col) {
  std::vector<Index> cols = columns.significant_kept[static_cast<std::size_t>(held)];
  if (cols.empty() || cols.front() != col) cols.insert(cols.begin(), col);
  cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
  return cols;
}

namespace {

/// The pooled test's columns: at least this many (fewer: no test; over 32 a row's fit must
/// explain about 84 % of its energy at M 8 with 129 parts), at most the larger, and within
/// kPooledWork products (M x K per column; about 0.4 s): at M 32, K 4,096 every column up to
/// 1,024; beyond M x K = 2^22 (M 1,024 at K 4,096) fewer than 32, and no test (the activations
/// it reads once, 8 bytes each, stay within 32 MiB).
constexpr Index kPooledColumnsMin = 32;
constexpr Index kPooledColumnsMax = 1024;
constexpr double kPooledWork = 0x1p27;
/// weigh_by_noise's floor, a share of the column's median noise: no value's weight 1 / v^2 is
/// more than 16 times a typical one's.
constexpr double kPooledNoiseFloor = 0.25;
/// A named row's fit leaves noise: what remains of its energy per column is at most this many
/// times the median row's energy per column (a row of noise: 1, within sqrt(2 / n)). A row with
/// wrong values in a few columns, a fault of part of its columns, or two parts wrong at once
/// leaves more, and fits a scale in part only (a reviewer's named "1.024x" for x 1.05 in half the
/// columns). A row whose stored values were rounded twice (bf16, then 1.01x that, rounded again)
/// left 2.4 times a clean row's: 3 names it, and none of the reviewer's 141 other faults then.
constexpr double kPooledRemainder = 3;
/// And no row not named reaches the share noise reaches with this probability over every fit: a
/// weight group wrong in 50 columns of 248 put every row's fit near 17 %, four past the bound
/// (19.2 %) by chance, where a row of noise stays near 3 %.
constexpr double kPooledOthersAlpha = 1e-2;

/// The upper median of `v` (not empty): of two values the larger.
double upper_median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

/// Weighs column c's residuals by each value's own rounding noise instead of sum |x w|: half a
/// spacing of a bf16 or f16 output at its exact value (one f32 rounding of an f32 one), with
/// 2^-24 sum |x w| for the accumulation. Under bf16 outputs the output's rounding is the noise,
/// and it follows |y|, not sum |x w| (the pooled test's shares assume each row's weighted
/// residuals alike across columns).
void weigh_by_noise(ColumnResiduals& c, DType output) {
  std::vector<double> finite;
  for (std::size_t i = 0; i < c.v.size(); ++i) {
    c.v[i] = std::hypot(output_rounding_bound(std::fabs(c.exact[i]), output), 0x1p-24 * c.v[i]);
    if (std::isfinite(c.v[i]) && !std::isnan(c.r[i])) finite.push_back(c.v[i]);
  }
  // At least kPooledNoiseFloor of the column's median: a value near zero has a spacing hundreds
  // of times finer, and one wrong value there took a row's fit (a reviewer's: exact 0.0232,
  // dumped 0.0276, its noise 7.7e-5 against a median 0.031, held 97.6 % of the row's weighted
  // energy, and the row read "1.000629x"). A row of zero activations and no bias has no
  // rounding at all (its residual is 0): 1 where every row is so.
  const double median = finite.empty() ? 0.0 : upper_median(std::move(finite));
  const double floor = median > 0 ? kPooledNoiseFloor * median : 1.0;
  for (double& v : c.v) v = std::isfinite(v) ? std::max(v, floor) : floor;
}

/// A row the pooled test names: its fit, the fit's share of its energy and the share noise
/// reaches.
struct PooledShare {
  RowScan::PartFit fit;
  double share = 0, chance = 0;
  /// The fit's rms move of the row's values in half spacings of a bf16 / f16 output (its noise
  /// weights): sqrt(explained energy / columns).
  double moved = 0;
  Index row = -1;
};

/// The share of a row's energy over n columns one of `fits` fits of isotropic noise reaches with
/// probability `alpha`: Beta(1/2, (n - 1) / 2) beyond b with probability at most
/// (1 - b)^((n - 1) / 2).
double chance_share(double alpha, Index fits, Index n) {
  return 1 - std::pow(alpha / static_cast<double>(fits), 2.0 / static_cast<double>(n - 1));
}

/// The rows of `live` the pooled test names, the largest share first (empty: none): those whose
/// fit reaches chance_share at kResidualAlpha and leaves noise (kPooledRemainder), 1 to
/// kMaxFitRows and a quarter of `live`, where every other row stays below chance_share at
/// kPooledOthersAlpha. `alternative`: the largest share of a row not named.
std::vector<PooledShare> pooled_rows(const RowScan& s, const std::vector<Index>& live, Index fits,
                                     double& alternative) {
  std::vector<double> per_column;  // each row's energy per column: the median is a row of noise
  for (Index i : live) {
    const auto at = static_cast<std::size_t>(i);
    per_column.push_back(s.row_energy[at] / static_cast<double>(s.row_columns[at]));
  }
  const double noise = upper_median(std::move(per_column));
  std::vector<PooledShare> named;
  bool others_noise = true;
  for (Index i : live) {
    const auto at = static_cast<std::size_t>(i);
    const double e = s.row_energy[at];
    const Index n = s.row_columns[at];
    const RowScan::PartFit fit = s.best_part(i, true);
    const double explained = fit.explained;
    const double share = explained / e;
    const double chance = chance_share(kResidualAlpha, fits, n);
    if (share >= chance && (e - explained) / static_cast<double>(n - 1) <= kPooledRemainder * noise) {
      named.push_back({fit, share, chance, std::sqrt(explained / static_cast<double>(n)), i});
      continue;
    }
    alternative = std::max(alternative, share);
    others_noise = others_noise && share < chance_share(kPooledOthersAlpha, fits, n);
  }
  const std::size_t most = std::min(kMaxFitRows, std::max<std::size_t>(1, live.size() / 4));
  if (!others_noise || named.size() > most) return {};
  std::sort(named.begin(), named.end(), [](const PooledShare& a, const PooledShare& b) {
    return a.share > b.share || (a.share == b.share && a.row < b.row);
  });
  return named;
}

/// The pooled test (docs/detection.md "Pooled over the columns"): a row's activation fault
/// under bf16 outputs moves each column by a fraction of a spacing (a (row, activation group)
/// scale x 1.01 at K 4,096 by about half of one), and the row stands out in none alone; over
/// every column but `left_out` (the strongest significant ones) together it does. Over
/// up to kPooledColumnsMax other columns each row's residuals are fitted by a scale of its
/// whole dot product or of one activation group's part, and with integer x_quant by its zero
/// points moved over one; a fit's share of its row's weighted residual energy over n columns,
/// under isotropic noise, is Beta(1/2, (n - 1) / 2), beyond b with probability at most
/// (1 - b)^((n - 1) / 2): b is set so that over every row, part and family that probability is
/// kResidualAlpha. The rows whose fit reaches it are named, 1 to kMaxFitRows and a quarter of
/// the rows with data (more are no fault of a few rows: a weight group wrong in every column
/// moves each row alike); none where a named row's fit moves its values by `min_moved` half
/// spacings or less (rms, PooledShare::moved).
std::optional<LocationFit> pooled_rows_fit(const LoadedProjection& d, const reference::LinearProblem& p,
                                           const OutputRows& rows, Index col, const std::vector<Index>& left_out,
                                           double min_moved = 0) {
  const ProjectionInfo& info = *d.info;
  std::vector<Index> pool;
  for (Index n = 0; n < info.n; ++n) {
    if (std::find(left_out.begin(), left_out.end(), n) == left_out.end()) pool.push_back(n);
  }
  const double per_column = static_cast<double>(std::max<Index>(1, p.x.rows)) * static_cast<double>(info.k);
  const auto budget = static_cast<Index>(std::min(kPooledWork / per_column, static_cast<double>(kPooledColumnsMax)));
  const Index n = std::min(static_cast<Index>(pool.size()), budget);
  if (n < kPooledColumnsMin) return std::nullopt;
  Extras extras = row_parts(info, p.x.rows);
  const std::vector<double> x = dense_activations(info, p);
  extras.x = x.data();
  RowScan s = new_scan(info, p, extras);
  for (Index t = 0; t < n; ++t) {
    // Evenly spaced over the pool.
    ColumnResiduals c = column_residuals(d, p, rows, pool[static_cast<std::size_t>(t * std::ssize(pool) / n)], extras);
    weigh_by_noise(c, info.output);
    s.add(c);
  }
  std::vector<Index> live;  // rows fitted: over kPooledColumnsMin columns or more, some residual
  for (Index i = 0; i < s.rows; ++i) {
    const auto at = static_cast<std::size_t>(i);
    if (s.row_columns[at] >= kPooledColumnsMin && s.row_energy[at] > 0) live.push_back(i);
  }
  if (std::ssize(live) < kMinFitRows) return std::nullopt;
  const Index fits = std::ssize(live) * static_cast<Index>(s.parts > 1 ? s.parts + 1 : 1) * (s.offsets ? 2 : 1);
  double alternative = 0;
  const std::vector<PooledShare> named = pooled_rows(s, live, fits, alternative);
  if (named.empty() ||
      std::any_of(named.begin(), named.end(), [&](const PooledShare& w) { return w.moved <= min_moved; })) {
    return std::nullopt;
  }
  LocationFit t;
  t.kind = named.size() == 1 ? FitKind::kRow : FitKind::kRows;
  t.output = std::string(engine_output_name(rows.id));
  t.col = col;
  t.columns = n;
  t.pooled = true;
  t.fits = fits;
  t.explained = 1;
  for (const PooledShare& w : named) {
    t.rows.push_back(fitted_row(s, rows, w.row, info.k, w.fit));
    t.explained = std::min(t.explained, w.share);
    t.chance_share = std::max(t.chance_share, w.chance);
  }
  set_first_row(t);
  t.alternative_explained = alternative;
  t.scale_explained = t.explained;
  return t;
}

/// Whether a location names rows (kRow, kRows) or a structure over several columns that no row
/// fit explains better: a K range, another column's values, a shared scale.
bool names_rows_or_columns(const std::optional<LocationFit>& t) {
  return t && (t->kind == FitKind::kRow || t->kind == FitKind::kRows || t->kind == FitKind::kRange ||
               t->kind == FitKind::kColumnSwap || t->kind == FitKind::kScaleBlock);
}

/// The strongest column's own reading (localize() before the pooled test).
void column_reading(const ProjectionFacts& f, SignatureEvidence& e, const SignatureColumns& columns,
                    EngineOutputId held, const OutputRows& rows, const reference::LinearProblem& p) {
  const LoadedProjection& d = f.data;
  const SignatureFinding& strongest = e.strongest.front();
  const std::string output(engine_output_name(held));
  const Index col = strongest.col;
  const OneValue one_value = one_value_rule(held, col, columns);
  // The strongest column with the candidate's range, and every row's parts for the row test.
  Extras extras = row_parts(*d.info, p.x.rows);
  extras.range_begin = strongest.k_begin;
  extras.range_end = strongest.k_end;
  const ColumnResiduals c = column_residuals(d, p, rows, col, extras);
  const Fits fits = fit(c);
  if (fits.rows < kMinFitRows || !(fits.rr > 0)) return;
  // A K range, another column's values, a shared scale: the first that explains them.
  std::optional<LocationFit> found = range_fit(d, p, rows, range_columns(columns, held, col), strongest);
  if (!found) found = swap_fit(d, p, rows, columns.strongest, c, fits, col);
  if (!found) found = scale_block_fit(d, p, rows, columns, c, fits, col);
  if (found) {
    e.fit = *found;
    return;
  }
  const std::size_t best = fits.best();
  // An affine group's scale and bias, over codes q >= 0, fit nearly alike (each alone explained
  // about 96 % of a group with both wrong, which the two together explain): where the winner
  // is one of them, the other of the same group competes with it only to tell which one.
  const bool affine_pair =
      c.affine && (best == kGroupScale || best == kGroupOffset) && fits.scale_group == fits.offset_group;
  const double other = fits.best_other(best);
  const double outside_pair = affine_pair ? fits.best_other(kGroupScale, kGroupOffset) : other;
  const bool alone = dominates(fits.energy[best], other, fits.rr);
  const bool pair = !alone && affine_pair && dominates(fits.energy[best], outside_pair, fits.rr);
  // One row alone, or, where no single structure dominates, a few rows together (two rows'
  // activation scales wrong explain half the energy each).
  if ((alone && best == kRowAlone) || (!alone && !pair)) {
    const std::vector<Index> set = standing_rows(c, fits);
    if (set.empty()) return;
    // The other columns, scanned once for the row test and the values test.
    RowScan scan = scan_rows(d, p, rows, col, set.front(), row_parts(*d.info, p.x.rows));
    scan.add(c);  // computed with every row's parts
    std::optional<LocationFit> t = row_fit(d, scan, rows, col, c, fits, set, one_value.one_column);
    if (t && t->kind == FitKind::kElement && one_value.pair && !same_value(f, rows, *one_value.pair, t->row, col)) {
      return;
    }
    const std::vector<Index>& significant = columns.significant_kept[static_cast<std::size_t>(held)];
    if (!t && values_allowed(held, columns)) {
      t = values_fit(d, p, rows, significant, scan);
    }
    if (t) e.fit = *t;
    return;
  }
  // The candidates' own reading stands for a scale or their own range, except an affine
  // group's scale, whose s q part alone no candidate models.
  if (best == kColumnScale || best == kCandidate || (best == kGroupScale && !c.affine)) return;
  const double explained = std::min(1.0, fits.energy[best] / fits.rr);
  const double alternative = std::min(1.0, (alone ? other : outside_pair) / fits.rr);
  if (!alone) {
    // Its scale, its bias or both: named as the group's offset, with the scale's share beside.
    LocationFit t;
    t.kind = FitKind::kGroupOffset;
    t.output = output;
    t.col = col;
    set_group(t, fits.offset_group, c.group_size);
    t.value = fits.coef[kGroupOffset];
    t.explained = std::min(1.0, fits.energy[kGroupOffset] / fits.rr);
    t.alternative_explained = alternative;
    t.scale_explained = std::min(1.0, fits.energy[kGroupScale] / fits.rr);
    e.fit = t;
    return;
  }
  LocationFit t;
  t.output = output;
  t.col = col;
  t.value = fits.coef[best];
  t.explained = explained;
  t.alternative_explained = alternative;
  if (best == kConstant) {
    t.kind = FitKind::kColumnOffset;
    e.fit = t;
    return;
  }
  if (best == kGroupScale) {
    t.kind = FitKind::kGroupScale;
    t.value = 1 + fits.coef[best];
    set_group(t, fits.scale_group, c.group_size);
    e.fit = t;
    return;
  }
  const Index g = fits.offset_group;
  if (c.zero_point) {
    // A zero point off by d moves the group's weights by -d s.
    const double s = c.scale[static_cast<std::size_t>(g)];
    const double shift = s != 0 ? -t.value / s : 0.0;
    const double whole = std::round(shift);
    if (whole != 0 && std::fabs(shift - whole) <= 0.2) {
      ZeroPointFinding z;
      z.output = output;
      z.col = col;
      z.group = g;
      z.k_begin = g * c.group_size;
      z.k_end = z.k_begin + c.group_size;
      z.shift = shift;
      z.explained = explained;
      z.alternative_explained = alternative;
      e.zero_point = z;
      return;
    }
  }
  t.kind = FitKind::kGroupOffset;
  set_group(t, g, c.group_size);
  e.fit = t;
}

}  // namespace

void localize(const ProjectionFacts& f, SignatureEvidence& e, const SignatureColumns& columns) {
  const LoadedProjection& d = f.data;
  if (e.strongest.empty()) return;
  const SignatureFinding& strongest = e.strongest.front();
  // The output holding the strongest candidate: y_unpacked (a packed column equal to it is
  // tested there), or a packed output for a fault of the packed path alone.
  const auto held = std::find_if(kAllEngineOutputs.begin(), kAllEngineOutputs.end(),
                                 [&](EngineOutputId o) { return engine_output_name(o) == strongest.output; });
  if (held == kAllEngineOutputs.end() || !d.output(*held).present) return;
  const OutputRows rows = output_rows(f, *held);
  const reference::LinearProblem p = d.problem(reference::kDefaultLambda);
  column_reading(f, e, columns, *held, rows, p);
  if (names_rows_or_columns(e.fit)) return;
  // The strongest significant columns are left out: one wrong value, or a weight's fault in a
  // few columns, is theirs, and fits a row there.
  std::vector<Index> left_out = columns.significant_kept[static_cast<std::size_t>(*held)];
  if (std::find(left_out.begin(), left_out.end(), strongest.col) == left_out.end()) left_out.push_back(strongest.col);
  if (std::optional<LocationFit> t = pooled_rows_fit(d, p, rows, strongest.col, left_out)) {
    e.fit = std::move(t);
    e.zero_point.reset();
  }
}

std::optional<LocationFit> locate_rows(const ProjectionFacts& f) {
  const LoadedProjection& d = f.data;
  if (!d.output(EngineOutputId::kUnpacked).present) return std::nullopt;
  const OutputRows rows = output_rows(f, EngineOutputId::kUnpacked);
  // Under bf16 / f16 outputs a row's fit that moves its values by a spacing or less (rms, 2 half
  // spacings) may be that row's rounding, truncated, not its activations: a reviewer's row 5
  // truncated read as "fits 0.998x" (34-77 % of its energy). bias reads rounding by direction.
  const bool narrow = f.info().output == DType::kBf16 || f.info().output == DType::kF16;
  return pooled_rows_fit(d, d.problem(reference::kDefaultLambda), rows, -1, {}, narrow ? 2.0 : 0.0);
}

std::string describe_zero_point(const ZeroPointFinding& z) {
  const double whole = std::round(z.shift);
  return z.output + " column " + std::to_string(z.col) + ", " + range_text(z.k_begin, z.k_end, z.group) +
         ": the residuals fit that group's zero point " + signed_short(whole) + " (fitted " + format_short(z.shift) +
         "): the kernel's weights there are the dumped ones " + (whole > 0 ? "minus " : "plus ") +
         format_short(std::fabs(whole)) + "x the group's scale (explains " + format_short(100 * z.explained) +
         " % of the column's residual energy; the best alternative " + format_short(100 * z.alternative_explained) +
         " %)";
}

namespace {

/// One row of an output: "row 5" (y_unpacked), "row 5 (slot 3)" (y_packed), "slot 3 (row 5)"
/// (y_compact, whose rows are its slots).
std::string row_and_slot(Index row, Index slot, bool compact) {
  if (slot < 0) return "row " + std::to_string(row);
  if (compact) return "slot " + std::to_string(slot) + " (row " + std::to_string(row) + ")";
  return "row " + std::to_string(row) + " (slot " + std::to_string(slot) + ")";
}

}  // namespace

std::string describe_row(const LocationFit& t) {
  const bool compact = t.output == engine_output_name(EngineOutputId::kCompact);
  if (t.kind == FitKind::kRows) {
    std::string s = t.output + (compact ? " slots " : " rows ");
    for (std::size_t j = 0; j < t.rows.size(); ++j) {
      const FittedRow& w = t.rows[j];
      if (j > 0) s += j + 1 == t.rows.size() ? " and " : ", ";
      if (w.slot < 0) {
        s += std::to_string(w.row);
      } else if (compact) {
        s += std::to_string(w.slot) + " (row " + std::to_string(w.row) + ")";
      } else {
        s += std::to_string(w.row) + " (slot " + std::to_string(w.slot) + ")";
      }
    }
    return s;
  }
  return t.output + " " + row_and_slot(t.row, t.slot, compact);
}

namespace {

/// Where a row fit's other reading fits almost as well (FittedRow::alike): "; a scale of
/// 1.033x of activation group 2's part fits almost as well: ...".
std::string alike_clause(const FittedRow& w) {
  if (!w.alike) return "";
  const std::string where =
      w.alike_group < 0 ? std::string("the whole row") : "activation group " + std::to_string(w.alike_group);
  const std::string other =
      w.offset ? "a scale of " + format_scale(w.alike_value) + "x of " + where + "'s part"
               : "a move of its zero points over " + where + " by " + signed_short(w.alike_value) + " steps";
  return "; " + other +
         " fits almost as well: the data cannot tell a zero point from a scale there (its activations are "
         "nearly constant)";
}

/// A row part's offset (FittedRow::offset): "its zero point over k 32-63 (activation group 1) is
/// the dumped one +1 (fitted steps: 1.002; its activations moved by -0.0078)"; over the whole K
/// every group's zero point, each group's activations moved by the steps times its own scale.
std::string describe_offset(const FittedRow& w) {
  const bool whole_k = w.group < 0;
  const std::string part = whole_k ? std::string("its zero points over the whole K")
                                   : "its zero point over k " + std::to_string(w.k_begin) + "-" +
                                         std::to_string(w.k_end - 1) + " (activation group " + std::to_string(w.group) +
                                         ")";
  const std::string moved =
      "its activations moved by " + signed_short(w.value) +
      (whole_k ? std::string(" in the first group, by the steps times its own scale in each") : std::string());
  const double whole = std::round(w.steps);
  // A zero point is an integer: within a fifth of a step of one, the fit names it.
  if (whole != 0 && std::fabs(w.steps - whole) <= 0.2) {
    return part + (whole_k ? " are the dumped ones " : " is the dumped one ") + signed_short(whole) +
           " (fitted steps: " + format_short(w.steps) + "; " + moved + ")" + alike_clause(w);
  }
  return part + " moved by " + signed_short(w.steps) + " steps, not a whole one (" + moved + ")" + alike_clause(w);
}

/// ", fitting no scale there" where the rows' scale was tested (over kRowScaleColumns columns
/// or more: RowScan::scaled), else "".
std::string no_scale(const LocationFit& t) {
  return static_cast<std::size_t>(t.columns) + 1 >= kRowScaleColumns ? ", fitting no scale there" : "";
}

}  // namespace

std::string describe_values(const LocationFit& t) {
  const bool compact = t.output == engine_output_name(EngineOutputId::kCompact);
  std::string s = t.output + " ";
  for (std::size_t j = 0; j < t.rows.size(); ++j) {
    const FittedRow& w = t.rows[j];
    if (j > 0) s += j + 1 == t.rows.size() ? " and " : ", ";
    s += row_and_slot(w.row, w.slot, compact) + " column " + std::to_string(w.col);
  }
  return s;
}

std::string describe_block(const LocationFit& t) {
  return t.output + " columns " + std::to_string(t.col_begin) + "-" + std::to_string(t.col_end - 1) + ", " +
         range_text(t.k_begin, t.k_end, t.group);
}

namespace {

/// A group's offset: an affine group's bias, a zero point off by a part of its scale, or an
/// affine group whose scale fits alike.
std::string describe_group_offset(const LocationFit& t, const ProjectionInfo& info, const std::string& shares,
                                  const std::string& signed_value) {
  if (t.scale_explained > 0) {
    return t.output + " column " + std::to_string(t.col) + ", " + range_text(t.k_begin, t.k_end, t.group) +
           ": the residuals fit that affine group's scale (" + format_short(100 * t.scale_explained) +
           " % of the residual energy) and its bias (moved by " + signed_value + ": " +
           format_short(100 * t.explained) + " %) alike, and no other place (the best " +
           format_short(100 * t.alternative_explained) + " %): its scale, its bias or both are not the dumped ones";
  }
  // Offsets are fitted in AF4 affine and zero-point columns only.
  const SegmentInfo* seg = info.segment_at(t.col);
  const bool affine = seg != nullptr && seg->af4.variant == reference::Af4Variant::kAffine;
  return t.output + " column " + std::to_string(t.col) + ", " + range_text(t.k_begin, t.k_end, t.group) +
         ": the residuals fit that group's weights moved by " + signed_value + " (" + shares + "): " +
         (affine ? "the kernel's bias of that group is not the dumped one"
                 : "a zero point off by a part of its scale, not by a whole number");
}

/// A shared scale's fit: its columns, group and scale entry, and what they fit.
std::string describe_scale_block(const LocationFit& t, const ProjectionInfo& info) {
  // A scale every column of the output shares is also the activations' of that K range.
  const bool every = t.col_begin == 0 && t.col_end == info.n;
  return describe_block(t) + ", which share scales[" + std::to_string(t.scale_row) + ", " +
         std::to_string(std::max<Index>(t.group, 0)) + "]: the residuals of the " + std::to_string(t.columns) +
         " fitted fit a scale of " + format_scale(t.value) + "x the dumped scale (" + format_short(100 * t.explained) +
         " % of their residual energy; without column " + std::to_string(t.col) + ", " +
         format_short(100 * t.alternative_explained) + " %): that scale is not the one the kernel used" +
         (every ? " (every column shares it: the activations of that K range scaled alike read the same)" : "");
}

}  // namespace

namespace {

/// A range fit's text (FitKind::kRange).
std::string describe_range(const LocationFit& t) {
  const bool missing = t.value < 1;
  // A range dropped outright fits 0 to within its own rounding: "0x".
  const double times = std::fabs(t.value) < 5e-5 ? 0.0 : t.value;
  const std::string where = t.columns == 1 ? t.output + " column " + std::to_string(t.col)
                                           : "each of the " + std::to_string(t.columns) +
                                                 " strongest significant columns of " + t.output + " fitted";
  return range_text(t.k_begin, t.k_end, -1) + (missing ? " missing" : " counted twice") + " in " + where +
         ": the outputs fit " + format_scale(times) + "x that range's exact contribution (" +
         format_short(100 * t.explained) + " % of their residual energy; the strongest candidate's range " +
         format_short(100 * t.alternative_explained) + " %): the kernel " + (missing ? "drops" : "adds") + " those " +
         std::to_string(t.k_end - t.k_begin) + (missing ? " K terms" : " K terms twice") +
         " (a masked tail, a vector remainder, a tile), or x's columns there are not the ones it used" +
         (t.group < 0
              ? std::string()
              : ", or weight group " + std::to_string(t.group) + "'s scale is " + (missing ? "read as 0" : "doubled"));
}

/// Where the pooled test found rows (LocationFit::pooled): over how many columns, what each
/// row's fit explains there against what rounding noise reaches by chance.
std::string pooled_where(const LocationFit& t) {
  // The reports word the residual tests' alpha so everywhere (format_short writes "1e-09").
  static_assert(kResidualAlpha == 1e-9, "the text below names kResidualAlpha");
  const bool one = t.rows.size() == 1;
  // col -1: bound's location (locate_rows), signature failing on no column to leave out.
  return describe_row(t) +
         (t.col < 0
              ? ": over " + std::to_string(t.columns) + " columns "
              : ": the strongest significant columns left out, over " + std::to_string(t.columns) + " other columns ") +
         (one ? "that row's" : "each of those rows'") + " residuals fit one change of its activations, explaining " +
         (one ? "" : "at least ") + format_short(100 * t.explained) +
         " % of its residual energy there, where rounding noise reaches " + format_short(100 * t.chance_share) +
         " % with probability 1e-9 over " + std::to_string(t.fits) + " fits (the best other row " +
         format_short(100 * t.alternative_explained) + " %)";
}

/// A row fit (FitKind::kRow): where, and the scale or offset its outputs fit.
std::string describe_row_fit(const LocationFit& t, const std::string& shares, const std::string& no_fit) {
  const std::string where = t.pooled ? pooled_where(t)
                                     : describe_row(t) + ": the residuals lie in that row alone, in column " +
                                           std::to_string(t.col) + " and in at least half of " +
                                           std::to_string(t.columns) + " other columns tested (" + shares + ")";
  if (!t.pooled && t.scale_explained < 0.9) {
    return where + ", and fit no " + no_fit + " of their exact values (" + format_short(100 * t.scale_explained) +
           " %): that row's activations are not the ones the kernel multiplied";
  }
  if (t.offset) {
    return where + "; there the outputs fit a change of its activations' zero points (" +
           format_short(100 * t.scale_explained) + " % of the row's energy): " + describe_offset(t.rows.front()) +
           ": that row's activation zero point is not the one the kernel used";
  }
  const std::string alike = alike_clause(t.rows.front());
  if (t.group < 0) {
    return where + "; there the outputs fit " + format_scale(t.value) +
           "x their exact values (a wrong activation scale for that row, or its activations scaled after "
           "they were dumped)" +
           alike;
  }
  return where + "; there the outputs fit " + format_scale(t.value) + "x the exact contribution of k " +
         std::to_string(t.k_begin) + "-" + std::to_string(t.k_end - 1) + " (activation group " +
         std::to_string(t.group) + "): that group's activation scale is not the one the kernel used" + alike;
}

/// A rows fit (FitKind::kRows): where, and each row's scale or offset.
std::string describe_rows_fit(const LocationFit& t, const std::string& shares, const std::string& no_fit) {
  const std::string where = t.pooled
                                ? pooled_where(t)
                                : describe_row(t) + ": the residuals lie in those " + std::to_string(t.rows.size()) +
                                      " rows alone, in column " + std::to_string(t.col) + " and in at least half of " +
                                      std::to_string(t.columns) + " other columns tested (" + shares + ")";
  if (!t.pooled && t.scale_explained < 0.9) {
    return where + ", and fit no " + no_fit + " of their exact values (" + format_short(100 * t.scale_explained) +
           " %): those rows' activations are not the ones the kernel multiplied";
  }
  const bool one_part =
      std::all_of(t.rows.begin(), t.rows.end(), [&](const FittedRow& w) { return w.group == t.rows.front().group; });
  if (std::any_of(t.rows.begin(), t.rows.end(), [](const FittedRow& w) { return w.offset || w.alike; })) {
    std::string parts;
    for (const FittedRow& w : t.rows) {
      parts += (parts.empty() ? "row " : "; row ") + std::to_string(w.row) + ": ";
      if (w.offset) {
        parts += describe_offset(w);
      } else {
        parts +=
            format_scale(w.value) + "x " +
            (w.group < 0 ? std::string("its whole dot product")
                         : "the exact contribution of k " + std::to_string(w.k_begin) + "-" +
                               std::to_string(w.k_end - 1) + " (activation group " + std::to_string(w.group) + ")") +
            alike_clause(w);
      }
    }
    return where + "; there each row's outputs fit its activations over one part of K scaled, or its zero " +
           "points moved (" + parts + "): wrong activation scales or zero points for those rows and parts";
  }
  std::string scales;
  for (const FittedRow& w : t.rows) {
    scales += (scales.empty() ? "row " : ", row ") + std::to_string(w.row) + " " + format_scale(w.value) + "x";
    if (!one_part) {
      scales += w.group < 0 ? " of its whole dot product"
                            : " of k " + std::to_string(w.k_begin) + "-" + std::to_string(w.k_end - 1) +
                                  " (activation group " + std::to_string(w.group) + ")";
    }
  }
  if (!one_part) {
    return where + "; there each row's outputs fit a scale of one part of their exact values (" + scales +
           "): wrong activation scales for those rows and parts";
  }
  if (t.group < 0) {
    return where + "; there each row's outputs fit a scale of their exact values (" + scales +
           "): wrong activation scales for those rows, or their activations scaled after they were dumped";
  }
  return where + "; there each row's outputs fit a scale of the exact contribution of k " + std::to_string(t.k_begin) +
         "-" + std::to_string(t.k_end - 1) + " (activation group " + std::to_string(t.group) + ": " + scales +
         "): that group's activation scales are not the ones the kernel used for those rows";
}

}  // namespace

std::string describe_fit(const LocationFit& t, const ProjectionInfo& info) {
  // With integer activation codes a row is fitted by its zero points too.
  const std::string no_fit = reference::x_quant_integer(info.x_quant.type) ? "scale or zero point" : "scale";
  const std::string shares = format_short(100 * t.explained) + " % of the residual energy; the best alternative " +
                             format_short(100 * t.alternative_explained) + " %";
  const std::string signed_value = signed_short(t.value);
  switch (t.kind) {
    case FitKind::kRow:
      return describe_row_fit(t, shares, no_fit);
    case FitKind::kRows:
      return describe_rows_fit(t, shares, no_fit);
    case FitKind::kElement:
      return describe_row(t) + ", column " + std::to_string(t.col) + ": that one value is off by " + signed_value +
             " from its exact value (" + shares + "), and the row stands out in no more of " +
             std::to_string(t.columns) + " other columns tested than rows of rounding noise do" + no_scale(t) +
             ", the rest of its column within their noise: a wrong value, not a wrong weight or activation";
    case FitKind::kElements: {
      std::string sizes;
      for (const FittedRow& w : t.rows) sizes += (sizes.empty() ? "" : ", ") + signed_short(w.value);
      return describe_values(t) + ": those " + std::to_string(t.rows.size()) + " values are off by " + sizes +
             " from their exact values (" + format_short(100 * t.explained) +
             " % of their columns' residual energy; the best alternative " +
             format_short(100 * t.alternative_explained) + " %), and their rows stand out in no more of " +
             std::to_string(t.columns) + " other columns tested than rows of rounding noise do" + no_scale(t) +
             ", the rest of their columns within their noise: wrong values, not a wrong weight or activation";
    }
    case FitKind::kColumnOffset:
      return t.output + " column " + std::to_string(t.col) + ": every row's output is off by " + signed_value +
             " from its exact value (" + shares + ")" +
             (reference::has_bias(info.epilogue) ? ": the kernel's bias of that column is not the dumped one"
                                                 : ": an offset, where the dump declares no bias");
    case FitKind::kGroupScale:
      return t.output + " column " + std::to_string(t.col) + ", " + range_text(t.k_begin, t.k_end, t.group) +
             ": the residuals fit a scale of " + format_short(t.value) + "x the dumped scale of that affine group (" +
             shares + "): its s q part is scaled (its bias alone explains less)";
    case FitKind::kScaleBlock:
      return describe_scale_block(t, info);
    case FitKind::kRange:
      return describe_range(t);
    case FitKind::kColumnSwap: {
      const std::string col = std::to_string(t.col), other = std::to_string(t.other_col);
      const std::string what = t.with_epilogue ? "exact outputs, bias and residual included" : "exact dot products";
      const std::string s = t.output + " column " + col + " holds column " + other + "'s " + what + " (they explain " +
                            format_short(100 * t.explained) + " % of its residual energy, fitted " +
                            format_short(t.value) + "x; the best fit of its own " +
                            format_short(100 * t.alternative_explained) + " %)";
      if (!t.exchanged) {
        return s + (t.with_epilogue ? ": column " + other + "'s output is stored in column " + col +
                                          " (a store to the wrong column, or the outputs permuted)"
                                    : ": the kernel's weight row " + col + " is row " + other +
                                          "'s (a row duplicated, or the output channels permuted)");
      }
      const std::string pair =
          std::to_string(std::min(t.col, t.other_col)) + " and " + std::to_string(std::max(t.col, t.other_col));
      return s + ", and column " + other + " holds column " + col + "'s: " +
             (t.with_epilogue ? "outputs " + pair + " are exchanged after the epilogue"
                              : "the kernel's weight rows " + pair + " are exchanged (output channels permuted)");
    }
    case FitKind::kGroupOffset:
      return describe_group_offset(t, info, shares, signed_value);
  }
  return std::string();
}

}  // namespace ncert::certify::detail
