#include "certify/io/detail/page_buffer.h"

#include <sys/mman.h>

#include <utility>

namespace ncert::certify::detail {

PageBuffer::PageBuffer(PageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

PageBuffer::~PageBuffer() { release(); }

unsigned char* PageBuffer::reserve(std::size_t n) {
  if (n <= capacity_) return data_;
  release();
  void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  data_ = static_cast<unsigned char*>(m);
  capacity_ = n;
  return data_;
}

void PageBuffer::release() {
  if (data_) ::munmap(data_, capacity_);
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace ncert::certify::detail
