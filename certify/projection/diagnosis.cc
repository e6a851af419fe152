// Declaration diagnosis (diagnosis.h): the sample is the first kDiagnosisRows rows of y_unpacked
// and its first diagnosis_columns columns; each trial is one changed declaration, evaluated by
// the same reference over the sample and counted against the engine's values there.
#include "certify/projection/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <string_view>

#include "certify/projection/reference_pass.h"
#include "certify/report/format.h"
#include "reference/code_walk.h"
#include "reference/float_bits.h"
#include "reference/linear.h"

namespace ncert::certify {

namespace {

/// Sampled rows below which an undeclared per-column bias is not tried: a constant per column
/// has one degree of freedom, so with one row it fits any column and says nothing; with 4, each
/// column's 4 values must agree on it.
constexpr Index kMinBiasRows = 4;

using reference::Dequant;
using reference::DequantOp;
using reference::LinearProblem;
using reference::Weights;
using reference::WeightSegment;

/// The weights of output columns [0, cols): the segments that start there, clipped.
Weights clip_weights(const Weights& w, Index cols) {
  Weights out;
  out.k = w.k;
  out.n = std::min(w.n, cols);
  for (const WeightSegment& s : w.segments) {
    if (s.row_begin >= out.n) continue;
    WeightSegment c = s;
    c.row_end = std::min(s.row_end, out.n);
    out.segments.push_back(c);
  }
  return out;
}

struct Sample {
  Index rows = 0, cols = 0;
  Weights weights;
  /// The dump's row of each sampled row (empty: the first `rows` rows), and the gathered rows
  /// of x and of the residual the problem views where they are chosen (rows_problem).
  std::vector<Index> row_of;
  std::vector<unsigned char> x_rows, residual_rows;
  Index row(Index i) const { return row_of.empty() ? i : row_of[static_cast<std::size_t>(i)]; }
  /// The block buffers every trial's reference shares: the trials run on problems of one
  /// shape, one after another (reference::ReferenceScratch).
  reference::ReferenceScratch* scratch = nullptr;
  reference::ReferenceOptions options() const {
    reference::ReferenceOptions o;
    o.scratch = scratch;
    return o;
  }
};

/// Where a sampled value lies: inside its interval, outside it, or inside but far off the noise.
inline constexpr char kInside = 0, kOutside = 1, kFarOff = 2;

/// What the declaration's evaluation leaves for the trials': per sampled value, sigma^2 (the
/// residual model's accumulation with the output rounding added: half a spacing of a bf16 / f16
/// output, one f32 rounding of an f32 one; reference_pass.cc), and whether it lies outside its
/// interval, and its r^2 / sigma^2 (NaN where not finite). sigma is always the declaration's: a
/// trial that only widens the model (a wider accumulator, folded dequantization) would
/// otherwise lower every energy whatever the cause, and only a trial that moves the centres
/// onto the data lowers it here.
struct Declared {
  std::vector<double> var, q;
  std::vector<double> centre, bound;  ///< per sampled value, the declaration's (channel_trial)
  std::vector<char> outside;          ///< kInside, kOutside, or kFarOff (where `far_off`)
  /// The residual tests' diagnosis: values far off the rounding noise (diagnosis_far_energy)
  /// count as outside too. Every value lies inside B there, or all but under 1 %, and a few
  /// wrong values inside it (two at +0.008 beside x rounded to f16 at K 4096, their r^2 /
  /// sigma^2 near 1e4 each) held the energy of the trial that fits the rest above the limit.
  bool far_off = false;
  bool evaluated() const { return !var.empty(); }
};

/// The mean of the finite `q`, those of the values `out` marks left out where `leave`.
double mean_energy(const std::vector<double>& q, const std::vector<char>& out, bool leave) {
  double sum = 0;
  Index n = 0;
  for (std::size_t c = 0; c < q.size(); ++c) {
    if (std::isnan(q[c]) || (leave && out[c] != 0)) continue;
    sum += q[c];
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : -1.0;
}

/// One trial on the sample: the values inside its intervals (-1: cannot evaluate), the values
/// left to bound, and the others' mean r^2 / sigma^2. The declaration leaves its own values
/// outside out of its energy where they are fewer than kDiagnosisShare of the sample, as
/// variance does, so wrong values alone leave it within the limit and nothing is tried for
/// them. A trial leaves its values outside to bound only where they are that few, each was
/// outside as declared too, and over the values it keeps its energy is within the limit while
/// the declaration's over the same values is beyond it: the data fits the trial to the
/// rounding noise, and what it leaves are wrong values beside a declaration mistake (two of
/// them beside x rounded to f16 at K 4096 held the mistake unnamed, their r^2 / sigma^2 of
/// order 1e4 each). Compared so, like for like, a trial that only widens B keeps the
/// declaration's centres and energy and never leaves values (a reviewer's: accumulator =
/// matrix-unit held all but 3 of 512 values of a wrong weight, its energy over those 509 0.35
/// against the declaration's 2,216 over all 512, and was named).
struct Evaluation {
  Index inside = -1, left = 0, far = 0;
  double energy = -1;
};

/// `own_model`: the trial's energies are taken with its own sigma, not the declaration's. Only
/// for a declaration that changes the kernel's rounding noise itself (bias_at = start: the blocks
/// it adds into the bias round at the bias's magnitude); any other trial that widens the model
/// would "fit" every excess by widening alone.
Evaluation evaluate(const ProjectionFacts& f, const Sample& s, const LinearProblem& p, Declared& d,
                    bool own_model = false) {
  if (!reference::validate_problem(p).ok()) return {};
  auto ref = reference::compute_reference(p, s.options());
  if (!ref.ok()) return {};
  const ProjectionInfo& info = f.info();
  const bool declared = !d.evaluated();  // the first evaluation is the declaration's
  const std::size_t cells = static_cast<std::size_t>(s.rows * s.cols);
  if (declared) {
    d.var.assign(cells, 0.0);
    d.outside.assign(cells, 0);
    d.q.assign(cells, std::nan(""));
    d.centre.assign(cells, 0.0);
    d.bound.assign(cells, 0.0);
  }
  Evaluation e;
  e.inside = 0;
  std::vector<double> q(cells, std::nan(""));  // r^2 / sigma^2 where finite
  std::vector<char> out(cells, kInside);
  const double far = d.far_off ? diagnosis_far_energy(static_cast<Index>(cells)) : HUGE_VAL;
  Index far_values = 0;  // inside their intervals but far off the noise
  for (Index i = 0; i < s.rows; ++i) {
    for (Index j = 0; j < s.cols; ++j) {
      const std::size_t c = static_cast<std::size_t>(i * s.cols + j);
      const float z = f.data.y_unpacked.value(info.output, info.out_stride, s.row(i), j);
      const Index at = ref->at(i, j);
      const bool in = reference::contains(ref->accept[at], z);
      e.inside += in ? 1 : 0;
      if (declared) {
        const double h = output_rounding_bound(std::fabs(ref->center[at]) + ref->bound[at], info.output);
        d.var[c] = ref->sigma[at] * ref->sigma[at] + h * h;
        d.centre[c] = ref->center[at];
        d.bound[c] = ref->bound[at];
      }
      const double r = static_cast<double>(z) - ref->center[at];
      double var = d.var[c];
      if (own_model) {
        const double h = output_rounding_bound(std::fabs(ref->center[at]) + ref->bound[at], info.output);
        var = ref->sigma[at] * ref->sigma[at] + h * h;
      }
      if (std::isfinite(r) && std::isfinite(var) && var > 0) q[c] = r * r / var;
      const bool far_off = in && q[c] > far;  // false for NaN
      far_values += far_off ? 1 : 0;
      out[c] = !in ? kOutside : far_off ? kFarOff : kInside;
      if (declared) d.outside[c] = out[c];
    }
  }
  const Index outside = static_cast<Index>(cells) - e.inside;
  // The values that may leave: those outside and far off together where fewer than 1 %, else
  // those outside alone where they are (a mistake leaves many values far off as declared, 4 %
  // at a mean r^2 / sigma^2 of 13, and a wrong value outside B beside them is still left out).
  const double share = kDiagnosisShare * static_cast<double>(cells);
  const bool both = outside + far_values > 0 && static_cast<double>(outside + far_values) < share;
  const bool outside_alone = !both && outside > 0 && static_cast<double>(outside) < share;
  std::vector<char> leave(cells, 0);
  bool as_declared = true;  // every value leaving is outside or far off as declared too
  for (std::size_t c = 0; c < cells; ++c) {
    leave[c] = out[c] == kOutside ? both || outside_alone : out[c] == kFarOff && both;
    as_declared = as_declared && (leave[c] == 0 || d.outside[c] != kInside);
  }
  const Index left = both || outside_alone ? outside : 0, far_left = both ? far_values : 0;
  if (declared) {
    d.q = q;
    e.left = left;
    e.far = far_left;
    e.energy = mean_energy(q, leave, true);
    return e;
  }
  e.energy = mean_energy(q, leave, false);
  if ((both || outside_alone) && as_declared) {
    const double limit = diagnosis_energy_limit(static_cast<Index>(cells));
    const double kept = mean_energy(q, leave, true), as_declared_kept = mean_energy(d.q, leave, true);
    if (kept >= 0 && kept <= limit && as_declared_kept > limit) {
      e.left = left;
      e.far = far_left;
      e.energy = kept;
    }
  }
  return e;
}

/// `p` on the output columns [0, w.n) whose weights `w` holds: its bias and residual clipped
/// to them too.
LinearProblem on_columns(LinearProblem p, const Weights& w) {
  p.weights = &w;
  if (!p.bias.empty()) p.bias.size = w.n;
  if (!p.residual.empty()) p.residual.cols = w.n;
  return p;
}

/// `rows` of a matrix view gathered into `buffer` (their elements as stored), and the view of them.
reference::MatrixView gather_rows(const reference::MatrixView& m, const std::vector<Index>& rows,
                                  std::vector<unsigned char>& buffer) {
  const std::size_t size = static_cast<std::size_t>(dtype_size(m.dtype));
  const std::size_t row_bytes = static_cast<std::size_t>(m.cols) * size;
  buffer.resize(rows.size() * row_bytes);
  const auto* from = static_cast<const unsigned char*>(m.data);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(buffer.data() + i * row_bytes, from + static_cast<std::size_t>(rows[i] * m.stride) * size, row_bytes);
  }
  reference::MatrixView out = m;
  out.data = buffer.data();
  out.rows = static_cast<Index>(rows.size());
  out.stride = m.cols;
  return out;
}

/// The projection's problem on the sample's columns and on `rows` of the dump (x and the
/// residual gathered into `s`), or none where the activations are quantized (their codes and
/// scales would need the same gather; no trial here needs them).
std::optional<LinearProblem> rows_problem(const ProjectionFacts& f, const CheckOptions& options,
                                          const std::vector<Index>& rows, Sample& s) {
  if (f.info().x_quant.type != reference::XQuantType::kNone || rows.empty()) return std::nullopt;
  s.row_of = rows;
  s.rows = static_cast<Index>(rows.size());
  s.weights = clip_weights(f.data.weights, diagnosis_columns(f.data.weights));
  s.cols = s.weights.n;
  LinearProblem base = on_columns(f.data.problem(options.lambda), s.weights);
  base.x = gather_rows(base.x, rows, s.x_rows);
  if (!base.residual.empty()) base.residual = gather_rows(base.residual, rows, s.residual_rows);
  return base;
}

/// The sample's rows and columns of y_unpacked, and the projection's problem restricted to them.
LinearProblem sample_problem(const ProjectionFacts& f, const CheckOptions& options, Sample& s) {
  s.rows = std::min(f.info().m, kDiagnosisRows);
  s.weights = clip_weights(f.data.weights, diagnosis_columns(f.data.weights));
  s.cols = s.weights.n;
  LinearProblem base = on_columns(f.data.problem(options.lambda), s.weights);
  base.x.rows = s.rows;
  if (!base.residual.empty()) base.residual.rows = s.rows;
  return base;
}

/// The sampled y_unpacked values the problem's emulated walk reproduces bit for bit (-1: cannot
/// evaluate).
Index walk_equal_on(const ProjectionFacts& f, const Sample& s, const LinearProblem& p) {
  if (!reference::validate_problem(p).ok()) return -1;
  reference::ReferenceOptions ro = s.options();
  ro.residual_tests = false;
  auto ref = reference::compute_reference(p, ro);
  if (!ref.ok() || ref->walk.empty()) return -1;
  const ProjectionInfo& info = f.info();
  Index equal = 0;
  for (Index i = 0; i < s.rows; ++i) {
    for (Index j = 0; j < s.cols; ++j) {
      const std::uint32_t engine = f.data.y_unpacked.bits(info.output, info.out_stride, s.row(i), j);
      equal += engine == reference::bits_of_value(ref->walk[ref->at(i, j)], info.output) ? 1 : 0;
    }
  }
  return equal;
}

/// `p` (a problem on the sample) restricted to the sample's first `cols` columns of its own
/// weights, which `screen` then holds.
LinearProblem first_columns(const LinearProblem& p, const Sample& s, Index cols, Sample& screen) {
  screen.rows = s.rows;
  screen.row_of = s.row_of;
  screen.weights = clip_weights(*p.weights, cols);
  screen.cols = screen.weights.n;
  return on_columns(p, screen.weights);
}

/// A walk trial: the sampled values its emulated walk reproduces bit for bit, out of `sampled`.
struct WalkCount {
  Index sampled = 0, equal = -1;  ///< equal -1: cannot evaluate
};

/// A walk trial that names a mistake must reproduce every sampled value, and the walk is
/// emulated value by value, every product and partial sum rounded: the bf16 and f16
/// accumulators' walks over 8 x 256 sampled values at K 5,120 took about 0.7 s of a 1.5 s check
/// of a production-shape dump whose `variance` fails (docs/performance.md, "Diagnosing a
/// failure"). So a trial runs on the sample's first kWalkScreenCols columns
/// first, and on the whole sample only where it reproduces all of those; one that does not is
/// counted on those alone (its own `sampled`). Which trials fit is the same either way.
constexpr Index kWalkScreenCols = 16;

WalkCount walk_equal(const ProjectionFacts& f, const Sample& s, const LinearProblem& p) {
  if (s.cols > kWalkScreenCols) {
    Sample screen;
    screen.scratch = s.scratch;
    const LinearProblem q = first_columns(p, s, kWalkScreenCols, screen);
    const Index equal = walk_equal_on(f, screen, q);
    if (equal < 0 || equal < screen.rows * screen.cols) return {screen.rows * screen.cols, equal};
  }
  return {s.rows * s.cols, walk_equal_on(f, s, p)};
}

/// A bf16 or f16 accumulator, held bit for bit: the kernel adds every product into a narrow sum
/// in k order (ATen's own bf16 GEMM, torch 1.13). As a bound its K roundings of 2^-8 are vacuous
/// at usual K (K u >= 1/2: it "fits" dropped tiles and doubled scales too), so it is tried as a
/// walk, promote:K:p:rne, and fits only where it reproduces every sampled value (its energy is
/// then 0: no residual against the emulated values).
void narrow_accumulator_trials(const ProjectionFacts& f, const Sample& s, const LinearProblem& base,
                               std::vector<DeclarationTrial>& trials) {
  const ProjectionInfo& info = f.info();
  if (info.walk.declared || info.x_quant.type != reference::XQuantType::kNone) return;
  // Each with its fused form too: f16 FMA hardware (AVX512-FP16, ARM's FMLA) rounds x*w + acc
  // once (a review's such kernel read "no single other declaration fits").
  for (const auto& [bits, type] : {std::pair<int, const char*>{8, "bf16"}, {11, "f16"}}) {
    for (const bool fma : {false, true}) {
      const std::string walk =
          "promote:" + std::to_string(info.k) + ":" + std::to_string(bits) + ":rne" + (fma ? ":fma" : "");
      auto parsed = reference::parse_k_walk(walk);
      if (!parsed.ok()) continue;
      LinearProblem p = base;
      p.walk = *parsed;
      const WalkCount n = walk_equal(f, s, p);
      if (n.equal < 0) continue;
      trials.push_back(
          {std::string("accumulator = ") + type + " (k_walk = " + walk +
               (fma ? ": every product added into " + std::string(bits == 11 ? "an " : "a ") + type +
                          " sum with one rounding (fused multiply-add), k ascending)"
                    : ": every product and partial sum rounded to " + std::string(type) + ", k ascending)"),
           "", TrialEffect::kMovesCentres, n.sampled, n.equal, n.equal == n.sampled ? 0.0 : -1.0});
    }
  }
}

/// Per sampled column, the shift of its values an undeclared bias would be: each value z admits
/// the shifts b with z inside its interval moved by b, about [z - hi, z - lo]; the middle of
/// what every row of the column admits (where none fits every row, the middle still fits some,
/// and the trial counts). Empty when the reference cannot be evaluated.
std::vector<float> column_shifts(const ProjectionFacts& f, const Sample& s, const LinearProblem& base) {
  auto ref = reference::compute_reference(base, s.options());
  if (!ref.ok()) return {};
  const ProjectionInfo& info = f.info();
  std::vector<float> bias(static_cast<std::size_t>(s.cols));
  for (Index j = 0; j < s.cols; ++j) {
    double lo = -HUGE_VAL, hi = HUGE_VAL;
    for (Index i = 0; i < s.rows; ++i) {
      const double z = f.data.y_unpacked.value(info.output, info.out_stride, i, j);
      const reference::Interval& a = ref->accept[ref->at(i, j)];
      lo = std::max(lo, z - a.hi);
      hi = std::min(hi, z - a.lo);
    }
    const double mid = (lo + hi) / 2;
    bias[static_cast<std::size_t>(j)] = std::isfinite(mid) ? static_cast<float>(mid) : 0.0f;
  }
  return bias;
}

/// The zero points of `v` as the other nibble order reads the same bytes: within each byte
/// the two groups trade places, and with an odd group count the last group reads the byte's
/// unused nibble, which the reader requires to be 0.
std::vector<std::uint8_t> swap_zero_point_nibbles(const reference::Af4View& v) {
  const Index groups = v.k / v.layout.group_size;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(v.rows * groups));
  for (Index r = 0; r < v.rows; ++r) {
    const std::uint8_t* in = v.zero_points + r * groups;
    std::uint8_t* o = out.data() + r * groups;
    for (Index g = 0; g + 1 < groups; g += 2) {
      o[g] = in[g + 1];
      o[g + 1] = in[g];
    }
    if (groups % 2 == 1) o[groups - 1] = 0;
  }
  return out;
}

/// Changes one segment for a trial, tries it, and restores it.
using SegmentTrial = std::function<void(const std::string&, const std::function<void(WeightSegment&)>&, TrialEffect)>;

/// An AF4 segment's trials: each other dequantization, operation order and nibble order.
void af4_trials(const WeightSegment& saved, const SegmentTrial& with) {
  const reference::Af4Layout& L = saved.af4.layout;
  for (Dequant d : {Dequant::kExact, Dequant::kF32, Dequant::kOutput, Dequant::kFolded}) {
    if (d == L.dequant) continue;
    // Folded dequantization charges the fold's roundings to B and keeps the exact weights.
    with(
        "dequant = " + std::string(reference::dequant_name(d)), [&](WeightSegment& w) { w.af4.layout.dequant = d; },
        d == Dequant::kFolded ? TrialEffect::kWidensBound : TrialEffect::kMovesCentres);
  }
  const bool pinned = L.dequant == Dequant::kF32 || L.dequant == Dequant::kOutput;
  const bool zero_point = L.variant == reference::Af4Variant::kZeroPoint;
  for (DequantOp op : zero_point ? std::vector<DequantOp>{DequantOp::kSubMul, DequantOp::kFused}
                                 : std::vector<DequantOp>{DequantOp::kFma, DequantOp::kMulAdd}) {
    if (!pinned || op == L.dequant_op || (!zero_point && L.dequant_op == DequantOp::kEither)) continue;
    with(
        "dequant_op = " + std::string(reference::dequant_op_name(op)),
        [&](WeightSegment& w) { w.af4.layout.dequant_op = op; }, TrialEffect::kMovesCentres);
  }
  // The other nibble order within a byte (u32-lsb and u8-lsb share theirs).
  const reference::Af4Packing other =
      L.packing == reference::Af4Packing::kU8Msb ? reference::Af4Packing::kU8Lsb : reference::Af4Packing::kU8Msb;
  with(
      "packing = " + std::string(reference::af4_packing_name(other)),
      [&](WeightSegment& w) { w.af4.layout.packing = other; }, TrialEffect::kMovesCentres);
  // Zero points packed two a byte in the other nibble order: an exporter with the other
  // convention writes them so, alone or with the codes (MatMulNBits packs both alike).
  const reference::ZeroPointPacking zp = L.zero_point_packing;
  if (zero_point && (zp == reference::ZeroPointPacking::kU8Msb || zp == reference::ZeroPointPacking::kU8Lsb)) {
    const auto zp_other = zp == reference::ZeroPointPacking::kU8Msb ? reference::ZeroPointPacking::kU8Lsb
                                                                    : reference::ZeroPointPacking::kU8Msb;
    const std::vector<std::uint8_t> swapped = swap_zero_point_nibbles(saved.af4);
    const std::string zp_text = "zero_point_packing = " + std::string(reference::zero_point_packing_name(zp_other));
    const auto flip_zp = [&](WeightSegment& w) {
      w.af4.zero_points = swapped.data();
      w.af4.layout.zero_point_packing = zp_other;
    };
    with(zp_text, flip_zp, TrialEffect::kMovesCentres);
    with(
        "packing = " + std::string(reference::af4_packing_name(other)) + " and " + zp_text,
        [&](WeightSegment& w) {
          flip_zp(w);
          w.af4.layout.packing = other;
        },
        TrialEffect::kMovesCentres);
  }
}

/// Each quantized segment's trials, on `weights` (the sample's) changed in place, tried, then
/// restored: AF4 segments' af4_trials, and with `scaled_formats` each other dequantization of
/// an int8 / FP8 segment.
void segment_trials(
    Weights& weights, bool scaled_formats,
    const std::function<void(const std::string& declaration, const std::string& segment, TrialEffect effect)>& trial) {
  for (WeightSegment& seg : weights.segments) {
    const WeightSegment saved = seg;
    const auto with = [&](const std::string& declaration, const std::function<void(WeightSegment&)>& change,
                          TrialEffect effect) {
      change(seg);
      trial(declaration, seg.name, effect);
      seg = saved;
    };
    if (seg.format == reference::WeightFormat::kAf4) {
      af4_trials(saved, with);
    } else if (scaled_formats && reference::is_scaled_format(seg.format)) {
      for (Dequant d : {Dequant::kExact, Dequant::kF32, Dequant::kOutput}) {
        if (d == saved.scaled.dequant) continue;
        with(
            "dequant = " + std::string(reference::dequant_name(d)), [&](WeightSegment& w) { w.scaled.dequant = d; },
            TrialEffect::kMovesCentres);
      }
    }
  }
}

/// The first `cols` columns of W's transpose (K = N), as f32 weights over `storage`.
Weights transposed_sample(const ProjectionFacts& f, Index cols, std::vector<float>& storage) {
  const Index k = f.info().k;
  storage.assign(static_cast<std::size_t>(cols * k), 0.0f);
  std::vector<float> kernel(static_cast<std::size_t>(k));
  for (Index c = 0; c < k; ++c) {  // row c of W is column c of its transpose
    reference::decode_weight_row(f.data.weights, c, f.info().x_dtype, nullptr, nullptr, kernel.data());
    for (Index j = 0; j < cols; ++j) storage[static_cast<std::size_t>(j * k + c)] = kernel[j];
  }
  Weights t;
  t.k = k;
  t.n = cols;
  WeightSegment seg;
  seg.name = "transposed";
  seg.format = reference::WeightFormat::kF32;
  seg.row_begin = 0;
  seg.row_end = cols;
  seg.values = storage.data();
  t.segments = {seg};
  return t;
}

/// The per-channel least-squares sums of one column range of the sample: num[k] = sum_ij r x_ik
/// w_jk / sigma^2 and den[k] = sum_ij (x_ik w_jk)^2 / sigma^2 over its rows and the columns
/// [begin, end) (`t` = r / sigma^2, `u` = 1 / sigma^2 per sampled value, 0 where left out).
struct ChannelSums {
  Index begin = 0, end = 0;
  std::vector<double> num, den;
  bool own_fit = false;  ///< wide enough for a fit in its columns alone (kChannelCols)
};

ChannelSums channel_sums(const Sample& s, const LinearProblem& base, const std::vector<double>& t,
                         const std::vector<double>& u, Index begin, Index end) {
  const Index K = base.x.cols;
  ChannelSums out{begin, end, std::vector<double>(static_cast<std::size_t>(K), 0.0),
                  std::vector<double>(static_cast<std::size_t>(K), 0.0)};
  std::vector<double> w(static_cast<std::size_t>(K));
  // ra[i K + k] = sum_j t_ij w_jk, aa[i K + k] = sum_j u_ij w_jk^2 over the columns.
  std::vector<double> ra(static_cast<std::size_t>(s.rows * K), 0.0), aa(ra.size(), 0.0);
  for (Index j = begin; j < end; ++j) {
    reference::decode_weight_row(s.weights, j, base.x.dtype, w.data(), nullptr, nullptr);
    for (Index i = 0; i < s.rows; ++i) {
      const std::size_t c = static_cast<std::size_t>(i * s.cols + j);
      if (u[c] == 0) continue;
      double* ri = ra.data() + i * K;
      double* ai = aa.data() + i * K;
      for (Index k = 0; k < K; ++k) {
        const double wk = w[static_cast<std::size_t>(k)];
        ri[k] += t[c] * wk;
        ai[k] += u[c] * wk * wk;
      }
    }
  }
  for (Index k = 0; k < K; ++k) {
    for (Index i = 0; i < s.rows; ++i) {
      const double x = base.x.at(i, k);
      out.num[static_cast<std::size_t>(k)] += x * ra[static_cast<std::size_t>(i * K + k)];
      out.den[static_cast<std::size_t>(k)] += x * x * aa[static_cast<std::size_t>(i * K + k)];
    }
  }
  return out;
}

/// One channel fit: channel k scaled by 1 + scale, in every column (segment -1) or in one
/// segment's columns alone.
struct ChannelFit {
  static constexpr Index kJoint = -2;  ///< `segment`: one scale per segment (part_scale)
  Index k = -1, segment = -1;
  double explained = 0, scale = 0;
  std::vector<double> part_scale;  ///< kJoint: per part, 0 where that segment is not scaled
};

/// The x beyond which the largest of `n` chi-square values of `dof` degrees of freedom lies
/// with probability at most `alpha`: Chernoff's P(X >= x) <= exp(-(x - d - d ln(x / d)) / 2)
/// for x > d, solved by bisection (dof 1 is the 2 ln(2 n / alpha) of the single fits, nearly).
double chi_square_max(Index dof, double n, double alpha) {
  const double d = static_cast<double>(dof), target = 2 * std::log(n / alpha);
  double lo = d, hi = d + 4 * target + 64;
  for (int i = 0; i < 200; ++i) {
    const double x = (lo + hi) / 2;
    (x - d - d * std::log(x / d) < target ? lo : hi) = x;
  }
  return hi;
}

/// A channel wrong in several segments of its weights (W[:, 17] x 1.02 in two segments of a
/// fused q/k/v, or x 1.02 in one and x 0.98 in another) explains too little in every column or
/// in one segment, and read "the data fits accumulator = matrix-unit" (a review's). Per
/// channel, one scale per segment wide enough (disjoint columns: each its own fit) explains
/// the sum of their energies, a chi-square of `own` degrees of freedom under noise. It replaces
/// `best` where it explains more than the best of K such sums of noise would, and more than
/// `best` by more than the best of K sums of own - 1 would (a fault of every column, or of one
/// segment, stays named so). The segments whose own fit is not beyond chance keep their
/// scale.
void joint_channel_fit(const std::vector<ChannelSums>& parts, Index K, Index own, ChannelFit& best) {
  const double n = static_cast<double>(K);
  const double alone = 2 * std::log(2 * n * static_cast<double>(own) / kResidualAlpha);
  const double beyond = chi_square_max(own, n, kResidualAlpha / 2);
  const double extra = chi_square_max(own - 1, n, kResidualAlpha / 2);
  Index best_k = -1;
  double best_joint = 0;
  for (Index k = 0; k < K; ++k) {
    double joint = 0;
    for (const ChannelSums& p : parts) {
      const double num = p.num[static_cast<std::size_t>(k)], den = p.den[static_cast<std::size_t>(k)];
      if (p.own_fit && den > 0 && std::isfinite(num)) joint += num * num / den;
    }
    if (joint > best_joint) {
      best_joint = joint;
      best_k = k;
    }
  }
  if (best_k < 0 || !(best_joint > beyond) || !(best_joint - best.explained > extra)) return;
  ChannelFit fit{best_k, ChannelFit::kJoint, best_joint, 0, std::vector<double>(parts.size(), 0.0)};
  Index scaled = 0;
  for (std::size_t g = 0; g < parts.size(); ++g) {
    const double num = parts[g].num[static_cast<std::size_t>(best_k)];
    const double den = parts[g].den[static_cast<std::size_t>(best_k)];
    if (!parts[g].own_fit || !(den > 0) || !(num * num / den > alone)) continue;
    fit.part_scale[g] = num / den;
    ++scaled;
  }
  if (scaled >= 2) best = std::move(fit);
}

/// The fit explaining the most energy, over every channel in every column and, where the sample
/// holds two weight segments or more with kChannelCols searched columns each, every channel in
/// one segment (a fused q/k/v's W[:, k] wrong in k's weights alone: fitted in every column it
/// explained too little). A fault in every column explains more in every column than in one
/// segment, so it is named so. `candidates`: the fits tried.
ChannelFit best_channel_fit(const std::vector<ChannelSums>& parts, Index K, Index& candidates) {
  ChannelFit best;
  const auto consider = [&](Index k, Index segment, double num, double den) {
    if (!(den > 0) || !std::isfinite(num)) return;
    const double explained = num * num / den;
    if (explained > best.explained) best = {k, segment, explained, num / den, {}};
  };
  const auto own =
      static_cast<Index>(std::count_if(parts.begin(), parts.end(), [](const ChannelSums& p) { return p.own_fit; }));
  const bool per_segment = parts.size() >= 2 && own > 0;
  candidates = K * (per_segment ? 1 + own : 1);
  for (Index k = 0; k < K; ++k) {
    double num = 0, den = 0;
    for (const ChannelSums& p : parts) {
      num += p.num[static_cast<std::size_t>(k)];
      den += p.den[static_cast<std::size_t>(k)];
    }
    consider(k, -1, num, den);
  }
  if (!per_segment) return best;
  for (std::size_t g = 0; g < parts.size(); ++g) {
    if (!parts[g].own_fit) continue;
    for (Index k = 0; k < K; ++k) {
      consider(k, static_cast<Index>(g), parts[g].num[static_cast<std::size_t>(k)],
               parts[g].den[static_cast<std::size_t>(k)]);
    }
  }
  if (own >= 2) joint_channel_fit(parts, K, own, best);
  return best;
}

/// Sampled value c's variance about its centre moved by `shift`: the declaration's
/// accumulation, and the output rounding of the moved value (`h_moved`, half a spacing of it):
/// a channel x 2 under bf16 outputs carried values a binade up, their rounding twice the
/// declared centre's, and the fit's energy read 2.47 against a limit of 1.48 (a review's).
double moved_var(const Declared& d, std::size_t c, double shift, DType output, double& h_moved) {
  h_moved = output_rounding_bound(std::fabs(d.centre[c] + shift) + d.bound[c], output);
  const double h_declared = output_rounding_bound(std::fabs(d.centre[c]) + d.bound[c], output);
  return d.var[c] - h_declared * h_declared + h_moved * h_moved;
}

/// The channel's scale refitted by weighted least squares with each value weighed by its
/// variance about the moved centre, twice (the first fit's weights are the declared centres'):
/// under bf16 outputs the first fit, 2.002x for a channel x 2, left 7 of 512 values off their
/// intervals near zero, where the spacing is finest (a review's).
double refit_scale(const Declared& d, const std::vector<double>& r, const std::vector<double>& u,
                   const std::vector<double>& moves, double scale, DType output) {
  for (int step = 0; step < 2; ++step) {
    double num = 0, den = 0;
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (u[c] == 0 || moves[c] == 0) continue;
      double h = 0;
      const double var = moved_var(d, c, scale * moves[c], output, h);
      if (!(var > 0)) continue;
      num += r[c] * moves[c] / var;
      den += moves[c] * moves[c] / var;
    }
    if (!(den > 0) || !std::isfinite(num / den)) break;
    scale = num / den;
  }
  return scale;
}

/// The sampled values inside their intervals about the centres moved by scale x `moves` (each
/// value's B and the output rounding of the moved value: a bf16 value is never the shifted one
/// itself), and the mean r^2 / sigma^2 about them (-1: none finite); only those `counted`
/// marks, where given.
struct MovedCount {
  double scale = 0;
  Index inside = 0;
  double mean = -1;
};

MovedCount count_moved(const Declared& d, const std::vector<double>& r, const std::vector<double>& u,
                       const std::vector<double>& moves, double scale, DType output,
                       const std::vector<char>* counted = nullptr) {
  MovedCount out;
  out.scale = scale;
  Index finite = 0;
  double energy = 0;
  for (std::size_t c = 0; c < r.size(); ++c) {
    if (counted != nullptr && (*counted)[c] == 0) continue;
    const double shift = scale * moves[c];
    const double rest = r[c] - shift;
    double h = 0;
    const double var = moved_var(d, c, shift, output, h);
    out.inside += std::fabs(rest) <= d.bound[c] + h ? 1 : 0;
    if (u[c] == 0) continue;
    energy += var > 0 ? rest * rest / var : rest * rest * u[c];
    ++finite;
  }
  if (finite > 0) out.mean = energy / static_cast<double>(finite);
  return out;
}

/// Sampled columns [begin, end) a channel fit scales alike, and the weight segment they are
/// (null: every column).
struct ScaledColumns {
  Index begin = 0, end = 0;
  double scale = 0;
  const WeightSegment* seg = nullptr;
};

/// How a fault trial's declaration begins, read back by read_fault: one input channel's fault,
/// or one row's ("row 2's outputs scaled 1.01x"); any other is every value's.
constexpr std::string_view kChannelFaultPrefix = "input channel ", kRowFaultPrefix = "row ";

/// "1.02x"; below 1e-3 off, "by 1 + 4.1e-05" or "by 1 - 4.1e-05" (four digits of 1 + e would
/// read "1x"); "0x" for a dropped channel.
std::string scale_text(double scale) {
  return std::fabs(1 + scale) < 1e-6 ? std::string("0x")
         : std::fabs(scale) >= 1e-3  ? format_short(1 + scale) + "x"
         : scale > 0                 ? "by 1 + " + format_short(scale)
                                     : "by 1 - " + format_short(-scale);
}

/// The fault trial naming channel k scaled in `groups`: in every column (x[:, k] or W[:, k]),
/// or in one segment's or several segments' columns (W[:, k] there; `segment` their names).
DeclarationTrial channel_fault_trial(const ProjectionFacts& f, Index channel, const std::vector<ScaledColumns>& groups,
                                     Index sampled, const MovedCount& moved) {
  const std::string k = std::to_string(channel);
  if (groups.size() == 1 && groups.front().seg == nullptr) {
    return {std::string(kChannelFaultPrefix) + k + " scaled " + scale_text(groups.front().scale) + " (x[:, " + k +
                "] or W[:, " + k + "], in every column)",
            "",
            TrialEffect::kLocatesFault,
            sampled,
            moved.inside,
            moved.mean};
  }
  std::string where, names;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const WeightSegment& seg = *groups[g].seg;
    // The segment's own columns, all of them (the sample holds a prefix of them).
    Index last = seg.row_end - 1;
    for (const WeightSegment& whole : f.data.weights.segments) {
      if (whole.row_begin == seg.row_begin) last = whole.row_end - 1;
    }
    const std::string cols = "columns " + std::to_string(seg.row_begin) + "-" + std::to_string(last);
    if (groups.size() == 1) {
      where = scale_text(groups[g].scale) + " (W[:, " + k + "] in " + cols + " alone)";
    } else {
      where += (g == 0 ? "" : g + 1 == groups.size() ? " and " : ", ") + scale_text(groups[g].scale) + " in " + cols;
    }
    names += (g == 0 ? "" : ", ") + seg.name;
  }
  if (groups.size() > 1) where += " (W[:, " + k + "] there alone)";
  return {std::string(kChannelFaultPrefix) + k + " of the weights scaled " + where,
          names,
          TrialEffect::kLocatesFault,
          sampled,
          moved.inside,
          moved.mean};
}

/// The input channel whose scale best explains the declaration's residuals on the sample, as a
/// fault trial (kLocatesFault): the engine's x[:, k] or W[:, k] scaled by 1 + e in every column
/// moves each value by e x_ik w_jk; W[:, k] of one weight segment, only that segment's columns.
/// e and k by weighted least squares (weights 1 / sigma^2, the declaration's): per k, sum r x
/// w / sigma^2 over sum (x w)^2 / sigma^2, the most explained energy leading (every column
/// before one segment, the lowest k, then the first segment on ties), searched on each sampled
/// segment's first kDiagnosisCols columns (8 x 256 x K products twice per segment) and counted
/// on all of the sample: the values inside their intervals moved by e x w (each value's B and
/// its output rounding about the moved centre: a bf16 value is never the shifted one itself),
/// and the mean (r - e x w)^2 / sigma^2. Not tried where the activations are quantized (the
/// products are of codes), the declaration's energy is within the limit, or the sample has
/// fewer than kChannelCols columns: the best of K fits over a few values fits noise (a
/// reviewer's row fault at M 1, N 4, K 4096 read "input channel 2432 scaled 0.1482x"). The
/// best fit must also explain more than the best of the candidates' fits to rounding noise
/// would at the residual tests' alpha (chi-square(1) each: 2 ln(2 C / alpha), 56.7 at K 1024
/// in every column alone). Any scale may fit: a channel dropped (0x), doubled or negated is the
/// common fault.
constexpr Index kChannelCols = 16;

void channel_trial(const ProjectionFacts& f, const Sample& s, const LinearProblem& base, const Declared& d,
                   std::vector<DeclarationTrial>& trials) {
  const ProjectionInfo& info = f.info();
  const Index K = info.k, sampled = s.rows * s.cols;
  if (info.x_quant.type != reference::XQuantType::kNone || K < 2 || s.cols < kChannelCols || trials.empty() ||
      !(trials.front().energy > diagnosis_energy_limit(sampled))) {
    return;
  }
  // The declaration's centres and bounds on the sample, as its evaluation left them (Declared).
  const auto value_at = [&](Index i, Index j) { return f.data.y_unpacked.value(info.output, info.out_stride, i, j); };
  // Per sampled value r, r / sigma^2 and 1 / sigma^2 (the last two 0 where not finite: left out).
  const std::size_t cells = static_cast<std::size_t>(sampled);
  std::vector<double> r(cells, 0.0), t(cells, 0.0), u(cells, 0.0);
  for (Index i = 0; i < s.rows; ++i) {
    for (Index j = 0; j < s.cols; ++j) {
      const std::size_t c = static_cast<std::size_t>(i * s.cols + j);
      r[c] = static_cast<double>(value_at(i, j)) - d.centre[c];
      if (!std::isfinite(r[c]) || !std::isfinite(d.var[c]) || !(d.var[c] > 0)) continue;
      t[c] = r[c] / d.var[c];
      u[c] = 1 / d.var[c];
    }
  }
  std::vector<ChannelSums> parts;
  std::vector<const WeightSegment*> part_segment;
  for (const WeightSegment& seg : s.weights.segments) {
    // Every segment's columns count for the fit in every column (segments of 8 columns each had
    // left none, a review's); one segment's own fit needs kChannelCols of them.
    const Index end = std::min(seg.row_end, seg.row_begin + kDiagnosisCols);
    if (end <= seg.row_begin) continue;
    parts.push_back(channel_sums(s, base, t, u, seg.row_begin, end));
    parts.back().own_fit = end - seg.row_begin >= kChannelCols;
    part_segment.push_back(&seg);
  }
  if (parts.empty()) return;
  Index candidates = 0;
  const ChannelFit fit = best_channel_fit(parts, K, candidates);
  const double chance = 2 * std::log(2 * static_cast<double>(candidates) / kResidualAlpha);
  // A joint fit passed its own chance tests (joint_channel_fit).
  const bool joint = fit.segment == ChannelFit::kJoint;
  if (fit.k < 0 || (!joint && (fit.scale == 0 || !(fit.explained > chance)))) return;
  // The columns the fit scales, each group alike: every column, one segment's, or several.
  std::vector<ScaledColumns> groups;
  if (fit.segment == -1) {
    groups.push_back({0, s.cols, fit.scale, nullptr});
  } else {
    for (std::size_t g = 0; g < parts.size(); ++g) {
      const double scale = fit.segment == ChannelFit::kJoint      ? fit.part_scale[g]
                           : fit.segment == static_cast<Index>(g) ? fit.scale
                                                                  : 0.0;
      if (scale != 0) groups.push_back({part_segment[g]->row_begin, part_segment[g]->row_end, scale, part_segment[g]});
    }
  }
  // Each group's moves per unit of scale (x_ik w_jk in its columns), its scale refitted.
  std::vector<double> shift(cells, 0.0), moves(cells), w(static_cast<std::size_t>(K));
  for (ScaledColumns& g : groups) {
    std::fill(moves.begin(), moves.end(), 0.0);
    for (Index j = g.begin; j < g.end; ++j) {
      reference::decode_weight_row(s.weights, j, base.x.dtype, w.data(), nullptr, nullptr);
      for (Index i = 0; i < s.rows; ++i) {
        moves[static_cast<std::size_t>(i * s.cols + j)] =
            static_cast<double>(base.x.at(i, fit.k)) * w[static_cast<std::size_t>(fit.k)];
      }
    }
    g.scale = refit_scale(d, r, u, moves, g.scale, info.output);
    for (std::size_t c = 0; c < cells; ++c) shift[c] += g.scale * moves[c];
  }
  const MovedCount moved = count_moved(d, r, u, shift, 1.0, info.output);
  trials.push_back(channel_fault_trial(f, fit.k, groups, sampled, moved));
}

/// Every sampled value scaled by one 1 + e, as a fault trial (kLocatesFault): a wrong scale
/// of the output, of every weight or of every row's activations moves each value by e y*
/// (with a bias or residual epilogue, the last two scale the dot product alone, e (y* - b - r),
/// and both fits are tried). Over one row a wider accumulator's bound held such a fault's
/// values (a review's: a row x 1.001 at M 1 read "the data fits accumulator = matrix-unit",
/// and redeclaring it passed); only a clean scale brings them to the rounding noise. e by
/// weighted least squares (weights 1 / sigma^2, the declaration's), refitted about the moved
/// centres (refit_scale), and counted as channel_trial counts its fit, over the values that
/// say anything of a scale: an exact zero inside its interval as declared (a padding row's)
/// does not (384 such values of 512 held a truncating accumulator's energy under the limit, a
/// review's), a non-finite output does (outside whatever the scale). Kept where the fit
/// explains more than the better of its one or two fits to rounding noise would at the
/// residual tests' alpha (chi-square(1): 2 ln(2C / alpha), 42.8 for one), on kScaleValues
/// such values or more: one parameter fits one value exactly (a value past FLT_MAX at M = N = 1
/// read "every output scaled 0.2836x"), and a few within any limit. A scale below 1 is not
/// named: it moves every value toward zero, as a truncating accumulator does, and where the
/// products share a sign such an accumulator falls short of y* by about the same share
/// everywhere (two reviews' accumulators of 19 to 22 bits truncating, at M 1 and 2 with
/// positive activations, fit 1 - 8.9e-05 and 1 - 0.0007 within the noise). A scale above 1
/// moves every value away from zero, which no rounding does; nor does a truncating
/// accumulator scale every value by half or less, a zero (0x: outputs never written) or a sign
/// (-1x) included, so those are named (kTruncationReach).
constexpr Index kScaleValues = 16;
constexpr double kTruncationReach = -0.5;

/// What a scale fit reads of the sample (scale_trial, row_scale_trial): per value r (a
/// non-finite one kept so: outside whatever the scale), 1 / sigma^2 (0 where not finite: left
/// out of the fit and the energy), and what a scale moves: the whole value, or with a bias or
/// residual epilogue its dot product alone; `counted` the values that say anything of a scale.
struct ScaleData {
  std::vector<double> r, u, whole, dot;
  std::vector<char> counted;
  Index values = 0;
  bool epilogue = false;
};

ScaleData scale_data(const ProjectionFacts& f, const Sample& s, const LinearProblem& base, const Declared& d) {
  const ProjectionInfo& info = f.info();
  const std::size_t cells = static_cast<std::size_t>(s.rows * s.cols);
  ScaleData x;
  x.epilogue = reference::has_bias(base.epilogue) || reference::has_residual(base.epilogue);
  x.r.assign(cells, 0.0);
  x.u.assign(cells, 0.0);
  x.whole.assign(cells, 0.0);
  x.dot.assign(cells, 0.0);
  x.counted.assign(cells, 1);
  for (Index i = 0; i < s.rows; ++i) {
    for (Index j = 0; j < s.cols; ++j) {
      const std::size_t c = static_cast<std::size_t>(i * s.cols + j);
      if (d.centre[c] == 0 && d.outside[c] == kInside) {
        x.counted[c] = 0;
        continue;
      }
      ++x.values;
      x.r[c] = static_cast<double>(f.data.y_unpacked.value(info.output, info.out_stride, i, j)) - d.centre[c];
      if (!std::isfinite(x.r[c]) || !std::isfinite(d.var[c]) || !(d.var[c] > 0)) continue;
      x.u[c] = 1 / d.var[c];
      x.whole[c] = d.centre[c];
      double parts = 0;
      if (reference::has_bias(base.epilogue)) parts += base.bias.at(j);
      if (reference::has_residual(base.epilogue)) parts += base.residual.at(i, j);
      x.dot[c] = d.centre[c] - parts;
    }
  }
  return x;
}

/// One least-squares scale over the values [begin, end) of the sample (one row, or all): e and
/// the energy it explains, sum(r m u)^2 / sum(m^2 u).
struct LinearFit {
  double e = 0, explained = 0;
};
LinearFit fit_scale(const ScaleData& x, const std::vector<double>& moves, std::size_t begin, std::size_t end) {
  double num = 0, den = 0;
  for (std::size_t c = begin; c < end; ++c) {
    if (x.u[c] == 0) continue;
    num += x.r[c] * moves[c] * x.u[c];
    den += moves[c] * moves[c] * x.u[c];
  }
  LinearFit fit;
  if (den > 0) {
    fit.e = num / den;
    fit.explained = num * num / den;
  }
  return fit;
}

/// Whether a fitted scale 1 + e may be named: not between kTruncationReach and 1 (above).
bool nameable_scale(double e) { return std::isfinite(e) && e != 0 && !(e < 0 && e > kTruncationReach); }

/// Every sampled value scaled by one 1 + e (above kScaleValues).
void scale_trial(const ProjectionFacts& f, const Sample& s, const LinearProblem& base, const Declared& d,
                 std::vector<DeclarationTrial>& trials) {
  const ProjectionInfo& info = f.info();
  const Index sampled = s.rows * s.cols;
  if (sampled < kScaleValues || trials.empty() || !(trials.front().energy > diagnosis_energy_limit(sampled))) return;
  const ScaleData x = scale_data(f, s, base, d);
  if (x.values < kScaleValues) return;
  struct Fit {
    const std::vector<double>* moves;
    const char* what;
    LinearFit fit;
  };
  std::vector<Fit> fits;
  if (x.epilogue) {
    fits.push_back({&x.dot, " before the epilogue (a wrong scale of every weight, or of every row's activations)", {}});
    fits.push_back({&x.whole, " after the epilogue (a wrong scale of the output)", {}});
  } else {
    fits.push_back({&x.whole, " (a wrong scale of the output, of every weight, or of every row's activations)", {}});
  }
  const Fit* best = nullptr;
  for (Fit& fit : fits) {
    fit.fit = fit_scale(x, *fit.moves, 0, x.r.size());
    if (fit.fit.explained > 0 && std::isfinite(fit.fit.explained) &&
        (!best || fit.fit.explained > best->fit.explained)) {
      best = &fit;
    }
  }
  const double chance = 2 * std::log(2 * static_cast<double>(fits.size()) / kResidualAlpha);
  if (!best || !(best->fit.explained > chance)) return;
  const double e = refit_scale(d, x.r, x.u, *best->moves, best->fit.e, info.output);
  if (!nameable_scale(e)) return;
  const MovedCount moved = count_moved(d, x.r, x.u, *best->moves, e, info.output, &x.counted);
  trials.push_back(
      {std::string(x.epilogue && best->moves == &x.dot ? "every dot product scaled " : "every output scaled ") +
           scale_text(e) + best->what,
       "", TrialEffect::kLocatesFault, x.values, moved.inside, moved.mean});
}

/// One row's values scaled by 1 + e, as a fault trial (kLocatesFault): a wrong scale of that
/// row's activations (or of its output) moves each of its values by e y* (with a bias or
/// residual epilogue, the activations' scale e (y* - b - r), and both fits are tried, as in
/// scale_trial). Where that row's activations dominate the others', any mistake's rounding is
/// largest there and bound's few-rows reading does not apply (row_spread): a bf16 row of 30
/// times the others' activations x 1.01 read "a kernel fault, or more than one mistake", bias
/// read it as a rounding away from zero and variance as a narrower accumulator. Fitted only for
/// `row`, the one row of y_unpacked holding values outside (a fault of two rows, one of them
/// beyond the sample's, read as the sampled one's alone), where the sample holds it and
/// kScaleValues counted values of it: e by weighted least squares, kept where it explains more
/// than a fit to rounding noise would (2 ln(2 F / alpha)), refitted about the moved centres. It
/// is named only where the row's own values keep an energy within the limit for their count
/// about the moved centres (over the whole sample a row's leftover energy is diluted by the
/// others' noise, 7 rows of 8 at 0.01), and, as in scale_trial, not at a scale between 0.5 and
/// 1: a truncating accumulator falls short first in a dominant row, or a row whose products
/// share a sign.
void row_scale_trial(const ProjectionFacts& f, const Sample& s, const LinearProblem& base, const Declared& d, Index row,
                     std::vector<DeclarationTrial>& trials) {
  const ProjectionInfo& info = f.info();
  const Index sampled = s.rows * s.cols;
  if (row < 0 || row >= s.rows || trials.empty() || !(trials.front().energy > diagnosis_energy_limit(sampled))) {
    return;
  }
  const ScaleData x = scale_data(f, s, base, d);
  const auto begin = static_cast<std::size_t>(row * s.cols), end = begin + static_cast<std::size_t>(s.cols);
  std::vector<char> in_row(x.r.size(), 0);
  std::copy(x.counted.begin() + static_cast<std::ptrdiff_t>(begin),
            x.counted.begin() + static_cast<std::ptrdiff_t>(end), in_row.begin() + static_cast<std::ptrdiff_t>(begin));
  const Index row_values = std::count(in_row.begin(), in_row.end(), 1);
  if (row_values < kScaleValues) return;
  std::vector<const std::vector<double>*> moves_of = {&x.whole};
  if (x.epilogue) moves_of = {&x.dot, &x.whole};
  const std::vector<double>* best_moves = nullptr;
  LinearFit best;
  for (const std::vector<double>* moves : moves_of) {
    const LinearFit fit = fit_scale(x, *moves, begin, end);
    if (std::isfinite(fit.explained) && fit.explained > best.explained) {
      best = fit;
      best_moves = moves;
    }
  }
  const double chance = 2 * std::log(2 * static_cast<double>(moves_of.size()) / kResidualAlpha);
  if (best_moves == nullptr || !(best.explained > chance)) return;
  // The row's moves alone; every other value stays at its declared centre.
  std::vector<double> moves(x.r.size(), 0.0);
  std::copy(best_moves->begin() + static_cast<std::ptrdiff_t>(begin),
            best_moves->begin() + static_cast<std::ptrdiff_t>(end), moves.begin() + static_cast<std::ptrdiff_t>(begin));
  const double e = refit_scale(d, x.r, x.u, moves, best.e, info.output);
  if (!nameable_scale(e)) return;
  const MovedCount own = count_moved(d, x.r, x.u, moves, e, info.output, &in_row);
  if (!(own.mean >= 0 && own.mean <= diagnosis_energy_limit(row_values))) return;
  const MovedCount moved = count_moved(d, x.r, x.u, moves, e, info.output, &x.counted);
  const std::string name = std::string(kRowFaultPrefix) + std::to_string(row);
  trials.push_back(
      {x.epilogue && best_moves == &x.dot ? name + "'s dot products scaled " + scale_text(e) +
                                                " before the epilogue (a wrong scale of that row's activations)"
       : x.epilogue
           ? name + "'s outputs scaled " + scale_text(e) + " after the epilogue (a wrong scale of that row's output)"
           : name + "'s outputs scaled " + scale_text(e) +
                 " (a wrong scale of that row's activations, or of its output)",
       "", TrialEffect::kLocatesFault, x.values, moved.inside, moved.mean});
}

/// DeclarationTrial::lean of the declaration on the sample: sum s / sqrt(sum s^2) over the
/// finite s = sign(c) r / sigma of nonzero centres; 0 where fewer than kScaleValues are (a
/// value past FLT_MAX at M = N = 1 has none: a truncating accumulator stopping at FLT_MAX is
/// still named).
double residual_lean(const ProjectionFacts& f, const Sample& s, const Declared& d) {
  const ProjectionInfo& info = f.info();
  double sum = 0, squares = 0;
  Index values = 0;
  for (Index i = 0; i < s.rows; ++i) {
    for (Index j = 0; j < s.cols; ++j) {
      const std::size_t c = static_cast<std::size_t>(i * s.cols + j);
      const double r = static_cast<double>(f.data.y_unpacked.value(info.output, info.out_stride, i, j)) - d.centre[c];
      if (d.centre[c] == 0 || !std::isfinite(r) || !std::isfinite(d.var[c]) || !(d.var[c] > 0)) continue;
      const double v = (d.centre[c] < 0 ? -r : r) / std::sqrt(d.var[c]);
      sum += v;
      squares += v * v;
      ++values;
    }
  }
  return values >= kScaleValues && squares > 0 ? sum / std::sqrt(squares) : 0.0;
}

}  // namespace

bool directed_accumulator_trial(const DeclarationTrial& t) {
  constexpr std::string_view kPrefix = "accumulator = ";
  if (t.effect != TrialEffect::kWidensBound || !t.declaration.starts_with(kPrefix)) return false;
  const auto parsed = reference::parse_accumulator(t.declaration.substr(kPrefix.size()));
  return parsed.ok() && !parsed->round_to_nearest;
}

bool centred_beside_directed(const std::vector<DeclarationTrial>& trials) {
  // 0: not read (residual_lean).
  return !trials.empty() && trials.front().lean != 0 && trials.front().lean > -kTruncationLean;
}

Index diagnosis_columns(const reference::Weights& w) {
  // A prefix, so that every segment keeps its own views: the first 256 columns alone never
  // reached a second segment at column 512, whose dequant = output mistaken for f32 then read
  // as a scale fault in one of its groups.
  Index cols = std::min(w.n, kDiagnosisCols);
  for (const WeightSegment& seg : w.segments) {
    if (seg.row_begin < kDiagnosisSegmentReach) {
      cols = std::max(cols, std::min(seg.row_end, seg.row_begin + kDiagnosisCols));
    }
  }
  return std::min(cols, w.n);
}

namespace {

/// bias_at = start as bound's and variance's diagnoses name it (walk's names the value alone).
constexpr std::string_view kBiasAtStartTrial =
    "bias_at = start (the kernel adds its sums into an output holding the bias)";

/// Whether a walk tells the bias's two ends apart: parts added one by one into the output, which
/// starts from the bias under bias_at = start (k_walk.h); any other walk adds the bias once.
bool walk_tells_bias_at(const reference::KWalk& w) { return w.parts >= 2 && w.combine == reference::KWalkTree::kSeq; }

/// `p` with the bias at its other end.
LinearProblem other_bias_at(LinearProblem p) {
  p.bias_at = p.bias_at == reference::BiasAt::kEnd ? reference::BiasAt::kStart : reference::BiasAt::kEnd;
  return p;
}

/// The epilogue declared otherwise: a bias the kernel never added, the residual added at the
/// other point, the bias as a term of the sum. `trial` is diagnose_declarations' own.
template <typename Trial>
void epilogue_trials(const ProjectionInfo& info, const LinearProblem& base, const Trial& trial) {
  if (reference::has_bias(base.epilogue)) {
    // A declared bias the kernel never added: every column off by its own bias, which signature
    // read as one column's wrong bias.
    LinearProblem none = base;
    none.epilogue =
        reference::has_residual(base.epilogue) ? reference::Epilogue::kResidual : reference::Epilogue::kNone;
    trial(
        "no bias added (the dump declares one the kernel does not add: a kernel that drops its bias, or a "
        "declaration of one it never had)",
        "", none);
    // The bias added twice (every column off by its own bias once more), or rounded to bf16 or
    // f16 before the add (an engine that casts an f32 bias to its activation type): signature
    // named one column's "bias of that column is not the dumped one" and bound "no single other
    // declaration fits" (a review's).
    std::vector<float> twice(static_cast<std::size_t>(base.bias.size));
    for (Index j = 0; j < base.bias.size; ++j) twice[static_cast<std::size_t>(j)] = 2 * base.bias.at(j);
    LinearProblem p = base;
    p.bias = {DType::kF32, twice.data(), base.bias.size};
    trial("the bias added twice", "", p);
    for (DType t : {DType::kBf16, DType::kF16}) {
      if (dtype_size(base.bias.dtype) <= dtype_size(t)) continue;
      std::vector<float> rounded(static_cast<std::size_t>(base.bias.size));
      bool changes = false;
      for (Index j = 0; j < base.bias.size; ++j) {
        rounded[static_cast<std::size_t>(j)] = reference::round_to_type(base.bias.at(j), t, false);
        changes = changes || rounded[static_cast<std::size_t>(j)] != base.bias.at(j);
      }
      if (!changes) continue;
      LinearProblem q = base;
      q.bias = {DType::kF32, rounded.data(), base.bias.size};
      trial("the bias rounded to " + std::string(dtype_name(t)) + " before the add", "", q);
    }
  }
  // The residual added at the other point: after the output rounding, in the output type
  // (residual_at = output), or before it in f32. Adding after rounding is defined only for a
  // residual of the output type.
  if (reference::has_residual(base.epilogue) && info.output != DType::kF32 && base.residual.dtype == info.output) {
    LinearProblem p = base;
    const bool at_f32 = base.residual_at == reference::ResidualAt::kF32;
    p.residual_at = at_f32 ? reference::ResidualAt::kOutput : reference::ResidualAt::kF32;
    trial(at_f32 ? "residual_at = output" : "residual_at = f32", "", p);
  }
  // The bias as a term of the sum (bias_at = start), where the dump adds it last: B then charges
  // the additions of each K block into an output holding the bias (ONNX Runtime's Gemm, whose
  // blocks round at the bias's magnitude where |bias| dwarfs S: a row of small activations, a
  // column of small weights).
  if (reference::has_bias(base.epilogue) && base.bias_at == reference::BiasAt::kEnd) {
    trial(std::string(kBiasAtStartTrial), "", other_bias_at(base), TrialEffect::kMovesCentres, true);
  }
}

}  // namespace

std::vector<DeclarationTrial> diagnose_declarations(const ProjectionFacts& f, const CheckOptions& options,
                                                    DiagnosisReason reason, Index lone_row) {
  const ProjectionInfo& info = f.info();
  std::vector<DeclarationTrial> trials;
  if (!f.data.y_unpacked.present || !f.weights.ok()) return trials;
  reference::ReferenceScratch scratch;
  Sample s;
  s.scratch = &scratch;
  LinearProblem base = sample_problem(f, options, s);
  base.walk = {};  // the intervals do not depend on the walk; nothing is emulated here
  const Index sampled = s.rows * s.cols;
  Declared declared_model;
  declared_model.far_off = reason == DiagnosisReason::kResiduals;
  // `own_model`: the trial's energy with its own sigma (evaluate); `noise_holds`: kept only where
  // that energy is within the noise's limit.
  const auto trial = [&](std::string declaration, std::string segment, const LinearProblem& p,
                         TrialEffect effect = TrialEffect::kMovesCentres, bool own_model = false,
                         bool noise_holds = false) {
    const Evaluation e = evaluate(f, s, p, declared_model, own_model);
    if (e.inside >= 0 && (!noise_holds || (e.energy >= 0 && e.energy <= diagnosis_energy_limit(sampled)))) {
      trials.push_back(
          {std::move(declaration), std::move(segment), effect, sampled, e.inside, e.energy, e.left, e.far});
    }
  };
  trial("as declared", "", base);
  if (!trials.empty() && declared_model.evaluated()) trials.front().lean = residual_lean(f, s, declared_model);
  // Nothing to explain: every sampled value inside (bound), or their energy within the limit
  // (the residual tests).
  if (trials.empty()) return trials;
  const DeclarationTrial& declared = trials.front();
  if (reason == DiagnosisReason::kBound ? declared.inside == sampled
                                        : declared.energy <= diagnosis_energy_limit(sampled)) {
    return trials;
  }

  // The accumulator: a wider unit roundoff than declared.
  for (const char* acc : {"f32-rz", "matrix-unit"}) {
    auto parsed = reference::parse_accumulator(acc);
    if (!parsed.ok() || parsed->u_eff <= info.accumulator.u_eff) continue;
    LinearProblem p = base;
    p.accumulator = *parsed;
    trial(std::string("accumulator = ") + acc, "", p, TrialEffect::kWidensBound);
  }
  narrow_accumulator_trials(f, s, base, trials);
  // The output rounding of a narrow output: the other of rne and rz (a kernel rounding to
  // nearest declared rz read "no single other declaration fits ... a kernel fault").
  if (info.output != DType::kF32 && info.output_rounding != reference::OutputRounding::kAny) {
    const bool rne = info.output_rounding == reference::OutputRounding::kNearestEven;
    LinearProblem p = base;
    p.output_rounding = rne ? reference::OutputRounding::kTowardZero : reference::OutputRounding::kNearestEven;
    trial(rne ? "output_rounding = rz" : "output_rounding = rne", "", p, TrialEffect::kMovesRounding);
  }
  // Each quantized segment's dequantization, operation order and nibble order.
  // Folded dequantization keeps the centres and widens B and sigma alike. For bound it is tried
  // only where its own sigma holds the residuals: its wider B holds a short accumulator's values
  // too (a review's 12-bit Q4_0 kernel read "the data fits dequant = folded", its residuals 13x
  // the noise folded allows). The residual tests' diagnosis reads it against the declaration's
  // sigma, as every trial: there its own would fit any small excess by widening alone.
  segment_trials(s.weights, true, [&](const std::string& declaration, const std::string& segment, TrialEffect effect) {
    const bool folded_for_bound = effect == TrialEffect::kWidensBound && reason == DiagnosisReason::kBound;
    trial(declaration, segment, base, effect, folded_for_bound, folded_for_bound);
  });
  // Activations rounded to a narrower type before the kernel (x as stored is wider).
  if (info.x_quant.type == reference::XQuantType::kNone) {
    for (DType t : {DType::kBf16, DType::kF16}) {
      if (dtype_size(info.x_dtype) <= dtype_size(t)) continue;
      std::vector<float> rounded(static_cast<std::size_t>(s.rows * info.k));
      for (Index r = 0; r < s.rows; ++r) {
        for (Index c = 0; c < info.k; ++c) {
          rounded[static_cast<std::size_t>(r * info.k + c)] = reference::round_to_type(base.x.at(r, c), t, false);
        }
      }
      LinearProblem p = base;
      p.x = {DType::kF32, rounded.data(), s.rows, info.k, info.k};
      trial("x rounded to " + std::string(dtype_name(t)) + " before the kernel", "", p);
    }
  }
  // An undeclared per-column bias: the engine adds b_j to column j, the dump declares none.
  if (!reference::has_bias(base.epilogue) && s.rows >= kMinBiasRows) {
    const std::vector<float> bias = column_shifts(f, s, base);
    if (!bias.empty()) {
      LinearProblem p = base;
      p.epilogue =
          reference::has_residual(base.epilogue) ? reference::Epilogue::kBiasResidual : reference::Epilogue::kBias;
      p.bias = {DType::kF32, bias.data(), s.cols};
      trial("epilogue = bias (a per-column bias the dump does not declare)", "", p);
    }
  }
  epilogue_trials(info, base, trial);
  // Weights transposed: with a square W the engine may have multiplied by its transpose.
  if (info.k == info.n) {
    std::vector<float> storage;
    const Weights t = transposed_sample(f, s.cols, storage);
    LinearProblem p = base;
    p.weights = &t;
    trial("weights transposed ([k, n] stored as [n, k])", "", p);
  }
  if (reason == DiagnosisReason::kBound && declared_model.evaluated()) {
    channel_trial(f, s, base, declared_model, trials);
    scale_trial(f, s, base, declared_model, trials);
    row_scale_trial(f, s, base, declared_model, lone_row, trials);
  }
  return trials;
}

std::vector<const DeclarationTrial*> rank_by_energy(std::vector<const DeclarationTrial*> trials) {
  const auto key = [](const DeclarationTrial* t) { return t->energy < 0 ? HUGE_VAL : t->energy; };
  double least = HUGE_VAL;
  for (const DeclarationTrial* t : trials) least = std::min(least, key(t));
  // Energies within twice the least are one: trials that move the centres alike (exact and f32
  // dequantization of zero-point weights, or folded, which only widens B) keep their order.
  const auto rank = [&](const DeclarationTrial* t) { return key(t) <= 2 * least ? least : key(t); };
  std::stable_sort(trials.begin(), trials.end(),
                   [&](const DeclarationTrial* a, const DeclarationTrial* b) { return rank(a) < rank(b); });
  return trials;
}

/// The walks a kernel of the usual families runs (docs/dump-format.md §3 k_walk's table): one
/// accumulator, K split in equal parts, or L lanes reduced by a tree, each plain or fused; and,
/// where the declaration splits K (splitk:<S>:<tree>/<inner>), each of them as its inner walk.
/// A wrong lane count or tree failed the walk on nearly every value with no hint (a review's).
std::vector<std::string> neighbour_walks(const reference::KWalk& declared, Index k);

/// An integer kernel's neighbours (k_walk = codes:<C>:<scaling>/<walk>): the usual chunks (the
/// declared, 4 for AVX2's maddubs + madd lanes, a block of 32 for a scalar loop, ..., K for an
/// int32 GEMM that scales once), each scaling, and over each chunk's K / C sums the declared
/// f32 walk and its neighbours, the declared chunk first. On a failure only, on the sample's
/// first 16 columns (walk_equal): some 600 trials at K 4,096 cost about what one f32 walk does.
std::vector<std::string> neighbour_code_walks(const reference::KWalk& declared, Index k) {
  const std::string inner = declared.name.substr(declared.name.find('/') + 1);
  std::vector<Index> chunks;
  for (const Index c :
       {declared.code_chunk, Index{4}, Index{32}, Index{8}, Index{16}, Index{1}, Index{2}, Index{64}, Index{128}, k}) {
    if (k % c == 0 && std::find(chunks.begin(), chunks.end(), c) == chunks.end()) chunks.push_back(c);
  }
  const reference::CodeScaling scalings[] = {declared.code_scaling, reference::CodeScaling::kScaleProduct,
                                             reference::CodeScaling::kWScaleFirst,
                                             reference::CodeScaling::kXScaleFirst};
  std::vector<std::string> walks;
  const auto add = [&](Index chunk, reference::CodeScaling scaling, const std::string& w) {
    const std::string s =
        "codes:" + std::to_string(chunk) + ":" + std::string(reference::code_scaling_name(scaling)) + "/" + w;
    if (s != declared.name && std::find(walks.begin(), walks.end(), s) == walks.end()) walks.push_back(s);
  };
  // First every chunk and scaling with the declared walk, seq, seq-fma and, for one sum, once
  // (about 100 trials: a review's C = K and C = 2 kernels were never reached when each chunk
  // brought its 150 neighbours in turn), then each chunk's neighbouring walks.
  for (const Index chunk : chunks) {
    for (const reference::CodeScaling scaling : scalings) {
      for (const std::string& w : {inner, std::string("seq"), std::string("seq-fma")}) {
        if (w != "once" || chunk == k) add(chunk, scaling, w);
      }
      if (chunk == k) add(chunk, scaling, "once");
    }
  }
  auto inner_walk = reference::parse_k_walk(inner == "once" ? "seq" : inner);
  for (const Index chunk : chunks) {
    if (!inner_walk.ok() || chunk == k) continue;  // one sum: no other walk over it
    const std::vector<std::string> others = neighbour_walks(*inner_walk, k / chunk);
    for (const reference::CodeScaling scaling : scalings) {
      for (const std::string& w : others) add(chunk, scaling, w);
    }
  }
  // Beyond this many a failing check would spend seconds on trials (a review's: 2-8 s at K
  // 4,096); the likeliest come first.
  constexpr std::size_t kMostCodeTrials = 600;
  if (walks.size() > kMostCodeTrials) walks.resize(kMostCodeTrials);
  return walks;
}

std::vector<std::string> neighbour_walks(const reference::KWalk& declared, Index k) {
  if (declared.codes()) return neighbour_code_walks(declared, k);
  std::vector<std::string> inner{"seq", "seq-fma"};
  for (const Index lanes : {4, 8, 16, 32, 64}) {
    for (const char* tree : {"seq", "halving", "pairs"}) {
      const std::string w = "lanes:" + std::to_string(lanes) + ":" + tree;
      inner.push_back(w);
      inner.push_back(w + ":fma");
    }
  }
  // MLAS's FoldAccumulators: each 128-bit quarter's 4 lanes in order, then the quarters halved
  // (16 lanes) or added (8).
  // And AVX2's "fold the upper 128 bits, then hadd twice".
  for (const char* w : {"lanes:16:groups(4,seq,halving)", "lanes:8:groups(4,seq,seq)", "lanes:8:butterfly(4,1,2)"}) {
    inner.emplace_back(w);
    inner.push_back(std::string(w) + ":fma");
  }
  std::vector<std::string> walks = inner;
  for (const Index parts : {2, 4, 8, 16, 32, 64}) {
    if (k % parts != 0 || parts >= k) continue;
    walks.push_back("split:" + std::to_string(parts));
    walks.push_back("split:" + std::to_string(parts) + ":fma");
  }
  if (const auto slash = declared.name.find('/'); declared.name.starts_with("splitk:") && slash != std::string::npos) {
    // The declared split and its tree as written, each inner walk after them.
    const std::string prefix = declared.name.substr(0, slash + 1);
    for (const std::string& w : inner) walks.push_back(prefix + w);
  }
  std::erase(walks, declared.name);
  return walks;
}

/// At most this many other walks named: they are hints, and at a short K several orders can
/// agree on every sampled value.
constexpr std::size_t kWalkFitsNamed = 3;

/// Each neighbouring walk (neighbour_walks) that reproduces every sampled value, as a trial.
void neighbour_walk_trials(const ProjectionFacts& f, const Sample& s, const LinearProblem& base,
                           std::vector<DeclarationTrial>& trials) {
  std::size_t named = 0;
  for (const std::string& spelling : neighbour_walks(base.walk, f.info().k)) {
    auto parsed = reference::parse_k_walk(spelling);
    if (!parsed.ok()) continue;
    LinearProblem p = base;
    p.walk = *parsed;
    // A chunk that straddles two scales is no declaration `walk` would run: not a fit to name.
    if (p.walk.codes() && !reference::code_walk_unsupported(p).empty()) continue;
    const WalkCount n = walk_equal(f, s, p);
    // Only fits are kept: some 80 misses would fill the evidence with nothing to act on.
    if (n.equal < 0 || n.equal != n.sampled) continue;
    trials.push_back({"k_walk = " + spelling, "", TrialEffect::kMovesCentres, n.sampled, n.equal, 0.0});
    if (++named == kWalkFitsNamed) return;
  }
}

std::vector<DeclarationTrial> diagnose_walk(const ProjectionFacts& f, const CheckOptions& options) {
  std::vector<DeclarationTrial> trials;
  if (!f.data.y_unpacked.present || !f.weights.ok() || !f.info().walk.declared) return trials;
  reference::ReferenceScratch scratch;
  Sample s;
  s.scratch = &scratch;
  const LinearProblem base = sample_problem(f, options, s);
  const Index sampled = s.rows * s.cols;
  // The declaration is counted on the whole sample (the reason quotes it: "N as declared").
  const Index declared = walk_equal_on(f, s, base);
  if (declared < 0) return trials;
  trials.push_back({"as declared", "", TrialEffect::kMovesCentres, sampled, declared});
  if (declared == sampled) return trials;
  // The walk fixes the order of every operation; what else it reproduces bit for bit is the
  // weights each product uses: each AF4 segment's dequantization and its order. An emulated
  // walk is held bit for bit, with no bound to widen: each trial moves the values it emulates.
  // A code walk multiplies codes: another dequantization changes nothing it emulates.
  if (!base.walk.codes()) {
    segment_trials(s.weights, false,
                   [&](const std::string& declaration, const std::string& segment, TrialEffect effect) {
                     // Folded dequantization (the one trial that only widens B) has no walk: geometry guard 310
                     // refuses a k_walk over it, so naming it would advise a dump ncert refuses (a review's
                     // "the data fits ... or dequant = folded for segment w0").
                     if (effect == TrialEffect::kWidensBound) return;
                     const WalkCount n = walk_equal(f, s, base);
                     if (n.equal >= 0)
                       trials.push_back({declaration, segment, TrialEffect::kMovesCentres, n.sampled, n.equal});
                   });
  }
  // The bias at the other end of the sum: a kernel that adds its K blocks into an output holding
  // the bias (ONNX Runtime's Gemm through MLAS) declared with the bias added last, or the
  // reverse. Only a walk of several parts in sequence tells the two apart (k_walk.h).
  if (reference::has_bias(base.epilogue) && walk_tells_bias_at(base.walk)) {
    const LinearProblem other = other_bias_at(base);
    const WalkCount n = walk_equal(f, s, other);
    if (n.equal >= 0) {
      trials.push_back({"bias_at = " + std::string(reference::bias_at_name(other.bias_at)), "",
                        TrialEffect::kMovesCentres, n.sampled, n.equal});
    }
  }
  // Another walk: the kernel's lane count, tree, split or fusing declared wrong.
  neighbour_walk_trials(f, s, base, trials);
  return trials;
}

std::vector<DeclarationTrial> diagnose_bias_at(const ProjectionFacts& f, const CheckOptions& options,
                                               const std::vector<Index>& rows, bool walk) {
  std::vector<DeclarationTrial> trials;
  const ProjectionInfo& info = f.info();
  if (!f.data.y_unpacked.present || !f.weights.ok() || !reference::has_bias(info.epilogue)) return trials;
  if (walk ? !(info.walk.declared && walk_tells_bias_at(info.walk)) : info.bias_at != reference::BiasAt::kEnd) {
    return trials;
  }
  reference::ReferenceScratch scratch;
  Sample s;
  s.scratch = &scratch;
  std::optional<LinearProblem> base = rows_problem(f, options, rows, s);
  if (!base) return trials;
  LinearProblem other = other_bias_at(*base);
  const Index sampled = s.rows * s.cols;
  if (walk) {
    const Index declared = walk_equal_on(f, s, *base);
    if (declared < 0 || declared == sampled) return trials;
    const WalkCount n = walk_equal(f, s, other);
    trials.push_back({"as declared", "", TrialEffect::kMovesCentres, sampled, declared});
    if (n.equal >= 0) {
      trials.push_back({"bias_at = " + std::string(reference::bias_at_name(other.bias_at)), "",
                        TrialEffect::kMovesCentres, n.sampled, n.equal});
    }
    return trials;
  }
  base->walk = {};
  other.walk = {};
  Declared declared_model;
  const Evaluation d = evaluate(f, s, *base, declared_model);
  if (d.inside < 0 || d.inside == sampled) return trials;
  // Named only where the sampled values inside B, too, show more noise than the declaration
  // allows (their energy as declared beyond the limit) and start's B holds every value: start
  // only widens B and sigma, which in a row the bias dominates would also hold one wrong value
  // or a small fault of that row (a review's +32 ulp and a row x 1.01, each "fitting"
  // bias_at = start, which then passed them). A kernel adding its blocks into the bias leaves
  // that noise on every value of such rows.
  if (!(d.energy > diagnosis_energy_limit(sampled))) return trials;
  const Evaluation e = evaluate(f, s, other, declared_model, true);
  if (e.inside != sampled) return trials;
  trials.push_back({"as declared", "", TrialEffect::kMovesCentres, sampled, d.inside, d.energy, d.left, d.far});
  trials.push_back(
      {std::string(kBiasAtStartTrial), "", TrialEffect::kMovesCentres, sampled, e.inside, e.energy, e.left, e.far});
  return trials;
}

std::string trial_text(const DeclarationTrial& t) {
  std::string s = t.declaration;
  if (!t.segment.empty()) {
    s.append(t.segment.find(", ") == std::string::npos ? " for segment " : " for segments ").append(t.segment);
  }
  return s;
}

double diagnosis_energy_limit(Index sampled) {
  const double n = static_cast<double>(std::max<Index>(sampled, 1));
  const double l = std::log(1 / kResidualAlpha);
  return 1 + 2 * std::sqrt(l / n) + 2 * l / n;
}

double diagnosis_far_energy(Index sampled) {
  const double n = static_cast<double>(std::max<Index>(sampled, 1));
  return 2 * std::log(2 * n / kResidualAlpha);
}

FaultReading read_fault(const DeclarationTrial& t) {
  FaultReading out;
  if (t.declaration.starts_with(kChannelFaultPrefix)) {
    out.kind = FaultKind::kChannel;
  } else if (t.declaration.starts_with(kRowFaultPrefix)) {
    out.kind = FaultKind::kRow;
    out.row = std::stoll(t.declaration.substr(kRowFaultPrefix.size()));
  }
  return out;
}

const DeclarationTrial* fault_fit(const std::vector<DeclarationTrial>& trials) {
  if (trials.size() < 2) return nullptr;
  const double limit = diagnosis_energy_limit(trials.front().sampled);
  if (!(trials.front().energy > limit)) return nullptr;
  for (std::size_t i = 1; i < trials.size(); ++i) {
    const DeclarationTrial& t = trials[i];
    if (t.effect == TrialEffect::kLocatesFault && t.sampled > 0 && t.inside == t.sampled && t.energy >= 0 &&
        t.energy <= diagnosis_energy_limit(t.sampled)) {
      return &t;
    }
  }
  return nullptr;
}

std::vector<const DeclarationTrial*> fitting_trials(const std::vector<DeclarationTrial>& trials, RowSpread spread) {
  const bool few_rows = spread != RowSpread::kBroad;
  // A fault or a declaration that moves the centres onto the data, to the rounding noise: a
  // trial that only widens B holds the values around them, and is not named beside it (x
  // rounded to bf16 with one row of large activations: "accumulator = matrix-unit" held that
  // row too).
  bool to_noise = fault_fit(trials) != nullptr;
  // So does another output rounding that holds every value: it moves the intervals onto them,
  // and a wider bound holds truncated outputs only around the centres (a review's f16 outputs,
  // every one truncated: "the data fits accumulator = matrix-unit; or output_rounding = rz", and
  // redeclaring matrix-unit passed them).
  for (std::size_t i = 1; i < trials.size(); ++i) {
    const DeclarationTrial& t = trials[i];
    to_noise = to_noise || (t.effect == TrialEffect::kMovesCentres && t.sampled > 0 && t.inside + t.left == t.sampled &&
                            t.energy >= 0 && t.energy <= diagnosis_energy_limit(t.sampled));
    to_noise = to_noise || (t.effect == TrialEffect::kMovesRounding && t.sampled > 0 && t.inside == t.sampled);
  }
  std::vector<const DeclarationTrial*> fits;
  // A trial's values left to bound count as held (evaluate leaves them only where the data fits
  // the trial to the rounding noise on the others, and not the declaration).
  for (std::size_t i = 1; i < trials.size(); ++i) {
    const DeclarationTrial& t = trials[i];
    if (t.sampled == 0 || t.inside + t.left != t.sampled) continue;
    // In a few rows, a trial must also bring the sampled values' energy within the limit, as the
    // kernel's own declaration does: a wider B holds a few rows' faults without moving a
    // centre, and an undeclared bias shifts each column to the middle of what its rows admit
    // (a reviewer's one row x 1.001 at M 8, K 1024: "the data fits epilogue = bias", its
    // energy 845 against 430 as declared). Concentrated there, a wider B is not named at all:
    // its energy is the declaration's, and under bf16 outputs that is within the limit (one
    // row x 1.002 at K 1024: 9 values outside, energy 0.44, half a bf16 spacing dwarfing the
    // fault). Another output rounding moves the intervals, and its energy, taken about the
    // declaration's centres, would never drop: it is not held to it.
    const bool rounding = t.effect == TrialEffect::kMovesRounding;
    if (t.effect == TrialEffect::kLocatesFault || (to_noise && t.effect == TrialEffect::kWidensBound)) continue;
    // A directed accumulator (f32-rz, matrix-unit) falls short toward zero; its wider B also
    // holds a narrower accumulator that rounds to nearest, whose residuals stay centred (a
    // review's 14-bit rne accumulator: "the data fits accumulator = matrix-unit", and
    // redeclaring it passed the kernel, its energy 1874 against a limit of 1.3).
    if (directed_accumulator_trial(t) && centred_beside_directed(trials)) continue;
    if (spread == RowSpread::kConcentrated && t.effect == TrialEffect::kWidensBound) continue;
    if (few_rows && !rounding && !(t.energy >= 0 && t.energy <= diagnosis_energy_limit(t.sampled))) continue;
    fits.push_back(&t);
  }
  return fits;
}

RowNorms row_norms(const ProjectionFacts& f) {
  RowNorms n;
  const reference::LinearProblem p = f.data.problem(reference::kDefaultLambda);
  n.norm.assign(static_cast<std::size_t>(p.x.rows), 0.0);
  std::vector<double> nonzero;
  for (Index i = 0; i < p.x.rows; ++i) {
    double s = 0;
    for (Index k = 0; k < p.x.cols; ++k) {
      const double x = p.x.at(i, k);
      s += std::isfinite(x) ? x * x : 0.0;
    }
    n.norm[static_cast<std::size_t>(i)] = std::sqrt(s);
    if (s > 0) nonzero.push_back(std::sqrt(s));
  }
  // The lower median: of two rows the smaller, so that one of them can dominate the other (the
  // upper one, the larger itself, let a truncating accumulator's values beyond in a row of
  // 5000 read as that row's fault at M 2).
  if (!nonzero.empty()) {
    const auto mid = nonzero.begin() + static_cast<std::ptrdiff_t>((nonzero.size() - 1) / 2);
    std::nth_element(nonzero.begin(), mid, nonzero.end());
    n.median = *mid;
  }
  // A bias or residual added after the dot product is rounded in a row of zeros too.
  n.zero_rows_round = reference::has_bias(p.epilogue) || reference::has_residual(p.epilogue);
  return n;
}

std::string rows_outside_text(const BoundEvidence& e) {
  std::string out = std::to_string(e.rows_outside) + " of " + std::to_string(e.rows_held) + " rows";
  if (e.rows_named.empty()) return out;
  out.append(e.rows_named.size() == 1 ? " (row " : " (rows ");
  for (std::size_t i = 0; i < e.rows_named.size(); ++i) {
    out.append(i == 0 ? "" : ", ").append(std::to_string(e.rows_named[i]));
  }
  return out + ")";
}

RowSpread row_spread(const BoundEvidence& e) {
  if (e.rows_dominant) return RowSpread::kBroad;
  if (!(e.rows_outside > 0 && e.rows_held >= kFewRowsMin && 4 * e.rows_outside <= e.rows_held)) {
    return RowSpread::kBroad;
  }
  // The chance that rows_values values spread over the rows at random fall in rows_outside of
  // them or fewer: at most C(held, outside) (outside / held)^values (the union over the sets
  // of that many rows). 9 values in 1 row of 8: 6e-8; 2 values in 2 rows of 8: above 1.
  const double held = static_cast<double>(e.rows_held), out = static_cast<double>(e.rows_outside);
  const double log_sets = std::lgamma(held + 1) - std::lgamma(out + 1) - std::lgamma(held - out + 1);
  const bool chance = log_sets + static_cast<double>(e.rows_values) * std::log(out / held) > std::log(kFewRowsChance);
  return chance ? RowSpread::kFewRows : RowSpread::kConcentrated;
}

const DeclarationTrial* narrower_than_declared(const std::vector<DeclarationTrial>& trials, RowSpread spread) {
  // Centred both ways: residuals leaning away from zero (a dominant row x 1.002 under bf16
  // outputs, lean 8.2) are no narrower accumulator's that rounds to nearest.
  if (trials.size() < 2 || spread != RowSpread::kBroad || !centred_beside_directed(trials) ||
      !(trials.front().lean < kTruncationLean)) {
    return nullptr;
  }
  if (!fitting_trials(trials, spread).empty() || fault_fit(trials) != nullptr) return nullptr;
  for (std::size_t i = 1; i < trials.size(); ++i) {
    const DeclarationTrial& t = trials[i];
    if (directed_accumulator_trial(t) && t.sampled > 0 && t.inside == t.sampled) return &t;
  }
  return nullptr;
}

const DeclarationTrial* residual_fit(const std::vector<DeclarationTrial>& trials) {
  if (trials.size() < 2) return nullptr;
  const double limit = diagnosis_energy_limit(trials.front().sampled);
  if (!(trials.front().energy > limit)) return nullptr;
  std::vector<const DeclarationTrial*> fits = fitting_trials(trials);
  std::erase_if(fits, [&](const DeclarationTrial* t) { return t->energy < 0 || t->energy > limit; });
  const std::vector<const DeclarationTrial*> ranked = rank_by_energy(fits);
  return ranked.empty() ? nullptr : ranked.front();
}

}  // namespace ncert::certify
