// identity: S(X W^T) = (S X) W^T bit for bit. y_packed equals y_unpacked on every selected row,
// and y_compact scattered through the selector equals y_packed; valid columns only. A row that
// differs is then matched, bit for bit over its valid columns, against every row the packed path
// could have put there (the unpacked rows, the compact slots, y_before): a gather or scatter that
// used the wrong index leaves another row's exact values, and the failure names that mapping.
#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "certify/projection/checks.h"
#include "certify/projection/detail/text.h"

namespace ncert::certify {

namespace {

/// The rows of one output, keyed by their valid columns' bytes (rows with equal values share a
/// key, so a lookup says how many rows hold them).
class RowIndex {
 public:
  RowIndex(const EngineOutput& out, Index rows, Index row_bytes, Index stride_bytes)
      : out_(out), row_bytes_(row_bytes), stride_bytes_(stride_bytes) {
    if (!out.present) return;
    rows_.reserve(static_cast<std::size_t>(rows));
    for (Index r = 0; r < rows; ++r) rows_.emplace(key(out, r), r);
  }
  /// The lowest row holding exactly `values` other than `exclude`, and how many more do; -1 if none.
  std::pair<Index, Index> find(std::string_view values, Index exclude) const {
    Index first = -1, count = 0;
    auto [lo, hi] = rows_.equal_range(values);
    for (auto it = lo; it != hi; ++it) {
      if (it->second == exclude) continue;
      ++count;
      first = first < 0 ? it->second : std::min(first, it->second);
    }
    return {first, std::max<Index>(count - 1, 0)};
  }
  std::string_view key(const EngineOutput& out, Index row) const {
    return {reinterpret_cast<const char*>(out.bytes.data()) + row * stride_bytes_,
            static_cast<std::size_t>(row_bytes_)};
  }
  bool present() const { return out_.present; }

 private:
  const EngineOutput& out_;
  Index row_bytes_, stride_bytes_;
  std::unordered_multimap<std::string_view, Index> rows_;
};

/// "slot 3 holds row 7, not row 6" and its kin, for one mapping.
std::string mapping_text(const SlotMapping& m) {
  const std::string slot = "slot " + std::to_string(m.slot), row = "row " + std::to_string(m.row);
  const std::string also =
      m.others > 0 ? " (or one of " + std::to_string(m.others) + " more with the same values)" : std::string();
  switch (m.kind) {
    case SlotMisroute::kGathered:
      return slot + " holds row " + std::to_string(m.actual) + also + ", not " + row;
    case SlotMisroute::kScattered:
      return row + " received slot " + std::to_string(m.actual) + also + ", not " + slot;
    case SlotMisroute::kUnwritten:
      return row + " (" + slot + ") was never written: it still holds y_before";
    case SlotMisroute::kCompact:
      return "y_compact " + slot + " holds row " + std::to_string(m.actual) + also + ", not " + row;
  }
  return {};
}

/// Explains each differing selected row by another row's exact values, preferring the scatter's
/// view (y_compact) when the dump has it: a y_packed row equal to another slot's compact row was
/// scattered wrongly even if that slot computed the right row.
void explain_rows(const ProjectionFacts& f, const std::vector<std::pair<Index, Index>>& pairs,
                  const std::vector<char>& packed_differs, const std::vector<char>& compact_differs,
                  IdentityEvidence& e) {
  const LoadedProjection& L = f.data;
  const ProjectionInfo& info = f.info();
  const Index es = dtype_size(info.output), row_bytes = info.n * es, stride_bytes = info.out_stride * es;
  const RowIndex unpacked(L.y_unpacked, info.m, row_bytes, stride_bytes);
  const RowIndex compact(L.y_compact, info.p, row_bytes, stride_bytes);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (!packed_differs[i] && !compact_differs[i]) continue;
    ++e.rows_differing;
    const Index slot = pairs[i].first, row = pairs[i].second;
    std::optional<SlotMapping> m;
    const auto mapping = [&](SlotMisroute kind, std::pair<Index, Index> found) {
      if (found.first >= 0) m = SlotMapping{kind, slot, row, found.first, found.second};
    };
    // Without y_unpacked only the scatter's view differs: y_packed's row is still explained by
    // the compact slot it holds, or by y_before (an outside exporter's dump without y_unpacked
    // read "not a misrouted row" for a row scattered from the wrong slot).
    const bool scatter_only = !packed_differs[i] && compact_differs[i] && !unpacked.present() && L.y_packed.present;
    if (packed_differs[i] || scatter_only) {
      const std::string_view packed = unpacked.key(L.y_packed, row);
      if (compact.present() && compact_differs[i]) mapping(SlotMisroute::kScattered, compact.find(packed, slot));
      if (!m && L.y_before.present && packed == unpacked.key(L.y_before, row)) {
        m = SlotMapping{SlotMisroute::kUnwritten, slot, row, -1, 0};
      }
      if (!m) mapping(SlotMisroute::kGathered, unpacked.find(packed, row));
    } else if (unpacked.present()) {
      mapping(SlotMisroute::kCompact, unpacked.find(compact.key(L.y_compact, slot), row));
    }
    if (!m) continue;
    ++e.rows_explained;
    if (e.mappings.size() < IdentityEvidence::kMaxMappings) e.mappings.push_back(*m);
  }
  std::sort(e.mappings.begin(), e.mappings.end(), [](const auto& a, const auto& b) { return a.slot < b.slot; });
}

/// "; slot 3 holds row 7, not row 6; ... (2 of 2 differing rows explained)".
std::string mappings_text(const IdentityEvidence& e) {
  if (e.rows_explained == 0) {
    return "; no differing row equals another row, slot or y_before bit for bit (not a misrouted row: wrong values)";
  }
  constexpr std::size_t kShown = 4;
  std::string s;
  for (std::size_t i = 0; i < std::min(kShown, e.mappings.size()); ++i) s += "; " + mapping_text(e.mappings[i]);
  if (e.mappings.size() > kShown) s += "; ...";
  return s + " (" + std::to_string(e.rows_explained) + " of " + std::to_string(e.rows_differing) +
         " differing rows explained bit for bit)";
}

}  // namespace

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
  std::vector<char> packed_differs(pairs.size()), compact_differs(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto [slot, row] = pairs[i];
    for (Index c = 0; c < info.n; ++c) {
      if (L.y_packed.present && L.y_unpacked.present) {
        const std::uint32_t a = L.y_packed.bits(t, stride, row, c), b = L.y_unpacked.bits(t, stride, row, c);
        ++e.packed_vs_unpacked;
        if (a != b) {
          packed_differs[i] = 1;
          note("y_packed != y_unpacked", row, c, slot, a, b, "y_packed", "y_unpacked");
        }
      }
      if (L.y_compact.present && L.y_packed.present) {
        const std::uint32_t a = L.y_compact.bits(t, stride, slot, c), b = L.y_packed.bits(t, stride, row, c);
        ++e.compact_vs_packed;
        if (a != b) {
          compact_differs[i] = 1;
          note("y_compact scattered != y_packed", row, c, slot, a, b, "y_compact", "y_packed");
        }
      }
    }
  }
  e.elements_compared = e.packed_vs_unpacked + e.compact_vs_packed;
  e.selected_rows = static_cast<Index>(pairs.size());
  if (e.differ > 0) {
    explain_rows(f, pairs, packed_differs, compact_differs, e);
    r.verdict = Verdict::kFail;
    r.reason = first_text + "; " + std::to_string(e.differ) + " of " + std::to_string(e.elements_compared) +
               " elements differ" + mappings_text(e);
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
