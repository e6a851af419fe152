// This header defines a campaign's journal: one line per finished work item, each written whole
// (O_APPEND, then fdatasync) before the item counts as done, so a campaign killed at any moment
// resumes (--resume) without redoing finished items and ends in the same report. The first
// line binds the journal to the manifest's content hash: a changed manifest cannot resume.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/status.h"

namespace ncert::certify {

struct JournalRecord {
  std::string key;                ///< the work item ("<entry>#plan", "<entry>#unit:<p>", ...)
  nlohmann::ordered_json result;  ///< what the item produced (or its error)
  std::string batch;              ///< the batch it ran in ("" alone): a record of how, not what
};

class Journal {
 public:
  /// A new journal; kOutputExists if one is there already (resume it, or remove it).
  static Result<Journal> create(const std::string& path, const std::string& manifest_xxh3);
  /// An existing journal and its complete records (a torn last line, from a kill mid-write,
  /// is dropped and the file cut back to the last whole record). kUsage when it belongs to
  /// another manifest.
  static Result<Journal> resume(const std::string& path, const std::string& manifest_xxh3,
                                std::vector<JournalRecord>* records);

  Journal(Journal&& o) noexcept;
  Journal& operator=(Journal&& o) noexcept;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal();

  /// Appends one record and flushes it to the disk.
  Status append(const JournalRecord& record);

 private:
  Journal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace ncert::certify
