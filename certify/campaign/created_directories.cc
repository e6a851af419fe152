#include "certify/campaign/created_directories.h"

#include <algorithm>

namespace ncert::certify {

CreatedDirectories::~CreatedDirectories() {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    std::error_code ec;
    // remove() takes an empty directory only: a non-empty one reports an error and stays.
    if (!std::filesystem::is_empty(*it, ec) || ec || !std::filesystem::remove(*it, ec) || ec) return;
  }
}

std::error_code CreatedDirectories::create(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> missing;  // innermost first
  // The real path of the part that exists (links followed), so that the levels recorded are the
  // ones create_directories makes; without the trailing separator, whose parent is itself.
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) return ec;
  p = std::filesystem::weakly_canonical(p, ec);
  if (!p.has_filename()) p = p.parent_path();
  for (; !ec && !p.empty(); p = p.parent_path()) {
    // A missing path reports ENOENT through ec as well as the not_found type.
    if (std::filesystem::symlink_status(p, ec).type() != std::filesystem::file_type::not_found) break;
    ec.clear();
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  if (ec) return ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ec;
  made_.insert(made_.end(), missing.rbegin(), missing.rend());
  return ec;
}

}  // namespace ncert::certify
