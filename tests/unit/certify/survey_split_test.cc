// The survey split over helper processes (ReaderOptions::survey_processes) finds exactly what one
// process finds: the same model and the same findings in the same order, on a valid dump and on
// hostile ones whose findings depend on the order of the walk (objects aliased across units, the
// link limit reached inside a unit); and, read from a mapping of the file, what libhdf5 reads
// through its file driver.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "certify/io/detail/survey_parts.h"
#include "certify/io/dump_reader.h"
#include "tests/common/mini_dump.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::open_mini_dump;
using ncert::testing::scratch_file;

/// Everything the survey put into the model, one line per item, in the model's order.
std::string describe(const DumpModel& m) {
  std::string out;
  for (const AttributeInfo& a : m.root_attributes) out += "root " + a.name + " = " + a.value.render() + "\n";
  for (const GroupInfo& g : m.groups) {
    out += "group " + g.path + "\n";
    for (const AttributeInfo& a : g.attributes) out += "  " + a.name + " = " + a.value.render() + "\n";
  }
  for (const DatasetInfo& d : m.datasets) {
    out += "dataset " + d.path + " " + std::string(dtype_name(d.dtype)) + " " + std::string(layout_name(d.layout)) +
           " " + std::to_string(d.elements) + "\n";
    for (const AttributeInfo& a : d.attributes) out += "  " + a.name + " = " + a.value.render() + "\n";
  }
  for (const Finding& f : m.findings) {
    out += "finding " + std::to_string(static_cast<int>(f.code)) + " " + f.path + ": " + f.message + "\n";
  }
  out += "projections " + std::to_string(m.projections.size()) + "\n";
  return out;
}

/// The survey of `path` by `processes` processes, three units each at most, reading headers
/// from a mapping of the file or through libhdf5's file driver.
std::string survey(const std::string& path, int processes, Index max_links = 200'000, bool mapped = true) {
  ReaderOptions o;
  o.survey_mapped = mapped;
  o.survey_processes = processes;
  o.survey_units_per_process = 3;
  o.max_objects = max_links;
  auto r = DumpReader::survey(path, o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? describe(r->model()) : std::string();
}

/// The mini dump with its projection copied to q00..q(copies-1): 1 + copies units under
/// /projections, each 7 objects deep; `hostile` then edits the file through HDF5.
template <typename F>
std::string many_projections(const std::string& name, int copies, F&& hostile) {
  std::string path = scratch_file(name);
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  for (int i = 0; i < copies; ++i) {
    const std::string to = "/projections/q" + std::string(i < 10 ? "0" : "") + std::to_string(i);
    EXPECT_GE(H5Ocopy(f, "/projections/p", f, to.c_str(), H5P_DEFAULT, H5P_DEFAULT), 0) << to;
  }
  hostile(f);
  EXPECT_TRUE(w.close().ok());
  return path;
}

TEST(SurveySplit, AValidDumpIsSurveyedAlikeByOneTwoAndThreeProcesses) {
  const std::string path = many_projections("split-valid.h5", 20, [](hid_t) {});
  const std::string one = survey(path, 1);
  EXPECT_NE(one.find("projections 21\n"), std::string::npos) << one;
  EXPECT_EQ(one.find("finding "), std::string::npos) << "a valid dump has no findings:\n" << one;
  EXPECT_EQ(survey(path, 2), one);
  EXPECT_EQ(survey(path, 3), one);
}

TEST(SurveySplit, AliasesAcrossUnitsAreNamedAsOneWalkNamesThem) {
  // Units are surveyed apart, so a helper cannot see that its object is another unit's; the
  // merge walks such a unit again with what came before it.
  const std::string path = many_projections("split-alias.h5", 20, [](hid_t f) {
    // A dataset of q03 under a second name in q15, and q01 holding one of q18's outputs.
    EXPECT_GE(H5Lcreate_hard(f, "/projections/q03/x", f, "/projections/q15/x_again", H5P_DEFAULT, H5P_DEFAULT), 0);
    EXPECT_GE(H5Lcreate_hard(f, "/projections/q18/y_unpacked", f, "/projections/q01/zz", H5P_DEFAULT, H5P_DEFAULT), 0);
    // A whole group of q02 linked into q17, and the unit q05 under a second unit's name.
    EXPECT_GE(H5Lcreate_hard(f, "/projections/q02/weight", f, "/projections/q17/w2", H5P_DEFAULT, H5P_DEFAULT), 0);
    EXPECT_GE(H5Lcreate_hard(f, "/projections/q05", f, "/projections/q19b", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  const std::string one = survey(path, 1);
  for (const char* expected : {
           "/projections/q15/x_again: is the same HDF5 object as /projections/q03/x",
           "/projections/q18/y_unpacked: is the same HDF5 object as /projections/q01/zz",
           "/projections/q17/w2: is the same HDF5 object as /projections/q02/weight",
           "/projections/q19b: is the same HDF5 object as /projections/q05",
       }) {
    EXPECT_NE(one.find(expected), std::string::npos) << expected << "\n" << one;
  }
  EXPECT_EQ(survey(path, 2), one);
  EXPECT_EQ(survey(path, 3), one);
}

TEST(SurveySplit, TheLinkLimitStopsTheWalkAtTheSameLinkAtAnyProcessCount) {
  const std::string path = many_projections("split-limit.h5", 20, [](hid_t) {});
  // The file holds 3 + 4 + 21 x 7 links; 90 ends the walk inside a unit of the second range.
  const std::string one = survey(path, 1, 90);
  EXPECT_NE(one.find("links in the file"), std::string::npos) << one;
  EXPECT_EQ(survey(path, 2, 90), one);
  EXPECT_EQ(survey(path, 3, 90), one);
  // At the top levels, before any unit.
  const std::string top = survey(path, 1, 10);
  EXPECT_NE(top.find("more than 10 links"), std::string::npos) << top;
  EXPECT_EQ(survey(path, 3, 10), top);
}

TEST(SurveySplit, AMappedFileIsSurveyedAsTheFileReadThroughLibhdf5) {
  // ReaderOptions::survey_mapped only changes where the header bytes come from.
  const std::string valid = many_projections("mapped-valid.h5", 20, [](hid_t) {});
  const std::string alias = many_projections("mapped-alias.h5", 6, [](hid_t f) {
    EXPECT_GE(H5Lcreate_hard(f, "/projections/q03/x", f, "/projections/q01/x_again", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  for (const std::string& path : {valid, alias}) {
    for (int processes : {1, 3}) {
      const std::string mapped = survey(path, processes, 200'000, true);
      EXPECT_FALSE(mapped.empty());
      EXPECT_EQ(survey(path, processes, 200'000, false), mapped) << path << " by " << processes;
      EXPECT_EQ(survey(path, processes, 90, false), survey(path, processes, 90, true)) << path << " link limit";
    }
  }
}

TEST(SurveySplit, ADamagedOrTruncatedFileGetsTheSameAnswerMappedOrNot) {
  // Copies of a valid dump with a stretch of bytes overwritten (headers, heaps and B-trees the
  // survey reads from the mapping) or cut short (libhdf5 refuses those before any mapping).
  // Whatever the answer, a refusal or findings, it is the same from the mapping.
  const std::string valid = many_projections("mapped-damaged-source.h5", 4, [](hid_t) {});
  std::FILE* in = std::fopen(valid.c_str(), "rb");
  ASSERT_NE(in, nullptr);
  std::string bytes;
  char buffer[65536];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, in)) > 0;) bytes.append(buffer, n);
  std::fclose(in);
  int with_findings = 0;
  for (int step = 1; step <= 24; ++step) {
    std::string damaged = bytes;
    const std::size_t at = bytes.size() * static_cast<std::size_t>(step) / 25;
    if (step == 24) {
      damaged.resize(at);
    } else {
      for (std::size_t i = at; i < std::min(at + 48, damaged.size()); ++i) damaged[i] = static_cast<char>(0x5a ^ i);
    }
    const std::string path = scratch_file("mapped-damaged-" + std::to_string(step) + ".h5");
    std::FILE* out = std::fopen(path.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(std::fwrite(damaged.data(), 1, damaged.size(), out), damaged.size());
    std::fclose(out);
    std::string answers[2];
    for (bool mapped : {false, true}) {
      ReaderOptions o;
      o.survey_mapped = mapped;
      auto r = DumpReader::survey(path, o);
      answers[mapped] = r.ok() ? describe(r->model()) : r.status().to_string();
    }
    with_findings += answers[0].find("finding ") != std::string::npos;
    EXPECT_EQ(answers[1], answers[0]) << "bytes from " << at << " damaged";
  }
  EXPECT_GE(with_findings, 3) << "damage the survey reads from the mapping, not only refusals at open";
}

TEST(SurveySplit, WhatHelpersThatDieDidNotSendIsLeftToTheCaller) {
  // Items are "surveyed" into parts that record their index; every helper dies (abort) in the
  // first chunk it takes. The call still returns; every item delivered holds its own index, and
  // the others are nullopt in whole chunks, for the caller to walk itself (survey_tree does).
  const pid_t parent = getpid();
  detail::SplitPlan plan;
  plan.processes = 3;
  plan.chunk = 2;
  plan.link_budget = 1'000'000;
  plan.file = "test";
  const auto parts = detail::survey_in_processes(40, plan, [&](std::size_t first, std::size_t last) {
    if (getpid() != parent) std::abort();
    std::vector<detail::TreePart> out;
    for (std::size_t i = first; i < last; ++i) {
      detail::TreePart p;
      p.seen = static_cast<Index>(i);
      p.failed.push_back("item " + std::to_string(i));
      out.push_back(std::move(p));
    }
    return out;
  });
  ASSERT_EQ(parts.size(), 40u);
  std::size_t delivered = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].has_value(), parts[i ^ 1].has_value()) << "chunks of 2 are delivered whole, item " << i;
    if (!parts[i]) continue;
    ++delivered;
    EXPECT_EQ(parts[i]->seen, static_cast<Index>(i));
    ASSERT_EQ(parts[i]->failed.size(), 1u);
    EXPECT_EQ(parts[i]->failed[0], "item " + std::to_string(i));
  }
  EXPECT_GE(delivered, 36u) << "this process takes every chunk the two helpers did not";
}

TEST(SurveySplit, NoProcessTakesAChunkOnceTheLinkBudgetIsSpent) {
  // Each item sees 10 links; with a budget of 35 the chunks after the first few finished are
  // never surveyed (they are past the limit whatever came before them).
  detail::SplitPlan plan;
  plan.processes = 2;
  plan.chunk = 1;
  plan.link_budget = 35;
  const auto parts = detail::survey_in_processes(200, plan, [&](std::size_t first, std::size_t last) {
    std::vector<detail::TreePart> out(last - first);
    for (auto& p : out) p.seen = 10;
    return out;
  });
  std::size_t delivered = 0;
  for (const auto& p : parts) delivered += p.has_value();
  EXPECT_GE(delivered, 4u);
  EXPECT_LE(delivered, 8u) << "at most one chunk per process past the budget";
}

}  // namespace
}  // namespace ncert::certify
