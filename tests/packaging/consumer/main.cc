// An engine's export of one verify step, built against an installed ncert (find_package(ncert)).
// The "engine" is a plain loop: a bf16 projection Y = X * W^T with K = 64, N = 32, one f32
// accumulator walked over k ascending (k_walk = "seq"), bf16 output rounded to nearest even.
// Two requests of two rows each commit 2 and 1 rows, which the packed path gathers into four
// slots (the last one empty) and scatters back; the greedy logits of three decode steps follow.
//
// Before writing, the exporter asks the installed libraries what an engine team would: do the
// packing helper's host guards accept this call (ncert::packing), and does the kernel match
// ncert's emulation of the declared walk bit for bit (ncert::reference). After writing, the
// installed reader opens the file and reads y_packed back (ncert::dump_io).
//
// Usage: export_step OUT.h5 [--typed] [--plant-fault]. The step is written member by member
// through the raw DumpWriter, or with --typed as structs through the typed DumpBuilder
// (docs/cpp-writer.md), which validates each with the reader's rules; both must certify alike.
// --plant-fault flips the lowest bit of y_packed's first element after the scatter: `ncert
// check` must then fail the identity check.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "certify/io/dump_builder.h"
#include "certify/io/dump_reader.h"
#include "certify/io/dump_writer.h"
#include "packing/guards.h"
#include "reference/float_bits.h"
#include "reference/k_walk.h"

namespace {

using ncert::DType;
using ncert::Index;
using ncert::Status;

constexpr Index kRequests = 2, kBlockRows = 2, kCap = 2, kRows = kRequests * kBlockRows;
constexpr Index kK = 64, kN = 32, kSlots = 4;
constexpr Index kTokens = 3, kVocab = 100;
const std::vector<std::int32_t> kCommits = {2, 1};
const std::vector<std::int32_t> kSelector = {0, 1, 2, -1};  // request 0's rows 0-1, request 1's row 2
constexpr std::uint16_t kBefore = 0x3F80;                   // bf16 1.0: the output buffer's old contents

struct Step {
  std::vector<std::uint16_t> x, w;  // bf16 [kRows, kK], [kN, kK]
  std::vector<std::uint16_t> y_unpacked, y_packed, y_before, y_compact;
  std::vector<float> logits;  // [kTokens, kVocab]
  std::vector<std::int32_t> tokens;
};

/// The engine's kernel: acc += x_k * w_k in f32, k ascending (products of bf16 are exact in f32,
/// so a fused multiply-add would give the same bits).
float engine_dot(const std::uint16_t* x, const std::uint16_t* w) {
  float acc = 0.0f;
  for (Index k = 0; k < kK; ++k) acc += ncert::reference::bf16_to_f32(x[k]) * ncert::reference::bf16_to_f32(w[k]);
  return acc;
}

Step run_engine(bool plant_fault) {
  Step s;
  std::mt19937 rng(20240611);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Index i = 0; i < kRows * kK; ++i) s.x.push_back(ncert::reference::f32_to_bf16(normal(rng)));
  for (Index i = 0; i < kN * kK; ++i) s.w.push_back(ncert::reference::f32_to_bf16(normal(rng) / 8.0f));
  auto row = [&](Index m, std::uint16_t* out) {
    for (Index j = 0; j < kN; ++j) out[j] = ncert::reference::f32_to_bf16(engine_dot(&s.x[m * kK], &s.w[j * kK]));
  };
  s.y_unpacked.resize(kRows * kN);
  for (Index m = 0; m < kRows; ++m) row(m, &s.y_unpacked[m * kN]);
  s.y_compact.assign(kSlots * kN, 0);  // the empty slot's row stays zero (never compared)
  s.y_before.assign(kRows * kN, kBefore);
  s.y_packed = s.y_before;
  for (Index p = 0; p < kSlots; ++p) {
    if (kSelector[p] < 0) continue;
    row(kSelector[p], &s.y_compact[p * kN]);
    for (Index j = 0; j < kN; ++j) s.y_packed[kSelector[p] * kN + j] = s.y_compact[p * kN + j];
  }
  if (plant_fault) s.y_packed[0] ^= 1u;
  for (Index t = 0; t < kTokens; ++t) {
    Index best = 0;  // greedy; the lowest id wins a tie (tie_break = "lowest")
    for (Index v = 0; v < kVocab; ++v) {
      s.logits.push_back(2.0f * normal(rng));
      if (s.logits.back() > s.logits[t * kVocab + best]) best = v;
    }
    s.tokens.push_back(static_cast<std::int32_t>(best));
  }
  return s;
}

/// The packing helper's host guards (checks 1-12) on this call's plan.
Status guard_plan() {
  ncert::packing::PackPlan plan;
  plan.output = DType::kBf16;
  plan.walk = ncert::reference::parse_k_walk("seq").value();
  plan.k = kK;
  plan.n = kN;
  plan.in_stride = kK;
  plan.out_stride = kN;
  plan.requests = kRequests;
  plan.block_rows = kBlockRows;
  plan.cap = kCap;
  plan.slots = kSlots;
  plan.commit_counts = kCommits;
  plan.selector = kSelector;
  plan.compact_in_stride = kK;
  plan.compact_out_stride = kN;
  plan.segments.push_back({.name = "s0_bf16", .row_begin = 0, .row_end = kN, .values_cols = kK});
  return ncert::packing::validate_plan(plan);
}

/// Whether the engine's kernel is the walk it declares: ncert's emulation, element by element.
Status check_walk(const Step& s) {
  const ncert::reference::KWalk walk = ncert::reference::parse_k_walk("seq").value();
  std::vector<float> x(kK), w(kK);
  for (Index m = 0; m < kRows; ++m) {
    for (Index j = 0; j < kN; ++j) {
      for (Index k = 0; k < kK; ++k) {
        x[k] = ncert::reference::bf16_to_f32(s.x[m * kK + k]);
        w[k] = ncert::reference::bf16_to_f32(s.w[j * kK + k]);
      }
      const float emulated = ncert::reference::walk_dot(walk, x.data(), w.data(), kK);
      if (ncert::reference::f32_bits(emulated) != ncert::reference::f32_bits(engine_dot(&s.x[m * kK], &s.w[j * kK]))) {
        return Status(ncert::ErrorCode::kInternal,
                      "kernel and seq walk differ at row " + std::to_string(m) + " col " + std::to_string(j));
      }
    }
  }
  return Status();
}

Status write_step(const std::string& path, const Step& s) {
  NCERT_ASSIGN_OR_RETURN(ncert::certify::DumpWriter dw, ncert::certify::DumpWriter::create(path, true));
  NCERT_RETURN_IF_ERROR(dw.write_root({.engine = "packaging-consumer", .build = "installed ncert", .device = "cpu"}));
  const std::string p = "/projections/attn_q";
  NCERT_RETURN_IF_ERROR(dw.create_group(p));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "op", std::string("linear")));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "k", kK));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "n", kN));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "accumulator", std::string("f32-rn")));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "output_dtype", std::string("bf16")));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "epilogue", std::string("none")));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "k_walk", std::string("seq")));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "requests", kRequests));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "block_rows", kBlockRows));
  NCERT_RETURN_IF_ERROR(dw.write_attr(p, "cap", kCap));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(p + "/x", DType::kBf16, {kRows, kK}, s.x.data()));
  const std::string seg = p + "/weight/s0_bf16";
  NCERT_RETURN_IF_ERROR(dw.create_group(seg));
  NCERT_RETURN_IF_ERROR(dw.write_attr(seg, "format", std::string("bf16")));
  NCERT_RETURN_IF_ERROR(dw.write_attr(seg, "row_begin", Index{0}));
  NCERT_RETURN_IF_ERROR(dw.write_attr(seg, "row_end", kN));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(seg + "/values", DType::kBf16, {kN, kK}, s.w.data()));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(p + "/selector", DType::kI32, {kSlots}, kSelector.data()));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(p + "/commit_counts", DType::kI32, {kRequests}, kCommits.data()));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(p + "/y_unpacked", DType::kBf16, {kRows, kN}, s.y_unpacked.data()));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(p + "/y_packed", DType::kBf16, {kRows, kN}, s.y_packed.data()));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(p + "/y_compact", DType::kBf16, {kSlots, kN}, s.y_compact.data()));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(p + "/y_before", DType::kBf16, {kRows, kN}, s.y_before.data()));
  const std::string run = "/logits/greedy";
  NCERT_RETURN_IF_ERROR(dw.create_group(run));
  NCERT_RETURN_IF_ERROR(dw.write_attr(run, "vocab", kVocab));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(run + "/tokens", DType::kI32, {kTokens}, s.tokens.data()));
  NCERT_RETURN_IF_ERROR(dw.write_dataset(run + "/logits", DType::kF32, {kTokens, kVocab}, s.logits.data()));
  return dw.close();
}

/// The same step through the typed writer: one struct per object, refused before writing if it
/// broke the format.
Status write_step_typed(const std::string& path, const Step& s) {
  using namespace ncert::certify;
  Projection q{.name = "attn_q",
               .k = kK,
               .n = kN,
               .accumulator = "f32-rn",
               .output_dtype = DType::kBf16,
               .epilogue = ncert::reference::Epilogue::kNone,
               .k_walk = "seq",
               .requests = kRequests,
               .block_rows = kBlockRows,
               .cap = kCap};
  q.x = DumpArray(DType::kBf16, s.x, {kRows, kK});
  q.weight.push_back({.name = "s0_bf16",
                      .format = ncert::reference::WeightFormat::kBf16,
                      .row_begin = 0,
                      .row_end = kN,
                      .values = DumpArray(DType::kBf16, s.w, {kN, kK})});
  q.selector = DumpArray(DType::kI32, kSelector, {kSlots});
  q.commit_counts = DumpArray(DType::kI32, kCommits, {kRequests});
  q.y_unpacked = DumpArray(DType::kBf16, s.y_unpacked, {kRows, kN});
  q.y_packed = DumpArray(DType::kBf16, s.y_packed, {kRows, kN});
  q.y_compact = DumpArray(DType::kBf16, s.y_compact, {kSlots, kN});
  q.y_before = DumpArray(DType::kBf16, s.y_before, {kRows, kN});
  NCERT_ASSIGN_OR_RETURN(
      DumpBuilder dump,
      DumpBuilder::create(
          path, {.engine = "packaging-consumer", .build = "installed ncert", .device = "cpu", .overwrite = true}));
  NCERT_RETURN_IF_ERROR(dump.add_projection(q));
  NCERT_RETURN_IF_ERROR(dump.add_logits_run({.name = "greedy",
                                             .vocab = kVocab,
                                             .tokens = DumpArray(DType::kI32, s.tokens, {kTokens}),
                                             .logits = DumpArray(DType::kF32, s.logits, {kTokens, kVocab})}));
  if (dump.schema_version() != 1) {
    return Status(ncert::ErrorCode::kInternal, "a bf16 step needs version 1, not " + dump.version_2_reason());
  }
  return dump.close();
}

/// Opens the file with the installed reader and compares y_packed with what was written.
Status read_back(const std::string& path, const Step& s, std::string* hash) {
  NCERT_ASSIGN_OR_RETURN(const ncert::certify::DumpReader reader, ncert::certify::DumpReader::open(path));
  if (reader.model().projections.size() != 1) {
    return Status(ncert::ErrorCode::kInternal, "expected 1 projection in " + path);
  }
  NCERT_ASSIGN_OR_RETURN(const std::vector<std::uint16_t> y, reader.read_u16("/projections/attn_q/y_packed"));
  if (y != s.y_packed) return Status(ncert::ErrorCode::kInternal, "y_packed reads back differently");
  NCERT_ASSIGN_OR_RETURN(*hash, reader.dataset_hash("/projections/attn_q/y_packed"));
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  bool typed = false, plant_fault = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--typed") {
      typed = true;
    } else if (flag == "--plant-fault") {
      plant_fault = true;
    } else {
      argc = 0;  // usage
    }
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: export_step OUT.h5 [--typed] [--plant-fault]\n");
    return 2;
  }
  const std::string path = argv[1];
  const Step step = run_engine(plant_fault);
  std::string hash;
  const auto failed = [](const Status& st) {
    if (!st.ok()) std::fprintf(stderr, "export_step: %s\n", st.to_string().c_str());
    return !st.ok();
  };
  if (failed(guard_plan()) || failed(check_walk(step)) ||
      failed(typed ? write_step_typed(path, step) : write_step(path, step)) || failed(read_back(path, step, &hash))) {
    return 1;
  }
  std::printf("wrote %s%s: 1 projection, 1 logits run; y_packed xxh3-128 %s\n", path.c_str(),
              typed ? " (typed writer)" : "", hash.c_str());
  return 0;
}
