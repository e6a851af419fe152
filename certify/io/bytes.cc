#include "certify/io/bytes.h"

#include <sys/mman.h>

#include <cstdint>

namespace ncert::certify::detail {

namespace {
/// From here on a block is mapped: below it operator new's pools serve better. Under
/// AddressSanitizer every block comes from operator new, so that it still sees overflows.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kMapped = SIZE_MAX;
#else
constexpr std::size_t kMapped = std::size_t{1} << 20;
#endif
}  // namespace

void* allocate_bytes(std::size_t n) {
  if (n < kMapped) return ::operator new(n);
  void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  // Huge pages where the system grants them (transparent_hugepage = madvise), then every page
  // at once; either may be refused (an older kernel), and the pages then fault in as read.
  (void)::madvise(m, n, MADV_HUGEPAGE);
  (void)::madvise(m, n, MADV_POPULATE_WRITE);
  return m;
}

void release_bytes(void* p, std::size_t n) noexcept {
  if (p == nullptr) return;
  if (n < kMapped) {
    ::operator delete(p);
  } else {
    ::munmap(p, n);
  }
}

}  // namespace ncert::certify::detail
