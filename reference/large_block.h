// Memory for large buffers: a block of 1 MiB or more is mapped anonymously, aligned to 2 MiB,
// advised to use transparent huge pages and faulted in by one call. On the project's machines
// (VMs) a 4 KiB page's first touch costs microseconds (0.3-5 GB/s, docs/performance.md): the
// reference's per-thread scratch (about 11 MB at 128 columns and K = 5,120) faulted in 4 KiB
// at a time was ~7 % of a 4-bit check's CPU in memset and as much again in the kernel.
// Smaller blocks come from operator new, and every block does under AddressSanitizer, so that it
// still sees overflows. Every block starts on a 64-byte boundary.
#pragma once

#include <cstddef>
#include <vector>

namespace ncert {

/// n bytes (zero-filled when mapped; uninitialized below 1 MiB); throws std::bad_alloc.
void* allocate_large_block(std::size_t n);
/// Releases a block from allocate_large_block(n), with the same n.
void free_large_block(void* block, std::size_t n) noexcept;

/// A std::allocator for vectors that may be large (LargeVector).
template <typename T>
struct LargeBlockAllocator {
  using value_type = T;
  LargeBlockAllocator() = default;
  template <typename U>
  LargeBlockAllocator(const LargeBlockAllocator<U>& /*other*/) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_large_block(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { free_large_block(p, n * sizeof(T)); }
  friend bool operator==(const LargeBlockAllocator& /*a*/, const LargeBlockAllocator& /*b*/) { return true; }
};

template <typename T>
using LargeVector = std::vector<T, LargeBlockAllocator<T>>;

}  // namespace ncert
