// The campaign's scheduler (certify/campaign/campaign.h): plans first, then the largest item;
// projection units that take the same weights from a weights dump go out as one batch of at
// most their share over the workers; a batch whose process ended abnormally returns its units
// to run alone. The batches' effect on reports (none) is tests/campaign/weights_test.py's.
#include "certify/campaign/campaign.h"

#include <gtest/gtest.h>

#include <set>

namespace ncert::certify {
namespace {

constexpr const char* kShared = "weights.h5|0123456789abcdef0123456789abcdef";

Manifest three_checks() {
  Manifest m;
  m.path = "campaign.json";
  m.name = "schedule";
  for (int i = 0; i < 3; ++i)
    m.entries.push_back(CampaignEntry{"step-" + std::to_string(i), EntryKind::kCheck, {"s.h5"}, {}});
  return m;
}

/// A plan as a plan item returns it: projections a and b take the shared weights (b costs
/// more), c carries its own, then the rest.
Json plan_result(int step) {
  Json units = Json::array();
  units.push_back(Json{{"projection", "a"}, {"cost", 100.0 + step}, {"shared_weights", kShared}});
  units.push_back(Json{{"projection", "b"}, {"cost", 200.0 + step}, {"shared_weights", kShared}});
  units.push_back(Json{{"projection", "c"}, {"cost", 50.0}});
  units.push_back(Json{{"projection", nullptr}, {"cost", 1.0}});
  return Json{{"plan", Json{{"order", {"a", "b", "c"}},
                            {"units", units},
                            {"has_tensors", false},
                            {"projections_without_rows", 0},
                            {"input", Json{{"path", "s.h5"}, {"xxh3_128", std::string(32, '0')}}}}}};
}

CampaignRun planned(const Manifest& m, std::size_t workers) {
  CampaignSettings s;
  s.workers = workers;
  CampaignRun run(m, s, {});
  for (int i = 0; i < 3; ++i) {
    auto item = run.next();
    EXPECT_TRUE(item && item->kind == WorkItem::Kind::kPlan);
    EXPECT_TRUE(run.finish(item->key, plan_result(i), 0).ok());
  }
  return run;
}

TEST(CampaignSchedule, UnitsSharingWeightsGoOutAsOneBatchPerWorkerShare) {
  const Manifest m = three_checks();
  CampaignRun run = planned(m, 2);
  auto first = run.next();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind, WorkItem::Kind::kBatch);
  // Six units share the weights; two workers: a batch takes ceil(6 / 2) = 3, largest first.
  ASSERT_EQ(first->members.size(), 3u);
  EXPECT_EQ(first->members[0].key, "step-2#unit:b");
  EXPECT_EQ(first->members[1].key, "step-1#unit:b");
  EXPECT_EQ(first->members[2].key, "step-0#unit:b");
  EXPECT_EQ(first->key, "#batch:3:step-2#unit:b");
  EXPECT_EQ(first->cost, 202.0 + 201.0 + 200.0);
  ASSERT_NE(run.batch(first->key), nullptr);
  EXPECT_EQ(run.batch("step-2#unit:b"), nullptr);
  auto second = run.next();
  ASSERT_TRUE(second);
  ASSERT_EQ(second->kind, WorkItem::Kind::kBatch);
  // Three left, still shared over two workers: two, then the last one goes out alone.
  EXPECT_EQ(second->members.size(), 2u);
  auto third = run.next();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->kind, WorkItem::Kind::kUnit);
  EXPECT_EQ(third->unit.shared_weights, kShared);
  // Units with their own weights, and the rest, are never batched.
  std::set<std::string> others;
  while (auto w = run.next()) {
    EXPECT_EQ(w->kind, WorkItem::Kind::kUnit);
    others.insert(w->key);
  }
  EXPECT_EQ(others.size(), 6u);  // c and the rest of three steps
  for (const WorkItem* b : {run.batch(first->key), run.batch(second->key)}) {
    for (const WorkItem& w : b->members) EXPECT_TRUE(run.finish(w.key, Json{{"part", Json::object()}}, 0).ok());
  }
  EXPECT_TRUE(run.finish(third->key, Json{{"part", Json::object()}}, 0).ok());
  for (const std::string& k : others) EXPECT_TRUE(run.finish(k, Json{{"part", Json::object()}}, 0).ok());
  EXPECT_TRUE(run.done());
  EXPECT_EQ(run.items_finished(), 3u + 12u);
}

TEST(CampaignSchedule, OneWorkerTakesEveryUnitSharingTheWeightsUpToTheCap) {
  const Manifest m = three_checks();
  CampaignRun run = planned(m, 1);
  auto first = run.next();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind, WorkItem::Kind::kBatch);
  EXPECT_EQ(first->members.size(), 6u);
  EXPECT_LE(first->members.size(), kMaxBatchUnits);
}

TEST(CampaignSchedule, ABatchThatEndedAbnormallyRunsItsUnitsAlone) {
  const Manifest m = three_checks();
  CampaignRun run = planned(m, 1);
  auto batch = run.next();
  ASSERT_TRUE(batch && batch->kind == WorkItem::Kind::kBatch);
  // One unit finished before the crash (a journal replay may do that): it stays finished.
  ASSERT_TRUE(run.finish(batch->members[0].key, Json{{"part", Json::object()}}, 0).ok());
  run.retry_alone(batch->key);
  EXPECT_EQ(run.batch(batch->key), nullptr);
  std::set<std::string> again;
  while (auto w = run.next()) {
    EXPECT_EQ(w->kind, WorkItem::Kind::kUnit) << w->key;
    if (w->unit.shared_weights.empty()) continue;
    EXPECT_TRUE(w->alone);
    again.insert(w->key);
  }
  EXPECT_EQ(again.size(), 5u);
  EXPECT_FALSE(again.count(batch->members[0].key));
}

TEST(CampaignSchedule, ABatchCrossesTheWireIntact) {
  const Manifest m = three_checks();
  CampaignRun run = planned(m, 2);
  auto batch = run.next();
  ASSERT_TRUE(batch);
  auto back = work_item_from_json(work_item_json(*batch));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(work_item_json(*back), work_item_json(*batch));
  ASSERT_EQ(back->members.size(), batch->members.size());
  EXPECT_EQ(back->members[1].unit.shared_weights, kShared);
  EXPECT_EQ(*back->members[1].unit.projection, "b");
}

}  // namespace
}  // namespace ncert::certify
