// untouched: the packed call leaves unselected rows and padding columns of its output buffer
// exactly as they were (y_before), bit for bit.
#include "certify/projection/checks.h"
#include "certify/projection/detail/text.h"

namespace ncert::certify {

CheckResult untouched_check(const ProjectionFacts& f) {
  const LoadedProjection& L = f.data;
  const ProjectionInfo& info = f.info();
  CheckResult r = projection_check(info, CheckKind::kUntouched);
  const DType t = info.output;
  const Index stride = info.out_stride;
  UntouchedEvidence e;
  std::string first;
  for (Index row = 0; row < info.m; ++row) {
    const bool selected = f.slot_of_row[static_cast<std::size_t>(row)] >= 0;
    for (Index c = selected ? info.n : 0; c < stride; ++c) {
      ++e.elements_compared;
      const std::uint32_t a = L.y_before.bits(t, stride, row, c), b = L.y_packed.bits(t, stride, row, c);
      if (a == b) continue;
      if (e.changed++ == 0) {
        e.first_in_padding = c >= info.n;
        first = std::string(e.first_in_padding ? "padding column" : "unselected row") + " written at row " +
                std::to_string(row) + " col " + std::to_string(c) + ": y_before " + detail::hex_bits(a, t) +
                " -> y_packed " + detail::hex_bits(b, t);
        r.first_failure = Location{"y_packed", row, c};
      }
    }
  }
  if (e.changed > 0) {
    r.verdict = Verdict::kFail;
    r.reason =
        first + "; " + std::to_string(e.changed) + " of " + std::to_string(e.elements_compared) + " elements changed";
  } else {
    r.reason = std::to_string(e.elements_compared) + " elements of unselected rows and padding columns unchanged";
  }
  r.evidence = e;
  return r;
}

}  // namespace ncert::certify
