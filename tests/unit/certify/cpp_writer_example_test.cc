// The example of docs/cpp-writer.md, verbatim between the markers (a test below holds the page's
// code block to it), run on an engine step computed here: `ncert check` must pass what it writes,
// with the walk held bit for bit, and fail the same step with one output bit flipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "certify/commands/check.h"
#include "reference/float_bits.h"

// ---- docs/cpp-writer.md example begins ----
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "certify/io/dump_builder.h"

// What the engine hands over after one step (bf16 as raw 16-bit patterns).
struct EngineStep {
  ncert::Index rows = 0, k = 0, n = 0, vocab = 0;
  std::vector<std::uint16_t> x, w, y;  // bf16 [rows, k], W [n, k], Y [rows, n]
  std::vector<std::int32_t> tokens;    // [T], emitted
  std::vector<float> logits;           // f32 [T, vocab], the raw rows they were chosen from
};

ncert::Status export_step(const std::string& path, const EngineStep& s) {
  using ncert::DType;
  using ncert::Index;
  using namespace ncert::certify;
  std::vector<std::int32_t> selector(static_cast<std::size_t>(s.rows));
  std::iota(selector.begin(), selector.end(), 0);  // the unpacked path: every row, in order

  Projection q{.name = "attn_q",
               .k = s.k,
               .n = s.n,
               .accumulator = "f32-rn",
               .output_dtype = DType::kBf16,
               .epilogue = ncert::reference::Epilogue::kNone,
               .k_walk = "seq"};  // one f32 accumulator, k ascending
  q.x = DumpArray(DType::kBf16, s.x, {s.rows, s.k});
  q.weight.push_back({.name = "w",
                      .format = ncert::reference::WeightFormat::kBf16,
                      .row_begin = 0,
                      .row_end = s.n,
                      .values = DumpArray(DType::kBf16, s.w, {s.n, s.k})});
  q.selector = DumpArray(DType::kI32, selector, {s.rows});
  q.y_unpacked = DumpArray(DType::kBf16, s.y, {s.rows, s.n});

  const auto t = static_cast<Index>(s.tokens.size());
  LogitsRun run{.name = "greedy",
                .vocab = s.vocab,
                .tokens = DumpArray(DType::kI32, s.tokens, {t}),
                .logits = DumpArray(DType::kF32, s.logits, {t, s.vocab})};

  NCERT_ASSIGN_OR_RETURN(DumpBuilder dump, DumpBuilder::create(path, {.engine = "my-engine", .build = "abc123"}));
  NCERT_RETURN_IF_ERROR(dump.add_projection(q));  // refused (and nothing written) if q breaks the format
  NCERT_RETURN_IF_ERROR(dump.add_logits_run(run));
  return dump.close();  // ncert_schema_version 1: nothing of version 2 was added
}
// ---- docs/cpp-writer.md example ends ----

namespace {

/// A step whose kernel is the seq walk: acc += x_k * w_k in f32 (bf16 products are exact in f32).
EngineStep engine_step(bool flip_one_bit) {
  EngineStep s;
  s.rows = 3, s.k = 32, s.n = 8, s.vocab = 6;
  for (ncert::Index i = 0; i < s.rows * s.k; ++i) {
    s.x.push_back(ncert::reference::f32_to_bf16(static_cast<float>((i * 7) % 13 - 6) / 4.0f));
  }
  for (ncert::Index i = 0; i < s.n * s.k; ++i) {
    s.w.push_back(ncert::reference::f32_to_bf16(static_cast<float>((i * 5) % 11 - 5) / 16.0f + 0.01f));
  }
  for (ncert::Index m = 0; m < s.rows; ++m) {
    for (ncert::Index j = 0; j < s.n; ++j) {
      float acc = 0.0f;
      for (ncert::Index k = 0; k < s.k; ++k) {
        acc += ncert::reference::bf16_to_f32(s.x[m * s.k + k]) * ncert::reference::bf16_to_f32(s.w[j * s.k + k]);
      }
      s.y.push_back(ncert::reference::f32_to_bf16(acc));
    }
  }
  if (flip_one_bit) s.y[0] ^= 1u;
  for (int t = 0; t < 2; ++t) {
    int best = 0;  // greedy: the lowest id among equal maxima
    for (int v = 0; v < 6; ++v) {
      s.logits.push_back(static_cast<float>((t + 2 * v) % 5));
      if (s.logits.back() > s.logits[static_cast<std::size_t>(t * 6 + best)]) best = v;
    }
    s.tokens.push_back(best);
  }
  return s;
}

ncert::Result<ncert::certify::Report> check(const std::string& path) {
  ncert::certify::CheckCommandOptions co;
  co.dump = path;
  return ncert::certify::run_check(co);
}

std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("ncert_cpp_writer_example_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return (dir / name).string();
}

TEST(CppWriterExample, WritesAStepThatPassesAndAFaultThatFails) {
  const std::string good = scratch("step.h5");
  ASSERT_TRUE(export_step(good, engine_step(false)).ok());
  auto r = check(good);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->verdict(), ncert::certify::Verdict::kPass) << r->to_text(false);
  bool walk_passed = false;
  for (const auto& c : r->checks)
    walk_passed |= c.id == "projections/attn_q/walk" && c.verdict == ncert::certify::Verdict::kPass;
  EXPECT_TRUE(walk_passed) << r->to_text(false);

  const std::string bad = scratch("step-fault.h5");
  ASSERT_TRUE(export_step(bad, engine_step(true)).ok());
  r = check(bad);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict(), ncert::certify::Verdict::kFail);

  // The same path again is refused: no file is overwritten unless asked.
  EXPECT_EQ(export_step(good, engine_step(false)).code(), ncert::ErrorCode::kOutputExists);
}

TEST(CppWriterExample, ThePageShowsThisCode) {
  auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string src =
      read(std::filesystem::path(NCERT_SOURCE_DIR) / "tests/unit/certify/cpp_writer_example_test.cc");
  const std::string page = read(std::filesystem::path(NCERT_SOURCE_DIR) / "docs/cpp-writer.md");
  const std::string begin = "// ---- docs/cpp-writer.md example begins ----\n";
  const std::string end = "// ---- docs/cpp-writer.md example ends ----\n";
  const auto from = src.find(begin) + begin.size();
  const std::string code = src.substr(from, src.find(end, from) - from);
  ASSERT_FALSE(code.empty());
  EXPECT_NE(page.find("```cpp\n" + code + "```\n"), std::string::npos)
      << "docs/cpp-writer.md must show the example of this file verbatim";
}

}  // namespace
