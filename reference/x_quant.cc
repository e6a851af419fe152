#include "reference/x_quant.h"

#include <algorithm>
#include <cmath>

#include "reference/narrow_float.h"

namespace ncert::reference {

double x_quant_tolerance(DType scale_dtype) { return x_quant_tolerance(scale_dtype, 1.0); }

double x_quant_tolerance(DType scale_dtype, double scale) {
  const bool usable = scale > 0 && std::isfinite(scale);
  // The engine's f32 operations: up to three roundings, 3 * 2^-24 < 2^-22 relative; s =
  // fl(amax / 127) itself subnormal in f32 errs by up to 2^-150 absolute.
  double ops = 0x1p-22;
  if (usable && scale < 0x1p-126) ops += 0x1p-150 / scale;
  // The storage rounding after use: |s_used - s| <= delta * s for the stored s, u relative in
  // the type's normal range, half its smallest spacing below it (at most s / 2: s is at least
  // that spacing). The quotient with s_used is t * s / s_used, within t / (1 - delta) of t.
  double delta = 0;
  if (scale_dtype == DType::kF16) delta = usable ? std::max(0x1p-11, 0x1p-25 / scale) : 0x1p-11;
  if (scale_dtype == DType::kBf16) delta = usable ? std::max(0x1p-8, 0x1p-134 / scale) : 0x1p-8;
  return (1 + ops) / (1 - delta) - 1;
}

namespace {

double round_code(double t, XQuantRounding r) {
  // nearbyint under the default rounding mode is ties-to-even; std::round is ties away from zero.
  return r == XQuantRounding::kNearestEven ? std::nearbyint(t) : std::round(t);
}

}  // namespace

XQuantRange x_quant_allowed(const XQuantizer& q, double x, double scale, double zero_point, double tolerance) {
  XQuantRange out;
  if (!(scale >= 0) || !std::isfinite(scale) || (scale == 0 && x != 0)) {
    out.valid = false;
    return out;
  }
  if (scale == 0) {  // an all-zero group: every code is the zero point (0 for FP8)
    out.lowest = out.highest = zero_point;
    return out;
  }
  // x / s in f64 is within 2^-53 of the exact quotient; the slack covers that too.
  const double t = x / scale;
  const double slack = std::fabs(t) * (tolerance + 0x1p-50);
  const double lo = t - slack, hi = t + slack;
  if (q.type == XQuantType::kInt8 || q.type == XQuantType::kUint8) {
    const double min = q.type == XQuantType::kInt8 ? -128 : 0, max = q.type == XQuantType::kInt8 ? 127 : 255;
    // Rounding is monotone, so the codes of [lo, hi] are those between the codes of its ends.
    out.lowest = std::clamp(round_code(lo, q.rounding) + zero_point, min, max);
    out.highest = std::clamp(round_code(hi, q.rounding) + zero_point, min, max);
    return out;
  }
  const NarrowFormat& f = q.type == XQuantType::kE4m3 ? kE4m3Format : kE5m2Format;
  out.lowest = narrow_decode(f, narrow_round(f, lo, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate));
  out.highest = narrow_decode(f, narrow_round(f, hi, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate));
  return out;
}

}  // namespace ncert::reference
