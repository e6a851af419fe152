// A small, valid ncert dump for I/O tests: one projection "p" (K = 8, N = 4, M = 4 as 2
// requests x 2 rows, cap 1, P = 2 slots, a bf16 and an f32 weight segment), one logits run
// "run" (T = 3, V = 5) and one state tensor "kv". Tests add hostile objects through the
// writer's native handle before closing it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "certify/io/dump_writer.h"
#include "reference/float_bits.h"

namespace ncert::testing {

inline certify::DumpWriter open_mini_dump(const std::string& path, const certify::StorageOptions& st = {}) {
  using certify::DumpWriter;
  auto w = DumpWriter::create(path, true);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  DumpWriter writer = std::move(w).value();
  auto ok = [](const Status& s) { EXPECT_TRUE(s.ok()) << s.to_string(); };
  ok(writer.write_root({"test-engine", "abc123 -O2", "tiny", "cpu", 1}));
  const std::string p = "/projections/p";
  ok(writer.create_group(p));
  ok(writer.write_attr(p, "op", std::string("linear")));
  ok(writer.write_attr(p, "k", std::int64_t{8}));
  ok(writer.write_attr(p, "n", std::int64_t{4}));
  ok(writer.write_attr(p, "accumulator", std::string("f32-rn")));
  ok(writer.write_attr(p, "output_dtype", std::string("f32")));
  ok(writer.write_attr(p, "epilogue", std::string("none")));
  ok(writer.write_attr(p, "requests", std::int64_t{2}));
  ok(writer.write_attr(p, "block_rows", std::int64_t{2}));
  ok(writer.write_attr(p, "cap", std::int64_t{1}));
  std::vector<float> x(4 * 8);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  ok(writer.write_dataset(p + "/x", DType::kF32, {4, 8}, x.data(), st));
  std::vector<std::uint16_t> w0(2 * 8);
  for (std::size_t i = 0; i < w0.size(); ++i) {
    w0[i] = reference::f32_to_bf16(0.25f * static_cast<float>(i % 5) - 0.5f);
  }
  ok(writer.create_group(p + "/weight/a"));
  ok(writer.write_attr(p + "/weight/a", "format", std::string("bf16")));
  ok(writer.write_attr(p + "/weight/a", "row_begin", std::int64_t{0}));
  ok(writer.write_attr(p + "/weight/a", "row_end", std::int64_t{2}));
  ok(writer.write_dataset(p + "/weight/a/values", DType::kBf16, {2, 8}, w0.data(), st));
  std::vector<float> w1(2 * 8, 0.5f);
  ok(writer.create_group(p + "/weight/b"));
  ok(writer.write_attr(p + "/weight/b", "format", std::string("f32")));
  ok(writer.write_attr(p + "/weight/b", "row_begin", std::int64_t{2}));
  ok(writer.write_attr(p + "/weight/b", "row_end", std::int64_t{4}));
  ok(writer.write_dataset(p + "/weight/b/values", DType::kF32, {2, 8}, w1.data(), st));
  const std::vector<std::int32_t> selector = {0, 2};
  ok(writer.write_dataset(p + "/selector", DType::kI32, {2}, selector.data(), st));
  const std::vector<std::int32_t> commits = {1, 1};
  ok(writer.write_dataset(p + "/commit_counts", DType::kI32, {2}, commits.data(), st));
  std::vector<float> y(4 * 4, 1.0f);
  ok(writer.write_dataset(p + "/y_unpacked", DType::kF32, {4, 4}, y.data(), st));

  const std::string r = "/logits/run";
  ok(writer.create_group(r));
  ok(writer.write_attr(r, "vocab", std::int64_t{5}));
  const std::vector<std::int32_t> tokens = {1, 4, 0};
  ok(writer.write_dataset(r + "/tokens", DType::kI32, {3}, tokens.data(), st));
  const std::vector<float> logits = {0, 3, 1, 2, -1, 0, 0, 0, 0, 2, 5, 4, 3, 2, 1};
  ok(writer.write_dataset(r + "/logits", DType::kF32, {3, 5}, logits.data(), st));
  const std::vector<float> kv = {1, 2, 3, 4, 5, 6};
  ok(writer.write_dataset("/tensors/kv", DType::kF32, {2, 3}, kv.data(), st));
  return writer;
}

inline void write_mini_dump(const std::string& path, const certify::StorageOptions& st = {}) {
  auto w = open_mini_dump(path, st);
  EXPECT_TRUE(w.close().ok());
}

}  // namespace ncert::testing
