// A campaign's input pins (certify/campaign/input_pins.h): every file of every entry hashed once,
// with its stamp; an item's check of its pins passes on the file hashed and fails, naming the
// file, once it is replaced or rewritten (same size included) or removed; a FIFO is stamped, never
// opened (hashing it would block), and gets no hash; a work item whose file changed since it was
// pinned runs nothing and returns a result the campaign reports but never journals.
#include "certify/campaign/input_pins.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "certify/campaign/campaign.h"

namespace ncert::certify {
namespace {

std::string temp_dir() {
  const auto p = std::filesystem::temp_directory_path() / ("ncert-pins-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

void write_pin_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

Manifest manifest_of(const std::string& dir) {
  Manifest m;
  m.path = dir + "/m.json";
  CampaignEntry check{"c", EntryKind::kCheck, {dir + "/a.h5"}, {}};
  check.options["weights"] = dir + "/w.h5";
  CampaignEntry forks{"f", EntryKind::kForks, {dir + "/a.h5", dir + "/fifo"}, {}};
  forks.options["vocab"] = dir + "/vocab.json";
  m.entries = {check, forks};
  return m;
}

TEST(InputPins, EveryFileOfEveryEntryIsHashedOnce) {
  const std::string dir = temp_dir();
  write_pin_file(dir + "/a.h5", "dump bytes");
  write_pin_file(dir + "/w.h5", "weights bytes");
  write_pin_file(dir + "/vocab.json", "[\"a\"]");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  const Manifest m = manifest_of(dir);
  EXPECT_EQ(entry_files(m.entries[0]), (std::vector<std::string>{dir + "/a.h5", dir + "/w.h5"}));
  EXPECT_EQ(entry_files(m.entries[1]), (std::vector<std::string>{dir + "/a.h5", dir + "/fifo", dir + "/vocab.json"}));
  const std::map<std::string, InputPin> pins = pin_inputs(m);
  ASSERT_EQ(pins.size(), 4u);
  const std::string text = "dump bytes";
  EXPECT_EQ(pins.at(dir + "/a.h5").xxh3_128, xxh3_128_hex(text.data(), text.size()));
  EXPECT_FALSE(pins.at(dir + "/a.h5").unstable);
  EXPECT_EQ(pins.at(dir + "/fifo").xxh3_128, "");  // stamped, never opened
  EXPECT_TRUE(pins.at(dir + "/fifo").stamp.exists);
  EXPECT_TRUE(pins_hold({pins.at(dir + "/a.h5"), pins.at(dir + "/fifo")}).ok());
  std::filesystem::remove_all(dir);
}

TEST(InputPins, AFileReplacedRewrittenOrRemovedNoLongerHolds) {
  const std::string dir = temp_dir();
  const std::string a = dir + "/a.h5";
  write_pin_file(a, "dump bytes");
  Manifest m;
  m.entries = {CampaignEntry{"c", EntryKind::kCheck, {a}, {}}};
  const InputPin pin = pin_inputs(m).at(a);
  EXPECT_TRUE(pins_hold({pin}).ok());
  // Rewritten in place with bytes of the same size: its change time moves.
  ::usleep(20'000);
  write_pin_file(a, "DUMP BYTES");
  Status s = pins_hold({pin});
  EXPECT_EQ(s.code(), ErrorCode::kIo);
  EXPECT_NE(s.message().find(a + " changed since the campaign hashed it"), std::string::npos) << s.message();
  // Replaced by another file (a new inode).
  const InputPin again = pin_inputs(m).at(a);
  EXPECT_NE(again.xxh3_128, pin.xxh3_128);
  write_pin_file(dir + "/other", "dump bytes");
  std::filesystem::rename(dir + "/other", a);
  EXPECT_FALSE(pins_hold({again}).ok());
  std::filesystem::remove(a);
  EXPECT_TRUE(pins_hold({pin_inputs(m).at(a)}).ok());  // absent when pinned, and still absent
  EXPECT_FALSE(pins_hold({again}).ok());
  std::filesystem::remove_all(dir);
}

TEST(InputPins, AnItemWhoseFileChangedSinceItWasPinnedGivesNoVerdictAndIsNotJournaled) {
  const std::string dir = temp_dir();
  const std::string dump = dir + "/a.h5";
  write_pin_file(dump, "not even HDF5");
  Manifest m;
  m.path = dir + "/m.json";
  m.entries = {CampaignEntry{"c", EntryKind::kCheck, {dump}, {}}};
  CampaignRun run(m, CampaignSettings{}, pin_inputs(m));
  const std::optional<WorkItem> plan = run.next();
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->inputs.size(), 1u);
  // The files' hashes, then the settings a record is bound to besides (the memory limit).
  EXPECT_EQ(run.input_hashes(plan->key),
            (nlohmann::ordered_json{{dump, plan->inputs[0].xxh3_128},
                                    {std::string(kSettingsKey),
                                     "memory_limit " + std::to_string(CampaignSettings{}.reader.memory_limit)}}));
  // The file as pinned: the plan runs (and refuses it, a verdict on those bytes).
  const nlohmann::ordered_json refused = run_work_item(m, CampaignSettings{}, *plan);
  EXPECT_FALSE(input_changed(refused)) << refused.dump();
  EXPECT_TRUE(refused.contains("plan")) << refused.dump();
  // Replaced since: the item reads nothing and says why.
  write_pin_file(dir + "/other", "other bytes");
  std::filesystem::rename(dir + "/other", dump);
  const nlohmann::ordered_json changed = run_work_item(m, CampaignSettings{}, *plan);
  EXPECT_TRUE(input_changed(changed)) << changed.dump();
  EXPECT_NE(changed.dump().find("changed since the campaign hashed it"), std::string::npos) << changed.dump();
  std::filesystem::remove_all(dir);
}

TEST(InputPins, PinsCrossTheWireIntact) {
  InputPin pin{"a.h5", std::string(32, 'c'), {true, S_IFREG, 7, 10, 123456789, 987654321}, false};
  const Result<InputPin> back = pin_from_json(pin_json(pin));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->path, pin.path);
  EXPECT_EQ(back->xxh3_128, pin.xxh3_128);
  EXPECT_TRUE(back->stamp == pin.stamp);
  EXPECT_FALSE(pin_from_json(nlohmann::ordered_json{{"path", "a.h5"}}).ok());
}

}  // namespace
}  // namespace ncert::certify
