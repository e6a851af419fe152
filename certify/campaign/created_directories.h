// This header defines CreatedDirectories: directories a campaign makes for its journal (--state
// DIR, or --journal's parent), removed again when the run leaves them empty, so that a refused
// run (a manifest that does not load, a journal that does not resume) leaves the file system as
// it found it.
#pragma once

#include <filesystem>
#include <system_error>
#include <vector>

namespace ncert::certify {

class CreatedDirectories {
 public:
  CreatedDirectories() = default;
  CreatedDirectories(const CreatedDirectories&) = delete;
  CreatedDirectories& operator=(const CreatedDirectories&) = delete;
  /// Removes each directory create() made that is empty by now, innermost first; one that holds
  /// anything (the journal, a file the user put there meanwhile) stays, and so do its parents.
  ~CreatedDirectories();

  /// std::filesystem::create_directories(dir), remembering the levels that did not exist.
  std::error_code create(const std::filesystem::path& dir);

 private:
  std::vector<std::filesystem::path> made_;  ///< outermost first
};

}  // namespace ncert::certify
