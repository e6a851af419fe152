// Internal: logits rows as f32, whatever their stored type (docs/dump-format.md §5: f32, bf16 or
// f16). Witness, compare and forks work on f32 values; a bf16 or f16 row is widened exactly
// (every bf16 and f16 value is an f32) into a per-thread buffer, an f32 row is used in place.
#pragma once

#include <string>
#include <vector>

#include "certify/io/dump_reader.h"
#include "reference/float_bits.h"

namespace ncert::certify::detail {

/// The dtype of a logits dataset (f32 when the model does not know it).
inline DType logits_dtype(const DumpReader& reader, const std::string& dataset) {
  const DatasetInfo* d = reader.model().dataset(dataset);
  return d ? d->dtype : DType::kF32;
}

/// Row bytes as f32 values: in place for f32, else widened into `scratch`.
inline const float* widen_row(const unsigned char* row, DType t, Index vocab, std::vector<float>& scratch) {
  if (t == DType::kF32) return reinterpret_cast<const float*>(row);
  scratch.resize(static_cast<std::size_t>(vocab));
  for (Index v = 0; v < vocab; ++v) scratch[static_cast<std::size_t>(v)] = reference::decode_element(row, t, v);
  return scratch.data();
}

/// Reads row t of a logits dataset as f32 values into `out` (resized to `vocab`).
inline Status read_row_f32(const DumpReader& reader, const std::string& dataset, Index t, Index vocab,
                           std::vector<float>& out) {
  const DType type = logits_dtype(reader, dataset);
  out.resize(static_cast<std::size_t>(vocab));
  if (type == DType::kF32) return reader.read_rows(dataset, t, 1, out.data());
  std::vector<unsigned char> raw(static_cast<std::size_t>(vocab * dtype_size(type)));
  NCERT_RETURN_IF_ERROR(reader.read_rows(dataset, t, 1, raw.data()));
  for (Index v = 0; v < vocab; ++v) out[static_cast<std::size_t>(v)] = reference::decode_element(raw.data(), type, v);
  return Status();
}

}  // namespace ncert::certify::detail
