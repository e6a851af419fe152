// Campaign manifests (certify/campaign/manifest.h) refuse what JSON accepts but a manifest must
// not: a key given twice in one object (JSON keeps the last value and drops the first without
// a word) and a string holding NUL ("\u0000": the C library reads a path only up to it, so
// "good.h5\u0000x" would certify good.h5). Each refusal is a usage error naming the entry by
// its id, and the key.
#include "certify/campaign/manifest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ncert::certify {
namespace {

/// `text` written as a manifest in the temporary directory; its path.
std::string manifest(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("ncert-manifest-test-" + std::to_string(::getpid()) + "-" + name + ".json");
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

/// The usage error loading `text` ends in: its message without the manifest's path.
std::string refusal(const std::string& name, const std::string& text) {
  const std::string path = manifest(name, text);
  const Result<Manifest> m = load_manifest(path);
  std::filesystem::remove(path);
  if (m.ok()) return "accepted";
  EXPECT_EQ(m.status().code(), ErrorCode::kUsage) << m.status().to_string();
  const std::string message = m.status().message();
  return message.rfind(path + ": ", 0) == 0 ? message.substr(path.size() + 2) : message;
}

TEST(Manifest, AKeyGivenTwiceIsRefusedNamingTheEntryAndTheKey) {
  EXPECT_EQ(refusal("dup-entry", R"({"ncert_campaign": 1, "entries": [{"id": "a", "check": "bad.h5", "strict": true,)"
                                 R"( "check": "good.h5"}]})"),
            "entry a: the key \"check\" is given twice (JSON keeps only the last value: give each key once)");
  // Before the id is read, and in the second entry: named by its place.
  EXPECT_EQ(
      refusal("dup-second", R"({"ncert_campaign": 1, "entries": [{"check": "a.h5"}, {"check": "b.h5", "lambda": 2,)"
                            R"( "lambda": 3}]})"),
      "entries[1]: the key \"lambda\" is given twice (JSON keeps only the last value: give each key once)");
  EXPECT_EQ(refusal("dup-defaults",
                    R"({"ncert_campaign": 1, "defaults": {"lambda": 2, "lambda": 3}, "entries": [{"check": "a.h5"}]})"),
            "\"defaults\": the key \"lambda\" is given twice (JSON keeps only the last value: give each key once)");
  EXPECT_EQ(
      refusal("dup-top", R"({"ncert_campaign": 1, "entries": [{"check": "a.h5"}], "entries": [{"check": "b.h5"}]})"),
      "the top level: the key \"entries\" is given twice (JSON keeps only the last value: give each key once)");
  // The same key in two objects is no repetition.
  EXPECT_EQ(
      refusal("no-dup",
              R"({"ncert_campaign": 1, "entries": [{"id": "a", "check": "a.h5"}, {"id": "b", "check": "b.h5"}]})"),
      "accepted");
}

TEST(Manifest, ANameThatIsNotAStringIsAUsageError) {
  // A number was an internal error (exit 4) and left no report (a review's).
  for (const auto& [name, shown] :
       {std::pair<const char*, const char*>{"5", "5"}, {"null", "null"}, {"{}", "{}"}, {"\"\"", "\"\""}}) {
    EXPECT_EQ(refusal("name", std::string(R"({"ncert_campaign": 1, "name": )") + name +
                                  R"(, "entries": [{"id": "a", "check": "a.h5"}]})"),
              std::string("\"name\" must be a non-empty string, not ") + shown);
  }
  EXPECT_EQ(refusal("name-ok", R"({"ncert_campaign": 1, "name": "m", "entries": [{"id": "a", "check": "a.h5"}]})"),
            "accepted");
}

TEST(Manifest, AnEmptyInputPathIsAUsageErrorNamingTheEntryByPlace) {
  // It failed its entry at run time: "file-not-found (103): : no such file" (a review's).
  EXPECT_EQ(refusal("empty-check", R"({"ncert_campaign": 1, "entries": [{"id": "a", "check": ""}]})"),
            "entries[0]: \"check\": an empty path names no file");
  EXPECT_EQ(refusal("empty-compare", R"({"ncert_campaign": 1, "entries": [{"id": "c", "compare": ["a.h5", ""]}]})"),
            "entries[0]: \"compare\": an empty path names no file");
}

TEST(Manifest, AStringHoldingNulIsRefusedNamingTheEntryAndTheKey) {
  EXPECT_EQ(refusal("nul-input", R"({"ncert_campaign": 1, "entries": [{"id": "a", "check": "good.h5\u0000 x"}]})"),
            "entry a: \"check\" holds a NUL character (\\u0000), which no path or option may contain");
  EXPECT_EQ(refusal("nul-weights",
                    R"({"ncert_campaign": 1, "entries": [{"id": "b", "check": "s.h5", "weights": "w.h5\u0000"}]})"),
            "entry b: \"weights\" holds a NUL character (\\u0000), which no path or option may contain");
  EXPECT_EQ(
      refusal("nul-pair", R"({"ncert_campaign": 1, "entries": [{"id": "c", "compare": ["a.h5", "b.h5\u0000"]}]})"),
      "entry c: \"compare\" holds a NUL character (\\u0000), which no path or option may contain");
  EXPECT_EQ(refusal("nul-id", R"({"ncert_campaign": 1, "entries": [{"id": "a\u0000b", "check": "a.h5"}]})"),
            "entries[0]: \"id\" holds a NUL character (\\u0000), which no path or option may contain");
  EXPECT_EQ(refusal("nul-top", R"({"ncert_campaign": 1, "weights": "w\u0000.h5", "entries": [{"check": "a.h5"}]})"),
            "the top level: \"weights\" holds a NUL character (\\u0000), which no path or option may contain");
}

}  // namespace
}  // namespace ncert::certify
