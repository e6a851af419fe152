// This header defines what an activation quantizer may produce (docs/dump-format.md §3.6, the
// quantize check of docs/error-bounds.md §6b): for one activation x, its group's scale s and zero
// point zp, the range of codes that are the declared rounding of x / s (+ zp), when the engine's
// quotient may differ from the exact x / s by a relative `tolerance` (its own f32 division, or a
// multiplication by a rounded 1/s, or a scale rounded to its storage type after use).
#pragma once

#include "reference/linear_spec.h"

namespace ncert::reference {

/// The relative slack of the quotient: 2^-22 covers up to three f32 roundings (x * fl(1/s) with
/// s itself fl(amax / 127) is three: 3 * 2^-24 < 2^-22); a scale stored in f16 or bf16 may have
/// been used unrounded, |s_used - s| <= delta s (delta = 2^-11, 2^-8), so the quotient may be
/// t / (1 - delta): (1 + 2^-22) / (1 - delta) - 1 in all. For a scale in the type's normal range.
double x_quant_tolerance(DType scale_dtype);
/// The same for one stored scale s: below its storage type's normal range (f16 under 2^-14,
/// bf16 and f32 under 2^-126) a rounding errs by up to half the type's smallest spacing, not by
/// its unit roundoff relative: delta = 2^-25 / s for f16 (0.4 % at s = 7.6e-6, where 2^-11
/// allowed 0.05 %), 2^-134 / s for bf16, and 2^-150 / s more for the f32 scale itself.
double x_quant_tolerance(DType scale_dtype, double scale);
/// The relative amount the quotient may fall short of x / s: 1 - (1 - 2^-22) / (1 + delta), which
/// the symmetric tolerance above overstates where delta is large (a subnormal scale).
double x_quant_tolerance_low(DType scale_dtype, double scale);

/// The largest scale a stored scale of this type holds as 0: half its smallest spacing (f16
/// 2^-25, bf16 2^-134, f32 2^-150).
double x_quant_zero_scale_below(DType scale_dtype);

/// The allowed codes [lowest, highest] (integers for int8 / uint8, FP8 values for e4m3 / e5m2),
/// saturated to the type's range. `valid` is false when s is not positive and finite. s = 0 is
/// allowed for x = 0, whose code is then zp, and, given `zero_scale_below` (see above), for an
/// x small enough that the engine's own scale of its group rounded to 0 where it was stored
/// (|x| <= qmax * zero_scale_below): any code of x's sign at least |x| / zero_scale_below out.
struct XQuantRange {
  bool valid = true;
  double lowest = 0, highest = 0;
};
/// `tolerance` widens |x / s| upward, `tolerance_low` downward (negative: the same as tolerance).
XQuantRange x_quant_allowed(const XQuantizer& q, double x, double scale, double zero_point, double tolerance,
                            double zero_scale_below = 0, double tolerance_low = -1);
/// Every slack x_quant_allowed takes, from a stored scale and its type (the quantize check's,
/// once per group).
struct XQuantSlack {
  double tolerance = 0, tolerance_low = 0, zero_scale_below = 0;
};
XQuantSlack x_quant_slack(DType scale_dtype, double scale);
inline XQuantRange x_quant_allowed(const XQuantizer& q, double x, double scale, double zero_point,
                                   const XQuantSlack& slack) {
  return x_quant_allowed(q, x, scale, zero_point, slack.tolerance, slack.zero_scale_below, slack.tolerance_low);
}

}  // namespace ncert::reference
