// The campaign journal and the wire form it stores (certify/campaign/journal.h, report/wire.h):
// its records come back as written, their evidence typed; a journal whose first line declares
// another wire version (or none: journals written while evidence travelled as rendered stats)
// is refused by --resume with a usage error naming both versions, before any record is read;
// and a result that does not decode (a hand-edited line) is one failed entry of the campaign's
// report, never a crash.
#include "certify/campaign/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "certify/campaign/campaign.h"
#include "certify/report/wire.h"

namespace ncert::certify {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kManifestHash = "0123456789abcdef0123456789abcdef";

std::string temp_path(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("ncert-journal-test-" + std::to_string(::getpid()) + "-" + name + ".journal");
  std::filesystem::remove(p);
  return p.string();
}

Report witness_report() {
  Report r;
  r.command = "witness";
  r.inputs = {{"w.h5", std::string(32, 'a')}};
  CheckResult c;
  c.id = "logits/greedy/witness";
  c.subject = "logits/greedy";
  c.kind = CheckKind::kWitness;
  c.reason = "64 emissions certified";
  WitnessEvidence e;
  e.tokens = 64;
  e.certified = 64;
  e.margin.add(0.5);
  c.evidence = e;
  r.checks.push_back(c);
  return r;
}

TEST(Journal, RecordsComeBackWithTheirEvidenceTyped) {
  const std::string path = temp_path("records");
  {
    Result<Journal> j = Journal::create(path, kManifestHash);
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    ASSERT_TRUE(j->append(JournalRecord{"witness-0#run", Json{{"report", report_to_wire(witness_report())}}, ""}).ok());
  }
  std::vector<JournalRecord> records;
  Result<Journal> again = Journal::resume(path, kManifestHash, &records);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_EQ(records.size(), 1u);
  const Result<Report> r = report_from_wire(records[0].result.at("report"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->checks.size(), 1u);
  EXPECT_TRUE(r->checks[0] == witness_report().checks[0]);
  std::filesystem::remove(path);
}

TEST(Journal, AJournalOfAnotherWireVersionIsRefusedBeforeAnyRecordIsRead) {
  // The first line as ncert wrote it while evidence travelled as its rendered stats (no "wire"),
  // then a record in that form; and a journal of a later version.
  const std::string old_line =
      std::string("{\"ncert_campaign_journal\":1,\"manifest_xxh3_128\":\"") + kManifestHash +
      "\"}\n{\"key\":\"c#run\",\"result\":{\"report\":{\"checks\":[{\"check\":{\"stats\":{}}}]}}}\n";
  const std::string new_line =
      std::string("{\"ncert_campaign_journal\":1,\"wire\":99,\"manifest_xxh3_128\":\"") + kManifestHash + "\"}\n";
  for (const auto& [text, version] : {std::pair{old_line, "1"}, std::pair{new_line, "99"}}) {
    const std::string path = temp_path("old");
    std::ofstream(path, std::ios::binary) << text;
    std::vector<JournalRecord> records;
    const Result<Journal> j = Journal::resume(path, kManifestHash, &records);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), ErrorCode::kUsage);
    EXPECT_NE(j.status().message().find(std::string("wire format ") + version), std::string::npos)
        << j.status().message();
    EXPECT_NE(j.status().message().find("this one reads format " + std::to_string(kWireVersion)), std::string::npos)
        << j.status().message();
    EXPECT_TRUE(records.empty());
    std::filesystem::remove(path);
  }
}

TEST(Journal, AResultThatDoesNotDecodeIsOneFailedEntry) {
  Manifest m;
  m.path = "campaign.json";
  m.name = "wire";
  m.entries.push_back(CampaignEntry{"compare-0", EntryKind::kCompare, {"a.h5", "b.h5"}, {}});
  m.entries.push_back(CampaignEntry{"witness-1", EntryKind::kWitness, {"w.h5"}, {}});
  CampaignRun run(m, CampaignSettings{});
  // A run item's result in the untyped wire form: its check has "check" and "stats", no evidence.
  const Json old_report = Json::parse(R"({"command": "compare", "inputs": [], "checks": [{"check":
      {"id": "logits/greedy", "kind": "logits", "verdict": "PASS", "reason": "ok", "stats": {}},
      "subject": "", "always_show_details": false}], "stats": {}, "extra": {}, "preamble": [],
      "show_coverage": false})");
  ASSERT_TRUE(run.finish("compare-0#run", Json{{"report", old_report}}, 0).ok());
  ASSERT_TRUE(run.finish("witness-1#run", Json{{"report", report_to_wire(witness_report())}}, 0).ok());
  const Report merged = run.report();
  const Json& entries = merged.extra.at("entries");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].at("verdict"), "FAIL");
  EXPECT_NE(entries[0].at("report").at("error").at("message").get<std::string>().find("not a wire check"),
            std::string::npos);
  EXPECT_EQ(entries[1].at("verdict"), "PASS");
  // The good entry's check is in the campaign's list with its evidence typed.
  bool typed = false;
  for (const CheckResult& c : merged.checks) {
    if (c.id == "witness-1/logits/greedy/witness") typed = std::get_if<WitnessEvidence>(&c.evidence) != nullptr;
  }
  EXPECT_TRUE(typed);
}

}  // namespace
}  // namespace ncert::certify
