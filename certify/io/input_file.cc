#include "certify/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ncert::certify {

namespace {

constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/// Reads exactly `size` bytes at `offset`; false on a short read or an error.
bool read_at(int fd, std::uint64_t offset, void* dst, std::size_t size) {
  int error = 0;
  return read_at_most(fd, offset, dst, size, error) == size;
}

/// A little-endian address of `width` bytes (2, 4 or 8); nullopt for HDF5's undefined address
/// (all bits set).
std::optional<std::uint64_t> address(const unsigned char* p, std::size_t width) {
  std::uint64_t v = 0;
  bool all_ones = true;
  for (std::size_t i = 0; i < width; ++i) {
    v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    all_ones = all_ones && p[i] == 0xff;
  }
  if (all_ones) return std::nullopt;
  return v;
}

/// The end of data the superblock at `at` declares.
std::optional<std::uint64_t> superblock_end(int fd, std::uint64_t at) {
  // Versions 0 and 1: the size of offsets at byte 13, then (after 24 or 28 bytes) the base
  // address, the free-space address, the end-of-file address. Versions 2 and 3: the size of
  // offsets at byte 9, then at byte 12 the base address, the superblock extension address, the
  // end-of-file address.
  unsigned char sb[28 + 3 * 8] = {};
  if (!read_at(fd, at, sb, 16)) return std::nullopt;
  const unsigned version = sb[8];
  std::size_t width = 0;
  std::size_t base_at = 0;
  if (version == 0 || version == 1) {
    width = sb[13];
    base_at = version == 0 ? 24 : 28;
  } else if (version == 2 || version == 3) {
    width = sb[9];
    base_at = 12;
  } else {
    return std::nullopt;
  }
  if (width != 2 && width != 4 && width != 8) return std::nullopt;
  const std::size_t need = base_at + 3 * width;
  if (!read_at(fd, at, sb, need)) return std::nullopt;
  // The library writes the end-of-file address with the base address added (H5F__cache_
  // superblock_serialize encodes rel_eof + base_addr): the absolute end, user block included. A
  // file with a 4,096-byte user block and 806,144 bytes in all stores 806,144.
  return address(sb + base_at + 2 * width, width);
}

std::string size_text(std::uint64_t bytes) {
  char buf[48];
  if (bytes >= (std::uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
  } else if (bytes >= (std::uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1u << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

}  // namespace

std::size_t read_at_most(int fd, std::uint64_t offset, void* dst, std::size_t size, int& error) {
  auto* out = static_cast<unsigned char*>(dst);
  error = 0;
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = errno;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

std::string file_kind_name(unsigned mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

std::optional<std::uint64_t> hdf5_end_of_file(int fd, std::uint64_t size) {
  // HDF5 looks for its signature at 0 and at every power of two from 512 (a user block before
  // the superblock); H5Fis_hdf5 does the same.
  for (std::uint64_t at = 0; at + sizeof kSignature <= size; at = at == 0 ? 512 : at * 2) {
    unsigned char sig[sizeof kSignature];
    if (!read_at(fd, at, sig, sizeof sig)) return std::nullopt;
    if (std::memcmp(sig, kSignature, sizeof sig) == 0) return superblock_end(fd, at);
  }
  return std::nullopt;
}

InputFile::InputFile(std::string path, int fd, std::uint64_t size, std::optional<std::uint64_t> hdf5_end)
    : path_(std::move(path)), fd_(fd), size_(size), hdf5_end_(hdf5_end) {}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_),
      hdf5_end_(other.hdf5_end_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    hdf5_end_ = other.hdf5_end_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<InputFile> InputFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; O_NOCTTY: a
  // terminal never becomes the controlling one. fstat then decides on what was opened, so the
  // path cannot be swapped between the check and the use.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return Status(ErrorCode::kFileNotFound, path + ": no such file");
    // A socket cannot be opened at all (ENXIO); a FIFO without a reader's partner opens fine.
    if (err == ENXIO || err == EISDIR) {
      struct stat st {};
      const std::string what = ::stat(path.c_str(), &st) == 0 ? file_kind_name(st.st_mode) : "not a regular file";
      return Status(ErrorCode::kNotRegularFile,
                    path + ": " + what + ", not a regular file; refused without reading it");
    }
    return Status(ErrorCode::kIo, path + ": cannot open: " + std::strerror(err));
  }
  InputFile file(path, fd, 0, std::nullopt);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status(ErrorCode::kIo, path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kNotRegularFile,
                  path + ": " + file_kind_name(st.st_mode) + ", not a regular file; refused without reading it");
  }
  // Blocking reads from here on (a regular file never blocks anyway; this keeps the flag from
  // surprising a reader that later inherits the descriptor).
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  file.size_ = static_cast<std::uint64_t>(st.st_size);
  file.hdf5_end_ = hdf5_end_of_file(fd, file.size_);
  if (file.hdf5_end_ && file.size_ > *file.hdf5_end_ && file.size_ - *file.hdf5_end_ > kTrailingBytesAllowed) {
    const std::uint64_t end = *file.hdf5_end_;
    return Status(ErrorCode::kTrailingData,
                  path + ": " + std::to_string(file.size_) + " bytes (" + size_text(file.size_) +
                      "), but its HDF5 superblock ends the data at byte " + std::to_string(end) + ": " +
                      std::to_string(file.size_ - end) + " bytes past it (a sparse hole or appended data), over the " +
                      size_text(kTrailingBytesAllowed) + " allowed; refused without reading them");
  }
  return file;
}

Status InputFile::same_file_as(int other_fd) const {
  struct stat checked {};
  struct stat opened {};
  if (::fstat(fd_, &checked) != 0 || ::fstat(other_fd, &opened) != 0) {
    return Status(ErrorCode::kIo, path_ + ": cannot stat the file opened: " + std::strerror(errno));
  }
  if (opened.st_dev != checked.st_dev || opened.st_ino != checked.st_ino) {
    return Status(ErrorCode::kInputChanged, path_ +
                                                ": the file was replaced while ncert opened it (another file now has "
                                                "its name); certify a file nothing renames or writes to");
  }
  return Status();
}

Result<std::string> InputFile::read_all() const {
  std::string text(static_cast<std::size_t>(size_), '\0');
  int error = 0;
  const std::size_t done = read_at_most(fd_, 0, text.data(), text.size(), error);
  if (error != 0) return Status(ErrorCode::kIo, path_ + ": cannot read: " + std::strerror(error));
  text.resize(done);  // the file shrank under us: what is there
  return text;
}

}  // namespace ncert::certify
