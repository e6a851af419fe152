#include "reference/large_block.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

#include "reference/address_sanitizer.h"

namespace ncert {

namespace {

/// From here on a block is mapped: below it operator new's pools serve better.
#if NCERT_ADDRESS_SANITIZER
constexpr std::size_t kMapped = SIZE_MAX;
#else
constexpr std::size_t kMapped = std::size_t{1} << 20;
#endif
/// A transparent huge page on x86-64: only a 2 MiB-aligned range of a mapping can become one.
constexpr std::size_t kHugePage = std::size_t{1} << 21;
/// Every block starts on a cache line, so that rows of a multiple of 64 bytes do too: a 64-byte
/// vector load across two lines costs two (the portable bf16 S kernel, reading rows of 4 KiB,
/// ran 75 GFLOP/s on them unaligned and 98 aligned).
constexpr std::align_val_t kLine{64};

std::size_t page_rounded(std::size_t n) {
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

}  // namespace

void* allocate_large_block(std::size_t n) {
  if (n < kMapped) return ::operator new(n, kLine);
  const std::size_t len = page_rounded(n);
  // Mapped 2 MiB longer, then trimmed to a 2 MiB-aligned start: the kernel aligns a mapping
  // itself only in some versions and for some lengths.
  void* m = ::mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  // The head before the first 2 MiB boundary and the tail after the block go back at once.
  const std::size_t head = (kHugePage - reinterpret_cast<std::uintptr_t>(m) % kHugePage) % kHugePage;
  char* block = static_cast<char*>(m) + head;
  if (head > 0) ::munmap(m, head);
  ::munmap(block + len, kHugePage - head);
  // Huge pages where the system grants them (transparent_hugepage = madvise), then every page
  // at once; either may be refused (an older kernel), and the pages then fault in as touched.
  (void)::madvise(block, len, MADV_HUGEPAGE);
  (void)::madvise(block, len, MADV_POPULATE_WRITE);
  return block;
}

void free_large_block(void* block, std::size_t n) noexcept {
  if (block == nullptr) return;
  if (n < kMapped) {
    ::operator delete(block, kLine);
  } else {
    ::munmap(block, page_rounded(n));
  }
}

}  // namespace ncert
