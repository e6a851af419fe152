#include "certify/io/bytes.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <utility>

#include "reference/large_block.h"

namespace ncert::certify {

Bytes::Bytes(std::size_t n) {
  if (n == 0) return;
  block_ = allocate_large_block(n);
  block_len_ = n;
  data_ = static_cast<std::uint8_t*>(block_);
  size_ = n;
  kind_ = Kind::kOwned;
}

std::optional<Bytes> Bytes::map_file(int fd, std::uint64_t offset, std::size_t n) {
  if (n == 0) return Bytes();
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t aligned = offset - offset % page;
  const std::size_t len = static_cast<std::size_t>(offset - aligned) + n;
  // Read-only: MAP_POPULATE on a writable private mapping would fault every page for writing,
  // copying the whole dataset (what mapping is meant to avoid). One call maps every page,
  // ~3x cheaper than faulting 4 KiB at a time.
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, static_cast<off_t>(aligned));
  if (m == MAP_FAILED) return std::nullopt;
  Bytes b;
  b.block_ = m;
  b.block_len_ = len;
  b.data_ = static_cast<std::uint8_t*>(m) + (offset - aligned);
  b.size_ = n;
  b.kind_ = Kind::kMapped;
  return b;
}

Bytes::Bytes(const Bytes& other) : Bytes(other.size_) {
  if (size_ > 0) std::memcpy(data_, other.data_, size_);
}

Bytes& Bytes::operator=(const Bytes& other) {
  if (this != &other) *this = Bytes(other);
  return *this;
}

Bytes::Bytes(Bytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      block_(std::exchange(other.block_, nullptr)),
      block_len_(std::exchange(other.block_len_, 0)),
      kind_(std::exchange(other.kind_, Kind::kNone)) {}

Bytes& Bytes::operator=(Bytes&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    block_ = std::exchange(other.block_, nullptr);
    block_len_ = std::exchange(other.block_len_, 0);
    kind_ = std::exchange(other.kind_, Kind::kNone);
  }
  return *this;
}

Bytes::~Bytes() { release(); }

std::uint8_t* Bytes::mutable_data() {
  if (kind_ == Kind::kMapped) {
    // Private mapping: pages written from now on are copied for this process alone. If the
    // system refuses, a copy in memory serves instead.
    if (::mprotect(block_, block_len_, PROT_READ | PROT_WRITE) == 0) {
      kind_ = Kind::kWritableMap;
    } else {
      *this = Bytes(static_cast<const Bytes&>(*this));
    }
  }
  return data_;
}

void Bytes::release() noexcept {
  switch (kind_) {
    case Kind::kOwned:
      free_large_block(block_, block_len_);
      break;
    case Kind::kMapped:
    case Kind::kWritableMap:
      ::munmap(block_, block_len_);
      break;
    case Kind::kNone:
      break;
  }
  data_ = nullptr;
  size_ = 0;
  block_ = nullptr;
  block_len_ = 0;
  kind_ = Kind::kNone;
}

}  // namespace ncert::certify
