// Bytes: the buffer a dataset is read into, or the dataset's bytes mapped from the file itself.
//
// Read into: std::vector<std::uint8_t> value-initialises what it allocates, so reading a 337 MB
// weight dataset first zero-filled it (memset 23 % of a check's CPU, its page faults 24 %, by
// perf on tools/bench/bench_engine.py's dump) and then copied the file over the zeros. Bytes
// leaves a buffer uninitialised (each read fills it at once) and maps blocks of 1 MiB or more
// itself, asking for huge pages and populating them in one call instead of one fault per 4 KiB
// page: check's read of that dataset went from 1.35 s to 0.08-0.31 s.
//
// Mapped: a contiguous, unfiltered dataset's bytes are already in the page cache in the order a
// read would deliver them; mapping them there costs no copy at all (DumpReader::read_bytes, the
// file's own descriptor): check's reading of that dump went from 0.22-0.26 s to 0.021 s. The
// first pass over mapped bytes is slower than over a copy (about 6 GB/s here against 20-30: the
// page cache's 4 KiB pages), far less than the copy costs. Written through mutable_data(),
// a mapped Bytes becomes copy-on-write, page by page: the file is never changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace ncert::certify {

class Bytes {
 public:
  Bytes() = default;
  /// n bytes of this process's memory, uninitialised.
  explicit Bytes(std::size_t n);
  /// `n` bytes of the file open as `fd`, from `offset`, mapped read-only and populated; nullopt
  /// when the system refuses the mapping (the address-space limit, a file system without mmap).
  static std::optional<Bytes> map_file(int fd, std::uint64_t offset, std::size_t n);

  Bytes(const Bytes& other);  ///< a copy in memory, whatever `other` is
  Bytes& operator=(const Bytes& other);
  Bytes(Bytes&& other) noexcept;
  Bytes& operator=(Bytes&& other) noexcept;
  ~Bytes();

  const std::uint8_t* data() const { return data_; }
  /// Writable: a mapped Bytes is made copy-on-write first (the pages written become private;
  /// mapped() is false from then on). A separate name, so that reading through a non-const
  /// Bytes never makes its mapping writable (which commits memory for it). Not thread-safe.
  std::uint8_t* mutable_data();
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::uint8_t* begin() const { return data_; }
  const std::uint8_t* end() const { return data_ + size_; }
  const std::uint8_t& operator[](std::size_t i) const { return data_[i]; }
  bool mapped() const { return kind_ == Kind::kMapped; }  ///< a read-only mapping of the file

 private:
  enum class Kind : std::uint8_t { kNone, kOwned, kMapped, kWritableMap };
  void release() noexcept;

  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  void* block_ = nullptr;  ///< what was allocated or mapped (a mapping starts at a page boundary)
  std::size_t block_len_ = 0;
  Kind kind_ = Kind::kNone;
};

}  // namespace ncert::certify
