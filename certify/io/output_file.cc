#include "certify/io/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace ncert::certify {

std::string temporary_beside(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path target(path);
  std::string leaf = ".";  // appended, not concatenated: GCC 12's -Wrestrict misreads the sum
  leaf.append(target.filename().string());
  for (const std::string& part : {std::to_string(::getpid()), std::to_string(counter++), std::string("partial")}) {
    leaf += '.';
    leaf += part;
  }
  return (target.parent_path() / leaf).string();
}

Status move_into_place(const std::string& temp, const std::string& path, bool overwrite, std::string_view what) {
  const auto placed = [&]() -> int {
    if (overwrite) return ::rename(temp.c_str(), path.c_str());
    if (::link(temp.c_str(), path.c_str()) == 0) return 0;
    // A file system without hard links (EPERM, ENOTSUP on some FUSE and network mounts): the
    // rename, after one more look that nothing appeared at the name.
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP) return -1;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      errno = EEXIST;
      return -1;
    }
    return ::rename(temp.c_str(), path.c_str());
  };
  if (placed() == 0) return Status();
  const int err = errno;
  if (err == EEXIST) return Status(ErrorCode::kOutputExists, path + ": exists; refusing to overwrite it");
  return Status(ErrorCode::kIo, path + ": cannot move " + std::string(what) + " to its name: " + std::strerror(err));
}

}  // namespace ncert::certify
