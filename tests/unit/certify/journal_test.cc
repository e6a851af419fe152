// The campaign journal and the wire form it stores (certify/campaign/journal.h, report/wire.h):
// its records come back as written, with the hashes of their inputs and their evidence typed;
// every line is chained by its checksum to the one before and the header to the manifest, so a
// line edited, removed, or copied from another journal is not trusted (a notice names it) while
// the others are; a journal of format 1 (no checksums) is read as untrusted lines, never as an
// error; a journal whose header declares another wire version is refused by --resume with a usage
// error naming both versions, before any record is read; and a result that does not decode is one
// failed entry of the campaign's report, never a crash; and a new journal replaces only an empty
// file or a journal, never another file (output-exists).
#include "certify/campaign/journal.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>

#include "certify/campaign/campaign.h"
#include "certify/report/wire.h"

namespace ncert::certify {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kManifestHash = "0123456789abcdef0123456789abcdef";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    lines.push_back(text.substr(pos, nl - pos));
  }
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

JournalRecord record(const std::string& key, const std::string& verdict) {
  return JournalRecord{key, Json{{"dump.h5", std::string(32, 'b')}}, Json{{"verdict", verdict}}, "", 0};
}

std::vector<std::string> keys_of(const JournalContents& c) {
  std::vector<std::string> keys;
  for (const JournalRecord& r : c.records) keys.push_back(r.key);
  return keys;
}

/// A journal of `n` records "e#1".."e#n" at `path`, all FAIL.
void write_journal(const std::string& path, int n) {
  Result<Journal> j = Journal::create(path, kManifestHash);
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  for (int i = 1; i <= n; ++i) ASSERT_TRUE(j->append(record("e#" + std::to_string(i), "FAIL")).ok());
}

JournalContents resumed(const std::string& path) {
  JournalContents c;
  Result<Journal> j = Journal::resume(path, kManifestHash, &c);
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return c;
}

bool has_notice(const JournalContents& c, const std::string& text) {
  for (const std::string& n : c.notices) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

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

TEST(Journal, RecordsComeBackWithTheirInputsAndTheirEvidenceTyped) {
  const std::string path = temp_path("records");
  const Json inputs = Json{{"w.h5", std::string(32, 'a')}};
  {
    Result<Journal> j = Journal::create(path, kManifestHash);
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    ASSERT_TRUE(
        j->append(JournalRecord{"witness-0#run", inputs, Json{{"report", report_to_wire(witness_report())}}, "", 0})
            .ok());
  }
  JournalContents contents = resumed(path);
  EXPECT_TRUE(contents.notices.empty());
  ASSERT_EQ(contents.records.size(), 1u);
  EXPECT_EQ(contents.records[0].inputs, inputs);
  EXPECT_EQ(contents.records[0].line, 2u);
  const Result<Report> r = report_from_wire(contents.records[0].result.at("report"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->checks.size(), 1u);
  EXPECT_TRUE(r->checks[0] == witness_report().checks[0]);
  std::filesystem::remove(path);
}

TEST(Journal, EveryLineIsChainedToTheOneBeforeAndTheHeaderToTheManifest) {
  const std::string path = temp_path("chain");
  write_journal(path, 3);
  const std::vector<std::string> lines = lines_of(read_text(path));
  ASSERT_EQ(lines.size(), 4u);
  const Json header = Json::parse(lines[0]);
  EXPECT_EQ(header.at("line").at("ncert_campaign_journal"), 2);
  EXPECT_EQ(header.at("line").at("manifest_xxh3_128"), kManifestHash);
  EXPECT_EQ(header.at("sum"), journal_line_sum(kManifestHash, header.at("line").dump()));
  const Json first = Json::parse(lines[1]);
  EXPECT_EQ(first.at("sum"), journal_line_sum(header.at("sum"), first.at("line").dump()));
  EXPECT_EQ(keys_of(resumed(path)), (std::vector<std::string>{"e#1", "e#2", "e#3"}));
  std::filesystem::remove(path);
}

TEST(Journal, AnEditedLineIsNotTrustedAndNamed) {
  const std::string path = temp_path("edited");
  write_journal(path, 3);
  std::vector<std::string> lines = lines_of(read_text(path));
  const std::size_t at = lines[2].find("FAIL");
  ASSERT_NE(at, std::string::npos);
  lines[2].replace(at, 4, "PASS");
  write_text(path, joined(lines));
  const JournalContents c = resumed(path);
  EXPECT_EQ(keys_of(c), (std::vector<std::string>{"e#1", "e#3"}));
  ASSERT_EQ(c.notices.size(), 1u);
  EXPECT_TRUE(has_notice(c, "line 3 (e#2) does not verify")) << c.notices[0];
  // The edit with its own sum recomputed verifies (the checksum is no signature), but the line
  // after it no longer does.
  const Json edited = Json::parse(lines[2]);
  lines[2] = "{\"sum\":\"" + journal_line_sum(Json::parse(lines[1]).at("sum"), edited.at("line").dump()) +
             "\",\"line\":" + edited.at("line").dump() + "}";
  write_text(path, joined(lines));
  const JournalContents forged = resumed(path);
  EXPECT_EQ(keys_of(forged), (std::vector<std::string>{"e#1", "e#2"}));
  EXPECT_TRUE(has_notice(forged, "line 4 (e#3) does not verify"));
  std::filesystem::remove(path);
}

TEST(Journal, ARemovedLineBreaksTheChainOfTheLineAfterIt) {
  const std::string path = temp_path("removed");
  write_journal(path, 4);
  std::vector<std::string> lines = lines_of(read_text(path));
  lines.erase(lines.begin() + 2);  // e#2
  write_text(path, joined(lines));
  const JournalContents c = resumed(path);
  EXPECT_EQ(keys_of(c), (std::vector<std::string>{"e#1", "e#4"}));
  ASSERT_EQ(c.notices.size(), 1u);
  EXPECT_TRUE(has_notice(c, "line 3 (e#3) does not verify"));
  std::filesystem::remove(path);
}

TEST(Journal, ALineFromAnotherJournalOfTheSameManifestDoesNotVerify) {
  const std::string path = temp_path("mine"), other = temp_path("other");
  write_journal(path, 3);
  write_journal(other, 3);  // the same records, under another campaign id
  std::vector<std::string> lines = lines_of(read_text(path));
  const std::vector<std::string> theirs = lines_of(read_text(other));
  EXPECT_NE(lines[2], theirs[2]);
  lines[2] = theirs[2];
  write_text(path, joined(lines));
  const JournalContents c = resumed(path);
  // Their line does not chain to ours, and ours after it no longer chains to its predecessor.
  EXPECT_EQ(keys_of(c), (std::vector<std::string>{"e#1"}));
  EXPECT_TRUE(has_notice(c, "line 3 (e#2)"));
  EXPECT_TRUE(has_notice(c, "line 4 (e#3)"));
  std::filesystem::remove(path);
  std::filesystem::remove(other);
}

TEST(Journal, NewRecordsAfterAnUntrustedLastLineStartANewHeaderAndAreTrusted) {
  const std::string path = temp_path("restart");
  write_journal(path, 2);
  std::vector<std::string> lines = lines_of(read_text(path));
  lines[2].replace(lines[2].find("FAIL"), 4, "PASS");
  write_text(path, joined(lines));
  {
    JournalContents c;
    Result<Journal> j = Journal::resume(path, kManifestHash, &c);
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(keys_of(c), (std::vector<std::string>{"e#1"}));
    ASSERT_TRUE(j->append(record("e#2", "FAIL")).ok());
  }
  const std::vector<std::string> after = lines_of(read_text(path));
  ASSERT_EQ(after.size(), 5u);
  EXPECT_EQ(Json::parse(after[3]).at("line").at("ncert_campaign_journal"), 2);
  const JournalContents c = resumed(path);
  EXPECT_EQ(keys_of(c), (std::vector<std::string>{"e#1", "e#2"}));
  EXPECT_EQ(c.records[1].result.at("verdict"), "FAIL");
  EXPECT_EQ(c.notices.size(), 1u);  // the edited line is still there, still named
  std::filesystem::remove(path);
}

TEST(Journal, ATornLastLineIsDroppedWithoutANotice) {
  const std::string path = temp_path("torn");
  write_journal(path, 2);
  const std::string text = read_text(path);
  write_text(path, text + "{\"sum\":\"0123");
  const JournalContents c = resumed(path);
  EXPECT_EQ(keys_of(c), (std::vector<std::string>{"e#1", "e#2"}));
  EXPECT_TRUE(c.notices.empty());
  EXPECT_EQ(read_text(path), text);
  std::filesystem::remove(path);
}

TEST(Journal, AFormatOneJournalIsReadAsUntrustedLinesNotAnError) {
  // Journals as ncert wrote them before lines carried checksums: with and without "wire" (the
  // latter while evidence travelled as its rendered stats), a record in each.
  const std::string record_line = "{\"key\":\"c#run\",\"result\":{\"report\":{\"checks\":[]}}}\n";
  for (const std::string& wire : {std::string(), std::string("\"wire\":2,")}) {
    const std::string path = temp_path("format1");
    write_text(path, "{\"ncert_campaign_journal\":1," + wire + "\"manifest_xxh3_128\":\"" + kManifestHash + "\"}\n" +
                         record_line + record_line);
    {
      JournalContents c;
      Result<Journal> j = Journal::resume(path, kManifestHash, &c);
      ASSERT_TRUE(j.ok()) << j.status().to_string();
      EXPECT_TRUE(c.records.empty());
      ASSERT_EQ(c.notices.size(), 1u);
      EXPECT_TRUE(has_notice(c,
                             "line 1 starts a journal written before journal lines carried checksums (format "
                             "1): none of its 2 records is trusted"))
          << c.notices[0];
      ASSERT_TRUE(j->append(record("c#run", "PASS")).ok());
    }
    const JournalContents c = resumed(path);
    EXPECT_EQ(keys_of(c), (std::vector<std::string>{"c#run"}));
    EXPECT_EQ(c.records[0].line, 5u);
    std::filesystem::remove(path);
  }
}

TEST(Journal, ANewJournalReplacesTheOneThereWholeAndLeavesNothingBeside) {
  const std::string path = temp_path("replaced");
  write_journal(path, 3);
  ASSERT_EQ(resumed(path).records.size(), 3u);
  {
    Result<Journal> j = Journal::create(path, kManifestHash);
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    // From the moment create() returns, the path holds the new journal: its header alone.
    EXPECT_EQ(lines_of(read_text(path)).size(), 1u);
    ASSERT_TRUE(j->append(record("e#9", "PASS")).ok());
  }
  EXPECT_EQ(keys_of(resumed(path)), std::vector<std::string>{"e#9"});
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(f.path().string().find(path + ".new"), std::string::npos) << f.path();
  }
  std::filesystem::remove(path);
}

TEST(Journal, OnlyAJournalOrAnEmptyFileIsReplacedByANewOne) {
  // `--journal notes.txt`, or a stray file named <manifest>.journal under --state: kept, and
  // refused as output-exists, naming what the file is.
  const std::string hdf5_magic("\x89HDF\r\n\x1a\n\0\0", 10);
  for (const auto& [name, text, what] :
       {std::tuple<std::string, std::string, std::string>{"notes", "my precious notes\n", "not a campaign journal"},
        {"dump", hdf5_magic, "an HDF5 file"},
        {"lookalike", "{\"sum\":\"not hex at all, but 32 characters\",\"line\":{}}\n", "not a campaign journal"},
        {"report", "{\n  \"tool\": \"ncert\"\n}\n", "not a campaign journal"}}) {
    const std::string path = temp_path("not-a-journal-" + name);
    write_text(path, text);
    const Result<Journal> j = Journal::create(path, kManifestHash);
    ASSERT_FALSE(j.ok()) << name;
    EXPECT_EQ(j.status().code(), ErrorCode::kOutputExists) << name;
    EXPECT_EQ(j.status().message(), path + " exists and is " + what +
                                        ": refusing to replace it with a campaign journal (remove it, or give "
                                        "another --journal or --state)");
    EXPECT_EQ(read_text(path), text) << name;
    std::filesystem::remove(path);
  }
  // An empty file, a journal of format 2 (of any manifest) and one of format 1 are replaced.
  const std::string empty = temp_path("empty-journal");
  write_text(empty, "");
  const std::string format2 = temp_path("format2-journal");
  write_journal(format2, 2);
  const std::string format1 = temp_path("format1-journal");
  write_text(format1, "{\"ncert_campaign_journal\":1,\"manifest_xxh3_128\":\"" + std::string(32, 'f') + "\"}\n");
  for (const std::string& path : {empty, format2, format1}) {
    {
      Result<Journal> j = Journal::create(path, kManifestHash);
      ASSERT_TRUE(j.ok()) << path << ": " << j.status().to_string();
    }
    EXPECT_TRUE(resumed(path).records.empty()) << path;
    std::filesystem::remove(path);
  }
}

TEST(Journal, AJournalARunningCampaignHoldsIsNeitherReplacedNorResumed) {
  const std::string path = temp_path("held");
  Result<Journal> running = Journal::create(path, kManifestHash);
  ASSERT_TRUE(running.ok()) << running.status().to_string();
  ASSERT_TRUE(running->append(record("e#1", "FAIL")).ok());
  const Result<Journal> replacing = Journal::create(path, kManifestHash);
  ASSERT_FALSE(replacing.ok());
  EXPECT_EQ(replacing.status().code(), ErrorCode::kOutputExists);
  EXPECT_NE(replacing.status().message().find("another campaign is running"), std::string::npos);
  JournalContents c;
  const Result<Journal> resuming = Journal::resume(path, kManifestHash, &c);
  ASSERT_FALSE(resuming.ok());
  EXPECT_EQ(resuming.status().code(), ErrorCode::kOutputExists);
  // The running campaign's journal is untouched; once it ends, the journal resumes.
  running = Journal::create(temp_path("held-other"), kManifestHash);
  EXPECT_EQ(keys_of(resumed(path)), std::vector<std::string>{"e#1"});
  std::filesystem::remove(path);
  std::filesystem::remove(temp_path("held-other"));
}

TEST(Journal, AForkedChildHoldsNoLockOnceTheCampaignLetsItsJournalGo) {
  // The lock belongs to the open file, which a forked work item's copy of the descriptor kept
  // locked after the campaign was killed, until the child ended: a resume right then was refused
  // as "another campaign is running" (a review's, 1 time in 40). Children close their copies.
  const std::string path = temp_path("forked");
  std::optional<Journal> running;
  {
    Result<Journal> made = Journal::create(path, kManifestHash);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    running.emplace(std::move(made).value());
  }
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c = 1;
    (void)!::write(ready[1], &c, 1);
    (void)!::read(release[0], &c, 1);  // alive until the parent has tried
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  running.reset();  // the campaign lets its journal go while its child still runs
  JournalContents contents;
  const Result<Journal> resumed_now = Journal::resume(path, kManifestHash, &contents);
  EXPECT_TRUE(resumed_now.ok()) << resumed_now.status().to_string();
  (void)!::write(release[1], &c, 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  for (int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);
  std::filesystem::remove(path);
}

TEST(Journal, AnEmptyFileIsNoJournalToResumeAndADanglingLinkIsRefused) {
  // An empty file is what a campaign stopped between placing the journal and writing its header
  // leaves: resumed, it reads as no journal (it said "has no journal header", a usage error).
  const std::string path = temp_path("empty");
  write_text(path, "");
  JournalContents contents;
  const Result<Journal> r = Journal::resume(path, kManifestHash, &contents);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kFileNotFound);
  EXPECT_NE(r.status().message().find("no campaign journal to resume (the file is empty"), std::string::npos);
  std::filesystem::remove(path);
  // A symbolic link to nothing at the journal's path: refused, naming it (replacing it would
  // leave no file to lock, and two campaigns started together could both run; it was an io
  // error once the path was opened to be locked).
  const std::string link = temp_path("dangling");
  std::filesystem::remove(link);
  std::filesystem::create_symlink(temp_path("nowhere"), link);
  const Result<Journal> made = Journal::create(link, kManifestHash);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), ErrorCode::kOutputExists);
  EXPECT_NE(made.status().message().find("is a symbolic link to a file that does not exist"), std::string::npos)
      << made.status().to_string();
  EXPECT_TRUE(std::filesystem::is_symlink(std::filesystem::symlink_status(link)));
  EXPECT_FALSE(std::filesystem::exists(temp_path("nowhere")));
  std::filesystem::remove(link);
}

TEST(Journal, AJournalOfAnotherManifestOrWireVersionIsRefused) {
  const std::string path = temp_path("refused");
  write_journal(path, 1);
  JournalContents c;
  const Result<Journal> other = Journal::resume(path, std::string(32, 'f'), &c);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kUsage);
  EXPECT_NE(other.status().message().find("another manifest"), std::string::npos);
  // A header of a later wire version: refused before any record is read.
  std::vector<std::string> lines = lines_of(read_text(path));
  Json header = Json::parse(lines[0]);
  header["line"]["wire"] = 99;
  lines[0] = header.dump();
  write_text(path, joined(lines));
  const Result<Journal> later = Journal::resume(path, kManifestHash, &c);
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), ErrorCode::kUsage);
  EXPECT_NE(later.status().message().find("wire format 99"), std::string::npos) << later.status().message();
  EXPECT_NE(later.status().message().find("this one reads format " + std::to_string(kWireVersion)), std::string::npos);
  EXPECT_TRUE(c.records.empty());
  // A file that is no journal at all.
  write_text(path, "{\"hello\":1}\n");
  const Result<Journal> none = Journal::resume(path, kManifestHash, &c);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kUsage);
  std::filesystem::remove(path);
}

TEST(Journal, AResultThatDoesNotDecodeIsOneFailedEntry) {
  Manifest m;
  m.path = "campaign.json";
  m.name = "wire";
  m.entries.push_back(CampaignEntry{"compare-0", EntryKind::kCompare, {"a.h5", "b.h5"}, {}});
  m.entries.push_back(CampaignEntry{"witness-1", EntryKind::kWitness, {"w.h5"}, {}});
  CampaignRun run(m, CampaignSettings{}, {});
  // A run item's result in the untyped wire form: its check has "check" and "stats", no evidence.
  const Json old_report = Json::parse(R"({"command": "compare", "inputs": [], "checks": [{"check":
      {"id": "logits/greedy", "kind": "logits", "verdict": "PASS", "reason": "ok", "stats": {}},
      "subject": "", "always_show_details": false}], "stats": {}, "extra": {}, "preamble": [],
      "show_coverage": false})");
  ASSERT_TRUE(run.finish("compare-0#run", Json{{"report", old_report}}, 0).ok());
  ASSERT_TRUE(run.finish("witness-1#run", Json{{"report", report_to_wire(witness_report())}}, 0).ok());
  const Report merged = run.report();
  ASSERT_EQ(merged.entries.size(), 2u);
  EXPECT_EQ(merged.entries[0].report.verdict(), Verdict::kFail);
  ASSERT_TRUE(merged.entries[0].report.error.has_value());
  EXPECT_NE(merged.entries[0].report.error->message().find("not a wire check"), std::string::npos);
  EXPECT_EQ(merged.entries[1].report.verdict(), Verdict::kPass);
  const Json entries = merged.to_json().at("entries");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].at("verdict"), "FAIL");
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
