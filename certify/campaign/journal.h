// This header defines a campaign's journal: one line per finished work item, each written whole
// (O_APPEND, then fdatasync) before the item counts as done, so a campaign killed at any moment
// resumes (--resume) without redoing finished items and ends in the same report.
//
// Format 2 (docs/campaigns.md "Journal"): every line is {"sum": S, "line": R}, R a JSON object
// and S the XXH3-128 (32 hex digits) of the previous line's S followed by R's bytes as written.
// The first line's R is the header (format, wire version, the manifest's content hash and a
// random campaign id) and its S chains to the manifest's hash instead. A record's R holds the
// item's key, the content hashes of the files it read ({path: xxh3_128}) and its result. A
// line that was edited, removed (the line after it no longer verifies), moved or copied from
// another journal does not verify: it is never trusted, its item runs again and the campaign's
// report names the line. The checksum detects such changes; it is no signature: whoever can run
// this algorithm can write a journal that verifies, so a journal is as trusted as its directory.
// A journal of format 1 (no checksums) is read as untrusted lines: everything runs again.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/status.h"

namespace ncert::certify {

struct JournalRecord {
  std::string key;                ///< the work item ("<entry>#plan", "<entry>#unit:<p>", ...)
  nlohmann::ordered_json inputs;  ///< the files it read: {path: XXH3-128 of their bytes}
  nlohmann::ordered_json result;  ///< what the item produced (or its error)
  std::string batch;              ///< the batch it ran in ("" alone): a record of how, not what
  std::size_t line = 0;           ///< its line number (from 1, the header) when read back
};

/// What a journal holds, read back for --resume.
struct JournalContents {
  std::vector<JournalRecord> records;  ///< lines that verify, in order
  std::vector<std::string> notices;    ///< one per line (or run of lines) not trusted, naming it
};

class Journal {
 public:
  /// A new journal at `path`, replacing the one there (written beside it, then renamed over it
  /// once its header is on disk). kOutputExists when a running campaign holds that journal, or
  /// when the file there is not a journal (nor empty): --journal never replaces another file.
  static Result<Journal> create(const std::string& path, const std::string& manifest_xxh3);
  /// An existing journal and its records (a torn last line, from a kill mid-write, is dropped
  /// and the file cut back to the last whole line). kUsage when it belongs to another manifest,
  /// holds results of another wire format, or does not start with a journal header. New lines
  /// continue its chain, or start a new header when its last line is not a trusted one.
  /// kOutputExists when a running campaign holds it.
  static Result<Journal> resume(const std::string& path, const std::string& manifest_xxh3, JournalContents* contents);

  Journal(Journal&& o) noexcept;
  Journal& operator=(Journal&& o) noexcept;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal();

  /// Appends one record, chained to the line before it, and flushes it to the disk.
  Status append(const JournalRecord& record);

 private:
  Journal(std::string path, int fd, std::string last_sum)
      : path_(std::move(path)), fd_(fd), last_sum_(std::move(last_sum)) {}
  /// Appends {"sum", "line": body} chained to `prev`; the new line's sum becomes last_sum_.
  Status append_line(const std::string& prev, const std::string& body);
  std::string path_;
  int fd_ = -1;
  std::string last_sum_;  ///< the sum of the journal's last line
};

/// The sum of a journal line whose body is `body`, after a line whose sum is `prev` (the
/// manifest's hash for the header).
std::string journal_line_sum(const std::string& prev, const std::string& body);

}  // namespace ncert::certify
