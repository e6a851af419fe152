#include "reference/detail/activations.h"

#include <cmath>
#include <limits>

#include "reference/bounds.h"
#include "reference/detail/directed.h"

namespace ncert::reference::detail {

Activations prepare_activations(const LinearProblem& p, Index K, bool with_abs, ReferenceSummary& summary) {
  const Index M = p.x.rows;
  Activations a;
  const std::size_t cells = static_cast<std::size_t>(M * K);
  a.exact.resize(cells);
  a.f32.resize(cells);
  a.mag.resize(cells);
  if (with_abs) a.abs.resize(cells);
  a.l1.assign(static_cast<std::size_t>(M), 0.0);
  const bool quantized = p.x_quant.type != XQuantType::kNone;
  for (Index i = 0; i < M; ++i) {
    double l1 = 0;
    for (Index c = 0; c < K; ++c) {
      if (quantized) {
        // The products use the engine's quantized activations (q - zp) * s: exact in f64, and
        // in general not an f32, so S charges their magnitude rounded up to f32.
        const double v = p.x_quantized.value(i, c);
        a.exact[i * K + c] = v;
        a.f32[i * K + c] = static_cast<float>(v);  // only a walk would read it, and none is defined
        a.mag[i * K + c] = detail::f64_to_f32_up(std::fabs(v));
        if (with_abs) a.abs[i * K + c] = std::fabs(v);
        // Beyond f32's range (a scale of 3e38 times a code of 127): counted with the non-finite
        // ones, which bound fails naming the scale (B was NaN there: "outside [nan, nan]"). A
        // kernel that scales its summed codes might still end in range; such a scale is no
        // quantization of x either (quantize fails it).
        if (!(std::fabs(v) <= static_cast<double>(std::numeric_limits<float>::max()))) {
          if (summary.nonfinite_x++ == 0) summary.first_nonfinite_x = i * K + c;
        } else {
          l1 += std::fabs(v);
        }
        if (v != 0.0) summary.all_zero_x = false;
        continue;
      }
      const float v = p.x.at(i, c);
      a.f32[i * K + c] = v;
      a.exact[i * K + c] = v;
      a.mag[i * K + c] = f32_magnitude(v);  // |x| is exact in f32
      if (with_abs) a.abs[i * K + c] = std::fabs(static_cast<double>(v));
      if (!std::isfinite(v)) {
        if (summary.nonfinite_x++ == 0) summary.first_nonfinite_x = i * K + c;
      } else {
        l1 += std::fabs(static_cast<double>(v));
      }
      if (v != 0.0f) summary.all_zero_x = false;
    }
    a.l1[i] = inflate_s(l1, K);  // an upper bound of the 1-norm (non-negative terms)
  }
  return a;
}

const double* abs_activations(const Activations& x, std::vector<double>& own) {
  if (!x.abs.empty()) return x.abs.data();
  if (own.empty()) {
    own.resize(x.f32.size());
    for (std::size_t e = 0; e < own.size(); ++e) own[e] = std::fabs(static_cast<double>(x.f32[e]));
  }
  return own.data();
}

}  // namespace ncert::reference::detail
