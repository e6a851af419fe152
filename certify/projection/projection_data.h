// This header defines LoadedProjection: one /projections/<name> read from a validated dump into
// owned buffers (raw bit patterns), with the views the reference needs (LinearProblem) and the
// packing plan the geometry check validates (PackPlan). Loading reads every member whole; the
// reader has already refused members above the memory limit.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/projection/shared_weights.h"
#include "packing/guards.h"
#include "packing/pack_plan.h"
#include "reference/float_bits.h"
#include "reference/linear_spec.h"

namespace ncert::certify {

/// One engine output dataset, raw.
struct EngineOutput {
  bool present = false;
  Bytes bytes;
  Index rows = 0;

  /// The stored value of element (row, col) as f32 (bf16 / f16 patterns widened exactly).
  /// Inline: the reference pass reads every value of every output through it.
  float value(DType t, Index stride, Index row, Index col) const {
    return reference::value_of_bits(bits(t, stride, row, col), t);
  }
  /// The raw pattern of element (row, col): f32 bits, or the bf16 / f16 pattern.
  std::uint32_t bits(DType t, Index stride, Index row, Index col) const {
    const Index i = row * stride + col;
    if (t == DType::kF32) {
      std::uint32_t u;
      std::memcpy(&u, bytes.data() + i * 4, 4);
      return u;
    }
    std::uint16_t b;
    std::memcpy(&b, bytes.data() + i * 2, 2);
    return b;
  }
};

/// The engine outputs a projection can carry, in report order.
enum class EngineOutputId : std::uint8_t { kUnpacked, kPacked, kCompact };
inline constexpr std::size_t kEngineOutputs = 3;
inline constexpr std::array<EngineOutputId, kEngineOutputs> kAllEngineOutputs = {
    EngineOutputId::kUnpacked, EngineOutputId::kPacked, EngineOutputId::kCompact};
/// "y_unpacked", "y_packed", "y_compact".
std::string_view engine_output_name(EngineOutputId o);

struct LoadedProjection {
  const ProjectionInfo* info = nullptr;
  Bytes x;
  /// With x_quant: the engine's quantized activations, their scales and zero points (empty: 0).
  Bytes x_quantized, x_scales, x_zero_points;
  std::shared_ptr<const LoadedWeights> loaded_weights;  ///< the buffers `weights` views (maybe shared)
  reference::Weights weights;
  Bytes bias;
  Bytes residual;
  std::vector<std::int32_t> selector;
  std::vector<std::int32_t> commit_counts;  ///< empty when the dump has none
  EngineOutput y_unpacked, y_packed, y_compact, y_before;
  packing::PackPlan plan;
  double read_seconds = 0;

  /// The reference problem over all M rows (lambda and walk from the arguments/dump).
  reference::LinearProblem problem(double lambda) const;
  /// The host guards a reference of these weights needs (packing::validate_weights: K >= 1,
  /// the walk's parts and every AF4 group divide K, the segments tile N). check's geometry
  /// runs them before it evaluates; a caller that evaluates alone (a run's lm_head) asks here.
  Status weights_evaluable() const { return packing::validate_weights(plan); }
  const EngineOutput& output(EngineOutputId o) const {
    return o == EngineOutputId::kUnpacked ? y_unpacked : o == EngineOutputId::kPacked ? y_packed : y_compact;
  }
};

/// Reads everything of one projection (kHdf5 / kMemoryLimit on read failures). Its weights come
/// from `weights` (bind_weights) or, by default, from its own dump; with a `cache`, a projection
/// declaring a weights hash the cache holds reads no weights. A declared weights hash that the
/// weights read do not have is kAttributeInvalid (verify_weights_hash).
Result<LoadedProjection> load_projection(const DumpReader& reader, const ProjectionInfo& info,
                                         const WeightsSource* weights = nullptr, WeightsCache* cache = nullptr);

}  // namespace ncert::certify
