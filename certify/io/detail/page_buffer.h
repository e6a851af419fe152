// Internal to the dump reader: a reusable byte buffer whose pages the kernel maps in one call
// when it grows, for buffers of megabytes that are written whole before they are read (decoded
// chunks, row blocks). A std::vector zero-fills what it grows by, and each 4 KiB page then
// faults on its own: for compare's four 9.7 MB row windows over deflated logits that was 11 %
// of the CPU in memset and 15 % in page faults. Anonymous memory mapped with MAP_POPULATE
// arrives zeroed by the kernel, populated at once, and is not filled again.
#pragma once

#include <cstddef>

namespace ncert::certify::detail {

class PageBuffer {
 public:
  PageBuffer() = default;
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  ~PageBuffer();

  /// Room for `n` bytes at data(); what they hold is unspecified (the previous contents, or
  /// zeros where the buffer grew). Null when the system refuses the memory (n > 0).
  unsigned char* reserve(std::size_t n);
  unsigned char* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }
  /// Gives the memory back to the system.
  void release();

 private:
  unsigned char* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace ncert::certify::detail
