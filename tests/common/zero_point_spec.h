// Test support: a generated projection with one AF4 zero-point segment (w = (q - zp)*s, an
// integer zero point per group, docs/dump-format.md §4.2) beside an f32 segment, f32 in and out
// so that a weight that differs in its last bit reaches the output's bits.
#pragma once

#include <string>

#include "fixtures/generator.h"

namespace ncert::testing {

struct ZeroPointCase {
  reference::Dequant dequant = reference::Dequant::kF32;
  reference::DequantOp op = reference::DequantOp::kSubMul;
  reference::ZeroPointPacking packing = reference::ZeroPointPacking::kU8;
  DType scales = DType::kF32;
  std::string k_walk = "seq";  ///< "" declares none (the engine then sums split:8:fma)
};

/// K = 96 in groups of 32 (G = 3 groups: an odd count, so the packed forms have a trailing
/// nibble), 16 zero-point rows and 8 f32 rows.
inline fixtures::ProjectionSpec zero_point_projection(const ZeroPointCase& z, const std::string& name = "zp") {
  fixtures::ProjectionSpec p;
  p.name = name;
  p.requests = 2;
  p.block_rows = 4;
  p.cap = 3;
  p.slots = 8;
  p.k = 96;
  p.n = 24;
  p.out_pad = 4;
  fixtures::SegmentSpec a;
  a.format = reference::WeightFormat::kAf4;
  a.rows = 16;
  a.af4.variant = reference::Af4Variant::kZeroPoint;
  a.af4.packing = reference::Af4Packing::kU32Lsb;
  a.af4.group_size = 32;
  a.af4.scale_dtype = z.scales;
  a.af4.dequant = z.dequant;
  a.af4.dequant_op = z.op;
  a.af4.zero_point_packing = z.packing;
  fixtures::SegmentSpec b;
  b.format = reference::WeightFormat::kF32;
  b.rows = 8;
  p.segments = {a, b};
  p.x = DType::kF32;
  p.output = DType::kF32;
  p.k_walk = z.k_walk;
  p.seed = 29;
  return p;
}

inline fixtures::DumpSpec zero_point_dump(const ZeroPointCase& z) {
  fixtures::DumpSpec d;
  d.root.engine = "ncert-fixture";
  d.root.build = "zero-point";
  d.projections.push_back(zero_point_projection(z));
  return d;
}

}  // namespace ncert::testing
