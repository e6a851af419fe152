#include "reference/x_quant.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "reference/narrow_float.h"

namespace ncert::reference {

double x_quant_tolerance(DType scale_dtype) { return x_quant_tolerance(scale_dtype, 1.0); }

double x_quant_zero_scale_below(DType scale_dtype) {
  if (scale_dtype == DType::kF16) return 0x1p-25;
  if (scale_dtype == DType::kBf16) return 0x1p-134;
  return 0x1p-150;
}

namespace {

/// The engine's f32 operations' relative error `ops` and the storage rounding's `delta` (below).
std::pair<double, double> quotient_errors(DType scale_dtype, double scale) {
  const bool usable = scale > 0 && std::isfinite(scale);
  // The engine's f32 operations: up to three roundings, 3 * 2^-24 < 2^-22 relative; s =
  // fl(amax / 127) itself subnormal in f32 errs by up to 2^-150 absolute.
  double ops = 0x1p-22;
  if (usable && scale < 0x1p-126) ops += x_quant_zero_scale_below(DType::kF32) / scale;
  // The storage rounding after use: |s_used - s| <= delta * s for the stored s, u relative in
  // the type's normal range, half its smallest spacing below it (at most s / 2: s is at least
  // that spacing). The quotient with s_used is t * s / s_used, within t / (1 - delta) of t.
  double u = 0;
  if (scale_dtype == DType::kF16) u = 0x1p-11;
  if (scale_dtype == DType::kBf16) u = 0x1p-8;
  const double delta = u > 0 && usable ? std::max(u, x_quant_zero_scale_below(scale_dtype) / scale) : u;
  return {ops, delta};
}

}  // namespace

double x_quant_tolerance(DType scale_dtype, double scale) {
  const auto [ops, delta] = quotient_errors(scale_dtype, scale);
  return (1 + ops) / (1 - delta) - 1;
}

double x_quant_tolerance_low(DType scale_dtype, double scale) {
  // The quotient with the engine's scale s_u >= (1 - delta) s... <= (1 + delta) s is at least
  // t / (1 + delta): a subnormal f16 scale of 2^-24 (delta 1/2) keeps codes above 2/3 of x / s,
  // where the symmetric slack let them fall to 0 (a review's wrong codes passed).
  const auto [ops, delta] = quotient_errors(scale_dtype, scale);
  return 1 - (1 - ops) / (1 + delta);
}

XQuantSlack x_quant_slack(DType scale_dtype, double scale) {
  return {x_quant_tolerance(scale_dtype, scale), x_quant_tolerance_low(scale_dtype, scale),
          x_quant_zero_scale_below(scale_dtype)};
}

namespace {

double round_code(double t, XQuantRounding r) {
  // nearbyint under the default rounding mode is ties-to-even; std::round is ties away from zero.
  return r == XQuantRounding::kNearestEven ? std::nearbyint(t) : std::round(t);
}

}  // namespace

XQuantRange x_quant_allowed(const XQuantizer& q, double x, double scale, double zero_point, double tolerance,
                            double zero_scale_below, double tolerance_low) {
  if (tolerance_low < 0) tolerance_low = tolerance;
  XQuantRange out;
  const bool integer = x_quant_integer(q.type);
  const double min = q.type == XQuantType::kInt8 ? -128 : 0, max = q.type == XQuantType::kInt8 ? 127 : 255;
  const NarrowFormat& f = q.type == XQuantType::kE4m3 ? kE4m3Format : kE5m2Format;
  const double fp8_max = q.type == XQuantType::kE4m3 ? 448 : 57344;
  if (scale == 0 && x != 0 && zero_scale_below > 0) {
    // A stored scale of 0 beside a nonzero x: the engine's own scale (amax / qmax, say) was
    // positive but below half its storage type's smallest spacing, and stored as 0 (ggml's f16
    // d of a block whose |x| stays under 127 * 2^-25 = 3.8e-6), or an f32 scale underflowed and
    // the engine's guard (d ? 1 / d : 0) made every code 0. It quantized with a scale s_u it
    // did not store, and an asymmetric quantizer's zero point came from s_u too: any code may
    // be its quantization of x, and the products with the stored 0 are 0 whatever the code, for
    // the kernel and the reference alike. Only an x no such scale reaches is refused.
    const double reach = integer ? 255 : fp8_max;  // an asymmetric int8 code spans 255 steps too
    if (std::fabs(x) / zero_scale_below > reach * (1 + tolerance) + 1) {
      out.valid = false;
      return out;
    }
    out.lowest = integer ? min : -fp8_max;
    out.highest = integer ? max : fp8_max;
    return out;
  }
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
  // |t| may shrink by tolerance_low and grow by tolerance (2^-50 more: t in f64).
  const double shrunk = t * (1 - (tolerance_low + 0x1p-50)), grown = t * (1 + tolerance + 0x1p-50);
  const double lo = std::min(shrunk, grown), hi = std::max(shrunk, grown);
  if (integer) {
    // Rounding is monotone, so the codes of [lo, hi] are those between the codes of its ends.
    out.lowest = std::clamp(round_code(lo, q.rounding) + zero_point, min, max);
    out.highest = std::clamp(round_code(hi, q.rounding) + zero_point, min, max);
    return out;
  }
  out.lowest = narrow_decode(f, narrow_round(f, lo, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate));
  out.highest = narrow_decode(f, narrow_round(f, hi, NarrowRounding::kNearestEven, NarrowOverflow::kSaturate));
  return out;
}

}  // namespace ncert::reference
