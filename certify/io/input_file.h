// This header defines how ncert opens a file it reads (dumps, weights dumps, witness files,
// manifests, vocabularies): only a regular file is read, and an HDF5 file only up to a little
// past the end its own superblock declares (docs/cli.md "Inputs").
//
// - The open is non-blocking and fstat decides before a byte is read, so a FIFO, socket or
//   device named as an input is refused at once (not-regular-file, 106) instead of blocking the
//   command forever: opening a FIFO for reading waits for a writer, reading a terminal waits for
//   a line.
// - An HDF5 file's superblock records its end-of-file address; HDF5 never reads past it. A file
//   whose apparent size exceeds that end by more than kTrailingBytesAllowed (a dump followed by
//   `truncate -s 64G`: 150 KB on disk, 64 GiB to hash) is refused (trailing-data, 219) without
//   reading the tail. A file without a readable superblock is not judged here: it is then not an
//   HDF5 file (a manifest, a vocabulary) or one HDF5 itself refuses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "reference/status.h"

namespace ncert::certify {

/// How far an HDF5 file may extend past its end-of-file address: 1 MiB. HDF5 truncates a file
/// to that address when it closes it, so a file written by HDF5 has none; the margin leaves room
/// for a writer that pads its last block, and costs under a millisecond to hash.
inline constexpr std::uint64_t kTrailingBytesAllowed = std::uint64_t{1} << 20;

/// Reads `size` bytes of `fd` from `offset` into `dst` with pread, retrying short reads and
/// EINTR; returns how many it read, fewer only at the end of the file or on an error (`error`
/// then holds errno, else 0). Every pread loop of the reader, the row streams and the file
/// hash is this one.
std::size_t read_at_most(int fd, std::uint64_t offset, void* dst, std::size_t size, int& error);

/// A regular file open read-only (the descriptor is closed with the object).
class InputFile {
 public:
  /// kFileNotFound (missing), kNotRegularFile (a FIFO, socket, device or directory: nothing is
  /// read and the open never blocks), kTrailingData (an HDF5 file more than
  /// kTrailingBytesAllowed past its end-of-file address), kIo (any other failure); each message
  /// names the path.
  static Result<InputFile> open(const std::string& path);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }  ///< the apparent size (st_size)
  /// The superblock's end-of-file address of an HDF5 file (certify::hdf5_end_of_file).
  std::optional<std::uint64_t> hdf5_end() const { return hdf5_end_; }

  /// kInputChanged unless `other_fd` is open on this same file (device and inode): ncert checks
  /// a path, then libhdf5 opens it by name; a file renamed over the path in between would be
  /// read in place of the one checked. kIo when either cannot be stat'ed.
  Status same_file_as(int other_fd) const;

  /// The whole file as text, for inputs read whole (manifests, vocabularies); kIo on failure.
  Result<std::string> read_all() const;

 private:
  InputFile(std::string path, int fd, std::uint64_t size, std::optional<std::uint64_t> hdf5_end);
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::optional<std::uint64_t> hdf5_end_;
};

/// What a path that is not a regular file is ("a FIFO", "a socket", "a character device", "a
/// block device", "a directory"), from its st_mode.
std::string file_kind_name(unsigned mode);

/// The end of an HDF5 file's data: its superblock's end-of-file address (HDF5 File Format
/// Specification, superblock versions 0-3; stored absolute, a user block included), from the
/// superblock where HDF5 looks for the signature (offset 0, then 512, 1024, 2048, ...). nullopt
/// when there is no signature or the superblock cannot be read.
std::optional<std::uint64_t> hdf5_end_of_file(int fd, std::uint64_t size);

}  // namespace ncert::certify
