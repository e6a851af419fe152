// Fixture dumps through `ncert check`: good dumps PASS (including every walk, accumulator,
// dequant mode and storage form the generator has), each planted fault FAILs on the check
// meant to catch it, geometry violations name their guard, vacuous projections fail unless
// allowed, and reports are identical at 1 and 2 threads.
#include "certify/commands/check.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "certify/io/dump_reader.h"
#include "fixtures/generator.h"
#include "tests/common/fixture_check.h"
#include "tests/common/format_v2_spec.h"
#include "tests/common/h5_poke.h"
#include "tests/common/report_checks.h"
#include "tests/common/report_json.h"
#include "tests/common/test_paths.h"
#include "tests/common/zero_point_spec.h"

namespace ncert::certify {
namespace {

using fixtures::Fault;
using ncert::testing::check_dump;
using ncert::testing::evidence_of;
using ncert::testing::failing_ids;
using ncert::testing::find_check;
using ncert::testing::scratch_file;
using ncert::testing::write_fixture;

// HDF5 stamps object headers with modification times (one-second resolution) unless told not
// to; the writer turns that off, so the same content gives the same bytes and whole-file hashes
// identify content.
TEST(Writer, TheSameDumpWrittenTwiceIsByteIdentical) {
  const std::string a = write_fixture(fixtures::preset_tiny(), "same-a.h5");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string b = write_fixture(fixtures::preset_tiny(), "same-b.h5");
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  const std::string ba((std::istreambuf_iterator<char>(fa)), {}), bb((std::istreambuf_iterator<char>(fb)), {});
  ASSERT_GT(ba.size(), 0u);
  EXPECT_TRUE(ba == bb) << "the two files differ";
}

TEST(Check, TinyPresetPassesEveryCheck) {
  const Report r = check_dump(write_fixture(fixtures::preset_tiny(), "tiny.h5"));
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
  for (const std::string kind : {"geometry", "identity", "bound", "walk", "bias", "untouched", "vacuity"}) {
    ASSERT_NE(find_check(r, "projections/attn_qkv/" + kind), nullptr) << kind;
    EXPECT_EQ(find_check(r, "projections/attn_qkv/" + kind)->verdict, Verdict::kPass) << kind;
  }
  // Where no walk is declared the walk check is a SKIP that says so; an f32 output has no
  // output rounding, so no bias check at all.
  ASSERT_NE(find_check(r, "projections/mlp_up/walk"), nullptr);
  EXPECT_EQ(find_check(r, "projections/mlp_up/walk")->verdict, Verdict::kSkip);
  // A SKIP carries no evidence: its reason naming what would enable the check is the contract.
  EXPECT_NE(find_check(r, "projections/mlp_up/walk")->reason.find("k_walk"), std::string::npos);
  EXPECT_EQ(find_check(r, "projections/mlp_up/bias"), nullptr);
  EXPECT_EQ(r.exit_code(), 0);
}

TEST(Check, ADecodeBatchOfMoreRequestsThanThePackingHelperTakesPasses) {
  // 16 requests of one row each, every one committed: the format bounds R by its shape limit
  // alone (docs/dump-format.md §3.2); R <= 8 is the packing helper's own limit, and an engine's
  // decode batch of 16 failed geometry with "requests R = 16 outside [1, 8]".
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  fixtures::ProjectionSpec& q = spec.projections.front();
  q.requests = 16;
  q.block_rows = 1;
  q.cap = 1;
  q.slots = 16;
  q.commits.clear();
  const Report r = check_dump(write_fixture(spec, "decode16.h5"));
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
  const CheckResult* g = find_check(r, "projections/" + q.name + "/geometry");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::kPass) << g->reason;
  EXPECT_NE(g->reason.find("16 requests x 1 rows"), std::string::npos) << g->reason;
  // The per-request guards ran (no SKIP naming missing geometry).
  EXPECT_EQ(find_check(r, "projections/" + q.name + "/request-guards"), nullptr) << r.to_text(true);
}

TEST(Check, EveryStorageFormPasses) {
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  spec.storage.chunk_rows = 3;
  spec.storage.deflate = 4;
  spec.storage.shuffle = true;
  spec.storage.fletcher32 = true;
  spec.storage.bf16_form = Bf16Form::kFloat16;
  const Report r = check_dump(write_fixture(spec, "tiny-chunked.h5"));
  EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
}

/// Projections declaring the staged walks of docs/dump-format.md §3.4, the kernels they stand
/// for: a SIMD GEMV with 8 lanes and a halving horizontal sum, an FP8 tensor-core GEMM promoting
/// every 32 terms from a 10-bit truncating accumulator, a split-K GEMM of 4 parts each with 4
/// lanes. The engine computes each with its own arithmetic (fixtures/detail/engine.cc).
std::vector<fixtures::ProjectionSpec> staged_walk_projections() {
  std::vector<fixtures::ProjectionSpec> out;
  for (const auto& [name, walk] :
       std::vector<std::pair<std::string, std::string>>{{"gemv_lanes", "lanes:8:halving:fma"},
                                                        {"fp8_promote", "promote:32:10:rz"},
                                                        {"gemm_splitk", "splitk:4:seq/lanes:4:pairs"}}) {
    fixtures::ProjectionSpec p;
    p.name = name;
    p.k = 256;
    p.n = 24;
    p.k_walk = walk;
    p.seed = 7;
    out.push_back(p);
  }
  return out;
}

/// Whether the residual tests' model holds for a projection (docs/error-bounds.md §6c): a
/// round-to-nearest accumulator (and promoted stage) and a round-to-nearest output.
bool residual_model_applies(const fixtures::ProjectionSpec& ps) {
  const auto acc = reference::parse_accumulator(ps.accumulator);
  if (!acc.ok() || !acc->round_to_nearest) return false;
  if (!ps.k_walk.empty()) {
    const auto w = reference::parse_k_walk(ps.k_walk);
    if (w.ok() && w->inner == reference::KWalkInner::kPromote &&
        w->promote_rounding != reference::PromoteRounding::kNearestEven) {
      return false;
    }
  }
  return ps.output_rounding.empty() || ps.output_rounding == "rne";
}

// The fault catalogue (fixtures/faults.cc), held to its own table.
TEST(Check, EachPlantedFaultFailsExactlyTheChecksItsTableRowNames) {
  // Each planted fault fails exactly the checks its table row names: the check meant to catch
  // it, and those it also breaks where the projection has them (a declared walk, a bf16 output).
  // The tiny preset has no AF4 zero-point segment: a zero-point projection (f32 scales and
  // dequantization, sub-mul, a declared walk) is added for the zero-point faults, and must pass
  // untouched under every other fault.
  // The tiny preset, plus a zero-point projection for the zero-point faults and one projection
  // per staged walk for the walk faults (the other faults land in the preset's own projections,
  // which come first).
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  spec.projections.push_back(ncert::testing::zero_point_projection({}));
  for (const fixtures::ProjectionSpec& p : staged_walk_projections()) spec.projections.push_back(p);
  // Dump format v2: an f16 projection (f16-truncation-both) and quantized activations
  // (x-scale-wrong); a v2 feature makes the whole file declare version 2.
  spec.projections.push_back(ncert::testing::f16_projection());
  spec.projections.push_back(ncert::testing::x_quant_projection({}));
  for (Fault f : fixtures::all_faults()) {
    SCOPED_TRACE(std::string(fixtures::fault_name(f)));
    const std::string path = write_fixture(spec, std::string(fixtures::fault_name(f)) + ".h5", f);
    const Report r = check_dump(path);
    EXPECT_EQ(r.verdict(), Verdict::kFail);
    EXPECT_EQ(r.exit_code(), 1);
    auto target = fixtures::fault_target(spec, {f, ""});
    ASSERT_TRUE(target.ok());
    const fixtures::ProjectionSpec& ps = spec.projections[*target];
    std::set<std::string> expected = {"projections/" + ps.name + "/" +
                                      std::string(check_kind_name(fixtures::fault_caught_by(f)))};
    for (CheckKind k : fixtures::fault_also_fails(f)) {
      const bool applies = (k != CheckKind::kWalk || !ps.k_walk.empty()) &&
                           (k != CheckKind::kBias || ps.output == DType::kBf16 || ps.output == DType::kF16) &&
                           ((k != CheckKind::kSignature && k != CheckKind::kVariance) || residual_model_applies(ps));
      if (applies) expected.insert("projections/" + ps.name + "/" + std::string(check_kind_name(k)));
    }
    EXPECT_EQ(failing_ids(r), expected) << r.to_text(true);
  }
}

TEST(Check, FaultDetailsNameRowColumnSlotAndValues) {
  const Report wrong =
      check_dump(write_fixture(fixtures::preset_tiny(), "wrong.h5", Fault::kWrongRowScattered, "attn_qkv"));
  const CheckResult* id = find_check(wrong, "projections/attn_qkv/identity");
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->verdict, Verdict::kFail);
  ASSERT_TRUE(id->first_failure.has_value());
  EXPECT_EQ(id->first_failure->row, 0);
  EXPECT_EQ(id->first_failure->col, 0);
  EXPECT_EQ(id->first_failure->slot, 0);
  const auto* ie = evidence_of<IdentityEvidence>(id);
  ASSERT_NE(ie, nullptr);
  EXPECT_GT(ie->differ, 0);
  // The two engine values exist only as the reason prints them (bits in hex): text is the contract.
  EXPECT_NE(id->reason.find("0x"), std::string::npos);
  const Report nan = check_dump(write_fixture(fixtures::preset_tiny(), "nan.h5", Fault::kNanOutput, "attn_qkv"));
  const CheckResult* b = find_check(nan, "projections/attn_qkv/bound");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->verdict, Verdict::kFail);
  const auto* be = evidence_of<BoundEvidence>(b);
  ASSERT_NE(be, nullptr);
  EXPECT_GT(be->outside, 0);
  ASSERT_TRUE(be->first.has_value());
  EXPECT_TRUE(std::isnan(be->first->element.value));
  EXPECT_LE(be->first->element.accept.lo, be->first->element.accept.hi);
  ASSERT_TRUE(b->first_failure.has_value());
  EXPECT_EQ(b->first_failure->object, "y_unpacked");
  EXPECT_EQ(b->first_failure->row, be->first->element.row);
  EXPECT_EQ(b->first_failure->col, be->first->element.col);
  EXPECT_EQ(stats(*b)["first"]["output"], "y_unpacked");
}

/// The identity failure's slot mappings, in slot order.
std::vector<SlotMapping> mappings_of(const Report& r, const std::string& id) {
  const CheckResult* c = find_check(r, id);
  if (c == nullptr || c->verdict != Verdict::kFail) return {};
  const auto* e = evidence_of<IdentityEvidence>(c);
  return e == nullptr ? std::vector<SlotMapping>{} : e->mappings;
}

TEST(Check, IdentityFailureNamesTheSlotMappingThatExplainsIt) {
  const std::string id = "projections/attn_qkv/identity";
  // Two compact slots hold each other's rows: each packed row is the other's unpacked row.
  const Report swapped =
      check_dump(write_fixture(fixtures::preset_tiny(), "swap.h5", Fault::kSlotsSwapped, "attn_qkv"));
  const std::vector<SlotMapping> s = mappings_of(swapped, id);
  ASSERT_EQ(s.size(), 2u) << find_check(swapped, id)->reason;
  EXPECT_EQ(s[0].kind, SlotMisroute::kGathered);
  EXPECT_EQ(s[1].kind, SlotMisroute::kGathered);
  EXPECT_EQ(s[0].actual, s[1].row);
  EXPECT_EQ(s[1].actual, s[0].row);
  EXPECT_NE(find_check(swapped, id)
                ->reason.find("slot " + std::to_string(s[0].slot) + " holds row " + std::to_string(s[1].row) +
                              ", not row " + std::to_string(s[0].row)),
            std::string::npos)
      << find_check(swapped, id)->reason;
  EXPECT_NE(find_check(swapped, id)->reason.find("2 of 2 differing rows explained"), std::string::npos);
  // The misrouted rows are not then blamed on a scale or an accumulator: the residual tests
  // defer to identity rather than fail with causes of their own, and bound names no location.
  for (const char* kind : {"signature", "variance"}) {
    const CheckResult* c = find_check(swapped, std::string("projections/attn_qkv/") + kind);
    if (c == nullptr) continue;
    EXPECT_FALSE(c->failed()) << kind << ": " << c->reason;
  }
  if (const CheckResult* b = find_check(swapped, "projections/attn_qkv/bound")) {
    EXPECT_EQ(b->reason.find("likely location"), std::string::npos) << b->reason;
  }

  // Planted with HDF5 alone: the gather took an unselected row into one slot (compact and packed
  // agree with each other, both hold that row's unpacked values).
  const std::string gather = write_fixture(fixtures::preset_tiny(), "gather.h5");
  const std::string group = "/projections/attn_qkv/";
  const std::vector<std::int32_t> selector = ncert::testing::read_i32(gather, group + "selector");
  std::set<std::int32_t> selected;
  std::int64_t slot = -1, unselected = -1;
  for (std::size_t i = 0; i < selector.size(); ++i) {
    if (selector[i] >= 0 && slot < 0) slot = static_cast<std::int64_t>(i);
    if (selector[i] >= 0) selected.insert(selector[i]);
  }
  for (std::int32_t row = 0; unselected < 0 && row < 1000; ++row) {
    if (!selected.contains(row)) unselected = row;
  }
  ASSERT_GE(slot, 0);
  ASSERT_GE(unselected, 0);
  const std::int64_t row = selector[static_cast<std::size_t>(slot)];
  ncert::testing::copy_row(gather, group + "y_unpacked", unselected, group + "y_packed", row);
  ncert::testing::copy_row(gather, group + "y_unpacked", unselected, group + "y_compact", slot);
  const Report g = check_dump(gather);
  const std::vector<SlotMapping> gm = mappings_of(g, id);
  ASSERT_EQ(gm.size(), 1u) << find_check(g, id)->reason;
  EXPECT_EQ(gm[0], (SlotMapping{SlotMisroute::kGathered, slot, row, unselected, 0}));

  // The scatter wrote one slot one row down: that row received the other slot, and the slot's
  // own row was never written.
  const Report scattered =
      check_dump(write_fixture(fixtures::preset_tiny(), "scatter.h5", Fault::kWrongRowScattered, "attn_qkv"));
  const std::vector<SlotMapping> sm = mappings_of(scattered, id);
  ASSERT_FALSE(sm.empty()) << find_check(scattered, id)->reason;
  EXPECT_TRUE(std::any_of(sm.begin(), sm.end(), [](const SlotMapping& m) {
    return m.kind == SlotMisroute::kUnwritten;
  })) << find_check(scattered, id)->reason;

  // Values no row has: identity fails and says no mapping explains it.
  const Report stale =
      check_dump(write_fixture(fixtures::preset_tiny(), "stale.h5", Fault::kStaleCompactSlot, "attn_qkv"));
  const CheckResult* st = find_check(stale, id);
  ASSERT_EQ(st->verdict, Verdict::kFail);
  EXPECT_EQ(evidence_of<IdentityEvidence>(st)->rows_explained, 0);
  EXPECT_NE(st->reason.find("not a misrouted row"), std::string::npos) << st->reason;
}

TEST(Check, APackedRowNeverWrittenIsNotBlamedOnItsActivationsByWalk) {
  // attn_qkv declares its walk; one selected row of y_packed still holds y_before (the scatter
  // never wrote it). identity names the mapping; walk, whose values differ in that row of the
  // packed outputs alone, had read "all in row 0: that row's activations are not those the
  // kernel used" (a review's), where y_unpacked's same row equals the walk.
  const std::string path = write_fixture(fixtures::preset_tiny(), "unwritten.h5");
  const std::string group = "/projections/attn_qkv/";
  const std::vector<std::int32_t> selector = ncert::testing::read_i32(path, group + "selector");
  std::int32_t row = -1;
  for (const std::int32_t r : selector) {
    if (r >= 0 && row < 0) row = r;
  }
  ASSERT_GE(row, 0);
  ncert::testing::copy_row(path, group + "y_before", row, group + "y_packed", row);
  const Report r = check_dump(path);
  const std::vector<SlotMapping> m = mappings_of(r, "projections/attn_qkv/identity");
  ASSERT_EQ(m.size(), 1u) << r.to_text(true);
  EXPECT_EQ(m[0].kind, SlotMisroute::kUnwritten);
  const CheckResult* walk = find_check(r, "projections/attn_qkv/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kFail);
  EXPECT_NE(walk->reason.find("in the packed outputs alone (y_unpacked equals the walk): the packed path's values"),
            std::string::npos)
      << walk->reason;
  EXPECT_EQ(walk->reason.find("activations"), std::string::npos) << walk->reason;
}

TEST(Check, OneWrongElementIsNotBlamedOnItsColumnByWalk) {
  // One element one bf16 step off in each output that holds it (y_unpacked, y_packed and its
  // slot of y_compact): three values, one element. walk had read "all in column 7: that
  // column's weights ... are not those the kernel used" (a review's).
  const std::string path = write_fixture(fixtures::preset_tiny(), "one-element.h5");
  const std::string group = "/projections/attn_qkv/";
  const std::vector<std::int32_t> selector = ncert::testing::read_i32(path, group + "selector");
  std::int64_t row = -1, slot = -1;
  for (std::size_t s = 0; s < selector.size() && row < 0; ++s) {
    if (selector[s] >= 0) {
      row = selector[s];
      slot = static_cast<std::int64_t>(s);
    }
  }
  ASSERT_GE(row, 0);
  const std::int64_t col = 7;
  ncert::testing::step_bits16(path, group + "y_unpacked", row, col, 1);
  ncert::testing::step_bits16(path, group + "y_packed", row, col, 1);
  ncert::testing::step_bits16(path, group + "y_compact", slot, col, 1);
  const Report r = check_dump(path);
  const CheckResult* walk = find_check(r, "projections/attn_qkv/walk");
  ASSERT_NE(walk, nullptr);
  EXPECT_EQ(walk->verdict, Verdict::kFail);
  EXPECT_NE(walk->reason.find("3 of "), std::string::npos) << walk->reason;
  EXPECT_NE(walk->reason.find("all at one element (row " + std::to_string(row) +
                              ", column 7, in each output that "
                              "holds it)"),
            std::string::npos)
      << walk->reason;
  EXPECT_EQ(walk->reason.find("weights"), std::string::npos) << walk->reason;
}

TEST(Check, ADtypeTagOnADatasetThatCannotHoldThatTypeIsIgnoredAsEver) {
  // Version 1 ignored a dtype attribute on other storage than the raw 16- and 8-bit patterns;
  // so does version 2 (a native float16 dataset tagged "bf16" is refused: tests/cli).
  const std::string path = write_fixture(fixtures::preset_tiny(), "tag-ignored.h5");
  for (const char* tag : {"float32", "i32", "bf16"}) {
    ncert::testing::poke_attr_string(path, "/projections/attn_qkv/selector", "dtype", tag);
    EXPECT_FALSE(check_dump(path).error.has_value()) << tag;
  }
}

TEST(Check, ALogitsRunWithoutTheLmHeadRoleIsNoted) {
  // Only an lm_head names its run (dump-format §3.5); elsewhere the attribute was dropped without
  // a word, even naming a run that does not exist (an outside writer's).
  const std::string path = write_fixture(fixtures::preset_tiny(), "logits-run-no-role.h5");
  ncert::testing::poke_attr_string(path, "/projections/attn_qkv", "logits_run", "nope");
  auto r = DumpReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  int noted = 0;
  for (const Finding& f : r->model().findings) {
    noted += f.severity == Severity::kNote && f.path == "/projections/attn_qkv" &&
             f.message == "logits_run = \"nope\" without role = \"lm_head\"; ignored (an lm_head names its run)";
  }
  EXPECT_EQ(noted, 1);
}

TEST(Check, AScatterFromTheWrongSlotIsNamedWithoutYUnpacked) {
  // y_unpacked is optional (dump-format §3.1): the scatter's view alone explains a row scattered
  // from another slot. Without it identity read "not a misrouted row" (an outside exporter's).
  const std::string path =
      write_fixture(fixtures::preset_tiny(), "scatter-no-unpacked.h5", Fault::kWrongRowScattered, "attn_qkv");
  ncert::testing::remove_link(path, "/projections/attn_qkv/y_unpacked");
  const Report r = check_dump(path);
  const CheckResult* c = find_check(r, "projections/attn_qkv/identity");
  ASSERT_NE(c, nullptr) << r.to_text(true);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  const std::vector<SlotMapping> m = mappings_of(r, "projections/attn_qkv/identity");
  ASSERT_FALSE(m.empty()) << c->reason;
  // Slot 0 went into the next row, an unselected one: its own row still holds y_before.
  EXPECT_EQ(m[0].kind, SlotMisroute::kUnwritten) << c->reason;
  EXPECT_NE(c->reason.find("was never written: it still holds y_before"), std::string::npos) << c->reason;
  EXPECT_EQ(c->reason.find("not a misrouted row"), std::string::npos) << c->reason;
  // A slot scattered into another selected row: that row received it.
  const std::string swapped = write_fixture(fixtures::preset_tiny(), "scatter-swap-no-unpacked.h5");
  const std::vector<std::int32_t> selector = ncert::testing::read_i32(swapped, "/projections/attn_qkv/selector");
  std::vector<std::int64_t> used;
  for (std::size_t slot = 0; slot < selector.size(); ++slot) {
    if (selector[slot] >= 0) used.push_back(static_cast<std::int64_t>(slot));
  }
  ASSERT_GE(used.size(), 2u);
  const std::int64_t row_a = selector[static_cast<std::size_t>(used[0])];
  const std::int64_t row_b = selector[static_cast<std::size_t>(used[1])];
  ncert::testing::copy_row(swapped, "/projections/attn_qkv/y_compact", used[1], "/projections/attn_qkv/y_packed",
                           row_a);
  ncert::testing::remove_link(swapped, "/projections/attn_qkv/y_unpacked");
  const Report rs = check_dump(swapped);
  const CheckResult* cs = find_check(rs, "projections/attn_qkv/identity");
  ASSERT_NE(cs, nullptr);
  EXPECT_NE(cs->reason.find("row " + std::to_string(row_a) + " received slot " + std::to_string(used[1])),
            std::string::npos)
      << cs->reason << " (row b " << row_b << ")";
}

TEST(Check, AWrongGroupSizeIsNamedFromTheStoredScales) {
  // attn_qkv's AF4 segment has groups of 32 over K = 64 (two scales a row); declaring 16 is
  // refused by guard 309, and the failure says which group size the stored scales fit.
  const std::string path = write_fixture(fixtures::preset_tiny(), "group16.h5");
  ncert::testing::poke_attr_i64(path, "/projections/attn_qkv/weight/s0_af4", "group_size", 16);
  const Report r = check_dump(path);
  const CheckResult* g = find_check(r, "projections/attn_qkv/geometry");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::kFail);
  EXPECT_NE(g->reason.find("guard-af4-geometry (309)"), std::string::npos) << g->reason;
  EXPECT_NE(g->reason.find("s0_af4's stored scales fit group_size = 32 (K 64 / 2 columns), not the declared 16"),
            std::string::npos)
      << g->reason;
}

TEST(Check, WalkDeclaringProjectionsAlsoCatchPackedPathFaultsBitwise) {
  // attn_qkv declares split:4:fma: truncation and a dropped tile there fail the walk too. With
  // the output rounding declared rne (the default) the accepted interval is rounded to nearest
  // as well, so the truncated values fall outside it.
  const Report r =
      check_dump(write_fixture(fixtures::preset_tiny(), "trunc.h5", Fault::kBf16TruncationPacked, "attn_qkv"));
  EXPECT_EQ(find_check(r, "projections/attn_qkv/walk")->verdict, Verdict::kFail);
  EXPECT_EQ(find_check(r, "projections/attn_qkv/bound")->verdict, Verdict::kFail);
}

TEST(Check, OutputRoundingAnyWidensTheIntervalOutward) {
  // output_rounding = any pins no rounding: the interval is directed, truncation lies inside it,
  // and no walk has a single stored value.
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  spec.projections[0].output_rounding = "any";
  const Report r = check_dump(write_fixture(spec, "trunc-any.h5", Fault::kBf16TruncationPacked, "attn_qkv"));
  EXPECT_EQ(find_check(r, "projections/attn_qkv/bound")->verdict, Verdict::kPass)
      << find_check(r, "projections/attn_qkv/bound")->reason;
  EXPECT_EQ(find_check(r, "projections/attn_qkv/identity")->verdict, Verdict::kFail);
  EXPECT_EQ(find_check(r, "projections/attn_qkv/walk")->verdict, Verdict::kSkip);
  EXPECT_NE(find_check(r, "projections/attn_qkv/walk")->reason.find("output_rounding = any"), std::string::npos);
}

fixtures::DumpSpec small(const std::string& accumulator, const std::string& walk, const std::string& order) {
  fixtures::DumpSpec d;
  fixtures::ProjectionSpec p;
  p.name.assign(1, 'p');  // assigned, not from a literal: GCC 12's -Wrestrict misreads that here
  p.k = 256;
  p.n = 24;
  p.out_pad = 8;
  fixtures::SegmentSpec a;
  a.format = reference::WeightFormat::kAf4;
  a.rows = 8;
  a.af4.variant = reference::Af4Variant::kAffine;
  a.af4.packing = reference::Af4Packing::kU8Msb;
  a.af4.group_size = 32;
  a.af4.dequant = reference::Dequant::kFolded;
  fixtures::SegmentSpec b;
  b.format = reference::WeightFormat::kF32;
  b.rows = 16;
  p.segments = {a, b};
  p.accumulator = accumulator;
  p.k_walk = walk;
  p.engine_order = order;
  if (!walk.empty()) p.segments[0].af4.dequant = reference::Dequant::kExact;
  d.projections.push_back(p);
  return d;
}

TEST(Check, EveryEngineOrderAndAccumulatorPasses) {
  struct Case {
    std::string acc, walk, order;
  };
  const std::vector<Case> cases = {{"f32-rn", "seq", ""},
                                   {"f32-rn", "seq-fma", ""},
                                   {"f32-rn", "split:8", ""},
                                   {"f32-rn", "split:16:fma", ""},
                                   {"f32-rn", "", "pairwise"},
                                   {"f32-rz", "", "seq-rz"},
                                   {"matrix-unit", "", "block8-trunc"},
                                   {"u=1e-7", "", "split:2"},
                                   {"f32-rn", "lanes:8:halving", ""},
                                   {"f32-rn", "lanes:6:seq:fma", ""},
                                   {"f32-rn", "lanes:512:pairs", ""},
                                   {"f32-rn", "splitk:4:pairs/seq-fma", ""},
                                   {"f32-rn", "splitk:8:halving/lanes:4:halving:fma", ""},
                                   {"f32-rn", "splitk:2:seq/promote:64:12:rne", ""},
                                   {"f32-rn", "promote:128:14:rz", ""},
                                   {"f32-rz", "promote:32:8:rz:fma", ""},
                                   {"matrix-unit", "promote:16:11:rne:fma", ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.acc + "/" + c.walk + "/" + c.order);
    const Report r = check_dump(write_fixture(small(c.acc, c.walk, c.order), "order.h5"));
    EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
  }
}

// Every walk but promote: adds in round-to-nearest f32; declared beside an accumulator that
// allows other roundings it is a SKIP that says so (a review's round-toward-zero kernel, declared
// f32-rz with its lanes, failed 2,271 of 2,304 values with no word of why). A promoted walk
// states its own rounding and stays checked.
TEST(Check, AWalkBesideAnAccumulatorThatIsNotRoundToNearestIsSkippedSayingWhy) {
  for (const std::string acc : {"f32-rz", "matrix-unit", "u=1e-7"}) {
    SCOPED_TRACE(acc);
    const Report r = check_dump(write_fixture(small(acc, "lanes:8:halving", ""), "walk-rz.h5"));
    EXPECT_EQ(r.verdict(), Verdict::kPass) << r.to_text(true);
    const CheckResult* walk = find_check(r, "projections/p/walk");
    ASSERT_NE(walk, nullptr);
    EXPECT_EQ(walk->verdict, Verdict::kSkip);
    EXPECT_NE(walk->reason.find("rounds its f32 operations to nearest, but accumulator = " + acc), std::string::npos)
        << walk->reason;
  }
  const Report rn = check_dump(write_fixture(small("u=5.9604644775390625e-8", "lanes:8:halving", ""), "walk-u.h5"));
  EXPECT_EQ(find_check(rn, "projections/p/walk")->verdict, Verdict::kPass) << rn.to_text(true);
  const Report promoted = check_dump(write_fixture(small("f32-rz", "promote:32:8:rz:fma", ""), "walk-promote.h5"));
  EXPECT_EQ(find_check(promoted, "projections/p/walk")->verdict, Verdict::kPass) << promoted.to_text(true);
  // dump-format §3.4: a one-accumulator kernel rounding every operation toward zero (the
  // fixture's independent seq-rz engine, K 256) is promote:<K>:24:rz, bit for bit.
  fixtures::DumpSpec seq_rz = small("f32-rz", "", "seq-rz");
  seq_rz.projections[0].segments[0].af4.dequant = reference::Dequant::kExact;
  const std::string rz_path = write_fixture(seq_rz, "walk-seq-rz.h5");
  ncert::testing::poke_attr_string(rz_path, "/projections/p", "k_walk", "promote:256:24:rz");
  ncert::testing::poke_attr_i64(rz_path, "/", "ncert_schema_version", 2);
  const Report rz = check_dump(rz_path);
  const CheckResult* rz_walk = find_check(rz, "projections/p/walk");
  EXPECT_EQ(rz_walk->verdict, Verdict::kPass) << rz.to_text(true);
  EXPECT_GT(std::get<WalkEvidence>(rz_walk->evidence).compared, 0);
}

TEST(Check, StagedWalksAreEmulatedAndTheirFaultsFailTheWalk) {
  for (const fixtures::ProjectionSpec& p : staged_walk_projections()) {
    SCOPED_TRACE(p.k_walk);
    fixtures::DumpSpec d;
    d.projections = {p};
    const std::string id = "projections/" + p.name + "/";
    const Report good = check_dump(write_fixture(d, p.name + ".h5"));
    EXPECT_EQ(good.verdict(), Verdict::kPass) << good.to_text(true);
    const CheckResult* walk = find_check(good, id + "walk");
    ASSERT_NE(walk, nullptr);
    EXPECT_EQ(walk->verdict, Verdict::kPass);
    const auto* we = evidence_of<WalkEvidence>(walk);
    ASSERT_NE(we, nullptr);
    EXPECT_EQ(we->k_walk, p.k_walk);
    EXPECT_GT(we->compared, 0);
    EXPECT_EQ(we->mismatches, 0);
    EXPECT_EQ(find_check(good, id + "bound")->verdict, Verdict::kPass);

    const Fault f = p.name == "gemv_lanes"    ? Fault::kLaneDropped
                    : p.name == "fp8_promote" ? Fault::kPromotionDoubled
                                              : Fault::kSplitKCombineReversed;
    const Report bad = check_dump(write_fixture(d, p.name + "-fault.h5", f, p.name));
    const CheckResult* bw = find_check(bad, id + "walk");
    ASSERT_NE(bw, nullptr);
    EXPECT_EQ(bw->verdict, Verdict::kFail);
    const auto* be = evidence_of<WalkEvidence>(bw);
    ASSERT_NE(be, nullptr);
    EXPECT_GT(be->mismatches, 0);
    EXPECT_NE(bw->reason.find("emulated " + p.k_walk + " walk"), std::string::npos) << bw->reason;
    // A fault of the kernel's order moves values in many columns and rows: the reason gives
    // their span, and blames no single column's weights.
    EXPECT_NE(bw->reason.find(" in rows "), std::string::npos) << bw->reason;
    EXPECT_EQ(bw->reason.find("all in column"), std::string::npos) << bw->reason;
    for (const WalkEvidence::Output& o : be->outputs) {
      if (o.mismatches > 1) {
        EXPECT_LT(o.col_min, o.col_max) << o.output;
      }
    }
    // Both paths carry the fault: identity holds.
    EXPECT_EQ(find_check(bad, id + "identity")->verdict, Verdict::kPass);
  }
}

TEST(Check, APromotedKernelIsBoundedByItsDeclaredPrecision) {
  // The same engine (blocks of 128 at 14 bits, truncating) with and without its declaration:
  // declared, the bound charges the 14-bit accumulator and the walk holds it bit for bit;
  // undeclared, the f32 bound gamma_K(2^-24) S refuses its values.
  const Report declared = check_dump(write_fixture(small("f32-rn", "promote:128:14:rz", ""), "promote.h5"));
  EXPECT_EQ(declared.verdict(), Verdict::kPass) << declared.to_text(true);
  EXPECT_EQ(find_check(declared, "projections/p/walk")->verdict, Verdict::kPass);
  fixtures::DumpSpec undeclared = small("f32-rn", "", "promote:128:14:rz");
  undeclared.projections[0].segments[0].af4.dequant = reference::Dequant::kExact;  // as declared above
  const Report r = check_dump(write_fixture(undeclared, "promote-undeclared.h5"));
  const CheckResult* b = find_check(r, "projections/p/bound");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->verdict, Verdict::kFail);
  const auto* be = evidence_of<BoundEvidence>(b);
  ASSERT_NE(be, nullptr);
  EXPECT_GT(be->outside, 0);
  // The 14-bit accumulator's noise is also far beyond what f32 allows in any order.
  EXPECT_EQ(failing_ids(r),
            (std::set<std::string>{"projections/p/bound", "projections/p/signature", "projections/p/variance"}));
  // 100 truncations at 8 bits in a block: 100 * 2^-7 >= 1/2, a bound that certifies nothing,
  // said as such.
  const Report vacuous = check_dump(write_fixture(small("f32-rn", "promote:100:8:rz", ""), "promote-vacuous.h5"));
  const CheckResult* vb = find_check(vacuous, "projections/p/bound");
  ASSERT_NE(vb, nullptr);
  EXPECT_EQ(vb->verdict, Verdict::kFail);
  EXPECT_NE(vb->reason.find("vacuous: k_walk promote:100:8:rz rounds up to 100 times"), std::string::npos)
      << vb->reason;
  EXPECT_EQ(find_check(vacuous, "projections/p/walk")->verdict, Verdict::kPass);
}

TEST(Check, GeometryViolationsNameTheGuard) {
  const std::string path = write_fixture(fixtures::preset_tiny(), "geom.h5");
  // attn_qkv: R = 2, B = 4, cap 2, 6 slots; canonical selector {0, 1, 4, 5, -1, -1}.
  ncert::testing::poke_i32(path, "/projections/attn_qkv/selector", {0, 2, 4, 5, -1, -1});
  Report r = check_dump(path);
  const CheckResult* g = find_check(r, "projections/attn_qkv/geometry");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::kFail);
  EXPECT_EQ(stats(*g)["guard"], "guard-not-prefix");
  // Which request a guard refused is only in the guard's message (packing::validate_plan).
  EXPECT_NE(g->reason.find("request 0"), std::string::npos) << g->reason;
  ncert::testing::poke_i32(path, "/projections/attn_qkv/selector", {0, 1, 4, 5, 9, -1});
  r = check_dump(path);
  EXPECT_EQ(stats(*find_check(r, "projections/attn_qkv/geometry"))["guard"], "guard-row-out-of-range");
  // Rows that do not map to slots make the slot-based checks "not evaluated", not silent.
  const CheckResult* blocked = find_check(r, "projections/attn_qkv/identity");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->verdict, Verdict::kFail);
  EXPECT_NE(evidence_of<NotEvaluatedEvidence>(blocked), nullptr);
  // The other projections are unaffected.
  EXPECT_EQ(find_check(r, "projections/mlp_up/bound")->verdict, Verdict::kPass);
}

TEST(Check, VacuousProjectionsFailUnlessAllowed) {
  fixtures::DumpSpec d = small("f32-rn", "seq", "");
  d.projections[0].x_scale = 0.0f;  // all-zero activations
  const std::string path = write_fixture(d, "vacuous.h5");
  Report r = check_dump(path);
  const CheckResult* v = find_check(r, "projections/p/vacuity");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->verdict, Verdict::kFail);
  ASSERT_NE(evidence_of<VacuityEvidence>(v), nullptr);
  EXPECT_EQ(evidence_of<VacuityEvidence>(v)->vacuous, std::vector<std::string>{"all-zero activations"}) << v->reason;
  CheckOptions allow;
  allow.allow_vacuous = true;
  r = check_dump(path, allow);
  // Allowed: a PASS although the projection is still vacuous.
  const CheckResult* allowed = find_check(r, "projections/p/vacuity");
  ASSERT_NE(evidence_of<VacuityEvidence>(allowed), nullptr);
  EXPECT_EQ(allowed->verdict, Verdict::kPass);
  EXPECT_EQ(evidence_of<VacuityEvidence>(allowed)->vacuous, std::vector<std::string>{"all-zero activations"});

  fixtures::DumpSpec none = small("f32-rn", "seq", "");
  none.projections[0].commits = {0, 0};
  const Report n = check_dump(write_fixture(none, "noselect.h5"));
  const auto* ne = evidence_of<VacuityEvidence>(find_check(n, "projections/p/vacuity"));
  ASSERT_NE(ne, nullptr);
  EXPECT_EQ(ne->selected_rows, 0);
  EXPECT_NE(std::find(ne->vacuous.begin(), ne->vacuous.end(), "no selected rows"), ne->vacuous.end());
}

TEST(Check, StrictFailsOnProbabilisticTierExceedances) {
  // An engine that drops one term of each dot product in both paths (so identity holds): at
  // K = 16384 (f32-rn) B is ~10 term standard deviations, so every value stays inside it, while
  // the tier 10 sqrt(K) u S is ~0.8 of one: most values lie beyond it. The plain bound passes,
  // --strict fails it on exactly that; the residual tests (docs/error-bounds.md §6c-6e) see the
  // missing term by default, the signature naming a K range around it.
  fixtures::DumpSpec d;
  fixtures::ProjectionSpec p;
  p.name = "wide";
  p.k = 16384;
  p.n = 16;
  p.accumulator = "f32-rn";
  p.dropped_terms = 1;
  d.projections.push_back(p);
  const std::string path = write_fixture(d, "tier.h5");
  const Report plain = check_dump(path);
  EXPECT_EQ(failing_ids(plain), (std::set<std::string>{"projections/wide/signature", "projections/wide/variance"}))
      << plain.to_text(true);
  const CheckResult* pb = find_check(plain, "projections/wide/bound");
  ASSERT_NE(pb, nullptr);
  EXPECT_EQ(stats(*pb)["outside"], 0);
  EXPECT_GT(stats(*pb)["beyond_tier"].get<Index>(), stats(*pb)["elements"].get<Index>() / 4);
  CheckOptions strict;
  strict.strict = true;
  const Report s = check_dump(path, strict);
  const CheckResult* sb = find_check(s, "projections/wide/bound");
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sb->verdict, Verdict::kFail);
  // Failed on the tier alone: nothing outside the intervals, the first value beyond the tier named.
  const auto* sbe = evidence_of<BoundEvidence>(sb);
  ASSERT_NE(sbe, nullptr);
  EXPECT_EQ(sbe->outside, 0);
  EXPECT_GT(sbe->beyond_tier, sbe->elements / 4);
  EXPECT_FALSE(sbe->first.has_value());
  ASSERT_TRUE(sb->first_failure.has_value());
  EXPECT_GE(sb->first_failure->row, 0);
  EXPECT_GE(sb->first_failure->col, 0);
  EXPECT_EQ(failing_ids(s), (std::set<std::string>{"projections/wide/bound", "projections/wide/signature",
                                                   "projections/wide/variance"}));
}

TEST(Check, ReportsAreIdenticalAtOneAndTwoThreads) {
  const std::string path = write_fixture(fixtures::preset_tiny(), "det.h5", Fault::kNibbleOrderSwapped);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Json one = without_timing(check_dump(path).to_json());
  omp_set_num_threads(2);
  const Json two = without_timing(check_dump(path).to_json());
  omp_set_num_threads(saved);
  EXPECT_EQ(one.dump(), two.dump());
}

TEST(Check, RefusedDumpIsAnErrorReportWithExitThree) {
  const std::string path = scratch_file("not.h5");
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("garbage", f);
  std::fclose(f);
  const Report r = check_dump(path);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code(), ErrorCode::kNotHdf5);
  EXPECT_EQ(r.exit_code(), 3);
  EXPECT_EQ(r.to_json()["error"]["name"], "not-hdf5");
}

TEST(Fixtures, FaultsThatCannotBePlantedAreRefused) {
  fixtures::DumpSpec d = small("f32-rn", "seq", "");  // f32 output, K = 256
  EXPECT_EQ(fixtures::write_dump(scratch_file("x.h5"), d, {Fault::kBf16TruncationPacked, ""}, true).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(fixtures::write_dump(scratch_file("x.h5"), d, {Fault::kDroppedKTilePacked, ""}, true).code(),
            ErrorCode::kInvalidArgument);
  const std::string path = scratch_file("exists.h5");
  ASSERT_TRUE(fixtures::write_dump(path, d, {}, false).ok());
  EXPECT_EQ(fixtures::write_dump(path, d, {}, false).code(), ErrorCode::kOutputExists);
  EXPECT_EQ(fixtures::preset("qwen-mixer:0").status().code(), ErrorCode::kUsage);
  EXPECT_EQ(fixtures::preset("qwen-mixer:2")->projections.size(), 4u);
}

TEST(Check, OutputsThatAreOneObjectUnderTwoNamesAreRefused) {
  // A hard link making y_packed the y_unpacked object would pass identity by comparing the object
  // with itself: the reader refuses it (exit 3) before any check runs.
  const std::string path = write_fixture(fixtures::preset_tiny(), "aliased.h5");
  ncert::testing::relink_hard(path, "/projections/attn_qkv/y_unpacked", "/projections/attn_qkv/y_packed");
  const Report r = check_dump(path);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code(), ErrorCode::kObjectAliased);
  EXPECT_EQ(r.exit_code(), 3);
  // A refusal is a Status: its message naming the object is the contract (docs/coding-guidelines.md).
  EXPECT_NE(r.error->message().find("/projections/attn_qkv/y_unpacked"), std::string::npos) << r.error->message();
  // Its legitimate twin (two objects holding the same bits) passes identity.
  const Report twin = check_dump(write_fixture(fixtures::preset_tiny(), "not-aliased.h5"));
  EXPECT_EQ(find_check(twin, "projections/attn_qkv/identity")->verdict, Verdict::kPass);
}

// ---- nothing is vacuous: skips, coverage and --require (issue: verdicts never vacuous) ---------

TEST(Coverage, AMissingOptionalMemberIsASkipThatNamesIt) {
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  spec.projections[0].write_before = false;    // attn_qkv: no y_before
  spec.projections[0].write_geometry = false;  // no requests / block_rows / cap
  const Report r = check_dump(write_fixture(spec, "no-before.h5"));
  EXPECT_EQ(r.verdict(), Verdict::kPass);
  const CheckResult* u = find_check(r, "projections/attn_qkv/untouched");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->verdict, Verdict::kSkip);
  // SKIPs carry no evidence: their reasons naming the missing members are the contract.
  EXPECT_NE(u->reason.find("y_before"), std::string::npos) << u->reason;
  const CheckResult* g = find_check(r, "projections/attn_qkv/request-guards");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->verdict, Verdict::kSkip);
  // (requests is inferred from commit_counts' length; block_rows and cap are not.)
  EXPECT_NE(g->reason.find("block_rows, cap"), std::string::npos) << g->reason;
  // The coverage table shows it, in text and JSON.
  const Json j = r.to_json();
  bool seen = false;
  for (const Json& row : j["coverage"]) {
    if (row["subject"] == "projections/attn_qkv") {
      EXPECT_EQ(row["checks"]["untouched"], "SKIP");
      EXPECT_EQ(row["checks"]["identity"], "PASS");
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
  // The text rendering is under test here.
  EXPECT_NE(r.to_text(false).find("coverage"), std::string::npos);
  EXPECT_NE(r.to_text(false).find("skipped"), std::string::npos);
}

TEST(Coverage, RequireTurnsSkipsIntoFailures) {
  fixtures::DumpSpec spec = fixtures::preset_tiny();
  spec.projections[0].write_before = false;
  const std::string path = write_fixture(spec, "require.h5");
  CheckCommandOptions co;
  co.dump = path;
  co.require = *parse_requirement("untouched");
  auto r = run_check(co);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict(), Verdict::kFail);
  const CheckResult* u = find_check(*r, "projections/attn_qkv/untouched");
  EXPECT_EQ(u->verdict, Verdict::kFail);
  // A required SKIP keeps its kind and no evidence; that it was required is only in its reason.
  EXPECT_EQ(u->kind, CheckKind::kUntouched);
  EXPECT_NE(u->reason.find("required by --require untouched"), std::string::npos) << u->reason;
  // Other kinds' skips stay skips; "all" fails every one of them.
  EXPECT_EQ(find_check(*r, "projections/mlp_up/walk")->verdict, Verdict::kSkip);
  co.require = *parse_requirement("all");
  auto all = run_check(co);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(find_check(*all, "projections/mlp_up/walk")->verdict, Verdict::kFail);
  EXPECT_EQ(all->skipped_checks(), 0);
  EXPECT_EQ(parse_requirement("untouched,nonsense").status().code(), ErrorCode::kUsage);
  // "all" beside other kinds is refused for what it is, not as an unknown kind.
  for (const char* mixed : {"all,walk", "walk,all"}) {
    const auto refused = parse_requirement(mixed);
    ASSERT_FALSE(refused.ok()) << mixed;
    EXPECT_EQ(refused.status().message(),
              "\"all\" stands alone: it requires every kind, so give it without other kinds")
        << mixed;
  }
}

TEST(Coverage, AFilterThatSelectsNothingIsAUsageError) {
  CheckCommandOptions co;
  co.dump = write_fixture(fixtures::preset_tiny(), "only.h5");
  co.only = "no-such-projection";
  auto r = run_check(co);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUsage);
  EXPECT_EQ(exit_code_for(r.status().code()), 2);
  co.only = "mlp";
  EXPECT_TRUE(run_check(co).ok());
}

TEST(Coverage, ADumpWithNothingToCertifyFailsItsVacuityCheck) {
  fixtures::DumpSpec empty;
  empty.root.build = "empty";
  const Report r = check_dump(write_fixture(empty, "empty.h5"));
  EXPECT_EQ(r.verdict(), Verdict::kFail);
  EXPECT_EQ(r.exit_code(), 1);
  const CheckResult* v = find_check(r, "vacuity");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->verdict, Verdict::kFail);
  const auto* ve = evidence_of<VacuityEvidence>(v);
  ASSERT_NE(ve, nullptr);
  EXPECT_EQ(ve->vacuous, std::vector<std::string>{"no projection and no logits run"});
  // The good dump's vacuity passes and counts what was certified.
  const Report good = check_dump(write_fixture(fixtures::preset_tiny(), "nonempty.h5"));
  EXPECT_EQ(find_check(good, "vacuity")->verdict, Verdict::kPass);
}

}  // namespace
}  // namespace ncert::certify
