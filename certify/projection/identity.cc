// identity: S(X W^T) = (S X) W^T bit for bit. y_packed equals y_unpacked on every selected row,
// and y_compact scattered through the selector equals y_packed; valid columns only.
#include <algorithm>

#include "certify/projection/checks.h"
#include "certify/projection/detail/text.h"

namespace ncert::certify {

CheckResult identity_check(const ProjectionFacts& f) {
  const LoadedProjection& L = f.data;
  const ProjectionInfo& info = f.info();
  CheckResult r = projection_check(info, CheckKind::kIdentity);
  const DType t = info.output;
  const Index stride = info.out_stride;
  IdentityEvidence e;
  std::string first_text;
  auto note = [&](const char* what, Index row, Index col, Index slot, std::uint32_t a, std::uint32_t b, const char* an,
                  const char* bn) {
    ++e.differ;
    if (r.first_failure) return;
    r.first_failure = Location{an, row, col, slot};
    first_text = std::string(what) + " at " + detail::where(row, col, slot) + ": " + an + " " +
                 detail::bits_text(a, t) + " vs " + bn + " " + detail::bits_text(b, t);
  };
  std::vector<std::pair<Index, Index>> pairs;  // (slot, row), in row order
  for (Index s = 0; s < static_cast<Index>(L.selector.size()); ++s) {
    if (L.selector[static_cast<std::size_t>(s)] >= 0) pairs.emplace_back(s, L.selector[static_cast<std::size_t>(s)]);
  }
  std::sort(pairs.begin(), pairs.end(), [](auto& a, auto& b) { return a.second < b.second; });
  for (const auto& [slot, row] : pairs) {
    for (Index c = 0; c < info.n; ++c) {
      if (L.y_packed.present && L.y_unpacked.present) {
        const std::uint32_t a = L.y_packed.bits(t, stride, row, c), b = L.y_unpacked.bits(t, stride, row, c);
        ++e.packed_vs_unpacked;
        if (a != b) note("y_packed != y_unpacked", row, c, slot, a, b, "y_packed", "y_unpacked");
      }
      if (L.y_compact.present && L.y_packed.present) {
        const std::uint32_t a = L.y_compact.bits(t, stride, slot, c), b = L.y_packed.bits(t, stride, row, c);
        ++e.compact_vs_packed;
        if (a != b) note("y_compact scattered != y_packed", row, c, slot, a, b, "y_compact", "y_packed");
      }
    }
  }
  e.elements_compared = e.packed_vs_unpacked + e.compact_vs_packed;
  e.selected_rows = static_cast<Index>(pairs.size());
  if (e.differ > 0) {
    r.verdict = Verdict::kFail;
    r.reason = first_text + "; " + std::to_string(e.differ) + " of " + std::to_string(e.elements_compared) +
               " elements differ";
  } else {
    const bool pu = e.packed_vs_unpacked > 0, cp = e.compact_vs_packed > 0;
    r.reason = std::to_string(e.elements_compared) + " elements bit-identical over " + std::to_string(pairs.size()) +
               " selected rows (" + (pu ? "packed vs unpacked" : "") + (pu && cp ? ", " : "") +
               (cp ? "compact vs packed" : "") + ")";
  }
  r.evidence = e;
  return r;
}

}  // namespace ncert::certify
