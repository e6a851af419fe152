#include "certify/io/hash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "certify/io/input_file.h"

// xxHash compiled inline here (its documented XXH_INLINE_ALL mode) rather than called in
// Debian's libxxhash: built with this project's -march, XXH3 uses AVX2/AVX-512 and hashes
// ~1.5x faster (docs/performance.md). Same algorithm, same values (the known-vector tests).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ncert::certify {

namespace {
std::string canonical_hex(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static const char* kDigits = "0123456789abcdef";
  std::string out(32, '0');
  for (std::size_t i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[c.digest[i] >> 4];
    out[2 * i + 1] = kDigits[c.digest[i] & 0xF];
  }
  return out;
}
}  // namespace

std::string xxh3_128_hex(const void* data, std::size_t size) { return canonical_hex(XXH3_128bits(data, size)); }

struct Xxh3Stream::State {
  XXH3_state_t s;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_128bits_reset(&state_->s); }
Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::update(const void* data, std::size_t size) { XXH3_128bits_update(&state_->s, data, size); }

std::string Xxh3Stream::hex() const { return canonical_hex(XXH3_128bits_digest(&state_->s)); }

struct FileHashCursor::Impl {
  std::string path;
  int fd = -1;
  std::uint64_t size = 0;
  std::uint64_t pos = 0;  // bytes [0, pos) are hashed
  Xxh3Stream stream;
  std::unique_ptr<unsigned char[]> buffer;  // 1 MiB, allocated at the first read

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  /// Hashes [pos, to) from the file, read in 1 MiB blocks into one reused buffer (cat's own
  /// loop): the kernel copies from the page cache through its mapping of all memory, and the
  /// hash reads the block from the cache. 1 GiB of compare's logits hashed at 10.3 GB/s this
  /// way against 2.6-2.9 GB/s through populated mappings of the file (8 MiB windows or one
  /// mapping), whose pages each cost this machine's virtual memory a first-touch fault in
  /// user space (docs/performance.md, "Hashing and streaming by pread").
  Status hash_file_to(std::uint64_t to) {
    constexpr std::size_t kBlock = std::size_t{1} << 20;
    if (!buffer) buffer = std::make_unique<unsigned char[]>(kBlock);
    while (pos < to) {
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, to - pos));
      int error = 0;
      const std::size_t got = read_at_most(fd, pos, buffer.get(), want, error);
      if (error != 0) return Status(ErrorCode::kIo, path + ": cannot read: " + std::strerror(error));
      if (got < want) {
        return Status(ErrorCode::kIo, path + ": ends at byte " + std::to_string(pos + got) + " of " +
                                          std::to_string(size) + ": the file shrank while it was read");
      }
      stream.update(buffer.get(), got);
      pos += got;
    }
    return Status::ok_status();
  }
};

FileHashCursor::FileHashCursor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FileHashCursor::FileHashCursor(FileHashCursor&&) noexcept = default;
FileHashCursor& FileHashCursor::operator=(FileHashCursor&&) noexcept = default;
FileHashCursor::~FileHashCursor() = default;

Result<FileHashCursor> FileHashCursor::open(const std::string& path) {
  // Only a regular file, opened without blocking, and never an HDF5 file that extends far past
  // its end-of-file address (certify/io/input_file.h): hashing reads every byte up to size.
  NCERT_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->fd = ::dup(file.fd());
  if (impl->fd < 0) return Status(ErrorCode::kIo, path + ": cannot open: " + std::strerror(errno));
  impl->size = file.size();
  return FileHashCursor(std::move(impl));
}

Status FileHashCursor::offer(std::uint64_t offset, const void* data, std::size_t size) {
  Impl& s = *impl_;
  const std::uint64_t end = std::min<std::uint64_t>(offset + size, s.size);
  if (end <= s.pos) return Status::ok_status();  // already hashed
  NCERT_RETURN_IF_ERROR(s.hash_file_to(offset));
  s.stream.update(static_cast<const unsigned char*>(data) + (s.pos - offset), static_cast<std::size_t>(end - s.pos));
  s.pos = end;
  return Status::ok_status();
}

Result<std::string> FileHashCursor::finish() {
  NCERT_RETURN_IF_ERROR(impl_->hash_file_to(impl_->size));
  return impl_->stream.hex();
}

Result<std::string> file_xxh3_128(const std::string& path) {
  NCERT_ASSIGN_OR_RETURN(FileHashCursor cursor, FileHashCursor::open(path));
  return cursor.finish();
}

InputHashes::InputHashes(const std::vector<std::string>& paths) : paths_(paths), cursors_(paths.size()) {
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (auto c = FileHashCursor::open(paths[i]); c.ok()) cursors_[i] = std::move(*c);
  }
}

FileHashCursor* InputHashes::cursor(std::size_t i) {
  return i < cursors_.size() && cursors_[i] ? &*cursors_[i] : nullptr;
}

std::vector<InputInfo> InputHashes::finish(bool serial) {
  std::vector<InputInfo> out(paths_.size());
  const auto n = static_cast<std::ptrdiff_t>(paths_.size());
#pragma omp parallel for schedule(dynamic, 1) if (!serial)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    out[k].path = paths_[k];
    if (!cursors_[k]) continue;
    if (auto h = cursors_[k]->finish(); h.ok()) out[k].xxh3_128 = *h;
  }
  cursors_.clear();
  return out;
}

std::vector<InputInfo> describe_inputs(const std::vector<std::string>& paths, bool serial) {
  return InputHashes(paths).finish(serial);
}

}  // namespace ncert::certify
