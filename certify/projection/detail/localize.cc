#include "certify/projection/detail/localize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "certify/projection/detail/text.h"
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
  Index part_row = -1, part_width = 0;   ///< that row's partial dots over K ranges this wide
  Index range_begin = 0, range_end = 0;  ///< the strongest candidate's K range (empty: none)
};

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
  std::vector<double> parts;                             ///< Extras::part_row's partial dots
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
  if (extras.part_row >= 0)
    c.parts.assign(static_cast<std::size_t>((K + extras.part_width - 1) / extras.part_width), 0.0);
  double v_max = 0;
  for (Index i = 0; i < c.rows; ++i) {
    double dot = 0, mag = 0, range = 0;
    for (Index k = 0; k < K; ++k) {
      // The products use the engine's quantized activations where x_quant is declared.
      const double x = quantized ? p.x_quantized.value(i, k) : static_cast<double>(p.x.at(i, k));
      const double xw = x * w[static_cast<std::size_t>(k)];
      dot += xw;
      mag += std::fabs(xw);
      if (k >= extras.range_begin && k < extras.range_end) range += xw;
      if (i == extras.part_row) c.parts[static_cast<std::size_t>(k / extras.part_width)] += xw;
      if (c.groups > 0) {
        const std::size_t at = static_cast<std::size_t>(i * c.groups + k / gs);
        c.sx[at] += x;
        // An affine group's scale moves s q only, its bias terms b x stay: w - b is s q up to
        // the dequantization's rounding.
        c.sxw[at] += c.affine ? x * (w[static_cast<std::size_t>(k)] - bias[static_cast<std::size_t>(k / gs)]) : xw;
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

/// The row test: row `row` stands out in the strongest column; of up to kRowColumns other
/// columns (evenly spaced), in how many does it stand out too, by the same rule? In at least
/// half: a row fault, fitted by a scale of the row's whole dot product and, where x_quant
/// declares groups along K, of each activation group's part (a wrong scale of one group). In
/// none, where the signature test found one significant column only (`one_column`): one wrong
/// value. Otherwise (two rows, two values in different columns, no other column to test)
/// nothing: the candidates' reading stands.
std::optional<LocationFit> row_fit(const LoadedProjection& d, const reference::LinearProblem& p, const OutputRows& rows,
                                   Index col, const ColumnResiduals& strongest, const Fits& fits, bool one_column) {
  const ProjectionInfo& info = *d.info;
  const Index row = fits.row, K = info.k;
  const std::size_t at = static_cast<std::size_t>(row);
  const Index width =
      info.x_quant.type != reference::XQuantType::kNone && info.x_quant.group > 0 && info.x_quant.group < K
          ? info.x_quant.group
          : K;
  const std::size_t parts = static_cast<std::size_t>((K + width - 1) / width);
  // Per part, then the whole row last: sum r a and sum a^2 over the row's weighted values.
  std::vector<double> r_a(parts + 1, 0.0), a_a(parts + 1, 0.0);
  double e_total = 0, e_row = 0, e_alt = 0;
  Index tested = 0, standing_out = 0;
  auto add_row = [&](const ColumnResiduals& c) {
    const double r = weighted(c, row), u = 1 / c.v[at];
    for (std::size_t a = 0; a < parts; ++a) {
      r_a[a] += r * c.parts[a] * u;
      a_a[a] += c.parts[a] * u * c.parts[a] * u;
    }
    r_a[parts] += r * c.dot[at] * u;
    a_a[parts] += c.dot[at] * u * c.dot[at] * u;
  };
  const Extras extras{row, width, 0, 0};
  const Index others = std::min(kRowColumns, info.n - 1);
  for (Index t = 0; t < others; ++t) {
    // Evenly spaced over the n - 1 columns other than col.
    Index n = t * (info.n - 1) / others;
    n += n >= col ? 1 : 0;
    const ColumnResiduals c = column_residuals(d, p, rows, n, extras);
    const Fits g = fit(c);
    const double r = weighted(c, row);
    if (g.rows < kMinFitRows || std::isnan(r)) continue;
    ++tested;
    e_total += g.rr;
    e_row += r * r;
    e_alt += g.best_other(kRowAlone);
    if (g.rr > 0 && dominates(r * r, g.best_other(kRowAlone), g.rr)) ++standing_out;
    add_row(c);
  }
  LocationFit t;
  t.output = std::string(engine_output_name(rows.id));
  t.row = row;
  if (rows.id != EngineOutputId::kUnpacked) t.slot = (*rows.slot_of_row)[at];
  t.col = col;
  t.columns = tested;
  if (tested > 0 && 2 * standing_out >= tested) {
    add_row(column_residuals(d, p, rows, col, extras));
    const double r = weighted(strongest, row);
    const double row_energy = e_row + r * r;
    // The best scale: the whole row unless one part explains more.
    std::size_t best = parts;
    double e_best = a_a[parts] > 0 ? r_a[parts] * r_a[parts] / a_a[parts] : 0.0;
    for (std::size_t a = 0; parts > 1 && a < parts; ++a) {
      if (a_a[a] > 0 && r_a[a] * r_a[a] / a_a[a] > e_best) {
        e_best = r_a[a] * r_a[a] / a_a[a];
        best = a;
      }
    }
    t.kind = FitKind::kRow;
    t.value = a_a[best] > 0 ? 1 + r_a[best] / a_a[best] : 1.0;
    t.k_begin = best == parts ? 0 : static_cast<Index>(best) * width;
    t.k_end = best == parts ? K : std::min(K, t.k_begin + width);
    t.group = best == parts ? -1 : static_cast<Index>(best);
    t.explained = std::min(1.0, row_energy / (e_total + fits.rr));
    t.alternative_explained = std::min(1.0, (e_alt + fits.best_other(kRowAlone)) / (e_total + fits.rr));
    t.scale_explained = row_energy > 0 ? std::min(1.0, e_best / row_energy) : 0.0;
    return t;
  }
  // One value moves one column (more are a fault of several values, rows or columns, which no
  // single structure here explains: two values in columns 7 and 102, the second not among those
  // tested, read as one).
  if (tested == 0 || standing_out > 0 || !one_column) {
    return std::nullopt;
  }
  t.kind = FitKind::kElement;
  t.value = strongest.r[at];
  t.explained = std::min(1.0, fits.energy[kRowAlone] / fits.rr);
  t.alternative_explained = std::min(1.0, fits.best_other(kRowAlone) / fits.rr);
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

/// A group's place in the fit: its number and K range.
void set_group(LocationFit& t, Index group, Index group_size) {
  t.group = group;
  t.k_begin = group * group_size;
  t.k_end = t.k_begin + group_size;
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
  const std::string output(engine_output_name(*held));
  const Index col = strongest.col;
  const OneValue one_value = one_value_rule(*held, col, columns);
  const reference::LinearProblem p = d.problem(reference::kDefaultLambda);
  const ColumnResiduals c = column_residuals(d, p, rows, col, Extras{-1, 0, strongest.k_begin, strongest.k_end});
  const Fits fits = fit(c);
  if (fits.rows < kMinFitRows || !(fits.rr > 0)) return;
  if (std::optional<LocationFit> t = swap_fit(d, p, rows, columns.strongest, c, fits, col)) {
    e.fit = *t;
    return;
  }
  const std::size_t best = fits.best();
  // The candidates' own reading stands for a scale or their own range, except an affine
  // group's scale, whose s q part alone no candidate models.
  if (best == kColumnScale || best == kCandidate || (best == kGroupScale && !c.affine)) return;
  // An affine group's scale and bias, over codes q >= 0, fit nearly alike (each alone explained
  // about 96 % of a group with both wrong, which the two together explain): where the winner
  // is one of them, the other of the same group competes with it only to tell which one.
  const bool affine_pair =
      c.affine && (best == kGroupScale || best == kGroupOffset) && fits.scale_group == fits.offset_group;
  const double other = fits.best_other(best);
  const double outside_pair = affine_pair ? fits.best_other(kGroupScale, kGroupOffset) : other;
  const bool alone = dominates(fits.energy[best], other, fits.rr);
  if (!alone && !(affine_pair && dominates(fits.energy[best], outside_pair, fits.rr))) return;
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
  if (best == kRowAlone) {
    std::optional<LocationFit> t = row_fit(d, p, rows, col, c, fits, one_value.one_column);
    if (t && t->kind == FitKind::kElement && one_value.pair && !same_value(f, rows, *one_value.pair, t->row, col)) {
      return;
    }
    if (t) e.fit = *t;
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

std::string describe_zero_point(const ZeroPointFinding& z) {
  const double whole = std::round(z.shift);
  return z.output + " column " + std::to_string(z.col) + ", " + range_text(z.k_begin, z.k_end, z.group) +
         ": the residuals fit that group's zero point " + (whole > 0 ? "+" : "") + format_short(whole) + " (fitted " +
         format_short(z.shift) + "): the kernel's weights there are the dumped ones " +
         (whole > 0 ? "minus " : "plus ") + format_short(std::fabs(whole)) + "x the group's scale (explains " +
         format_short(100 * z.explained) + " % of the column's residual energy; the best alternative " +
         format_short(100 * z.alternative_explained) + " %)";
}

std::string describe_row(const LocationFit& t) {
  if (t.slot < 0) return t.output + " row " + std::to_string(t.row);
  if (t.output == engine_output_name(EngineOutputId::kCompact)) {
    return t.output + " slot " + std::to_string(t.slot) + " (row " + std::to_string(t.row) + ")";
  }
  return t.output + " row " + std::to_string(t.row) + " (slot " + std::to_string(t.slot) + ")";
}

std::string describe_fit(const LocationFit& t, const ProjectionInfo& info) {
  const std::string shares = format_short(100 * t.explained) + " % of the residual energy; the best alternative " +
                             format_short(100 * t.alternative_explained) + " %";
  std::string signed_value = format_short(t.value);
  if (t.value > 0) signed_value.insert(0, 1, '+');
  switch (t.kind) {
    case FitKind::kRow: {
      const std::string where = describe_row(t) + ": the residuals lie in that row alone, in column " +
                                std::to_string(t.col) + " and in at least half of " + std::to_string(t.columns) +
                                " other columns tested (" + shares + ")";
      if (t.scale_explained < 0.9) {
        return where + ", and fit no scale of their exact values (" + format_short(100 * t.scale_explained) +
               " %): that row's activations are not the ones the kernel multiplied";
      }
      if (t.group < 0) {
        return where + "; there the outputs fit " + format_short(t.value) +
               "x their exact values (a wrong activation scale for that row, or its activations scaled after "
               "they were dumped)";
      }
      return where + "; there the outputs fit " + format_short(t.value) + "x the exact contribution of k " +
             std::to_string(t.k_begin) + "-" + std::to_string(t.k_end - 1) + " (activation group " +
             std::to_string(t.group) + "): that group's activation scale is not the one the kernel used";
    }
    case FitKind::kElement:
      return describe_row(t) + ", column " + std::to_string(t.col) + ": that one value is off by " + signed_value +
             " from its exact value (" + shares + "), and the row stands out in none of " + std::to_string(t.columns) +
             " other columns tested: a wrong value, not a wrong weight or activation";
    case FitKind::kColumnOffset:
      return t.output + " column " + std::to_string(t.col) + ": every row's output is off by " + signed_value +
             " from its exact value (" + shares + ")" +
             (reference::has_bias(info.epilogue) ? ": the kernel's bias of that column is not the dumped one"
                                                 : ": an offset, where the dump declares no bias");
    case FitKind::kGroupScale:
      return t.output + " column " + std::to_string(t.col) + ", " + range_text(t.k_begin, t.k_end, t.group) +
             ": the residuals fit a scale of " + format_short(t.value) + "x the dumped scale of that affine group (" +
             shares + "): its s q part is scaled (its bias alone explains less)";
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
    case FitKind::kGroupOffset: {
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
  }
  return std::string();
}

}  // namespace ncert::certify::detail
