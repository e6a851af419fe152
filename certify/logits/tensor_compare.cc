#include "certify/logits/tensor_compare.h"

#include <cmath>
#include <cstring>

#include "certify/io/row_stream.h"
#include "certify/report/format.h"
#include "reference/float_bits.h"
#include "reference/narrow_float.h"

namespace ncert::certify {

namespace {

float element(const unsigned char* base, DType t, Index i) { return reference::decode_element(base, t, i); }

std::uint64_t element_ulps(const unsigned char* a, const unsigned char* b, DType t, Index i) {
  if (t == DType::kF32) return reference::ulp_distance_f32(element(a, t, i), element(b, t, i));
  if (is_fp8_dtype(t)) return reference::narrow_ulp_distance(*reference::narrow_format(t), a[i], b[i]);
  std::uint16_t x, y;
  std::memcpy(&x, a + i * 2, 2);
  std::memcpy(&y, b + i * 2, 2);
  return t == DType::kBf16 ? reference::ulp_distance_bf16(x, y) : reference::ulp_distance_f16(x, y);
}

/// "[2,3]", as the JSON of a shape prints.
std::string shape_text(const std::vector<Index>& shape) {
  std::string s = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d) s.push_back(',');
    s.append(std::to_string(shape[d]));
  }
  s.push_back(']');
  return s;
}

std::string index_text(const std::vector<Index>& shape, Index flat) {
  std::vector<Index> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (std::size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

}  // namespace

Result<CheckResult> tensor_check(const DumpReader& a, const TensorInfo& ta, const DumpReader& b, const TensorInfo& tb,
                                 const Policy& policy, bool overridden) {
  CheckResult r;
  r.id = "tensors/" + ta.name;
  r.kind = CheckKind::kTensor;
  TensorEvidence e;
  e.policy = policy.text;
  e.dtype = ta.dtype;
  e.shape = ta.shape;
  if (!overridden && ta.compare != tb.compare) e.note = "compare attributes differ; A's is used";
  if (ta.dtype != tb.dtype || ta.shape != tb.shape) {
    r.verdict = Verdict::kFail;
    r.reason = "A is " + std::string(dtype_name(ta.dtype)) + " " + shape_text(ta.shape) + ", B is " +
               std::string(dtype_name(tb.dtype)) + " " + shape_text(tb.shape);
    r.evidence = std::move(e);
    return r;
  }
  e.compared = true;
  const DatasetInfo* da = a.model().dataset(ta.path);
  Index elements = da ? da->elements : 0;
  Index differ = 0, first = -1;
  double max_abs = 0;
  std::uint64_t max_ulp = 0;
  std::string first_text;
  auto judge = [&](const unsigned char* pa, const unsigned char* pb, Index n, Index base) {
    const int size = dtype_size(ta.dtype);
    for (Index i = 0; i < n; ++i) {
      const bool same = std::memcmp(pa + i * size, pb + i * size, static_cast<std::size_t>(size)) == 0;
      const float x = element(pa, ta.dtype, i), y = element(pb, ta.dtype, i);
      const double d = std::fabs(static_cast<double>(y) - static_cast<double>(x));
      if (std::isfinite(d)) max_abs = std::max(max_abs, d);
      const std::uint64_t u = same ? 0 : element_ulps(pa, pb, ta.dtype, i);
      max_ulp = std::max(max_ulp, u);
      bool ok = same;
      if (!same) {
        switch (policy.kind) {
          case Policy::Kind::kUlp:
            ok = u <= policy.ulp;
            break;
          case Policy::Kind::kAbs:
            ok = d <= policy.abs +
                          policy.rel * std::max(std::fabs(static_cast<double>(x)), std::fabs(static_cast<double>(y)));
            break;
          default:
            ok = false;
            break;
        }
      }
      if (!ok && differ++ == 0) {
        first = base + i;
        first_text = "element " + index_text(ta.shape, base + i) + ": A " + format_float(x) + " vs B " +
                     format_float(y) +
                     (u == reference::kUlpInfinite ? ""
                      : ulps_cross_zero(x, y)
                          ? " (opposite signs or a zero: " + std::to_string(u) + " ulps counted through zero)"
                          : " (" + std::to_string(u) + " ulps)");
      }
    }
  };
  if (ta.shape.empty()) {
    NCERT_ASSIGN_OR_RETURN(auto xa, a.read_bytes(ta.path));
    NCERT_ASSIGN_OR_RETURN(auto xb, b.read_bytes(tb.path));
    judge(xa.data(), xb.data(), 1, 0);
  } else {
    // Blocks of about 16 MiB whatever the shape (a KV cache's first dimension may be layers).
    const Index per_row = da ? da->row_elements() : 0;
    const Index per_block = block_rows_for({da, b.model().dataset(tb.path)}, 16 << 20, 4096);
    NCERT_ASSIGN_OR_RETURN(RowStream sa, RowStream::open(a, ta.path, per_block));
    NCERT_ASSIGN_OR_RETURN(RowStream sb, RowStream::open(b, tb.path, per_block));
    for (;;) {
      NCERT_ASSIGN_OR_RETURN(RowBlock ba, sa.next());
      NCERT_ASSIGN_OR_RETURN(RowBlock bb, sb.next());
      if (ba.rows == 0) break;
      judge(ba.data, bb.data, ba.rows * per_row, ba.first_row * per_row);
    }
  }
  e.elements = elements;
  e.violations = differ;
  e.max_abs_diff = max_abs;
  e.max_ulp = max_ulp;
  if (differ > 0) {
    r.verdict = Verdict::kFail;
    r.reason = first_text + " breaks " + policy.text + "; " + std::to_string(differ) + " of " +
               std::to_string(elements) + " elements";
    e.first_failure = first;
    r.first_failure = Location{ta.path, first, -1};
  } else {
    r.reason =
        std::to_string(elements) + " elements hold under " + policy.text + " (max |d| " + format_short(max_abs) + ")";
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
