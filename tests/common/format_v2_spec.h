// Test support: generated projections of dump format v2's element types and quantizers: f16
// activations, f16 and bf16 weight segments and an f16 output with an f16 bias; and activations
// quantized per token or per group (int8, uint8 with zero points, e4m3, e5m2) before the
// products (docs/dump-format.md §3.6).
#pragma once

#include <string>

#include "fixtures/generator.h"

namespace ncert::testing {

/// K = 1536, f16 in and out with an f16 bias, f16 and bf16 weights, k_walk seq: the bound is
/// about an f16 ulp or more at every output (at K <= 1024 it is below half an ulp at the largest
/// outputs, and `bound` sees truncation too), and 8 x 512 outputs give the bias check a limit of
/// 0.46 ulp against truncation's -0.5.
inline fixtures::ProjectionSpec f16_projection(const std::string& name = "half") {
  fixtures::ProjectionSpec p;
  p.name = name;
  p.requests = 2;
  p.block_rows = 4;
  p.cap = 2;
  p.slots = 4;
  p.k = 1536;
  p.n = 512;
  p.out_pad = 2;
  p.x = DType::kF16;
  p.output = DType::kF16;
  p.bias = DType::kF16;
  p.epilogue = reference::Epilogue::kBias;
  p.k_walk = "seq";
  fixtures::SegmentSpec half;
  half.format = reference::WeightFormat::kF16;
  half.rows = 256;
  fixtures::SegmentSpec brain;
  brain.format = reference::WeightFormat::kBf16;
  brain.rows = 256;
  p.segments = {half, brain};
  p.seed = 41;
  return p;
}

struct XQuantCase {
  std::string type = "int8";
  Index group = 0;  ///< 0: per token
  std::string rounding;
  std::string k_walk;
};

/// K = 128, f32 activations quantized as `q` says, bf16 weights, f32 outputs.
inline fixtures::ProjectionSpec x_quant_projection(const XQuantCase& q, const std::string& name = "w8a8") {
  fixtures::ProjectionSpec p;
  p.name = name;
  p.requests = 2;
  p.block_rows = 4;
  p.cap = 3;
  p.slots = 8;
  p.k = 128;
  p.n = 40;
  p.x = DType::kF32;
  p.output = DType::kF32;
  p.x_quant = q.type;
  p.x_quant_group = q.group;
  p.x_quant_rounding = q.rounding;
  p.k_walk = q.k_walk;
  p.seed = 53;
  return p;
}

inline fixtures::DumpSpec single_projection_dump(const fixtures::ProjectionSpec& p) {
  fixtures::DumpSpec d;
  d.root.engine = "ncert-fixture";
  d.root.build = "format-v2";
  d.projections.push_back(p);
  return d;
}

}  // namespace ncert::testing
